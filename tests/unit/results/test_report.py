"""The teacher as a sweep's yardstick: its score on the students' dev set and latency, % of teacher per trial, and
the Pareto plot with the teacher's point, its score and the 97% line."""

from __future__ import annotations

import os

import pytest

from raydistill.config.schema import RunConfig
from raydistill.results.summary import against_teacher, teacher_score

TEACHER = {"eval_accuracy": 0.8, "student_params": 22.7e6, "latency_ms_b1": 20.0}


def test_rows_measured_against_the_teacher():
    rows = [
        {"trial": "a", "best_eval_accuracy": 0.78, "latency_ms_b1": 5.0},
        {"trial": "b", "best_eval_accuracy": None},
    ]
    assert teacher_score(TEACHER, "best_eval_accuracy") == 0.8 and teacher_score(None, "best_eval_accuracy") is None
    against_teacher(rows, "best_eval_accuracy", TEACHER)
    assert rows[0]["pct_of_teacher"] == 97.5 and rows[0]["speedup_b1"] == 4.0
    assert "pct_of_teacher" not in rows[1] and "speedup_b1" not in rows[1]


def test_pareto_plot_draws_the_teacher_and_the_97_percent_line(tmp_path, monkeypatch):
    import matplotlib.axes

    from raydistill.results.report import pareto_plot

    lines = []
    real = matplotlib.axes.Axes.axhline
    monkeypatch.setattr(
        matplotlib.axes.Axes,
        "axhline",
        lambda self, y=0, **kw: lines.append((y, kw.get("label"))) or real(self, y, **kw),
    )
    rows = [
        {"trial": "a", "best_eval_accuracy": 0.78, "student_params": 11e6, "latency_ms_b1": 6.0},
        {"trial": "b", "best_eval_accuracy": 0.70, "student_params": 5e6, "latency_ms_b1": 3.0},
    ]
    png = pareto_plot(
        rows, "best_eval_accuracy", str(tmp_path / "p.png"), teacher={**TEACHER, "best_eval_accuracy": 0.8}
    )
    assert os.path.getsize(png) > 1000
    assert [(round(y, 6), label) for y, label in lines] == [(0.8, "teacher 0.8"), (0.776, "97% of teacher")] * 2


def test_pareto_front_marks_the_trials_nothing_beats_on_both():
    from raydistill.results.summary import mark_front

    rows = [
        {"trial": "a", "m": 0.80, "latency_ms_b1": 10.0},
        {"trial": "b", "m": 0.78, "latency_ms_b1": 5.0},
        {"trial": "c", "m": 0.75, "latency_ms_b1": 6.0},
        {"trial": "d", "m": None, "latency_ms_b1": 1.0},
    ]
    front = mark_front(rows, "m", "max", "latency_ms_b1")
    assert [r["trial"] for r in front] == ["b", "a"] and [r["pareto"] for r in rows] == [True, True, False, False]


def test_best_within_a_latency_or_size_bound(tmp_path, capsys):
    import json

    from raydistill.commands import best
    from raydistill.common.errors import UserError
    from raydistill.selection.runs import choose
    from raydistill.tracking.track import Tracker

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    tracker = Tracker(uri, "e")
    for tid, acc, ms, params in (("t1", 0.80, 10.0, 22e6), ("t2", 0.78, 5.0, 11e6), ("t3", 0.70, 3.0, 5e6)):
        rid = tracker.start_run(tid, {}, tags={"raydistill.trial_id": tid})
        tracker.log_metrics(rid, {"best_eval_accuracy": acc, "latency_ms_b1": ms, "student_params": params})
        tracker.end_run(rid)

    def pick(**kw):
        return choose(tracker, "best_eval_accuracy", "max", **kw).run.info.run_name

    assert pick() == "t1" and pick(max_latency_ms=6.0) == "t2" and pick(max_params=6e6) == "t3"
    assert pick(max_latency_ms=6.0, max_params=6e6) == "t3"
    with pytest.raises(UserError) as e:
        pick(max_latency_ms=1.0)
    assert e.value.field == "max_latency_ms" and "the smallest is 3.0" in str(e.value)
    best.main(["--experiment", "e", "--tracking-uri", uri, "--metric", "best_eval_accuracy", "--max-latency-ms", "6"])
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1])["run_name"] == "t2"


def test_the_pareto_plot_crowns_the_front_the_table_chose_on_val(tmp_path, monkeypatch):
    """Issue 45 item 6: pareto.png plots the validation score that chose and highlights the same front as the table
    and pareto_front.txt; on dev it would crown a trial val ranks below another as fast."""
    from types import SimpleNamespace

    import matplotlib.axes

    from raydistill.results import summary

    monkeypatch.chdir(tmp_path)
    drawn = []
    real = matplotlib.axes.Axes.scatter
    monkeypatch.setattr(
        matplotlib.axes.Axes,
        "scatter",
        lambda self, x, y, **kw: drawn.append((list(y), kw.get("c"))) or real(self, x, y, **kw),
    )
    rows = [  # a and b are as fast: val prefers a, dev prefers b
        {"trial": "a", "exported": True, "best_val_accuracy": 0.90, "best_eval_accuracy": 0.80},
        {"trial": "b", "exported": True, "best_val_accuracy": 0.85, "best_eval_accuracy": 0.84},
        {"trial": "c", "exported": True, "best_val_accuracy": 0.70, "best_eval_accuracy": 0.70},
    ]
    for r, ms, params in zip(rows, (5.0, 5.0, 2.0), (11e6, 11e6, 5e6), strict=True):
        r.update(status="DONE", latency_ms_b1=ms, student_params=params)
    teacher = {"eval_accuracy": 0.86, "val_accuracy": 0.92, "student_params": 22e6, "latency_ms_b1": 10.0}
    sweep = SimpleNamespace(
        name="s",
        metric="best_val_accuracy",
        mode="max",
        teacher=teacher,
        confirmed=None,
        control=None,
        front_by="latency_ms_b1",
    )
    front = summary.mark_front(rows, "best_val_accuracy", "max", "latency_ms_b1")
    _, files, _ = summary._write_summary(sweep, rows, front)
    assert files[-1].endswith("pareto.png") and [r["trial"] for r in front] == ["c", "a"]
    ys, colours = drawn[2]  # the latency panel's trials (the size panel's: trials, then the teacher's star)
    red = {r["trial"] for r, c in zip(rows, colours, strict=True) if c == "tab:red"}
    assert ys == [0.90, 0.85, 0.70] and red == {r["trial"] for r in front} == {"a", "c"}
    assert drawn[3][0] == [0.92]  # the teacher drawn at its val score, the yardstick of the plotted score


def test_a_memoised_reference_of_an_older_version_is_measured_again(tiny_teacher, glue_dir, monkeypatch):
    """A memo written before the majority floor covered every metric holds majority_f1 = 0.0: its key differs."""
    from raydistill.teacher import reference

    cfg = RunConfig(task="sst2", teacher=tiny_teacher("classification", 2), data_dir=glue_dir).validate()
    key = reference._memo_key(cfg)
    monkeypatch.setattr(reference, "VERSION", reference.VERSION - 1)
    assert reference._memo_key(cfg) != key


def test_parameter_counts_read_as_sizes_in_the_tables(tmp_path, monkeypatch):
    """Issue 48 item 6: summary.txt and pareto_front.txt say 17.4M, not 1.739e+07; summary.json keeps the number."""
    import json
    from types import SimpleNamespace

    from raydistill.results import summary
    from raydistill.results.report import size

    assert [size(n) for n in (17.39e6, 4.386e6, 110.1e6, 880e3, 1.2e9, 512)] == [
        "17.4M",
        "4.4M",
        "110M",
        "880K",
        "1.2B",
        "512",
    ]
    monkeypatch.chdir(tmp_path)
    rows = [
        {"trial": "a", "exported": True, "status": "DONE", "best_val_accuracy": 0.9, "best_eval_accuracy": 0.8},
        {"trial": "b", "exported": True, "status": "DONE", "best_val_accuracy": 0.8, "best_eval_accuracy": 0.7},
    ]
    for r, params in zip(rows, (17.39e6, 4.386e6), strict=True):
        r.update(student_params=params, latency_ms_b1=2.0)
    sweep = SimpleNamespace(
        name="s",
        metric="best_val_accuracy",
        mode="max",
        teacher={},
        confirmed=None,
        control=None,
        front_by="latency_ms_b1",
    )
    front = summary.mark_front(rows, "best_val_accuracy", "max", "latency_ms_b1")
    text, files, _ = summary._write_summary(sweep, rows, front)
    written = {os.path.basename(f): open(f, encoding="utf-8").read() for f in files if not f.endswith(".png")}
    for name in ("summary.txt", "pareto_front.txt"):
        assert "e+0" not in written[name] and "17.4M" in written[name], written[name]
    assert "4.4M" in text
    assert [r["student_params"] for r in json.loads(written["summary.json"])] == [17.39e6, 4.386e6]
