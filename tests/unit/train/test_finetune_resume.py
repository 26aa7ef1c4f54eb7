"""A fine-tune stopped after a finished epoch (Ctrl-C, a failure, a session's end) goes on from that epoch into the
same MLflow run, and ends where the uninterrupted fine-tune ends; an epoch kept but not yet logged is logged once."""

import json
import os
import shlex

import pytest
from mlflow.tracking import MlflowClient

from raydistill.commands import finetune
from raydistill.common.outputs import owner
from raydistill.teacher import fit as teacher_fit
from raydistill.tracking.track import Tracker


def _argv(tiny_teacher, glue_dir, uri, out):
    return [
        "--model",
        tiny_teacher("base"),
        "--output",
        out,
        "--task",
        "sst2",
        "--data-dir",
        glue_dir,
        "--epochs",
        "3",
        "--lr",
        "1e-3",
        "--batch-size",
        "16",
        "--max-length",
        "32",
        "--tracking-uri",
        uri,
        "--experiment",
        "ft",
    ]


def test_interrupted_finetune_resumes_from_its_last_epoch(tiny_teacher, glue_dir, tmp_path, monkeypatch, capsys):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    whole = finetune.main(_argv(tiny_teacher, glue_dir, uri, str(tmp_path / "whole")))

    out = str(tmp_path / "cut")
    argv = _argv(tiny_teacher, glue_dir, uri, out)
    log_epoch = Tracker.log_epoch

    def stop_at_epoch_2(tracker, run_id, metrics):  # Ctrl-C after epoch 2 is kept, before it is logged
        if metrics["epoch"] == 2:
            raise KeyboardInterrupt
        log_epoch(tracker, run_id, metrics)

    monkeypatch.setattr(Tracker, "log_epoch", stop_at_epoch_2)
    capsys.readouterr()
    with pytest.raises(SystemExit) as e:
        finetune.main(argv)
    err = capsys.readouterr().err.strip().splitlines()
    assert e.value.code == 130 and err[-1] == "interrupted; resume with: " + shlex.join(
        ["python", "-m", "raydistill.finetune", *argv]
    )
    state = json.load(open(f"{out}.resume/resume.json"))
    assert state["epoch"] == 2 and not os.path.exists(out)
    assert owner(f"{out}.resume") == ("raydistill finetune", teacher_fit.RESUME_KIND)  # the product's own folder
    c = MlflowClient(uri)
    assert c.get_run(state["run_id"]).info.status == "KILLED"
    assert [m.step for m in c.get_metric_history(state["run_id"], "val_accuracy")] == [1]  # epoch 2: kept only

    monkeypatch.setattr(Tracker, "log_epoch", log_epoch)
    again = finetune.main(argv)  # the command the line names
    cfg = finetune.config(finetune.parser().parse_args(argv))
    assert (
        f"resuming the fine-tune in {out} after its epoch 2 (fingerprint {teacher_fit.fingerprint(cfg)})"
        in capsys.readouterr().err
    )
    assert not os.path.exists(f"{out}.resume") and os.path.isfile(os.path.join(out, teacher_fit.DONE))
    # what the uninterrupted fine-tune got (the loop's resume replays the same draws), in the same run
    for k in ("best_epoch", "best_val_accuracy", "best_eval_accuracy", "train_loss", "epoch"):
        assert again[k] == pytest.approx(whole[k], abs=1e-6), k
    run = c.get_run(state["run_id"])
    assert run.info.status == "FINISHED" and "interrupted" not in run.data.tags
    # epoch 2 logged from its checkpoint on resume, once
    assert [m.step for m in c.get_metric_history(run.info.run_id, "val_accuracy")] == [1, 2, 3]
    assert len(c.search_runs([run.info.experiment_id])) == 2  # the whole one and the resumed one: no third run


def test_a_stop_between_keeping_renames_resumes_from_the_complete_copy(
    tiny_teacher, glue_dir, tmp_path, monkeypatch, capsys
):
    """Keeping an epoch copies its checkpoint to ``next``, moves the old one aside, then puts ``next`` in place and
    writes the record: stopped between the renames (``checkpoint`` gone, ``next`` whole, the record one epoch
    behind), the fine-tune still resumes after the epoch ``next`` holds, into its run — not from scratch."""
    import shutil

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    out = str(tmp_path / "cut")
    argv = _argv(tiny_teacher, glue_dir, uri, out)
    log_epoch = Tracker.log_epoch

    def stop_at_epoch_2(tracker, run_id, metrics):
        if metrics["epoch"] == 2:
            raise KeyboardInterrupt
        log_epoch(tracker, run_id, metrics)

    monkeypatch.setattr(Tracker, "log_epoch", stop_at_epoch_2)
    with pytest.raises(SystemExit):
        finetune.main(argv)
    folder = f"{out}.resume"
    state = json.load(open(f"{folder}/resume.json"))
    shutil.copytree(f"{folder}/checkpoint", f"{folder}/old")  # epoch 1's, moved aside
    os.replace(f"{folder}/checkpoint", f"{folder}/next")  # epoch 2's, not yet in place
    with open(f"{folder}/resume.json", "w") as f:
        json.dump({**state, "epoch": 1}, f)  # the record is written after the renames

    monkeypatch.setattr(Tracker, "log_epoch", log_epoch)
    capsys.readouterr()
    finetune.main(argv)
    assert f"resuming the fine-tune in {out} after its epoch 2 " in capsys.readouterr().err
    c = MlflowClient(uri)
    run = c.get_run(state["run_id"])
    assert run.info.status == "FINISHED" and not os.path.exists(folder)
    assert [m.step for m in c.get_metric_history(run.info.run_id, "val_accuracy")] == [1, 2, 3]
    assert len(c.search_runs([run.info.experiment_id])) == 1


@pytest.mark.parametrize("second", ["SIGINT", "SIGTERM"])
def test_a_second_signal_while_the_run_is_being_ended_does_not_leave_it_running(
    second, tiny_teacher, glue_dir, tmp_path, monkeypatch, capsys
):
    """Ctrl-C, then a second Ctrl-C (or a SIGTERM) while the fine-tune ends its MLflow run: the run still ends KILLED,
    one line, exit 130 (the first signal's). Before, the second signal aborted the cleanup and left the run RUNNING."""
    import signal

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    argv = _argv(tiny_teacher, glue_dir, uri, str(tmp_path / "out"))
    log_epoch, end_run = Tracker.log_epoch, Tracker.end_run

    def ctrl_c_at_epoch_2(tracker, run_id, metrics):
        if metrics["epoch"] == 2:
            os.kill(os.getpid(), signal.SIGINT)
            for _ in range(10**6):
                pass
        log_epoch(tracker, run_id, metrics)

    def second_signal_then_end(*args, **kw):
        os.kill(os.getpid(), getattr(signal, second))
        for _ in range(10**6):
            pass
        return end_run(*args, **kw)

    monkeypatch.setattr(Tracker, "log_epoch", ctrl_c_at_epoch_2)
    monkeypatch.setattr(Tracker, "end_run", second_signal_then_end)
    capsys.readouterr()
    with pytest.raises(SystemExit) as e:
        finetune.main(argv)
    err = capsys.readouterr().err.strip().splitlines()
    assert e.value.code == 130 and err[-1].startswith("interrupted; resume with: ")
    assert sum(line.startswith("interrupted") for line in err) == 1
    runs = MlflowClient(uri).search_runs([MlflowClient(uri).get_experiment_by_name("ft").experiment_id])
    assert [r.info.status for r in runs] == ["KILLED"]


def test_a_failure_while_logging_the_datasets_ends_the_run_failed(tiny_teacher, glue_dir, tmp_path, monkeypatch):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"

    def broken(*a, **kw):
        raise OSError("the data folder went away")

    monkeypatch.setattr(Tracker, "log_datasets", broken)
    with pytest.raises(OSError):
        finetune.main(_argv(tiny_teacher, glue_dir, uri, str(tmp_path / "out")))
    c = MlflowClient(uri)
    (run,) = c.search_runs([c.get_experiment_by_name("ft").experiment_id])
    assert run.info.status == "FAILED" and run.data.tags["error"] == "OSError: the data folder went away"
