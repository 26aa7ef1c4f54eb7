"""``minilm``: MiniLM / MiniLMv2 self-attention relation distillation, with ``teacher_layer`` and
``relation_heads``, the distill options it reads."""

from __future__ import annotations

import math

from raydistill.common.errors import check
from raydistill.distill import losses as L
from raydistill.distill.methods.base import Method, Needs
from raydistill.distill.methods.kd import kd_losses
from raydistill.distill.methods.registry import register


def teacher_layer(d, n_layers: int) -> int:
    """``distill.teacher_layer`` as a 1-based layer of an ``n_layers`` teacher: 0 = the last, −k = k-th from the top."""
    v = d.teacher_layer
    layer = n_layers if v == 0 else n_layers + 1 + v if v < 0 else v
    check(
        1 <= layer <= n_layers,
        "distill.teacher_layer",
        f"{v} is outside the teacher's {n_layers} layers; use "
        f"1..{n_layers}, 0 for the last or -k for the k-th from the top",
    )
    return layer


def relation_heads(d, t_heads: int, s_hidden: int, t_hidden: int) -> int:
    """MiniLMv2's relation heads: ``distill.relation_heads`` when set, else the paper's choice, 4x the teacher's
    attention heads (48 for a 12-head base teacher, 64 for a 16-head large one: relation heads of width 16 in the
    teacher) when that divides both widths, else the largest count below it that does (a 12-head 384-wide MiniLM
    teacher: 48, width 8; with a 312-wide student: 24)."""
    if d.relation_heads:
        return d.relation_heads
    g = math.gcd(s_hidden, t_hidden)
    return max(r for r in range(1, 4 * t_heads + 1) if g % r == 0)


@register("minilm")
class MiniLM(Method):
    """Wang et al. 2020 (MiniLM, ``version`` 1) and 2021 (MiniLMv2, ``version`` 2). Stage ``intermediate``: the
    student's last layer learns the self-attention of one teacher layer (``teacher_layer``, default the last), as KL
    between relation distributions (``losses.relation_kl``). v1: attention distributions (Q·K) + value relation (V·V)
    per attention head, so the student keeps the teacher's head count; v2: Q·Q, K·K and V·V relations over
    ``relation_heads`` relation heads (default ``relation_heads()``: the paper's 4x the teacher's heads), so the
    student's width and heads are free. The KL is averaged per sequence, then over the batch (``relation_mean``).
    Stage ``pred``: α·T²·KL + (1−α)·hard, as kd. General distillation runs stage ``intermediate`` alone."""

    description = (
        "MiniLM / MiniLMv2: the last layer learns one teacher layer's self-attention relations, then predictions"
    )

    stages = ("intermediate", "pred")
    default_init = "slice"  # the teacher's weights cut to the student's width; the paper's: a general-distilled MiniLM
    RELATIONS = {1: (("q", "k"), ("v", "v")), 2: (("q", "q"), ("k", "k"), ("v", "v"))}

    @classmethod
    def check(cls, cfg):
        super().check(cfg)
        check(
            cfg.distill.version in cls.RELATIONS,
            "distill.version",
            f"MiniLM has versions 1 and 2, not {cfg.distill.version}",
        )

    @classmethod
    def check_shapes(cls, cfg, s_heads, s_hidden, t_heads, t_hidden, t_layers):
        d = cfg.distill
        teacher_layer(d, t_layers)
        if d.version == 1:
            check(
                s_heads == t_heads,
                "student.heads",
                f"MiniLM v1 distils attention head by head, so the student "
                f"needs the teacher's {t_heads} heads, not {s_heads}; or use --version 2 (relation heads)",
            )
            return
        r = relation_heads(d, t_heads, s_hidden, t_hidden)
        check(
            s_hidden % r == 0 and t_hidden % r == 0,
            "distill.relation_heads",
            f"{r} relation heads must divide the student's width {s_hidden} and the teacher's {t_hidden}; pick one "
            "that divides both",
        )

    def heads(self, s_heads: int, t_heads: int, s_hidden: int, t_hidden: int) -> int:
        return s_heads if self.d.version == 1 else relation_heads(self.d, t_heads, s_hidden, t_hidden)

    def needs(self, stage):
        if stage != "intermediate":
            return Needs()
        return Needs(
            teacher_full=True,
            teacher_qkv=frozenset({teacher_layer(self.d, self.teacher_layers) - 1}),
            student_qkv=frozenset({self.student_layers - 1}),
        )

    def losses(self, stage, s, t, batch, obj, *, world=1):
        if stage != "intermediate":
            return kd_losses(self, s, t, batch, world=world)
        (sq, sk, sv), (tq, tk, tv) = (
            s.qkv[self.student_layers - 1],
            t.qkv[teacher_layer(self.d, self.teacher_layers) - 1],
        )
        heads = self.heads(sq.size(1), tq.size(1), sq.size(1) * sq.size(-1), tq.size(1) * tq.size(-1))
        sx = {"q": L.concat_heads(sq), "k": L.concat_heads(sk), "v": L.concat_heads(sv)}
        tx = {"q": L.concat_heads(tq), "k": L.concat_heads(tk), "v": L.concat_heads(tv)}
        mask = batch["attention_mask"]
        out = {
            f"{a}{b}": L.relation_kl(sx[a], sx[b], tx[a], tx[b], heads, mask, per=self.d.relation_mean, world=world)
            for a, b in self.RELATIONS[self.d.version]
        }
        out["loss"] = sum(out.values())
        return out
