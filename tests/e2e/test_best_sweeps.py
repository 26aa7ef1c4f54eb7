"""`best` picks within one sweep (issue 45): without --sweep the latest sweep of the experiment, named in its stderr
line and its JSON; --sweep all only across sweeps of one task, data and metric. A sweep's default experiment names
its task or data, so the README's "Your own data" steps export the student of the user's data."""

from __future__ import annotations

import csv
import json
import random
import shutil
import time

import pytest

from raydistill.tracking.track import Tracker


def _sweep(tracker: Tracker, name: str, task: str, scores: dict[str, float], fp: str = "fp-1") -> None:
    """A sweep's parent run, as `orchestrate/driver.py` logs it, and its finished trials."""
    params = {"space": "pkd_glue", "task": task, "metric": "best_val_accuracy", "mode": "max", "data_fingerprint": fp}
    tracker.start_run(name, params, tags={"raydistill.role": "sweep"})
    for trial, score in scores.items():
        rid = tracker.start_run(trial, {"task": task}, tags={"raydistill.trial_id": trial, "raydistill.sweep": name})
        tracker.log_metrics(rid, {"best_val_accuracy": score, "best_eval_accuracy": score})
        tracker.end_run(rid)
    time.sleep(0.01)  # the next sweep starts later


def _best(argv, capsys) -> tuple[dict, list[str]]:
    from raydistill.commands import best

    capsys.readouterr()
    out = best.main(argv)
    std = capsys.readouterr()
    assert json.loads(std.out.strip().splitlines()[-1]) == json.loads(json.dumps(out, default=str))
    return out, std.err.strip().splitlines()


def test_best_ranks_the_latest_sweep_and_says_which(tmp_path, capsys):
    """An RTE sweep, then one on the user's file in the same experiment: `best` ranked both and exported RTE's
    higher-scoring student for the user's task."""
    uri = f"sqlite:///{tmp_path / 'm.db'}"
    tracker = Tracker(uri, "pkd_glue")
    _sweep(tracker, "pkd_glue-rte-1", "rte", {"r1": 0.9, "r2": 0.6})
    _sweep(tracker, "pkd_glue-file-reviews-2", "file-reviews", {"f1": 0.7, "f2": 0.8}, fp="fp-2")
    argv = ["--experiment", "pkd_glue", "--tracking-uri", uri]
    out, err = _best(argv, capsys)
    assert (out["sweep"], out["run_name"], out["value"]) == ("pkd_glue-file-reviews-2", "f2", 0.8)
    assert len(err) == 1 and err[0].startswith(
        "best of sweep 'pkd_glue-file-reviews-2', the latest of 2 in experiment 'pkd_glue': trial f2, "
        "best_val_accuracy 0.8 (--sweep NAME picks another"
    ), err
    out, err = _best([*argv, "--sweep", "pkd_glue-rte-1"], capsys)
    assert (out["sweep"], out["run_name"]) == ("pkd_glue-rte-1", "r1") and err[0].startswith(
        "best of sweep 'pkd_glue-rte-1'"
    )

    from raydistill.commands import best

    with pytest.raises(SystemExit) as e:  # --sweep all: not across tasks
        best.main([*argv, "--sweep", "all"])
    err = capsys.readouterr().err.strip().splitlines()
    assert e.value.code == 2 and len(err) == 1, err
    assert err[0].startswith("error: sweep: --sweep all ranks sweeps of one task, data and metric") and (
        "pkd_glue-file-reviews-2 (task, data_fingerprint)" in err[0] and "--sweep NAME" in err[0]
    ), err[0]


def test_best_of_all_sweeps_ranks_across_sweeps_of_one_task_and_data(tmp_path, capsys):
    uri = f"sqlite:///{tmp_path / 'm.db'}"
    tracker = Tracker(uri, "e")
    _sweep(tracker, "s1", "rte", {"a": 0.9})
    _sweep(tracker, "s2", "rte", {"b": 0.7})
    argv = ["--experiment", "e", "--tracking-uri", uri]
    assert _best(argv, capsys)[0]["run_name"] == "b"  # the latest
    out, err = _best([*argv, "--sweep", "all"], capsys)
    assert (out["sweep"], out["run_name"]) == ("s1", "a")
    assert err == ["best of all 2 sweeps of experiment 'e': trial a of sweep 's1', best_val_accuracy 0.9"]
    _sweep(tracker, "s3", "rte", {"c": 0.95}, fp="fp-2")  # the same task on other rows: not comparable
    from raydistill.commands import best

    with pytest.raises(SystemExit):
        best.main([*argv, "--sweep", "all"])
    assert "s3 (data_fingerprint)" in capsys.readouterr().err
    _sweep(tracker, "s4", "rte", {})  # the latest sweep has no finished trial: said, with the others named
    with pytest.raises(SystemExit):
        best.main(argv)
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: sweep: sweep 's4', the latest of 4 in experiment 'e' has no finished trials yet")
    assert "--sweep NAME for another of the experiment's sweeps: s3, s2, s1" in err


def test_a_sweeps_default_experiment_names_its_task_or_data():
    from raydistill.orchestrate.driver import default_experiment

    assert default_experiment("pkd_glue", "rte", {}) == "pkd_glue-rte"
    assert default_experiment("pkd_glue", "file-reviews", {}) == "pkd_glue-reviews"
    assert default_experiment("pkd_glue", "dataset-imdb", {}) == "pkd_glue-dataset-imdb"
    # a resumed sweep logs where it began: its record's experiment, or the space's name where an older raydistill
    # started it (its parent run lives there)
    assert default_experiment("pkd_glue", "rte", {"parent_run_id": "p", "experiment": "mine"}) == "mine"
    assert default_experiment("pkd_glue", "rte", {"parent_run_id": "p"}) == "pkd_glue"


def _csv(path, labels: tuple[str, str], words: dict[str, list[str]], n: int) -> str:
    rng = random.Random(len(path))
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["text", "label"])
        for i in range(n):
            label = labels[rng.randint(0, 1)]
            w.writerow([f"the film {i} was {rng.choice(words[label])} really", label])
    return str(path)


@pytest.mark.slow
def test_the_readmes_own_data_steps_export_the_users_student(ray_session, tiny_teacher, tmp_path, monkeypatch, capsys):
    """README "Your own data", run after a sweep of another task in the same experiment: `best --experiment
    pkd_glue-reviews --export ./student` exports the student of a reviews.csv trial, not one of the other task."""
    from transformers import AutoConfig

    from raydistill.commands import best, sweep

    monkeypatch.chdir(tmp_path)
    shutil.copytree(tiny_teacher(), "my-teacher")
    sentiment = {"neg": "bad boring awful sad".split(), "pos": "good great fun love".split()}
    topics = {"sport": "goal match team ball".split(), "world": "vote war trade law".split()}
    _csv("reviews.csv", ("neg", "pos"), sentiment, 96)
    _csv("reviews-dev.csv", ("neg", "pos"), sentiment, 32)
    _csv("topics.csv", ("sport", "world"), topics, 96)
    small = ["--num-samples", "1", "--epochs", "1", "--max-steps", "3", "--batch-size", "8", "--max-length", "32"]
    small += [
        "--eval-limit",
        "16",
        "--no-teacher-cache",
        "--set",
        "search.confirm=false",
        "--set",
        "search.control=false",
    ]
    small += [
        x
        for s in ("student.layers=2", "student.hidden=32", "student.intermediate=64", "student.heads=2")
        for x in ("--set", s)
    ]
    # another task's sweep logged to the same experiment
    sweep.main(
        [
            "pkd_glue",
            "--train-file",
            "topics.csv",
            "--teacher",
            "./my-teacher",
            "--experiment",
            "pkd_glue-reviews",
            *small,
        ]
    )
    # the README's steps, with the small budget
    sweep.main(
        [
            "pkd_glue",
            "--train-file",
            "reviews.csv",
            "--eval-file",
            "reviews-dev.csv",
            "--teacher",
            "./my-teacher",
            *small,
        ]
    )
    capsys.readouterr()
    out = best.main(["--experiment", "pkd_glue-reviews", "--export", "./student"])
    assert out["sweep"].startswith("pkd_glue-file-reviews-") and out["params"]["task"] == "file-reviews"
    assert "the latest of 2 in experiment 'pkd_glue-reviews'" in capsys.readouterr().err
    assert out["params"]["train_file"] == str(tmp_path / "reviews.csv")  # the run the student came from
    assert out["export"] == str(tmp_path / "student") and AutoConfig.from_pretrained("./student").num_labels == 2
