"""The noise of a dev score, and when one model beats another: a bootstrap 95% interval over dev examples of a score
and of the difference of two models' scores on the same resampled rows (paired), and the verdict rule — "beats" only
where the paired interval lies above 0 and the difference exceeds the other side's seeds' range; "loses to" the mirror
image; otherwise "ties". Ray-free: a sweep's labels-only control (``orchestrate/control.py``) and the quality
benchmarks (``benchmarks/quality_stats.py``) read the same rule from here.

Predictions are one per dev example, in the form ``tasks.encode.example_predictions`` gives: a class id, a score
(regression), a tag list (token classification) or an answer string (QA), so any task's metric can be resampled."""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np


def bootstrap_ci(
    stat: Callable[[list[int]], float], n_examples: int, n: int = 1000, seed: int = 0, level: float = 0.95
) -> tuple[float, float]:
    """Percentile bootstrap interval of ``stat(indices)`` over dev examples resampled with replacement (``stat`` may
    compute any metric — accuracy, F1, Pearson, MCC — or the difference of two systems' metrics on the same rows)."""
    if n_examples <= 0:
        return (math.nan, math.nan)
    rng = random.Random(seed)
    vals = sorted(
        v for v in (stat([rng.randrange(n_examples) for _ in range(n_examples)]) for _ in range(n)) if math.isfinite(v)
    )
    if not vals:
        return (math.nan, math.nan)
    lo = vals[int((1 - level) / 2 * (len(vals) - 1))]
    hi = vals[int(round((1 + level) / 2 * (len(vals) - 1)))]
    return lo, hi


def _task(task: Any) -> Any:
    """A built-in task's name or a ``Task`` (the user's data)."""
    from raydistill.tasks import get_task

    return get_task(task) if isinstance(task, str) else task


def scorer(task: Any, preds: list, gold: list, metric: str | None = None) -> Callable[[Sequence[int]], float]:
    """The task's ``metric`` (default its main one) of ``preds`` as a function of the rows scored. A metric that is a
    sum over examples — accuracy, QA's exact match and F1 (means of per-question scores), entity-level precision,
    recall and F1 (from per-sentence entity counts: seqeval scores sentences apart) — is split into per-example terms
    once, so a bootstrap of thousands of resamples costs seconds, not hours of re-running seqeval; any other metric
    (F1, MCC, correlations) is computed on the rows each time."""
    from raydistill.tasks.metrics import SCALAR, macro_f1, per_class, qa_scores

    t = _task(task)
    m = metric or t.main_metric
    if t.kind == "token":
        counts = np.array([_entity_counts(p, g) for p, g in zip(preds, gold, strict=True)], dtype=float).reshape(-1, 3)
        return lambda idx: _entity_metric(counts[list(idx)].sum(0), m)
    if t.kind == "qa":
        terms = np.array([qa_scores([p], [g])[m] for p, g in zip(preds, gold, strict=True)], dtype=float)
    elif m == "accuracy":
        terms = np.array([p == g for p, g in zip(preds, gold, strict=True)], dtype=float)
    else:  # macro-F1 over the task's label set, as the runs score it (metrics.compute)
        n = len(t.label_names) if m == "macro_f1" and per_class(t) else 0
        fn = (lambda p, g: macro_f1(p, g, n)) if n else SCALAR[m]
        return lambda idx: fn([preds[i] for i in idx], [gold[i] for i in idx])
    return lambda idx: float(terms[list(idx)].mean()) if len(idx) else 0.0


def _entity_counts(pred: list[str], gold: list[str]) -> tuple[int, int, int]:
    """One sentence's (entities right, entities predicted, gold entities), as seqeval's default mode finds them."""
    from seqeval.metrics.sequence_labeling import get_entities

    p, g = set(get_entities(pred)), set(get_entities(gold))
    return len(p & g), len(p), len(g)


def _entity_metric(sums: Any, metric: str) -> float:
    """Entity-level micro precision, recall or F1 from summed counts (0 where undefined: seqeval's zero_division)."""
    tp, n_pred, n_gold = (float(x) for x in sums)
    values = {
        "precision": tp / n_pred if n_pred else 0.0,
        "recall": tp / n_gold if n_gold else 0.0,
        "f1": 2 * tp / (n_pred + n_gold) if n_pred + n_gold else 0.0,
    }
    return values[metric]


def score(task: Any, preds: list, gold: list, idx: Any = None, metric: str | None = None) -> float:
    """The task's ``metric`` (default its main one) of ``preds`` on the rows ``idx`` (all rows when None)."""
    return scorer(task, preds, gold, metric)(range(len(gold)) if idx is None else idx)


def interval(
    task: Any, preds: list, gold: list, other: list | None = None, n: int = 1000, metric: str | None = None
) -> tuple[float, float]:
    """Bootstrap 95% interval over dev examples of the score of ``preds`` (or of its difference to ``other``'s score
    on the same resampled rows: the paired interval)."""
    mine = scorer(task, preds, gold, metric)
    if other is None:
        return bootstrap_ci(mine, len(gold), n=n)
    theirs = scorer(task, other, gold, metric)
    return bootstrap_ci(lambda idx: mine(idx) - theirs(idx), len(gold), n=n)


def verdict(diff_ci: tuple[float, float], diff: float, seeds_range: float = 0.0) -> str:
    """One row against another: "beats" where the paired interval of (row − other) lies above 0 and the difference
    exceeds the other row's seeds' range; "loses to" the mirror image; else "ties"."""
    lo, hi = diff_ci
    if lo > 0 and diff > seeds_range:
        return "beats"
    if hi < 0 and -diff > seeds_range:
        return "loses to"
    return "ties"


def compare(
    task: Any, preds: list, other: list, gold: list, other_range: float = 0.0, metric: str | None = None
) -> dict:
    """One model against another on the same dev rows: the difference of their scores, its paired interval and the
    verdict, all three from this one pair of runs. A row's median of dev may be another seed than the run standing
    for it; a difference of medians beside this pair's interval would mix two seeds."""
    diff = score(task, preds, gold, metric=metric) - score(task, other, gold, metric=metric)
    ci = interval(task, preds, gold, other=other, metric=metric)
    return {"diff": diff, "ci": ci, "verdict": verdict(ci, diff, other_range)}


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
