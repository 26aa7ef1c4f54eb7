"""Diverging runs stop early (``train.stop_diverged``, on by default): after each epoch, a run whose training loss is
NaN/inf or exploding, or that collapsed to one answer (its validation score at the majority floor, what one answer
given for every row scores, AND its validation predictions nearly all that one answer) is judged diverged; the loop
reports that epoch with ``diverged`` set to the reason and trains no further. A score under the floor alone is no
collapse: a small student on MRPC sits a little below the majority class after its first epoch while it still tells
the classes apart, and learns on. Plain functions of an epoch's metrics, so the rules are tested on hand-made
sequences."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

# the yardstick of "exploding": the loss of a stage's first step, before any update of it moved the weights (a
# learning rate far too high blows the loss up within a few steps, so a mean over more of them holds the explosion)
START_STEPS = 1
# exploding: an epoch's mean loss above EXPLODE_FACTOR times that yardstick, and above EXPLODE_MIN, so a loss that
# starts near 0 (a student that begins as its teacher) and rises a little is not taken for it
EXPLODE_FACTOR = 10.0
EXPLODE_MIN = 1.0
# at the floor: the validation score no more than FLOOR_MARGIN above the best constant answer's (or below it)
FLOOR_MARGIN = 0.005
# the floor is judged once the prediction stage has trained this many steps: a smoke run of a few steps has not
# learned anything yet, which is not a collapse (the quickstart's trials train 56 steps an epoch); and not before its
# learning-rate warm-up has ended: a long schedule's first epoch runs at a fraction of the peak rate, where a pruned
# student still answers near one constant (STS-B's 3L-192 at 21 epochs: warm-up 2.1 epochs, val Pearson -0.01 after
# the first, 0.74 later — docs/benchmarks/2026-11-27-transfer.md)
FLOOR_MIN_STEPS = 50
# ... and not before this share of the prediction stage's steps: a student may answer one class for its first epochs
# and then learn (RTE's pruned 3L-192 on the x20 set, 10 epochs: one class after epochs 1 and 2, off the floor from
# epoch 3, best val at 4; 6 of RTE's 12 four-epoch runs were stopped after epoch 1 — docs/benchmarks/
# 2026-11-27-transfer.md). Still at the floor half-way, a run is not starting slowly; a rate too high shows in the loss
# first (exploding, NaN), which is judged after every epoch.
FLOOR_PATIENCE = 0.5
# collapsed to one answer: at least this share of the validation rows given the same class (classification), or the
# predictions' spread at most this share of the labels' (regression: std of predictions over std of labels)
COLLAPSE_SHARE = 0.99
COLLAPSE_SPREAD = 0.01
SHARE, SPREAD = "val_top_answer_share", "val_answer_spread"  # the evidence, logged with the validation scores
# the stage that trains the prediction head (every method's last; TinyBERT's and MiniLM's first stage does not, so
# their students sit at chance through it by design)
PRED_STAGE = "pred"


@dataclass(frozen=True)
class Floor:
    """The majority floor of a run: the best ``metric`` (a ``val_*`` key) one constant answer scores on the validation
    split's labels (``tasks.metrics.constant_floor``), and that answer in words."""

    metric: str
    score: float
    answer: str


def floor_of(task, val_examples: Sequence[dict]) -> Floor | None:
    """The run's floor, from the validation split's labels (what chooses; dev only reports); None without a validation
    split or where a constant answer means nothing (token, QA, MLM)."""
    from raydistill.tasks.metrics import constant_floor

    if task.kind not in ("classification", "regression"):  # tags and answer spans: no one constant answer
        return None
    found = constant_floor(task, [e["label"] for e in val_examples])
    if found is None:
        return None
    score, answer = found
    if task.kind == "regression":
        said = "a constant answer"
    else:
        names = task.label_names
        said = f"always answering {names[answer] if isinstance(answer, int) and 0 <= answer < len(names) else answer!r}"
    return Floor(f"val_{task.main_metric}", score, said)


def answer_metrics(task, predictions, labels) -> dict[str, float]:
    """The evidence of a collapse on the validation split (``SHARE``/``SPREAD`` without their ``val_`` prefix): the
    share of rows given the most common predicted class, or the predictions' spread against the labels'."""
    import numpy as np

    pred = np.asarray(predictions)
    if task.kind == "classification" and len(pred):
        return {SHARE[4:]: float(np.bincount(pred.astype(int)).max() / len(pred))}
    if task.kind == "regression" and len(pred) > 1:
        gold = float(np.std(np.asarray(labels, dtype=float)))
        return {SPREAD[4:]: float(np.std(pred.astype(float)) / gold) if gold > 0 else 0.0}
    return {}


def collapsed(metrics: dict) -> bool:
    """The validation predictions are (nearly) one answer: the share or spread says so; a NaN score (a regression
    student with constant output has no correlation) is one too."""
    if SHARE in metrics:
        return metrics[SHARE] >= COLLAPSE_SHARE
    if SPREAD in metrics:
        return metrics[SPREAD] <= COLLAPSE_SPREAD
    return False


def exploding(loss: float, start: float) -> bool:
    return loss > EXPLODE_FACTOR * start and loss > EXPLODE_MIN


def floor_from(warmup_steps: int, total_pred_steps: int) -> int:
    """The prediction steps after which the majority floor is judged."""
    return max(FLOOR_MIN_STEPS, warmup_steps, math.ceil(FLOOR_PATIENCE * total_pred_steps))


def verdict(
    metrics: dict,
    *,
    start: float | None,
    floor: Floor | None,
    pred_steps: int,
    warmup_steps: int = 0,
    total_pred_steps: int = 0,
) -> str | None:
    """Why the epoch in ``metrics`` (its ``epoch``, ``train_loss`` and validation scores) shows a diverged run, or None:
    its mean training loss non-finite (any step's NaN makes the mean NaN), or exploding against ``start`` (its stage's
    first step's loss); or, once ``pred_steps`` steps trained the prediction (at least ``FLOOR_MIN_STEPS``, the
    prediction stage's ``warmup_steps`` and ``FLOOR_PATIENCE`` of its ``total_pred_steps``), its validation score at
    or below the ``floor`` (or NaN) with its predictions collapsed to one answer (``collapsed``)."""
    epoch, loss = metrics["epoch"], metrics.get("train_loss")
    bad = [k for k, v in metrics.items() if k.startswith("train_") and isinstance(v, float) and not math.isfinite(v)]
    if bad:
        return f"diverged: training loss not finite at epoch {epoch} ({', '.join(f'{k}={metrics[k]}' for k in bad)})"
    if loss is not None and start is not None and exploding(loss, start):
        times = f"{loss / start:.0f}x the {start:.4g} of its first step"
        return f"diverged: training loss {loss:.4g} at epoch {epoch}, {times}"
    score = metrics.get(floor.metric) if floor else None
    if floor is None or score is None or pred_steps < floor_from(warmup_steps, total_pred_steps):
        return None
    if math.isfinite(score) and score > floor.score + FLOOR_MARGIN:
        return None
    if math.isfinite(score) and not collapsed(metrics):  # under the floor, still telling the classes apart
        return None
    where = "below" if math.isfinite(score) and score < floor.score - 1e-9 else "at"
    name = floor.metric.replace("_", " ", 1)
    share = f", {metrics[SHARE]:.0%} of its answers one class" if SHARE in metrics else ""
    return (
        f"diverged: {name} {score:.4f} {where} the majority floor {floor.score:.4f} ({floor.answer}{share}) after "
        f"epoch {epoch}"
    )
