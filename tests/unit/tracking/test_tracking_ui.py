"""What the MLflow UI shows: a model-training experiment (not the GenAI overview) and each run's dataset inputs."""

from __future__ import annotations

from raydistill.config.schema import RunConfig, TrainConfig
from raydistill.data.splits import data_fingerprint, datasets
from raydistill.tracking.track import Tracker


def test_experiments_are_model_training_experiments(tmp_path):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    c = Tracker(uri).client
    eid = Tracker(uri, "fresh").experiment_id
    assert c.get_experiment(eid).tags["mlflow.experimentKind"] == "custom_model_development"
    old = c.create_experiment("made-before", artifact_location=f"file://{tmp_path}/a")  # no kind tag yet
    assert Tracker(uri, "made-before").experiment_id == old
    assert c.get_experiment(old).tags["mlflow.experimentKind"] == "custom_model_development"


def test_a_run_logs_its_train_validation_and_dev_data_as_dataset_inputs(tmp_path, glue_dir):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    tracker = Tracker(uri, "e")
    cfg = RunConfig(task="sst2", teacher="t", data_dir=glue_dir, train=TrainConfig(train_limit=40, eval_limit=16))
    ds = datasets(cfg)
    assert [(d["name"], d["context"], d["rows"]) for d in ds] == [
        ("sst2-train", "training", 40),
        ("sst2-val", "validation", 16),  # --eval-limit bounds both scored splits (20 validation rows without it)
        ("sst2-dev", "eval", 16),
    ]
    assert len({d["digest"] for d in ds}) == 3 and len(data_fingerprint(cfg)) == 16
    run_id = tracker.start_run("r", {})
    tracker.log_datasets(run_id, ds)
    got = tracker.client.get_run(run_id).inputs.dataset_inputs
    assert sorted((i.dataset.name, i.dataset.digest, i.tags[0].value) for i in got) == sorted(
        (d["name"], d["digest"], d["context"]) for d in ds
    )
    assert all(i.dataset.source_type == "local" and glue_dir in i.dataset.source for i in got)


def test_the_printed_link_opens_the_sweeps_trials_compared_by_the_objective(tmp_path):
    """A shared view state (what the UI reads for ``viewStateShareKey``): only this sweep's trials, best first, the
    objective, yardsticks and searched params as columns. Checked in a real browser for docs/mlflow-runs-view.png."""
    import json

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    tracker = Tracker(uri, "pkd_glue")
    eid = tracker.experiment_id
    ui = tracker.ui_link(
        "pkd_glue-sst2-1 x",
        "best_eval_accuracy",
        "max",
        params=["temperature"],
        metrics=("pct_of_teacher",),
    )
    assert ui["command"] == f"mlflow ui --backend-store-uri {uri} --host 127.0.0.1 --port 5000"
    assert ui["url"] == f"http://127.0.0.1:5000/#/experiments/{eid}/runs?viewStateShareKey=raydistill-pkd_glue-sst2-1-x"
    view = json.loads(tracker.client.get_experiment(eid).tags["mlflow.sharedViewState.raydistill-pkd_glue-sst2-1-x"])
    assert view["searchFilter"] == "tags.`raydistill.sweep` = 'pkd_glue-sst2-1 x'"
    assert view["orderByKey"] == "metrics.`best_eval_accuracy`" and view["orderByAsc"] is False
    assert (
        view["selectedColumns"]
        == [
            "metrics.`best_eval_accuracy`",
            "metrics.`pct_of_teacher`",
            "attributes.`Models`",
            "attributes.`Dataset`",
            "params.`temperature`",
        ]
        == view["columnOrder"]
    )
