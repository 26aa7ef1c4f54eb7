"""The run's clock: wall seconds per phase, and the CPU seconds of its training steps (what a trial's fixed CPU
seconds are counted against)."""

from __future__ import annotations

import time

from raydistill.train.loop import Clock


def spin(seconds: float) -> None:
    end = time.process_time() + seconds
    while time.process_time() < end:
        pass


def test_cpu_seconds_are_counted_in_training_steps_only():
    clock = Clock()
    spin(0.05)
    clock.lap("models")  # CPU spent here is not training's
    spin(0.1)
    clock.lap("train")
    time.sleep(0.05)  # wall without CPU
    clock.lap("train")
    m = clock.metrics()
    assert 0.1 <= m["cpu_train_s"] < 0.14
    assert m["time_train_s"] >= 0.15 and m["time_models_s"] >= 0.05
