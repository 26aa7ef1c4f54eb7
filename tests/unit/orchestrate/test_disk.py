"""Disk held to what a user keeps (issue 48 item 4): a run that has ended keeps a checkpoint without its optimizer
state or latest student (still enough to report it again when resumed), its student is logged to MLflow once (as the
logged model, which ``best --export`` and the control read), the run's export shares the checkpoint's files, and what
the product writes for the user has the modes the user's umask gives (not safetensors' owner-only 0600)."""

from __future__ import annotations

import dataclasses
import os
import stat
from urllib.parse import urlparse

import pytest

from tests.unit.train.test_loop import cfg_for

WEIGHTS = (".safetensors", ".bin", ".pt", ".onnx")


def weights(folder) -> list[str]:
    return sorted(n for n in os.listdir(folder) if n.endswith(WEIGHTS))


def mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


@pytest.fixture
def umask_027():
    """A umask other than the usual 022: modes follow it (0640), neither 0600 nor a fixed 0644."""
    old = os.umask(0o027)
    yield
    os.umask(old)


def test_an_ended_run_keeps_a_slim_checkpoint_and_its_student_once(tiny_teacher, glue_dir, tmp_path, umask_027):
    import torch
    from mlflow.tracking import MlflowClient

    from raydistill.orchestrate.kept import checkpoints
    from raydistill.orchestrate.run import execute, fit_in_process
    from raydistill.tracking.track import Tracker, download_student

    uri = f"sqlite:///{tmp_path / 'm.db'}"
    cfg = dataclasses.replace(
        cfg_for("sst2", tiny_teacher("classification", 2), glue_dir, "kd", epochs=2),
        tracking_uri=uri,
        experiment="disk",
        output=str(tmp_path / "student"),
    )
    out = execute(cfg, storage_path=str(tmp_path / "ray"), name="t", in_process=lambda m: None)

    (kept,) = checkpoints(str(tmp_path / "ray" / "t"))
    ckpt = os.path.join(kept, "checkpoint")
    assert sorted(os.listdir(ckpt)) == ["best_student", "state.json", "train_state.pt"]  # no latest student
    blobs = torch.load(os.path.join(ckpt, "train_state.pt"), weights_only=True)
    assert set(blobs) == {"objective"}  # no AdamW moments, no schedule

    # the export is the checkpoint's best student in a copy of its own (the user's folder: a save into it in place
    # changes nothing the run logged), readable per the umask
    (w,) = weights(out["student_dir"])
    exported, in_ckpt = os.path.join(out["student_dir"], w), os.path.join(ckpt, "best_student", w)
    assert os.stat(exported).st_ino != os.stat(in_ckpt).st_ino
    assert mode(exported) == 0o640 and mode(out["student_dir"]) == 0o750
    assert all(mode(os.path.join(d, n)) & 0o040 for d, _, ns in os.walk(ckpt) for n in ns)

    # MLflow keeps the student once: the logged model, no second copy as run artifacts
    c = MlflowClient(uri)
    assert "student" not in {a.path for a in c.list_artifacts(out["run_id"])}
    (logged,) = c.search_logged_models([c.get_run(out["run_id"]).info.experiment_id])
    in_mlflow = os.path.join(urlparse(logged.artifact_location).path, "model", w)
    assert os.stat(in_mlflow).st_ino == os.stat(in_ckpt).st_ino  # a local store: the checkpoint's file, linked
    with open(exported, "r+b") as f:  # the user rewrites their export in place (as save_pretrained into it does)
        f.write(b"\0" * 8)
    assert open(in_mlflow, "rb").read(8) != b"\0" * 8  # what MLflow logged is untouched
    best = download_student(Tracker(uri, "disk"), out["run_id"], str(tmp_path / "best"))
    assert weights(best) == [w] and mode(os.path.join(best, w)) == 0o640 and mode(best) == 0o750
    assert os.path.isfile(os.path.join(best, "tokenizer.json")) and os.path.isfile(os.path.join(best, "config.json"))

    # a run resumed after its end (its Tune trial restarted) reads the slim checkpoint and reports its end again
    again: list = []
    last, _ = fit_in_process(cfg, run_dir=str(tmp_path / "ray" / "t"), threads=1, resume=True, on_epoch=again.append)
    assert [m["epoch"] for m in again] == [2] and last["best_eval_accuracy"] == out["best_eval_accuracy"]


def test_a_run_logged_before_the_student_was_kept_once_still_exports(tmp_path, tiny_teacher):
    """Runs of older versions have the student as ``student`` artifacts and no logged model: still exported."""
    from raydistill.tracking.track import Tracker, download_student

    uri = f"sqlite:///{tmp_path / 'm.db'}"
    tracker = Tracker(uri, "old")
    rid = tracker.start_run("old", {})
    tracker.log_artifacts(rid, tiny_teacher("classification", 2), "student")
    got = download_student(tracker, rid, str(tmp_path / "exported"))
    assert weights(got) == ["model.safetensors"]


def test_published_results_follow_the_umask(tmp_path, umask_027):
    """safetensors writes 0600 and mkdtemp makes 0700: publish gives the result the umask's modes."""
    import torch
    from safetensors.torch import save_file

    from raydistill.common.outputs import publish, staging

    src = staging(str(tmp_path / "out"))
    save_file({"w": torch.zeros(2)}, os.path.join(src, "model.safetensors"))
    assert mode(os.path.join(src, "model.safetensors")) == 0o600  # what the library does on its own
    publish(src, str(tmp_path / "out"), "raydistill distill")
    assert mode(tmp_path / "out" / "model.safetensors") == 0o640 and mode(tmp_path / "out") == 0o750


def test_disk_size_reads_as_units():
    from raydistill.results.report import disk_size

    assert [disk_size(n) for n in (512, 4_000, 270e6, 1.8e9)] == ["512 B", "4.0 KB", "270 MB", "1.8 GB"]


def test_an_epochs_line_shows_sizes_as_people_read_them():
    """Issue 48 item 6: ``student_params=1.739e+07`` in every epoch's line read as nothing."""
    from raydistill.train.loop import epoch_line

    line = epoch_line({"epoch": 1, "stage": "pred", "train_loss": 0.348123, "student_params": 17_390_000.0})
    assert line == "epoch=1 stage=pred train_loss=0.3481 student_params=17.4M"


def test_the_summary_says_what_the_results_folder_holds(tmp_path, monkeypatch):
    """The sweep's JSON line carries ``results_disk`` (its stderr says it in units); a hard-linked file counts once."""
    from raydistill.results.summary import _results_disk

    monkeypatch.chdir(tmp_path)
    (tmp_path / "raydistill-results").mkdir()
    (tmp_path / "raydistill-results" / "a").write_bytes(b"x" * 100_000)
    os.link(tmp_path / "raydistill-results" / "a", tmp_path / "raydistill-results" / "b")
    disk = _results_disk()
    assert disk["path"] == str(tmp_path / "raydistill-results") and 100_000 <= disk["bytes"] < 200_000
