"""Which run is best among runs (a run's own best epoch is ``epoch.best_epoch``, beside this). What a pick ranks by
(``objective``: the best epoch's score on the split that chooses; ``report_metric``: the dev number it reports); the
sweep's best trial (``rank_trials``, ``winner``); its confirmation (``candidates``, ``confirmed_rows``) and the same
rule on MLflow runs (``pick_confirmed``); and ``raydistill best``'s pick read back from MLflow (``choose``): the
sweep(s) ranked (the latest, one by name, or every sweep of one task, data and metric), the metric and mode (the
sweep's own unless given), the bounds on latency and size. Ray-free; every refusal is a ``UserError`` naming the flag.
Ties go to the lowest trial id in every rule."""

from __future__ import annotations

import dataclasses
import math
from typing import TYPE_CHECKING, Any

from raydistill.common.errors import UserError, check
from raydistill.tracking.track import Tracker

if TYPE_CHECKING:
    from mlflow.entities import Run

ALL = "all"  # --sweep all: every sweep of the experiment, where they agree on what a score means


SAME = ("task", "data_fingerprint", "metric", "mode")  # what sweeps ranked together must share (their parent runs)


# per-run final metrics a run logs once (not a per-epoch curve): a sweep or `best` may rank by these too
FINAL = ("student_params", "latency_ms_b1", "latency_ms_b32", "pct_of_teacher", "speedup_b1")


def objective(main_metric: str, select_on: str = "val") -> str:
    """The metric a sweep chooses on: the best epoch's score on the split that chooses."""
    return f"best_{'val' if select_on == 'val' else 'eval'}_{main_metric}"


def report_metric(metric: str) -> str:
    """The dev number of what ``metric`` chose: ``best_val_x`` → ``best_eval_x``; any other metric reports itself."""
    return "best_eval_" + metric[len("best_val_") :] if metric.startswith("best_val_") else metric


def as_final(metric: str, field: str = "metric") -> str:
    """A ranking metric as a per-run final value: ``eval_x`` / ``val_x`` (per-epoch curves, whose latest value is the
    last epoch's, not the exported student's) become ``best_eval_x`` / ``best_val_x``; ``best_*`` and the final
    metrics in ``FINAL`` pass; anything else is refused in one line."""
    if metric.startswith(("eval_", "val_")):
        return "best_" + metric
    if metric.startswith("best_") or metric in FINAL:
        return metric
    raise UserError(
        field,
        f"{metric!r} is not a per-run result; rank by best_val_<metric> (chosen on the validation "
        f"split), best_eval_<metric> (dev) or one of {', '.join(FINAL)}",
    )


CONTROL_TAG = "raydistill.control_of"  # a labels-only control run: the trial whose student it shadows


def group_key(tags: dict[str, str]) -> str:
    """Which configuration a trial run trained: a confirmation run names the trial it repeats with another seed."""
    return tags.get("raydistill.confirm_of") or tags.get("raydistill.trial_id") or ""


def pick_confirmed(runs: list[Run], metric: str, mode: str = "max") -> tuple[Run, float] | tuple[None, None]:
    """The winner among runs that share configurations (``group_key``): with confirmation runs present, only the
    confirmed configurations compete, ranked by the mean of ``metric`` over their *fresh* seeds (the confirmation
    runs; the original trial's score, biased upward by the selection that made it a finalist, is left out); the
    winner's best fresh run by ``metric`` is returned, with that mean. ``runs`` are MLflow runs (``.data.tags``,
    ``.data.metrics``). Without confirmation runs, the single best run (mean = its own value). A sweep's labels-only
    control runs (``CONTROL_TAG``) never compete."""
    groups: dict[str, list[Run]] = {}
    fresh: dict[str, list[Run]] = {}
    for r in runs:
        if r.data.tags.get(CONTROL_TAG):  # a labels-only control is the yardstick, never a candidate
            continue
        if metric in r.data.metrics and math.isfinite(r.data.metrics[metric]):
            groups.setdefault(group_key(r.data.tags), []).append(r)
            if r.data.tags.get("raydistill.confirm_of"):
                fresh.setdefault(group_key(r.data.tags), []).append(r)
    pool = fresh or groups
    if not pool:
        return None, None
    sign = 1 if mode == "max" else -1
    mean = {k: sum(r.data.metrics[metric] for r in g) / len(g) for k, g in pool.items()}

    def tid(r: Run) -> str:  # ties: the lowest trial id, as the summary
        return r.data.tags.get("raydistill.trial_id", "")

    key = min(pool, key=lambda k: (-sign * mean[k], -len(pool[k]), min(tid(r) for r in pool[k])))
    best = min(pool[key], key=lambda r: (-sign * r.data.metrics[metric], tid(r)))
    return best, mean[key]


def rank_trials(rows: list[dict], metric: str, mode: str) -> None:
    """A sweep's trial rows in place, best first: those that exported a student first, then by ``metric`` in ``mode``
    (a row without it last), ties to the lowest trial id — the order ``pick_confirmed`` ranks MLflow runs in."""
    sign = -1 if mode == "max" else 1
    rows.sort(key=lambda r: (not r["exported"], r[metric] is None, sign * (r[metric] or 0), r["trial"]))


def winner(rows: list[dict[str, Any]], metric: str, confirmed: list[dict[str, Any]] | None) -> dict[str, Any] | None:
    """The best exported trial of rows ``rank_trials`` ordered; a confirmed sweep's is its winner's best seed (best
    mean over seeds, ``confirmed_rows``)."""
    done = [r for r in rows if r["exported"] and r.get(metric) is not None]
    best = done[0] if done else None
    if confirmed:
        best = next((r for r in rows if r["trial"] == confirmed[0]["exported_trial"]), best)
    return best


def candidates(rows: list[dict], metric: str, top: int) -> list[dict]:
    """The ``top`` finished, exported trials by ``metric`` (rows as ``rank_trials`` sorts them, best first): the
    configurations a confirmation trains again."""
    return exported_with(rows, metric)[:top]


def exported_with(rows: list[dict], metric: str) -> list[dict]:
    """Rows of trials that exported a student and scored ``metric``."""
    return [r for r in rows if r.get("exported") and r.get(metric) is not None]


def confirmed_rows(rows: list[dict], confirm_rows: list[dict], metric: str, report: str, mode: str) -> list[dict]:
    """One row per confirmed configuration: its fresh seeds' ``metric`` (chooses) and ``report`` (dev) as mean and
    range, the original trial's ``metric`` beside them (``search_<metric>``, not averaged in: it is the score selection
    biased upward), and the fresh seed whose student is exported (the best by ``metric``); best mean first."""
    by_trial = {r["trial"]: r for r in rows}
    groups: dict[str, list[dict]] = {}
    for r in exported_with(confirm_rows, metric):
        groups.setdefault(r["config"].get("confirm_of"), []).append(r)
    sign = 1 if mode == "max" else -1
    out = []
    for origin, fresh in groups.items():
        vals = [s[metric] for s in fresh]
        devs = [s[report] for s in fresh if s.get(report) is not None]
        pick = min(fresh, key=lambda s: (-sign * s[metric], s["trial"]))  # ties: the lowest trial id, as best
        mean = sum(vals) / len(vals)
        # the order pick_confirmed (raydistill.best) ranks by: mean, then more seeds, then the lowest trial id
        rank = (-sign * mean, -len(fresh), min(s["trial"] for s in fresh))
        row = {
            "config_of": origin,
            f"search_{metric}": by_trial.get(origin, {}).get(metric),
            "seeds": len(fresh),
            f"mean_{metric}": mean,
            f"mean_{report}": sum(devs) / len(devs) if devs else None,
            f"range_{report}": (max(devs) - min(devs)) if devs else None,
            "exported_trial": pick["trial"],
            metric: pick[metric],
            report: pick.get(report),
        }
        out.append((rank, row))
    return [row for _, row in sorted(out, key=lambda x: x[0])]


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
    experiment_id = _experiment_id(tracker)
    scope = _scope(tracker, experiment_id, sweep)
    runs = _finished_trials(tracker, experiment_id, scope)
    parent = scope.parent
    mode = mode or (parent.data.params.get("mode") if parent else None) or "max"
    if metric is None:
        metric = _sweep_metric(runs, parent)
    metric, scored = _logged(runs, metric)
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


def _logged(runs: list, metric: str | None) -> tuple[str, list]:
    """The final form of ``metric`` and the runs that logged it; none is the user's error, naming what was logged."""
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
