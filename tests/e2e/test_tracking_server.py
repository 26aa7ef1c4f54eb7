"""A sweep logging to a real tracking server (slow): `mlflow server` over HTTP, backed by PostgreSQL, as the cluster
path runs it (docs/CLUSTER.md). Four trials at once write to it; every trial ends FINISHED with every metric of every
epoch and its logged model, and `best` reads the sweep back from the server and exports its student."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests import servers

pytestmark = pytest.mark.slow

EPOCHS = 2


@pytest.fixture(scope="module")
def postgres_server(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("tracking-server"))
    try:
        with servers.postgres() as store:
            with servers.mlflow_server(store, os.path.join(root, "mlflow")) as url:
                yield url
    except servers.Unavailable as e:
        pytest.skip(f"no PostgreSQL-backed MLflow server here: {e}")


def sweep(teacher: str, glue_dir: str, uri: str, cwd) -> dict:
    cmd = [sys.executable, "-m", "raydistill.sweep", "kd_glue", "--task", "sst2", "--data-dir", glue_dir]
    cmd += ["--teacher", teacher, "--tracking-uri", uri, "--name", "pg", "--experiment", "pg-sweep"]
    for s in ("student.hidden=32", "student.intermediate=64", "student.heads=2", "student.layers=2"):
        cmd += ["--set", s]
    cmd += [
        "--set",
        "train.lr={loguniform: [1.0e-4, 1.0e-2]}",
        "--set",
        "search.confirm=false",
        "--set",
        "search.control=false",
    ]
    cmd += ["--set", "search.asha=false", "--num-samples", "4", "--cpus-per-worker", "0.5"]
    cmd += ["--epochs", str(EPOCHS), "--max-steps", "4", "--batch-size", "16", "--max-length", "32"]
    cmd += ["--eval-limit", "16"]
    # the sweep's own local Ray (the session's Ray holds the test process's CPUs)
    p = subprocess.run(
        cmd, cwd=cwd, env={**os.environ, "RAY_ADDRESS": ""}, capture_output=True, text=True, timeout=1200
    )
    assert p.returncode == 0, p.stderr[-4000:]
    assert "4 trial(s) at once" in p.stderr, p.stderr[-3000:]
    # the last stdout line is the JSON (MLflow's "View run … at" lines from trials once came after it)
    return json.loads(p.stdout.strip().splitlines()[-1])


def test_concurrent_sweep_on_a_postgres_backed_server_loses_nothing(postgres_server, tiny_teacher, glue_dir, tmp_path):
    from mlflow.tracking import MlflowClient

    out = sweep(tiny_teacher("classification", 2), glue_dir, postgres_server, tmp_path)
    assert out["trials"] == 4 and out["errors"] == 0

    c = MlflowClient(postgres_server)
    assert c.tracking_uri.startswith("http://")  # the server, not a local store
    exp = c.get_experiment_by_name("pg-sweep")
    runs = c.search_runs([exp.experiment_id])
    trials = [r for r in runs if r.data.tags.get("raydistill.trial_id")]
    (parent,) = [r for r in runs if r.data.tags.get("raydistill.role") == "sweep"]
    assert len(trials) == 4 and parent.info.status == "FINISHED"
    spans = sorted((r.info.start_time, r.info.end_time) for r in trials)
    assert any(a[1] > b[0] for a, b in zip(spans, spans[1:], strict=False)), f"no two trials overlapped: {spans}"
    for r in trials:
        assert r.info.status == "FINISHED"
        for m in ("eval_accuracy", "val_accuracy"):  # every epoch's metric reached the database
            assert [h.step for h in c.get_metric_history(r.info.run_id, m)] == list(range(1, EPOCHS + 1))
        assert {"best_val_accuracy", "best_eval_accuracy", "student_params", "latency_ms_b1"} <= set(r.data.metrics)
        (model,) = c.search_logged_models([exp.experiment_id], filter_string=f"source_run_id = '{r.info.run_id}'")
        assert model.model_id
    assert not (tmp_path / "raydistill-results" / "mlflow-spool.jsonl").exists()  # no metric waited for a retry

    p = subprocess.run(
        [sys.executable, "-m", "raydistill.best", "--experiment", "pg-sweep", "--tracking-uri", postgres_server]
        + ["--export", str(tmp_path / "student")],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert p.returncode == 0, p.stderr[-3000:]
    b = json.loads(p.stdout.strip().splitlines()[-1])
    by_trial = {r.data.tags["raydistill.trial_id"]: r.info.run_id for r in trials}
    assert b["run_id"] == by_trial[out["best"]["trial"]]  # the sweep's own winner, read back from the server
    assert os.path.isfile(tmp_path / "student" / "config.json")
