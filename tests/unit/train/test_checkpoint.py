"""train/checkpoint: a run's temporary folders, and what a process killed outright leaves of them; a checkpoint that
finds its disk full."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile

import pytest

from raydistill.train import checkpoint
from raydistill.train.checkpoint import DiskFullError, run_temp, save_checkpoint


def test_a_new_run_folder_removes_only_dead_processes_folders_of_its_kind(tmp_path, monkeypatch):
    """A run's best-student and checkpoint folders go when it ends; one killed outright (Tune stopping its trial)
    leaves them in the temporary folder, 68 MB a MiniLM-sized student each. The next run removes those whose process
    is gone, and nothing else: a live process's folder, another kind's, a name not of this pattern."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    gone = int(dead.stdout)
    where = checkpoint._where()
    names = {
        "dead": f"raydistill-best-{where}-{gone}-abc123",
        "dead_ckpt": f"raydistill-ckpt-{where}-{gone}-def456",
        "live": f"raydistill-best-{where}-{os.getppid()}-ghi789",
        "old_style": "raydistill-best-x92ajzzz",
        "pid_only": f"raydistill-best-{gone}-abc123",  # before WHERE: whose namespace is unknown
        "users": f"my-best-{gone}-abc",
    }
    for name in names.values():
        (tmp_path / name).mkdir()
        (tmp_path / name / "model.safetensors").write_bytes(b"w")
    new = run_temp("best")
    assert os.path.basename(new).startswith(f"raydistill-best-{where}-{os.getpid()}-") and os.path.isdir(new)
    left = {p.name for p in tmp_path.iterdir()}
    assert names["dead"] not in left
    assert {names[k] for k in ("dead_ckpt", "live", "old_style", "pid_only", "users")} <= left
    run_temp("ckpt")
    assert names["dead_ckpt"] not in {p.name for p in tmp_path.iterdir()}
    assert os.path.isdir(new)  # this process's own folder stays while it lives


def test_a_folder_of_another_container_sharing_the_temporary_folder_is_never_taken_for_dead(tmp_path, monkeypatch):
    """Two containers (or machines) sharing /tmp: a process id alive in one is unknown in the other, so a run's
    folder is judged only where its process id means something — its machine and PID namespace (``_where``)."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    mine = checkpoint._where()
    theirs = "0123abcd" if mine != "0123abcd" else "89abcdef"
    live_elsewhere = tmp_path / f"raydistill-best-{theirs}-{int(dead.stdout)}-abc123"
    live_elsewhere.mkdir()
    (live_elsewhere / "model.safetensors").write_bytes(b"w")
    run_temp("best")
    assert (live_elsewhere / "model.safetensors").read_bytes() == b"w"
    assert len(mine) == 8 and mine == checkpoint._where()  # the same in every call of a process


class _Saves:
    """What save_checkpoint asks of a student, tokenizer, objective, optimizer and schedule."""

    def save_pretrained(self, folder):
        os.makedirs(folder, exist_ok=True)
        with open(os.path.join(folder, "weights"), "w") as f:
            f.write("w")

    def state_dict(self):
        return {}


def _save_failing(tmp_path, monkeypatch, free: int):
    """save_checkpoint over an earlier checkpoint, its train state's write failing as torch's does on a full disk (no
    errno), with ``free`` bytes left on the disk."""
    path = tmp_path / "checkpoint"
    path.mkdir()
    (path / "state.json").write_text("{}")  # the earlier epoch's: kept whatever happens

    def full(*a, **k):
        raise RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos 933335104 vs 933334996")

    monkeypatch.setattr(checkpoint.torch, "save", full)
    monkeypatch.setattr(checkpoint, "free_bytes", lambda folder: free)
    s = _Saves()
    save_checkpoint(str(path), s, s, s, s, s, {"epoch": 2})


def test_a_checkpoint_on_a_full_disk_says_so_and_keeps_the_last_one(tmp_path, monkeypatch):
    with pytest.raises(DiskFullError) as e:
        _save_failing(tmp_path, monkeypatch, free=4096)
    assert str(e.value) == (
        f"no space left on the disk of {tmp_path} for a checkpoint (0 MiB free once its partial copy was removed): "
        "free space there, or point TMPDIR (where each epoch's checkpoint is written before it is kept) at a larger "
        "disk"
    )
    assert "unexpected pos" in str(e.value.__cause__)  # torch's own words stay in the chain
    assert sorted(os.listdir(tmp_path)) == ["checkpoint"] and os.listdir(tmp_path / "checkpoint") == ["state.json"]


def test_a_checkpoint_failing_with_room_on_the_disk_raises_its_own_error(tmp_path, monkeypatch):
    with pytest.raises(RuntimeError, match="unexpected pos") as e:
        _save_failing(tmp_path, monkeypatch, free=10 << 30)
    assert not isinstance(e.value, DiskFullError)
    assert sorted(os.listdir(tmp_path)) == ["checkpoint"]
