"""One distillation run outside a sweep (``raydistill distill``, the API's ``run_distill``): its one worker in this
process where nothing needs Ray, else a Ray Train job on the Ray this process joins or starts. The command parses and
checks; this decides where the run trains and runs it under a fresh name."""

from __future__ import annotations

import os
import time

from raydistill.common.errors import RunFailed, failure_reason
from raydistill.config.schema import RunConfig
from raydistill.orchestrate.run import RunOptions


def run_one(cfg: RunConfig, storage: str, opts: RunOptions, ray_train: bool = False) -> dict:
    """``cfg`` (preflighted) trained to its end, checkpoints under ``storage``: its scores. ``ray_train``: on Ray
    Train even where one worker in this process would do (``--ray-train``). A run that fails: ``RunFailed``."""
    # a fresh run name each time: Train V2 resumes any earlier run stored under the same name
    shape = f"{cfg.student.layers}L{cfg.student.hidden}"
    name = f"{cfg.distill.method}-{cfg.task}-{shape}-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}"
    on_ray = on_ray_train(cfg, storage, opts, asked=ray_train)
    if on_ray:  # outside the try: a cluster that refuses this driver (its token) is one line naming the fix, exit 2
        _join_ray(opts.verbose)
    try:
        if on_ray:
            return _on_ray_train(cfg, storage, name, opts)
        return _in_process(cfg, storage, name, opts)
    except Exception as e:
        raise RunFailed(f"training failed: {failure_reason(e)}") from e


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


def _on_ray_train(cfg: RunConfig, storage: str, name: str, opts: RunOptions) -> dict:
    """The run as a Ray Train job, on the Ray ``_join_ray`` joined or started."""
    from raydistill.orchestrate.run import execute

    return execute(cfg, storage_path=storage, name=name, opts=opts)


def _in_process(cfg: RunConfig, storage: str, name: str, opts: RunOptions) -> dict:
    """The run's one worker in this process (``orchestrate.run.fit_in_process``, as a sweep's 1-worker trial): the
    same loop, MLflow run, checkpoints under ``storage``, export and scores, on ``opts.cpus_per_worker`` threads, by
    default the process's own (the machine's cores: a run alone has no trial beside it to leave CPUs to); the
    caller's torch threads and thread settings back afterwards (``raydistill.api``)."""
    from raydistill.orchestrate.resources import threads_kept
    from raydistill.orchestrate.run import execute

    with threads_kept():
        return execute(cfg, storage_path=storage, name=name, opts=opts, in_process=lambda metrics: None)
