"""orchestrate/tuner: Tune's experiment state is saved often enough that a resumed sweep knows its trials."""

from __future__ import annotations

import inspect
import os

from raydistill.orchestrate import tuner


def test_state_saved_every_two_seconds_by_default(monkeypatch):
    monkeypatch.delenv("TUNE_GLOBAL_CHECKPOINT_S", raising=False)
    tuner.save_state_often()
    assert os.environ["TUNE_GLOBAL_CHECKPOINT_S"] == tuner.STATE_SAVE_S == "2"


def test_a_users_period_is_kept(monkeypatch):
    monkeypatch.setenv("TUNE_GLOBAL_CHECKPOINT_S", "30")
    tuner.save_state_often()
    assert os.environ["TUNE_GLOBAL_CHECKPOINT_S"] == "30"


def test_tune_still_reads_the_variable():
    # the period is Tune's own setting, read when the Tuner's controller is built: an upgrade that renames it would
    # bring back the 10 s window without a word
    from ray.tune.execution.tune_controller import TuneController

    assert "TUNE_GLOBAL_CHECKPOINT_S" in inspect.getsource(TuneController.__init__)
