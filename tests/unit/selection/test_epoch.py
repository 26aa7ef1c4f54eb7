"""The best-epoch rule (``selection.epoch.best_epoch``): the run's student is the epoch its val score chose."""

from __future__ import annotations

import math

from raydistill.selection.epoch import best_epoch


def h(epoch: int, val: float, stage: str = "distill", loss: float = 0.5) -> dict:
    return {"epoch": epoch, "val_accuracy": val, "stage": stage, "train_loss": loss}


def test_the_highest_val_wins_the_earliest_on_ties_and_never_a_nan():
    hist = [h(1, 0.7), h(2, 0.8), h(3, 0.8), h(4, math.nan), h(5, 0.9, loss=math.inf)]
    assert best_epoch(hist, "val_accuracy")["epoch"] == 2


def test_a_method_with_stages_chooses_among_its_last_stages_epochs():
    # TinyBERT: the intermediate stage's epochs answer with a head the method has not trained (here the majority
    # class, scoring higher on val than the prediction stage's real answers): the last stage's best is the student
    hist = [h(1, 0.70, "intermediate"), h(2, 0.69, "intermediate"), h(3, 0.64, "pred"), h(4, 0.66, "pred")]
    assert best_epoch(hist, "val_accuracy", "pred")["epoch"] == 4
    assert best_epoch(hist, "val_accuracy")["epoch"] == 1  # without a last stage named: every epoch


def test_a_run_that_never_reached_its_last_stage_chooses_among_what_it_has():
    hist = [h(1, 0.60, "intermediate"), h(2, 0.65, "intermediate")]
    assert best_epoch(hist, "val_accuracy", "pred")["epoch"] == 2
