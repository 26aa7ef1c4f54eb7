"""python -m raydistill.distill: one distillation run, in this process (one worker) or as a Ray Train TorchTrainer job
with N DDP workers.

The last line of stdout is one JSON object with the final dev metrics (keys ``eval_*``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import dataclass, field
from typing import Any, ClassVar

from raydistill.commands.args import add_teacher_args, add_train_args, local_abspath, teacher_cache_dir
from raydistill.commands.cli import HelpFormatter, Parser, add_overwrite, cli
from raydistill.commands.flags import (
    LAYER_FLAGS,
    LOSS_FLAGS,
    SELECTION_FLAGS,
    TRAIN_FLAGS,
    add_fields,
    data_of,
    request_from,
    section,
)
from raydistill.common.errors import RunFailed
from raydistill.config.schema import DistillConfig, RunConfig, StudentConfig
from raydistill.tasks.filedata import FileData

DESCRIPTION = (
    "One distillation run: a student learns from a fine-tuned teacher on a task (--task general: general "
    "distillation on raw text from --unlabeled-text). One worker trains in this process, with no Ray started; "
    "--num-workers data-parallel workers, restarts (--max-failures), a cluster (RAY_ADDRESS) or --ray-train train on "
    "Ray Train. It logs to MLflow, writes the best epoch's student to --output, and prints its scores as one "
    "JSON object on the last line of stdout. Bad input is refused before anything starts."
)


@dataclass(frozen=True)
class DistillRequest:
    """What one distillation run is asked to do: the distill command's flags as typed values, built from its command
    line (``request_of``) or by ``raydistill.api.run_distill`` directly. ``train`` and ``distill``: the values of the
    train and distill fields set (the command sets every one; a field left out takes its config's default, the
    flag's own); ``teacher_cache``: the cache's folder (None: no cache)."""

    method: str = ""
    teacher: str = ""
    task: str | None = None
    data_dir: str | None = None
    data: FileData = field(default_factory=FileData)  # the user's files or dataset (empty: a built-in task)
    train: tuple[tuple[str, Any], ...] = ()
    distill: tuple[tuple[str, Any], ...] = ()
    tracking_uri: str | None = None
    experiment: str = "raydistill"
    student_layers: str | None = None  # a number, a fraction of the teacher's or 'teacher' (as the flags say)
    student_hidden: str | None = None
    student_intermediate: str | None = None
    student_heads: str | None = None
    init: str = StudentConfig.init
    num_workers: int = 1
    use_gpu: bool = False
    max_failures: int = 0
    ray_train: bool = False
    augment_dir: str | None = None
    unlabeled_text: str | None = None
    output: str = "outputs/student"
    overwrite: bool = False
    storage_path: str | None = None
    run_name: str | None = None
    teacher_cache: str | None = None
    teacher_cache_gb: float = RunConfig.teacher_cache_gb
    fp32_teacher: bool = False
    placement_strategy: str = "PACK"
    verbose: bool = False
    inject_fault: str = ""  # test hook, see RunConfig.fault
    result_writer: ClassVar[str] = "raydistill distill"  # the command its result folder's marker names


D = DistillRequest()  # the flags' defaults: the request's own


def parser() -> Parser:
    p = Parser(prog="python -m raydistill.distill", description=DESCRIPTION, formatter_class=HelpFormatter)
    p.add_argument(
        "--method",
        required=True,
        help="kd | distilbert | tinybert | pkd | two_stage | minilm | finetune (python -m raydistill list methods)",
    )
    p.add_argument(
        "--teacher",
        required=True,
        help="fine-tuned teacher: a model folder (config.json + weights, as "
        "python -m raydistill.finetune writes) or a hub name",
    )
    add_train_args(p)
    # in --help's order
    _add_student_args(p)
    d = DistillConfig()
    _add_loss_weight_args(p, d)
    _add_layer_args(p, d)
    _add_run_args(p)
    return p


def _add_student_args(p: Parser) -> None:
    """The student's sizes (absolute or relative to the teacher's) and how its weights start."""
    sizes = "a number, a fraction of the teacher's (0.5) or 'teacher'"
    p.add_argument("--student-layers", default=None, help=f"{sizes} (default: half the teacher's depth)")
    p.add_argument("--student-hidden", default=None, help=f"{sizes} (default: the teacher's width)")
    p.add_argument(
        "--student-intermediate",
        default=None,
        help="a number, 'teacher' or 'auto' (default: auto, the teacher's intermediate/hidden ratio × hidden)",
    )
    p.add_argument(
        "--student-heads",
        default=None,
        help="a number, 'teacher', 'auto' (default: the "
        "teacher's head count when it divides hidden) or 'keep_head_size' (hidden / the teacher's head size)",
    )
    p.add_argument(
        "--init",
        default=D.init,
        help="random | first_k | every_other | uniform | layers:1,3,5 | slice | "
        "prune[:N|block|block,N] | checkpoint:DIR (python -m raydistill list inits; default: the method's: pkd "
        "first_k, distilbert "
        "every_other, minilm slice, others random)",
    )


def _add_loss_weight_args(p: Parser, d: DistillConfig) -> None:
    """The soft loss's temperature and the weights of the losses a method combines."""
    add_fields(p, DistillConfig, LOSS_FLAGS, d)


def _add_layer_args(p: Parser, d: DistillConfig) -> None:
    """Which teacher layers the intermediate losses read, the stages, and MiniLM's relations."""
    add_fields(p, DistillConfig, LAYER_FLAGS, d)


def _add_run_args(p: Parser) -> None:
    """Workers and recovery, the data beyond the task's own rows, where the student and the run go."""
    p.add_argument(
        "--num-workers",
        type=int,
        default=D.num_workers,
        help="data-parallel (DDP) workers on Ray Train (1: trained in this process, unless Ray Train is asked for)",
    )
    p.add_argument("--use-gpu", action="store_true", help="one GPU per worker")
    p.add_argument(
        "--max-failures",
        type=int,
        default=D.max_failures,
        help="worker failures to recover from a checkpoint (above 0: on Ray Train, which restarts the workers)",
    )
    p.add_argument(
        "--ray-train",
        action="store_true",
        help="train on Ray Train even with one worker (always so with --num-workers above 1, --max-failures above 0, "
        "RAY_ADDRESS set or a remote --storage-path); without it one worker trains in this process, no Ray started",
    )
    p.add_argument(
        "--augment-dir",
        default=None,
        help="train on the augmented rows in DIR/train.jsonl, written by "
        "python -m raydistill.distill.augment (default: the task's own training rows)",
    )
    p.add_argument(
        "--unlabeled-text",
        default=None,
        help="--task general: the corpus, a text file with one text per line (default: none)",
    )
    p.add_argument("--output", default=D.output, help="folder to write the student to")
    add_overwrite(p, "raydistill distill")
    p.add_argument(
        "--storage-path",
        default=None,
        help="folder or s3:// URI of the run's checkpoints (Ray Train's results; default ./raydistill-results/ray)",
    )
    p.add_argument("--run-name", default=None, help="MLflow run name (default: METHOD-TASK-SIZE-time)")
    add_teacher_args(p)
    p.add_argument(
        "--placement-strategy", default=D.placement_strategy, help="PACK or SPREAD the DDP workers over nodes"
    )
    p.add_argument("--verbose", action="store_true", help="Ray Train's own progress lines too")
    p.add_argument("--inject-fault", default="", help=argparse.SUPPRESS)  # test hook, see RunConfig.fault


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
    return execute(request_of(parser().parse_args(argv)))


def execute(r: DistillRequest) -> dict:
    """The run ``r`` asks for, trained to its end (``raydistill.api.run_distill`` runs the same from the request it
    builds): every check that needs no Ray, then ``orchestrate.single.run_one``."""
    from raydistill.train.preflight import check_ray_options, preflight

    check_ray_options(r.placement_strategy, r.max_failures)
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
    opts = RunOptions(max_failures=r.max_failures, placement_strategy=r.placement_strategy, verbose=r.verbose)
    return run_one(cfg, storage, opts, ray_train=r.ray_train)


if __name__ == "__main__":
    main()
    sys.exit(0)
