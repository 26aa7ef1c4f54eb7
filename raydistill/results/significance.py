"""The noise of a dev score, and when one model beats another: a bootstrap 95% interval over dev examples of a score
and of the difference of two models' scores on the same resampled rows (paired), and the verdict rule — "beats" only
where the paired interval lies above 0 and the difference exceeds the other side's seeds' range; "loses to" the mirror
image; otherwise "ties". Ray-free: a sweep's labels-only control (``orchestrate/control.py``) and the quality
benchmarks (``benchmarks/quality_stats.py``) read the same rule from here.

Predictions are one per dev example, in the form ``tasks.encode.example_predictions`` gives: a class id, a score
(regression), a tag list (token classification) or an answer string (QA), so any task's metric can be resampled."""

from __future__ import annotations

import statistics
from typing import Any

from raydistill.config.selection import bootstrap_ci


def _task(task: Any) -> Any:
    """A built-in task's name or a ``Task`` (the user's data)."""
    from raydistill.tasks import get_task

    return get_task(task) if isinstance(task, str) else task


def score(task: Any, preds: list, gold: list, idx: Any = None, metric: str | None = None) -> float:
    """The task's ``metric`` (default its main one) of ``preds`` on the rows ``idx`` (all rows when None)."""
    from raydistill.tasks.metrics import compute

    t = _task(task)
    idx = range(len(gold)) if idx is None else idx
    return compute(t, [preds[i] for i in idx], [gold[i] for i in idx])[metric or t.main_metric]


def interval(
    task: Any, preds: list, gold: list, other: list | None = None, n: int = 1000, metric: str | None = None
) -> tuple[float, float]:
    """Bootstrap 95% interval over dev examples of the score of ``preds`` (or of its difference to ``other``'s score
    on the same resampled rows: the paired interval)."""
    t = _task(task)
    if other is None:
        return bootstrap_ci(lambda idx: score(t, preds, gold, idx, metric), len(gold), n=n)
    return bootstrap_ci(
        lambda idx: score(t, preds, gold, idx, metric) - score(t, other, gold, idx, metric), len(gold), n=n
    )


def verdict(diff_ci: tuple[float, float], diff: float, seeds_range: float = 0.0) -> str:
    """One row against another: "beats" where the paired interval of (row − other) lies above 0 and the difference
    exceeds the other row's seeds' range; "loses to" the mirror image; else "ties"."""
    lo, hi = diff_ci
    if lo > 0 and diff > seeds_range:
        return "beats"
    if hi < 0 and -diff > seeds_range:
        return "loses to"
    return "ties"


def seeds_summary(values: list[float]) -> dict:
    """Median and range of a row's seeds."""
    return {
        "median": statistics.median(values),
        "min": min(values),
        "max": max(values),
        "range": max(values) - min(values),
        "seeds": values,
    }


def median_index(values: list[float]) -> int:
    """The seed whose score is the median (the lower middle for an even count): its predictions stand for the row.
    Callers pass validation scores, so the split that reports never picks the run it reports."""
    order = sorted(range(len(values)), key=lambda i: values[i])
    return order[(len(values) - 1) // 2]
