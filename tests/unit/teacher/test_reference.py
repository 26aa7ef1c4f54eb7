"""The teacher as a sweep's yardstick (``teacher/reference.py``): its dev score once, the majority floor, the weak
teacher's warning."""

from __future__ import annotations

import pytest

from raydistill.config.schema import RunConfig, TrainConfig
from raydistill.tasks import get_task
from tests.unit.selection.test_runs import _rows


def test_teacher_reference_scores_the_students_dev_set_once(tiny_teacher, glue_dir, tmp_path, monkeypatch):
    from raydistill.models import encoder as teacher_mod
    from raydistill.teacher import reference

    monkeypatch.setenv("RAYDISTILL_CACHE_DIR", str(tmp_path))
    from raydistill.models import latency

    monkeypatch.setattr(latency, "busy", lambda: 0.0)  # a quiet machine: a timing under load is not memoised
    cfg = RunConfig(
        task="sst2",
        teacher=tiny_teacher("classification", 2),
        data_dir=glue_dir,
        train=TrainConfig(max_length=32, eval_limit=24),
    ).validate()
    ref = reference.teacher_reference(cfg, threads=1)
    assert 0.0 <= ref["eval_accuracy"] <= 1.0 and ref["student_params"] > 0 and ref["latency_ms_b1"] > 0

    from raydistill.train.saved import evaluate_dir

    same = evaluate_dir(cfg.teacher, "sst2", glue_dir, max_length=32, eval_limit=24)  # the dev rows a student sees
    assert ref["eval_accuracy"] == pytest.approx(same["eval_accuracy"])
    monkeypatch.setattr(teacher_mod, "load_model", lambda *a, **k: pytest.fail("memoised: no second load"))
    assert reference.teacher_reference(cfg, threads=1) == ref


def test_the_majority_floor_of_every_metric_is_the_constant_answer_scored():
    """Issue 45 item 6: the floor is the training rows' most common label scored by the task's own metric functions
    on the dev labels — F1 of a constant positive answer is not 0, so a weak teacher warns on f1 and macro-F1 too."""
    from dataclasses import replace

    from raydistill.tasks import get_task
    from raydistill.teacher.reference import majority, weak_teacher

    train = [{"text": f"t{i}", "label": int(i < 70)} for i in range(100)]  # 70% positive
    dev = [{"text": f"d{i}", "label": int(i < 68)} for i in range(100)]  # 68% positive
    mrpc = get_task("mrpc")
    floor = majority(mrpc, train, dev)
    assert floor["majority_accuracy"] == pytest.approx(0.68)
    assert floor["majority_f1"] == pytest.approx(2 * 0.68 / 1.68)  # precision 0.68, recall 1
    on_f1 = replace(mrpc, main_metric="f1")  # a file task choosing on f1
    assert "within 2 points" in weak_teacher({**floor, "eval_f1": 0.81}, on_f1)
    assert weak_teacher({**floor, "eval_f1": 0.90}, on_f1) is None
    macro = replace(mrpc, metrics=("macro_f1", "mcc"), main_metric="macro_f1")
    floor = majority(macro, train, dev)
    assert floor["majority_macro_f1"] == pytest.approx(0.68 / 1.68) and floor["majority_mcc"] == 0.0
    assert weak_teacher({**floor, "eval_macro_f1": 0.41}, macro)
    stsb = get_task("stsb")
    scores = [{"text": f"s{i}", "label": i / 20} for i in range(100)]
    assert majority(stsb, scores, scores) == {"majority_pearson": 0.0, "majority_spearman": 0.0}


def test_weak_teacher_is_warned_about():
    from raydistill.tasks import get_task
    from raydistill.teacher.reference import majority, weak_teacher

    task = get_task("sst2")
    train, dev = _rows([0] * 70 + [1] * 30), _rows([0] * 68 + [1] * 32)
    ref = {**majority(task, train, dev), "eval_accuracy": 0.69}
    assert ref["majority_accuracy"] == pytest.approx(0.68) and "within 2 points" in weak_teacher(ref, task)
    assert weak_teacher({**ref, "eval_accuracy": 0.85}, task) is None
    stsb = get_task("stsb")
    assert weak_teacher({**majority(stsb, train, dev), "eval_pearson": 0.01}, stsb)


def test_the_sweep_reference_still_scores_the_training_majority_on_dev():
    from raydistill.teacher.reference import majority

    sst2 = get_task("sst2")
    train = [{"label": 1}] * 3 + [{"label": 0}] * 2
    dev = [{"label": 0}] * 3 + [{"label": 1}]
    # train's majority (1), scored on dev: accuracy 0.25, macro-F1 (0.4 + 0) / 2
    assert majority(sst2, train, dev) == {"majority_accuracy": 0.25, "majority_macro_f1": pytest.approx(0.2)}
