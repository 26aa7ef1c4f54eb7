"""A distill run stopped after a finished epoch (Ctrl-C, a failure, a session's end) goes on from that epoch when the
same command is given again, into the same MLflow run (an epoch checkpointed but not yet logged when it stopped logged
from its checkpoint), and ends where the uninterrupted run ends; other flags start a
new run; a user's folder named OUTPUT.resume is refused, never written into."""

from __future__ import annotations

import json
import os
import shlex

import pytest
from mlflow.tracking import MlflowClient

from raydistill.commands import distill
from raydistill.common.outputs import owner
from raydistill.orchestrate import resume
from raydistill.tracking.track import Tracker


def _argv(teacher, glue_dir, tmp_path, out, *extra):
    return [
        "--method", "kd", "--teacher", teacher, "--task", "sst2", "--data-dir", glue_dir,
        "--student-layers", "2", "--student-hidden", "32", "--student-intermediate", "64", "--student-heads", "2",
        "--init", "random", "--epochs", "4", "--batch-size", "8", "--max-steps", "16", "--max-length", "32",
        "--lr", "1e-3", "--eval-limit", "16", "--output", out, "--storage-path", str(tmp_path / "ray"),
        "--tracking-uri", f"sqlite:///{tmp_path / 'mlflow.db'}", "--experiment", "r", "--cpus-per-worker", "1",
        *extra,
    ]  # fmt: skip


def _interrupt_after(epoch, monkeypatch, logged=True):
    """Ctrl-C the moment ``epoch`` is logged (``logged``) or about to be: it and the epochs before it are
    checkpointed."""
    log_epoch = Tracker.log_epoch

    def stop(tracker, run_id, metrics):
        if metrics["epoch"] != epoch or logged:
            log_epoch(tracker, run_id, metrics)
        if metrics["epoch"] == epoch:
            raise KeyboardInterrupt

    monkeypatch.setattr(Tracker, "log_epoch", stop)
    return log_epoch


def test_an_interrupted_run_goes_on_from_its_last_epoch_into_the_same_run(
    tiny_teacher, glue_dir, tmp_path, monkeypatch, capsys
):
    teacher = tiny_teacher("classification", 2)
    whole = distill.main(_argv(teacher, glue_dir, tmp_path, str(tmp_path / "whole")))
    assert not os.path.exists(tmp_path / "whole.resume")  # a finished run leaves no record

    out = str(tmp_path / "cut")
    argv = _argv(teacher, glue_dir, tmp_path, out)
    # stopped once epoch 2 is checkpointed, before MLflow heard of it: the resumed run logs it from its checkpoint
    log_epoch = _interrupt_after(2, monkeypatch, logged=False)
    capsys.readouterr()
    with pytest.raises(SystemExit) as e:
        distill.main(argv)
    err = capsys.readouterr().err.strip().splitlines()
    assert e.value.code == 130 and err[-1] == "interrupted; resume with: " + shlex.join(
        ["python", "-m", "raydistill.distill", *argv]
    )
    kept = json.load(open(f"{out}.resume/resume.json"))
    assert owner(f"{out}.resume") == ("raydistill distill", resume.KIND) and not os.path.exists(out)
    client = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    assert client.get_run(kept["run_id"]).info.status == "KILLED"
    assert [m.step for m in client.get_metric_history(kept["run_id"], "train_loss")] == [1]

    monkeypatch.setattr(Tracker, "log_epoch", log_epoch)
    again = distill.main(argv)  # the command the line names
    assert (
        f"resuming the interrupted run into {out} after its epoch 2 (MLflow run {kept['run_id']}, checkpoints in "
        f"{tmp_path / 'ray'}/{kept['name']})" in capsys.readouterr().err
    )
    assert again["run_id"] == kept["run_id"] and not os.path.exists(f"{out}.resume")
    # what the uninterrupted run got (the loop's resume replays the same draws), in the same MLflow run
    for k in ("best_epoch", "val_accuracy", "eval_accuracy", "train_loss", "epoch"):
        assert again[k] == pytest.approx(whole[k], abs=1e-6), k
    run = client.get_run(kept["run_id"])
    assert run.info.status == "FINISHED"
    for key in ("train_loss", "val_accuracy"):  # every epoch logged once, epoch 2 from its checkpoint
        assert sorted(m.step for m in client.get_metric_history(kept["run_id"], key)) == [1, 2, 3, 4], key
    assert os.path.isfile(os.path.join(out, "config.json"))


def test_other_flags_start_a_new_run_and_a_users_folder_is_refused(tiny_teacher, glue_dir, tmp_path, monkeypatch):
    teacher = tiny_teacher("classification", 2)
    out = str(tmp_path / "cut")
    log_epoch = _interrupt_after(1, monkeypatch)
    with pytest.raises(SystemExit):
        distill.main(_argv(teacher, glue_dir, tmp_path, out))
    first = json.load(open(f"{out}.resume/resume.json"))
    monkeypatch.setattr(Tracker, "log_epoch", log_epoch)

    other = distill.main(_argv(teacher, glue_dir, tmp_path, out, "--seed", "7"))  # another run, started anew
    assert other["run_id"] != first["run_id"] and not os.path.exists(f"{out}.resume")

    users = tmp_path / "mine"
    (tmp_path / "mine.resume").mkdir()
    (tmp_path / "mine.resume" / "notes.txt").write_text("mine")
    with pytest.raises(SystemExit) as e:
        distill.main(_argv(teacher, glue_dir, tmp_path, str(users), "--overwrite"))
    assert e.value.code == 2 and (tmp_path / "mine.resume" / "notes.txt").read_text() == "mine"
