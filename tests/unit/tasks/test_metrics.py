"""Metrics against values worked out by hand or taken from the libraries' documented examples (0-1 scale)."""

from __future__ import annotations

import math

import pytest

from raydistill.tasks import get_task
from raydistill.tasks import metrics as M

# confusion matrix TP=3, TN=2, FP=1, FN=1
LABELS = [1, 1, 1, 1, 0, 0, 0]
PREDS = [1, 1, 1, 0, 1, 0, 0]


def test_accuracy_f1_mcc_by_hand():
    assert M.accuracy(PREDS, LABELS) == pytest.approx(5 / 7)
    assert M.f1(PREDS, LABELS) == pytest.approx(2 * 3 / (2 * 3 + 1 + 1))  # 0.75
    # (TP*TN - FP*FN) / sqrt((TP+FP)(TP+FN)(TN+FP)(TN+FN)) = (6 - 1) / sqrt(4*4*3*3) = 5/12
    assert M.mcc(PREDS, LABELS) == pytest.approx(5 / 12)
    assert M.mcc([1, 1, 1], [1, 0, 1]) == 0.0  # constant prediction: defined as 0


def test_correlations_by_hand():
    assert M.pearson([1, 2, 3], [1, 3, 2]) == pytest.approx(0.5)  # cov 1 / sqrt(2 * 2)
    assert M.pearson([1, 2, 3, 4], [2, 4, 6, 8]) == pytest.approx(1.0)
    assert M.spearman([1, 2, 3, 4], [1, 3, 2, 4]) == pytest.approx(1 - 6 * 2 / (4 * 15))  # 0.8
    assert M.spearman([1, 2, 3, 4], [1, 10, 100, 1000]) == pytest.approx(1.0)
    assert M.pearson([2, 2, 2], [1, 2, 3]) == 0.0  # undefined -> 0, not NaN


def test_seqeval_documented_example():
    # seqeval README: f1_score(y_true, y_pred) == 0.50
    y_true = [["O", "O", "O", "B-MISC", "I-MISC", "I-MISC", "O"], ["B-PER", "I-PER", "O"]]
    y_pred = [["O", "O", "B-MISC", "I-MISC", "I-MISC", "I-MISC", "O"], ["B-PER", "I-PER", "O"]]
    s = M.entity_scores(y_pred, y_true)
    assert s == pytest.approx({"f1": 0.5, "precision": 0.5, "recall": 0.5})
    # conlleval-style default mode: an entity may start with I-
    assert M.entity_scores([["I-PS", "I-PS", "O"]], [["B-PS", "I-PS", "O"]])["f1"] == 1.0


def test_korquad_normalisation_and_char_f1():
    assert M.normalize_answer("《서울》 (특별시)!") == "서울 특별시"
    assert M.korquad_em("'서울'", "서울") == 1.0
    assert M.korquad_em("대한 민국", "대한민국") == 0.0
    assert M.korquad_f1("대한 민국", "대한민국") == 1.0  # F1 is over characters, spaces ignored
    # pred 5 chars, gold 2 chars, 2 in common: P = 2/5, R = 1, F1 = 2*0.4/1.4
    assert M.korquad_f1("서울특별시", "서울") == pytest.approx(4 / 7)
    # 1394년 vs 1394: 4 common chars, P = 4/5, R = 1 -> 8/9
    assert M.korquad_f1("1394년", "1394") == pytest.approx(8 / 9)
    assert M.korquad_f1("부산", "서울") == 0.0


def test_korquad_partial_overlap():
    # 한강 (2 chars) vs 낙동강 (3 chars): common {강} = 1; P = 1/2, R = 1/3, F1 = 2*(1/6)/(5/6) = 0.4
    assert M.korquad_f1("한강", "낙동강") == pytest.approx(0.4)
    s = M.qa_scores(["서울특별시", "한강"], [["서울", "서울특별시"], ["낙동강"]])
    assert s["f1"] == pytest.approx((1.0 + 0.4) / 2) and s["exact_match"] == 0.5


def test_compute_reports_task_metrics():
    # a task with classes: macro-F1 beside its own metrics (issue 48)
    assert set(M.compute(get_task("mrpc"), PREDS, LABELS)) == {"accuracy", "f1", "macro_f1"}
    assert M.compute(get_task("cola"), PREDS, LABELS) == {
        "mcc": pytest.approx(5 / 12),
        "macro_f1": pytest.approx((2 * 2 / (2 * 2 + 1 + 1) + 0.75) / 2),
    }
    r = M.compute(get_task("stsb"), [0.1, 0.2, 0.3], [1.0, 2.0, 3.5])
    assert set(r) == {"pearson", "spearman"} and r["spearman"] == pytest.approx(1.0)
    r = M.compute(get_task("klue_ner"), [["B-QT", "O"]], [["B-QT", "O"]])
    assert r == {"f1": 1.0, "precision": 1.0, "recall": 1.0}
    assert all(not math.isnan(v) for v in M.compute(get_task("korquad"), ["x"], [["y"]]).values())


# ------------------------------------------------------------------ every class visible (issue 48)

FOUR = ("DESC", "ENTY", "HUM", "ABBR")
GOLD4 = [0, 0, 0, 1, 1, 2, 2, 2, 3, 3]
PRED4 = [0, 0, 1, 1, 1, 2, 2, 0, 0, 1]  # ABBR (3) never predicted


def _task4():
    from dataclasses import replace

    return replace(get_task("sst2"), label_names=FOUR, metrics=("accuracy",), main_metric="accuracy")


def test_macro_f1_matches_sklearn_over_the_label_set():
    from sklearn.metrics import f1_score

    want = f1_score(GOLD4, PRED4, average="macro", labels=[0, 1, 2, 3], zero_division=0)
    assert M.macro_f1(PRED4, GOLD4, 4) == pytest.approx(want)
    per = f1_score(GOLD4, PRED4, average=None, labels=[0, 1, 2, 3], zero_division=0)
    assert per[3] == 0.0  # a class never predicted: its F1 is 0 and it weighs like the others
    # a label dev does not hold (4 of 5), never predicted: averaged in as sklearn's labels= does
    want5 = f1_score(GOLD4, PRED4, average="macro", labels=[0, 1, 2, 3, 4], zero_division=0)
    assert M.macro_f1(PRED4, GOLD4, 5) == pytest.approx(want5) and want5 == pytest.approx(per.sum() / 5)
    # a task's compute uses its whole label set, whatever dev holds
    only3 = [g for g in GOLD4 if g != 3]
    p3 = [p for p, g in zip(PRED4, GOLD4, strict=True) if g != 3]
    want3 = f1_score(only3, p3, average="macro", labels=[0, 1, 2, 3], zero_division=0)
    assert M.compute(_task4(), p3, only3)["macro_f1"] == pytest.approx(want3)
    assert want3 != pytest.approx(f1_score(only3, p3, average="macro", zero_division=0))  # not over present labels


def test_class_recall_and_support():
    from sklearn.metrics import recall_score

    t = _task4()
    r = M.class_recall(t, PRED4, GOLD4)
    want = recall_score(GOLD4, PRED4, average=None, labels=[0, 1, 2, 3], zero_division=0)
    assert r == {f"recall_{n}": pytest.approx(w) for n, w in zip(FOUR, want, strict=True)}
    assert r["recall_ABBR"] == 0.0
    assert M.class_support(t, GOLD4) == {"support_DESC": 3, "support_ENTY": 2, "support_HUM": 3, "support_ABBR": 2}
    # a class dev lacks has no recall (not a 0 it had no chance to earn)
    assert "recall_ABBR" not in M.class_recall(t, [0, 1], [0, 1])
    assert not M.per_class(get_task("stsb")) and M.per_class(t)


def test_class_keys_are_mlflow_valid_and_unique():
    from mlflow.utils.validation import _validate_metric_name

    keys = M.class_keys(("très bien", "a/b", "a b", "x:y", "", "ok"))
    assert len(set(keys)) == 6 and keys[-1] == "ok"
    for k in keys:
        _validate_metric_name(f"best_eval_recall_{k}")
        assert all(c.isascii() and (c.isalnum() or c in "_.-") for c in k)
