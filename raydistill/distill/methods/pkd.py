"""``pkd``: Patient-KD, KD plus the MSE of normalised [CLS] states of mapped layers."""

from __future__ import annotations

from raydistill.distill import losses as L
from raydistill.distill.methods.base import Needs
from raydistill.distill.methods.kd import HintonKD
from raydistill.distill.methods.registry import register


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

    def losses(self, stage, s, t, batch, obj, *, world=1):
        out = super().losses(stage, s, t, batch, obj, world=world)
        pairs = self.patient_pairs(len(s.hidden) - 1)
        if pairs:
            s_cls = [obj.project(i, s.hidden[i][:, 0]) for i, _ in pairs]
            out["patient"] = L.pkd_patient(s_cls, [t.hidden[j][:, 0] for _, j in pairs])
            out["loss"] = out["loss"] + self.d.beta * out["patient"]
        return out
