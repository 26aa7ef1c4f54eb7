"""Task metrics, all on a 0-1 scale (KorQuAD EM/F1 included; multiply by 100 for the official leaderboard numbers).

Library implementations are used where one exists (scikit-learn, scipy, seqeval); KorQuAD's EM/char-F1 is a port of
the official ``KorQuAD v1.0 evaluate-v1.0.py`` (SQuAD v1.1 script with Korean punctuation and character-level F1).
Undefined correlations (constant predictions) are reported as 0.0 rather than NaN so sweeps can still rank trials.
"""

from __future__ import annotations

import math
import re
import string
from collections import Counter

import numpy as np


def accuracy(preds, labels) -> float:
    from sklearn.metrics import accuracy_score

    return float(accuracy_score(labels, preds))


def f1(preds, labels) -> float:
    """Binary F1 of the positive class (label 1), as GLUE reports for MRPC and QQP."""
    from sklearn.metrics import f1_score

    return float(f1_score(labels, preds, zero_division=0))


def macro_f1(preds, labels, n_labels: int = 0) -> float:
    """F1 per class, averaged unweighted (every class counts the same, however rare). With ``n_labels``, over the
    task's whole label set (sklearn's ``labels=``): a class the model never predicts counts 0 even where dev holds none
    of it, so a student and its teacher are averaged over the same classes whatever the dev rows happen to hold."""
    from sklearn.metrics import f1_score

    over = list(range(n_labels)) if n_labels else None
    return float(f1_score(labels, preds, labels=over, average="macro", zero_division=0))


def mcc(preds, labels) -> float:
    from sklearn.metrics import matthews_corrcoef

    return float(matthews_corrcoef(labels, preds))


def _finite(x) -> float:
    x = float(x)
    return 0.0 if math.isnan(x) else x


def pearson(preds, labels) -> float:
    import warnings

    from scipy.stats import pearsonr

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return _finite(pearsonr(np.asarray(preds, float), np.asarray(labels, float))[0])


def spearman(preds, labels) -> float:
    import warnings

    from scipy.stats import spearmanr

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return _finite(spearmanr(np.asarray(preds, float), np.asarray(labels, float))[0])


def entity_scores(pred_tags: list[list[str]], true_tags: list[list[str]]) -> dict[str, float]:
    """Entity-level micro precision/recall/F1 from seqeval's default (conlleval-compatible) mode."""
    from seqeval.metrics import f1_score, precision_score, recall_score

    return {
        "f1": float(f1_score(true_tags, pred_tags, zero_division=0)),
        "precision": float(precision_score(true_tags, pred_tags, zero_division=0)),
        "recall": float(recall_score(true_tags, pred_tags, zero_division=0)),
    }


# --------------------------------------------------------------------------- KorQuAD v1.0 (official script, ported)

_KORQUAD_STRIP = re.compile("['\"《》<>〈〉()‘’]")
_PUNCT = set(string.punctuation)


def normalize_answer(s: str) -> str:
    """Official KorQuAD normalisation: quotes/brackets to spaces, lower-case, drop ASCII punctuation, squash spaces."""
    s = _KORQUAD_STRIP.sub(" ", s).lower()
    s = "".join(ch for ch in s if ch not in _PUNCT)
    return " ".join(s.split())


def korquad_f1(prediction: str, ground_truth: str) -> float:
    """Character-level F1 over the normalised strings with spaces removed (the official KorQuAD F1)."""
    pred = [c for tok in normalize_answer(prediction).split() for c in tok]
    gold = [c for tok in normalize_answer(ground_truth).split() for c in tok]
    same = sum((Counter(pred) & Counter(gold)).values())
    if same == 0:
        return 0.0
    p, r = same / len(pred), same / len(gold)
    return 2 * p * r / (p + r)


def korquad_em(prediction: str, ground_truth: str) -> float:
    return float(normalize_answer(prediction) == normalize_answer(ground_truth))


def qa_scores(predictions: list[str], answers: list[list[str]]) -> dict[str, float]:
    """Mean over questions of the best EM and F1 against any gold answer (0-1 scale)."""
    if not predictions:
        return {"exact_match": 0.0, "f1": 0.0}
    em = [max((korquad_em(p, g) for g in gold), default=0.0) for p, gold in zip(predictions, answers, strict=True)]
    f = [max((korquad_f1(p, g) for g in gold), default=0.0) for p, gold in zip(predictions, answers, strict=True)]
    return {"exact_match": float(np.mean(em)), "f1": float(np.mean(f))}


# --------------------------------------------------------------------------- every class visible (issue 48)


def per_class(task) -> bool:
    """Whether a task has classes to show one by one (classification into named labels; not regression, tags, QA)."""
    return task.kind == "classification" and len(task.label_names) >= 2


def class_keys(names) -> list[str]:
    """Each class name as it can stand in an MLflow metric key (``eval_recall_<key>``): characters other than
    letters, digits, ``_``, ``.`` and ``-`` become ``_``; a key two names would share gets the class's index."""
    keys = [re.sub(r"[^A-Za-z0-9_.-]", "_", str(n)) or "_" for n in names]
    return [k if keys.count(k) == 1 else f"{k}_{i}" for i, k in enumerate(keys)]


def class_recall(task, preds, refs) -> dict[str, float]:
    """``recall_<key>`` of every class dev holds (the share of its rows predicted as it); a class with no dev row
    has no recall and no key (0 would read as a failure the model had no chance to make)."""
    gold = np.asarray(refs, dtype=int)
    hit = np.asarray(preds, dtype=int) == gold
    out = {}
    for i, key in enumerate(class_keys(task.label_names)):
        rows = gold == i
        if rows.any():
            out[f"recall_{key}"] = float(hit[rows].mean())
    return out


def class_support(task, refs) -> dict[str, int]:
    """``support_<key>``: how many rows of each class ``refs`` holds (0 included)."""
    gold = np.asarray(refs, dtype=int)
    return {f"support_{k}": int((gold == i).sum()) for i, k in enumerate(class_keys(task.label_names))}


def reported(task) -> tuple[str, ...]:
    """What ``compute`` returns for a task: its metrics, and macro-F1 beside them for every task with classes (so a
    class the model drops shows in a number even where the task's own metric is accuracy)."""
    extra = ("macro_f1",) if per_class(task) and "macro_f1" not in task.metrics else ()
    return (*task.metrics, *extra)


# --------------------------------------------------------------------------- dispatch

SCALAR = {"accuracy": accuracy, "f1": f1, "macro_f1": macro_f1, "mcc": mcc, "pearson": pearson, "spearman": spearman}


def compute(task, preds, refs) -> dict[str, float]:
    """``task.metrics`` for predictions vs references.

    classification: class ids; regression: floats; token: lists of tag names per sentence;
    qa: predicted answer strings vs lists of gold answer strings. Macro-F1 comes beside a classification task's own
    metrics (``reported``), over the task's whole label set.
    """
    if task.kind == "token":
        scores = entity_scores(preds, refs)
    elif task.kind == "qa":
        scores = qa_scores(preds, refs)
    else:
        scores = {m: SCALAR[m](preds, refs) for m in reported(task) if m != "macro_f1"}
        if "macro_f1" in reported(task):
            scores["macro_f1"] = macro_f1(preds, refs, len(task.label_names) if per_class(task) else 0)
    return {m: scores[m] for m in reported(task)}


def constant_answer(kind: str, labels: list):
    """What a model that learned only the label prior answers for every row: the most common label (ties: the lowest,
    whatever the labels' order), or a regression's mean."""
    if kind == "regression":
        return sum(float(x) for x in labels) / len(labels)
    return max(sorted(set(labels)), key=labels.count)


def constant_floor(task, gold: list) -> tuple[float, object] | None:
    """The best the task's main metric gets from one answer given for every row of ``gold`` — what a collapsed model
    scores —, and that answer. Every label present is tried (accuracy: the most common wins; binary F1: the positive
    class, however rare; MCC: 0 for all); a regression's constant (the mean) correlates 0. None where a constant answer
    means nothing (token, QA, MLM) or there are no labels."""
    if task.kind not in ("classification", "regression") or not gold:
        return None
    answers = [constant_answer(task.kind, gold)] if task.kind == "regression" else sorted(set(gold))
    scored = [(compute(task, [a] * len(gold), gold)[task.main_metric], a) for a in answers]
    return max(scored, key=lambda s: s[0])  # ties: the first, the lowest label
