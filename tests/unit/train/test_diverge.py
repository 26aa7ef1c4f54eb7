"""Diverging runs stop early (train.stop_diverged): the rules on hand-made epochs, the majority floor from the
validation split's labels, and the loop stopping a run that collapses (in-process, no Ray)."""

from __future__ import annotations

import dataclasses
import math

import pytest

from raydistill.tasks import get_task
from raydistill.train.diverge import FLOOR_MIN_STEPS, SHARE, SPREAD, Floor, answer_metrics, floor_of, verdict

SST2 = Floor("val_accuracy", 0.558, "always answering 'positive'")
ENOUGH = FLOOR_MIN_STEPS  # steps the prediction stage has trained: the floor is judged


def epochs(*rows: tuple[float, float], share: float = 1.0) -> list[dict]:
    """Hand-made epochs: (mean training loss, val accuracy) each, ``share`` of val rows given the commonest class."""
    return [
        {"epoch": i + 1, "stage": "pred", "train_loss": loss, "train_kd": loss, "val_accuracy": acc, SHARE: share}
        for i, (loss, acc) in enumerate(rows)
    ]


def first_stop(rows: list[dict], start: float = 2.0, floor: Floor | None = SST2, steps: int = ENOUGH):
    """(epoch, reason) of the first epoch judged diverged, as the loop judges them one after the other."""
    for m in rows:
        reason = verdict(m, start=start, floor=floor, pred_steps=steps * m["epoch"])
        if reason:
            return m["epoch"], reason
    return None


def test_a_normal_run_is_never_stopped():
    assert first_stop(epochs((1.8, 0.71), (0.9, 0.80), (0.6, 0.83))) is None
    # a loss that rises a little, and a score just above the floor's margin, are no divergence
    assert first_stop(epochs((2.5, 0.60), (3.1, 0.57), (2.0, 0.70))) is None


def test_the_majority_floor_after_the_first_epoch_stops_the_run():
    stop = first_stop(epochs((0.69, 0.558), (0.69, 0.558)))
    assert stop is not None and stop[0] == 1
    assert stop[1] == (
        "diverged: val accuracy 0.5580 at the majority floor 0.5580 (always answering 'positive', 100% of its answers "
        "one class) after epoch 1"
    )
    # below the floor (a constant answer of the rarer class) and within half a point above it: diverged too
    assert "below the majority floor" in first_stop(epochs((0.7, 0.442)))[1]
    assert first_stop(epochs((0.7, 0.561))) is not None
    # collapsing later, after good epochs
    assert first_stop(epochs((1.0, 0.80), (0.9, 0.82), (0.9, 0.558)))[0] == 3


def test_under_the_floor_but_still_telling_the_classes_apart_is_no_collapse():
    """MRPC's small student after one epoch (0.664 against a floor of 0.675, a quarter of its answers the other
    class) learns on: only a score at the floor AND (nearly) one answer for every row is a collapse."""
    mrpc = Floor("val_accuracy", 0.6749, "always answering 'equivalent'")
    assert first_stop(epochs((0.6, 0.664), share=0.75), floor=mrpc) is None
    assert first_stop(epochs((0.6, 0.664), share=0.98), floor=mrpc) is None
    assert first_stop(epochs((0.6, 0.664), share=0.995), floor=mrpc)[0] == 1
    # a NaN score (a regression student with constant output) needs no more evidence
    stsb = Floor("val_pearson", 0.0, "a constant answer")
    nan = {"epoch": 1, "stage": "pred", "train_loss": 1.0, "val_pearson": math.nan}
    assert verdict(nan, start=2.0, floor=stsb, pred_steps=ENOUGH) is not None
    flat = {**nan, "val_pearson": 0.001}
    assert verdict({**flat, SPREAD: 0.005}, start=2.0, floor=stsb, pred_steps=ENOUGH) is not None
    assert verdict({**flat, SPREAD: 0.4}, start=2.0, floor=stsb, pred_steps=ENOUGH) is None
    assert verdict(flat, start=2.0, floor=stsb, pred_steps=ENOUGH) is None  # no evidence: not judged collapsed


def test_the_collapse_evidence_from_predictions():
    sst2, stsb = get_task("sst2"), get_task("stsb")
    assert answer_metrics(sst2, [1, 1, 1, 0], [1, 0, 1, 0]) == {"top_answer_share": 0.75}
    assert answer_metrics(stsb, [2.0, 2.0, 2.0], [1.0, 3.0, 2.0]) == {"answer_spread": 0.0}
    assert answer_metrics(stsb, [1.0, 3.0], [1.0, 3.0]) == {"answer_spread": 1.0}


def test_the_floor_waits_for_enough_prediction_steps_and_needs_a_validation_split():
    rows = epochs((0.69, 0.558))
    assert first_stop(rows, steps=FLOOR_MIN_STEPS - 1) is None  # a smoke run of a few steps: not judged
    assert first_stop(rows, floor=None) is None  # no validation split (select_on dev) or no labels: no floor
    # TinyBERT's first stage does not train the head: its steps do not count (the loop counts "pred" epochs)
    assert verdict({**rows[0], "stage": "intermediate"}, start=2.0, floor=SST2, pred_steps=0) is None


def test_the_floor_waits_for_the_learning_rate_warm_up():
    """A long schedule warms its rate up over more than an epoch (10% of 21 epochs: 2.1): a student answering near one
    constant while the rate is still climbing is not judged (STS-B's pruned 3L-192 at 21 epochs: val Pearson -0.01
    after epoch 1, 0.74 later); the same answers once the warm-up has ended are."""
    stsb = Floor("val_pearson", 0.0, "a constant answer")
    first = {"epoch": 1, "stage": "pred", "train_loss": 1.2, "val_pearson": -0.0129, SPREAD: 0.004}
    per_epoch, warmup = 161, 338  # steps
    assert verdict(first, start=2.0, floor=stsb, pred_steps=per_epoch, warmup_steps=warmup) is None
    third = {**first, "epoch": 3}
    reason = verdict(third, start=2.0, floor=stsb, pred_steps=3 * per_epoch, warmup_steps=warmup)
    assert reason and reason.endswith("after epoch 3")
    # a short schedule's warm-up ends inside its first epoch: judged then, as before
    assert verdict(first, start=2.0, floor=stsb, pred_steps=per_epoch, warmup_steps=64)


def test_the_floor_waits_for_half_the_prediction_stage():
    """A student may answer one class for its first epochs and then learn: RTE's pruned 3L-192 on the x20 set (10
    epochs) answered one class after epochs 1 and 2 and left the floor at epoch 3 (val 0.546, best 0.562 at 4). Not
    judged before half the stage's steps; still there half-way, stopped. A loss going wrong is judged every epoch."""
    rte = Floor("val_accuracy", 0.502, "always answering 'entailment'")
    per_epoch, total = 147, 1470

    def stop(epoch, acc, loss=0.5):
        row = {"epoch": epoch, "stage": "pred", "train_loss": loss, "val_accuracy": acc, SHARE: 1.0}
        steps = epoch * per_epoch
        return verdict(row, start=0.7, floor=rte, pred_steps=steps, warmup_steps=147, total_pred_steps=total)

    assert stop(1, 0.498) is None and stop(2, 0.498) is None and stop(4, 0.498) is None
    assert stop(5, 0.498).endswith("after epoch 5")  # half of 10 epochs: hopeless, not slow
    assert stop(1, 0.498, loss=math.nan).startswith("diverged: training loss not finite at epoch 1")
    # a 4-epoch sweep trial: judged from epoch 2 (not after its first, where 6 of RTE's 12 four-epoch runs were stopped)
    assert verdict({"epoch": 1, "stage": "pred", "train_loss": 0.6, "val_accuracy": 0.498, SHARE: 1.0}, start=0.7,
                   floor=rte, pred_steps=78, warmup_steps=31, total_pred_steps=312) is None  # fmt: skip


@pytest.mark.parametrize("bad", [math.nan, math.inf])
def test_a_non_finite_loss_stops_the_run_whatever_the_score(bad):
    rows = epochs((1.5, 0.75), (bad, 0.80))
    assert first_stop(rows) == (2, f"diverged: training loss not finite at epoch 2 (train_loss={bad}, train_kd={bad})")
    assert first_stop(rows, floor=None, steps=0)[0] == 2  # the loss rules need no floor and no minimum of steps


def test_an_exploding_loss_stops_the_run():
    stop = first_stop(epochs((1.9, 0.70), (25.0, 0.75)), start=2.0)
    assert stop == (2, "diverged: training loss 25 at epoch 2, 12x the 2 of its first step")
    # 10x of a loss that starts near 0 (a student that begins as its teacher) is not an explosion below 1
    assert first_stop(epochs((0.05, 0.80), (0.5, 0.80)), start=0.01) is None
    assert first_stop(epochs((19.0, 0.80)), start=2.0) is None  # 9.5x: not yet


def test_the_floor_is_the_best_constant_answer_on_the_validation_labels():
    sst2, mrpc, stsb = get_task("sst2"), get_task("mrpc"), get_task("stsb")
    val = [{"label": y} for y in [1] * 6 + [0] * 4]
    f = floor_of(sst2, val)
    assert (f.metric, f.score) == ("val_accuracy", 0.6) and "always answering" in f.answer
    # F1 (MRPC's main metric, if it is): answering the positive class always scores its F1, even when positives are rare
    rare = [{"label": y} for y in [1] * 2 + [0] * 8]
    main = mrpc.main_metric
    expected = 2 * 0.2 / 1.2 if main == "f1" else 0.8
    assert floor_of(mrpc, rare).score == pytest.approx(expected)
    # a regression's constant answer correlates 0
    assert floor_of(stsb, [{"label": x} for x in (0.5, 1.0, 4.2)]).score == 0.0
    assert floor_of(sst2, []) is None


# ------------------------------------------------------------------ the loop (in-process, no Ray)
def _cfg(tiny_teacher, glue_dir, **train):
    from tests.unit.train.test_loop import cfg_for

    cfg = cfg_for("sst2", tiny_teacher("classification", 2), glue_dir, "kd", epochs=3, alpha=0.5, temperature=2.0)
    return cfg.replace(train=dataclasses.replace(cfg.train, **train))


def _run(cfg, resume_dir=None):
    from raydistill.train.loop import Context, run

    reports = []
    out = run(cfg, Context(report=lambda m, c: reports.append(m), resume_dir=resume_dir))
    return out, reports


SHORT = {"batch_size": 16, "max_steps": 18, "max_length": 32}  # 3 epochs of 6 steps


def test_a_nan_loss_stops_the_run_after_that_epoch_reported(tiny_teacher, glue_dir):
    out, reports = _run(_cfg(tiny_teacher, glue_dir, **SHORT).replace(fault="nan:epoch=1"))
    assert len(reports) == 1 and out["epoch"] == 1  # stopped after epoch 1 of 3, that epoch reported
    assert out["diverged"].startswith("diverged: training loss not finite at epoch 1")
    assert "val_accuracy" in out and "best_val_accuracy" in out  # its last score, for the searcher


def test_a_nan_loss_fails_the_run_with_stop_diverged_off(tiny_teacher, glue_dir):
    from raydistill.train.loop import NonFiniteLoss

    with pytest.raises(NonFiniteLoss):
        _run(_cfg(tiny_teacher, glue_dir, stop_diverged=False, **SHORT).replace(fault="nan:epoch=1"))


def test_a_huge_learning_rate_stops_after_epoch_1_and_a_resume_trains_no_further(tiny_teacher, glue_dir, tmp_path):
    import os
    import shutil

    from raydistill.train.loop import Context, run

    cfg = _cfg(tiny_teacher, glue_dir, lr=100.0, **SHORT)
    kept, reports = tmp_path / "ckpt", []

    def report(m, ckpt):
        reports.append(m)
        shutil.copytree(os.path.dirname(ckpt), kept, dirs_exist_ok=True)  # what a runner persists

    out = run(cfg, Context(report=report))
    assert len(reports) == 1 and out["epoch"] == 1, [m.get("diverged") for m in reports]
    assert "diverged: training loss" in out["diverged"] and "of its first step" in out["diverged"]
    # Tune restarting the trial: it reports its stopped epoch again and trains nothing
    again, reports = _run(cfg, resume_dir=str(kept / "checkpoint"))
    assert len(reports) == 1 and again["epoch"] == 1 and again["diverged"] == out["diverged"]


def test_a_run_at_the_floor_of_its_validation_labels_stops_and_a_healthy_one_does_not(
    tiny_teacher, glue_dir, monkeypatch
):
    from raydistill.config.schema import task_of
    from raydistill.data.splits import train_val_dev
    from raydistill.tasks.metrics import constant_floor
    from raydistill.train import diverge

    cfg = _cfg(tiny_teacher, glue_dir, lr=1e-3, **SHORT)
    out, reports = _run(cfg)  # 18 steps: too few to judge the floor, and the loss is fine
    assert len(reports) == 3 and not any("diverged" in m for m in reports), [m.get("diverged") for m in reports]
    assert reports[0]["train_loss_start"] > 0  # the yardstick of exploding, logged
    assert 0 < reports[0][SHARE] <= 1  # the collapse evidence, logged with val's scores
    # the same run judged from its first step on: 18 steps of a random tiny student learn nothing here; whatever
    # share of its answers is one class counts as collapsed (the share rule has its own test above)
    monkeypatch.setattr(diverge, "FLOOR_MIN_STEPS", 0)
    monkeypatch.setattr(diverge, "COLLAPSE_SHARE", 0.0)
    monkeypatch.setattr(diverge, "FLOOR_PATIENCE", 0.0)
    out, reports = _run(cfg)
    _, val, dev = train_val_dev(cfg, task_of(cfg))
    floor, _ = constant_floor(task_of(cfg), [e["label"] for e in val])  # from validation's labels, not dev's
    assert len(reports) == 1 and out["val_accuracy"] <= floor + diverge.FLOOR_MARGIN
    assert out["diverged"].startswith(f"diverged: val accuracy {out['val_accuracy']:.4f}")
    assert f"the majority floor {floor:.4f}" in out["diverged"] and out["diverged"].endswith("after epoch 1")
    # the same collapse while the rate still warms up (half the 18 steps: 9 > epoch 1's 6): judged after epoch 2
    out, reports = _run(cfg.replace(train=dataclasses.replace(cfg.train, warmup_ratio=0.5)))
    assert len(reports) == 2 and out["diverged"].endswith("after epoch 2")
    # the same collapse before half the prediction stage's steps (9 of 18): judged after epoch 2, as the loop counts
    monkeypatch.setattr(diverge, "FLOOR_PATIENCE", 0.5)
    out, reports = _run(cfg)
    assert len(reports) == 2 and out["diverged"].endswith("after epoch 2")
    # the same epoch, its answers not collapsed: trains on
    monkeypatch.setattr(diverge, "COLLAPSE_SHARE", 1.01)
    out, reports = _run(cfg)
    assert len(reports) == 3 and "diverged" not in out


@pytest.mark.slow
def test_a_sweep_stops_the_diverging_trial_and_tells_the_searcher(
    ray_session, tiny_teacher, glue_dir, tmp_path, capsys, monkeypatch
):
    """Two trials, the space's two start recipes: lr 1e-3 trains its 3 epochs, lr 100 stops after epoch 1; the
    summary, MLflow and the Optuna study say so."""
    import json

    import optuna
    from mlflow.tracking import MlflowClient

    from raydistill import sweep

    monkeypatch.chdir(tmp_path)
    uri = f"sqlite:///{tmp_path / 'm.db'}"
    recipe = "{temperature: 2, alpha: 0.5, init: every_other, lr: %s}"
    sweep.main(
        [
            "kd_glue",
            "--task",
            "sst2",
            "--data-dir",
            glue_dir,
            "--teacher",
            tiny_teacher("classification", 2),
            "--num-samples",
            "2",
            *("--set", "student.size=2L-32-64-2"),
            *("--set", "train.lr={loguniform: [1.0e-4, 1000]}"),
            *("--set", f"search.start_from=[{recipe % '1.0e-3'}, {recipe % '100'}]"),
            *("--set", "search.asha=false", "--set", "search.confirm=false", "--set", "search.control=false"),
            *("--epochs", "3", "--max-steps", "18", "--batch-size", "16", "--max-length", "32", "--eval-limit", "16"),
            *("--tracking-uri", uri, "--name", "diverge", "--experiment", "diverge"),
        ]
    )
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert out["trials"] == 2 and out["errors"] == 0 and out["diverged"] == 1
    rows = json.load(open(tmp_path / "raydistill-results" / "sweeps" / "diverge" / "summary.json"))
    by_lr = {float(r["config"]["lr"]): r for r in rows}
    bad, good = by_lr[100.0], by_lr[1e-3]
    assert (good["status"], good["epoch"], good["error"]) == ("DONE", 3, "")
    assert (bad["status"], bad["epoch"]) == ("STOPPED", 1) and bad["error"].startswith("stopped: diverged: ")
    text = open(tmp_path / "raydistill-results" / "sweeps" / "diverge" / "summary.txt").read()
    assert "stopped: diverged: training loss" in text
    c = MlflowClient(uri)
    runs = {
        r.data.tags["raydistill.trial_id"]: r
        for r in c.search_runs([c.get_experiment_by_name("diverge").experiment_id])
        if "raydistill.trial_id" in r.data.tags
    }
    stopped = runs[bad["trial"]]
    assert (
        stopped.info.status == "FINISHED"
        and stopped.data.tags["raydistill.stopped"] == bad["error"][len("stopped: ") :]
    )
    assert [m.step for m in c.get_metric_history(stopped.info.run_id, "val_accuracy")] == [1]  # its epoch kept
    assert "raydistill.stopped" not in runs[good["trial"]].data.tags
    # Optuna was told the diverged trial's score (COMPLETE, not PRUNED): TPE learns its recipe is bad
    study = optuna.load_study(study_name="diverge/diverge", storage=f"sqlite:///{tmp_path / 'optuna.db'}")
    states = sorted(t.state.name for t in study.trials)
    assert states == ["COMPLETE", "COMPLETE"], states
    assert sorted(t.value for t in study.trials) == sorted([bad["best_val_accuracy"], good["best_val_accuracy"]])
