"""Every method on every task kind, in-process (no Ray): the plain-PyTorch loop trains and evaluates."""

from __future__ import annotations

import dataclasses
import math
import os

import pytest

from raydistill.config.schema import DistillConfig, RunConfig, StudentConfig, TrainConfig
from raydistill.teacher.cache import open_cache
from raydistill.train.loop import Context, run

KO_LABELS = ("O", "B-PS", "I-PS", "B-LC", "I-LC", "B-OG", "I-OG", "B-DT", "I-DT", "B-TI", "I-TI", "B-QT", "I-QT")


def cfg_for(task, teacher, data_dir, method, epochs=1, **distill):
    student = StudentConfig(layers=2, hidden=32, intermediate=64, heads=2, init="random")
    return RunConfig(
        task=task,
        teacher=teacher,
        data_dir=data_dir,
        student=student,
        distill=DistillConfig(method=method, **distill),
        train=TrainConfig(epochs=epochs, batch_size=8, max_steps=4 * epochs, max_length=64, lr=1e-3, eval_limit=16),
    ).validate()


def run_local(cfg):
    reports = []
    out = run(cfg, Context(report=lambda m, c: reports.append((m, c)), open_cache=open_cache))
    assert len(reports) == cfg.train.epochs
    assert all(c is not None for _, c in reports)  # rank 0 checkpoints every epoch
    return out, reports


CASES = [  # (task, kind, method, extra distill args) — every method and every task kind
    ("sst2", "classification", "kd", {"alpha": 0.5, "temperature": 2.0}),
    ("mrpc", "classification", "distilbert", {"alpha": 0.5, "alpha_cos": 1.0}),
    ("stsb", "regression", "pkd", {"alpha": 0.5, "beta": 100.0, "mapping": "skip"}),
    ("sst2", "classification", "tinybert", {"mapping": "uniform"}),
    ("sst2", "classification", "two_stage", {"mapping": "top"}),
    ("sst2", "classification", "finetune", {}),
]


@pytest.mark.parametrize("task,kind,method,extra", CASES, ids=[c[2] + "-" + c[0] for c in CASES])
def test_method_runs(task, kind, method, extra, tiny_teacher, glue_dir):
    num_labels = 1 if kind == "regression" else 2
    teacher = tiny_teacher(kind, num_labels)
    epochs = 2 if method in ("tinybert", "two_stage") else 1
    out, reports = run_local(cfg_for(task, teacher, glue_dir, method, epochs=epochs, **extra))
    assert math.isfinite(out["train_loss"])
    assert any(k.startswith("eval_") for k in out)
    if method in ("tinybert", "two_stage"):
        assert reports[0][0]["stage"] == "intermediate" and reports[1][0]["stage"] == "pred"
        assert {"train_att", "train_hidden", "train_emb"} <= set(reports[0][0])


def test_token_tagging_two_stage(tiny_teacher, korean_dir):
    teacher = tiny_teacher("token", len(KO_LABELS), label_names=KO_LABELS)
    out, _ = run_local(cfg_for("klue_ner", teacher, korean_dir, "two_stage", epochs=2))
    assert 0.0 <= out["eval_f1"] <= 1.0


def test_span_qa_kd_and_two_stage(tiny_teacher, korean_dir):
    teacher = tiny_teacher("qa")
    out, _ = run_local(cfg_for("korquad", teacher, korean_dir, "kd", temperature=2.0))
    assert {"eval_exact_match", "eval_f1"} <= set(out)
    out, _ = run_local(cfg_for("korquad", teacher, korean_dir, "two_stage", epochs=2))
    assert math.isfinite(out["train_loss"])


def test_nsmc_two_stage_holds_out_validation(tiny_teacher, korean_dir):
    from raydistill.data.splits import train_val_dev
    from raydistill.tasks import get_task

    cfg = cfg_for("nsmc", tiny_teacher("classification", 2), korean_dir, "two_stage", epochs=2)
    train, val, dev = train_val_dev(cfg, get_task("nsmc"))
    # ~10% of 96 held out as dev by the carve's grouped, stratified rule (10 rows; the labelled test set untouched),
    # then ~10% of the rest carved as val
    assert (len(train), len(val), len(dev)) == (77, 9, 10)
    ids = [{id(e) for e in rows} for rows in (train, val, dev)]
    assert not ids[0] & ids[1] and not ids[0] & ids[2] and not ids[1] & ids[2]  # the loader's rows: none in two
    run_local(cfg)


def test_resume_continues_from_checkpoint(tiny_teacher, glue_dir, tmp_path):
    """A run resumed from its epoch-1 checkpoint finishes epoch 2 exactly as the uninterrupted run."""
    import shutil

    teacher = tiny_teacher("classification", 2, dropout=0.0)
    cfg = cfg_for("sst2", teacher, glue_dir, "kd", epochs=2, alpha=0.5)
    full, reports = [], []

    def keep(m, c):
        full.append(m)
        if m["epoch"] == 1:
            shutil.copytree(c, tmp_path / "ckpt")

    run(cfg, Context(report=keep))
    run(cfg, Context(resume_dir=str(tmp_path / "ckpt"), report=lambda m, c: reports.append(m)))
    assert [r["epoch"] for r in reports] == [2]
    assert reports[0]["train_loss"] == pytest.approx(full[1]["train_loss"], rel=1e-5)
    assert reports[0]["eval_accuracy"] == pytest.approx(full[1]["eval_accuracy"])


def test_teacher_dtype_follows_config_and_hardware(monkeypatch):
    import torch

    from raydistill.train import precision

    cpu = torch.device("cpu")
    monkeypatch.setattr(precision, "cpu_bf16", lambda: True)
    assert precision.teacher_dtype(TrainConfig(), cpu) == "bf16"
    assert precision.teacher_dtype(TrainConfig(teacher_bf16=False), cpu) == "fp32"
    assert precision.step_dtype(TrainConfig(), cpu) == "fp32"  # the student step stays fp32 on CPU
    monkeypatch.setattr(precision, "cpu_bf16", lambda: False)  # no native bf16: the exact fp32 teacher
    assert precision.teacher_dtype(TrainConfig(), cpu) == "fp32"


def test_cpu_bf16_step_is_opt_in_and_params_say_what_ran(monkeypatch):
    """``train.cpu_bf16`` autocasts the student step only where the CPU has native bf16; the run's params name what
    ran (the asked-for ``bf16: True`` on a CPU trains fp32), not what was asked."""
    import torch

    from raydistill.train import precision

    cpu = torch.device("cpu")
    monkeypatch.setattr(precision, "cpu_bf16", lambda: True)
    assert precision.step_dtype(TrainConfig(cpu_bf16=True), cpu) == "bf16"
    assert precision.effective(TrainConfig(cpu_bf16=True)) == {
        "student_step_precision": "bf16",
        "teacher_precision": "bf16",
    }
    assert precision.effective(TrainConfig(teacher_bf16=False))["teacher_precision"] == "fp32"
    monkeypatch.setattr(precision, "cpu_bf16", lambda: False)  # asked for, not there: fp32, and the params say so
    assert precision.step_dtype(TrainConfig(cpu_bf16=True), cpu) == "fp32"
    assert precision.effective(TrainConfig(cpu_bf16=True)) == {
        "student_step_precision": "fp32",
        "teacher_precision": "fp32",
    }
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)  # a cluster's driver: what its GPU workers run
    assert precision.effective(TrainConfig(use_gpu=True))["student_step_precision"] == "bf16 where the GPU has it"


def test_cpu_bf16_step_trains_and_moves_losses_little(tiny_teacher, glue_dir, monkeypatch):
    """A bf16-autocast student step (opt-in) trains the same rows and steps; its losses stay within a few percent of
    fp32 (rounding, not another recipe)."""
    from raydistill.train import precision

    monkeypatch.setattr(precision, "cpu_bf16", lambda: True)
    teacher = tiny_teacher("classification", 2, dropout=0.0)
    cfg = cfg_for("sst2", teacher, glue_dir, "kd", epochs=1, alpha=0.5, temperature=2.0)
    fp32, _ = run_local(cfg)
    logs: list = []
    bf16 = run(cfg.replace(train=dataclasses.replace(cfg.train, cpu_bf16=True)), Context(log=logs.append))
    assert any("student step under bf16 autocast" in m for m in logs)
    assert bf16["train_loss"] == pytest.approx(fp32["train_loss"], rel=5e-2), (bf16["train_loss"], fp32["train_loss"])


@pytest.mark.parametrize(
    "method,extra",
    [("kd", {"alpha": 0.5, "temperature": 2.0}), ("tinybert", {"mapping": "uniform", "stage": "intermediate"})],
)
def test_bf16_teacher_losses_within_one_percent_of_fp32(method, extra, tiny_teacher, glue_dir, monkeypatch, tmp_path):
    """The bf16-autocast teacher (default where native) moves every training loss by < 1% (the issue's bound);
    the cache built under it is keyed apart from the fp32 one."""
    import os

    from raydistill.train import precision

    monkeypatch.setattr(precision, "cpu_bf16", lambda: True)  # autocast works on any CPU, natively or not
    teacher = tiny_teacher("classification", 2, dropout=0.0)
    cfg = cfg_for("sst2", teacher, glue_dir, method, epochs=2, **extra)
    fp32_train = dataclasses.replace(cfg.train, teacher_bf16=False)
    fp32, _ = run_local(cfg.replace(train=fp32_train))
    bf16, _ = run_local(cfg)
    for k in fp32:
        if k.startswith("train_") and k != "train_examples_per_s":
            assert bf16[k] == pytest.approx(fp32[k], rel=1e-2, abs=1e-5), k
    if method == "kd":
        cache = str(tmp_path / "cache")
        run_local(cfg.replace(teacher_cache=cache))
        run_local(cfg.replace(teacher_cache=cache, train=fp32_train))
        assert len([d for d in os.listdir(cache) if not d.endswith(".lock")]) == 2  # bf16 and fp32 outputs apart


@pytest.mark.parametrize(
    "method,extra,layers",
    [
        ("pkd", {"mapping": "uniform", "beta": 10.0}, {"1"}),  # the pair of the last layer is left to KD: no projection
        ("tinybert", {"mapping": "uniform"}, {"0", "1", "2"}),
        ("distilbert", {"alpha_cos": 1.0}, {"2"}),
        ("distilbert", {"alpha_cos": 0.0}, set()),
        ("kd", {}, set()),
    ],
)
def test_projections_only_for_the_layers_the_losses_read(method, extra, layers, tiny_teacher, glue_dir):
    from raydistill.train.objective import build_objective

    cfg = cfg_for("sst2", tiny_teacher("classification", 2), glue_dir, method, **extra)
    narrow = cfg.replace(student=dataclasses.replace(cfg.student, hidden=16, intermediate=32))
    assert set(build_objective(narrow)[0].projections) == layers
    assert not build_objective(cfg)[0].projections  # as wide as the teacher: nothing to project


def test_each_stage_gets_its_own_optimizer_and_schedule(tiny_teacher, glue_dir, monkeypatch):
    """Stage 2 starts from an empty AdamW state with its own warm-up from 0 and linear decay over its own steps."""
    from raydistill.train import step as step_mod

    seen, step = [], step_mod.optimizer_step

    def record(model, loss, opt, sched):
        seen.append((len(opt.state), opt.param_groups[0]["lr"]))
        step(model, loss, opt, sched)

    monkeypatch.setattr(step_mod, "optimizer_step", record)
    cfg = cfg_for(
        "sst2",
        tiny_teacher("classification", 2),
        glue_dir,
        "tinybert",
        epochs=3,
        mapping="uniform",
        intermediate_epochs=1,
    )
    run_local(cfg.replace(train=dataclasses.replace(cfg.train, warmup_ratio=0.5)))  # 4 steps per epoch
    lr = cfg.train.lr
    assert len(seen) == 12 and seen[0][0] == 0 and seen[3][0] > 0
    assert seen[4][0] == 0 and seen[5][0] > 0  # stage 2 starts from an empty AdamW state
    assert [x for _, x in seen[:4]] == pytest.approx([0, lr / 2, lr, lr / 2])  # stage 1: 2 warm-up steps of 4
    assert [x for _, x in seen[4:]] == pytest.approx([0, lr / 4, lr / 2, 3 * lr / 4, lr, 3 * lr / 4, lr / 2, lr / 4])


def test_two_stage_resumes_between_and_inside_stages(tiny_teacher, glue_dir, tmp_path):
    """Resumed after stage 1 or in the middle of stage 2, the run finishes as the uninterrupted one: the right
    stage's optimizer comes back, and (re-seeded per epoch) the same dropout masks are drawn."""
    import shutil

    cfg = cfg_for(
        "sst2",
        tiny_teacher("classification", 2),
        glue_dir,
        "tinybert",
        epochs=3,
        mapping="uniform",
        intermediate_epochs=1,
    )  # student dropout 0.1
    full = []

    def keep(m, c):
        full.append(m)
        shutil.copytree(c, tmp_path / f"epoch{m['epoch']}")

    run(cfg, Context(report=keep))
    assert [m["stage"] for m in full] == ["intermediate", "pred", "pred"]
    # the student is chosen among the prediction stage's epochs (selection.epoch.best_epoch), whatever stage 1 scored
    assert full[0]["best_epoch"] == 1 and all(m["best_epoch"] in (2, 3) for m in full[1:])
    for after in (1, 2):
        resumed = []
        run(
            cfg,
            Context(resume_dir=str(tmp_path / f"epoch{after}"), report=lambda m, c, resumed=resumed: resumed.append(m)),
        )
        assert [m["epoch"] for m in resumed] == list(range(after + 1, 4))
        for a, b in zip(resumed, full[after:], strict=True):
            assert a["train_loss"] == pytest.approx(b["train_loss"], rel=1e-5), after
            assert a["eval_accuracy"] == pytest.approx(b["eval_accuracy"]), after


def _fingerprint(model) -> float:
    return float(sum(p.detach().double().sum() for p in model.parameters()))


def test_best_epoch_is_reported_checkpointed_and_kept_on_resume(tiny_teacher, glue_dir, tmp_path, monkeypatch):
    """Epoch 2 is best by the main metric on the validation split and epoch 3 worse (while the dev score, which only
    reports, would have picked epoch 1): every report names the best epoch, its val and its eval metrics, the checkpoint
    keeps its student beside the latest one, and a resumed run keeps it."""
    import shutil

    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    from raydistill.train import loop

    real, scripted, dev_scripted = loop.dev_metrics, [], []

    def evaluate(model, data, batch_size, device, progress=None):  # the real metrics, with scripted main metrics
        out = real(model, data, batch_size, device, progress)
        return {
            **out,
            "val_real_accuracy": out["val_accuracy"],
            "val_accuracy": scripted.pop(0),
            "eval_accuracy": dev_scripted.pop(0),
            "eval_fingerprint": _fingerprint(model),
        }

    monkeypatch.setattr(loop, "dev_metrics", evaluate)
    cfg = cfg_for("sst2", tiny_teacher("classification", 2), glue_dir, "kd", epochs=3, alpha=0.5)
    reports = []

    def keep(m, c):
        reports.append(m)
        shutil.copytree(c, tmp_path / f"epoch{m['epoch']}")

    scripted[:], dev_scripted[:] = [0.5, 0.9, 0.6], [0.95, 0.7, 0.8]
    run(cfg, Context(report=keep))
    assert [m["best_epoch"] for m in reports] == [1, 2, 2]
    second = reports[1]
    for k in ("val_accuracy", "val_real_accuracy", "eval_accuracy", "eval_fingerprint"):
        assert reports[2][f"best_{k}"] == second[k]
    assert reports[2]["best_eval_accuracy"] == 0.7  # the dev score of the epoch val chose, not the best dev score
    assert reports[2]["val_accuracy"] == 0.6

    def load(epoch, which):
        return AutoModelForSequenceClassification.from_pretrained(tmp_path / f"epoch{epoch}" / which)

    assert _fingerprint(load(1, "best_student")) == pytest.approx(reports[0]["eval_fingerprint"], rel=1e-12)
    assert _fingerprint(load(3, "student")) == pytest.approx(reports[2]["eval_fingerprint"], rel=1e-12)
    best = load(3, "best_student")
    assert _fingerprint(best) == pytest.approx(second["eval_fingerprint"], rel=1e-12)
    assert _fingerprint(best) != pytest.approx(reports[2]["eval_fingerprint"], rel=1e-9)
    data = loop.load_data(cfg, AutoTokenizer.from_pretrained(cfg.teacher))  # the best student scores as epoch 2
    assert real(best, data, 32, torch.device("cpu"))["val_accuracy"] == second["val_real_accuracy"]

    resumed = []
    scripted[:], dev_scripted[:] = [0.6], [0.99]
    shutil.rmtree(tmp_path / "epoch3")
    run(
        cfg,
        Context(
            resume_dir=str(tmp_path / "epoch2"),
            report=lambda m, c: (resumed.append(m), shutil.copytree(c, tmp_path / "epoch3")),
        ),
    )
    assert resumed[0]["best_epoch"] == 2 and resumed[0]["best_eval_fingerprint"] == second["eval_fingerprint"]
    assert _fingerprint(load(3, "best_student")) == pytest.approx(second["eval_fingerprint"], rel=1e-12)


def test_each_epoch_shows_progress_on_rank_0(tiny_teacher, glue_dir):
    """A line every ~10% of an epoch (step/total, examples/s, time left) through the run's logger, while training and
    while scoring; none from rank 1."""
    cfg = cfg_for("sst2", tiny_teacher("classification", 2), glue_dir, "tinybert", epochs=2, mapping="uniform")
    lines = []
    run(cfg, Context(log=lines.append))
    prog = [ln for ln in lines if ln.startswith("epoch ") and " scoring " not in ln]
    assert prog[0].startswith("epoch 1/2 intermediate: 1/4 (25%)") and prog[3].startswith("epoch 1/2 intermediate: 4/4")
    assert prog[-1].startswith("epoch 2/2 pred: 4/4 (100%)") and all("ex/s" in ln and "left" in ln for ln in prog)
    # scoring shows progress too (it once ran minutes without a line): both splits' rows, every epoch
    scoring = [ln for ln in lines if " scoring " in ln]
    n = cfg.train.eval_limit * 2  # dev's rows and validation's: --eval-limit bounds both
    for epoch in (1, 2):
        done = [ln for ln in scoring if ln.startswith(f"epoch {epoch}/2 scoring val + dev: ")]
        assert done and done[-1].split(": ")[1].startswith(f"{n}/{n} (100%)") and "rows/s" in done[-1]


def test_a_stopped_trials_checkpoint_folder_is_removed(tiny_teacher, glue_dir, tmp_path, monkeypatch):
    """A trial stopped at a report (ASHA, Ctrl-C: Ray raises out of it) must not leave its epoch's checkpoint folder
    behind: ~270 MB each for a 3L-384 student, 31 of them found in /tmp after a day of sweeps."""
    import tempfile

    class Stopped(Exception):
        pass

    def report(metrics, ckpt_dir):
        assert os.path.isdir(ckpt_dir)
        raise Stopped

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    with pytest.raises(Stopped):
        run(cfg_for("sst2", tiny_teacher("classification"), glue_dir, "kd", epochs=2), Context(report=report))
    assert not [p for p in os.listdir(tmp_path) if p.startswith("raydistill-ckpt-")], os.listdir(tmp_path)


def test_epoch_rows_draws_fresh_rows_each_epoch_and_scores_after_each(tiny_teacher, glue_dir, monkeypatch):
    """``train.epoch_rows``: each epoch trains ``epoch_rows // batch_size`` steps on the first batches of its own
    shuffle (a fresh draw, not the same rows again), val scores after every such epoch, and the schedule spans them
    all (decay to 0 over epochs x steps)."""
    from raydistill.train import loop
    from raydistill.train import step as step_mod

    rows, lrs, step = [], [], step_mod.optimizer_step
    original = loop.Trainer._step

    def record_rows(self, epoch, i, idx, stage, sums):
        rows.append((epoch, tuple(idx)))
        original(self, epoch, i, idx, stage, sums)

    def record_lr(model, loss, opt, sched):
        lrs.append(opt.param_groups[0]["lr"])
        step(model, loss, opt, sched)

    monkeypatch.setattr(loop.Trainer, "_step", record_rows)
    monkeypatch.setattr(step_mod, "optimizer_step", record_lr)
    cfg = cfg_for("sst2", tiny_teacher("classification", 2), glue_dir, "kd", epochs=3)
    cfg = cfg.replace(train=dataclasses.replace(cfg.train, max_steps=0, epoch_rows=20, train_limit=64))
    out, reports = run_local(cfg)  # 64 rows (less val), batch 8: 2 steps per epoch, not the whole pass
    assert [e for e, _ in rows] == [0, 0, 1, 1, 2, 2]
    drawn = [set().union(*(set(i) for e, i in rows if e == k)) for k in range(3)]
    assert len({frozenset(d) for d in drawn}) == 3  # each epoch its own rows
    assert all(any(k.startswith("val_") for k in m) for m, _ in reports)  # val scored after every epoch
    assert len(lrs) == 6 and lrs[-1] > 0 and lrs[1] > lrs[-1]  # one warm-up + decay over all 6 steps


def test_epoch_rows_over_the_sets_size_trains_that_many_rows_each_epoch(tiny_teacher, glue_dir, monkeypatch):
    """``train.epoch_rows`` above the training rows: each epoch still trains ``epoch_rows // batch_size`` steps, pass
    after pass of fresh shuffles (a labels-only control of an augmented winner trains the winner's steps), not one
    pass."""
    from raydistill.train import loop

    steps, original = [], loop.Trainer._step

    def record(self, epoch, i, idx, stage, sums):
        steps.append((epoch, tuple(idx)))
        original(self, epoch, i, idx, stage, sums)

    monkeypatch.setattr(loop.Trainer, "_step", record)
    cfg = cfg_for("sst2", tiny_teacher("classification", 2), glue_dir, "kd", epochs=2)
    cfg = cfg.replace(train=dataclasses.replace(cfg.train, max_steps=0, epoch_rows=96, train_limit=32))
    run_local(cfg)  # 32 rows less val, batch 8: 3 steps a pass; 96 rows: 12 steps an epoch
    assert [e for e, _ in steps] == [0] * 12 + [1] * 12
    first = [i for e, idx in steps[:3] for i in idx]
    assert len(set(first)) == len(first)  # a pass holds each row once


def test_epoch_rows_is_checked():
    from raydistill.common.errors import UserError

    with pytest.raises(UserError, match="train.epoch_rows"):
        TrainConfig(epoch_rows=-1).validate()
