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
    # process CPU counts every thread of the process (the shared Ray's too, in a test run), so the bounds are wide:
    # the 0.4 CPU s spent before training must not be counted, the 0.1 s in it must
    clock = Clock()
    spin(0.4)
    clock.lap("models")
    spin(0.1)
    clock.lap("train")
    time.sleep(0.05)  # wall without CPU
    clock.lap("train")
    m = clock.metrics()
    assert 0.1 <= m["cpu_train_s"] < 0.4
    assert m["time_train_s"] >= 0.05 and m["time_models_s"] > 0
