"""A quiet, honest console (issue 48 item 6): the trials' lines reach the user as they wrote them — no Ray
``(run_trial pid=…)`` prefixes, no colour codes in redirected output, no "[repeated 2x across cluster]" folding —
and Ray's token notice only with --verbose."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

DRIVER = textwrap.dedent(
    """
    import os, sys, time
    import ray
    from raydistill.orchestrate.connect import init_ray, shutdown

    init_ray(num_cpus=2, verbose=sys.argv[1] == "verbose")

    @ray.remote
    def trial(i):
        print("the same line from every trial", file=sys.stderr, flush=True)
        print(f"epoch=1 of trial {i}", file=sys.stderr, flush=True)

    ray.get([trial.remote(i) for i in range(3)])
    time.sleep(3)  # the log monitor forwards lines about every second
    shutdown()
    """
)


@pytest.fixture(scope="module")
def drove(tmp_path_factory) -> dict[str, str]:
    """The driver's console, redirected (not a terminal), run ``quiet`` and ``verbose`` at once, each with a local
    Ray of its own (two starts of mostly single-threaded imports take about the time of one on 2 cores)."""
    env_keep = {"PATH", "HOME", "PYTHONPATH", "VIRTUAL_ENV", "TMPDIR"}
    env = {k: v for k, v in os.environ.items() if k in env_keep or k.startswith(("RAYDISTILL", "HF_"))}
    env.pop("RAY_AUTH_MODE", None)  # Ray's default: token auth on for a new local cluster, with its notice
    procs = {
        mode: subprocess.Popen(
            [sys.executable, "-c", DRIVER, mode],
            cwd=tmp_path_factory.mktemp(mode),
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for mode in ("quiet", "verbose")
    }
    out = {}
    for mode, p in procs.items():
        stdout, stderr = p.communicate(timeout=240)
        assert p.returncode == 0, stderr[-3000:]
        out[mode] = stdout + stderr
    return out


def test_redirected_worker_output_is_plain_and_whole(drove):
    out = drove["quiet"]
    lines = out.splitlines()
    assert lines.count("the same line from every trial") == 3, out[-3000:]  # not folded into one
    assert {f"epoch=1 of trial {i}" for i in range(3)} <= set(lines)
    assert "\x1b[" not in out and "pid=" not in out and "repeated" not in out
    assert "Token authentication" not in out


def test_verbose_keeps_rays_own_printer(drove):
    out = drove["verbose"]
    assert "(trial pid=" in out and "Token authentication" in out


def test_a_trials_lines_are_led_by_its_id_a_single_runs_by_nothing():
    from raydistill.orchestrate.console import label

    assert label("38b85360 pkd 2L-256 T=2 a=0.5 b=100 skip") == "[38b85360] "
    assert label("my run") == "" and label(None) == ""


def test_the_printer_prints_each_line_as_written(capsys):
    from raydistill.orchestrate.console import _print

    _print({"pid": 123, "is_err": True, "lines": ["[38b85360] epoch=1", "[38b85360] epoch=1"], "ip": "x"})
    _print({"pid": "raylet", "is_err": True, "lines": ["A worker died"], "ip": "x"})
    assert capsys.readouterr().err.splitlines() == ["[38b85360] epoch=1", "[38b85360] epoch=1", "ray: A worker died"]
