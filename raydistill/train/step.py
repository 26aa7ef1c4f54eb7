"""One training step, as every worker and the step benchmarks run it: the student (and the objective's learned
projections) in one module, the teacher's outputs (cached or live), AdamW with warm-up + linear decay, and
``train_step`` = forward and losses under autocast, backward, clip, optimizer and schedule, losses summed on device."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from raydistill.config.schema import RunConfig
from raydistill.distill.methods import Outputs
from raydistill.models.packing import packed_forward
from raydistill.tasks.encode import MODEL_INPUTS
from raydistill.train.precision import autocast


def to_device(batch: dict, device) -> dict:
    return {k: v.to(device, non_blocking=True) for k, v in batch.items()}


def forward(model, batch: dict, need_hidden: bool, capture=None, unpadded: bool = False) -> Outputs:
    """The model's outputs on ``batch``; ``unpadded``: on its real tokens only (``packing.prepare`` was called), unless
    ``capture`` reads attention scores or queries/keys/values, which the padded path keeps."""
    inputs = {k: batch[k] for k in MODEL_INPUTS if k in batch}
    if unpadded and capture is None:
        return Outputs.from_hf(packed_forward(model, inputs, hidden_states=need_hidden))
    if capture is not None:
        with capture:
            out = model(**inputs, output_hidden_states=need_hidden)
        return Outputs.from_hf(out, dict(capture.scores), dict(capture.qkv))
    out = model(**inputs, output_hidden_states=need_hidden)
    return Outputs.from_hf(out)


class Distiller(torch.nn.Module):
    """Student + learnable loss parts (projections) in one module, so one DDP wrapper syncs both."""

    def __init__(self, student, objective):
        super().__init__()
        self.student, self.objective = student, objective

    def forward(self, batch, teacher_out, stage, world: int = 1):
        needs = self.objective.method.needs(stage)
        capture = self.objective.student_capture(stage)
        s = forward(self.student, batch, needs.hidden, capture, self.objective.unpadded)
        return self.objective.method.losses(stage, s, teacher_out, batch, self.objective, world=world)


def compile_student(student, backend: str = "inductor") -> None:
    """``train.compile``: the student's forward through torch.compile, in place (``nn.Module.compile``: parameters and
    state-dict keys unchanged, so checkpoints, DDP and the optimizer see the same module); losses and the optimizer
    stay eager. Tests pass a CPU-cheap ``backend`` ("aot_eager")."""
    student.compile(backend=backend)


def teacher_outputs(teacher, cache, objective, batch: dict, idx: list[int], stage: str, device, t_dtype: str):
    """What the teacher says about ``batch`` (examples ``idx``) in ``stage``: from the cache when it holds every
    feature the stage reads, else a live forward in ``t_dtype``; None when the stage needs no teacher."""
    needs = objective.method.needs(stage)
    if teacher is None or not needs.teacher:
        return None
    if cache is not None and cache.serves(needs):
        return cache.outputs(idx, batch, needs)
    with torch.no_grad(), autocast(device, t_dtype):
        return forward(teacher, batch, needs.hidden, objective.teacher_capture(stage), objective.unpadded)


def optimizer_step(model, loss: torch.Tensor, opt, sched) -> None:
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    sched.step()
    opt.zero_grad(set_to_none=True)


@dataclass(frozen=True)
class StepOn:
    """Where and how a step runs: its ``device``, the precision of its forward and losses (``amp``: ``bf16`` autocast
    or ``fp32``), the ranks its token and pair means are over (``world``), and ``poison`` (a test hook,
    ``train/faults.py``, that may rewrite the losses; None in normal use)."""

    device: Any
    amp: str = "fp32"
    world: int = 1
    poison: Callable[[dict], dict] | None = None


def train_step(
    model, batch: dict, teacher_out, stage: str, opt, sched, *, on: StepOn, sums: dict | None = None
) -> dict:
    """One optimizer step ``on`` its device; returns the losses. Token and pair means are over all ``on.world`` ranks'
    tokens; each loss is added to ``sums`` on the device (no host sync per step)."""
    with autocast(on.device, on.amp):  # the losses cast to float32 themselves
        losses = model(batch, teacher_out, stage, world=on.world)
    if on.poison is not None:
        losses = on.poison(losses)
    optimizer_step(model, losses["loss"], opt, sched)
    if sums is not None:
        for k, v in losses.items():
            sums[k] = sums.get(k, 0) + v.detach().float()
    return losses


# PyTorch's fused AdamW: one kernel per tensor instead of a dozen elementwise passes, the same update up to rounding;
# on CPU PyTorch's default is per-tensor (docs/benchmarks/2026-11-24-epoch-speed-mrpc.md, "Fused AdamW"). False:
# PyTorch's default.
FUSED_ADAMW = True


def make_optimizer(cfg: RunConfig, params, total_steps: int):
    """AdamW (weight decay on matrices only; fused where the parameters' device has the kernel) and warm-up + linear
    decay over ``total_steps``."""
    from transformers import get_linear_schedule_with_warmup

    decay = [p for p in params if p.ndim >= 2]
    no_decay = [p for p in params if p.ndim < 2]
    fused = FUSED_ADAMW and all(p.device.type in ("cpu", "cuda") and p.is_floating_point() for p in params)
    opt = torch.optim.AdamW(
        [{"params": decay, "weight_decay": cfg.train.weight_decay}, {"params": no_decay, "weight_decay": 0.0}],
        lr=cfg.train.lr,
        fused=fused or None,
    )
    sched = get_linear_schedule_with_warmup(opt, warmup_steps(cfg, total_steps), max(total_steps, 1))
    return opt, sched


def warmup_steps(cfg: RunConfig, total_steps: int) -> int:
    """The warm-up of a stage of ``total_steps`` (``make_optimizer``'s; ``stop_diverged`` waits for its end)."""
    return int(cfg.train.warmup_ratio * total_steps)
