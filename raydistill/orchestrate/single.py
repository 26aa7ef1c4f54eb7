"""One distillation run outside a sweep (``raydistill distill``, the API's ``run_distill``): its one worker in this
process where nothing needs Ray, else a Ray Train job on the Ray this process joins or starts. The command parses and
checks; this decides where the run trains and runs it under a fresh name, or goes on with the run these settings
left interrupted (``orchestrate.resume``)."""

from __future__ import annotations

import os
import sys
import time

from raydistill.common.errors import RunFailed, failure_reason
from raydistill.config.schema import RunConfig
from raydistill.orchestrate.run import RunOptions


def run_one(cfg: RunConfig, storage: str, opts: RunOptions, ray_train: bool = False) -> dict:
    """``cfg`` (preflighted) trained to its end, checkpoints under ``storage``: its scores. ``ray_train``: on Ray
    Train even where one worker in this process would do (``--ray-train``). A run of these settings that was
    interrupted goes on from its last epoch's checkpoint in its MLflow run (``orchestrate.resume``). A run that
    fails: ``RunFailed``."""
    from raydistill.orchestrate.resume import RunRecord
    from raydistill.orchestrate.run import TrialLink

    record = RunRecord(cfg, storage)
    # a new run gets a fresh name: Train V2 resumes any earlier run stored under the same name, which is what an
    # interrupted one's name is kept for
    name = record.name or _fresh_name(cfg)
    if record.run_id:
        print(_resuming(cfg, storage, record), file=sys.stderr, flush=True)
    link = TrialLink(resume_run_id=record.run_id, on_start=lambda run_id: record.start(name, run_id))
    on_ray = on_ray_train(cfg, storage, opts, asked=ray_train)
    if on_ray:  # outside the try: a cluster that refuses this driver (its token) is one line naming the fix, exit 2
        _join_ray(opts.verbose)
    try:
        if on_ray:
            out = _on_ray_train(cfg, storage, name, opts, link)
        else:
            out = _in_process(cfg, storage, name, opts, link)
    except Exception as e:
        raise RunFailed(f"training failed: {failure_reason(e)}") from e
    record.done()
    return out


def _fresh_name(cfg: RunConfig) -> str:
    shape = f"{cfg.student.layers}L{cfg.student.hidden}"
    return f"{cfg.distill.method}-{cfg.task}-{shape}-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}"


def _resuming(cfg: RunConfig, storage: str, record) -> str:
    """The line that says an interrupted run goes on, and from which epoch where its checkpoints are on this disk."""
    from raydistill.common.paths import is_uri
    from raydistill.orchestrate.kept import latest_history

    # the epoch from the checkpoint's own record: Ray Train names its checkpoints by time, this process by epoch
    history = [] if is_uri(storage) else latest_history(os.path.join(storage, record.name))
    after = f" after its epoch {int(history[-1]['epoch'])}" if history else ""
    return (
        f"resuming the interrupted run into {cfg.output}{after} (MLflow run {record.run_id}, checkpoints in "
        f"{storage.rstrip('/')}/{record.name})"
    )


def on_ray_train(cfg: RunConfig, storage: str, opts: RunOptions, asked: bool = False) -> bool:
    """Whether the run needs Ray Train: asked for (``--ray-train``), several DDP workers, restarts of failed workers,
    a cluster to run on (``RAY_ADDRESS``), checkpoints in remote storage, or a fault that kills a worker (a test hook:
    in this process it would end the command). Otherwise its one worker trains in this process: Ray's start, Ray
    Train's controller and worker are most of a small run's time (docs/benchmarks/2026-11-23-sweep-throughput.md)."""
    from raydistill.common.paths import is_uri

    return bool(
        asked
        or cfg.train.num_workers > 1
        or opts.max_failures != 0
        or os.environ.get("RAY_ADDRESS")
        or is_uri(storage)
        or cfg.fault.startswith("kill")
    )


def _join_ray(verbose: bool) -> None:
    """The Ray this process joins or starts for Ray Train (stopped on Ctrl-C if it started it)."""
    from raydistill.common.interrupts import at_signal, on_interrupt
    from raydistill.orchestrate.connect import init_ray, mute_workers, shutdown

    if init_ray(verbose=verbose):  # a Ray the caller started (raydistill.api) is theirs to stop
        on_interrupt(shutdown)  # Ctrl-C: the run is ended KILLED (execute), Ray stopped, then the one line
    at_signal(mute_workers)  # Ctrl-C: workers Ray kills while the command unwinds print nothing


def _on_ray_train(cfg: RunConfig, storage: str, name: str, opts: RunOptions, link) -> dict:
    """The run as a Ray Train job, on the Ray ``_join_ray`` joined or started."""
    from raydistill.orchestrate.run import execute

    return execute(cfg, storage_path=storage, name=name, opts=opts, trial=link)


def _in_process(cfg: RunConfig, storage: str, name: str, opts: RunOptions, link) -> dict:
    """The run's one worker in this process (``orchestrate.run.fit_in_process``, as a sweep's 1-worker trial): the
    same loop, MLflow run, checkpoints under ``storage``, export and scores, on ``opts.cpus_per_worker`` threads, by
    default the process's own (the machine's cores: a run alone has no trial beside it to leave CPUs to); the
    caller's torch threads and thread settings back afterwards (``raydistill.api``)."""
    from raydistill.orchestrate.resources import threads_kept
    from raydistill.orchestrate.run import execute

    with threads_kept():
        return execute(cfg, storage_path=storage, name=name, opts=opts, in_process=lambda metrics: None, trial=link)
