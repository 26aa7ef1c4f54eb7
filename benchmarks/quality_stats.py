"""The noise of a dev score, for benchmarks/quality.py: each reported model's per-example dev predictions, one model
against another (the difference and its paired interval from the same pair of runs), and how well validation
predicts dev across a sweep's runs. The intervals and the verdict rule ("beats" only where the paired
interval excludes 0 and the difference exceeds the other row's seeds' range; otherwise "ties") are the package's
(``raydistill/results/significance.py``, which a sweep's labels-only control uses too), re-exported here."""

from __future__ import annotations

from raydistill.results.significance import compare, interval, median_index, score, seeds_summary, verdict

__all__ = [
    "PAIR_NOTE",
    "compare",
    "dev_predictions",
    "interval",
    "median_index",
    "score",
    "seeds_summary",
    "spearman",
    "val_dev_agreement",
    "verdict",
]


PAIR_NOTE = (
    "the difference and its paired 95% interval both come from one pair of runs re-scored on the same dev rows, each "
    "side's representative (its median seed on val; a single run stands for itself), not from the medians of dev, "
    "which may be other seeds'"
)


def dev_predictions(model_dir: str, task_name: str, data_dir: str, max_length: int = 128) -> tuple[list, list]:
    """(predictions, gold) of the model in ``model_dir`` on the task's whole dev set: class ids, or scores for a
    regression (classification and regression tasks)."""
    import torch
    from transformers import AutoTokenizer

    from raydistill.models.encoder import load_model
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
        if f"best_val_{metric}" in r.data.metrics
        and f"best_eval_{metric}" in r.data.metrics
        and not r.data.tags.get("raydistill.control_of")  # the labels-only control: not a run the search chose among
    ]
    return {"runs": len(pairs), "rho": spearman([p[0] for p in pairs], [p[1] for p in pairs])}
