"""Benchmark (a) runs end to end in smoke mode (tiny models): both sweeps finish and a ratio is printed.

The smoke checks the script's plumbing only, at its tiniest (2 trials of 1 epoch per sweep: the second trial is the
first to read a cache the first built; the script runs no labels-only control): that the cache gives the same losses
and is reused across runs is tests/unit/train/test_loop.py's (test_teacher_cache_gives_the_same_losses and the tests
after it)."""

from __future__ import annotations

import os
import runpy
import sys

import pytest

from tests.paths import ROOT

pytestmark = pytest.mark.slow


def test_sweep_cache_benchmark_smoke(ray_session, monkeypatch, capsys, tmp_path):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("RAYDISTILL_CACHE_DIR", os.environ.get("RAYDISTILL_CACHE_DIR", str(tmp_path)))  # restored after
    script = str(ROOT / "benchmarks" / "sweep_cache.py")
    monkeypatch.setattr(sys, "argv", [script, "--smoke", "--trials", "2", "--epochs", "1"])
    runpy.run_path(script, run_name="__main__")
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert last.startswith("RATIO sweep_no_cache/sweep_cache=") and float(last.split("=")[1]) > 0
