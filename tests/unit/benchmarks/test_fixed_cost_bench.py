"""benchmarks/fixed_cost.py's arithmetic (the sweeps themselves run only in the benchmark: each is a local Ray)."""

from __future__ import annotations

import sys

import pytest

from tests.paths import ROOT

sys.path.insert(0, str(ROOT / "benchmarks"))
import fixed_cost  # noqa: E402


def test_a_row_is_the_median_trial_and_the_sweeps_overhead_per_trial():
    trials = [
        {"fixed_cost_s": 4.0, "trial_wall_s": 10.0, "time_train_s": 6.0, "time_trial_start_s": 1.0},
        {"fixed_cost_s": 2.0, "trial_wall_s": 7.0, "time_train_s": 5.0, "time_trial_start_s": 0.5},
        {"fixed_cost_s": 3.0, "trial_wall_s": 8.0, "time_train_s": 5.0, "time_trial_start_s": 0.7},
    ]
    r = fixed_cost.row("sqlite", 2, {"wall_s": 15.0}, trials)
    assert (r["store"], r["at_once"], r["trials"]) == ("sqlite", 2, 3)
    assert r["fixed_cost_s"] == 3.0 and r["trial_wall_s"] == 8.0 and r["time_trial_start_s"] == 0.7
    assert r["time_models_s"] == 0.0  # a phase no trial logged
    assert r["reused"] == 0  # no trial says its actor trained one before it
    # 2 slots x 15 s of tuning = 30 slot-seconds, 16 of them training steps: 14 s over 3 trials
    assert r["overhead_s"] == pytest.approx(14 / 3)


def test_the_sweeps_split_the_cpus_over_the_slots_and_switch_off_what_is_not_a_trial(tmp_path, monkeypatch):
    seen = {}

    class Done:
        returncode, stdout, stderr = 0, '{"wall_s": 1.0, "parent_run_id": "p"}\n', ""

    def fake_run(cmd, **kw):
        seen["cmd"] = cmd
        return Done()

    monkeypatch.setattr(fixed_cost.subprocess, "run", fake_run)
    monkeypatch.setattr(fixed_cost.os, "cpu_count", lambda: 2)
    out = fixed_cost.sweep(str(tmp_path), ["kd_glue", "--set", "search.control=false"], "sqlite:///m.db", 8, 16, "x8")
    cmd = seen["cmd"]
    assert out["parent_run_id"] == "p" and out["command_s"] >= 0
    assert cmd[cmd.index("--max-concurrent") + 1] == "8" and cmd[cmd.index("--num-samples") + 1] == "16"
    assert cmd[cmd.index("--cpus-per-worker") + 1] == "0.25"  # 2 CPUs over 8 slots


def test_a_row_counts_the_trials_a_reused_actor_trained_and_their_median_cpu_seconds():
    trials = [
        {"fixed_cost_s": 4.0, "fixed_cpu_s": 3.0, "worker_trials": 1},
        {"fixed_cost_s": 2.0, "fixed_cpu_s": 1.0, "worker_trials": 2},
        {"fixed_cost_s": 3.0, "fixed_cpu_s": 2.5, "worker_trials": 3},
    ]
    r = fixed_cost.row("sqlite", 1, {"wall_s": 9.0}, trials)
    assert r["reused"] == 2 and r["fixed_cpu_s"] == 2.5
