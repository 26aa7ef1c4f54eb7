"""One Tune trial = one distillation run: the sampled values become a RunConfig, the run is fitted on Ray Train, and
Tune sees its per-epoch metrics; a trial that finished before its sweep's driver died reports what it logged."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from raydistill.config.schema import RunConfig
from raydistill.selection.runs import CONTROL_TAG

if TYPE_CHECKING:
    from raydistill.orchestrate.run import RunOptions


@dataclass(frozen=True)
class TrialOpts:
    """What every trial of a sweep (and of its confirmation) is run with: how its run trains (resources, recovery),
    whether it trains in its Tune trial process, and the augmented sets the sweep built (copies per row → folder)."""

    run: RunOptions
    in_process: bool = False
    augment_dirs: dict[int, str] = field(default_factory=dict)


_WORKER_TRIALS = 0  # trials this process has run, this one included


def run_name(cfg: RunConfig, trial_id: str) -> str:
    from raydistill.distill.methods import get_method

    s, d = cfg.student, cfg.distill
    name = f"{trial_id} {d.method} {s.layers}L-{s.hidden} T={d.temperature:g} a={d.alpha:g}"
    m = get_method(d.method)
    if m.uses_beta:
        name += f" b={d.beta:g}"
    if m.maps_layers:
        name += f" {d.mapping}"
    return name


def run_trial(
    config: dict, base: RunConfig, parent_run_id: str, storage: str, sweep_name: str, opts: TrialOpts
) -> None:
    """A Tune trial: fit one distillation run; Tune sees its per-epoch metrics through TuneReportCallback."""
    import ray.tune
    from ray.tune.integration.ray_train import TuneReportCallback

    from raydistill.config.space import trial_config
    from raydistill.orchestrate.run import TrialLink, execute
    from raydistill.tracking.track import Tracker

    global _WORKER_TRIALS
    _WORKER_TRIALS += 1  # a reused trial actor (in-process trials) has its imports and caches already
    t_start, cpu_start = time.perf_counter(), time.process_time()
    trial_id = ray.tune.get_context().get_trial_id()
    config = dict(config.get("point") or config)  # a confirmation trial: one grid point of configurations
    confirm_of = config.pop("confirm_of", None)  # the trial whose configuration it trains with another seed
    control_of = config.pop("control_of", None)  # the trial whose student it shadows on gold labels alone
    n_aug = config.pop("augment", 0)  # augmented copies per row: the set the sweep built for that N
    cfg = trial_config(base, config)
    if n_aug:
        cfg = cfg.replace(augment_dir=opts.augment_dirs[n_aug])
    cfg = cfg.replace(output=os.path.join(os.path.dirname(base.output), trial_id), run_name=run_name(cfg, trial_id))
    assert cfg.tracking_uri is not None  # the sweep's base config holds the resolved tracking URI
    tracker = Tracker(cfg.tracking_uri, cfg.experiment)
    existing = tracker.find_run("raydistill.trial_id", trial_id)
    if existing and tracker.client.get_run(existing).info.status == "FINISHED":
        # finished before the sweep driver died: report what it logged instead of training again (stopped as
        # diverged: that too, for the searcher and the summary)
        done = tracker.client.get_run(existing).data
        stopped = done.tags.get("raydistill.stopped", "")
        ray.tune.report({**done.metrics, **({"diverged": stopped} if stopped.startswith("diverged") else {})})
        return
    t_run = time.perf_counter()
    link = TrialLink(
        parent_run_id=parent_run_id,
        tags={
            "raydistill.trial_id": trial_id,
            "raydistill.sweep": sweep_name,
            **({"raydistill.confirm_of": confirm_of, "raydistill.role": "confirm"} if confirm_of else {}),
            **({CONTROL_TAG: control_of, "raydistill.role": "control"} if control_of else {}),
        },
        resume_run_id=existing,
        callbacks=(TuneReportCallback(),),
    )
    out = execute(
        cfg,
        storage_path=storage,
        name=f"{sweep_name}-{trial_id}",
        opts=opts.run,
        in_process=ray.tune.report if opts.in_process else None,
        trial=link,
    )
    tracker.log_metrics(out["run_id"], fixed_cost(out, t_start, t_run, cpu_start, opts.in_process))


def fixed_cost(out: dict, t_start: float, t_run: float, cpu_start: float, in_process: bool) -> dict:
    """A finished trial's seconds outside training steps: wall, and CPU (the whole process's, its threads too; only
    for a trial trained in its own process), which unlike wall seconds stays flat as trials share the cores unless
    the trials add work."""
    wall = time.perf_counter() - t_start
    return {
        "trial_wall_s": wall,
        "time_trial_start_s": t_run - t_start,
        "fixed_cost_s": wall - out.get("time_train_s", 0.0),
        "worker_trials": _WORKER_TRIALS,
        # a trial resumed after its last epoch reports its recorded result: no step trained here, none counted
        **({"fixed_cpu_s": time.process_time() - cpu_start - out.get("cpu_train_s", 0.0)} if in_process else {}),
    }
