"""General distillation on unlabelled text, then task distillation from that student; augmented training sets."""

from __future__ import annotations

import json
import shutil

import pytest

from raydistill.config.schema import DistillConfig, RunConfig, StudentConfig, TrainConfig
from raydistill.train.loop import Context, run
from tests.conftest import _texts


def _keep_last(dst):
    def report(m, ckpt):
        shutil.rmtree(dst, ignore_errors=True)
        shutil.copytree(f"{ckpt}/student", dst)

    return report


@pytest.mark.parametrize(
    "method,extra",
    [
        ("tinybert", {"stage": "intermediate", "mapping": "uniform"}),
        ("distilbert", {"alpha": 0.5, "alpha_mlm": 1.0, "alpha_cos": 1.0}),
        ("minilm", {"stage": "intermediate", "teacher_layer": -1}),
    ],
)
def test_general_then_task_distillation(method, extra, tiny_teacher, glue_dir, tmp_path):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(_texts() * 2) + "\n")
    mlm_teacher = tiny_teacher("mlm")
    student = StudentConfig(layers=2, hidden=32, intermediate=64, heads=2, init="random")
    train = TrainConfig(epochs=1, batch_size=8, max_steps=4, max_length=32, lr=1e-3)
    general = RunConfig(
        task="general",
        teacher=mlm_teacher,
        unlabeled_text=str(corpus),
        student=student,
        distill=DistillConfig(method=method, **extra),
        train=train,
    ).validate()
    out = run(general, Context(report=_keep_last(tmp_path / "general")))
    assert {"eval_mlm_loss", "eval_mlm_accuracy"} <= set(out)
    assert out["train_loss"] > 0

    task_cfg = RunConfig(
        task="sst2",
        teacher=tiny_teacher("classification", 2),
        data_dir=glue_dir,
        student=StudentConfig(layers=2, hidden=32, intermediate=64, heads=2, init=f"checkpoint:{tmp_path / 'general'}"),
        distill=DistillConfig(method="kd", alpha=0.5),
        train=train,
    ).validate()
    res = run(task_cfg, Context(report=_keep_last(tmp_path / "task")))
    assert "eval_accuracy" in res
    from transformers import AutoModelForSequenceClassification

    AutoModelForSequenceClassification.from_pretrained(tmp_path / "task")


def test_tinybert_trains_on_an_augmented_set(tiny_teacher, glue_dir, tmp_path):
    from raydistill.data.augmentation import AugmentOptions, augment
    from raydistill.tasks import get_task

    task = get_task("sst2")
    # rows tagged with the training row they come from: the run leaves out those of its validation split
    examples = [{**e, "source_index": i} for i, e in enumerate(task.loader(task, glue_dir, "train")[:16])]
    aug = augment(examples, tiny_teacher("mlm"), AugmentOptions(p=0.4, k=3, n=2, seed=0))
    assert len(aug) == 48 and all("source_index" in e for e in aug)
    (tmp_path / "aug").mkdir()
    with open(tmp_path / "aug" / "train.jsonl", "w") as f:
        f.writelines(json.dumps(e) + "\n" for e in aug)
    cfg = RunConfig(
        task="sst2",
        teacher=tiny_teacher("classification", 2),
        data_dir=glue_dir,
        augment_dir=str(tmp_path / "aug"),
        student=StudentConfig(layers=2, hidden=32, intermediate=64, heads=2, init="random"),
        distill=DistillConfig(method="tinybert", stage="pred", temperature=1.0, alpha=1.0),
        train=TrainConfig(epochs=1, batch_size=8, max_length=32, lr=1e-3, eval_limit=16),
    ).validate()
    reports = []
    run(cfg, Context(report=lambda m, c: reports.append(m)))
    assert reports[0]["epoch"] == 1
