"""A student's metrics on the validation split (``val_*``, what chooses) and the dev set (``eval_*``, what reports),
computed on rank 0 after every epoch (the task's own scoring; MLM loss and accuracy for general distillation)."""
from __future__ import annotations

import numpy as np
import torch

from .step import forward, to_device
from .tasks.encode import collate, score


def dev_metrics(model, data, batch_size: int, device) -> dict:
    """``eval_<metric>`` of ``model`` on ``data``'s dev set (a ``loop.Data``), and ``val_<metric>`` on its validation
    split when it has one."""
    out = split_metrics(model, data.task, data.eval_examples, data.eval_encoded, data.pad_id, batch_size, device)
    if getattr(data, "val_examples", None):
        out.update(split_metrics(model, data.task, data.val_examples, data.val_encoded, data.pad_id, batch_size,
                                 device, prefix="val"))
    return out


@torch.no_grad()
def split_metrics(model, task, examples, encoded, pad_id: int, batch_size: int, device, prefix: str = "eval") -> dict:
    """``<prefix>_<metric>`` of ``model`` on one split's ``examples`` (``encoded`` by ``tasks.encode.encode``)."""
    model.eval()
    kind = task.kind
    feats = encoded.features
    outs: dict[str, list] = {}
    mlm = torch.zeros(3, device=device)  # loss sum, correct, count over masked pieces
    for start in range(0, len(feats), batch_size):
        batch = to_device(collate(feats[start:start + batch_size], pad_id), device)
        o = forward(model, batch, need_hidden=False)
        if kind == "mlm":
            sel = batch["labels"] != -100
            logits, gold = o.logits[sel].float(), batch["labels"][sel]
            mlm += torch.stack([torch.nn.functional.cross_entropy(logits, gold, reduction="sum"),
                                (logits.argmax(-1) == gold).sum().float(), sel.sum().float()])
            continue
        lengths = batch["attention_mask"].sum(-1).tolist()
        for name, t in o.predictions().items():
            t = t.float().cpu().numpy()
            rows = [t[i, : lengths[i]] for i in range(len(t))] if kind in ("token", "qa") else list(t)
            outs.setdefault(name, []).extend(rows)
    model.train()
    if kind == "mlm":
        loss, correct, n = mlm.tolist()
        return {f"{prefix}_mlm_loss": loss / max(n, 1), f"{prefix}_mlm_accuracy": correct / max(n, 1)}
    if kind not in ("token", "qa"):
        outs = {k: np.stack(v) for k, v in outs.items()}
    return {f"{prefix}_{k}": float(v) for k, v in score(task, examples, encoded, outs).items()}
