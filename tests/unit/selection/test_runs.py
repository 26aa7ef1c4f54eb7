"""Choosing never sees what reports: the validation split carved from train, metric names, confirmation groups, the
sweep-correctness fixes (ASHA on the reported epoch, only exported students win, a resumed run reopened), noise."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest

from raydistill.common.errors import UserError


def _task(kind="classification", labels=("neg", "pos")):
    return SimpleNamespace(name="t", kind=kind, label_names=labels)


def _rows(labels):
    return [{"text": f"row {i}", "label": y} for i, y in enumerate(labels)]


def test_val_split_is_stratified_disjoint_and_fixed():
    from raydistill.data.splits import val_indices

    rows = _rows([0] * 300 + [1] * 100)
    val = val_indices(rows, _task(), 0.1)
    assert val == val_indices(rows, _task(), 0.1)  # fixed seed: every run of the task chooses on the same rows
    labels = [rows[i]["label"] for i in val]
    assert (labels.count(0), labels.count(1)) == (30, 10)  # 10% of each label
    held = set(range(0, 400, 7))  # e.g. NSMC's dev rows: never also validation rows
    val2 = val_indices(rows, _task(), 0.2, held)
    assert not held & set(val2) and len(val2) == round(0.2 * (300 - 43)) + round(0.2 * (100 - 15))


def test_regression_val_split_is_binned_by_score():
    from raydistill.data.splits import val_indices

    rows = _rows([i / 100 for i in range(500)])
    val = val_indices(rows, _task("regression", ()), 0.1)
    fifths = [sum(1 for i in val if k * 100 <= i < (k + 1) * 100) for k in range(5)]
    assert fifths == [10] * 5  # each fifth of the score range gives its share


def test_val_split_refuses_a_label_left_without_validation_rows_and_too_small_tasks():
    from raydistill.data.splits import val_indices

    with pytest.raises(UserError) as e:
        val_indices(_rows([0] * 200 + [1] * 4), _task(), 0.1)
    assert e.value.field == "val_fraction" and "'pos'" in str(e.value) and "--select-on dev" in str(e.value)
    with pytest.raises(UserError) as e:
        val_indices(_rows([0, 1] * 5), _task(), 0.1)
    assert "too few" in str(e.value)


def test_train_val_dev_carves_val_before_the_train_limit(glue_dir):
    from raydistill.config.schema import RunConfig
    from raydistill.data.splits import datasets, train_val_dev
    from raydistill.tasks import get_task

    cfg = RunConfig.from_dict({"task": "sst2", "teacher": "x", "data_dir": glue_dir, "train": {"train_limit": 50}})
    train, val, dev = train_val_dev(cfg, get_task("sst2"))
    assert len(train) == 50 and len(val) in (19, 20) and len(dev) == 48  # 10% of each label's rows, rounded
    assert not {id(e) for e in train} & {id(e) for e in val}
    _, val_all, _ = train_val_dev(cfg.replace(train=cfg.train.__class__(train_limit=0)), get_task("sst2"))
    assert val == val_all  # the same validation rows whatever the limit
    assert [d["context"] for d in datasets(cfg)] == ["training", "validation", "eval"]
    old = cfg.replace(train=cfg.train.__class__(train_limit=50, select_on="dev"))
    train_d, val_d, _ = train_val_dev(old, get_task("sst2"))
    assert val_d == [] and len(train_d) == 50  # --select-on dev: nothing carved, as before


@pytest.mark.parametrize(
    "train, field",
    [
        ({"val_fraction": 0.0}, "train.val_fraction"),
        ({"val_fraction": 0.6}, "train.val_fraction"),
        ({"select_on": "test"}, "train.select_on"),
    ],
)
def test_bad_selection_config(train, field):
    from raydistill.config.schema import RunConfig

    with pytest.raises(UserError) as e:
        RunConfig.from_dict({"task": "sst2", "teacher": "x", "train": train})
    assert e.value.field == field


def test_metric_names():
    from raydistill.selection.runs import as_final, objective, report_metric

    assert objective("accuracy") == "best_val_accuracy" and objective("pearson", "dev") == "best_eval_pearson"
    assert report_metric("best_val_f1") == "best_eval_f1" and report_metric("best_eval_f1") == "best_eval_f1"
    assert as_final("eval_accuracy") == "best_eval_accuracy" and as_final("val_mcc") == "best_val_mcc"
    assert as_final("best_val_accuracy") == "best_val_accuracy" and as_final("latency_ms_b1") == "latency_ms_b1"
    with pytest.raises(UserError):
        as_final("train_loss")


def _run(trial, val, dev, confirm_of=None, status="FINISHED"):
    tags = {"raydistill.trial_id": trial, **({"raydistill.confirm_of": confirm_of} if confirm_of else {})}
    return SimpleNamespace(
        data=SimpleNamespace(tags=tags, metrics={"best_val_accuracy": val, "best_eval_accuracy": dev}),
        info=SimpleNamespace(run_id=trial, status=status),
    )


def test_confirmed_configuration_wins_by_its_mean_and_exports_its_best_seed():
    from raydistill.selection.runs import pick_confirmed

    runs = [
        _run("a", 0.90, 0.8),
        _run("b", 0.85, 0.8),
        _run("c", 0.95, 0.7),  # c: lucky, never confirmed
        _run("a1", 0.70, 0.8, "a"),
        _run("a2", 0.72, 0.8, "a"),
        _run("b1", 0.86, 0.8, "b"),
        _run("b2", 0.87, 0.8, "b"),
    ]
    best, mean = pick_confirmed(runs, "best_val_accuracy")
    assert best.info.run_id == "b2" and mean == pytest.approx((0.86 + 0.87) / 2)  # the fresh seeds only
    best, mean = pick_confirmed(runs[:3], "best_val_accuracy")  # no confirmations: the single best run
    assert best.info.run_id == "c" and mean == 0.95


def test_confirm_rows_and_points():
    from raydistill.orchestrate.confirm import confirm_points
    from raydistill.selection.runs import candidates, confirmed_rows

    rows = [
        {"trial": "a", "exported": True, "config": {"lr": 1}, "best_val_accuracy": 0.9, "best_eval_accuracy": 0.8},
        {"trial": "s", "exported": False, "config": {"lr": 9}, "best_val_accuracy": 0.99},  # ASHA-stopped
        {"trial": "b", "exported": True, "config": {"lr": 2}, "best_val_accuracy": 0.8, "best_eval_accuracy": 0.7},
    ]
    top = candidates(rows, "best_val_accuracy", 2)
    assert [r["trial"] for r in top] == ["a", "b"]
    pts = confirm_points(top, 42, 2)
    assert pts == [
        {"lr": 1, "seed": 43, "confirm_of": "a"},
        {"lr": 1, "seed": 44, "confirm_of": "a"},
        {"lr": 2, "seed": 43, "confirm_of": "b"},
        {"lr": 2, "seed": 44, "confirm_of": "b"},
    ]
    reps = [
        {
            "trial": f"{p['confirm_of']}{p['seed']}",
            "exported": True,
            "config": p,
            "best_val_accuracy": v,
            "best_eval_accuracy": v - 0.1,
        }
        for p, v in zip(pts, (0.6, 0.6, 0.85, 0.9), strict=True)
    ]
    out = confirmed_rows(rows, reps, "best_val_accuracy", "best_eval_accuracy", "max")
    assert [r["config_of"] for r in out] == ["b", "a"] and out[0]["exported_trial"] == "b44"
    assert out[0]["seeds"] == 2 and out[0]["mean_best_val_accuracy"] == pytest.approx(0.875)  # fresh seeds only
    assert out[0]["search_best_val_accuracy"] == 0.8  # the original trial's score: beside the mean, not in it
    assert out[0]["range_best_eval_accuracy"] == pytest.approx(0.05)  # dev 0.75, 0.8


@pytest.mark.parametrize(
    "confirm, field",
    [
        ({"top": 0, "seeds": 2}, "search.confirm.top"),
        ({"top": 2, "seeds": -1}, "search.confirm.seeds"),
        ({"top": 2, "rounds": 1}, "search.confirm"),
        (3, "search.confirm"),
    ],
)
def test_bad_confirm(confirm, field):
    from raydistill.selection.settings import check_search

    with pytest.raises(UserError) as e:
        check_search({"confirm": confirm})
    assert e.value.field == field
    with pytest.raises(UserError):
        check_search({"algorithm": "grid"})


def test_confirm_defaults():
    from raydistill.config import space as sp
    from raydistill.selection.settings import confirm_of

    assert confirm_of({}) == {"top": 0, "seeds": 0} and confirm_of({"confirm": False})["top"] == 0
    assert confirm_of({"confirm": {"seeds": 4}}) == {"top": 3, "seeds": 4}
    for name in ("pkd_glue", "kd_glue", "minilm_glue", "tinybert_glue", "distilbert_glue"):
        assert confirm_of(sp.load(name).search) == {"top": 3, "seeds": 2}  # the shipped spaces confirm their pick


def test_asha_judges_the_epoch_a_trial_reports_even_after_a_restart():
    """A restarted in-process trial counts Tune iterations from 1 again while its epochs carry on: ASHA must read the
    epoch, and never stop a trial at its last epoch."""
    from raydistill.config import space as sp
    from raydistill.orchestrate.search import make_scheduler

    asha = make_scheduler(sp.load("pkd_glue"), 4, None)
    assert asha._time_attr == "epoch"
    asha.set_search_properties("best_val_accuracy", "max")
    others = [SimpleNamespace(trial_id=f"o{i}", config={}) for i in range(4)]
    restarted = SimpleNamespace(trial_id="r", config={})
    for t in [*others, restarted]:
        asha.on_trial_add(None, t)
    for t in others:  # four trials reach the epoch-2 rung with good scores
        for epoch in (1, 2):
            asha.on_trial_result(None, t, {"training_iteration": epoch, "epoch": epoch, "best_val_accuracy": 0.9})
    # the restarted trial's second report: Tune iteration 2, but its epoch 4 (the last): it must finish and export,
    # not be judged as a weak epoch-2 trial and stopped
    result = {"training_iteration": 2, "epoch": 4, "best_val_accuracy": 0.1}
    assert asha.on_trial_result(None, restarted, result) == asha.CONTINUE
    weak = SimpleNamespace(trial_id="w", config={})  # a genuinely weak trial at epoch 2 is still stopped
    asha.on_trial_add(None, weak)
    asha.on_trial_result(None, weak, {"training_iteration": 1, "epoch": 1, "best_val_accuracy": 0.1})
    assert (
        asha.on_trial_result(None, weak, {"training_iteration": 2, "epoch": 2, "best_val_accuracy": 0.1}) == asha.STOP
    )


def test_summary_best_and_front_name_only_exported_students():
    from raydistill.results.summary import mark_front, summarize

    def res(trial, epoch, val, lat, error=None):
        return SimpleNamespace(
            config={"lr": 1},
            error=error,
            path=trial,
            metrics={
                "trial_id": trial,
                "epoch": epoch,
                "best_val_accuracy": val,
                "best_eval_accuracy": val - 0.1,
                "latency_ms_b1": lat,
            },
        )

    results = [
        res("done", 3, 0.7, 5.0),
        res("stopped", 1, 0.95, 1.0),
        res("failed", 2, 0.99, 0.5, RuntimeError("x")),
        res("unexported", 3, 0.9, 2.0),
    ]
    rows = summarize(results, "best_val_accuracy", "max", 3, finished={"done", "stopped", "failed"})
    assert [r["trial"] for r in rows][0] == "done" and rows[0]["exported"]
    assert {r["trial"]: r["exported"] for r in rows} == {
        "done": True,
        "stopped": False,
        "failed": False,
        "unexported": False,
    }
    assert next(r for r in rows if r["trial"] == "unexported")["error"] == "no exported student"
    front = mark_front(rows, "best_val_accuracy", "max", "latency_ms_b1")
    assert [r["trial"] for r in front] == ["done"]


def test_resumed_run_is_running_again_without_its_error(tmp_path):
    from raydistill.tracking.track import Tracker

    uri = f"sqlite:///{tmp_path / 'm.db'}"
    tracker = Tracker(uri, "e")
    rid = tracker.start_run("r", {})
    tracker.set_tags(rid, {"error": "RuntimeError: boom"})
    tracker.end_run(rid, "FAILED")
    tracker.reopen_run(rid)
    run = tracker.client.get_run(rid)
    assert run.info.status == "RUNNING" and "error" not in run.data.tags


def test_best_ranks_eval_metrics_by_the_exported_epoch_not_the_last(tmp_path):
    """`best --metric eval_accuracy` ranked by MLflow's latest value (the last epoch) but exported each trial's best
    epoch; it now ranks by best_eval_accuracy, the exported student's own score."""
    from raydistill.selection.runs import choose
    from raydistill.tracking.track import Tracker

    uri = f"sqlite:///{tmp_path / 'm.db'}"
    tracker = Tracker(uri, "e")
    for name, curve, best_eval in (("late", [0.5, 0.8], 0.8), ("early", [0.9, 0.6], 0.9)):
        rid = tracker.start_run(name, {}, tags={"raydistill.trial_id": name})
        for step, v in enumerate(curve):
            tracker.log_metrics(rid, {"eval_accuracy": v}, step=step)
        tracker.log_metrics(rid, {"best_eval_accuracy": best_eval, "best_val_accuracy": best_eval})
        tracker.end_run(rid)
    pick = choose(tracker, "eval_accuracy", "max")
    run, metric = pick.run, pick.metric
    assert metric == "best_eval_accuracy" and run.info.run_name == "early"


def test_bootstrap_interval():
    from raydistill.results.significance import bootstrap_ci

    correct = [1] * 80 + [0] * 20
    lo, hi = bootstrap_ci(lambda idx: sum(correct[i] for i in idx) / len(idx), len(correct))
    assert lo < 0.8 < hi and hi - lo == pytest.approx(2 * 1.96 * math.sqrt(0.8 * 0.2 / 100), abs=0.04)


def test_best_of_a_named_sweep_ranks_by_that_sweeps_metric_not_the_newest(tmp_path):
    """`best --sweep A` without --metric read the metric of the newest sweep in the experiment, not A's."""
    import time

    from raydistill.selection.runs import choose
    from raydistill.tracking.track import Tracker

    uri = f"sqlite:///{tmp_path / 'm.db'}"
    tracker = Tracker(uri, "e")
    for sweep, metric in (("a", "best_val_f1"), ("b", "best_val_accuracy")):  # b is the newer sweep
        tracker.start_run(sweep, {"metric": metric}, tags={"raydistill.role": "sweep"})
        for name, acc, f1 in ((f"{sweep}-acc", 0.9, 0.1), (f"{sweep}-f1", 0.1, 0.9)):
            rid = tracker.start_run(name, {}, tags={"raydistill.trial_id": name, "raydistill.sweep": sweep})
            tracker.log_metrics(rid, {"best_val_accuracy": acc, "best_val_f1": f1})
            tracker.end_run(rid)
        time.sleep(0.01)
    pick = choose(tracker, None, "max", sweep="a")
    run, metric = pick.run, pick.metric
    assert metric == "best_val_f1" and run.info.run_name == "a-f1"
    pick = choose(tracker, None, "max")  # no sweep named: the newest sweep's metric
    run, metric = pick.run, pick.metric
    assert metric == "best_val_accuracy"


def test_a_tie_goes_to_the_lowest_trial_id_as_in_the_summary():
    """The sweep's summary and raydistill.best must name the same winner when val scores tie (they did not: best took
    the last-started run, the summary the first trial)."""
    runs = [_run("cc", 0.75, 0.70), _run("aa", 0.75, 0.71), _run("bb", 0.75, 0.72), _run("dd", 0.74, 0.80)]
    for order in (runs, runs[::-1]):
        from raydistill.selection.runs import pick_confirmed

        best, mean = pick_confirmed(order, "best_val_accuracy")
        assert best.data.tags["raydistill.trial_id"] == "aa" and mean == 0.75


def test_a_confirmation_tie_is_broken_as_best_breaks_it():
    """The sweep's confirmed winner (selection.confirmed_rows) and raydistill.best (pick_confirmed) apply one rule."""
    from raydistill.selection.runs import confirmed_rows, pick_confirmed

    rows = [
        {"trial": t, "exported": True, "config": {"lr": lr}, "best_val_accuracy": 0.8, "best_eval_accuracy": 0.7}
        for t, lr in (("zz", 1), ("bb", 2))
    ]
    reps = [
        {
            "trial": t,
            "exported": True,
            "config": {"lr": lr, "seed": 43, "confirm_of": o},
            "best_val_accuracy": 0.8,
            "best_eval_accuracy": 0.7,
        }
        for t, lr, o in (("yy", 1, "zz"), ("cc", 2, "bb"))
    ]
    out = confirmed_rows(rows, reps, "best_val_accuracy", "best_eval_accuracy", "max")
    assert [r["config_of"] for r in out] == ["bb", "zz"] and out[0]["exported_trial"] == "cc"  # lowest fresh trial id
    assert "_first" not in out[0]
    runs = [_run(t, 0.8, 0.7, confirm_of=o) for t, o in (("zz", None), ("bb", None), ("yy", "zz"), ("cc", "bb"))]
    assert pick_confirmed(runs, "best_val_accuracy")[0].data.tags["raydistill.trial_id"] == "cc"


def test_confirmation_ranks_by_the_fresh_seeds_alone():
    """Scores where averaging the original trial in (the old rule) and the fresh seeds alone disagree: ``a``'s lucky
    0.95 made it a finalist, its two fresh seeds say 0.80; ``b``'s say 0.84. The sweep's summary and raydistill.best
    both name ``b``, and export a fresh run of it, not its original trial (0.86, higher than its fresh seeds)."""
    from raydistill.selection.runs import confirmed_rows, pick_confirmed

    val = {"a": 0.95, "b": 0.86, "a1": 0.80, "a2": 0.80, "b1": 0.84, "b2": 0.84}
    origin = {"a1": "a", "a2": "a", "b1": "b", "b2": "b"}
    assert (0.95 + 0.8 + 0.8) / 3 > (0.86 + 0.84 + 0.84) / 3  # the old rule's winner: a
    rows = [{"trial": t, "exported": True, "config": {}, "best_val_accuracy": val[t]} for t in ("a", "b")]
    reps = [
        {"trial": t, "exported": True, "config": {"confirm_of": o}, "best_val_accuracy": val[t]}
        for t, o in origin.items()
    ]
    out = confirmed_rows(rows, reps, "best_val_accuracy", "best_eval_accuracy", "max")
    assert [r["config_of"] for r in out] == ["b", "a"] and out[0]["exported_trial"] == "b1"
    assert out[0]["mean_best_val_accuracy"] == pytest.approx(0.84) and out[0]["search_best_val_accuracy"] == 0.86
    runs = [_run(t, v, 0.7, confirm_of=origin.get(t)) for t, v in val.items()]
    best, mean = pick_confirmed(runs, "best_val_accuracy")
    assert best.info.run_id == "b1" and mean == pytest.approx(0.84)


def test_best_ranks_in_the_mode_the_sweep_recorded(tmp_path):
    """A `mode: min` space: `best` without --mode picked the highest value (its default was max and the sweep did not
    record its mode), another run than the sweep's summary named."""
    from raydistill.selection.runs import choose
    from raydistill.tracking.track import Tracker

    uri = f"sqlite:///{tmp_path / 'm.db'}"
    tracker = Tracker(uri, "e")
    tracker.start_run("s", {"metric": "best_val_loss", "mode": "min"}, tags={"raydistill.role": "sweep"})
    for name, loss in (("low", 0.2), ("high", 0.9)):
        rid = tracker.start_run(name, {}, tags={"raydistill.trial_id": name, "raydistill.sweep": "s"})
        tracker.log_metrics(rid, {"best_val_loss": loss})
        tracker.end_run(rid)
    pick = choose(tracker, None, None, sweep="s")
    run, mode = pick.run, pick.mode
    assert mode == "min" and run.info.run_name == "low"
    pick = choose(tracker, None, "max", sweep="s")  # --mode given: it wins
    run, mode = pick.run, pick.mode
    assert mode == "max" and run.info.run_name == "high"
