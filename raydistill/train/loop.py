"""The per-worker training loop: plain PyTorch, no Ray import.

``run(cfg, ctx)`` builds teacher, student and objective from a RunConfig, trains with DDP when
``torch.distributed`` is initialised (Ray Train does that; so can torchrun), evaluates on rank 0 every
epoch and hands ``ctx.report(metrics, checkpoint_dir)`` one call per epoch. Each stage of a two-stage method
gets its own AdamW and warm-up + linear-decay schedule. Every report carries that epoch's ``val_*`` (the validation
split carved from train) and ``eval_*`` (dev) and, as ``best_epoch`` / ``best_val_*`` / ``best_eval_*``, those of the
best epoch so far by the task's main metric on val (on dev with ``select_on="dev"``); the checkpoint holds
the latest student (``student``, for resume) and that best one (``best_student``, the run's result). Resuming
from ``ctx.resume_dir`` restores student, best student, objective, the stage's optimizer and scheduler, and the
epoch counter.
"""

from __future__ import annotations

import math
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import torch
import torch.distributed as dist

from raydistill.common.progress import Progress
from raydistill.config.schema import RunConfig
from raydistill.data.batches import epoch_batches
from raydistill.data.general import DynamicMasking
from raydistill.models.teacher import quiet_hf
from raydistill.tasks import get_task
from raydistill.tasks.encode import collate, encode
from raydistill.train.checkpoint import copy_dir, load_state, resume_student, save_checkpoint
from raydistill.train.faults import Fault
from raydistill.train.precision import release, step_dtype, teacher_dtype
from raydistill.train.scoring import dev_metrics
from raydistill.train.step import Distiller, make_optimizer, teacher_outputs, to_device, train_step


class NonFiniteLoss(RuntimeError):
    """The training loss became NaN/inf; the run is failed on purpose (its MLflow run records why)."""


@dataclass
class Context:
    """What the launcher (Ray Train glue, or a plain process) gives the loop."""

    rank: int = 0
    world_size: int = 1
    device: torch.device = field(default_factory=lambda: torch.device("cpu"))
    resume_dir: str | None = None
    report: Callable[[dict, str | None], None] = lambda metrics, ckpt: None
    log: Callable[[str], None] = lambda msg: None
    live: bool = False  # progress as one redrawn line (a terminal), else a line every ~10% of an epoch


def seed_all(seed: int) -> None:
    import random

    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


# ---------------------------------------------------------------- data
@dataclass
class Data:
    task: object
    train: list  # encoded training features
    eval_examples: list
    eval_encoded: object
    pad_id: int
    val_examples: list = field(default_factory=list)  # the validation split (carved from train): what chooses
    val_encoded: object = None

    @classmethod
    def dev_only(cls, task, examples: list, tokenizer, max_length: int) -> Data:
        """Just a dev set to score on (``devscore.dev_metrics``): ``examples`` encoded, no training features."""
        return cls(task, [], examples, encode(task, examples, tokenizer, max_length), tokenizer.pad_token_id or 0)


def load_data(cfg: RunConfig, tokenizer) -> Data:
    from raydistill.data.splits import train_val_dev

    task = get_task(cfg.task)
    if task.kind == "mlm":
        from raydistill.data.general import encode_mlm

        def enc(ex):
            return encode_mlm(ex, tokenizer, cfg.train.max_length, cfg.train.seed)
    else:

        def enc(ex):
            return encode(task, ex, tokenizer, cfg.train.max_length)

    train_ex, val_ex, eval_ex = train_val_dev(cfg, task)
    train_enc, eval_enc = enc(train_ex), enc(eval_ex)
    return Data(
        task,
        train_enc.features,
        eval_ex,
        eval_enc,
        tokenizer.pad_token_id or 0,
        val_ex,
        enc(val_ex) if val_ex else None,
    )


# ---------------------------------------------------------------- the loop
def run(cfg: RunConfig, ctx: Context) -> dict:
    from raydistill.train.objective import build_objective

    quiet_hf()
    seed_all(cfg.train.seed)
    device = ctx.device
    distributed = dist.is_available() and dist.is_initialized() and ctx.world_size > 1
    clock = Clock()  # where a run's seconds go besides training steps (the fixed cost of a trial)

    objective, student, teacher, tokenizer = build_objective(cfg, resume_student=resume_student(ctx.resume_dir))
    clock.lap("models")
    data = load_data(cfg, tokenizer)
    clock.lap("data")
    if len(data.train) < cfg.train.batch_size:
        from raydistill.common.errors import UserError

        raise UserError(
            "train.batch_size",
            f"{cfg.train.batch_size} is larger than the {len(data.train)} training "
            "examples; lower --batch-size or raise --train-limit",
        )
    student.to(device).train()  # from_pretrained (resume, pretrained init) returns it in eval mode: no dropout
    objective.to(device)
    model = Distiller(student, objective)
    if distributed:
        ddp_kw = {"find_unused_parameters": len(objective.method.stages) > 1}
        if device.type == "cuda":
            ddp_kw["device_ids"] = [device.index]
        model = torch.nn.parallel.DistributedDataParallel(model, **ddp_kw)

    steps_per_epoch = len(data.train) // cfg.train.batch_size
    lengths = [len(f["input_ids"]) for f in data.train] if cfg.train.group_by_length else None
    if cfg.train.max_steps:
        steps_per_epoch = min(steps_per_epoch, math.ceil(cfg.train.max_steps / cfg.train.epochs))
    stages = [objective.method.stage_for(e, cfg.train.epochs) for e in range(cfg.train.epochs)]
    params = list(student.parameters()) + list(objective.parameters())

    start_epoch, history, blobs = 0, [], None
    if ctx.resume_dir:
        state, blobs = load_state(ctx.resume_dir)
        objective.load_state_dict(blobs["objective"])
        start_epoch, history = state["epoch"], state["history"]
        ctx.log(f"resumed from {ctx.resume_dir} at epoch {start_epoch}")
    main = f"{'val' if data.val_examples else 'eval'}_{data.task.main_metric}"  # chooses the best epoch: val's score

    step_amp, t_dtype = step_dtype(cfg.train, device), teacher_dtype(cfg.train, device)
    if teacher is not None:
        ctx.log(f"teacher forward in {t_dtype}" + (" (bf16 autocast)" if t_dtype == "bf16" else ""))
    per_rank = cfg.train.batch_size // ctx.world_size
    stage_needs = [objective.method.needs(st) for st in objective.method.active_stages()]
    cache = _teacher_cache(cfg, stage_needs, teacher, data, device, ctx, t_dtype)  # built on `device` when cold
    if teacher is not None:
        if cache is not None and all(cache.serves(n) for n in stage_needs if n.teacher):
            release(teacher, device)  # every stage reads the cache: no teacher on the device (packed GPU trials)
            ctx.log("teacher outputs come from the cache for every stage; the teacher stays off the device")
        else:
            teacher.to(device)
    clock.lap("cache")
    fault = Fault(cfg.fault)
    masker = DynamicMasking(tokenizer, cfg.train.seed) if data.task.kind == "mlm" else None  # a fresh mask per epoch
    metrics = {}
    opt = sched = None
    best_dir = tempfile.mkdtemp(prefix="raydistill-best-") if ctx.rank == 0 else None  # outlives each checkpoint
    try:
        if best_dir and ctx.resume_dir:
            copy_dir(os.path.join(ctx.resume_dir, "best_student"), best_dir)
        for epoch in range(start_epoch, cfg.train.epochs):
            stage = stages[epoch]
            if epoch == start_epoch or stage != stages[epoch - 1]:
                # each stage its own AdamW and warm-up + linear decay over that stage's steps
                opt, sched = make_optimizer(cfg, params, steps_per_epoch * stages.count(stage))
                if epoch == start_epoch and blobs is not None and stages[epoch - 1] == stage:  # resumed mid-stage
                    opt.load_state_dict(blobs["optimizer"])
                    sched.load_state_dict(blobs["scheduler"])
            # Each rank its own dropout masks (one seed gave every rank the same ones), re-seeded per epoch so a
            # resumed run draws what the uninterrupted one drew, and off the stream `seed` that built the weights
            # (identical on every rank; DDP broadcasts rank 0's anyway). The batch order has its own generator.
            torch.manual_seed((cfg.train.seed * 1_000_003 + epoch) * 1_000 + ctx.rank + 1)
            sums: dict[str, torch.Tensor] = {}
            clock.lap("between")
            t0, n_seen = time.perf_counter(), 0
            progress = (
                Progress(
                    f"epoch {epoch + 1}/{cfg.train.epochs} {stage}",
                    steps_per_epoch,
                    log=ctx.log,
                    live=ctx.live and ctx.rank == 0,
                )
                if ctx.rank == 0
                else None
            )
            for step, idx in enumerate(
                epoch_batches(
                    len(data.train), cfg.train.batch_size, epoch, cfg.train.seed, ctx.rank, ctx.world_size, lengths
                )
            ):
                if step >= steps_per_epoch:
                    break
                poison = fault.at(ctx.rank, epoch + 1, step + 1)  # test hook: None in normal use
                feats = [data.train[i] for i in idx]
                batch = to_device(collate(masker(feats, idx, epoch) if masker else feats, data.pad_id), device)
                t_out = teacher_outputs(teacher, cache, objective, batch, idx, stage, device, t_dtype)
                train_step(
                    model,
                    batch,
                    t_out,
                    stage,
                    opt,
                    sched,
                    device=device,
                    amp=step_amp,
                    world=ctx.world_size if distributed else 1,
                    sums=sums,
                    poison=poison,
                )
                n_seen += per_rank
                if progress:
                    progress.update(items=per_rank * ctx.world_size)
            if progress:
                progress.done()
            n_steps = min(steps_per_epoch, step + 1)
            keys = sorted(sums)
            vec = torch.stack([sums[k] for k in keys]) / max(n_steps, 1)
            if distributed:
                dist.all_reduce(vec)
                vec /= ctx.world_size
            train = {f"train_{k}": float(v) for k, v in zip(keys, vec.tolist(), strict=True)}
            if not all(math.isfinite(v) for v in train.values()):
                raise NonFiniteLoss(f"non-finite training loss at epoch {epoch + 1}: {train}")
            metrics = {
                "epoch": epoch + 1,
                "stage": stage,
                **train,
                "train_examples_per_s": n_seen * ctx.world_size / (time.perf_counter() - t0),
            }
            clock.lap("train")
            ckpt_dir = None
            if ctx.rank == 0:
                metrics.update(dev_metrics(student, data, max(per_rank, 32), device))
                clock.lap("eval")
                metrics.update(_speed(student, device))
                clock.lap("latency")
                history.append(metrics)
                best = _best(history, main)
                metrics.update(
                    best_epoch=best["epoch"],  # best_val_* chose it; best_eval_* is that epoch's dev score
                    **{f"best_{k}": v for k, v in best.items() if k.startswith(("eval_", "val_"))},
                )
                ckpt_dir = os.path.join(tempfile.mkdtemp(prefix="raydistill-ckpt-"), "checkpoint")
                save_checkpoint(
                    ckpt_dir,
                    student,
                    tokenizer,
                    objective,
                    opt,
                    sched,
                    {"epoch": epoch + 1, "history": history, "config": cfg.to_params()},
                    best=None if best is metrics else best_dir,
                )
                if best is metrics:
                    copy_dir(os.path.join(ckpt_dir, "best_student"), best_dir)
                clock.lap("checkpoint")
                metrics.update(clock.metrics())  # cumulative seconds per phase, so far
            ctx.log(" ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in metrics.items()))
            try:  # report persists the checkpoint; it raises when the trial is stopped (ASHA, Ctrl-C): clean up anyway
                ctx.report(metrics, ckpt_dir)
            finally:
                if ckpt_dir:
                    shutil.rmtree(os.path.dirname(ckpt_dir), ignore_errors=True)
        if start_epoch >= cfg.train.epochs and history:  # resumed after its last epoch: report the run's result again
            metrics = dict(history[-1])
            ctx.report(metrics, None)
    finally:
        if best_dir:
            shutil.rmtree(best_dir, ignore_errors=True)
    return metrics


class Clock:
    """Cumulative wall seconds per phase of a run (``time_<phase>_s``), lap by lap."""

    def __init__(self):
        self.t, self.spent = time.perf_counter(), {}

    def lap(self, phase: str) -> None:
        now = time.perf_counter()
        self.spent[phase] = self.spent.get(phase, 0.0) + now - self.t
        self.t = now

    def metrics(self) -> dict:
        return {f"time_{k}_s": round(v, 3) for k, v in self.spent.items()}


def _best(history: list[dict], key: str) -> dict:
    """The epoch with the highest ``key`` (the task's main metric: higher is better), the earliest on ties; a NaN
    or missing value never wins (a regression student with constant output has NaN correlation)."""
    return max(history, key=lambda m: m[key] if math.isfinite(m.get(key, math.nan)) else -math.inf)


def _teacher_cache(cfg, needs: list, teacher, data, device, ctx, t_dtype: str):
    """The shared teacher-output cache when it is on and can serve at least one of the stages with ``needs``."""
    kind = data.task.kind
    if not cfg.teacher_cache or teacher is None or not data.task.labelled or not any(n.teacher for n in needs):
        return None
    from raydistill.train.teacher_cache import TeacherCache, cache_key

    full = [n for n in needs if n.teacher and n.teacher_full]
    hidden = set().union(*(n.teacher_hidden for n in full))
    att = set().union(*(n.teacher_att for n in full))
    return TeacherCache(cfg.teacher_cache, cache_key(cfg, kind, t_dtype), kind).ensure(
        teacher, data.train, collate, data.pad_id, device, ctx.log, t_dtype, hidden, att, cfg.teacher_cache_gb
    )


def _speed(student, device) -> dict:
    """Parameter count and latency (memoised per architecture and machine, so measured once per student size)."""
    from raydistill.models.latency import student_speed

    length = min(128, student.config.max_position_embeddings - 2)
    out = student_speed(student, length=length)
    student.to(device).train()
    return out
