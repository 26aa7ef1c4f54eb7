"""python -m raydistill.sweep SPACE: Ray Tune + Optuna (TPE) + ASHA over distillation runs.

This module is the command: flags, the space and the base config checked before Ray starts, resume state, then
``orchestrate.tuner.run_trials`` (each trial one distillation run, an MLflow child run under one parent per sweep), the
confirmation of the top trials with more seeds (``orchestrate.confirm``), the labels-only control
(``orchestrate.control``, judged by ``results.verdict``) and ``summary.finish`` (summary table, Pareto
plot), then one JSON object — the best trial — as the last line of stdout. Trials are chosen on a validation split
carved from the training rows (``best_val_*``) and reported on dev (``best_eval_*``).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import sys
from typing import Any

from raydistill.commands.args import teacher_cache_dir
from raydistill.commands.cli import HelpFormatter, Parser, cli
from raydistill.commands.flags import SELECTION_FLAGS, SWEEP_TRAIN_FLAGS, add_fields, data_of, request_from
from raydistill.common.errors import check
from raydistill.orchestrate import repeat
from raydistill.orchestrate.driver import Sweep, log, state_path
from raydistill.orchestrate.request import SweepRequest

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
    from raydistill.commands.args import add_data_args

    add_fields(p, SweepRequest, ("space", "task", "data_dir", "teacher"), D)
    add_data_args(p)


def _add_resource_args(p: Parser) -> None:
    """How many trials, and the workers, CPUs and GPUs each gets."""
    resources = ("num_samples", "num_workers", "max_concurrent", "use_gpu", "gpus_per_worker", "cpus_per_worker")
    add_fields(p, SweepRequest, resources, D)


def _add_train_overrides(p: Parser) -> None:
    """distill's training flags, each overriding the space's value (no defaults of their own), and the in-sweep
    teacher fine-tune's."""
    from raydistill.commands.args import add_selection_args
    from raydistill.commands.flags import add_overrides

    add_overrides(p, SWEEP_TRAIN_FLAGS)
    add_selection_args(p, None)
    add_fields(p, SweepRequest, ("teacher_epochs", "teacher_lr"), D)


# the sweep's own bookkeeping, in --help's order
BOOKKEEPING = ("tracking_uri", "experiment", "storage_path", "name", "resume", "rerun", "overrides", "multi_objective")
RAY = ("verbose", "placement_strategy", "max_failures", "ray_train_trials")


def _add_sweep_args(p: Parser) -> None:
    """Where the sweep logs and keeps its trials, its name and resume, overrides, objectives, Ray's knobs."""
    from raydistill.commands.args import add_teacher_args

    add_fields(p, SweepRequest, BOOKKEEPING + RAY, D)
    add_teacher_args(p, D)
    add_fields(p, SweepRequest, ("inject_fault",), D)


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
    try:
        repeat.record(sweep)
        sweep.prepare()
        rows, run_ids = sweep.search()
        rows, run_ids, confirmed = sweep.confirm(rows, run_ids)
        control = sweep.control(rows, run_ids, confirmed)
        out = sweep.finish(rows, run_ids, confirmed, control)
    except Exception as e:  # a Ctrl-C's runs end KILLED by the interrupt's cleanups; any other error's FAILED here
        with contextlib.suppress(Exception):  # the error the user sees is the sweep's, not a tracking hiccup's
            sweep.failed(e)
        raise
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
