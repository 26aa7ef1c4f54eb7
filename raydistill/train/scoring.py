"""A student's metrics on the validation split (``val_*``, what chooses) and the dev set (``eval_*``, what reports),
computed on rank 0 after every epoch (the task's own scoring; MLM loss and accuracy for general distillation)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from raydistill.common.progress import Progress
from raydistill.tasks.encode import collate, example_predictions, lengths, score_predictions
from raydistill.train.diverge import answer_metrics
from raydistill.train.step import forward, to_device


def dev_metrics(model, data, batch_size: int, device, progress: Progress | None = None) -> dict:
    """``eval_<metric>`` of ``model`` on ``data``'s dev set (a ``loop.RunData``), and ``val_<metric>`` on its validation
    split when it has one. ``progress`` counts the rows scored (both splits)."""
    dev = Split(data.eval_examples, data.eval_encoded, "eval")
    out = split_metrics(model, data.task, dev, data.pad_id, batch_size, device, progress=progress)
    if data.val_examples:
        val = Split(data.val_examples, data.val_encoded, "val")
        out.update(split_metrics(model, data.task, val, data.pad_id, batch_size, device, progress=progress))
    if progress:
        progress.done()
    return out


@dataclass(frozen=True)
class Split:
    """One split to score: its ``examples``, the same ``encoded`` by ``tasks.encode.encode``, and the ``prefix`` its
    metrics carry (``eval``: dev; ``val``: the validation split)."""

    examples: list
    encoded: Any
    prefix: str = "eval"


def split_metrics(model, task, split: Split, pad_id: int, batch_size: int, device, progress=None) -> dict:
    """``<prefix>_<metric>`` of ``model`` on one ``split``."""
    examples, encoded, prefix = split.examples, split.encoded, split.prefix
    if task.kind == "mlm":
        loss, correct, n = _mlm_sums(model, encoded, pad_id, batch_size, device, progress)
        return {f"{prefix}_mlm_loss": loss / max(n, 1), f"{prefix}_mlm_accuracy": correct / max(n, 1)}
    outs = model_outputs(model, task, encoded, pad_id, batch_size, device, progress)
    by_class = prefix == "eval"  # each class's recall on dev, what the summary's table shows; val only chooses
    preds, refs = example_predictions(task, examples, encoded, outs)
    out = score_predictions(task, preds, refs, by_class)
    # on val, what tells a collapsed run (train/diverge.py) from one still learning under the majority floor
    if prefix == "val" and task.kind in ("classification", "regression"):
        out.update(answer_metrics(task, preds, refs))
    return {f"{prefix}_{k}": float(v) for k, v in out.items()}


def model_outputs(model, task, encoded, pad_id: int, batch_size: int, device, progress: Progress | None = None) -> dict:
    """The model's predictions on every encoded row of a labelled task, in the layout ``tasks.encode.score`` reads:
    one array per output (logits, or QA start/end), rows cut to their real length for token and QA tasks."""
    order = by_length(encoded.features)
    outs: dict[str, list] = {}
    for batch, o in _forward_batches(model, encoded, pad_id, batch_size, device, order, progress):
        lengths = batch["attention_mask"].sum(-1).tolist()
        for name, t in o.predictions().items():
            t = t.float().cpu().numpy()
            rows = [t[i, : lengths[i]] for i in range(len(t))] if task.kind in ("token", "qa") else list(t)
            outs.setdefault(name, []).extend(rows)
    back = np.argsort(order)  # the rows in the split's own order again
    outs = {k: [v[i] for i in back] for k, v in outs.items()}
    return outs if task.kind in ("token", "qa") else {k: np.stack(v) for k, v in outs.items()}


def by_length(features: list[dict]) -> list[int]:
    """Row indices, longest first (ties in row order): batches of rows of like length pad little. Scores do not
    depend on the order rows are run in; each row's output is the same (attention masks the padding)."""
    n = lengths(features)
    return sorted(range(len(n)), key=lambda i: -n[i])


def _mlm_sums(model, encoded, pad_id: int, batch_size: int, device, progress=None) -> list[float]:
    """Loss sum, correct predictions and count over the masked pieces (general distillation)."""
    sums = torch.zeros(3, device=device)
    order = by_length(encoded.features)
    for batch, o in _forward_batches(model, encoded, pad_id, batch_size, device, order, progress):
        sel = batch["labels"] != -100
        logits, gold = o.logits[sel].float(), batch["labels"][sel]
        sums += torch.stack(
            [
                torch.nn.functional.cross_entropy(logits, gold, reduction="sum"),
                (logits.argmax(-1) == gold).sum().float(),
                sel.sum().float(),
            ]
        )
    return sums.tolist()


def _forward_batches(model, encoded, pad_id: int, batch_size: int, device, order: list[int], progress=None):
    """(batch, outputs) for every ``batch_size`` rows of ``encoded`` taken in ``order``, the model in eval mode and
    back in train mode; ``progress`` advanced by the rows of each batch."""
    model.eval()
    try:
        with torch.no_grad():
            for start in range(0, len(order), batch_size):
                rows = [encoded.features[i] for i in order[start : start + batch_size]]
                batch = to_device(collate(rows, pad_id), device)
                yield batch, forward(model, batch, need_hidden=False)
                if progress:
                    progress.update(items=len(rows), steps=len(rows))
    finally:
        model.train()
