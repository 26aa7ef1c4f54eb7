"""The distill command end to end (slow): its MLflow contents and student (one worker, in the command's process), and
DDP equivalence (2 Ray Train workers train as that one)."""

from __future__ import annotations

import json
import os

import pytest

pytestmark = pytest.mark.slow

TINY_STUDENT = [
    "--student-layers",
    "2",
    "--student-hidden",
    "32",
    "--student-intermediate",
    "64",
    "--student-heads",
    "2",
    "--init",
    "random",
]


def distill(argv, capsys):
    from raydistill.distill.__main__ import main

    main(argv)
    last = capsys.readouterr().out.strip().splitlines()[-1]
    return json.loads(last)


def test_distill_cli_logs_mlflow_run_and_saves_student(tiny_teacher, glue_dir, mlflow_uri, tmp_path, capsys):
    from mlflow.tracking import MlflowClient
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    teacher = tiny_teacher("classification", 2)
    (tmp_path / "student").mkdir()
    (tmp_path / "student" / "notes.txt").write_text("mine")  # the folder rule: --overwrite keeps what it did not write
    out = distill(
        [
            "--overwrite",
            "--method",
            "pkd",
            "--task",
            "sst2",
            "--teacher",
            teacher,
            "--data-dir",
            glue_dir,
            *TINY_STUDENT,
            "--mapping",
            "skip",
            "--alpha",
            "0.5",
            "--beta",
            "100",
            "--temperature",
            "5",
            "--epochs",
            "2",
            "--max-steps",
            "6",
            "--batch-size",
            "16",
            "--max-length",
            "32",
            "--eval-limit",
            "24",
            "--output",
            str(tmp_path / "student"),
            "--tracking-uri",
            mlflow_uri,
            "--experiment",
            "t",
            "--storage-path",
            str(tmp_path / "ray"),
        ],
        capsys,
    )
    assert 0 <= out["eval_accuracy"] <= 1 and out["epoch"] == 2
    assert out["best_epoch"] in (1, 2) and out["eval_accuracy"] == out["best_eval_accuracy"]  # the best epoch's
    model = AutoModelForSequenceClassification.from_pretrained(tmp_path / "student")
    AutoTokenizer.from_pretrained(tmp_path / "student")
    assert model.config.num_hidden_layers == 2
    assert (tmp_path / "student" / "notes.txt").read_text() == "mine"
    c = MlflowClient(mlflow_uri)
    run = c.get_run(out["run_id"])
    p = run.data.params
    assert (p["method"], p["temperature"], p["alpha"], p["beta"], p["mapping"]) == (
        "pkd",
        "5.0",
        "0.5",
        "100.0",
        "skip",
    )
    assert p["world_size"] == "1" and p["student_layers"] == "2" and "loss_convention" in p
    hist = c.get_metric_history(run.info.run_id, "eval_accuracy")
    assert sorted(m.step for m in hist) == [1, 2]  # one point per epoch, none logged twice
    assert {
        "train_patient",
        "train_soft",
        "train_hard",
        "student_params",
        "latency_ms_b1",
        "best_epoch",
        "best_eval_accuracy",
    } <= set(run.data.metrics)
    assert run.data.metrics["best_eval_accuracy"] == out["eval_accuracy"]
    assert run.info.status == "FINISHED"
    # the student logged once: as the run's logged model (the UI's Models column), no second copy as artifacts
    assert [m.source_run_id for m in c.search_logged_models([run.info.experiment_id])] == [run.info.run_id]
    assert not any(a.path == "student" for a in c.list_artifacts(run.info.run_id))


KO_LABELS = ("O", "B-PS", "I-PS", "B-LC", "I-LC", "B-OG", "I-OG", "B-DT", "I-DT", "B-TI", "I-TI", "B-QT", "I-QT")


@pytest.mark.parametrize(
    "method,task,args",
    [
        ("kd", "sst2", ["--alpha", "0.5"]),
        # padded batches of different lengths per rank: means over every rank's real tokens / query×key pairs
        ("kd", "klue_ner", ["--alpha", "0.5", "--temperature", "2"]),
        (
            "tinybert",
            "sst2",
            [
                "--stage",
                "intermediate",
                "--mapping",
                "uniform",
                "--student-hidden",
                "16",
                "--student-intermediate",
                "32",
            ],
        ),
    ],
)
def test_two_workers_match_one_worker(
    method, task, args, ray_session, tiny_teacher, glue_dir, korean_dir, mlflow_uri, tmp_path, capsys
):
    """2 DDP workers × 8 reproduce 1 worker × 16: same global batch, same loss curve and student within float
    tolerance, also where each rank pads its batch to another length."""
    import torch
    from mlflow.tracking import MlflowClient
    from safetensors.torch import load_file

    token = task == "klue_ner"
    teacher = (
        tiny_teacher("token", len(KO_LABELS), label_names=KO_LABELS, dropout=0.0)
        if token
        else tiny_teacher("classification", 2, dropout=0.0)
    )
    curves = []
    for workers in (1, 2):
        out = distill(
            [
                "--method",
                method,
                "--task",
                task,
                "--teacher",
                teacher,
                "--data-dir",
                korean_dir if token else glue_dir,
                *TINY_STUDENT,
                *args,
                "--epochs",
                "3",
                "--max-steps",
                "9",
                "--batch-size",
                "16",
                "--max-length",
                "32",
                "--eval-limit",
                "16",
                "--num-workers",
                str(workers),
                "--output",
                str(tmp_path / f"s{workers}"),
                "--tracking-uri",
                mlflow_uri,
                "--experiment",
                "ddp",
                "--storage-path",
                str(tmp_path / "ray"),
            ],
            capsys,
        )
        hist = MlflowClient(mlflow_uri).get_metric_history(out["run_id"], "train_loss")
        curves.append([m.value for m in sorted(hist, key=lambda m: m.step)])
        assert MlflowClient(mlflow_uri).get_run(out["run_id"]).data.params["world_size"] == str(workers)
    assert len(curves[0]) == 3
    assert curves[1] == pytest.approx(curves[0], rel=1e-5, abs=1e-6)  # averaged per-rank token means: ~1e-4 off
    w1, w2 = (load_file(str(tmp_path / f"s{w}" / "model.safetensors")) for w in (1, 2))
    assert all(torch.allclose(w1[k], w2[k], rtol=1e-5, atol=1e-6) for k in w1)  # the same (best) student


def test_export_and_final_metrics_take_the_best_epoch(tmp_path, monkeypatch):
    """The exported student is the checkpoint's best one, and the run's eval_* are the best epoch's."""
    import contextlib
    import shutil
    import tempfile

    from raydistill.export.student import export_student
    from raydistill.orchestrate.run import final_metrics

    for which in ("student", "best_student"):
        (tmp_path / "c" / "checkpoint" / which).mkdir(parents=True)
        (tmp_path / "c" / "checkpoint" / which / "which.txt").write_text(which)

    class Checkpoint:  # the part of ray.train.Checkpoint that export_student uses: a remote one, downloaded
        @contextlib.contextmanager
        def as_directory(self):
            with tempfile.TemporaryDirectory() as path:
                shutil.copytree(tmp_path / "c", path, dirs_exist_ok=True)
                yield path

    out = export_student(Checkpoint(), str(tmp_path / "out"))
    assert open(f"{out}/which.txt").read() == "best_student"
    # a checkpoint on the local disk is read where it is: only the best student is copied, once, to the output
    from ray.train import Checkpoint as RayCheckpoint

    monkeypatch.setattr(RayCheckpoint, "to_directory", lambda *a, **k: pytest.fail("the whole checkpoint copied"))
    out = export_student(RayCheckpoint.from_directory(str(tmp_path / "c")), str(tmp_path / "out2"))
    from raydistill.common.outputs import MARKER

    assert sorted(os.listdir(out)) == sorted([MARKER, "which.txt"])
    assert open(f"{out}/which.txt").read() == "best_student"
    last = {
        "epoch": 3,
        "stage": "pred",
        "train_loss": 0.1,
        "eval_accuracy": 0.6,
        "eval_f1": 0.5,
        "best_epoch": 2,
        "best_eval_accuracy": 0.9,
        "best_eval_f1": 0.8,
    }
    expected = {**last, "eval_accuracy": 0.9, "eval_f1": 0.8}
    del expected["stage"]  # numbers only
    assert final_metrics(last) == expected


def test_bad_input_exits_2_before_ray(tmp_path, capsys, tiny_teacher):
    from raydistill.distill.__main__ import main

    with pytest.raises(SystemExit) as e:
        main(["--method", "pkd", "--task", "sst2", "--teacher", str(tmp_path / "missing")])
    assert e.value.code == 2
    assert "teacher" in capsys.readouterr().err
