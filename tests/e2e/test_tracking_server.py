"""A sweep logging to a real tracking server (slow): `mlflow server` over HTTP, backed by PostgreSQL, as the cluster
path runs it (docs/CLUSTER.md). Four trials at once write to it; every trial ends FINISHED with every metric of every
epoch and its logged model, and `best` reads the sweep back from the server and exports its student."""

from __future__ import annotations

import json
import os

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


def sweep(teacher: str, glue_dir: str, uri: str, capsys) -> dict:
    """The sweep, in this process on the tests' shared Ray (4 CPUs: four half-CPU trials at once); the caller is in
    the folder it runs in. What is tested is the server and the trials writing to it at once, not the command's
    process: a command of its own would add an import of torch + Ray and a Ray start."""
    from raydistill.commands import sweep as command

    argv = ["kd_glue", "--task", "sst2", "--data-dir", glue_dir]
    argv += ["--teacher", teacher, "--tracking-uri", uri, "--name", "pg", "--experiment", "pg-sweep"]
    for s in ("student.hidden=32", "student.intermediate=64", "student.heads=2", "student.layers=2"):
        argv += ["--set", s]
    argv += [
        "--set",
        "train.lr={loguniform: [1.0e-4, 1.0e-2]}",
        "--set",
        "search.confirm=false",
        "--set",
        "search.control=false",
    ]
    argv += ["--set", "search.asha=false", "--num-samples", "4", "--cpus-per-worker", "0.5"]
    argv += ["--epochs", str(EPOCHS), "--max-steps", "4", "--batch-size", "16", "--max-length", "32"]
    argv += ["--eval-limit", "16"]
    capsys.readouterr()
    command.main(argv)  # raises (fails the test) where the command would exit non-zero
    out, err = capsys.readouterr()
    assert "4 trial(s) at once" in err, err[-3000:]
    # the last stdout line is the JSON (MLflow's "View run … at" lines from trials once came after it)
    return json.loads(out.strip().splitlines()[-1])


def test_concurrent_sweep_on_a_postgres_backed_server_loses_nothing(
    postgres_server, ray_session, tiny_teacher, glue_dir, tmp_path, capsys, monkeypatch
):
    from mlflow.tracking import MlflowClient

    from raydistill.commands import best

    monkeypatch.chdir(tmp_path)  # ./raydistill-results (the spool, if any) lands here
    out = sweep(tiny_teacher("classification", 2), glue_dir, postgres_server, capsys)
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

    best.main(["--experiment", "pg-sweep", "--tracking-uri", postgres_server, "--export", str(tmp_path / "student")])
    b = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    by_trial = {r.data.tags["raydistill.trial_id"]: r.info.run_id for r in trials}
    assert b["run_id"] == by_trial[out["best"]["trial"]]  # the sweep's own winner, read back from the server
    assert os.path.isfile(tmp_path / "student" / "config.json")
