"""Confirm a sweep's winner: the top configurations trained again with further seeds, and the one with the best mean
validation score *over those fresh seeds* wins (``search.confirm: {top: k, seeds: s}``). One validation score is a draw
from a noisy distribution; the best of N draws is biased upward, most on small tasks, so the search's pick is re-drawn
before it is believed — and the original trial's score, the biased draw that made it a finalist, is shown beside the
mean, never averaged into it. The exported student is the winner's best fresh run by validation score. The
confirmation runs are child runs of the sweep like its trials, tagged ``raydistill.confirm_of``."""

from __future__ import annotations

import os

from ray import tune

from raydistill.orchestrate.trial import TrialOpts
from raydistill.orchestrate.tuner import failure_config, trainable_for


def candidates(rows: list[dict], metric: str, top: int) -> list[dict]:
    """The ``top`` finished, exported trials by ``metric`` (rows as ``summary.summarize`` sorts them, best first)."""
    return _scored(rows, metric)[:top]


def _scored(rows: list[dict], metric: str) -> list[dict]:
    """Rows of trials that exported a student and scored ``metric``."""
    return [r for r in rows if r.get("exported") and r.get(metric) is not None]


def confirm_points(rows: list[dict], seed: int, seeds: int) -> list[dict]:
    """Each candidate's sampled configuration once per further seed (``seed + 1 … seed + seeds``)."""
    return [{**r["config"], "seed": seed + j, "confirm_of": r["trial"]} for r in rows for j in range(1, seeds + 1)]


def run_confirm(
    points: list[dict],
    base,
    *,
    storage: str,
    name: str,
    parent: str,
    opts: TrialOpts,
    n_at_once: int,
    resume: bool,
    suffix: str = "confirm",
) -> list:
    """Train every point (a trial config with its seed and the trial it repeats) as a trial of its own Tune
    experiment ``NAME-<suffix>`` beside the sweep's (``NAME-confirm``; the labels-only control's ``NAME-control``),
    with the sweep's ``opts`` (``tuner.trial_opts``); returns the Tune results. Restored on ``resume``."""
    trainable = trainable_for(base, parent=parent, storage=storage, name=name, opts=opts)
    exp = f"{name}-{suffix}"
    if resume and tune.Tuner.can_restore(os.path.join(storage, exp)):
        tuner = tune.Tuner.restore(
            os.path.join(storage, exp), trainable=trainable, resume_unfinished=True, resume_errored=False
        )
    else:
        tuner = tune.Tuner(
            trainable,
            param_space={"point": tune.grid_search(points)},
            run_config=tune.RunConfig(name=exp, storage_path=storage, verbose=0, failure_config=failure_config(opts)),
            tune_config=tune.TuneConfig(num_samples=1, max_concurrent_trials=n_at_once),
        )
    grid = tuner.fit()
    return [grid[i] for i in range(len(grid))]  # a ResultGrid is indexed (its types declare no __iter__)


def confirmed_rows(rows: list[dict], confirm_rows: list[dict], metric: str, report: str, mode: str) -> list[dict]:
    """One row per confirmed configuration: its fresh seeds' ``metric`` (chooses) and ``report`` (dev) as mean and
    range, the original trial's ``metric`` beside them (``search_<metric>``, not averaged in: it is the score selection
    biased upward), and the fresh seed whose student is exported (the best by ``metric``); best mean first."""
    by_trial = {r["trial"]: r for r in rows}
    groups: dict[str, list[dict]] = {}
    for r in _scored(confirm_rows, metric):
        groups.setdefault(r["config"].get("confirm_of"), []).append(r)
    sign = 1 if mode == "max" else -1
    out = []
    for origin, fresh in groups.items():
        vals = [s[metric] for s in fresh]
        devs = [s[report] for s in fresh if s.get(report) is not None]
        pick = min(fresh, key=lambda s: (-sign * s[metric], s["trial"]))  # ties: the lowest trial id, as best
        mean = sum(vals) / len(vals)
        # the order selection.pick_confirmed (raydistill.best) ranks by: mean, then more seeds, then the lowest trial id
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
