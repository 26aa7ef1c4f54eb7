"""Every class visible (issue 48 item 2): macro-F1 beside the task's metric, each class's dev recall of the teacher and
the best student in the summary, the JSON line, MLflow and ``best``, a class the student never gets right flagged, and
``--select-metric macro_f1`` choosing epochs and trials on it (the task's metric choosing by default)."""

from __future__ import annotations

import csv
import json
import random
from types import SimpleNamespace

import pytest

from raydistill.common.errors import UserError
from raydistill.config.schema import RunConfig
from raydistill.results import classes as C

NAMES = ("DESC", "ENTY", "HUM", "ABBR")


def test_the_table_and_the_flag_from_logged_metrics():
    student = {"best_eval_recall_DESC": 0.9, "best_eval_recall_ENTY": 0.5, "best_eval_recall_HUM": 1.0}
    student["best_eval_recall_ABBR"] = 0.0
    teacher = {"eval_recall_ABBR": 0.83, **{f"support_{n}": s for n, s in zip(NAMES, (20, 10, 8, 12), strict=True)}}
    rows = C.class_rows(NAMES, student, teacher)
    assert [r["class"] for r in rows] == list(NAMES) and rows[3]["support"] == 12
    assert rows[3] == {"class": "ABBR", "support": 12, "teacher_recall": 0.83, "student_recall": 0.0}
    assert C.warnings(rows) == [
        "warning: the student never predicts ABBR right: recall 0 on its 12 dev rows (the teacher recalls 0.83 of them)"
    ]
    text = C.text(rows, "the best trial, t1")
    assert "ABBR" in text.splitlines()[-2] and text.splitlines()[-1].startswith("warning: ")
    assert [r["never_right"] for r in C.as_json(rows)] == [False, False, False, True]
    # a class without dev rows has no recall and no flag; a run that logged no class has no table
    assert C.warnings(C.class_rows(NAMES, {"best_eval_recall_DESC": 1.0}, None)) == []
    assert C.class_rows(NAMES, {"best_eval_accuracy": 0.9}, teacher) == []


def test_select_metric_is_checked_and_chooses(tiny_teacher):
    from raydistill.orchestrate.plan import objective_of
    from raydistill.tasks import get_task

    base = {"task": "sst2", "teacher": "t"}
    cfg = RunConfig.from_dict({**base, "train": {"select_metric": "macro_f1"}})
    assert objective_of(SimpleNamespace(metric=None), get_task("sst2"), cfg) == "best_val_macro_f1"
    # the default is the task's main metric, unchanged; a space's own metric still wins
    plain = RunConfig.from_dict(base)
    assert objective_of(SimpleNamespace(metric=None), get_task("sst2"), plain) == "best_val_accuracy"
    assert objective_of(SimpleNamespace(metric="best_val_accuracy"), get_task("sst2"), cfg) == "best_val_accuracy"
    with pytest.raises(UserError) as e:
        RunConfig.from_dict({**base, "train": {"select_metric": "pearson"}})
    assert e.value.field == "train.select_metric" and "accuracy, macro_f1" in e.value.message
    with pytest.raises(UserError, match="train.select_metric"):  # no classes, no macro-F1
        RunConfig.from_dict({"task": "stsb", "teacher": "t", "train": {"select_metric": "macro_f1"}})


def _rare_class_csv(tmp_path, name: str, counts: dict[str, int], seed: int) -> str:
    """Question-like rows, each class with words of its own; ``counts`` rows per class."""
    words = {"DESC": "what describe meaning", "ENTY": "which thing animal", "HUM": "who person name"}
    words["ABBR"] = "abbreviation stand acronym"
    fill = "the a is of does for".split()
    rng = random.Random(seed)
    rows = []
    for label, n in counts.items():
        for _ in range(n):
            text = [rng.choice(fill) for _ in range(rng.randint(2, 5))] + [rng.choice(words[label].split())]
            rng.shuffle(text)
            rows.append((" ".join(text), label))
    rng.shuffle(rows)
    path = tmp_path / name
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(("question", "category"))
        w.writerows(rows)
    return str(path)


def _deaf_teacher(tiny_teacher, tmp_path) -> str:
    """A 4-class tiny teacher whose head never answers ABBR (bias -20): its student, whose head is copied from it,
    never learns ABBR in a few steps either, so the flag shows deterministically."""
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    texts = ["what describe meaning which thing animal who person name abbreviation stand acronym the a is of does for"]
    src = tiny_teacher(num_labels=4, label_names=list(NAMES), texts=texts)
    model = AutoModelForSequenceClassification.from_pretrained(src)
    with torch.no_grad():
        model.classifier.bias[model.config.label2id["ABBR"]] = -20.0
    out = str(tmp_path / "deaf-teacher")
    model.save_pretrained(out)
    AutoTokenizer.from_pretrained(src).save_pretrained(out)
    return out


@pytest.mark.slow
def test_a_rare_class_shows_in_the_sweep_and_in_best(ray_session, tiny_teacher, tmp_path, capsys, monkeypatch):
    """A CSV with a rare class, swept with ``--select-metric macro_f1``: the per-class table and the flag in the
    summary, the JSON line, MLflow and ``best``; epochs and trials chosen on val macro-F1."""
    from mlflow.tracking import MlflowClient

    from raydistill import best, sweep

    monkeypatch.chdir(tmp_path)
    train = _rare_class_csv(tmp_path, "questions.csv", {"DESC": 60, "ENTY": 60, "HUM": 50, "ABBR": 12}, 0)
    dev = _rare_class_csv(tmp_path, "questions-dev.csv", {"DESC": 12, "ENTY": 12, "HUM": 10, "ABBR": 6}, 1)
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    tiny = ["--set", "student.hidden=32", "--set", "student.intermediate=64", "--set", "student.heads=2"]
    tiny += ["--set", "student.layers=2", "--set", "search.confirm=false", "--set", "search.control=false"]
    tiny += ["--set", "train.lr=0.001"]
    sweep.main(
        ["pkd_glue", "--train-file", train, "--eval-file", dev, "--teacher", _deaf_teacher(tiny_teacher, tmp_path)]
        + ["--num-samples", "1", *tiny, "--epochs", "2", "--max-steps", "6", "--batch-size", "16"]
        + ["--max-length", "16", "--select-metric", "macro_f1", "--tracking-uri", uri, "--experiment", "rare"]
        + ["--name", "rare"]
    )
    cap = capsys.readouterr()
    out = json.loads(cap.out.strip().splitlines()[-1])
    assert out["metric"] == "best_val_macro_f1" and out["report_metric"] == "best_eval_macro_f1"
    assert set(out["macro_f1"]) == {"student", "teacher"} and out["macro_f1"]["teacher"] is not None
    by_class = {r["class"]: r for r in out["classes"]}
    assert set(by_class) == set(NAMES) and by_class["ABBR"]["support"] == 6 and by_class["HUM"]["support"] == 10
    assert by_class["ABBR"]["student_recall"] == 0.0 and by_class["ABBR"]["never_right"]
    flag = "warning: the student never predicts ABBR right: recall 0 on its 6 dev rows (the teacher recalls 0.00"
    assert any(w.startswith(flag) for w in out["class_warnings"])
    assert "per class on dev (the best trial" in cap.err and flag in cap.err
    assert "best_eval_macro_f1" in cap.err  # the table's column beside the metric that chose

    c = MlflowClient(uri)
    runs = c.search_runs([c.get_experiment_by_name("rare").experiment_id])
    (parent,) = [r for r in runs if r.data.tags.get("raydistill.role") == "sweep"]
    (trial,) = [r for r in runs if r.data.tags.get("raydistill.trial_id")]
    assert parent.data.metrics["teacher_support_ABBR"] == 6 and "teacher_eval_recall_DESC" in parent.data.metrics
    m = trial.data.metrics
    assert m["best_eval_recall_ABBR"] == 0.0 and trial.data.params["select_metric"] == "macro_f1"
    # the epoch that chose is the best by val macro-F1
    val = [h.value for h in sorted(c.get_metric_history(trial.info.run_id, "val_macro_f1"), key=lambda h: h.step)]
    assert len(val) == 2 and m["best_val_macro_f1"] == max(val) and m["best_epoch"] == 1 + val.index(max(val))

    got = best.main(["--experiment", "rare", "--tracking-uri", uri])
    err = capsys.readouterr().err
    assert got["metric"] == "best_val_macro_f1" and got["macro_f1"]["student"] == m["best_eval_macro_f1"]
    assert {r["class"]: r["support"] for r in got["classes"]} == {"DESC": 12, "ENTY": 12, "HUM": 10, "ABBR": 6}
    assert flag in err and got["class_warnings"] == out["class_warnings"]


@pytest.mark.slow
def test_the_builtin_sst2_still_chooses_and_reports_on_accuracy(shared_data, tiny_teacher, tmp_path):
    """The shared SST-2 rows through ``distill`` (no Ray): chosen on val accuracy and reported as dev accuracy as
    before, macro-F1 and each class's dev recall beside it."""
    from raydistill.distill.__main__ import main

    out = main(
        ["--task", "sst2", "--data-dir", f"{shared_data}/glue", "--teacher", tiny_teacher(), "--method", "kd"]
        + ["--init", "first_k", "--student-layers", "2", "--epochs", "2", "--max-steps", "4", "--batch-size", "8"]
        + ["--max-length", "32", "--train-limit", "96", "--eval-limit", "48", "--no-teacher-cache"]
        + ["--tracking-uri", f"sqlite:///{tmp_path / 'mlflow.db'}", "--output", str(tmp_path / "run")]
    )
    assert "best_val_accuracy" in out and "best_eval_accuracy" in out and "eval_macro_f1" in out
    assert {"eval_recall_negative", "eval_recall_positive", "best_eval_recall_negative"} <= set(out)
    assert not any(k.startswith("val_recall_") for k in out)  # the split that chooses needs no table
    from mlflow.tracking import MlflowClient

    c = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    hist = sorted(c.get_metric_history(out["run_id"], "val_accuracy"), key=lambda h: h.step)
    vals = [h.value for h in hist]
    assert out["best_val_accuracy"] == max(vals) and out["best_epoch"] == 1 + vals.index(max(vals))
    assert c.get_run(out["run_id"]).data.params["select_metric"] == ""
