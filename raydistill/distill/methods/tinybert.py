"""``tinybert``, and ``_Intermediate``: the transformer-loss stage (embeddings, attention scores, hidden states of
mapped layers) that ``two_stage`` shares."""

from __future__ import annotations

from raydistill.common.errors import check
from raydistill.distill import losses as L
from raydistill.distill.methods.base import Method, Needs
from raydistill.distill.methods.kd import kd_losses
from raydistill.distill.methods.registry import register


class _Intermediate(Method):
    """Shared by TinyBERT and two-stage: embedding + attention-score + hidden MSE over mapped layer pairs."""

    stages = ("intermediate", "pred")
    intermediate = True
    maps_layers = True

    def projected_layers(self, n_layers):
        return {0} | {i for i, _ in self.pairs}

    @classmethod
    def check_shapes(cls, cfg, s_heads, s_hidden, t_heads, t_hidden, t_layers):
        check(
            s_heads == t_heads,
            "student.heads",
            f"{cls.name} matches attention scores head by head: use the teacher's {t_heads} heads",
        )

    def needs(self, stage):
        if stage != "intermediate":
            return Needs()
        return Needs(
            hidden=True,
            teacher_att=frozenset(t - 1 for _, t in self.pairs),
            student_att=frozenset(s - 1 for s, _ in self.pairs),
            teacher_full=True,
            teacher_hidden=frozenset({0} | {t for _, t in self.pairs}),
        )

    def transformer_losses(self, s, t, batch, obj, *, world: int = 1) -> dict:
        # Means over real tokens only: TinyBERT pads every batch to 128 and averages over the padding too; with
        # dynamic padding that would make an example's loss depend on which examples share its batch.
        mask = batch["attention_mask"]
        emb = L.embedding_mse(s.hidden[0], t.hidden[0], proj=obj.proj(0), mask=mask, world=world)
        att = sum(L.attention_mse(s.scores[i - 1], t.scores[j - 1], mask, world=world) for i, j in self.pairs)
        hid = sum(
            L.hidden_mse(s.hidden[i], t.hidden[j], proj=obj.proj(i), mask=mask, world=world) for i, j in self.pairs
        )
        return {"emb": emb, "att": att, "hidden": hid, "loss": emb + att + hid}


@register("tinybert")
class TinyBERT(_Intermediate):
    """Jiao et al. 2020. Stage ``intermediate``: embedding + pre-softmax attention + hidden MSE (learned
    projection W_h); stage ``pred``: α·T²·KL + (1−α)·hard; by default soft targets only at T=1, the paper's."""

    description = "TinyBERT: embeddings, attention scores and hidden states of mapped layers, then predictions"

    defaults = Method.defaults | {"temperature": 1.0, "alpha": 1.0}

    def losses(self, stage, s, t, batch, obj, *, world=1):
        if stage == "intermediate":
            return self.transformer_losses(s, t, batch, obj, world=world)
        return kd_losses(self, s, t, batch, world=world)
