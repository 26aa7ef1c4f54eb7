"""Distillation methods: which features each needs and how its losses combine (string-keyed registry ``METHODS``,
complete once this module is imported). The core (registry, ``Outputs``, ``Needs``, prediction losses, ``Method``,
``finetune``, ``kd``) lives in ``core.py``, the two-stage methods (``tinybert``, ``two_stage``, ``minilm``) in
``staged.py``; this module adds ``distilbert`` and ``pkd`` and is where every caller imports them from.

Weights follow ``raydistill.config.schema.LOSS_CONVENTION``: α weighs the soft (teacher-prediction) loss,
(1 − α) the hard loss, β the intermediate loss; the soft loss is T²-scaled KL. Components are returned
unweighted (logged as ``train_<name>``) next to the weighted ``loss`` that is optimised.
"""

from __future__ import annotations

from raydistill.distill import losses as L
from raydistill.distill.core import (
    METHODS,
    FineTune,
    HintonKD,
    Method,
    Needs,
    Outputs,
    get_method,
    hard_loss,
    logit_mse,
    register,
    soft_loss,
)
from raydistill.distill.staged import MiniLM, TinyBERT, TwoStage, relation_heads, teacher_layer

# every method and what callers need of them, from one module (importing staged registers its methods)
__all__ = [
    "METHODS",
    "DistilBERT",
    "FineTune",
    "HintonKD",
    "Method",
    "MiniLM",
    "Needs",
    "Outputs",
    "PatientKD",
    "TinyBERT",
    "TwoStage",
    "get_method",
    "hard_loss",
    "logit_mse",
    "register",
    "relation_heads",
    "soft_loss",
    "teacher_layer",
]


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

    def losses(self, stage, s, t, batch, obj):
        out = super().losses(stage, s, t, batch, obj) if self.kind != "mlm" else self._mlm(s, t, batch)
        if self.d.alpha_cos > 0:
            s_h, t_h = s.hidden[-1], t.hidden[-1]
            if s_h.shape[-1] != t_h.shape[-1]:
                s_h = obj.project(len(s.hidden) - 1, s_h)
            out["cos"] = L.cosine_hidden(s_h, t_h, batch["attention_mask"])
            out["loss"] = out["loss"] + self.d.alpha_cos * out["cos"]
        return out

    def _mlm(self, s, t, batch):
        soft = L.soft_ce(s.logits, t.logits, self.d.temperature, mask=batch["attention_mask"])
        mlm = L.mlm_loss(s.logits, batch["labels"])
        return {"soft": soft, "mlm": mlm, "loss": self.d.alpha * soft + self.d.alpha_mlm * mlm}


@register("pkd")
class PatientKD(HintonKD):
    """Sun et al. 2019: (1−α)·CE + α·T²·KL + β·Σ MSE(normalised [CLS] of mapped layers)."""

    description = "Patient-KD: KD + MSE of the [CLS] states of mapped layers (beta); student from the first k layers"

    uses_beta = True
    maps_layers = True
    default_init = "first_k"  # the paper initialises the student from the teacher's bottom k layers

    def needs(self, stage):
        return Needs(hidden=True)

    def patient_pairs(self, n_layers: int) -> list[tuple[int, int]]:
        return [(i, j) for i, j in self.pairs if i < n_layers]  # the last layer is covered by KD

    def projected_layers(self, n_layers):
        return {i for i, _ in self.patient_pairs(n_layers)}

    def losses(self, stage, s, t, batch, obj):
        out = super().losses(stage, s, t, batch, obj)
        pairs = self.patient_pairs(len(s.hidden) - 1)
        if pairs:
            s_cls = [obj.project(i, s.hidden[i][:, 0]) for i, _ in pairs]
            out["patient"] = L.pkd_patient(s_cls, [t.hidden[j][:, 0] for _, j in pairs])
            out["loss"] = out["loss"] + self.d.beta * out["patient"]
        return out
