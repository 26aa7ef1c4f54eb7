"""One distillation run on Ray Train: a TorchTrainer with N DDP workers (gloo on CPU, NCCL on GPU), per-epoch report
and checkpoint, MLflow logging from the Train controller, export of the best epoch's student."""

from __future__ import annotations

import glob
import logging
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import ray
import ray.train
import ray.train.torch
from ray.train.v2.api.callback import UserCallback

from raydistill.config.schema import RunConfig
from raydistill.export.student import export_student
from raydistill.orchestrate.kept import KEEP, checkpoints, latest_history, local_dir, shrink
from raydistill.tracking.track import Tracker

log = logging.getLogger("raydistill")


def _worker(config: dict) -> None:
    """Runs on every Ray Train worker: Ray context in, plain-PyTorch loop out."""
    from raydistill.teacher.cache import open_cache
    from raydistill.train.loop import Context, run

    cfg: RunConfig = config["cfg"]  # the driver's frozen config itself, unpickled: already resolved and validated
    from raydistill.orchestrate.resources import confine_threads

    # as many threads (torch's on CPU, the tokenizers' pool) as CPUs Ray gave this worker, no more (trials share cores)
    confine_threads(config.get("threads", 1), torch_threads=not cfg.train.use_gpu)
    tctx = ray.train.get_context()
    ckpt = ray.train.get_checkpoint()
    resume_dir = None
    if ckpt is not None:
        resume_dir = os.path.join(ckpt.to_directory(tempfile.mkdtemp(prefix="raydistill-resume-")), "checkpoint")
    rank = tctx.get_world_rank()

    device = ray.train.torch.get_device()

    def report(metrics: dict, ckpt_dir: str | None) -> None:
        c = ray.train.Checkpoint.from_directory(os.path.dirname(ckpt_dir)) if ckpt_dir else None
        if device.type == "cuda" and rank == 0:  # what the trial holds on its GPU: what --gpus-per-worker must leave
            from raydistill.orchestrate.resources import gpu_memory

            metrics = {**metrics, **gpu_memory(device)}
        ray.train.report(metrics, checkpoint=c)

    # to the process's real stderr: Ray forwards it to the driver's stderr (stdout's last line is the command's
    # JSON), and Ray Train's print patch would log a sys.stderr print twice
    ctx = Context(
        rank=rank,
        world_size=tctx.get_world_size(),
        device=device,
        resume_dir=resume_dir,
        report=report,
        log=_printer(cfg) if rank == 0 else (lambda m: None),
        open_cache=open_cache,
    )
    try:
        run(cfg, ctx)
    finally:
        if resume_dir:
            shutil.rmtree(os.path.dirname(resume_dir), ignore_errors=True)


def _printer(cfg: RunConfig):
    """How rank 0 says a line: to the process's real stderr, a sweep's trial's lines led by its id (console.label)."""
    from raydistill.orchestrate.console import label

    lead = label(cfg.run_name)
    return lambda m: print(f"{lead}{m}", file=sys.__stderr__, flush=True)


class MlflowEpochCallback(UserCallback):
    """Logs every epoch's rank-0 metrics to the run's MLflow run as they are reported (controller side), each epoch
    once: a failed attempt's last checkpointed epoch, logged from its checkpoint when the run failed
    (``_log_unlogged_epochs``), reaches the resumed attempt's controller again (tests/e2e/test_faults.py)."""

    def __init__(self, tracker: Tracker, run_id: str):
        self.tracker, self.run_id = tracker, run_id  # pickled to the controller: the Tracker without its client
        self.logged: set[int] | None = None  # the run's logged epochs, read on the controller at the first report

    def after_report(self, run_context, metrics, checkpoint):
        if checkpoint is None:  # train.loop.REPLAY: a run resumed after its end repeating its logged result
            return
        if self.logged is None:
            try:
                self.logged = self.tracker.logged_epochs(self.run_id)
            except Exception as e:  # the store down past the retries: not the run's failure (its metrics spool)
                log.warning(
                    "run %s: its logged epochs could not be read (%s); asked again at the next report", self.run_id, e
                )
        epoch = metrics[0].get("epoch")
        if epoch is None or self.logged is None or int(epoch) not in self.logged:
            self.tracker.log_epoch(self.run_id, metrics[0])
            if epoch is not None and self.logged is not None:
                self.logged.add(int(epoch))


@dataclass(frozen=True)
class RunOptions:
    """How one run is trained on Ray Train: restarts, placement and each worker's resources, Ray Train's own log."""

    max_failures: int = 0
    placement_strategy: str = "PACK"
    # None: a Ray Train worker takes 1 CPU; a run in this process trains on the process's torch threads (``threads``)
    cpus_per_worker: float | None = None
    gpus_per_worker: float | None = None
    verbose: bool = False

    def cpus(self) -> float:
        """A Ray Train worker's CPUs."""
        from raydistill.orchestrate.resources import DEFAULT_CPUS_PER_WORKER

        return DEFAULT_CPUS_PER_WORKER if self.cpus_per_worker is None else self.cpus_per_worker

    def threads(self, here: bool) -> int:
        """Each CPU worker's torch threads: on Ray Train its CPUs; in this process (``here``) ``cpus_per_worker``,
        unset the process's own."""
        from raydistill.orchestrate.resources import threads

        return threads(self.cpus_per_worker if here else self.cpus())


DEFAULT_OPTIONS = RunOptions()


def make_trainer(cfg: RunConfig, *, name: str, storage_path: str, opts: RunOptions = DEFAULT_OPTIONS, callbacks=()):
    from ray.train import CheckpointConfig, FailureConfig, LoggingConfig, ScalingConfig
    from ray.train import RunConfig as TrainRunConfig
    from ray.train.torch import TorchConfig, TorchTrainer

    resources = {"CPU": opts.cpus()}
    if cfg.train.use_gpu:
        resources["GPU"] = opts.gpus_per_worker or 1
    return TorchTrainer(
        _worker,
        # the config object itself: Ray pickles the loop's config to each worker (Train V2's state export only shows
        # it, as text); no dict on the way, so the worker trains on exactly the config the driver made
        train_loop_config={"cfg": cfg, "threads": opts.threads(here=False)},
        torch_config=TorchConfig(backend="nccl" if cfg.train.use_gpu else "gloo"),
        scaling_config=ScalingConfig(
            num_workers=cfg.train.num_workers,
            use_gpu=cfg.train.use_gpu,
            resources_per_worker=resources,
            placement_strategy=opts.placement_strategy,
        ),
        # ray.train.RunConfig is Train V2's at run time (it takes logging_config); the type checker sees V1's
        run_config=TrainRunConfig(  # type: ignore[call-arg]
            name=name,
            storage_path=storage_path,
            callbacks=list(callbacks),
            failure_config=FailureConfig(max_failures=opts.max_failures),
            checkpoint_config=CheckpointConfig(num_to_keep=KEEP),
            # Ray Train's own INFO lines (worker group start, every report and checkpoint)
            # drown the run's progress; its log files keep them all
            logging_config=LoggingConfig(log_level="INFO" if opts.verbose else "WARNING"),
        ),
    )


def trial_device(train):
    """The device an in-process trial trains on: the CPU, or with ``train.use_gpu`` the GPU Ray gave its Tune trial
    (``resources.cuda_index``: ``cuda:0`` of the trial's visible set, shared by the trials packed on that GPU), made
    the process's current device as Ray Train does for its workers. Outside a Ray worker (a test): the current CUDA
    device. Refuses ``use_gpu`` where torch sees no CUDA device (``run_device``)."""
    import torch

    from raydistill.orchestrate.resources import cuda_index
    from raydistill.train.precision import run_device

    device = run_device(train)
    if device.type != "cuda":
        return device
    ids = ray.get_gpu_ids() if ray.is_initialized() else []
    device = torch.device("cuda", cuda_index(ids, os.environ.get("CUDA_VISIBLE_DEVICES")) if ids else device.index)
    torch.cuda.set_device(device)
    return device


def fit_in_process(
    cfg: RunConfig, *, run_dir: str, threads: int, resume: bool, on_epoch, on_replay=None
) -> tuple[dict, str]:
    """One 1-worker run (CPU or GPU, ``trial_device``) in this process, without Ray Train, whose controller and worker
    start are most of a sweep trial's fixed cost (docs/benchmarks/2026-11-23-sweep-throughput.md): the same loop, each
    epoch's checkpoint
    persisted under ``run_dir`` (the last ``KEEP``), ``on_epoch(metrics)`` per epoch, and a restarted trial
    (``resume``) going on from its latest checkpoint; one resumed after its end hands its recorded result to
    ``on_replay`` (default ``on_epoch``) instead. Returns the last epoch's metrics and the latest checkpoint
    folder."""
    from raydistill.orchestrate.resources import confine_threads, gpu_fresh, gpu_memory
    from raydistill.teacher.cache import open_cache
    from raydistill.train.loop import REPLAY, Context, run

    if not resume:  # a fresh start: only the checkpoints an earlier attempt made here go (the folder rule)
        for old in checkpoints(run_dir) + glob.glob(os.path.join(run_dir, "checkpoint_*.tmp")):
            shutil.rmtree(old, ignore_errors=True)
    os.makedirs(run_dir, exist_ok=True)
    kept = checkpoints(run_dir)
    device = trial_device(cfg.train)
    if device.type == "cuda":  # a reused trial actor: the last trial's cached blocks go back, its peak is not ours
        gpu_fresh(device)
    # the tokenizers' pool (and torch's threads on the CPU): the trial's CPUs, before it first tokenises
    confine_threads(threads, torch_threads=device.type == "cpu")
    last: dict = {}

    def report(metrics: dict, ckpt_dir: str | None) -> None:
        if ckpt_dir:  # persisted before anyone hears of the epoch, as Ray Train does
            dst = os.path.join(run_dir, f"checkpoint_{int(metrics['epoch']):06d}")
            shutil.rmtree(dst + ".tmp", ignore_errors=True)
            shutil.copytree(os.path.dirname(ckpt_dir), dst + ".tmp")
            shutil.rmtree(dst, ignore_errors=True)
            os.replace(dst + ".tmp", dst)
            for old in checkpoints(run_dir)[:-KEEP]:
                shutil.rmtree(old, ignore_errors=True)
        if device.type == "cuda":  # what the trial holds on its GPU, as a Ray Train worker reports it
            metrics = {**metrics, **gpu_memory(device)}
        (on_epoch if ckpt_dir is not REPLAY else on_replay or on_epoch)(metrics)
        last.clear()
        last.update(metrics)

    ctx = Context(
        rank=0,
        world_size=1,
        device=device,
        resume_dir=os.path.join(kept[-1], "checkpoint") if kept else None,
        report=report,
        log=_printer(cfg),
        open_cache=open_cache,
    )
    run(cfg, ctx)
    return last, checkpoints(run_dir)[-1]


def final_metrics(last: dict) -> dict:
    """A run's result from its last report: numbers only, with ``eval_*`` and ``val_*`` those of the best epoch (the
    student it exports, chosen on val) rather than of the last; ``epoch`` stays the last epoch and ``best_epoch``
    names the best."""
    out = {k: v for k, v in last.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
    return {**out, **{k[len("best_") :]: v for k, v in out.items() if k.startswith(("best_eval_", "best_val_"))}}


def augment_params(cfg: RunConfig) -> dict:
    """The knobs (seed included) of the augmented training set, when the run uses one."""
    import json

    path = os.path.join(cfg.augment_dir or "", "augment.json")
    if not cfg.augment_dir or not os.path.isfile(path):
        return {}
    with open(path) as f:
        return {f"augment_{k}": v for k, v in json.load(f).items()}


@dataclass(frozen=True)
class TrialLink:
    """What ties a run to what started it, passed together to the run: a sweep trial's parent MLflow run, its tags
    (trial id, sweep, role) and Tune's report callbacks on Ray Train; the run an earlier attempt left (a restarted
    trial, an interrupted ``distill``: resumed, not started again); ``on_start``, called with the MLflow run's id once
    it exists (``distill``'s resume record). A run outside a sweep has none of the sweep's (``NO_LINK``)."""

    parent_run_id: str | None = None
    tags: dict[str, str] = field(default_factory=dict)
    resume_run_id: str | None = None
    callbacks: tuple[Any, ...] = ()
    on_start: Callable[[str], None] | None = None


NO_LINK = TrialLink()


def execute(
    cfg: RunConfig,
    *,
    storage_path: str,
    name: str,
    opts: RunOptions = DEFAULT_OPTIONS,
    in_process=None,
    trial: TrialLink = NO_LINK,
) -> dict:
    """One distillation run end to end: MLflow run, TorchTrainer.fit, student export, size and latency.

    Returns the final metrics (``val_*`` and ``eval_*`` of the best epoch by val, ``best_epoch``, ``student_params``,
    ``latency_ms_b*``) plus ``run_id`` and ``student_dir`` (the best epoch's student). MLflow keeps the per-epoch
    curves, ``best_eval_*`` and ``best_epoch`` among them. A failed fit marks the MLflow run FAILED with the reason,
    then re-raises; a trial the search's scheduler stops early ends KILLED, tagged ``raydistill.stopped``; a run
    the loop stopped as diverged ends FINISHED with its best epoch's student, tagged ``raydistill.stopped`` with the
    reason (also returned, as ``stopped``). ``in_process`` (a sweep's 1-worker trial, CPU or GPU: a callable taking
    each epoch's metrics) runs the loop in this process instead of on Ray Train (``fit_in_process``).
    """
    t0 = time.perf_counter()
    tracker = Tracker(cfg.tracking_uri, cfg.experiment)
    here = in_process is not None
    run_id = trial.resume_run_id or tracker.start_run(
        cfg.run_name or name,
        _run_params(cfg, opts.threads(here)),
        tags=trial.tags or None,
        parent_run_id=trial.parent_run_id,
    )
    try:  # from here on the run ends FINISHED, FAILED or KILLED, never left RUNNING
        if trial.on_start:
            trial.on_start(run_id)
        _ready_run(cfg, tracker, run_id, resumed=bool(trial.resume_run_id))
        last, checkpoint, t1 = _fit(cfg, tracker, run_id, storage_path, name, opts, trial, in_process)
        t2 = time.perf_counter()
        final = final_metrics(last)
        stopped = {"stopped": last["diverged"]} if last.get("diverged") else {}
        if stopped:  # stopped as diverged (train.stop_diverged): a finished run, its best epoch's student exported
            tracker.set_tags(run_id, {"raydistill.stopped": stopped["stopped"]})
        student_dir = _publish_student(cfg, tracker, run_id, checkpoint, final)
        # where the run's seconds went outside the workers' loop (Ray Train start and stop, MLflow, export)
        timing = {"time_run_start_s": t1 - t0, "time_fit_s": t2 - t1, "time_export_s": time.perf_counter() - t2}
        tracker.log_metrics(run_id, timing)
        final.update(timing)
        tracker.end_run(run_id)
    except BaseException as e:
        _end_unfinished(tracker, run_id, e)
        raise
    shrink(checkpoint)  # ended: from here on it is only ever reported again, never trained on
    return {**final, **stopped, "run_id": run_id, "student_dir": student_dir}


def _ready_run(cfg: RunConfig, tracker: Tracker, run_id: str, resumed: bool) -> None:
    """A new run gets its dataset inputs; a restarted trial goes on in its run: RUNNING again, without the error of
    the attempt that failed."""
    if not resumed:
        from raydistill.data.splits import log_inputs

        log_inputs(tracker, run_id, cfg)
    else:
        tracker.reopen_run(run_id)


def _log_unlogged_epochs(tracker: Tracker, run_id: str, run_dir: str) -> None:
    """The checkpointed epochs a run's MLflow run lacks, logged from the latest checkpoint: an in-process run stopped
    between persisting an epoch's checkpoint and logging it, before it resumes after that epoch; a Ray Train run that
    failed, whose last checkpointed epoch its controller had not logged (a resumed attempt's controller would, and
    ``MlflowEpochCallback`` skips it then). Local storage only (a remote one's checkpoints are not listed here)."""
    for epoch in tracker.log_missing_epochs(run_id, latest_history(run_dir)):
        log.info("epoch %s of run %s: checkpointed, not logged; logged now", epoch, run_id)


def _fit(
    cfg: RunConfig,
    tracker: Tracker,
    run_id: str,
    storage_path: str,
    name: str,
    opts: RunOptions,
    trial: TrialLink,
    in_process,
) -> tuple[dict, Any, float]:
    """The run's training, in this process (``in_process``) or on Ray Train: the last report's metrics, the checkpoint
    to export, and the ``perf_counter`` at which training began (what came before it is the run's start-up)."""
    if in_process is not None:
        t1 = time.perf_counter()
        resume = bool(trial.resume_run_id)
        if resume:
            _log_unlogged_epochs(tracker, run_id, os.path.join(storage_path, name))
        last, checkpoint = _fit_here(cfg, storage_path, name, opts, tracker, run_id, resume, in_process)
        return last, checkpoint, t1
    trainer = make_trainer(
        cfg,
        name=name,
        storage_path=storage_path,
        opts=opts,
        callbacks=[MlflowEpochCallback(tracker, run_id), *trial.callbacks],
    )
    t1 = time.perf_counter()
    try:
        result = trainer.fit()
        if result.error:
            raise result.error
    except Exception:
        # the failed attempt's last checkpointed epoch reaches MLflow only through a resumed attempt: logged now, and
        # a tracking failure here must not replace the run's own error
        _log_unlogged_quietly(tracker, run_id, os.path.join(storage_path, name), "failed")
        raise
    # an epoch checkpointed when a stop ended an earlier controller before its callback (Ray registers a checkpoint
    # first) is reported again by no attempt: logged from the checkpoint, now that no controller writes
    _log_unlogged_quietly(tracker, run_id, os.path.join(storage_path, name), "finished")
    return result.metrics, result.checkpoint, t1


def _log_unlogged_quietly(tracker: Tracker, run_id: str, run_dir: str, how: str) -> None:
    """``_log_unlogged_epochs`` where a tracking failure must not decide the run's outcome: warned instead."""
    try:
        _log_unlogged_epochs(tracker, run_id, run_dir)
    except Exception as e:
        log.warning("run %s %s; a checkpointed epoch it lacks in MLflow was not logged: %s", run_id, how, e)


def _run_params(cfg: RunConfig, threads: int) -> dict:
    from raydistill.data.splits import data_fingerprint
    from raydistill.models.encoder import fingerprint
    from raydistill.train.precision import effective

    return {
        **cfg.to_params(),
        "world_size": cfg.train.num_workers,
        # each CPU worker's torch threads: a run's speed depends on them (a GPU worker's CPU threads are left alone)
        **({} if cfg.train.use_gpu else {"cpu_threads": threads}),
        "data_fingerprint": data_fingerprint(cfg),
        "teacher_fingerprint": fingerprint(cfg.teacher),
        **augment_params(cfg),
        **effective(cfg.train),
    }


def _fit_here(
    cfg: RunConfig, storage_path: str, name: str, opts: RunOptions, tracker: Tracker, run_id: str, resume: bool, report
):
    """A sweep's 1-worker trial in this process: each epoch logged, then handed to Tune (``report``)."""

    def on_epoch(metrics):
        tracker.log_epoch(run_id, metrics)
        report(metrics)

    return fit_in_process(
        cfg,
        run_dir=os.path.join(storage_path, name),
        resume=resume,
        threads=opts.threads(here=True),
        on_epoch=on_epoch,
        on_replay=report,  # its epochs are logged already: Tune hears the result, MLflow gets no second point
    )


def _publish_student(cfg: RunConfig, tracker: Tracker, run_id: str, checkpoint, final: dict) -> str:
    """The best epoch's student to ``cfg.output``, logged to the run once: as a model with its card (which keeps the
    folder whole, ``Tracker.download_student``), or as plain artifacts where that failed."""
    from raydistill.config.schema import task_of
    from raydistill.export.card import student_card
    from raydistill.tracking.track import PIPELINES

    student_dir = export_student(checkpoint, cfg.output)
    kind = task_of(cfg).kind
    card = student_card(
        student_dir,
        task=cfg.task,
        teacher=cfg.teacher,
        method=cfg.distill.method,
        pipeline_tag=PIPELINES[kind],
        metrics=final,
    )
    from raydistill.common.outputs import result_view

    with result_view(student_dir) as files:  # the student's files only: not a file of the user's in --output
        model_id = tracker.log_student_model(run_id, files, kind, card)  # the UI's Models column
        if model_id is None:
            tracker.log_artifacts(run_id, files, "student")  # the files at least: what best --export reads
    if model_id is not None and (local := local_dir(checkpoint)) is not None:
        # a local store: its copy hard-linked to the checkpoint's best student, which nothing rewrites; never to the
        # export, the user's folder, which a later save_pretrained into it rewrites in place
        from raydistill.tracking.share import share_files

        share_files(tracker, model_id, os.path.join(local, "checkpoint", "best_student"))
    return student_dir


def _end_unfinished(tracker: Tracker, run_id: str, e: BaseException) -> None:
    """A run that did not finish: KILLED when the user or the search's scheduler stopped it, else FAILED with why."""
    if isinstance(e, KeyboardInterrupt):  # Ctrl-C / SIGTERM: stopped by the user, not failed
        tracker.set_tags(run_id, {"interrupted": "true"})
        tracker.end_run(run_id, "KILLED")
    elif isinstance(e, SystemExit) and e.code in (0, None):  # Tune's report() exits 0 when the scheduler stops it
        tracker.set_tags(run_id, {"raydistill.stopped": "early, by the search's scheduler"})
        tracker.end_run(run_id, "KILLED")
    else:
        tracker.set_tags(run_id, {"error": f"{type(e).__name__}: {e}"[:4000]})
        tracker.end_run(run_id, "FAILED")
