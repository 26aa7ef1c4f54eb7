"""``two_stage``: TinyBERT's transformer losses, then MSE on the logits."""

from __future__ import annotations

from raydistill.distill.methods.base import logit_mse
from raydistill.distill.methods.registry import register
from raydistill.distill.methods.tinybert import _Intermediate


@register("two_stage")
class TwoStage(_Intermediate):
    """FitNets-style two-stage task distillation (the Korean RoBERTa recipe): transformer losses first,
    then the prediction loss as MSE on logits (mean of start/end MSE for span QA)."""

    description = "two-stage: TinyBERT's layer losses, then MSE on the logits (the Korean RoBERTa recipe)"

    def losses(self, stage, s, t, batch, obj, *, world=1):
        if stage == "intermediate":
            return self.transformer_losses(s, t, batch, obj, world=world)
        pred = logit_mse(self.kind, s, t, batch, world=world)
        return {"pred_mse": pred, "loss": pred}
