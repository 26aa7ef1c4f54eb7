"""A sweep on Ray Tune: the Tuner over trials (restored from its experiment folder on --resume), each trial a
``run_trial`` that holds no CPU itself, and a live table of every trial on stderr."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass

from ray import tune
from ray.tune import Callback

from raydistill.config.schema import RunConfig
from raydistill.orchestrate.run import RunOptions
from raydistill.orchestrate.search import make_scheduler, make_searcher
from raydistill.orchestrate.trial import TrialOpts, run_trial
from raydistill.results.report import SHOW, table


def trial_opts(
    demand,
    *,
    max_failures: int,
    placement: str,
    verbose: bool = False,
    in_process: bool = False,
    augment_dirs: dict | None = None,
) -> TrialOpts:
    run = RunOptions(max_failures, placement, demand.cpus_per_worker, demand.gpus_per_worker, verbose)
    return TrialOpts(run, in_process, dict(augment_dirs or {}))


def trainable_for(base, *, parent: str, storage: str, name: str, opts: TrialOpts):
    """``run_trial`` with its fixed arguments and its resource bundle, for a Tuner of the sweep ``name``."""
    trainable = tune.with_parameters(
        run_trial, base=base, parent_run_id=parent, storage=storage, sweep_name=name, opts=opts
    )
    from raydistill.orchestrate.resources import TrialDemand

    demand = TrialDemand(1, opts.run.cpus(), opts.run.gpus_per_worker)  # an in-process trial's one worker
    return tune.with_resources(trainable, demand.trial_resources(opts.in_process))


# Tune saves the experiment's state (its trials, the searcher) at most every 10 s by default ("auto"). A trial created
# after the last save is unknown to a --resume: if it finished before the driver died, its MLflow run is FINISHED yet
# Tune draws a new trial in its place and trains it again (its same trial_id would have been answered from MLflow,
# orchestrate/trial.py). A save costs milliseconds for a sweep's few dozen trials; uploads keep their own period.
STATE_SAVE_S = "2"


def save_state_often() -> None:
    """Tune's experiment state saved every ``STATE_SAVE_S`` seconds unless the user set ``TUNE_GLOBAL_CHECKPOINT_S``."""
    os.environ.setdefault("TUNE_GLOBAL_CHECKPOINT_S", STATE_SAVE_S)


def failure_config(opts: TrialOpts):
    """Tune restarts a failed in-process trial (from its last checkpoint); Ray Train restarts its own workers."""
    return tune.FailureConfig(max_failures=opts.run.max_failures if opts.in_process else 0)


@dataclass(frozen=True)
class SweepTrials:
    """Where and how a sweep's trials run, the same for its search, its confirmation and its labels-only control
    (``confirm.run_confirm``): the base config each trial's draw changes, the Tune experiments' storage and the
    sweep's name (their prefix), the parent MLflow run, the options every trial runs with (``trial_opts``), how many
    train at once, and whether the sweep is resumed (its Tune experiments restored)."""

    base: RunConfig
    storage: str
    name: str
    parent: str
    opts: TrialOpts
    n_at_once: int
    resume: bool = False

    def trainable(self):
        """``run_trial`` for a Tuner of these trials (``trainable_for``)."""
        return trainable_for(self.base, parent=self.parent, storage=self.storage, name=self.name, opts=self.opts)


def run_trials(
    spec, trials: SweepTrials, *, metric: str, mode: str, n_samples: int, teacher, multi_objective: str | None
) -> list:
    """Every trial's Tune result, once the sweep ends. ``trials.opts`` (``trial_opts``) with ``in_process``: each trial
    trains in its Tune trial process (one worker on the CPU or its share of a GPU, no Ray Train;
    ``orchestrate.run.fit_in_process``), and Tune restarts a failed one from its last checkpoint up to
    ``max_failures`` times, as Ray Train would restart its worker."""
    base, storage, name, opts = trials.base, trials.storage, trials.name, trials.opts
    verbose = opts.run.verbose
    trainable = trials.trainable()
    if not verbose:  # Tune's newer console output prints its header box to stdout even at verbose=0
        os.environ.setdefault("RAY_AIR_NEW_OUTPUT", "0")
    save_state_often()
    # Ctrl-C ends the command (cli: runs KILLED, one line, exit 130, --resume goes on), rather than Tune's own handler
    # ending the sweep early and the command printing a summary of the trials done so far as if it had finished
    os.environ["TUNE_DISABLE_SIGINT_HANDLER"] = "1"
    exp_dir = os.path.join(storage, name)
    if trials.resume and tune.Tuner.can_restore(exp_dir):
        tuner = tune.Tuner.restore(exp_dir, trainable=trainable, resume_unfinished=True, resume_errored=False)
    else:
        searcher = make_searcher(
            spec,
            base,
            metric=metric,
            mode=mode,
            name=name,
            teacher=teacher,
            n_at_once=trials.n_at_once,
            multi_objective=multi_objective,
        )
        tuner = tune.Tuner(
            trainable,
            run_config=tune.RunConfig(
                name=name,
                storage_path=storage,
                callbacks=[live_table(metric)],
                verbose=1 if verbose else 0,  # 0: the live table below is the one table
                failure_config=failure_config(opts),
            ),
            tune_config=tune.TuneConfig(
                search_alg=searcher,
                scheduler=make_scheduler(spec, base.train.epochs, multi_objective),
                num_samples=n_samples,
                metric=None if multi_objective else metric,
                mode=None if multi_objective else mode,
                # an in-process trial's actor trains the next trial: its imports (most of a new trial process's
                # start) and its process-wide caches are paid once per slot, not once per trial
                reuse_actors=opts.in_process,
            ),
        )
    grid = tuner.fit()
    return [grid[i] for i in range(len(grid))]  # a ResultGrid is indexed (its types declare no __iter__)


def live_table(metric: str):
    """A Tune callback printing a compact table of every trial whenever one reports (stderr): the score that chooses
    (``metric``) beside the dev score it reports."""
    from raydistill.selection.runs import report_metric

    shown = list(dict.fromkeys((metric, report_metric(metric))))

    class LiveTable(Callback):
        def __init__(self):
            self.rows: dict[str, dict] = {}

        def _update(self, trial, status, result=None):
            row = self.rows.setdefault(
                trial.trial_id, {"trial": trial.trial_id, **{k: trial.config.get(k) for k in SHOW}}
            )
            row["status"] = status
            if result:
                row.update({"epoch": result.get("epoch"), **{m: result.get(m) for m in shown}})
            cols = ["trial", "status", "epoch", *shown] + [
                k for k in SHOW if any(r.get(k) is not None for r in self.rows.values())
            ]
            print("\n" + table(list(self.rows.values()), cols), file=sys.stderr, flush=True)

        def on_trial_result(self, iteration, trials, trial, result, **info):
            self._update(trial, "RUNNING", result)

        def on_trial_complete(self, iteration, trials, trial, **info):
            # stopped by its loop as diverged (train.stop_diverged): Tune sees a trial that ended, the table says why
            self._update(trial, "DIVERGED" if (trial.last_result or {}).get("diverged") else "TERMINATED")

        def on_trial_error(self, iteration, trials, trial, **info):
            self._update(trial, "ERROR")

    return LiveTable()
