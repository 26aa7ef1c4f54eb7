"""python -m raydistill.sweep SPACE: Ray Tune + Optuna (TPE) + ASHA over distillation runs.

This module is the command: flags, the space and the base config checked before Ray starts, resume state, then
``orchestrate.tuner.run_sweep`` (each trial one distillation run, an MLflow child run under one parent per sweep), the
confirmation of the top trials with more seeds (``orchestrate.confirm``), the labels-only control
(``orchestrate.control``, judged by ``results.control``) and ``summary.finish`` (summary table, Pareto
plot), then one JSON object — the best trial — as the last line of stdout. Trials are chosen on a validation split
carved from the training rows (``best_val_*``) and reported on dev (``best_eval_*``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

from raydistill.commands.args import teacher_cache_dir
from raydistill.commands.cli import HelpFormatter, Parser, cli
from raydistill.common.errors import check
from raydistill.orchestrate import repeat
from raydistill.orchestrate.resources import DEFAULT_CPUS_PER_WORKER
from raydistill.orchestrate.sweep import SECOND_OBJECTIVE, Sweep, log, state_path

TEACHER_EPOCHS, TEACHER_LR = 3, 2e-5  # the in-sweep teacher fine-tune: raydistill.finetune's defaults


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
        default=1.0,
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

    for flag, kind in (
        ("epochs", int),
        ("max-steps", int),
        ("train-limit", int),
        ("eval-limit", int),
        ("max-length", int),
        ("batch-size", int),
        ("seed", int),
        ("lr", float),
    ):
        p.add_argument(
            f"--{flag}",
            type=kind,
            help=f"as in raydistill.distill (default: the space's train."
            f"{flag.replace('-', '_')}, else raydistill.distill's)",
        )
    add_selection_args(p, None)
    p.add_argument(
        "--teacher-epochs",
        type=int,
        default=TEACHER_EPOCHS,
        help="epochs of the teacher's fine-tune when "
        "--teacher has no task head (on all training rows, whatever the trials' --max-steps/--train-limit; "
        f"default {TEACHER_EPOCHS})",
    )
    p.add_argument(
        "--teacher-lr",
        type=float,
        default=TEACHER_LR,
        help=f"learning rate of that fine-tune (default {TEACHER_LR:g}, raydistill.finetune's)",
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
    p.add_argument("--placement-strategy", default="PACK", help="PACK or SPREAD a trial's workers over nodes")
    p.add_argument(
        "--max-failures",
        type=int,
        default=1,
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
    """The sweep these flags describe, run to its end: the best trial as ``main`` prints it (``raydistill.api``'s
    ``run_sweep`` runs the same). Bad input is a UserError before Ray starts."""
    a, argv, state = _arguments(list(sys.argv[1:] if argv is None else argv))
    # every check that needs no Ray: nothing is logged before it passes
    sweep = Sweep.plan(a, argv, state, teacher_cache_dir(a))
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


def _arguments(argv: list[str]) -> tuple[argparse.Namespace, list[str], dict[str, Any]]:
    """The flags, and for ``--resume`` the sweep as it was started (same space, flags, resources and concurrency)
    with the state it recorded."""
    a = parser().parse_args(argv)
    state: dict[str, Any] = {}
    if a.resume:
        check(bool(a.name), "name", "--resume needs the --name of the sweep to continue")
        path = state_path(a.storage_path, a.name)
        check(
            os.path.isfile(path),
            "resume",
            f"no sweep {a.name!r} under {os.path.dirname(os.path.dirname(path))}; check --name and --storage-path",
        )
        with open(path) as f:
            state = json.load(f)
        argv = state["argv"]
        a = parser().parse_args(
            argv + ["--resume", "--name", a.name] + (["--storage-path", a.storage_path] if a.storage_path else [])
        )
    check(
        bool(a.space),
        "space",
        "name a search space (python -m raydistill.sweep pkd_glue; a YAML path works too), "
        "or continue a sweep with --resume --name NAME",
    )
    return a, argv, state


if __name__ == "__main__":
    main()
