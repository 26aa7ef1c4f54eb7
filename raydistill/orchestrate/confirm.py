"""Confirm a sweep's winner: the top configurations trained again with further seeds, and the one with the best mean
validation score *over those fresh seeds* wins (``search.confirm: {top: k, seeds: s}``). One validation score is a draw
from a noisy distribution; the best of N draws is biased upward, most on small tasks, so the search's pick is re-drawn
before it is believed — and the original trial's score, the biased draw that made it a finalist, is shown beside the
mean, never averaged into it. The exported student is the winner's best fresh run by validation score. The
confirmation runs are child runs of the sweep like its trials, tagged ``raydistill.confirm_of``. Which trials are
confirmed and which wins are ``selection/runs.py``'s rules (``candidates``, ``confirmed_rows``); here they run."""

from __future__ import annotations

import os

from ray import tune

from raydistill.orchestrate.tuner import SweepTrials, failure_config


def confirm_points(rows: list[dict], seed: int, seeds: int) -> list[dict]:
    """Each candidate's sampled configuration once per further seed (``seed + 1 … seed + seeds``)."""
    return [{**r["config"], "seed": seed + j, "confirm_of": r["trial"]} for r in rows for j in range(1, seeds + 1)]


def run_confirm(points: list[dict], trials: SweepTrials, suffix: str = "confirm") -> list:
    """Train every point (a trial config with its seed and the trial it repeats) as a trial of its own Tune
    experiment ``NAME-<suffix>`` beside the sweep's (``NAME-confirm``; the labels-only control's ``NAME-control``),
    as the sweep's ``trials`` run; returns the Tune results. Restored when the sweep is resumed."""
    trainable = trials.trainable()
    storage, exp = trials.storage, f"{trials.name}-{suffix}"
    if trials.resume and tune.Tuner.can_restore(os.path.join(storage, exp)):
        tuner = tune.Tuner.restore(
            os.path.join(storage, exp), trainable=trainable, resume_unfinished=True, resume_errored=False
        )
    else:
        failures = failure_config(trials.opts)
        tuner = tune.Tuner(
            trainable,
            param_space={"point": tune.grid_search(points)},
            run_config=tune.RunConfig(name=exp, storage_path=storage, verbose=0, failure_config=failures),
            tune_config=tune.TuneConfig(
                num_samples=1, max_concurrent_trials=trials.n_at_once, reuse_actors=trials.opts.in_process
            ),
        )
    grid = tuner.fit()
    return [grid[i] for i in range(len(grid))]  # a ResultGrid is indexed (its types declare no __iter__)
