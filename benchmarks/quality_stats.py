"""The noise of a dev score, for benchmarks/quality.py: each reported model's per-example dev predictions, a bootstrap
95% interval over dev examples of its score and of its difference to another model on the same rows, and the
verdict rule: "beats" only where the difference's interval excludes 0 and the difference exceeds the other row's seeds'
range; otherwise "ties"."""

from __future__ import annotations

import statistics


def dev_predictions(model_dir: str, task_name: str, data_dir: str, max_length: int = 128) -> tuple[list, list]:
    """(predictions, gold) of the model in ``model_dir`` on the task's whole dev set: class ids, or scores for a
    regression (classification and regression tasks)."""
    import torch
    from transformers import AutoTokenizer

    from raydistill.models.teacher import load_model
    from raydistill.tasks import get_task
    from raydistill.tasks.encode import encode
    from raydistill.train.scoring import model_outputs

    task = get_task(task_name)
    examples = task.loader(task, data_dir, task.eval_split)
    tok = AutoTokenizer.from_pretrained(model_dir)
    enc = encode(task, examples, tok, max_length)
    arr = model_outputs(load_model(model_dir, task.kind), task, enc, tok.pad_token_id or 0, 64, torch.device("cpu"))[
        "logits"
    ]
    preds = arr.reshape(-1).tolist() if task.kind == "regression" else arr.argmax(-1).tolist()
    gold = [examples[enc.example_index[i]]["label"] for i in range(len(enc.features))]
    return preds, gold


def score(task_name: str, preds: list, gold: list, idx=None) -> float:
    """The task's main metric of ``preds`` on the rows ``idx`` (all rows when None)."""
    from raydistill.tasks import get_task
    from raydistill.tasks.metrics import compute

    task = get_task(task_name)
    idx = range(len(gold)) if idx is None else idx
    return compute(task, [preds[i] for i in idx], [gold[i] for i in idx])[task.main_metric]


def interval(task_name: str, preds: list, gold: list, other: list | None = None, n: int = 1000) -> tuple[float, float]:
    """Bootstrap 95% interval over dev examples of the score of ``preds`` (or of its difference to ``other``'s score
    on the same resampled rows)."""
    from raydistill.config.selection import bootstrap_ci

    if other is None:
        return bootstrap_ci(lambda idx: score(task_name, preds, gold, idx), len(gold), n=n)
    return bootstrap_ci(
        lambda idx: score(task_name, preds, gold, idx) - score(task_name, other, gold, idx), len(gold), n=n
    )


def verdict(diff_ci: tuple[float, float], diff: float, seeds_range: float = 0.0) -> str:
    """The search row against another: "beats" where the paired interval of (search − other) lies above 0 and the
    difference exceeds the other row's seeds' range; "loses to" the mirror image; else "ties"."""
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


def spearman(x: list[float], y: list[float]) -> float | None:
    """Spearman's rank correlation (the task metric's, scipy's, average ranks for ties); None where fewer than 3 pairs
    or a constant side, where the task metric would say 0.0."""
    from raydistill.tasks.metrics import spearman as rank_correlation

    return None if len(x) < 3 or len(set(x)) < 2 or len(set(y)) < 2 else rank_correlation(x, y)


def val_dev_agreement(uri: str, experiment: str, sweep: str, metric: str) -> dict:
    """How well the validation split that chose predicts dev across one sweep's runs (every trial, those ASHA stopped
    included, and the confirmations): Spearman's rho of best_val_<metric> against best_eval_<metric>. Near 0 or
    below, choosing on val cannot do better than luck on dev, however good the search."""
    from raydistill.tracking.track import Tracker

    c = Tracker(uri).client
    exp = c.get_experiment_by_name(experiment)
    runs = (
        c.search_runs([exp.experiment_id], max_results=5000, filter_string=f"tags.`raydistill.sweep` = '{sweep}'")
        if exp
        else []
    )
    pairs = [
        (r.data.metrics[f"best_val_{metric}"], r.data.metrics[f"best_eval_{metric}"])
        for r in runs
        if f"best_val_{metric}" in r.data.metrics and f"best_eval_{metric}" in r.data.metrics
    ]
    return {"runs": len(pairs), "rho": spearman([p[0] for p in pairs], [p[1] for p in pairs])}
