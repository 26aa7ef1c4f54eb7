"""orchestrate/run: every checkpointed epoch of a Ray Train run reaches MLflow once — the epoch callback survives a
store that cannot be read, and a run that finished logs an epoch its controller registered but never reported (a
stop between the two) from the checkpoint. Ray Train itself is faked here: what it runs is the e2e tests'."""

from __future__ import annotations

import json
import types

from raydistill.orchestrate import run as run_mod
from raydistill.orchestrate.run import NO_LINK, MlflowEpochCallback, RunOptions
from raydistill.tracking.track import Tracker


def _checkpoint(run_dir, name, epochs):
    folder = run_dir / name / "checkpoint"
    folder.mkdir(parents=True)
    (folder / "state.json").write_text(json.dumps({"history": [{"epoch": e, "val_accuracy": e / 10} for e in epochs]}))


class _Flaky(Tracker):
    """A store whose history cannot be read the first time (down past the retries)."""

    reads = 0

    def logged_epochs(self, run_id):
        type(self).reads += 1
        if type(self).reads == 1:
            raise ConnectionError("store down")
        return super().logged_epochs(run_id)


def test_the_epoch_callback_logs_when_the_store_cannot_say_what_was_logged(tmp_path):
    tracker = _Flaky(f"sqlite:///{tmp_path / 'm.db'}", "e")
    run_id = tracker.start_run("r", {})
    cb = MlflowEpochCallback(tracker, run_id)
    cb.after_report(None, [{"epoch": 1, "val_accuracy": 0.1}], checkpoint=object())  # no raise: logged
    cb.after_report(None, [{"epoch": 1, "val_accuracy": 0.1}], checkpoint=object())  # read again: epoch 1 is there
    cb.after_report(None, [{"epoch": 2, "val_accuracy": 0.2}], checkpoint=object())
    steps = [m.step for m in tracker.client.get_metric_history(run_id, "epoch")]
    assert sorted(steps) == [1, 2] and _Flaky.reads == 2


def test_a_finished_ray_train_run_logs_the_registered_epoch_its_controller_never_reported(tmp_path, monkeypatch):
    """Ray registers a checkpoint (its snapshot names it), then calls the callbacks: a stop between the two left
    epoch 2 checkpointed, unlogged, and reported by no resumed attempt. The finished run logs it from the checkpoint;
    a newer folder the controller never registered (a worker's copy when it died) is not read."""
    tracker = Tracker(f"sqlite:///{tmp_path / 'm.db'}", "e")
    run_id = tracker.start_run("r", {})
    tracker.log_epoch(run_id, {"epoch": 1, "val_accuracy": 0.1})
    run_dir = tmp_path / "ray" / "run"
    _checkpoint(run_dir, "checkpoint_2026-11-29_01", [1, 2])
    _checkpoint(run_dir, "checkpoint_2026-11-29_02", [1, 2, 3])
    snapshot = {"latest_checkpoint_result": {"checkpoint_dir_name": "checkpoint_2026-11-29_01", "metrics": {}}}
    (run_dir / "checkpoint_manager_snapshot.json").write_text(json.dumps(snapshot))
    result = types.SimpleNamespace(error=None, metrics={"epoch": 2}, checkpoint=None)
    trainer = types.SimpleNamespace(fit=lambda: result)
    monkeypatch.setattr(run_mod, "make_trainer", lambda *a, **k: trainer)
    run_mod._fit(None, tracker, run_id, str(tmp_path / "ray"), "run", RunOptions(), NO_LINK, None)
    steps = sorted(m.step for m in tracker.client.get_metric_history(run_id, "epoch"))
    assert steps == [1, 2]
