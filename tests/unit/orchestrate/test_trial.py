"""orchestrate/trial.py's fixed cost of a finished trial, from what the run returned."""

from __future__ import annotations

import time

from raydistill.orchestrate.trial import fixed_cost


def test_fixed_cost_counts_what_the_run_trained_here():
    t0, cpu0 = time.perf_counter(), time.process_time()
    out = fixed_cost({"time_train_s": 0.0, "cpu_train_s": 0.0}, t0, t0, cpu0, in_process=True)
    assert out["fixed_cost_s"] == out["trial_wall_s"] >= 0 and out["fixed_cpu_s"] >= 0
    assert "fixed_cpu_s" not in fixed_cost({"time_train_s": 0.0}, t0, t0, cpu0, in_process=False)


def test_a_trial_resumed_after_its_last_epoch_has_a_fixed_cost_too():
    """Its run reports the recorded result again and trains no step in this process: no ``cpu_train_s`` (a resumed
    sweep's trial died on the KeyError in test_faults' killed-driver test)."""
    t0, cpu0 = time.perf_counter(), time.process_time()
    out = fixed_cost({"best_val_accuracy": 0.5}, t0, t0, cpu0, in_process=True)
    assert out["fixed_cpu_s"] >= 0 and out["fixed_cost_s"] == out["trial_wall_s"]
