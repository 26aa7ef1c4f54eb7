"""``distilbert``: KD plus the cosine of the last hidden states (plus MLM in general distillation)."""

from __future__ import annotations

from raydistill.distill import losses as L
from raydistill.distill.methods.base import Needs
from raydistill.distill.methods.kd import HintonKD
from raydistill.distill.methods.registry import register


@register("distilbert")
class DistilBERT(HintonKD):
    """Sanh et al. 2019: α·KD + (1−α)·hard + α_cos·cosine(last hidden states) on a task; general distillation
    (pre-training) is α·KD + α_mlm·MLM + α_cos·cosine with the paper's α=5, α_mlm=2, α_cos=1 at T=2."""

    description = "DistilBERT: KD + cosine of the last hidden states (+ MLM in general distillation)"

    default_init = "every_other"  # the paper's student: every other teacher layer, top layer kept
    general_defaults = {"temperature": 2.0, "alpha": 5.0, "alpha_mlm": 2.0}  # DistilBERT's train.py defaults

    def projected_layers(self, n_layers):
        return {n_layers} if self.d.alpha_cos > 0 else set()

    def needs(self, stage):
        cos = self.d.alpha_cos > 0
        return Needs(hidden=cos, teacher_full=cos or self.kind == "mlm", teacher_hidden=frozenset({-1} if cos else ()))

    def losses(self, stage, s, t, batch, obj, *, world=1):
        if self.kind == "mlm":
            out = self._mlm(s, t, batch, world)
        else:
            out = super().losses(stage, s, t, batch, obj, world=world)
        if self.d.alpha_cos > 0:
            s_h, t_h = s.hidden[-1], t.hidden[-1]
            if s_h.shape[-1] != t_h.shape[-1]:
                s_h = obj.project(len(s.hidden) - 1, s_h)
            out["cos"] = L.cosine_hidden(s_h, t_h, batch["attention_mask"], world=world)
            out["loss"] = out["loss"] + self.d.alpha_cos * out["cos"]
        return out

    def _mlm(self, s, t, batch, world):
        soft = L.soft_ce(s.logits, t.logits, self.d.temperature, mask=batch["attention_mask"], world=world)
        mlm = L.mlm_loss(s.logits, batch["labels"], world=world)
        return {"soft": soft, "mlm": mlm, "loss": self.d.alpha * soft + self.d.alpha_mlm * mlm}
