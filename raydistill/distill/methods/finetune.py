"""``finetune``: no teacher, gold labels only."""

from __future__ import annotations

from raydistill.distill.methods.base import Method, gold_loss
from raydistill.distill.methods.registry import register


@register("finetune")
class FineTune(Method):
    """No teacher: gold labels only. Used for teacher fine-tuning and the no-teacher student baseline."""

    description = "no teacher: gold labels only (a teacher's fine-tune, the labels-only student baseline)"

    uses_teacher = False

    def losses(self, stage, s, t, batch, obj, *, world=1):
        hard = gold_loss(self.kind, s, batch, world=world)
        return {"loss": hard, "hard": hard}
