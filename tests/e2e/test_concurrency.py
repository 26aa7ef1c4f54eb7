"""The sweep fills the machine (slow, real Ray in subprocesses, each command its own local Ray):

* by default a sweep on a 2-CPU machine runs two 1-CPU trials at once (their MLflow runs overlap in time), and
  Optuna's constant liar keeps the concurrent proposals apart;
* two sweeps started at once on one host, ASHA on, both finish: each command's Ray actors (Ray Train's placement
  group cleaner included) talk to their own Ray, never "multiple active Ray instances".

All the module's sweeps start at once (``sweeps``): the first test's beside the second's two.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from itertools import pairwise

import pytest

pytestmark = pytest.mark.slow


def sweep_cmd(teacher, glue_dir, db, name, *extra):
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
        "student.hidden=32",
        "--set",
        "student.intermediate=64",
        "--set",
        "student.heads=2",
        "--set",
        "student.layers=2",
        "--set",
        "train.lr={loguniform: [1.0e-5, 1.0e-2]}",
        "--epochs",
        "2",
        "--max-steps",
        "4",
        "--batch-size",
        "16",
        "--max-length",
        "32",
        "--eval-limit",
        "16",
        "--set",
        "search.confirm=false",
        "--set",
        "search.control=false",
        "--tracking-uri",
        f"sqlite:///{db}",
        "--name",
        name,
        "--experiment",
        name,
        *extra,
    ]


def runs_of(db, experiment):
    from mlflow.tracking import MlflowClient

    c = MlflowClient(f"sqlite:///{db}")
    exp = c.get_experiment_by_name(experiment)
    return [r for r in c.search_runs([exp.experiment_id]) if "raydistill.trial_id" in r.data.tags]


def _wide(teacher, glue_dir, d) -> list[list[str]]:
    # 3 trials: more than 2 CPUs hold (the CPUs, not the trials, bound how many run at once), the fewest that shows it
    return [sweep_cmd(teacher, glue_dir, d / "m.db", "wide", "--num-samples", "3", "--set", "search.asha=false")]


def _two(teacher, glue_dir, d) -> list[list[str]]:
    asha = ["--set", "search.asha={grace_period: 1, reduction_factor: 2}"]
    return [
        sweep_cmd(teacher, glue_dir, d / name / "m.db", name, "--num-samples", "2", "--epochs", "3", *asha)
        for name in ("left", "right")
    ]


SWEEPS = {
    "test_default_runs_as_many_trials_at_once_as_the_cpus_hold": _wide,
    "test_two_sweeps_at_once_on_one_host_both_finish": _two,
}


@pytest.fixture(scope="module")
def sweeps(request, tiny_teacher, glue_dir, tmp_path_factory):
    """Every sweep of this module's selected tests, started at once, each its own command with its own local Ray and
    folder (``RAY_ADDRESS`` empty), output in files: test name → [(folder, process)]. What each test checks is its
    own sweeps' (the CPUs of its own Ray, its trials' overlap, both of two sweeps finishing beside another Ray), so
    they need not wait for each other; a third Ray beside the two of test_two_sweeps is one more neighbour."""
    selected = {item.originalname for item in request.session.items if item.module is request.module}
    teacher = tiny_teacher("classification", 2)
    started: dict = {}
    for name in sorted(selected & set(SWEEPS)):
        d = tmp_path_factory.mktemp(name.removeprefix("test_")[:20])
        for cmd in SWEEPS[name](teacher, glue_dir, d):
            cwd = d / cmd[cmd.index("--name") + 1]
            cwd.mkdir()
            with open(cwd / "stdout.txt", "w") as so, open(cwd / "stderr.txt", "w") as se:
                p = subprocess.Popen(cmd, cwd=cwd, env={**os.environ, "RAY_ADDRESS": ""}, stdout=so, stderr=se)
            started.setdefault(name, []).append((cwd, p))
    yield started
    for runs in started.values():
        for _, p in runs:
            if p.poll() is None:
                p.kill()
                p.wait()


def _ended(cwd, p, timeout) -> tuple[str, str]:
    """A started sweep once it ended: its stdout and stderr (its exit code checked)."""
    p.wait(timeout=timeout)
    out, err = (cwd / "stdout.txt").read_text(), (cwd / "stderr.txt").read_text()
    assert p.returncode == 0, err[-3000:]
    return out, err


def test_default_runs_as_many_trials_at_once_as_the_cpus_hold(sweeps):
    if (os.cpu_count() or 1) < 2:
        pytest.skip("needs 2 CPUs")
    ((d, p),) = sweeps["test_default_runs_as_many_trials_at_once_as_the_cpus_hold"]
    out, err = _ended(d, p, 900)
    db = d.parent / "m.db"
    cpus = len(os.sched_getaffinity(0))
    assert f"{min(cpus, 3)} trial(s) at once: the cluster has {cpus} CPUs" in err
    out = json.loads(out.strip().splitlines()[-1])
    assert out["trials"] == 3 and out["errors"] == 0 and out["concurrency"] == min(cpus, 3)
    assert out["fixed_cost_s"] is not None and out["fixed_cost_s"] > 0
    runs = sorted(runs_of(db, "wide"), key=lambda r: r.info.start_time)
    spans = [(r.info.start_time, r.info.end_time) for r in runs]
    assert any(a[1] > b[0] for a, b in pairwise(spans)), f"no two trials overlapped: {spans}"
    for r in runs:  # each trial's fixed cost and its phases are in MLflow
        assert {"trial_wall_s", "fixed_cost_s", "time_train_s", "time_models_s", "time_data_s"} <= set(r.data.metrics)
    lrs = [float(r.data.params["lr"]) for r in runs]
    assert len(set(lrs)) == 3  # concurrent proposals are distinct points


def test_two_sweeps_at_once_on_one_host_both_finish(sweeps):
    for d, p in sweeps["test_two_sweeps_at_once_on_one_host_both_finish"]:
        out, err = _ended(d, p, 1500)
        assert "multiple active Ray instances" not in err and "Failed to query Ray Train Controller" not in err
        summary = json.loads(out.strip().splitlines()[-1])
        assert summary["trials"] == 2 and summary["errors"] == 0
        assert len(runs_of(d / "m.db", d.name)) == 2
