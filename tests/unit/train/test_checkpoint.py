"""train/checkpoint: a run's temporary folders, and what a process killed outright leaves of them."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile

from raydistill.train import checkpoint
from raydistill.train.checkpoint import run_temp


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
