"""orchestrate/kept: the latest checkpoint's epochs — on Ray Train the one its controller registered, and a record
that cannot be read taken as none (the run trains again), never a crash of the resume."""

from __future__ import annotations

import json

from raydistill.orchestrate.kept import latest_history


def _checkpoint(run_dir, name, epochs):
    folder = run_dir / name / "checkpoint"
    folder.mkdir(parents=True)
    (folder / "state.json").write_text(json.dumps({"history": [{"epoch": e} for e in epochs]}))
    return folder


def test_in_process_the_newest_complete_checkpoint(tmp_path):
    _checkpoint(tmp_path, "checkpoint_000001", [1])
    _checkpoint(tmp_path, "checkpoint_000002", [1, 2])
    _checkpoint(tmp_path, "checkpoint_000003.tmp", [1, 2, 3])  # half-copied: still named .tmp
    assert [m["epoch"] for m in latest_history(str(tmp_path))] == [1, 2]


def test_on_ray_train_the_checkpoint_its_controller_registered(tmp_path):
    _checkpoint(tmp_path, "checkpoint_2026-11-29_01", [1, 2])
    newer = _checkpoint(tmp_path, "checkpoint_2026-11-29_02", [1, 2, 3])  # copied by a worker, never registered
    (newer / "state.json").write_text('{"history": [{"epo')  # half-copied
    snapshot = {"latest_checkpoint_result": {"checkpoint_dir_name": "checkpoint_2026-11-29_01", "metrics": {}}}
    (tmp_path / "checkpoint_manager_snapshot.json").write_text(json.dumps(snapshot))
    assert [m["epoch"] for m in latest_history(str(tmp_path))] == [1, 2]
    (tmp_path / "checkpoint_manager_snapshot.json").write_text(json.dumps({"latest_checkpoint_result": None}))
    assert latest_history(str(tmp_path)) == []


def test_a_record_that_cannot_be_read_is_none(tmp_path, caplog):
    folder = _checkpoint(tmp_path, "checkpoint_000001", [1])
    (folder / "state.json").write_text('{"history": [')
    assert latest_history(str(tmp_path)) == []
    assert "could not be read" in caplog.text
