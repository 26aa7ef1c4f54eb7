"""What every method shares: what a method reads (``Outputs``) and asks for (``Needs``), the task-aware prediction
losses, and the ``Method`` base class.

Weights follow the loss convention (docs/methods.md, "The loss convention"). Components are returned unweighted
(logged as ``train_<name>``) next to the weighted ``loss`` that is optimised.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from raydistill.common.errors import check
from raydistill.distill import losses as L


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
    def from_hf(cls, out, scores=None, qkv=None) -> Outputs:
        return cls(
            logits=getattr(out, "logits", None),
            start=getattr(out, "start_logits", None),
            end=getattr(out, "end_logits", None),
            hidden=getattr(out, "hidden_states", None),
            scores=scores or {},
            qkv=qkv or {},
        )

    def predictions(self) -> dict[str, torch.Tensor]:
        if self.start is not None:
            assert self.end is not None  # span QA: start and end logits come together
            return {"start_logits": self.start, "end_logits": self.end}
        assert self.logits is not None  # every other task: the model's logits
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


def gold_loss(kind: str, s: Outputs, batch: dict, *, world: int = 1) -> torch.Tensor:
    """Gold-label loss by task kind on a model's ``Outputs`` (``losses.hard_loss`` on its logits): CE, MSE (regression),
    token CE (-100 ignored), mean of start/end CE."""
    if kind == "qa":
        return L.hard_loss(kind, (s.start, s.end), batch, world=world)
    return L.hard_loss(kind, s.logits, batch, world=world)


def soft_loss(kind: str, s: Outputs, t: Outputs, T: float, batch: dict, *, world: int = 1) -> torch.Tensor:
    """Teacher-prediction loss by task kind: T²·KL (classification; per real token for NER; start and end
    distributions averaged for QA); MSE between predictions for regression, where a temperature is meaningless."""
    if kind == "regression":
        return L.regression_mse(s.logits, t.logits)
    if kind == "token" or kind == "mlm":
        return L.soft_ce(s.logits, t.logits, T, mask=_mask(batch), world=world)
    if kind == "qa":  # one distribution per example: plain batch means
        m = _mask(batch)
        return 0.5 * (L.soft_ce(_pos(s.start, m), _pos(t.start, m), T) + L.soft_ce(_pos(s.end, m), _pos(t.end, m), T))
    return L.soft_ce(s.logits, t.logits, T)


def logit_mse(kind: str, s: Outputs, t: Outputs, batch: dict, *, world: int = 1) -> torch.Tensor:
    """Two-stage prediction loss: MSE on logits (per real token for NER), mean of start/end MSE for QA."""
    if kind == "qa":
        return L.qa_logit_mse(s.start, s.end, t.start, t.end, _mask(batch), world=world)
    if kind == "regression":
        return L.regression_mse(s.logits, t.logits)
    return L.logit_mse(s.logits, t.logits, mask=_mask(batch) if kind in ("token", "mlm") else None, world=world)


def _pos(logits, mask):
    """QA position logits with padding pushed to −1e4 so the softmax over positions ignores it."""
    return logits.float().masked_fill(mask == 0, -1e4)


# ------------------------------------------------------------------ methods
class Method:
    description = ""  # one line for python -m raydistill list methods; every registered method sets it
    name = "base"
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
        check(
            d.stage == "all" or d.stage in stages,
            "distill.stage",
            f"method {cls.name} has stages {', '.join(stages)}, not {d.stage!r}; pass --stage all"
            + (f" or one of {', '.join(stages)}" if len(stages) > 1 else ""),
        )
        check(d.intermediate_epochs >= 0, "distill.intermediate_epochs", f"must be >= 0, got {d.intermediate_epochs}")
        if len(stages) > 1 and d.stage == "all" and d.intermediate_epochs:
            check(
                d.intermediate_epochs < cfg.train.epochs,
                "distill.intermediate_epochs",
                f"{d.intermediate_epochs} leaves no epoch of the {cfg.train.epochs} for stage {stages[-1]}; "
                f"pass --intermediate-epochs {max(cfg.train.epochs - 1, 0)} or less, or more --epochs",
            )

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

    def losses(self, stage, s, t, batch, obj, *, world: int = 1) -> dict:
        """The stage's losses: unweighted components and the weighted ``loss``. ``world``: the DDP ranks whose
        tokens the per-token means count (``raydistill.distill.losses``); 1 outside DDP."""
        raise NotImplementedError
