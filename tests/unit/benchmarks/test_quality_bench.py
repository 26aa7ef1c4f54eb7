"""benchmarks/quality.py's own rules: a row of several seeds is represented by its median seed on validation (dev
chooses nothing), each model is re-scored at the max length its run used, and a Ctrl-C reaches the running command
once (its own process group; the script forwards one signal)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from tests.paths import ROOT

BENCH = ROOT / "benchmarks"
sys.path.insert(0, str(BENCH))

import quality
import quality_stats


def test_rows_are_represented_by_the_median_seed_on_val_and_rescored_at_their_own_max_length(monkeypatch):
    calls = []
    gold = [0, 1, 0, 1]

    def predictions(model_dir, task, data_dir, max_length=128):
        calls.append((model_dir, max_length))
        return [0, 1, 1, 1], gold

    monkeypatch.setattr(quality_stats, "dev_predictions", predictions)
    runs = [
        {"dir": "s0", "dev": 0.9, "val": 0.70, "max_length": 64},  # best on dev, worst on val
        {"dir": "s1", "dev": 0.5, "val": 0.80, "max_length": 64},  # the median on val, the worst on dev
        {"dir": "s2", "dev": 0.7, "val": 0.90, "max_length": 64},
    ]
    res = {
        "task": "sst2",
        "teacher": {"dir": "t", "dev": 0.9, "max_length": 96},
        "labels": {"runs": runs},
        "search": {"runs": [{"dir": "b", "dev": 0.8, "val": 0.85, "max_length": 48}]},
    }
    out = quality.significance(type("A", (), {"data": "/data"})(), res)
    assert out["labels"]["dir"] == "s1"  # by dev the median would have been s2
    assert dict(calls) == {"t": 96, "s1": 64, "b": 48}  # each at its run's length, never a fixed 128


def test_the_difference_and_its_paired_interval_come_from_the_same_pair_of_runs(monkeypatch):
    """Issue 45 item 8: the median of dev may be another seed than the median on val, whose predictions the paired
    interval resamples; "+x (CI …)" then mixed two seeds. Both now come from the representative runs."""
    gold = [1] * 10
    right = {"search": 8, "s0": 9, "s1": 5, "s2": 7, "t": 10}  # rows each model gets right

    def predictions(model_dir, task, data_dir, max_length=128):
        return [1] * right[model_dir] + [0] * (10 - right[model_dir]), gold

    monkeypatch.setattr(quality_stats, "dev_predictions", predictions)
    runs = [  # dev median: s2 (0.7); val median: s1 (0.5)
        {"dir": "s0", "dev": 0.9, "val": 0.70, "max_length": 64},
        {"dir": "s1", "dev": 0.5, "val": 0.80, "max_length": 64},
        {"dir": "s2", "dev": 0.7, "val": 0.90, "max_length": 64},
    ]
    res = {
        "task": "sst2",
        "metric": "accuracy",
        "teacher": {"dir": "t", "dev": 1.0, "max_length": 64},
        "labels": {"runs": runs},
        "search": {"runs": [{"dir": "search", "dev": 0.8, "val": 0.85, "max_length": 64}]},
    }
    vs = quality.significance(type("A", (), {"data": "/data"})(), res)["search"]["vs_labels"]
    assert vs["pair"] == ["search", "s1"] and vs["diff"] == pytest.approx(0.8 - 0.5)  # not 0.8 - 0.7, the medians
    assert vs["ci"][0] <= vs["diff"] <= vs["ci"][1]
    assert quality_stats.PAIR_NOTE in quality.table(res) and "+0.3000, CI" in quality.table(res)


CHILD = textwrap.dedent("""
    import os, signal, sys, time
    got = []
    signal.signal(signal.SIGINT, lambda s, f: got.append(s))
    open(os.environ["READY"], "w").close()
    while not got:
        time.sleep(0.01)
    time.sleep(1.5)  # the cleanup: a second signal would land here
    open(os.environ["GOT"], "w").write(str(len(got)))
    print("{}")
""")

DRIVER = textwrap.dedent("""
    import sys
    sys.path.insert(0, sys.argv[1])
    import quality
    quality.forward_signals()  # what quality.py's and transfer.py's main do first
    quality.run(["child"], sys.argv[2])
""")


def test_two_ctrl_cs_at_the_terminal_reach_the_running_command_once(tmp_path):
    (tmp_path / "child.py").write_text(CHILD)
    (tmp_path / "driver.py").write_text(DRIVER)
    ready, got = tmp_path / "ready", tmp_path / "got"
    env = {**os.environ, "PYTHONPATH": str(tmp_path), "READY": str(ready), "GOT": str(got)}
    # the driver leads its own process group, as a terminal's foreground job does
    proc = subprocess.Popen(
        [sys.executable, str(tmp_path / "driver.py"), str(BENCH), str(tmp_path / "log")],
        env=env,
        start_new_session=True,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.time() + 60
    while not ready.exists() and time.time() < deadline:
        time.sleep(0.05)
    assert ready.exists()
    os.killpg(proc.pid, signal.SIGINT)  # the terminal's Ctrl-C reaches the whole foreground group
    time.sleep(0.3)
    os.killpg(proc.pid, signal.SIGINT)  # and a second one
    _, err = proc.communicate(timeout=60)
    assert got.read_text() == "1", err  # the command heard one signal: its cleanup ran whole
    assert proc.returncode != 0 and "interrupted in child" in err
