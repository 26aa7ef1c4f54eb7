"""python -m raydistill.distill: one distillation run, in this process (one worker) or as a Ray Train TorchTrainer job
with N DDP workers.

The last line of stdout is one JSON object with the final dev metrics (keys ``eval_*``).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
from dataclasses import dataclass, field
from typing import Any, ClassVar

from raydistill.commands.args import (
    DATA_DIR,
    EXPERIMENT,
    TRACKING_URI,
    add_teacher_args,
    add_train_args,
    local_abspath,
    task_flag,
    teacher_cache_dir,
)
from raydistill.commands.cli import HelpFormatter, Parser, add_overwrite, cli
from raydistill.commands.flags import (
    LAYER_FLAGS,
    LOSS_FLAGS,
    SELECTION_FLAGS,
    TRAIN_FLAGS,
    add_fields,
    data_of,
    flag,
    request_from,
    section,
)
from raydistill.common.errors import RunFailed
from raydistill.common.interrupts import resume_hint
from raydistill.config.schema import DistillConfig, RunConfig, StudentConfig
from raydistill.orchestrate.request import FP32_TEACHER, INJECT_FAULT, SWITCH, TEACHER_CACHE, TEACHER_CACHE_GB
from raydistill.tasks.filedata import FileData

DESCRIPTION = (
    "One distillation run: a student learns from a fine-tuned teacher on a task (--task general: general "
    "distillation on raw text from --unlabeled-text). One worker trains in this process, with no Ray started; "
    "--num-workers data-parallel workers, restarts (--max-failures), a cluster (RAY_ADDRESS) or --ray-train train on "
    "Ray Train. It logs to MLflow, writes the best epoch's student to --output, and prints its scores as one "
    "JSON object on the last line of stdout. Bad input is refused before anything starts. A run stopped after a "
    "finished epoch (Ctrl-C, a failure, a machine's end) goes on from that epoch when the same command is given "
    "again (kept in OUTPUT.resume until it ends)."
)


SIZES = "a number, a fraction of the teacher's (0.5) or 'teacher'"


@dataclass(frozen=True)
class DistillRequest:
    """What one distillation run is asked to do: the distill command's flags as typed values, built from its command
    line (``request_of``) or by ``raydistill.api.run_distill`` directly. ``train`` and ``distill``: the values of the
    train and distill fields set (the command sets every one; a field left out takes its config's default, the
    flag's own); ``teacher_cache``: the cache's folder (None: no cache). A field with ``help`` in its metadata is a
    flag of the command, generated from it."""

    method: str = field(
        default="",
        metadata=flag(
            "kd | distilbert | tinybert | pkd | two_stage | minilm | finetune (python -m raydistill list methods)",
            required=True,
        ),
    )
    teacher: str = field(
        default="",
        metadata=flag(
            "fine-tuned teacher: a model folder (config.json + weights, as python -m raydistill.finetune writes) or a "
            "hub name",
            required=True,
        ),
    )
    task: str | None = field(default=None, metadata=task_flag(general=True))
    data_dir: str | None = field(default=None, metadata=DATA_DIR)
    data: FileData = field(default_factory=FileData)  # the user's files or dataset (empty: a built-in task)
    train: tuple[tuple[str, Any], ...] = ()
    distill: tuple[tuple[str, Any], ...] = ()
    tracking_uri: str | None = field(default=None, metadata=TRACKING_URI)
    experiment: str = field(default="raydistill", metadata=EXPERIMENT)
    # the student's sizes: a number, a fraction of the teacher's or 'teacher' (as the flags say)
    student_layers: str | None = field(default=None, metadata=flag(f"{SIZES} (default: half the teacher's depth)"))
    student_hidden: str | None = field(default=None, metadata=flag(f"{SIZES} (default: the teacher's width)"))
    student_intermediate: str | None = field(
        default=None,
        metadata=flag(
            "a number, 'teacher' or 'auto' (default: auto, the teacher's intermediate/hidden ratio × hidden)"
        ),
    )
    student_heads: str | None = field(
        default=None,
        metadata=flag(
            "a number, 'teacher', 'auto' (default: the teacher's head count when it divides hidden) or "
            "'keep_head_size' (hidden / the teacher's head size)"
        ),
    )
    init: str = field(
        default=StudentConfig.init,
        metadata=flag(
            "random | first_k | every_other | uniform | layers:1,3,5 | slice | prune[:N|block|block,N] | "
            "checkpoint:DIR (python -m raydistill list inits; default: the method's: pkd first_k, distilbert "
            "every_other, minilm slice, others random)"
        ),
    )
    num_workers: int = field(
        default=1,
        metadata=flag(
            "data-parallel (DDP) workers on Ray Train (1: trained in this process, unless Ray Train is asked for)"
        ),
    )
    use_gpu: bool = field(default=False, metadata=flag("one GPU per worker", **SWITCH))
    cpus_per_worker: float | None = field(
        default=None,
        metadata=flag(
            "CPUs (and torch threads) per CPU worker (default: a run in this process takes torch's threads, the "
            "machine's cores unless OMP_NUM_THREADS says otherwise; a Ray Train worker 1)"
        ),
    )
    max_failures: int = field(
        default=0,
        metadata=flag(
            "worker failures to recover from a checkpoint (above 0: on Ray Train, which restarts the workers)"
        ),
    )
    ray_train: bool = field(
        default=False,
        metadata=flag(
            "train on Ray Train even with one worker (always so with --num-workers above 1, --max-failures above 0, "
            "RAY_ADDRESS set or a remote --storage-path); without it one worker trains in this process, no Ray "
            "started",
            **SWITCH,
        ),
    )
    augment_dir: str | None = field(
        default=None,
        metadata=flag(
            "train on the augmented rows in DIR/train.jsonl, written by python -m raydistill.distill.augment "
            "(default: the task's own training rows)"
        ),
    )
    unlabeled_text: str | None = field(
        default=None,
        metadata=flag("--task general: the corpus, a text file with one text per line (default: none)"),
    )
    output: str = field(default="outputs/student", metadata=flag("folder to write the student to"))
    overwrite: bool = False  # its flag: cli.add_overwrite, every writing command's
    storage_path: str | None = field(
        default=None,
        metadata=flag(
            "folder or s3:// URI of the run's checkpoints (Ray Train's results; default ./raydistill-results/ray)"
        ),
    )
    run_name: str | None = field(default=None, metadata=flag("MLflow run name (default: METHOD-TASK-SIZE-time)"))
    teacher_cache: str | None = field(default=None, metadata=TEACHER_CACHE)  # the folder (None: no cache)
    teacher_cache_gb: float = field(default=RunConfig.teacher_cache_gb, metadata=TEACHER_CACHE_GB)
    fp32_teacher: bool = field(default=False, metadata=FP32_TEACHER)
    placement_strategy: str = field(default="PACK", metadata=flag("PACK or SPREAD the DDP workers over nodes"))
    verbose: bool = field(default=False, metadata=flag("Ray Train's own progress lines too", **SWITCH))
    inject_fault: str = field(default="", metadata=INJECT_FAULT)  # test hook, see RunConfig.fault
    result_writer: ClassVar[str] = "raydistill distill"  # the command its result folder's marker names


D = DistillRequest()  # the flags' defaults: the request's own
# the request's flags in --help's order, between the shared ones: the student's, then the run's resources and data
STUDENT = ("student_layers", "student_hidden", "student_intermediate", "student_heads", "init")
RESOURCES = (
    "num_workers",
    "use_gpu",
    "cpus_per_worker",
    "max_failures",
    "ray_train",
    "augment_dir",
    "unlabeled_text",
    "output",
)


def parser() -> Parser:
    p = Parser(prog="python -m raydistill.distill", description=DESCRIPTION, formatter_class=HelpFormatter)
    add_fields(p, DistillRequest, ("method", "teacher"), D)
    add_train_args(p, D)
    # in --help's order
    add_fields(p, DistillRequest, STUDENT, D)
    d = DistillConfig()
    _add_loss_weight_args(p, d)
    _add_layer_args(p, d)
    _add_run_args(p)
    return p


def _add_loss_weight_args(p: Parser, d: DistillConfig) -> None:
    """The soft loss's temperature and the weights of the losses a method combines."""
    add_fields(p, DistillConfig, LOSS_FLAGS, d)


def _add_layer_args(p: Parser, d: DistillConfig) -> None:
    """Which teacher layers the intermediate losses read, the stages, and MiniLM's relations."""
    add_fields(p, DistillConfig, LAYER_FLAGS, d)


def _add_run_args(p: Parser) -> None:
    """Workers and recovery, the data beyond the task's own rows, where the student and the run go."""
    add_fields(p, DistillRequest, RESOURCES, D)
    add_overwrite(p, "raydistill distill")
    add_fields(p, DistillRequest, ("storage_path", "run_name"), D)
    add_teacher_args(p, D)
    add_fields(p, DistillRequest, ("placement_strategy", "verbose", "inject_fault"), D)


def request_of(a: argparse.Namespace) -> DistillRequest:
    """The request the parsed flags make: the data (``FileData``'s flags), every train and distill field's flag, the
    teacher cache's folder."""
    made: dict[str, Any] = {
        "data": data_of(a),
        "train": tuple(section(a, TRAIN_FLAGS + SELECTION_FLAGS).items()),
        "distill": tuple(section(a, LOSS_FLAGS + LAYER_FLAGS).items()),
        "teacher_cache": teacher_cache_dir(a.teacher_cache, a.no_teacher_cache),
    }
    return request_from(DistillRequest, a, **made)


def student_sizes(r: DistillRequest) -> dict:
    """The student's sizes in numbers: relative ones (and the defaults) resolved against the teacher's config."""
    from raydistill.config.sizes import Shape, resolve
    from raydistill.train.preflight import teacher_config

    raw = {k: getattr(r, f"student_{k}") for k in ("layers", "hidden", "intermediate", "heads")}
    for k, v in raw.items():
        if v is not None and str(v).strip().isdigit():
            raw[k] = int(v)
    if r.init and r.init.startswith("checkpoint:") or all(isinstance(v, int) for v in raw.values()):
        return {k: v if isinstance(v, int) else getattr(StudentConfig(), k) for k, v in raw.items()}
    return resolve(raw, Shape.of(teacher_config(local_abspath(r.teacher))))


def config_of(r: DistillRequest) -> RunConfig:
    """The run's config: the request's sections, paths made absolute (the workers run elsewhere)."""
    return RunConfig.from_dict(
        dict(
            task=r.task,
            teacher=local_abspath(r.teacher),
            data_dir=local_abspath(r.data_dir),
            data=r.data,
            output=os.path.abspath(r.output),
            student={**student_sizes(r), "init": r.init},
            distill={"method": r.method, **dict(r.distill)},
            train={**dict(r.train), **_resources(r)},
            tracking_uri=r.tracking_uri,
            experiment=r.experiment,
            run_name=r.run_name,
            augment_dir=local_abspath(r.augment_dir),
            fault=r.inject_fault,
            teacher_cache=r.teacher_cache,
            teacher_cache_gb=r.teacher_cache_gb,
            unlabeled_text=os.path.abspath(r.unlabeled_text) if r.unlabeled_text else None,
        )
    )


def _resources(r: DistillRequest) -> dict[str, Any]:
    """The train fields the run's resources set: its workers, the GPU, the teacher's precision."""
    return {"num_workers": r.num_workers, "use_gpu": r.use_gpu, "teacher_bf16": not r.fp32_teacher}


def config_from_args(a: argparse.Namespace) -> RunConfig:
    """The run's config of parsed flags (``config_of`` their request)."""
    return config_of(request_of(a))


@cli
def main(argv=None) -> dict:
    try:
        out = run(argv)
    except RunFailed as e:  # the run failed; its MLflow run already records why
        from raydistill.orchestrate.guard import lost, say

        line = lost(e.__cause__)
        if line:
            say(line)  # the guardian, should Ray end this process before its goodbye, does not print it again
        else:
            print(f"error: {e}", file=sys.stderr, flush=True)
        raise SystemExit(1) from None
    print(json.dumps({k: v for k, v in out.items()}), flush=True)
    return out


def run(argv=None) -> dict:
    """The run these flags describe, trained to its end: its scores as ``main`` prints them. Bad input is a UserError
    before Ray starts; a run that fails, ``RunFailed``."""
    request = request_of(parser().parse_args(argv))
    # Ctrl-C: the same command goes on from the run's last finished epoch (orchestrate.resume)
    resume_hint(shlex.join(["python", "-m", "raydistill.distill", *(sys.argv[1:] if argv is None else argv)]))
    return execute(request)


def execute(r: DistillRequest) -> dict:
    """The run ``r`` asks for, trained to its end (``raydistill.api.run_distill`` runs the same from the request it
    builds): every check that needs no Ray, then ``orchestrate.single.run_one``."""
    from raydistill.orchestrate.resume import check_record_folder
    from raydistill.train.preflight import check_ray_options, preflight

    check_ray_options(r.placement_strategy, r.max_failures, r.cpus_per_worker)
    check_record_folder(r.output)  # a user's OUTPUT.resume: refused before anything loads, --overwrite or not
    cfg = config_of(r)
    if not os.environ.get("RAY_ADDRESS"):  # the local Ray this command starts has this machine's GPUs, or none
        from raydistill.train.precision import run_device

        run_device(cfg.train)  # --use-gpu where torch sees no GPU: refused here, not a worker waiting for ever
    cfg = preflight(cfg)
    from raydistill.tasks.files import report

    report()  # the columns guessed in the user's files, once the checks passed
    from raydistill.common.paths import storage_location
    from raydistill.orchestrate.run import RunOptions
    from raydistill.orchestrate.single import run_one

    storage = storage_location(r.storage_path)  # a URI as given, a folder made absolute
    opts = RunOptions(r.max_failures, r.placement_strategy, r.cpus_per_worker, verbose=r.verbose)
    return run_one(cfg, storage, opts, ray_train=r.ray_train)


if __name__ == "__main__":
    main()
    sys.exit(0)
