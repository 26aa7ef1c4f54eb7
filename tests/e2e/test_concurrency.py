"""The sweep fills the machine (slow, real Ray in subprocesses, each command its own local Ray):

* by default a sweep on a 2-CPU machine runs two 1-CPU trials at once (their MLflow runs overlap in time), and
  Optuna's constant liar keeps the concurrent proposals apart;
* two sweeps started at once on one host, ASHA on, both finish: each command's Ray actors (Ray Train's placement
  group cleaner included) talk to their own Ray, never "multiple active Ray instances".
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


def test_default_runs_as_many_trials_at_once_as_the_cpus_hold(tiny_teacher, glue_dir, tmp_path):
    if (os.cpu_count() or 1) < 2:
        pytest.skip("needs 2 CPUs")
    db = tmp_path / "m.db"
    p = subprocess.run(
        sweep_cmd(
            tiny_teacher("classification", 2), glue_dir, db, "wide", "--num-samples", "4", "--set", "search.asha=false"
        ),
        cwd=tmp_path,
        env={**os.environ, "RAY_ADDRESS": ""},
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert p.returncode == 0, p.stderr[-3000:]
    cpus = len(os.sched_getaffinity(0))
    assert f"{min(cpus, 4)} trial(s) at once: the cluster has {cpus} CPUs" in p.stderr
    out = json.loads(p.stdout.strip().splitlines()[-1])
    assert out["trials"] == 4 and out["errors"] == 0 and out["concurrency"] == min(cpus, 4)
    assert out["fixed_cost_s"] is not None and out["fixed_cost_s"] > 0
    runs = sorted(runs_of(db, "wide"), key=lambda r: r.info.start_time)
    spans = [(r.info.start_time, r.info.end_time) for r in runs]
    assert any(a[1] > b[0] for a, b in pairwise(spans)), f"no two trials overlapped: {spans}"
    for r in runs:  # each trial's fixed cost and its phases are in MLflow
        assert {"trial_wall_s", "fixed_cost_s", "time_train_s", "time_models_s", "time_data_s"} <= set(r.data.metrics)
    lrs = [float(r.data.params["lr"]) for r in runs]
    assert len(set(lrs)) == 4  # concurrent proposals are distinct points


def test_two_sweeps_at_once_on_one_host_both_finish(tiny_teacher, glue_dir, tmp_path):
    teacher = tiny_teacher("classification", 2)
    procs = []
    for name in ("left", "right"):
        d = tmp_path / name
        d.mkdir()
        cmd = sweep_cmd(
            teacher,
            glue_dir,
            d / "m.db",
            name,
            "--num-samples",
            "3",
            "--epochs",
            "3",
            "--set",
            "search.asha={grace_period: 1, reduction_factor: 2}",
        )
        procs.append(
            (
                d,
                subprocess.Popen(
                    cmd,
                    cwd=d,
                    env={**os.environ, "RAY_ADDRESS": ""},
                    text=True,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                ),
            )
        )
    for d, p in procs:
        out, err = p.communicate(timeout=1500)
        assert p.returncode == 0, err[-3000:]
        assert "multiple active Ray instances" not in err and "Failed to query Ray Train Controller" not in err
        summary = json.loads(out.strip().splitlines()[-1])
        assert summary["trials"] == 3 and summary["errors"] == 0
        assert len(runs_of(d / "m.db", d.name)) == 3
