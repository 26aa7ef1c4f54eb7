"""Which finished trial of a sweep is the best, read back from MLflow (``raydistill best``, and ``find_best`` for the
tests and benchmarks): the sweep(s) ranked (the latest, one by name, or every sweep of one task, data and metric), the
metric and mode (the sweep's own unless given), the bounds on latency and size, and the confirmation's rule
(``config.selection.pick_confirmed``). Every refusal is a ``UserError`` naming the flag."""

from __future__ import annotations

import dataclasses
from typing import Any

from raydistill.common.errors import UserError, check
from raydistill.tracking.track import Tracker

ALL = "all"  # --sweep all: every sweep of the experiment, where they agree on what a score means


SAME = ("task", "data_fingerprint", "metric", "mode")  # what sweeps ranked together must share (their parent runs)


@dataclasses.dataclass(frozen=True)
class Scope:
    """The trials a pick ranks: those of ``sweeps`` (empty: every trial of an experiment that recorded no sweep),
    ``parent`` the sweep run holding the objective and mode (None: none recorded), ``said`` the words naming them,
    ``hint`` how to rank others where the experiment holds more, ``known`` the experiment's sweeps, newest first."""

    sweeps: tuple[str, ...]
    parent: Any
    said: str
    hint: str = ""
    known: tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True)
class Pick:
    run: Any
    metric: str
    mean: float | None  # None where no score is finite (pick_confirmed)
    mode: str
    scope: Scope


def find_best(
    tracker: Tracker,
    metric: str | None,
    mode: str | None,
    sweep: str | None = None,
    max_latency_ms: float | None = None,
    max_params: float | None = None,
):
    """``choose`` as (run, metric, mean, mode)."""
    p = choose(tracker, metric, mode, sweep, max_latency_ms, max_params)
    return p.run, p.metric, p.mean, p.mode


def choose(
    tracker: Tracker,
    metric: str | None,
    mode: str | None,
    sweep: str | None = None,
    max_latency_ms: float | None = None,
    max_params: float | None = None,
) -> Pick:
    """The best finished trial run of one sweep of ``tracker``'s experiment: ``sweep`` by name, the latest without
    one, or every sweep (``all``) where they share task, data and metric. Ranked by a per-run final ``metric``
    (default: the sweep's own, ``best_val_*``: chosen on the validation split) in ``mode`` (default: the sweep's own,
    recorded with its parent run; else max). A sweep that confirmed its top configurations with more seeds is decided
    by their mean, and the winner's best seed is returned, as the sweep's summary names it."""
    from raydistill.config.selection import pick_confirmed

    experiment_id = _experiment_id(tracker)
    scope = _scope(tracker, experiment_id, sweep)
    runs = _finished_trials(tracker, experiment_id, scope)
    parent = scope.parent
    mode = mode or (parent.data.params.get("mode") if parent else None) or "max"
    if metric is None:
        metric = _sweep_metric(runs, parent)
    metric, scored = _scored(runs, metric)
    best, mean = pick_confirmed(_within_bounds(scored, max_latency_ms, max_params), metric, mode)
    return Pick(best, metric, mean, mode, scope)


def _experiment_id(tracker: Tracker) -> str:
    """The experiment's id; a name it does not know is the user's error, naming the experiments that start so (the
    sweep's default experiment is SPACE-TASK)."""
    c, experiment = tracker.client, tracker.experiment
    exp = c.get_experiment_by_name(experiment)
    if exp is None:
        near = sorted(e.name for e in c.search_experiments(max_results=1000) if e.name.startswith(experiment))
        raise UserError(
            "experiment",
            f"no MLflow experiment {experiment!r} at {tracker.uri}; "
            + (f"the store has {', '.join(near[:6])}; " if near else "")
            + "check --experiment (a sweep's default: SPACE-TASK, e.g. pkd_glue-rte) and --tracking-uri",
        )
    return exp.experiment_id


def _scope(tracker: Tracker, experiment_id: str, sweep: str | None) -> Scope:
    """Which sweep(s) to rank, from the experiment's sweep runs (newest first)."""
    parents = tracker.client.search_runs(
        [experiment_id],
        filter_string="tags.`raydistill.role` = 'sweep'",
        max_results=1000,
        order_by=["attributes.start_time DESC"],
    )
    exp, known = repr(tracker.experiment), tuple(p.info.run_name for p in parents)
    if sweep and sweep != ALL:
        named = [p for p in parents if p.info.run_name == sweep]
        return Scope((sweep,), named[0] if named else None, f"sweep {sweep!r}", known=known)
    if not parents:  # trials an older raydistill (or a hand-made store) logged without a sweep run: all of them
        return Scope((), None, f"every trial of experiment {exp} (it records no sweep)")
    if sweep == ALL:
        _check_comparable(parents)
        return Scope(known, parents[0], f"all {len(known)} sweeps of experiment {exp}", known=known)
    name, n = parents[0].info.run_name, len(parents)
    if n == 1:
        return Scope((name,), parents[0], f"sweep {name!r}", known=known)
    hint = " (--sweep NAME picks another, --sweep all ranks those of one task, data and metric together)"
    return Scope((name,), parents[0], f"sweep {name!r}, the latest of {n} in experiment {exp}", hint, known)


def _check_comparable(parents: list) -> None:
    """``--sweep all`` ranks scores that mean the same: every sweep of one task, data and metric; else one line
    naming the sweeps that differ."""
    first = parents[-1]  # the oldest: what the others are compared with

    def differs(p) -> list[str]:
        return [k for k in SAME if p.data.params.get(k) != first.data.params.get(k)]

    odd = [f"{p.info.run_name} ({', '.join(differs(p))})" for p in parents if differs(p)]
    check(
        not odd,
        "sweep",
        f"--sweep all ranks sweeps of one task, data and metric; these differ from {first.info.run_name!r}: "
        f"{'; '.join(odd)}; pass --sweep NAME for one of them",
    )


def _finished_trials(tracker: Tracker, experiment_id: str, scope: Scope) -> list:
    """The finished trial runs of ``scope``; none is the user's error."""
    filt = "attributes.status = 'FINISHED' and tags.`raydistill.trial_id` != ''"
    if len(scope.sweeps) == 1:
        filt += f" and tags.`raydistill.sweep` = '{scope.sweeps[0]}'"
    runs = tracker.client.search_runs([experiment_id], filter_string=filt, max_results=5000)
    if len(scope.sweeps) > 1:
        runs = [r for r in runs if r.data.tags.get("raydistill.sweep") in scope.sweeps]
    others = [k for k in scope.known if k not in scope.sweeps]
    check(
        bool(runs),
        "experiment" if not scope.sweeps else "sweep",
        f"{scope.said} has no finished trials yet"
        + (f"; pass --sweep NAME for another of the experiment's sweeps: {', '.join(others[:6])}" if others else ""),
    )
    return runs


def _sweep_metric(runs: list, parent) -> str | None:
    """No --metric: the sweep's own; without a recorded sweep, the first ``best_val_*`` (else ``best_eval_*``) the
    runs logged."""
    finals = sorted(
        {k for r in runs for k in r.data.metrics if k.startswith("best_val_")}
        or {k for r in runs for k in r.data.metrics if k.startswith("best_eval_")}
    )
    return parent.data.params.get("metric") if parent else (finals[0] if finals else None)


def _scored(runs: list, metric: str | None) -> tuple[str, list]:
    """The final form of ``metric`` and the runs that logged it; none is the user's error, naming what was logged."""
    from raydistill.config.selection import as_final

    check(bool(metric), "metric", "no trial logged a best_val_* or best_eval_* metric; pass --metric")
    assert metric is not None  # (check refused it otherwise)
    metric = as_final(metric)
    scored = [r for r in runs if metric in r.data.metrics]
    finals = sorted({k for r in runs for k in r.data.metrics if k.startswith(("best_val_", "best_eval_"))})
    check(
        bool(scored), "metric", f"no finished trial logged {metric!r}; pass --metric with one of: {', '.join(finals)}"
    )
    return metric, scored


def _within_bounds(scored: list, max_latency_ms: float | None, max_params: float | None) -> list:
    """The scored runs within ``--max-latency-ms`` and ``--max-params``; none left is the user's error, naming the
    smallest there is."""
    for flag, key, bound in (
        ("max_latency_ms", "latency_ms_b1", max_latency_ms),
        ("max_params", "student_params", max_params),
    ):
        if bound is None:
            continue
        within = [r for r in scored if r.data.metrics.get(key, float("inf")) <= bound]
        least = min((r.data.metrics[key] for r in scored if key in r.data.metrics), default=None)
        check(
            bool(within),
            flag,
            f"no finished trial has {key} <= {bound:g} (the smallest is {least}); raise "
            f"--{flag.replace('_', '-')} or search smaller students",
        )
        scored = within
    return scored
