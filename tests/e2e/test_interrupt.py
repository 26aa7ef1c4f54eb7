"""Ctrl-C (SIGINT) during a sweep, at three moments — while it fine-tunes its teacher, between trials, mid-trial — ends
it with one line naming the exact resume command, exit 130, no summary, its MLflow runs KILLED (none left RUNNING),
and `--resume --name NAME` alone finishes the sweep (slow)."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time

import pytest

pytestmark = pytest.mark.slow


def _cmd(teacher, glue_dir, db, name, *extra):
    return [
        sys.executable,
        "-m",
        "raydistill.sweep",
        "kd_glue",
        "--task",
        "sst2",
        "--data-dir",
        glue_dir,
        "--teacher",
        teacher,
        "--set",
        "student.size=2L-32-64-2",
        "--set",
        "search.confirm=false",
        "--set",
        "search.control=false",
        "--set",
        "search.asha=false",
        "--epochs",
        "2",
        "--batch-size",
        "16",
        "--max-length",
        "32",
        "--eval-limit",
        "16",
        "--tracking-uri",
        f"sqlite:///{db}",
        "--name",
        name,
        "--experiment",
        name,
        *extra,
    ]


def _interrupt_when(cmd, cwd, ready, timeout=600):
    """Start the sweep, send SIGINT once ``ready(stderr_so_far)`` holds, return (exit code, stdout, stderr)."""
    err_path = os.path.join(cwd, "stderr.txt")
    with open(err_path, "w") as err:
        p = subprocess.Popen(
            cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=err, text=True, env={**os.environ, "RAY_ADDRESS": ""}
        )
        deadline = time.time() + timeout
        while time.time() < deadline and p.poll() is None and not ready(open(err_path).read()):
            time.sleep(0.5)
        assert p.poll() is None, "the sweep ended before the moment to interrupt it:\n" + open(err_path).read()[-3000:]
        p.send_signal(signal.SIGINT)
        out, _ = p.communicate(timeout=180)
    return p.returncode, out, open(err_path).read()


def _statuses(db, where=""):
    return (
        sqlite3.connect(db)
        .execute(
            "select r.status, coalesce(max(case when t.key = 'raydistill.role' then t.value end), 'trial') from runs r "
            "left join tags t on r.run_uuid = t.run_uuid group by r.run_uuid"
        )
        .fetchall()
    )


def _check_interrupted(code, out, err, name):
    lines = [ln for ln in err.strip().splitlines() if ln.strip()]
    assert code == 130, err[-3000:]
    assert lines[-1] == f"interrupted; resume with: python -m raydistill.sweep --resume --name {name}", lines[-5:]
    assert "Traceback" not in err and not out.strip()  # one line, and no summary that looks like a finished sweep


def _resume(cwd, name, db):
    r = subprocess.run(
        [sys.executable, "-m", "raydistill.sweep", "--resume", "--name", name],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=900,
        env={**os.environ, "RAY_ADDRESS": ""},
    )
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_interrupt_while_the_sweep_fine_tunes_its_teacher(tiny_teacher, glue_dir, tmp_path):
    db = tmp_path / "m.db"
    cmd = _cmd(tiny_teacher("base"), glue_dir, db, "int-teacher", "--num-samples", "1", "--teacher-epochs", "6")
    code, out, err = _interrupt_when(cmd, tmp_path, lambda e: "epoch 2/6" in e)  # the teacher's run is open
    _check_interrupted(code, out, err, "int-teacher")
    st = _statuses(db)
    assert ("KILLED", "sweep") in st and ("KILLED", "teacher") in st and not any(s == "RUNNING" for s, _ in st)
    done = _resume(tmp_path, "int-teacher", db)  # the state was written before the teacher: --name alone resumes
    assert done["trials"] == 1 and done["errors"] == 0
    st = _statuses(db)
    assert ("FINISHED", "sweep") in st and ("FINISHED", "teacher") in st


def test_interrupt_between_trials(tiny_teacher, glue_dir, tmp_path):
    db = tmp_path / "m.db"
    cmd = _cmd(
        tiny_teacher("classification", 2), glue_dir, db, "int-between", "--num-samples", "2", "--max-concurrent", "1"
    )
    code, out, err = _interrupt_when(cmd, tmp_path, lambda e: "TERMINATED" in e)
    _check_interrupted(code, out, err, "int-between")
    st = _statuses(db)
    assert ("KILLED", "sweep") in st and ("FINISHED", "trial") in st and not any(s == "RUNNING" for s, _ in st)


def test_interrupt_mid_trial_then_resume(tiny_teacher, glue_dir, tmp_path):
    db = tmp_path / "m.db"
    cmd = _cmd(
        tiny_teacher("classification", 2),
        glue_dir,
        db,
        "int-mid",
        "--num-samples",
        "2",
        "--max-concurrent",
        "1",
        "--max-steps",
        "40",
    )
    code, out, err = _interrupt_when(cmd, tmp_path, lambda e: "epoch 1/2" in e and "RUNNING" in e)
    _check_interrupted(code, out, err, "int-mid")
    st = _statuses(db)
    assert ("KILLED", "sweep") in st and ("KILLED", "trial") in st and not any(s == "RUNNING" for s, _ in st)
    done = _resume(tmp_path, "int-mid", db)
    assert done["trials"] == 2 and done["errors"] == 0
    st = _statuses(db)
    trials = [s for s, role in st if role == "trial"]
    assert trials == ["FINISHED", "FINISHED"] and ("FINISHED", "sweep") in st  # resumed into the same runs


def test_interrupt_a_1_worker_distill_run_in_process(tiny_teacher, glue_dir, tmp_path):
    """Ctrl-C mid-epoch of ``distill``'s one worker, trained in the command's process (no Ray): one line, exit 130,
    no traceback, the MLflow run ended KILLED and tagged interrupted (as on Ray Train)."""
    from tests.e2e.test_distill_ray import TINY_STUDENT

    db = tmp_path / "m.db"
    cmd = [sys.executable, "-m", "raydistill.distill", "--method", "kd", "--task", "sst2", "--data-dir", glue_dir]
    cmd += ["--teacher", tiny_teacher("classification", 2), *TINY_STUDENT, "--epochs", "200", "--batch-size", "16"]
    cmd += ["--max-length", "32", "--eval-limit", "16", "--tracking-uri", f"sqlite:///{db}", "--output", "s"]
    code, out, err = _interrupt_when(cmd, str(tmp_path), lambda e: "epoch 1/" in e)
    lines = [ln for ln in err.strip().splitlines() if ln.strip()]
    assert code == 130 and lines[-1].startswith("interrupted"), err[-3000:]
    assert "Traceback" not in err and not out.strip()
    assert _statuses(db) == [("KILLED", "trial")]
    assert sqlite3.connect(db).execute("select value from tags where key = 'interrupted'").fetchall() == [("true",)]
