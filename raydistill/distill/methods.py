"""Distillation methods: which features each needs and how its losses combine (string-keyed registry).

Weights follow ``raydistill.config.LOSS_CONVENTION``: α weighs the soft (teacher-prediction) loss,
(1 − α) the hard loss, β the intermediate loss; the soft loss is T²-scaled KL. Components are returned
unweighted (logged as ``train_<name>``) next to the weighted ``loss`` that is optimised.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import torch

from ..errors import UserError, check
from . import losses as L

METHODS: dict[str, type["Method"]] = {}


def register(name):
    def deco(cls):
        cls.name = name
        METHODS[name] = cls
        return cls
    return deco


def get_method(name: str) -> type["Method"]:
    if name not in METHODS:
        raise UserError("distill.method", f"unknown method {name!r}; known: {', '.join(sorted(METHODS))}")
    return METHODS[name]


@dataclass
class Outputs:
    """Model outputs the losses read: task logits (or QA start/end), hidden states, captured scores."""

    logits: torch.Tensor | None = None
    start: torch.Tensor | None = None
    end: torch.Tensor | None = None
    hidden: tuple | None = None  # (embeddings, layer 1, …, layer N)
    scores: dict = field(default_factory=dict)  # 0-based layer -> pre-softmax attention scores
    qkv: dict = field(default_factory=dict)  # 0-based layer -> (query, key, value), each [B, heads, T, head_size]

    @classmethod
    def from_hf(cls, out, scores=None, qkv=None) -> "Outputs":
        return cls(logits=getattr(out, "logits", None), start=getattr(out, "start_logits", None),
                   end=getattr(out, "end_logits", None), hidden=getattr(out, "hidden_states", None),
                   scores=scores or {}, qkv=qkv or {})

    def predictions(self) -> dict[str, torch.Tensor]:
        if self.start is not None:
            return {"start_logits": self.start, "end_logits": self.end}
        return {"logits": self.logits}


@dataclass(frozen=True)
class Needs:
    teacher: bool = True
    hidden: bool = False
    teacher_att: frozenset = frozenset()  # 0-based teacher layers whose attention scores are captured
    student_att: frozenset = frozenset()
    teacher_full: bool = False  # needs full-sequence teacher states/scores, not only logits and [CLS]
    teacher_hidden: frozenset = frozenset()  # teacher layers (0 = embeddings, −1 = last) needed full-sequence
    teacher_qkv: frozenset = frozenset()  # 0-based teacher layers whose queries, keys and values are captured
    student_qkv: frozenset = frozenset()


# ------------------------------------------------------------------ task-aware prediction losses
def _mask(batch):
    return batch["attention_mask"]


def hard_loss(kind: str, s: Outputs, batch: dict) -> torch.Tensor:
    """Gold-label loss by task kind: CE, MSE (regression), token CE (-100 ignored), mean of start/end CE."""
    if kind == "qa":
        return L.hard_loss(kind, (s.start, s.end), batch)
    return L.hard_loss(kind, s.logits, batch)


def soft_loss(kind: str, s: Outputs, t: Outputs, T: float, batch: dict) -> torch.Tensor:
    """Teacher-prediction loss by task kind: T²·KL (classification; per real token for NER; start and end
    distributions averaged for QA); MSE between predictions for regression, where a temperature is meaningless."""
    if kind == "regression":
        return L.regression_mse(s.logits, t.logits)
    if kind == "token" or kind == "mlm":
        return L.soft_ce(s.logits, t.logits, T, mask=_mask(batch))
    if kind == "qa":
        m = _mask(batch)
        return 0.5 * (L.soft_ce(_pos(s.start, m), _pos(t.start, m), T) + L.soft_ce(_pos(s.end, m), _pos(t.end, m), T))
    return L.soft_ce(s.logits, t.logits, T)


def logit_mse(kind: str, s: Outputs, t: Outputs, batch: dict) -> torch.Tensor:
    """Two-stage prediction loss: MSE on logits (per real token for NER), mean of start/end MSE for QA."""
    if kind == "qa":
        return L.qa_logit_mse(s.start, s.end, t.start, t.end, _mask(batch))
    if kind == "regression":
        return L.regression_mse(s.logits, t.logits)
    return L.logit_mse(s.logits, t.logits, mask=_mask(batch) if kind in ("token", "mlm") else None)


def _pos(logits, mask):
    """QA position logits with padding pushed to −1e4 so the softmax over positions ignores it."""
    return logits.float().masked_fill(mask == 0, -1e4)


# ------------------------------------------------------------------ methods
class Method:
    name = "base"
    description = ""  # one line for python -m raydistill list methods; every registered method sets it
    stages: tuple[str, ...] = ("pred",)
    uses_beta = False
    uses_teacher = True
    intermediate = False  # has the TinyBERT-style transformer-loss stage
    maps_layers = False  # its losses read mapped (student, teacher) layer pairs (--mapping)
    # What an unset StudentConfig.init / DistillConfig temperature, alpha, alpha_mlm become (RunConfig resolves them
    # once); ``general_defaults`` override ``defaults`` for general distillation (task "general").
    default_init = "random"
    defaults = {"temperature": 4.0, "alpha": 0.5, "alpha_mlm": 0.0}
    general_defaults: dict = {}

    def __init__(self, cfg, kind: str, pairs: list[tuple[int, int]], layers: tuple[int, int] = (0, 0)):
        self.check(cfg)
        self.cfg, self.d, self.kind, self.pairs = cfg, cfg.distill, kind, pairs
        self.student_layers, self.teacher_layers = layers

    @classmethod
    def check(cls, cfg) -> None:
        """The stage exists for the method; a two-stage schedule leaves at least one epoch for the second stage."""
        d, stages = cfg.distill, cls.stages
        check(d.stage == "all" or d.stage in stages, "distill.stage",
              f"method {cls.name} has stages {', '.join(stages)}, not {d.stage!r}; pass --stage all"
              + (f" or one of {', '.join(stages)}" if len(stages) > 1 else ""))
        check(d.intermediate_epochs >= 0, "distill.intermediate_epochs", f"must be >= 0, got {d.intermediate_epochs}")
        if len(stages) > 1 and d.stage == "all" and d.intermediate_epochs:
            check(d.intermediate_epochs < cfg.train.epochs, "distill.intermediate_epochs",
                  f"{d.intermediate_epochs} leaves no epoch of the {cfg.train.epochs} for stage {stages[-1]}; "
                  f"pass --intermediate-epochs {max(cfg.train.epochs - 1, 0)} or less, or more --epochs")

    @classmethod
    def check_shapes(cls, cfg, s_heads: int, s_hidden: int, t_heads: int, t_hidden: int, t_layers: int) -> None:
        """The student's and teacher's shapes suit this method's losses (checked before Ray and again on the models)."""

    def active_stages(self) -> tuple[str, ...]:
        return self.stages if self.d.stage == "all" else (self.d.stage,)

    def stage_for(self, epoch: int, epochs: int) -> str:
        st = self.active_stages()
        if len(st) == 1:
            return st[0]
        first = self.d.intermediate_epochs or max(1, epochs // 2)
        return st[0] if epoch < first else st[1]

    def needs(self, stage: str) -> Needs:
        return Needs(teacher=self.uses_teacher)

    def projected_layers(self, n_layers: int) -> set[int]:
        """Student layers (0 = embeddings, ``n_layers`` = last) whose states the losses project to the teacher's
        width when it differs; only these get a projection, since DDP refuses parameters no loss reads."""
        return set()

    def losses(self, stage, s, t, batch, obj) -> dict:
        raise NotImplementedError


@register("finetune")
class FineTune(Method):
    """No teacher: gold labels only. Used for teacher fine-tuning and the no-teacher student baseline."""
    description = "no teacher: gold labels only (a teacher's fine-tune, the labels-only student baseline)"

    uses_teacher = False

    def losses(self, stage, s, t, batch, obj):
        hard = hard_loss(self.kind, s, batch)
        return {"loss": hard, "hard": hard}


@register("kd")
class HintonKD(Method):
    """Hinton et al. 2015: α·T²·KL(p_t^T ‖ p_s^T) + (1−α)·hard."""
    description = "Hinton KD: the teacher's softened predictions (T²·KL) beside the gold labels, weighed by alpha"

    def losses(self, stage, s, t, batch, obj):
        soft = soft_loss(self.kind, s, t, self.d.temperature, batch)
        out = {"soft": soft}
        total = self.d.alpha * soft
        if self.d.alpha < 1:
            out["hard"] = hard_loss(self.kind, s, batch)
            total = total + (1 - self.d.alpha) * out["hard"]
        out["loss"] = total
        return out


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


class _Intermediate(Method):
    """Shared by TinyBERT and two-stage: embedding + attention-score + hidden MSE over mapped layer pairs."""

    stages = ("intermediate", "pred")
    intermediate = True
    maps_layers = True

    def projected_layers(self, n_layers):
        return {0} | {i for i, _ in self.pairs}

    @classmethod
    def check_shapes(cls, cfg, s_heads, s_hidden, t_heads, t_hidden, t_layers):
        check(s_heads == t_heads, "student.heads",
              f"{cls.name} matches attention scores head by head: use the teacher's {t_heads} heads")

    def needs(self, stage):
        if stage != "intermediate":
            return Needs()
        return Needs(hidden=True, teacher_att=frozenset(t - 1 for _, t in self.pairs),
                     student_att=frozenset(s - 1 for s, _ in self.pairs), teacher_full=True,
                     teacher_hidden=frozenset({0} | {t for _, t in self.pairs}))

    def transformer_losses(self, s, t, batch, obj) -> dict:
        # Means over real tokens only: TinyBERT pads every batch to 128 and averages over the padding too; with
        # dynamic padding that would make an example's loss depend on which examples share its batch.
        mask = batch["attention_mask"]
        emb = L.embedding_mse(s.hidden[0], t.hidden[0], proj=obj.proj(0), mask=mask)
        att = sum(L.attention_mse(s.scores[i - 1], t.scores[j - 1], mask) for i, j in self.pairs)
        hid = sum(L.hidden_mse(s.hidden[i], t.hidden[j], proj=obj.proj(i), mask=mask) for i, j in self.pairs)
        return {"emb": emb, "att": att, "hidden": hid, "loss": emb + att + hid}


@register("tinybert")
class TinyBERT(_Intermediate):
    """Jiao et al. 2020. Stage ``intermediate``: embedding + pre-softmax attention + hidden MSE (learned
    projection W_h); stage ``pred``: α·T²·KL + (1−α)·hard; by default soft targets only at T=1, the paper's."""
    description = "TinyBERT: embeddings, attention scores and hidden states of mapped layers, then predictions"

    defaults = Method.defaults | {"temperature": 1.0, "alpha": 1.0}

    def losses(self, stage, s, t, batch, obj):
        if stage == "intermediate":
            return self.transformer_losses(s, t, batch, obj)
        return HintonKD.losses(self, stage, s, t, batch, obj)


@register("two_stage")
class TwoStage(_Intermediate):
    """FitNets-style two-stage task distillation (the Korean RoBERTa recipe): transformer losses first,
    then the prediction loss as MSE on logits (mean of start/end MSE for span QA)."""
    description = "two-stage: TinyBERT's layer losses, then MSE on the logits (the Korean RoBERTa recipe)"

    def losses(self, stage, s, t, batch, obj):
        if stage == "intermediate":
            return self.transformer_losses(s, t, batch, obj)
        pred = logit_mse(self.kind, s, t, batch)
        return {"pred_mse": pred, "loss": pred}


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


def teacher_layer(d, n_layers: int) -> int:
    """``distill.teacher_layer`` as a 1-based layer of an ``n_layers`` teacher: 0 = the last, −k = k-th from the top."""
    v = d.teacher_layer
    layer = n_layers if v == 0 else n_layers + 1 + v if v < 0 else v
    check(1 <= layer <= n_layers, "distill.teacher_layer", f"{v} is outside the teacher's {n_layers} layers; use "
          f"1..{n_layers}, 0 for the last or -k for the k-th from the top")
    return layer


@register("minilm")
class MiniLM(Method):
    """Wang et al. 2020 (MiniLM, ``version`` 1) and 2021 (MiniLMv2, ``version`` 2). Stage ``intermediate``: the
    student's last layer learns the self-attention of one teacher layer (``teacher_layer``, default the last), as KL
    between relation distributions (``losses.relation_kl``). v1: attention distributions (Q·K) + value relation (V·V)
    per attention head, so the student keeps the teacher's head count; v2: Q·Q, K·K and V·V relations over
    ``relation_heads`` relation heads (default the teacher's head count), so the student's width and heads are free.
    Stage ``pred``: α·T²·KL + (1−α)·hard, as kd. General distillation runs stage ``intermediate`` alone."""
    description = "MiniLM / MiniLMv2: the last layer learns one teacher layer's self-attention relations, then predictions"

    stages = ("intermediate", "pred")
    default_init = "slice"  # the teacher's weights cut to the student's width; the paper's: a general-distilled MiniLM
    RELATIONS = {1: (("q", "k"), ("v", "v")), 2: (("q", "q"), ("k", "k"), ("v", "v"))}

    @classmethod
    def check(cls, cfg):
        super().check(cfg)
        check(cfg.distill.version in cls.RELATIONS, "distill.version", f"MiniLM has versions 1 and 2, not "
              f"{cfg.distill.version}")

    @classmethod
    def check_shapes(cls, cfg, s_heads, s_hidden, t_heads, t_hidden, t_layers):
        d = cfg.distill
        teacher_layer(d, t_layers)
        if d.version == 1:
            check(s_heads == t_heads, "student.heads", f"MiniLM v1 distils attention head by head, so the student "
                  f"needs the teacher's {t_heads} heads, not {s_heads}; or use --version 2 (relation heads)")
            return
        r = d.relation_heads or t_heads
        check(s_hidden % r == 0 and t_hidden % r == 0, "distill.relation_heads",
              f"{r} relation heads must divide the student's width {s_hidden} and the teacher's {t_hidden}; pick one "
              "that divides both")

    def heads(self, s_heads: int, t_heads: int) -> int:
        return s_heads if self.d.version == 1 else self.d.relation_heads or t_heads

    def needs(self, stage):
        if stage != "intermediate":
            return Needs()
        return Needs(teacher_full=True, teacher_qkv=frozenset({teacher_layer(self.d, self.teacher_layers) - 1}),
                     student_qkv=frozenset({self.student_layers - 1}))

    def losses(self, stage, s, t, batch, obj):
        if stage != "intermediate":
            return HintonKD.losses(self, stage, s, t, batch, obj)
        (sq, sk, sv), (tq, tk, tv) = s.qkv[self.student_layers - 1], t.qkv[teacher_layer(self.d, self.teacher_layers) - 1]
        heads = self.heads(sq.size(1), tq.size(1))
        sx = {"q": L.concat_heads(sq), "k": L.concat_heads(sk), "v": L.concat_heads(sv)}
        tx = {"q": L.concat_heads(tq), "k": L.concat_heads(tk), "v": L.concat_heads(tv)}
        mask = batch["attention_mask"]
        out = {f"{a}{b}": L.relation_kl(sx[a], sx[b], tx[a], tx[b], heads, mask) for a, b in self.RELATIONS[self.d.version]}
        out["loss"] = sum(out.values())
        return out
