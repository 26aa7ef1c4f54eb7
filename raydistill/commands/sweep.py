"""python -m raydistill.sweep SPACE: Ray Tune + Optuna (TPE) + ASHA over distillation runs.

This module is the command: flags, the space and the base config checked before Ray starts, resume state, then
``orchestrate.tuner.run_trials`` (each trial one distillation run, an MLflow child run under one parent per sweep), the
confirmation of the top trials with more seeds (``orchestrate.confirm``), the labels-only control
(``orchestrate.control``, judged by ``results.control``) and ``summary.finish`` (summary table, Pareto
plot), then one JSON object — the best trial — as the last line of stdout. Trials are chosen on a validation split
carved from the training rows (``best_val_*``) and reported on dev (``best_eval_*``).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
from typing import Any

from raydistill.commands.args import teacher_cache_dir
from raydistill.commands.cli import HelpFormatter, Parser, cli
from raydistill.commands.flags import SELECTION_FLAGS, SWEEP_TRAIN_FLAGS, data_of, request_from
from raydistill.common.errors import check
from raydistill.orchestrate import repeat
from raydistill.orchestrate.request import SweepRequest
from raydistill.orchestrate.resources import DEFAULT_CPUS_PER_WORKER
from raydistill.orchestrate.sweep import SECOND_OBJECTIVE, Sweep, log, state_path

D = SweepRequest()  # the flags' defaults: the request's own


def parser():
    p = Parser(
        prog="python -m raydistill.sweep",
        formatter_class=HelpFormatter,
        description=(
            "Search a space of distillation runs (Ray Tune, Optuna TPE, ASHA). Each trial is one distillation run "
            "logged "
            "to MLflow; a one-worker trial (CPU or GPU) trains in its Tune trial process, one with several workers, or "
            "on a "
            "cluster, on Ray Train. Trials are chosen on a validation split carved from the training rows and reported "
            "on "
            "dev. Prints a summary table and the best trial as one JSON object on the last line of stdout."
        ),
    )
    # in --help's order: what is searched, the resources, the trials' training, the sweep's own bookkeeping
    _add_space_args(p)
    _add_resource_args(p)
    _add_train_overrides(p)
    _add_sweep_args(p)
    return p


def _add_space_args(p: Parser) -> None:
    """The space and what it is searched on: task, data, teacher."""
    p.add_argument(
        "space",
        nargs="?",
        help="a named space shipped with the package (python -m raydistill list "
        "spaces) or a YAML path (default with --resume: the sweep's own)",
    )
    p.add_argument(
        "--task",
        help="labelled task to distil on (default: the space's task; general distillation runs "
        "through python -m raydistill.distill)",
    )
    p.add_argument(
        "--data-dir",
        help="local data folder: the GLUE root or the task's own folder (default: the "
        "space's, else the Hugging Face hub)",
    )
    p.add_argument(
        "--teacher",
        help="fine-tuned teacher folder, or a pretrained encoder to fine-tune first "
        "(default: the space's teacher, else bert-base-uncased)",
    )
    from raydistill.commands.args import add_data_args

    add_data_args(p)


def _add_resource_args(p: Parser) -> None:
    """How many trials, and the workers, CPUs and GPUs each gets."""
    p.add_argument("--num-samples", type=int, help="trials (default: the space's num_samples)")
    p.add_argument("--num-workers", type=int, help="DDP workers per trial (default: the space's num_workers, else 1)")
    p.add_argument(
        "--max-concurrent",
        type=int,
        help="cap on trials running at once (default: as many as the cluster's CPUs and GPUs hold)",
    )
    p.add_argument("--use-gpu", action="store_true", help="give every worker a GPU (--gpus-per-worker)")
    p.add_argument(
        "--gpus-per-worker",
        type=float,
        default=D.gpus_per_worker,
        help="GPUs per worker with --use-gpu; a fraction such as 0.5 packs small trials on one GPU",
    )
    p.add_argument(
        "--cpus-per-worker",
        type=float,
        help="CPUs (and torch threads) per worker (default "
        f"{DEFAULT_CPUS_PER_WORKER:g}: on a small CPU machine more trials at once beat more threads each)",
    )


def _add_train_overrides(p: Parser) -> None:
    """distill's training flags, each overriding the space's value (no defaults of their own), and the in-sweep
    teacher fine-tune's."""
    from raydistill.commands.args import add_selection_args
    from raydistill.commands.flags import add_overrides

    add_overrides(p, SWEEP_TRAIN_FLAGS)
    add_selection_args(p, None)
    p.add_argument(
        "--teacher-epochs",
        type=int,
        default=D.teacher_epochs,
        help="epochs of the teacher's fine-tune when "
        "--teacher has no task head (on all training rows, whatever the trials' --max-steps/--train-limit; "
        f"default {D.teacher_epochs})",
    )
    p.add_argument(
        "--teacher-lr",
        type=float,
        default=D.teacher_lr,
        help=f"learning rate of that fine-tune (default {D.teacher_lr:g}, raydistill.finetune's)",
    )


def _add_sweep_args(p: Parser) -> None:
    """Where the sweep logs and keeps its trials, its name and resume, overrides, objectives, Ray's knobs."""
    from raydistill.commands.args import add_teacher_args

    p.add_argument("--tracking-uri", help="MLflow URI (default: sqlite under ./raydistill-results)")
    p.add_argument(
        "--experiment",
        help="MLflow experiment (default: SPACE-TASK, e.g. pkd_glue-rte; your own data: the file's name, "
        "pkd_glue-reviews for reviews.csv)",
    )
    p.add_argument("--storage-path", help="Ray results folder or s3:// URI (default ./raydistill-results/ray)")
    p.add_argument("--name", help="sweep run name (default: SPACE-TASK-timestamp)")
    p.add_argument("--resume", action="store_true", help="continue the sweep --name in --storage-path")
    p.add_argument(
        "--rerun",
        action="store_true",
        help="train a new sweep even where a finished sweep of the experiment had identical inputs (space, flags, "
        "teacher, data), whose result is otherwise printed again, nothing trained",
    )
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a field of the space, "
        "e.g. --set student.layers=4 or --set 'distill.temperature={loguniform: [1, 8]}'; repeatable "
        "(default: none)",
    )
    p.add_argument(
        "--multi-objective",
        nargs="?",
        const="params",
        choices=sorted(SECOND_OBJECTIVE),
        help="optimise the dev score and the student's size (params, the default) or its measured batch-1 "
        "latency on this machine (latency): Optuna's multi-objective TPE, the Pareto front in the summary",
    )
    p.add_argument("--verbose", action="store_true", help="Ray Tune's and Ray Train's own progress lines too")
    p.add_argument(
        "--placement-strategy", default=D.placement_strategy, help="PACK or SPREAD a trial's workers over nodes"
    )
    p.add_argument(
        "--max-failures",
        type=int,
        default=D.max_failures,
        help="failures each trial recovers from (a worker lost, a trial process restarted)",
    )
    p.add_argument(
        "--ray-train-trials",
        action="store_true",
        help="run every trial on Ray Train, even a 1-worker trial (CPU or GPU) on a local Ray, which by default "
        "trains in its Tune trial process, skipping Ray Train's start-up",
    )
    add_teacher_args(p)
    p.add_argument("--inject-fault", default="", help=argparse.SUPPRESS)  # test hook, see RunConfig.fault


# ------------------------------------------------------------------ main
@cli
def main(argv: list[str] | None = None) -> dict[str, Any]:
    out = run(argv)
    print(json.dumps(out, default=str), flush=True)  # the best trial, the last line of stdout
    return out


def run(argv: list[str] | None = None) -> dict[str, Any]:
    """The sweep these flags describe, run to its end: the best trial as ``main`` prints it. Bad input is a UserError
    before Ray starts."""
    return execute(*_arguments(list(sys.argv[1:] if argv is None else argv)))


def execute(request: SweepRequest, state: dict[str, Any] | None = None) -> dict[str, Any]:
    """The sweep ``request`` asks for (``state``: a resumed sweep's record; ``resumed`` reads it): the best trial.
    ``raydistill.api.run_sweep`` runs the same from the request it builds."""
    # every check that needs no Ray: nothing is logged before it passes
    sweep = Sweep.plan(request, state or {})
    from raydistill.tasks.files import report

    report()  # the columns guessed in the user's files, once the checks passed
    again = repeat.reuse(sweep, log)  # identical inputs to a finished sweep: its result, nothing trained
    if again is not None:
        return again
    sweep.start()
    repeat.record(sweep)
    sweep.prepare()
    rows, run_ids = sweep.search()
    rows, run_ids, confirmed = sweep.confirm(rows, run_ids)
    control = sweep.control(rows, run_ids, confirmed)
    out = sweep.finish(rows, run_ids, confirmed, control)
    repeat.keep(sweep, out)
    return out


def request_of(a: argparse.Namespace) -> SweepRequest:
    """The request the parsed flags make: the space's overrides read (``--set``), the data (``FileData``'s flags),
    the train flags given, the teacher cache's folder."""
    from raydistill.config.space import parse_override

    made: dict[str, Any] = {
        "overrides": tuple(parse_override(o) for o in a.set),
        "data": data_of(a),
        "train": tuple((n, getattr(a, n)) for n in SWEEP_TRAIN_FLAGS + SELECTION_FLAGS if getattr(a, n) is not None),
        "teacher_cache": teacher_cache_dir(a.teacher_cache, a.no_teacher_cache),
    }
    return request_from(SweepRequest, a, **made)


def resumed(request: SweepRequest) -> tuple[SweepRequest, dict[str, Any]]:
    """For ``resume``: the sweep ``request.name`` as it was started (same space, flags, resources) with the state it
    recorded; this request's storage path kept. A sweep an older raydistill started recorded its command line."""
    check(bool(request.name), "name", "--resume needs the --name of the sweep to continue")
    path = state_path(request.storage_path, request.name or "")
    check(
        os.path.isfile(path),
        "resume",
        f"no sweep {request.name!r} under {os.path.dirname(os.path.dirname(path))}; check --name and --storage-path",
    )
    with open(path) as f:
        state = json.load(f)
    if "request" in state:
        started = SweepRequest.of_record(state["request"])
    else:
        started = request_of(parser().parse_args(state["argv"]))
    again = dataclasses.replace(started, resume=True, name=request.name, storage_path=request.storage_path)
    return again, state


def _arguments(argv: list[str]) -> tuple[SweepRequest, dict[str, Any]]:
    """The request of the flags, and for ``--resume`` the sweep as it was started with the state it recorded."""
    return settled(request_of(parser().parse_args(argv)))


def settled(request: SweepRequest) -> tuple[SweepRequest, dict[str, Any]]:
    """The request as it runs: for ``resume``, the sweep as it was started with the state it recorded; a space
    named."""
    state: dict[str, Any] = {}
    if request.resume:
        request, state = resumed(request)
    check(
        bool(request.space),
        "space",
        "name a search space (python -m raydistill.sweep pkd_glue; a YAML path works too), "
        "or continue a sweep with --resume --name NAME",
    )
    return request, state


if __name__ == "__main__":
    main()
