"""A sweep's 1-worker CPU trial trains in its Tune trial process (``orchestrate.run.fit_in_process``), without Ray
Train: the same loop, each epoch's checkpoint persisted (the latest kept, never a half-copied one), a restarted
trial resumed from its latest checkpoint and finishing as the uninterrupted run, the best student exported."""

from __future__ import annotations

import os

import pytest

from tests.test_loop import cfg_for


class Crash(Exception):
    pass


def test_checkpoints_persisted_kept_and_resumed_as_the_uninterrupted_run(tiny_teacher, glue_dir, tmp_path):
    from raydistill.orchestrate.run import export_student, fit_in_process

    cfg = cfg_for("sst2", tiny_teacher("classification", 2), glue_dir, "kd", epochs=3)
    full = []
    last, ckpt = fit_in_process(cfg, run_dir=str(tmp_path / "a"), threads=1, resume=False, on_epoch=full.append)
    assert [m["epoch"] for m in full] == [1, 2, 3] and last["epoch"] == 3
    assert sorted(os.listdir(tmp_path / "a")) == ["checkpoint_000003"]  # the latest only
    assert ckpt == str(tmp_path / "a" / "checkpoint_000003")
    out = export_student(ckpt, str(tmp_path / "student"))
    assert os.path.isfile(os.path.join(out, "config.json"))

    def crash_after_2(m):  # the trial process dies once epoch 2 is checkpointed (as a killed trial would)
        if m["epoch"] == 2:
            raise Crash

    with pytest.raises(Crash):
        fit_in_process(cfg, run_dir=str(tmp_path / "b"), threads=1, resume=False, on_epoch=crash_after_2)
    (tmp_path / "b" / "checkpoint_000009.tmp").mkdir()  # a half-copied checkpoint is never resumed from
    resumed = []
    last, _ = fit_in_process(cfg, run_dir=str(tmp_path / "b"), threads=1, resume=True, on_epoch=resumed.append)
    assert [m["epoch"] for m in resumed] == [3]
    assert resumed[0]["train_loss"] == pytest.approx(full[2]["train_loss"], rel=1e-5)
    assert resumed[0]["eval_accuracy"] == pytest.approx(full[2]["eval_accuracy"])

    fresh = []  # not a resume: a stale folder of the same name is cleared, the run starts at epoch 1
    fit_in_process(cfg, run_dir=str(tmp_path / "b"), threads=1, resume=False, on_epoch=fresh.append)
    assert [m["epoch"] for m in fresh] == [1, 2, 3]


def test_a_trial_the_scheduler_stops_ends_killed_and_tagged_not_failed(tiny_teacher, glue_dir, tmp_path):
    """Tune stops a trial (ASHA) by ``sys.exit(0)`` inside its report: the MLflow run ends KILLED, tagged
    ``raydistill.stopped``, with its epochs kept — not FAILED with ``error: SystemExit: 0``."""
    import dataclasses
    import sys

    from mlflow.tracking import MlflowClient

    from raydistill.orchestrate.run import execute

    uri = f"sqlite:///{tmp_path / 'm.db'}"
    cfg = dataclasses.replace(
        cfg_for("sst2", tiny_teacher("classification", 2), glue_dir, "kd", epochs=3),
        tracking_uri=uri,
        experiment="stop",
        output=str(tmp_path / "student"),
    )

    def asha_stops_after_1(m):
        sys.exit(0)  # what ray.train._internal.session does when the scheduler says stop

    with pytest.raises(SystemExit):
        execute(cfg, storage_path=str(tmp_path / "ray"), name="t", in_process=asha_stops_after_1)
    run = MlflowClient(uri).search_runs([MlflowClient(uri).get_experiment_by_name("stop").experiment_id])[0]
    assert run.info.status == "KILLED" and "error" not in run.data.tags
    assert run.data.tags["raydistill.stopped"].startswith("early") and run.data.metrics["epoch"] == 1
