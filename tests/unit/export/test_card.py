"""The student's model card: written from the run and stored with its MLflow logged model, never fetched from the
Hub."""

import filecmp
import logging
import os

import mlflow
import pytest
import transformers
import yaml
from mlflow.tracking import MlflowClient
from transformers import AutoConfig

from raydistill.export.card import student_card
from raydistill.tracking.track import PIPELINES, Tracker


def test_card_describes_the_student(tiny_teacher):
    d = tiny_teacher()
    text = student_card(
        d,
        task="mrpc",
        teacher="/models/teacher",
        method="pkd",
        pipeline_tag="text-classification",
        metrics={"best_val_accuracy": 0.75, "best_eval_accuracy": 0.7108, "best_epoch": 3, "eval_accuracy": 0.70},
    )
    front, body = text.split("---\n")[1:3]
    assert yaml.safe_load(front) == {
        "license": "unknown",
        "library_name": "transformers",
        "pipeline_tag": "text-classification",
        "tags": ["raydistill", "knowledge-distillation", "mrpc"],
    }
    assert "`pkd` from the teacher `/models/teacher`: 4 layers, hidden 32, 2 heads, FFN 64" in body
    assert "| best_eval_accuracy | 0.7108 |" in body and "| best_epoch | 3 |" in body
    assert "| eval_accuracy |" not in body  # the last epoch's score is not the student's


def test_logged_student_carries_its_card(tiny_teacher, mlflow_uri, caplog):
    d = tiny_teacher()
    card = student_card(
        d,
        task="sst2",
        teacher="t",
        method="kd",
        pipeline_tag="text-classification",
        metrics={"best_eval_accuracy": 0.5},
    )
    tracker = Tracker(mlflow_uri, "cards")
    run_id = tracker.start_run("r", {})
    with caplog.at_level(logging.WARNING):
        model_id = tracker.log_student_model(run_id, d, "classification", card)
    tracker.end_run(run_id)
    assert model_id
    assert not [r for r in caplog.records if "model card" in r.getMessage() or "license" in r.getMessage()]
    where = MlflowClient(mlflow_uri).get_logged_model(model_id).artifact_location
    local = mlflow.artifacts.download_artifacts(where)
    assert open(os.path.join(local, "model_card.md")).read() == card.split("---\n", 2)[2]
    assert yaml.safe_load(open(os.path.join(local, "model_card_data.yaml")))["license"] == "unknown"


def test_the_student_is_logged_from_the_cpu_where_a_gpu_is_visible(tiny_teacher, mlflow_uri, monkeypatch):
    """A GPU trial trained in its Tune trial process sees its GPU when it logs its student: nothing is put on cuda:0
    (the GPU other trials share; a pipeline would be), here a CPU build told CUDA is there — which a move to cuda:0
    would fail on."""
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    tracker = Tracker(mlflow_uri, "cuda-visible")
    run_id = tracker.start_run("r", {})
    model_id = tracker.log_student_model(run_id, tiny_teacher(), "classification", None)
    tracker.end_run(run_id)
    assert model_id and "logged_model_error" not in MlflowClient(mlflow_uri).get_run(run_id).data.tags


@pytest.mark.parametrize(
    "kind,args,inputs",
    [
        ("classification", {"num_labels": 2, "label_names": ["negative", "positive"]}, ["a good film"]),
        ("token", {"num_labels": 3}, ["a good film"]),
        ("qa", {}, {"question": ["what film"], "context": ["a good film"]}),
    ],
)
def test_the_student_is_logged_from_its_folder_and_loads_as_a_pipeline(tiny_teacher, mlflow_uri, kind, args, inputs):
    """The logged model is the exported folder's files, copied (no model loaded and saved again), and loads back as
    the task's pipeline and as a pyfunc that speaks the student's label names (where transformers has the task's
    pipeline)."""
    d = tiny_teacher(kind, **args)
    tracker = Tracker(mlflow_uri, f"folder-{kind}")
    run_id = tracker.start_run("r", {})
    model_id = tracker.log_student_model(run_id, d, kind, None)
    tracker.end_run(run_id)
    tags = MlflowClient(mlflow_uri).get_run(run_id).data.tags
    if kind == "qa" and not transformers.pipelines.SUPPORTED_TASKS.get("question-answering"):
        # transformers 5 removed the question-answering pipeline MLflow's flavour needs: the run says so, the student
        # stays its artifacts
        assert model_id is None and "question-answering" in tags["logged_model_error"]
        return
    assert model_id and "logged_model_error" not in tags
    local = mlflow.artifacts.download_artifacts(MlflowClient(mlflow_uri).get_logged_model(model_id).artifact_location)
    weights = [f for f in os.listdir(d) if f.endswith(".safetensors")]
    assert weights and all(
        filecmp.cmp(os.path.join(d, f), os.path.join(local, "model", f), shallow=False) for f in weights
    )
    pipe = mlflow.transformers.load_model(f"models:/{model_id}")
    assert pipe.task == PIPELINES[kind] and pipe.model.config.id2label == AutoConfig.from_pretrained(d).id2label
    predicted = mlflow.pyfunc.load_model(f"models:/{model_id}").predict(inputs)
    if kind == "classification":
        assert set(predicted["label"]) <= {"negative", "positive"}
