"""Distillation as Ray Train runs (slow): the CLI end to end, MLflow contents, and DDP equivalence."""
from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.slow

TINY_STUDENT = ["--student-layers", "2", "--student-hidden", "32", "--student-intermediate", "64",
                "--student-heads", "2", "--init", "random"]


def distill(argv, capsys):
    from raydistill.distill.__main__ import main

    main(argv)
    last = capsys.readouterr().out.strip().splitlines()[-1]
    return json.loads(last)


def test_distill_cli_logs_mlflow_run_and_saves_student(ray_session, tiny_teacher, glue_dir, mlflow_uri, tmp_path, capsys):
    from mlflow.tracking import MlflowClient
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    teacher = tiny_teacher("classification", 2)
    out = distill(["--method", "pkd", "--task", "sst2", "--teacher", teacher, "--data-dir", glue_dir, *TINY_STUDENT,
                   "--mapping", "skip", "--alpha", "0.5", "--beta", "100", "--temperature", "5", "--epochs", "2",
                   "--max-steps", "6", "--batch-size", "16", "--max-length", "32", "--eval-limit", "24",
                   "--output", str(tmp_path / "student"), "--tracking-uri", mlflow_uri, "--experiment", "t",
                   "--storage-path", str(tmp_path / "ray")], capsys)
    assert 0 <= out["eval_accuracy"] <= 1 and out["epoch"] == 2
    model = AutoModelForSequenceClassification.from_pretrained(tmp_path / "student")
    AutoTokenizer.from_pretrained(tmp_path / "student")
    assert model.config.num_hidden_layers == 2
    c = MlflowClient(mlflow_uri)
    run = c.get_run(out["run_id"])
    p = run.data.params
    assert (p["method"], p["temperature"], p["alpha"], p["beta"], p["mapping"]) == ("pkd", "5.0", "0.5", "100.0", "skip")
    assert p["world_size"] == "1" and p["student_layers"] == "2" and "loss_convention" in p
    hist = c.get_metric_history(run.info.run_id, "eval_accuracy")
    assert sorted(m.step for m in hist) == [1, 2]  # one point per epoch, none logged twice
    assert {"train_patient", "train_soft", "train_hard", "student_params", "latency_ms_b1"} <= set(run.data.metrics)
    assert run.info.status == "FINISHED"
    assert any(a.path == "student" for a in c.list_artifacts(run.info.run_id))


def test_two_workers_match_one_worker(ray_session, tiny_teacher, glue_dir, mlflow_uri, tmp_path, capsys):
    """2 DDP workers × 8 reproduce 1 worker × 16: same global batch, same loss curve within float tolerance."""
    from mlflow.tracking import MlflowClient

    teacher = tiny_teacher("classification", 2, dropout=0.0)
    curves = []
    for workers in (1, 2):
        out = distill(["--method", "kd", "--task", "sst2", "--teacher", teacher, "--data-dir", glue_dir, *TINY_STUDENT,
                       "--alpha", "0.5", "--epochs", "3", "--max-steps", "9", "--batch-size", "16", "--max-length", "32",
                       "--eval-limit", "16", "--num-workers", str(workers), "--output", str(tmp_path / f"s{workers}"),
                       "--tracking-uri", mlflow_uri, "--experiment", "ddp", "--storage-path", str(tmp_path / "ray")],
                      capsys)
        hist = MlflowClient(mlflow_uri).get_metric_history(out["run_id"], "train_loss")
        curves.append([m.value for m in sorted(hist, key=lambda m: m.step)])
        assert MlflowClient(mlflow_uri).get_run(out["run_id"]).data.params["world_size"] == str(workers)
    assert len(curves[0]) == 3
    assert curves[1] == pytest.approx(curves[0], rel=1e-4, abs=1e-5)


def test_bad_input_exits_2_before_ray(tmp_path, capsys, tiny_teacher):
    from raydistill.distill.__main__ import main

    with pytest.raises(SystemExit) as e:
        main(["--method", "pkd", "--task", "sst2", "--teacher", str(tmp_path / "missing")])
    assert e.value.code == 2
    assert "teacher" in capsys.readouterr().err
