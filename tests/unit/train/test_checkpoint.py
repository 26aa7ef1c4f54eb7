"""train/checkpoint: a run's temporary folders, and what a process killed outright leaves of them."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile

from raydistill.train.checkpoint import run_temp


def test_a_new_run_folder_removes_only_dead_processes_folders_of_its_kind(tmp_path, monkeypatch):
    """A run's best-student and checkpoint folders go when it ends; one killed outright (Tune stopping its trial)
    leaves them in the temporary folder, 68 MB a MiniLM-sized student each. The next run removes those whose process
    is gone, and nothing else: a live process's folder, another kind's, a name not of this pattern."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    gone = int(dead.stdout)
    names = {
        "dead": f"raydistill-best-{gone}-abc123",
        "dead_ckpt": f"raydistill-ckpt-{gone}-def456",
        "live": f"raydistill-best-{os.getppid()}-ghi789",
        "old_style": "raydistill-best-x92ajzzz",
        "users": f"my-best-{gone}-abc",
    }
    for name in names.values():
        (tmp_path / name).mkdir()
        (tmp_path / name / "model.safetensors").write_bytes(b"w")
    new = run_temp("best")
    assert os.path.basename(new).startswith(f"raydistill-best-{os.getpid()}-") and os.path.isdir(new)
    left = {p.name for p in tmp_path.iterdir()}
    assert names["dead"] not in left
    assert {names[k] for k in ("dead_ckpt", "live", "old_style", "users")} <= left
    run_temp("ckpt")
    assert names["dead_ckpt"] not in {p.name for p in tmp_path.iterdir()}
    assert os.path.isdir(new)  # this process's own folder stays while it lives
