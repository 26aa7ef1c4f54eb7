"""Optuna TPE (or random search) and ASHA as Tune drives them, with the behaviours a sweep needs: a trial ASHA
stopped is PRUNED (not a finished value), one stopped as diverged is told its score, a repeated proposal is answered
from the finished trial; ASHA never stops a trial at its last epoch."""

from __future__ import annotations

import os

import optuna
from optuna.exceptions import UpdateFinishedTrialError
from ray.tune.schedulers import ASHAScheduler
from ray.tune.search.optuna import OptunaSearch

from raydistill.common.paths import results_path


def make_searcher(
    spec, base, *, metric: str, mode: str, name: str, teacher, n_at_once: int, multi_objective: str | None
):
    """TPE over the space (with ``multi_objective``, a metric every report carries, minimised beside ``metric``), its
    study in an Optuna RDB beside the MLflow store (a resumed sweep continues it), the
    space's published recipes enqueued first, at most ``n_at_once`` proposals out at a time."""
    import optuna
    from ray.tune.search import ConcurrencyLimiter

    from raydistill.config.space import start_points

    metrics = [metric, multi_objective] if multi_objective else metric
    modes = [mode, "min"] if multi_objective else mode
    uri = base.tracking_uri
    db = uri[len("sqlite:///") :] if uri.startswith("sqlite:///") else results_path("mlflow.db")
    seed = spec.search.get("seed", base.train.seed)
    # constant liar: trials running at once count as bad guesses, so concurrent proposals spread out
    sampler = (
        optuna.samplers.RandomSampler(seed=seed)
        if spec.search.get("algorithm") == "random"
        else optuna.samplers.TPESampler(seed=seed, constant_liar=True)
    )
    searcher = PrunedAwareOptunaSearch(
        space=SpaceFn(spec, teacher),
        metric=metrics,
        mode=modes,
        sampler=sampler,
        # one optuna.db serves every experiment of the store: the sweep's name alone could meet another experiment's
        study_name=f"{base.experiment}/{name}",
        # random search draws every trial: the published recipes start only the default search
        points_to_evaluate=None if spec.search.get("algorithm") == "random" else start_points(spec, teacher) or None,
        storage=optuna.storages.RDBStorage("sqlite:///" + os.path.join(os.path.dirname(db), "optuna.db")),
        max_epochs=base.train.epochs,
    )
    return ConcurrencyLimiter(searcher, max_concurrent=n_at_once)


def make_scheduler(spec, epochs: int, multi_objective: str | None):
    """ASHA over epochs (the space's ``search.asha`` may tune or turn it off); none for one epoch or two objectives."""
    if multi_objective or spec.search.get("asha", True) is False or epochs <= 1:
        return None
    asha = spec.search.get("asha") if isinstance(spec.search.get("asha"), dict) else {}
    # the epoch the trial reports, not Tune's training_iteration: a restarted in-process trial has no Tune checkpoint,
    # so its iterations count from 1 again while its epochs carry on from its own checkpoint
    return FinishingASHA(
        time_attr="epoch",
        max_t=epochs,
        grace_period=min(asha.get("grace_period", max(1, epochs // 2)), epochs),
        reduction_factor=asha.get("reduction_factor", 2),
    )


class PrunedAwareOptunaSearch(OptunaSearch):
    """Trials ASHA stopped before the last epoch are told to Optuna as PRUNED, not as finished; a trial stopped as
    diverged is told its score (COMPLETE: what its recipe gets). A proposal identical
    to a finished trial (TPE repeats itself in small categorical spaces) is not trained again: Optuna is told that
    trial's value and asked for another, up to ``max_resample`` times (a small space can be exhausted)."""

    max_resample = 20

    def __init__(self, *args, max_epochs: int = 1, **kw):
        super().__init__(*args, **kw)
        self.max_epochs = max_epochs

    @property
    def _study(self) -> optuna.Study:
        """OptunaSearch's study (set up by its constructor here: a space is always given)."""
        return self._ot_study  # type: ignore[return-value]  # ray types _ot_study as None, its initial value

    def suggest(self, trial_id):
        from optuna.trial import TrialState

        for _ in range(self.max_resample):
            config = super().suggest(trial_id)
            ot = self._ot_trials.get(trial_id)
            same = ot is not None and next(
                (
                    t
                    for t in self._study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
                    if t.params == ot.params
                ),
                None,
            )
            if not same:
                return config
            assert ot is not None  # a finished twin is only looked for when there is a proposal
            self._study.tell(ot, same.values)  # what TPE would learn from training it again, for free
            del self._ot_trials[trial_id]
        return config

    def on_trial_result(self, trial_id, result):
        try:
            return super().on_trial_result(trial_id, result)
        except UpdateFinishedTrialError:
            pass  # resumed sweep: the RDB study already holds this trial's final value

    def on_trial_complete(self, trial_id, result=None, error=False):
        # stopped as diverged (train.stop_diverged): its score is its value, TPE learns the region is bad and a repeat
        # of it is answered from it (suggest)
        diverged = bool(result and result.get("diverged"))
        if result and not error and not diverged and result.get("epoch", self.max_epochs) < self.max_epochs:
            result = None  # no value and no error → Optuna records the trial as PRUNED
        try:
            return super().on_trial_complete(trial_id, result, error)
        except UpdateFinishedTrialError:
            self._completed_trials.add(trial_id)


class FinishingASHA(ASHAScheduler):
    """ASHA that never stops a trial at its last epoch: Tune would kill it before its student is exported."""

    def on_trial_result(self, tune_controller, trial, result):
        action = super().on_trial_result(tune_controller, trial, result)
        if result.get(self._time_attr, 0) >= self._max_t:
            return self.CONTINUE
        return action


class SpaceFn:
    """Optuna define-by-run space (a picklable callable: Tune checkpoints the searcher)."""

    def __init__(self, spec, teacher):
        self.spec, self.teacher = spec, teacher

    def __call__(self, trial):
        from raydistill.config import space as sp

        return sp.sample(self.spec, trial, self.teacher)
