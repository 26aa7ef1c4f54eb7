"""Fine-tuning a teacher in this process: the plain-PyTorch loop the distillation workers use, on gold labels with the
teacher's own task head, the best epoch chosen on the validation split. A finished result with identical inputs
(``fingerprint``) is reused; one stopped after a finished epoch goes on from that epoch's checkpoint (kept in
``OUTPUT.resume``) into the same MLflow run. ``prepare_teacher`` fine-tunes a sweep's pretrained encoder first.
The command is ``python -m raydistill.finetune``."""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
import shutil
import sys

from raydistill.common.paths import write_json_atomic
from raydistill.config.schema import RunConfig, StudentConfig
from raydistill.tracking.track import Tracker

DONE = "raydistill_finetune.json"
RESUME_FILES = {"resume.json", "resume.json.tmp", "checkpoint", "next", "old"}  # all OUTPUT.resume ever holds
COMMAND = "raydistill finetune"
RESUME_KIND = "fine-tune checkpoint"  # OUTPUT.resume's marker: the product's own folder, removed whole


def resume_folder(output: str) -> str:
    return os.path.abspath(output).rstrip("/") + ".resume"


def check_resume_folder(output: str) -> None:
    """``OUTPUT.resume`` is the product's alone: created by it, removed only carrying its marker. A folder of that name
    it did not make (or that holds a file of the user's) is refused before any work, ``--overwrite`` or not. One an
    older raydistill made (no marker, its files and record only) is adopted."""
    from raydistill.common.outputs import refuse_foreign_working

    folder = resume_folder(output)
    ours = os.path.lexists(folder) and is_ours(folder)
    refuse_foreign_working(folder, RESUME_KIND, "finetune", "its epochs", ours)


def is_ours(folder: str) -> bool:
    """``folder`` is a fine-tune's ``OUTPUT.resume``: carrying its marker, or an older raydistill's (its record names
    a fingerprint and a run, nothing else is in it), which gets the marker now."""
    from raydistill.common.outputs import MARKER, is_working, mark_working

    if is_working(folder, RESUME_KIND, RESUME_FILES):
        return True
    if not os.path.isdir(folder) or MARKER in os.listdir(folder) or not set(os.listdir(folder)) <= RESUME_FILES:
        return False
    try:
        with open(os.path.join(folder, "resume.json"), encoding="utf-8") as f:
            kept = json.load(f)
    except (OSError, ValueError):
        return False
    if not (isinstance(kept, dict) and kept.get("fingerprint") and kept.get("run_id")):
        return False
    mark_working(folder, COMMAND, RESUME_KIND)
    return True


def as_teacher(cfg: RunConfig) -> RunConfig:
    """A fine-tune is never stopped as diverged: a teacher at the floor after an epoch may still learn, and one stopped
    would be published and reused as the sweep's yardstick; a NaN loss fails it (loop.NonFiniteLoss) as it always did.
    """
    return cfg.replace(train=dataclasses.replace(cfg.train, stop_diverged=False))


def fingerprint(cfg: RunConfig) -> str:
    """Hash of everything that decides the result: config (as a fine-tune runs it), teacher weights/config, data."""
    from raydistill.data.splits import data_fingerprint
    from raydistill.models.encoder import fingerprint as model_fp

    cfg = as_teacher(cfg)  # --stop-diverged does not apply, so it never changes what is reused
    h = hashlib.sha256(json.dumps(cfg.to_params(), sort_keys=True).encode())
    h.update(model_fp(cfg.teacher).encode() if os.path.isdir(cfg.teacher) else cfg.teacher.encode())
    h.update(data_fingerprint(cfg).encode())
    return h.hexdigest()[:24]


def finetune(cfg: RunConfig, output: str, log=print, parent_run_id: str | None = None) -> dict:
    """Train ``cfg.teacher`` with its own task head on gold labels; returns dev metrics. Reuses a finished
    result in ``output`` when the fingerprint matches. Logged as its own MLflow run."""
    from raydistill.train.precision import run_device

    check_resume_folder(output)  # a user's OUTPUT.resume is never written into (the command checked it up front)
    cfg = as_teacher(cfg)

    device = run_device(cfg.train)  # the GPU with --use-gpu (and a sweep's --use-gpu), else the CPU
    fp = fingerprint(cfg)
    with _alone(output, log):
        prev = _finished(output, fp)
        if prev is not None:
            log(f"reusing finished fine-tune in {output} (fingerprint {fp})")
            return prev
        return _finetune(cfg, output, fp, device, log, parent_run_id)


@contextlib.contextmanager
def _alone(output: str, log):
    """One fine-tune at a time into ``output`` on this machine (two sweeps' teachers share a folder): the second waits,
    then reuses the first's result or trains its own, never removing a live one's ``OUTPUT.resume`` as stale. The
    lock file lives in the temporary folder, named by the output's real path: nothing is written beside it."""
    import fcntl
    import tempfile

    key = hashlib.sha256(os.path.realpath(output).encode()).hexdigest()[:24]
    os.makedirs(folder := os.path.join(tempfile.gettempdir(), "raydistill-locks"), exist_ok=True)
    with open(os.path.join(folder, f"finetune-{key}.lock"), "a") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            log(f"another fine-tune is writing {output}: waiting for it to end")
            fcntl.flock(lock, fcntl.LOCK_EX)
        yield  # released when the file closes


def _finetune(cfg: RunConfig, output: str, fp: str, device, log, parent_run_id: str | None) -> dict:
    """The fine-tune itself, resumed from ``OUTPUT.resume`` where it was stopped, published into ``output``."""
    from raydistill.common.outputs import publish, remove_if_ours

    tracker = Tracker(cfg.tracking_uri, cfg.experiment)
    record = ResumeRecord(output, fp)
    run_id = record.open_run(tracker, cfg, parent_run_id, log)
    metrics = _train(cfg, tracker, device, record, run_id, log)
    if device.type == "cuda":  # a sweep's driver goes on to start trials on this GPU: its cached memory back
        import torch

        torch.cuda.empty_cache()
    best = os.path.join(record.ckpt, "best_student")  # the epoch chosen on val
    with open(os.path.join(best, DONE), "w") as f:
        json.dump({"fingerprint": fp, "metrics": metrics, "config": cfg.to_params()}, f, indent=1)
    publish(best, output, COMMAND)
    remove_if_ours(record.folder, RESUME_KIND, RESUME_FILES)
    return metrics


def _finished(output: str, fp: str) -> dict | None:
    """The metrics of a finished fine-tune with this fingerprint in ``output``, else None."""
    done = os.path.join(output, DONE)
    if not os.path.isfile(done):
        return None
    with open(done) as f:
        prev = json.load(f)
    return prev["metrics"] if prev.get("fingerprint") == fp else None


class ResumeRecord:
    """Each finished epoch's checkpoint (latest and best student, optimizer, schedule) kept in ``OUTPUT.resume``, so
    a fine-tune stopped by Ctrl-C, a failure or the end of a session goes on from its last epoch into the same run."""

    def __init__(self, output: str, fp: str):
        self.output, self.fp = output, fp
        self.folder = resume_folder(output)  # the product's own (check_resume_folder)
        self.state = os.path.join(self.folder, "resume.json")
        self.ckpt = os.path.join(self.folder, "checkpoint")
        self.next, self.old = os.path.join(self.folder, "next"), os.path.join(self.folder, "old")
        if not os.path.isdir(self.ckpt) and os.path.isdir(self.next):  # stopped between keep's two renames
            os.replace(self.next, self.ckpt)  # complete: the old one is moved aside only once it is copied
        self.kept = json.load(open(self.state)) if os.path.isfile(self.state) else {}
        self.resume_dir = self.ckpt if self.kept.get("fingerprint") == fp and os.path.isdir(self.ckpt) else None
        self.run_id = ""

    def open_run(self, tracker: Tracker, cfg: RunConfig, parent_run_id: str | None, log) -> str:
        """The MLflow run: the kept one, RUNNING again, or a new one (a stale record of another fine-tune goes)."""
        from raydistill.common.outputs import remove_if_ours
        from raydistill.train.checkpoint import load_history
        from raydistill.train.precision import effective

        if self.resume_dir:
            self.run_id = self.kept["run_id"]
            tracker.reopen_run(self.run_id)
            history = load_history(self.ckpt)  # the epoch from the checkpoint: its record is written after it
            tracker.log_missing_epochs(self.run_id, history)  # kept, not yet logged
            epoch = int(history[-1]["epoch"]) if history else self.kept["epoch"]
            log(f"resuming the fine-tune in {self.output} after its epoch {epoch} (fingerprint {self.fp})")
            return self.run_id
        remove_if_ours(self.folder, RESUME_KIND, RESUME_FILES)  # a stale record of another fine-tune
        self.run_id = tracker.start_run(
            f"finetune-{cfg.task}",
            # what ran beside what was asked: bf16=True on a CPU without native bf16 trains fp32 (issue 48 item 6)
            {**cfg.to_params(), **effective(cfg.train), "fingerprint": self.fp},
            tags={"raydistill.role": "teacher"},
            parent_run_id=parent_run_id,
        )
        return self.run_id

    def keep(self, ckpt_dir: str, epoch: int | None) -> None:
        """The epoch's checkpoint replaces the previous one, then the record that names it. Renames only between a
        complete copy and its place: a stop at any point leaves one whole checkpoint (``checkpoint``, or ``next``
        between the renames, which the next ``ResumeRecord`` puts in place)."""
        from raydistill.common.outputs import mark_working
        from raydistill.train.checkpoint import copy_dir

        if not os.path.isdir(self.folder):
            mark_working(self.folder, COMMAND, RESUME_KIND)
        copy_dir(ckpt_dir, self.next)  # hard links where it can
        shutil.rmtree(self.old, ignore_errors=True)
        if os.path.isdir(self.ckpt):
            os.replace(self.ckpt, self.old)
        os.replace(self.next, self.ckpt)
        write_json_atomic(self.state, {"fingerprint": self.fp, "run_id": self.run_id, "epoch": epoch})
        shutil.rmtree(self.old, ignore_errors=True)


def _train(cfg: RunConfig, tracker: Tracker, device, record: ResumeRecord, run_id: str, log) -> dict:
    """The loop in this process, every epoch logged and kept; the run ends FINISHED, FAILED or KILLED, never left
    RUNNING."""
    from raydistill.train.loop import REPLAY, Context, run

    def report(metrics, ckpt_dir):
        if ckpt_dir is REPLAY:  # resumed after its last epoch: its result, logged already
            return
        if ckpt_dir:  # kept first: an epoch logged but not kept would be trained and logged again on resume
            record.keep(ckpt_dir, metrics.get("epoch"))
        tracker.log_epoch(run_id, metrics)

    try:
        if not record.resume_dir:
            from raydistill.data.splits import log_inputs

            log_inputs(tracker, run_id, cfg)
        ctx = Context(
            device=device, report=report, log=lambda m: log(m), live=sys.stderr.isatty(), resume_dir=record.resume_dir
        )
        metrics = run(cfg, ctx)
    except BaseException as e:
        interrupted = isinstance(e, KeyboardInterrupt)  # Ctrl-C / SIGTERM: stopped by the user, not failed
        tracker.set_tags(
            run_id, {"interrupted": "true"} if interrupted else {"error": f"{type(e).__name__}: {e}"[:4000]}
        )
        tracker.end_run(run_id, "KILLED" if interrupted else "FAILED")
        if os.path.isfile(record.state) and not interrupted:  # interrupted: the command's one line says how to go on
            log(f"the fine-tune's finished epochs are kept in {record.folder}: the same command goes on from there")
        raise
    tracker.end_run(run_id)
    return metrics


def prepare_teacher(
    cfg: RunConfig, storage_root: str, parent_run_id: str | None, log, epochs: int = 3, lr: float = 2e-5
) -> str:
    """A teacher already fine-tuned for the task is used as is; a pretrained encoder is fine-tuned first
    (cached by fingerprint, its own MLflow run), as the Patient-KD recipe does: on every training row (less the
    validation split) for ``epochs`` at ``lr`` — its own budget, not the trials' ``max_steps`` / ``train_limit``."""
    from raydistill.config.schema import task_of
    from raydistill.models.heads import has_task_head
    from raydistill.train.preflight import teacher_config

    task = task_of(cfg)
    if has_task_head(teacher_config(cfg.teacher), task):
        return cfg.teacher
    slug = cfg.teacher.rstrip("/").replace("/", "_").replace(".", "_")
    out = os.path.join(storage_root, "teachers", f"{slug}-{task.name}")
    import torch

    # on this process's GPU when the trials train on GPUs and it has one (a joined cluster's driver may have none)
    gpu = cfg.train.use_gpu and torch.cuda.is_available()
    log(
        f"teacher {cfg.teacher} has no {task.name} head: fine-tuning it first into {out}"
        + (" on the GPU" if gpu else "")
    )
    ft = cfg.replace(
        student=StudentConfig(init="pretrained"),
        distill=dataclasses.replace(cfg.distill, method="finetune"),
        train=dataclasses.replace(
            cfg.train, lr=lr, epochs=epochs, max_steps=0, epoch_rows=0, train_limit=0, num_workers=1, use_gpu=gpu
        ),
        augment_dir=None,
    )
    metrics = finetune(ft, out, log=log, parent_run_id=parent_run_id)
    log(f"teacher dev metrics: {json.dumps(metrics)}")
    return out
