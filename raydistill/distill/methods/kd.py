"""``kd``: Hinton et al.'s knowledge distillation, and ``kd_losses``, its objective, which the staged methods'
prediction stage reuses."""

from __future__ import annotations

import torch

from raydistill.distill.methods.base import Method, Outputs, gold_loss, soft_loss
from raydistill.distill.methods.registry import register


@register("kd")
class HintonKD(Method):
    """Hinton et al. 2015: α·T²·KL(p_t^T ‖ p_s^T) + (1−α)·hard."""

    description = "Hinton KD: the teacher's softened predictions (T²·KL) beside the gold labels, weighed by alpha"

    def losses(self, stage, s, t, batch, obj, *, world=1):
        return kd_losses(self, s, t, batch, world=world)


def kd_losses(m: Method, s: Outputs, t: Outputs, batch: dict, *, world: int = 1) -> dict[str, torch.Tensor]:
    """Hinton KD's losses with method ``m``'s task kind, T and α: what ``HintonKD`` optimises, and the prediction
    stage of the staged methods (TinyBERT, MiniLM)."""
    soft = soft_loss(m.kind, s, t, m.d.temperature, batch, world=world)
    out = {"soft": soft}
    total = m.d.alpha * soft
    if m.d.alpha < 1:
        out["hard"] = gold_loss(m.kind, s, batch, world=world)
        total = total + (1 - m.d.alpha) * out["hard"]
    out["loss"] = total
    return out
