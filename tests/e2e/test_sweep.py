"""A tiny sweep end to end (slow): teacher preparation, Tune + Optuna trials, MLflow parent/children, best export."""

from __future__ import annotations

import json
import os

import pytest

pytestmark = pytest.mark.slow

TINY = [
    "--set",
    "student.hidden=32",
    "--set",
    "student.intermediate=64",
    "--set",
    "student.heads=2",
    "--set",
    "student.layers={choice: [2, 4]}",
    "--set",
    "train.lr=0.001",
    "--set",
    "search.confirm=false",
]  # confirmation has its own test: test_tiny_sweep_end_to_end


def last_json(capsys) -> dict:
    return json.loads(capsys.readouterr().out.strip().splitlines()[-1])


def test_tiny_sweep_end_to_end(ray_session, tiny_teacher, glue_dir, tmp_path, capsys, monkeypatch):
    import mlflow
    from mlflow.tracking import MlflowClient

    from raydistill.commands import best, sweep
    from raydistill.train.saved import evaluate_dir

    monkeypatch.chdir(tmp_path)  # ./raydistill-results lands here
    base_encoder = tiny_teacher("base")  # no task head: the sweep must fine-tune it first
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    sweep.main(
        [
            "pkd_glue",
            "--task",
            "sst2",
            "--data-dir",
            glue_dir,
            "--teacher",
            base_encoder,
            "--num-samples",
            "3",
            "--max-concurrent",
            "2",  # the third trial trains in the actor of the first that ends (in-process trials reuse actors)
            *TINY,
            "--set",
            "search.confirm={top: 1, seeds: 2}",  # two a side: the verdict needs a seeds' range
            "--epochs",
            "2",
            "--max-steps",
            "6",
            "--batch-size",
            "16",
            "--max-length",
            "32",
            "--teacher-epochs",
            "1",
            "--eval-limit",
            "32",
            "--tracking-uri",
            uri,
            "--name",
            "tiny",
            "--experiment",
            "tiny-sweep",
        ]
    )
    out = last_json(capsys)
    # chosen on the validation split carved from train, reported on dev; the top trial confirmed with two more seeds
    assert out["trials"] == 5 and out["errors"] == 0 and out["metric"] == "best_val_accuracy"
    assert out["report_metric"] == "best_eval_accuracy" and out["select_on"] == "val"
    assert out["experiment"] == "tiny-sweep"  # the line names what `best --experiment` takes
    (conf,) = out["confirmed"]
    # ranked by its fresh seeds alone (the trial's own score beside them), the best fresh run exported
    assert conf["seeds"] == 2 and out["best"]["trial"] == conf["exported_trial"] != conf["config_of"]
    assert conf["search_best_val_accuracy"] is not None
    assert set(out["timings"]) >= {"ray_start", "teacher", "teacher_reference", "trials", "confirm", "control"}
    assert "viewStateShareKey=raydistill-tiny" in out["mlflow_ui"]["url"]
    assert os.path.isfile(out["pareto_png"])

    c = MlflowClient(uri)
    exp = c.get_experiment_by_name("tiny-sweep")
    runs = c.search_runs([exp.experiment_id])
    parent = [r for r in runs if r.data.tags.get("raydistill.role") == "sweep"]
    teacher = [r for r in runs if r.data.tags.get("raydistill.role") == "teacher"]
    controls = [r for r in runs if r.data.tags.get("raydistill.control_of")]
    children = [r for r in runs if r.data.tags.get("raydistill.trial_id") and r not in controls]
    assert len(parent) == 1 and len(teacher) == 1 and len(children) == 5
    check_control(out, parent[0], controls, conf)
    confirms = [r for r in children if r.data.tags.get("raydistill.confirm_of")]
    searched = [r for r in children if r not in confirms]
    # in process, two slots: one actor trained two of the three trials (its imports paid once); every trial says its
    # fixed cost in wall and CPU seconds
    assert sorted(int(r.data.metrics["worker_trials"]) for r in searched) == [1, 1, 2]
    assert all({"fixed_cost_s", "fixed_cpu_s"} <= set(r.data.metrics) for r in children)
    assert len(confirms) == 2 and {r.data.tags["raydistill.confirm_of"] for r in confirms} == {conf["config_of"]}
    origin = [r for r in children if r.data.tags["raydistill.trial_id"] == conf["config_of"]][0]
    assert len({origin.data.params["seed"], *(r.data.params["seed"] for r in confirms)}) == 3  # fresh seeds
    # the in-sweep teacher trained on its own budget (all training rows, --teacher-epochs), not the trials' 6 steps
    tp = teacher[0].data.params
    assert (tp["max_steps"], tp["train_limit"], tp["epochs"], tp["lr"]) == ("0", "0", "1", "2e-05")
    pid = parent[0].info.run_id
    # the teacher, scored on the students' dev set, is every trial's yardstick
    t = out["teacher"]
    assert {"eval_accuracy", "val_accuracy", "majority_accuracy", "student_params", "latency_ms_b1"} <= set(t)
    assert parent[0].data.metrics["teacher_eval_accuracy"] == pytest.approx(t["eval_accuracy"])
    assert out["best"]["pct_of_teacher"] == pytest.approx(
        100 * out["best"]["best_eval_accuracy"] / t["eval_accuracy"], abs=0.051
    )
    assert all(r.data.tags["mlflow.parentRunId"] == pid for r in children + teacher)
    for r in children:
        assert r.info.status == "FINISHED"
        assert r.inputs.dataset_inputs and "pct_of_teacher" in r.data.metrics
        contexts = {t.value for d in r.inputs.dataset_inputs for t in d.tags if t.key == "mlflow.data.context"}
        assert contexts == {"training", "validation", "eval"}
        (model,) = c.search_logged_models([exp.experiment_id], filter_string=f"source_run_id = '{r.info.run_id}'")
        # by the model's own artifact location: models:/ would resolve through the process's global tracking URI
        card = open(mlflow.artifacts.download_artifacts(f"{model.artifact_location}/model_card.md")).read()
        assert f"with `{r.data.params['method']}` from the teacher" in card  # written from the run, not the Hub
        assert {"temperature", "alpha", "beta", "mapping", "student_layers", "init", "method"} <= set(r.data.params)
        assert {
            "eval_accuracy",
            "val_accuracy",
            "best_val_accuracy",
            "best_eval_accuracy",
            "student_params",
            "latency_ms_b1",
            "train_loss",
        } <= set(r.data.metrics)
        assert len(c.get_metric_history(r.info.run_id, "eval_accuracy")) == 2  # per epoch
        assert len(c.get_metric_history(r.info.run_id, "val_accuracy")) == 2
    # latencies timed again side by side once no trial trains: what the runs, the summary and best read
    with open(os.path.join(os.path.dirname(out["pareto_png"]), "summary.json")) as f:
        rows = {r["trial"]: r for r in json.load(f)}
    for r in children:
        row = rows[r.data.tags["raydistill.trial_id"]]
        assert r.data.metrics["latency_ms_b1"] == pytest.approx(row["latency_ms_b1"]) and row["latency_ms_b1_in_trial"]
    arts = {a.path for a in c.list_artifacts(pid, "summary")}
    assert {"summary/summary.txt", "summary/pareto.png", "summary/summary.json"} <= arts

    # the Optuna study is in RDB storage beside the MLflow store
    import optuna

    study = optuna.load_study(study_name="tiny-sweep/tiny", storage=f"sqlite:///{tmp_path / 'optuna.db'}")
    assert len(study.trials) == 3

    best.main(
        [
            "--experiment",
            "tiny-sweep",
            "--tracking-uri",
            uri,
            "--export",
            str(tmp_path / "best"),
            "--register",
            "tiny-student",
        ]
    )
    b = last_json(capsys)
    assert b["registered"]["alias"] == "champion"
    assert (
        b["run_id"]
        == [r.info.run_id for r in children if r.data.tags["raydistill.trial_id"] == out["best"]["trial"]][0]
    )
    assert b["metric"] == "best_val_accuracy" and b["report_metric"] == "best_eval_accuracy"
    # the registered version is the best trial's logged model (the UI's Models column), loadable by its alias
    mv = c.get_model_version_by_alias("tiny-student", "champion")
    assert mv.run_id == b["run_id"] and mv.source.startswith("models:/m-")
    logged = c.search_logged_models([exp.experiment_id], filter_string=f"source_run_id = '{b['run_id']}'")
    assert [m.model_id for m in logged] == [mv.source[len("models:/") :]]
    import mlflow

    mlflow.set_tracking_uri(uri)
    assert mlflow.transformers.load_model("models:/tiny-student@champion", return_type="pipeline")("a good movie")
    from transformers import pipeline

    clf = pipeline("text-classification", model=str(tmp_path / "best"), tokenizer=str(tmp_path / "best"))
    assert clf("a good movie")[0]["label"]
    again = evaluate_dir(str(tmp_path / "best"), "sst2", glue_dir, max_length=32, eval_limit=32)
    assert again["eval_accuracy"] == pytest.approx(b["report"], abs=1e-9)  # recomputed from the directory alone


def check_control(out, parent, controls, conf):
    """On by default: the winner's student trained on gold labels alone with as many fresh seeds as the confirmation
    (two here), re-scored beside the winner on the same dev rows; the verdict in the JSON line, the summary table and
    the parent run."""
    c = out["control"]
    assert c["verdict"] in ("beats", "ties", "loses to") and c["metric"] == "accuracy" and c["dev_rows"] == 32
    assert c["winner_trial"] == out["best"]["trial"] and c["seeds"] == 2 and len(c["control_dev"]) == 2
    assert {r.data.tags["raydistill.control_of"] for r in controls} == {out["best"]["trial"]} and len(controls) == 2
    for run in controls:
        assert run.data.params["method"] == "finetune" and run.info.status == "FINISHED"
        assert run.data.params["init"] == "first_k"  # the winner's init, not random
    assert sorted(r.data.params["seed"] for r in controls) == ["43", "44"]  # the confirmation's fresh seeds
    # re-scored on the runs' own dev rows: what each run logged, and the winner's too
    logged = {r.data.tags["raydistill.trial_id"]: r.data.metrics for r in controls}
    for trial, dev in zip(c["control_trials"], c["control_dev"], strict=True):
        assert dev == pytest.approx(logged[trial]["best_eval_accuracy"], abs=1e-6)
    assert c["winner_dev"] == pytest.approx(out["best"]["best_eval_accuracy"], abs=1e-6)
    # the control's seed that stands for it is chosen as the winner's was: its best on val
    rep = min(c["control_trials"], key=lambda t: (-logged[t]["best_val_accuracy"], t))
    assert c["control_rep_trial"] == rep and c["diff"] == pytest.approx(c["winner_dev"] - c["control_rep_dev"])
    assert c["control_range"] == pytest.approx(max(c["control_dev"]) - min(c["control_dev"]))
    assert c["winner_seeds_range"] == pytest.approx(conf["range_best_eval_accuracy"])
    assert c["noise_range"] == pytest.approx(max(c["control_range"], c["winner_seeds_range"]))
    assert c["ci"][0] <= c["ci"][1]
    assert out["per_trial_s"] == pytest.approx(out["wall_s"] / (out["trials"] + 2), abs=0.051)  # its runs counted
    with open(os.path.join(os.path.dirname(out["pareto_png"]), "summary.txt")) as f:
        assert (
            f"labels-only control (2 seed(s) of the winner's shape and init on gold labels alone): the distilled "
            f"winner {c['verdict']} it" in f.read()
        )
    assert parent.data.tags["raydistill.control_verdict"] == c["verdict"]
    assert parent.data.metrics["control_diff"] == pytest.approx(c["diff"])
    assert parent.data.metrics["control_diff_ci_lo"] == pytest.approx(c["ci"][0])


def test_readme_sweep_runs_on_a_minilm_shaped_teacher_without_set(
    ray_session, tiny_teacher, glue_dir, tmp_path, capsys, monkeypatch
):
    """`raydistill.sweep pkd_glue --teacher <384-wide teacher>` failed with 'student.hidden: 768 is wider than the
    teacher's 384'; now it runs, and MLflow shows the resolved sizes."""
    from mlflow.tracking import MlflowClient

    from raydistill.commands import sweep

    monkeypatch.chdir(tmp_path)
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    sweep.main(
        [
            "pkd_glue",
            "--task",
            "sst2",
            "--data-dir",
            glue_dir,
            "--teacher",
            tiny_teacher("classification", layers=6, hidden=384, heads=12, intermediate=1536),
            "--num-samples",
            "1",
            "--epochs",
            "2",
            "--max-steps",
            "2",
            "--batch-size",
            "8",
            "--max-length",
            "24",
            "--train-limit",
            "16",
            "--eval-limit",
            "16",
            "--tracking-uri",
            uri,
            "--name",
            "any-teacher",
            "--set",
            "search.confirm=false",
            "--set",
            "search.control=false",
        ]
    )
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert out["trials"] == 1 and out["errors"] == 0
    c = MlflowClient(uri)
    runs = c.search_runs(
        [c.get_experiment_by_name("pkd_glue-sst2").experiment_id],  # the default experiment: SPACE-TASK
        filter_string="tags.`raydistill.trial_id` != ''",
    )
    p = runs[0].data.params
    assert (p["student_layers"], p["student_hidden"], p["student_intermediate"], p["student_heads"]) == (
        "3",
        "384",
        "1536",
        "12",
    )
    assert (float(p["temperature"]), float(p["alpha"]), float(p["beta"]), p["mapping"], p["init"]) == (
        20,
        0.7,
        100,
        "skip",
        "first_k",
    )  # the first trial is PKD's reported best


def test_latency_constrained_search_end_to_end(ray_session, tiny_teacher, glue_dir, tmp_path, capsys, monkeypatch):
    """--multi-objective latency: Optuna searches dev score against the student's measured batch-1 latency, the summary
    carries the Pareto front, and best --max-latency-ms picks the best trial within the bound and exports it."""
    from raydistill.commands import best, sweep

    monkeypatch.chdir(tmp_path)
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    sweep.main(
        [
            "pkd_glue",
            "--task",
            "sst2",
            "--data-dir",
            glue_dir,
            "--teacher",
            tiny_teacher("classification", 2),
            "--num-samples",
            "3",
            *TINY,
            "--epochs",
            "1",
            "--max-steps",
            "4",
            "--batch-size",
            "16",
            "--max-length",
            "32",
            "--eval-limit",
            "32",
            "--tracking-uri",
            uri,
            "--name",
            "lat",
            "--experiment",
            "lat",
            "--multi-objective",
            "latency",
            "--set",
            "search.control=false",
        ]
    )
    out = last_json(capsys)
    assert out["trials"] == 3 and out["errors"] == 0 and out["pareto_front"]
    front = out["pareto_front"]
    assert [r["latency_ms_b1"] for r in front] == sorted(r["latency_ms_b1"] for r in front)
    import optuna

    study = optuna.load_study(study_name="lat/lat", storage=f"sqlite:///{tmp_path / 'optuna.db'}")
    assert study.directions == [optuna.study.StudyDirection.MAXIMIZE, optuna.study.StudyDirection.MINIMIZE]
    bound = front[0]["latency_ms_b1"]  # the fastest trial on the front
    best.main(
        [
            "--experiment",
            "lat",
            "--tracking-uri",
            uri,
            "--max-latency-ms",
            str(bound),
            "--export",
            str(tmp_path / "fast"),
        ]
    )
    b = last_json(capsys)
    assert b["latency_ms_b1"] <= bound and b["value"] == front[0]["best_val_accuracy"]  # chosen on val
    assert b["report"] == front[0]["best_eval_accuracy"]  # reported on dev
    assert os.path.isfile(tmp_path / "fast" / "config.json")
