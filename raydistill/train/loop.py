"""The per-worker training loop: plain PyTorch, no Ray import.

``run(cfg, ctx)`` builds teacher, student and objective from a RunConfig, trains with DDP when
``torch.distributed`` is initialised (Ray Train does that; so can torchrun), evaluates on rank 0 every
epoch and hands ``ctx.report(metrics, checkpoint_dir)`` one call per epoch. Each stage of a two-stage method
gets its own AdamW and warm-up + linear-decay schedule. Every report carries that epoch's ``val_*`` (the validation
split carved from train) and ``eval_*`` (dev) and, as ``best_epoch`` / ``best_val_*`` / ``best_eval_*``, those of the
best epoch so far by the task's main metric (``train.select_metric`` where set) on val (on dev with
``select_on="dev"``); the checkpoint holds the latest student (``student``, for resume) and that best one
(``best_student``, the run's result). Resuming
from ``ctx.resume_dir`` restores student, best student, objective, the stage's optimizer and scheduler, and the
epoch counter. With ``train.stop_diverged`` a run whose epoch ``train/diverge.py`` judges diverged reports that
epoch with ``diverged`` (the reason) and trains no further, on every rank.
"""

from __future__ import annotations

import math
import os
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
import torch.distributed as dist

from raydistill.common.progress import Progress
from raydistill.config.schema import RunConfig, task_of
from raydistill.data.batches import drawn_batches
from raydistill.data.general import DynamicMasking
from raydistill.models.encoder import quiet_hf
from raydistill.selection.epoch import best_epoch
from raydistill.tasks.base import Task
from raydistill.tasks.encode import Encoded, collate, encode
from raydistill.tasks.encode import lengths as feature_lengths
from raydistill.train.checkpoint import copy_dir, load_state, resume_student, run_temp, save_checkpoint
from raydistill.train.diverge import PRED_STAGE, START_STEPS, floor_of, verdict
from raydistill.train.faults import Fault
from raydistill.train.precision import release, step_dtype, teacher_dtype
from raydistill.train.scoring import dev_metrics
from raydistill.train.step import (
    Distiller,
    StepOn,
    compile_student,
    make_optimizer,
    teacher_outputs,
    to_device,
    train_step,
    warmup_steps,
)


class NonFiniteLoss(RuntimeError):
    """The training loss became NaN/inf with ``train.stop_diverged`` off; the run is failed on purpose (its MLflow run
    records why). On, the run stops as diverged instead (``train/diverge.py``)."""


# the checkpoint of a report that only repeats a run's recorded result (resumed after its last epoch): every epoch's
# report from rank 0 comes with its checkpoint, so this one is told apart by its lack, and whoever logs epochs skips it
REPLAY = None


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
    # how this launcher opens the teacher-output cache (``teacher.cache.open_cache``, given by the stages above that
    # start runs): the cache is the teacher's, and teacher/ stands above train/ since its fine-tune runs this loop
    open_cache: Callable[..., Any] | None = None


def seed_all(seed: int) -> None:
    import random

    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


# ---------------------------------------------------------------- data
@dataclass
class RunData:
    task: Task
    train: Sequence[dict]  # encoded training features (flat for text tasks: ``tasks.encode.FlatFeatures``)
    eval_examples: Sequence[dict]  # a user's text file's: ``tasks.examples.Examples``, a view by column
    eval_encoded: object
    pad_id: int
    val_examples: Sequence[dict] = field(default_factory=list)  # the validation split (carved from train): what chooses
    val_encoded: object = None

    @classmethod
    def dev_only(cls, task, examples: Sequence[dict], tokenizer, max_length: int) -> RunData:
        """Just a dev set to score on (``scoring.dev_metrics``): ``examples`` encoded, no training features."""
        return cls(task, [], examples, encode(task, examples, tokenizer, max_length), tokenizer.pad_token_id or 0)


def load_data(cfg: RunConfig, tokenizer) -> RunData:
    """The run's encoded rows; a reused trial actor keeps its last run's (``train/kept.py``)."""
    from raydistill.train.kept import data_key, kept

    key = data_key(cfg, tokenizer)
    return _load_data(cfg, tokenizer) if key is None else kept(key, lambda: _load_data(cfg, tokenizer))


def _load_data(cfg: RunConfig, tokenizer) -> RunData:
    from raydistill.data.splits import train_val_dev

    task = task_of(cfg)
    if task.kind == "mlm":
        from raydistill.data.general import encode_mlm

        def enc(ex):
            return encode_mlm(ex, tokenizer, cfg.train.max_length, cfg.train.seed)
    else:

        def enc(ex):
            return encode(task, ex, tokenizer, cfg.train.max_length)

    train_ex, val_ex, eval_ex = train_val_dev(cfg, task)
    if cfg.augment_dir and task.kind != "mlm":  # an augmented set: tokenised once, beside the teacher cache
        from raydistill.data.encoded import encode_cached

        train_enc = encode_cached(task, train_ex, tokenizer, cfg.train.max_length, cfg.teacher_cache)
    else:
        train_enc = enc(train_ex)
    eval_enc = enc(eval_ex)
    return RunData(
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
    """Train ``cfg`` on this rank: every epoch's metrics and checkpoint handed to ``ctx.report``; returns the last
    epoch's metrics (a run resumed after its last epoch reports its result again)."""
    quiet_hf()
    seed_all(cfg.train.seed)
    return Trainer(cfg, ctx).fit()


class Trainer:
    """One run's models, data and schedule on this rank (built in ``__init__``), trained epoch by epoch (``fit``)."""

    def __init__(self, cfg: RunConfig, ctx: Context):
        from raydistill.train.objective import build_objective

        self.cfg, self.ctx, self.device = cfg, ctx, ctx.device
        self.distributed = dist.is_available() and dist.is_initialized() and ctx.world_size > 1
        self.clock = Clock()  # where a run's seconds go besides training steps (the fixed cost of a trial)
        self.objective, self.student, self.teacher, self.tokenizer = build_objective(
            cfg, resume_student=resume_student(ctx.resume_dir)
        )
        self.clock.lap("models")
        self.data = load_data(cfg, self.tokenizer)
        self.clock.lap("data")
        self._check_batch_size()
        self.model = self._place_models()
        self._plan_epochs()
        self._resume_state()
        self.step_amp, self.t_dtype = step_dtype(cfg.train, self.device), teacher_dtype(cfg.train, self.device)
        if self.teacher is not None:
            ctx.log(f"teacher forward in {self.t_dtype}" + (" (bf16 autocast)" if self.t_dtype == "bf16" else ""))
        if self.step_amp == "bf16":
            ctx.log("student step under bf16 autocast (fp32 master weights)")
        self.per_rank = cfg.train.batch_size // ctx.world_size
        self.cache = self._place_teacher()
        self.clock.lap("cache")
        self.fault = Fault(cfg.fault)
        # general distillation: a fresh mask per epoch
        self.masker = DynamicMasking(self.tokenizer, cfg.train.seed) if self.data.task.kind == "mlm" else None
        self.opt: Any = None
        self.sched: Any = None
        # the majority floor, from the validation split's labels (what chooses), on rank 0 (which scores)
        stop = cfg.train.stop_diverged and ctx.rank == 0 and self.data.val_examples
        self.floor = floor_of(self.data.task, self.data.val_examples) if stop else None

    def _check_batch_size(self) -> None:
        if len(self.data.train) < self.cfg.train.batch_size:
            from raydistill.common.errors import UserError

            raise UserError(
                "train.batch_size",
                f"{self.cfg.train.batch_size} is larger than the {len(self.data.train)} training "
                "examples; lower --batch-size or raise --train-limit",
            )

    def _place_models(self) -> torch.nn.Module:
        """Student and projections on the device, in one module (DDP-wrapped across ranks)."""
        self.student.to(self.device).train()  # from_pretrained (resume, pretrained init) returns eval mode: no dropout
        self.objective.to(self.device)
        if self.cfg.train.compile:
            compile_student(self.student)
        model: torch.nn.Module = Distiller(self.student, self.objective)
        if self.distributed:
            ddp_kw: dict[str, Any] = {"find_unused_parameters": len(self.objective.method.stages) > 1}
            if self.device.type == "cuda":
                ddp_kw["device_ids"] = [self.device.index]
            model = torch.nn.parallel.DistributedDataParallel(model, **ddp_kw)
        return model

    def _plan_epochs(self) -> None:
        t = self.cfg.train
        self.steps_per_epoch = len(self.data.train) // t.batch_size
        if t.epoch_rows:  # a random draw of about epoch_rows rows, pass after pass where the set holds fewer: the
            # same steps whatever the set's size (an augmented winner's labels-only control trains as many)
            self.steps_per_epoch = max(1, t.epoch_rows // t.batch_size) if self.steps_per_epoch else 0
        self.lengths = feature_lengths(self.data.train) if t.group_by_length else None
        if t.max_steps:
            self.steps_per_epoch = min(self.steps_per_epoch, math.ceil(t.max_steps / t.epochs))
        self.stages = [self.objective.method.stage_for(e, t.epochs) for e in range(t.epochs)]
        self.params = list(self.student.parameters()) + list(self.objective.parameters())

    def _resume_state(self) -> None:
        self.start_epoch, self.history, self.blobs = 0, [], None
        if self.ctx.resume_dir:
            state, self.blobs = load_state(self.ctx.resume_dir)
            self.objective.load_state_dict(self.blobs["objective"])
            self.start_epoch, self.history = state["epoch"], state["history"]
            self.ctx.log(f"resumed from {self.ctx.resume_dir} at epoch {self.start_epoch}")
        # each stage's first step's loss (stop_diverged's yardstick of exploding), as its epochs logged it
        self.loss_start = {h["stage"]: h["train_loss_start"] for h in self.history if "train_loss_start" in h}
        # what chooses the best epoch: val's score (dev's only where there is no validation split)
        chosen = self.cfg.train.select_metric or self.data.task.main_metric  # --select-metric, else the task's
        self.main = f"{'val' if self.data.val_examples else 'eval'}_{chosen}"

    def _place_teacher(self):
        """The teacher-output cache (built on the device when cold), and the teacher on the device unless every
        stage reads the cache."""
        method = self.objective.method
        stage_needs = [method.needs(st) for st in method.active_stages()]
        cache = None
        if self.ctx.open_cache is not None:
            cache = self.ctx.open_cache(
                self.cfg, stage_needs, self.teacher, self.data, self.device, self.ctx.log, self.t_dtype
            )
        elif self.cfg.teacher_cache and self.teacher is not None and any(n.teacher for n in stage_needs):
            # a run told to read the cache must not silently run its teacher live: the launcher forgot to say how
            raise ValueError("teacher_cache is set but the launcher's Context has no open_cache (teacher/cache.py)")
        if self.teacher is not None:
            if cache is not None and all(cache.serves(n) for n in stage_needs if n.teacher):
                release(self.teacher, self.device)  # every stage reads the cache: no teacher on the device
                self.ctx.log("teacher outputs come from the cache for every stage; the teacher stays off the device")
            else:
                self.teacher.to(self.device)
        return cache

    # ------------------------------------------------------------ epochs
    def fit(self) -> dict:
        ctx, epochs = self.ctx, self.cfg.train.epochs
        metrics: dict = {}
        best_dir = run_temp("best") if ctx.rank == 0 else None  # outlives each checkpoint
        try:
            if best_dir and ctx.resume_dir:
                copy_dir(os.path.join(ctx.resume_dir, "best_student"), best_dir)
            # a run stopped as diverged trains no further when resumed (Tune restarting its trial)
            end = self.start_epoch if self.history and self.history[-1].get("diverged") else epochs
            for epoch in range(self.start_epoch, end):
                self._optimizer_for(epoch)
                metrics = self._train_epoch(epoch)
                ckpt_dir = self._evaluate(epoch, metrics, best_dir) if ctx.rank == 0 else None
                diverged = self._shared(metrics.get("diverged"))
                shown = {k: v for k, v in metrics.items() if k != "diverged"}
                ctx.log(epoch_line(shown))
                try:  # report persists the checkpoint; it raises when the trial is stopped (ASHA, Ctrl-C): clean up
                    ctx.report({**metrics, **({"diverged": diverged} if diverged else {})}, ckpt_dir)
                finally:
                    if ckpt_dir:
                        shutil.rmtree(os.path.dirname(ckpt_dir), ignore_errors=True)
                if diverged:
                    ctx.log(f"stopping: {diverged}; train.stop_diverged=false (--no-stop-diverged) trains on")
                    break
            if self.start_epoch >= end and self.history:  # resumed after its last epoch: report its result again,
                metrics = dict(self.history[-1])  # without a checkpoint (REPLAY): already logged, nothing to persist
                ctx.report(metrics, REPLAY)
        finally:
            if best_dir:
                shutil.rmtree(best_dir, ignore_errors=True)
        return metrics

    def _optimizer_for(self, epoch: int) -> None:
        """Each stage its own AdamW and warm-up + linear decay over that stage's steps; a run resumed mid-stage
        goes on with the saved optimizer and schedule."""
        stages, stage = self.stages, self.stages[epoch]
        if epoch == self.start_epoch or stage != stages[epoch - 1]:
            self.opt, self.sched = make_optimizer(self.cfg, self.params, self.steps_per_epoch * stages.count(stage))
            if epoch == self.start_epoch and self.blobs is not None and stages[epoch - 1] == stage:
                self.opt.load_state_dict(self.blobs["optimizer"])
                self.sched.load_state_dict(self.blobs["scheduler"])

    def _train_epoch(self, epoch: int) -> dict:
        """One pass of training steps; the epoch's mean losses (averaged over ranks) and throughput."""
        cfg, ctx, stage = self.cfg, self.ctx, self.stages[epoch]
        # Each rank its own dropout masks (one seed gave every rank the same ones), re-seeded per epoch so a resumed
        # run draws what the uninterrupted one drew, and off the stream `seed` that built the weights (identical on
        # every rank; DDP broadcasts rank 0's anyway). The batch order has its own generator.
        torch.manual_seed((cfg.train.seed * 1_000_003 + epoch) * 1_000 + ctx.rank + 1)
        sums: dict[str, torch.Tensor] = {}
        self.clock.lap("between")
        t0 = time.perf_counter()
        progress = (
            Progress(
                f"epoch {epoch + 1}/{cfg.train.epochs} {stage}",
                self.steps_per_epoch,
                log=ctx.log,
                live=ctx.live and ctx.rank == 0,
            )
            if ctx.rank == 0
            else None
        )
        n_steps = self._steps(epoch, stage, sums, progress)
        if progress:
            progress.done()
        train = self._mean_losses(sums, n_steps)
        if not cfg.train.stop_diverged and not all(math.isfinite(v) for v in train.values()):
            raise NonFiniteLoss(f"non-finite training loss at epoch {epoch + 1}: {train}")
        start = self.loss_start.get(stage)
        metrics = {
            "epoch": epoch + 1,
            "stage": stage,
            **train,
            **({"train_loss_start": start} if start is not None else {}),
            "train_examples_per_s": n_steps * self.per_rank * ctx.world_size / (time.perf_counter() - t0),
        }
        self.clock.lap("train")
        return metrics

    def _steps(self, epoch: int, stage: str, sums: dict[str, torch.Tensor], progress: Progress | None) -> int:
        """The epoch's training steps, their losses added to ``sums``; how many ran (fewer where ``stop_diverged``
        finds the loss non-finite mid-epoch: the rest of the epoch would train NaN weights)."""
        cfg, ctx = self.cfg, self.ctx
        batches = drawn_batches(
            len(self.data.train), cfg.train.batch_size, epoch, cfg.train.seed, ctx.rank, ctx.world_size, self.lengths
        )
        done = 0
        for step, idx in enumerate(batches):
            if step >= self.steps_per_epoch:
                break
            self._step(epoch, step, idx, stage, sums)
            done = step + 1
            if progress:
                progress.update(items=self.per_rank * ctx.world_size)
            if cfg.train.stop_diverged and self._loss_went_bad(stage, sums, done):
                break
        return max(done, 1)

    def _loss_went_bad(self, stage: str, sums: dict[str, torch.Tensor], done: int) -> bool:
        """``stop_diverged``, after step ``done`` of an epoch: the mean loss of a stage's first ``START_STEPS`` steps
        kept as its yardstick of exploding, and every ~10% of the epoch whether the loss went non-finite (True). Every
        rank calls this at the same steps (the means are all-reduced); the device syncs only then."""
        first, every = min(START_STEPS, self.steps_per_epoch), max(1, self.steps_per_epoch // 10)
        if done != first and done % every:
            return False
        mean = self._mean_losses({"loss": sums["loss"]}, done)["train_loss"]
        if done == first and stage not in self.loss_start and math.isfinite(mean):
            self.loss_start[stage] = mean
        return not math.isfinite(mean)

    def _step(self, epoch: int, step: int, idx: list[int], stage: str, sums: dict[str, torch.Tensor]) -> None:
        poison = self.fault.at(self.ctx.rank, epoch + 1, step + 1)  # test hook: None in normal use
        feats = [self.data.train[i] for i in idx]
        feats = self.masker(feats, idx, epoch) if self.masker else feats
        batch = to_device(collate(feats, self.data.pad_id), self.device)
        t_out = teacher_outputs(self.teacher, self.cache, self.objective, batch, idx, stage, self.device, self.t_dtype)
        on = StepOn(self.device, self.step_amp, self.ctx.world_size if self.distributed else 1, poison)
        train_step(self.model, batch, t_out, stage, self.opt, self.sched, on=on, sums=sums)

    def _mean_losses(self, sums: dict[str, torch.Tensor], n_steps: int) -> dict[str, float]:
        keys = sorted(sums)
        vec = torch.stack([sums[k] for k in keys]) / max(n_steps, 1)
        if self.distributed:
            dist.all_reduce(vec)
            vec /= self.ctx.world_size
        return {f"train_{k}": float(v) for k, v in zip(keys, vec.tolist(), strict=True)}

    def _judge(self, metrics: dict) -> dict:
        """``{"diverged": why}`` where this epoch shows the run diverged (``train/diverge.py``), else nothing; the
        floor is judged once the prediction stage has trained enough steps (``FLOOR_MIN_STEPS``), its warm-up
        (``make_optimizer``'s, over the stage's steps) has ended and half its steps are done (``FLOOR_PATIENCE``)."""
        pred_steps = self.steps_per_epoch * sum(h["stage"] == PRED_STAGE for h in self.history)
        total = self.steps_per_epoch * self.stages.count(PRED_STAGE)
        start = self.loss_start.get(metrics["stage"])
        reason = verdict(
            metrics,
            start=start,
            floor=self.floor,
            pred_steps=pred_steps,
            warmup_steps=warmup_steps(self.cfg, total),
            total_pred_steps=total,
        )
        return {"diverged": reason} if reason else {}

    def _shared(self, reason: str | None) -> str | None:
        """Rank 0's verdict on every rank (only rank 0 scores), so all stop after the same epoch."""
        if not (self.distributed and self.cfg.train.stop_diverged):
            return reason
        box = [reason]
        dist.broadcast_object_list(box, src=0)
        return box[0]

    def _scoring(self, epoch: int) -> Progress:
        """Progress of scoring both splits, shown as training's (rank 0 only scores)."""
        d = self.data
        rows = sum(len(e.features) for e in (d.eval_encoded, d.val_encoded) if isinstance(e, Encoded))  # QA: windows
        what = f"epoch {epoch + 1}/{self.cfg.train.epochs} scoring " + ("val + dev" if d.val_examples else "dev")
        return Progress(what, rows, unit="rows", log=self.ctx.log, live=self.ctx.live)

    def _evaluate(self, epoch: int, metrics: dict, best_dir: str | None) -> str:
        """Rank 0: val and dev scores, size and latency, the best epoch so far (chosen on val), and this epoch's
        checkpoint (its folder returned)."""
        metrics.update(dev_metrics(self.student, self.data, max(self.per_rank, 32), self.device, self._scoring(epoch)))
        self.clock.lap("eval")
        metrics.update(_speed(self.student, self.device))
        # the examples an epoch trains: what a labels-only control of an augmented run matches (orchestrate/control)
        metrics["epoch_examples"] = self.steps_per_epoch * self.cfg.train.batch_size
        self.clock.lap("latency")
        self.history.append(metrics)
        if self.cfg.train.stop_diverged:  # before the checkpoint: a resumed run knows it stopped
            metrics.update(self._judge(metrics))
        best = best_epoch(self.history, self.main, self.stages[-1])
        metrics.update(
            best_epoch=best["epoch"],  # best_val_* chose it; best_eval_* is that epoch's dev score
            **{f"best_{k}": v for k, v in best.items() if k.startswith(("eval_", "val_"))},
        )
        ckpt_dir = os.path.join(run_temp("ckpt"), "checkpoint")
        save_checkpoint(
            ckpt_dir,
            self.student,
            self.tokenizer,
            self.objective,
            self.opt,
            self.sched,
            {"epoch": epoch + 1, "history": self.history, "config": self.cfg.to_params()},
            best=None if best is metrics else best_dir,
        )
        if best is metrics:
            assert best_dir is not None  # rank 0 always has one
            copy_dir(os.path.join(ckpt_dir, "best_student"), best_dir)
        self.clock.lap("checkpoint")
        metrics.update(self.clock.metrics())  # cumulative seconds per phase, so far
        return ckpt_dir


def epoch_line(metrics: dict) -> str:
    """An epoch's metrics as its log line: a parameter count as ``17.4M`` (``1.739e+07`` reads as nothing), other
    floats to 4 significant digits."""
    from raydistill.common.units import size

    def shown(k: str, v) -> str:
        if k.endswith("_params") and isinstance(v, int | float) and not isinstance(v, bool):
            return size(v)
        return f"{v:.4g}" if isinstance(v, float) else f"{v}"

    return " ".join(f"{k}={shown(k, v)}" for k, v in metrics.items())


class Clock:
    """Cumulative wall seconds per phase of a run (``time_<phase>_s``), lap by lap, and the process's CPU seconds in
    training steps (``cpu_train_s``): what a trial's fixed CPU seconds are counted against (``orchestrate.trial``),
    since wall seconds outside training grow with the trials sharing a machine's cores even when no work is added."""

    def __init__(self):
        self.t, self.cpu, self.spent, self.cpu_train = time.perf_counter(), time.process_time(), {}, 0.0

    def lap(self, phase: str) -> None:
        now, cpu = time.perf_counter(), time.process_time()
        self.spent[phase] = self.spent.get(phase, 0.0) + now - self.t
        if phase == "train":
            self.cpu_train += cpu - self.cpu
        self.t, self.cpu = now, cpu

    def metrics(self) -> dict:
        return {**{f"time_{k}_s": round(v, 3) for k, v in self.spent.items()}, "cpu_train_s": round(self.cpu_train, 3)}


def _speed(student, device) -> dict:
    """Parameter count and latency (memoised per architecture and machine, so measured once per student size)."""
    from raydistill.models.latency import student_speed

    length = min(128, student.config.max_position_embeddings - 2)
    out = student_speed(student, length=length)
    student.to(device).train()
    return out
