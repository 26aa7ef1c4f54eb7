"""Every named space works with any teacher, with no --set (slow): random-weight teachers shaped like MiniLM-L6-H384,
BERT-base and BERT-large (config only, made here) each run one tiny trial of every space, in process (no Ray: the
real Ray sweep on a MiniLM-shaped teacher is in test_sweep.py, which runs after the tests that require Ray to be
off)."""

from __future__ import annotations

import math

import optuna
import pytest

from raydistill.config import space as sp
from raydistill.config.schema import RunConfig, TrainConfig
from raydistill.config.sizes import Shape

pytestmark = pytest.mark.slow

SHAPES = {
    "6L-384-12h": Shape(6, 384, 1536, 12),
    "12L-768-12h": Shape(12, 768, 3072, 12),
    "24L-1024-16h": Shape(24, 1024, 4096, 16),
}
SPACES = [
    "pkd_glue",
    "kd_glue",
    "distilbert_glue",
    "tinybert_glue",
    "two_stage_nsmc",
    "two_stage_korquad",
    "two_stage_ner",
]
KO_LABELS = ("O", "B-PS", "I-PS", "B-LC", "I-LC", "B-OG", "I-OG", "B-DT", "I-DT", "B-TI", "I-TI", "B-QT", "I-QT")
# the task each space runs on here: the GLUE spaces on the synthetic SST-2, the Korean ones on their own tasks
TASK = {
    "two_stage_nsmc": ("nsmc", "classification"),
    "two_stage_korquad": ("korquad", "qa"),
    "two_stage_ner": ("klue_ner", "token"),
}


@pytest.fixture(scope="module")
def teachers(tiny_teacher):
    def make(shape: str, kind: str):
        s = SHAPES[shape]
        extra = {"num_labels": len(KO_LABELS), "label_names": KO_LABELS} if kind == "token" else {}
        return tiny_teacher(kind, layers=s.layers, hidden=s.hidden, heads=s.heads, intermediate=s.intermediate, **extra)

    return make


@pytest.mark.parametrize("shape", list(SHAPES))
@pytest.mark.parametrize("name", SPACES)
def test_named_space_runs_one_trial_with_any_teacher(name, shape, teachers, glue_dir, korean_dir, monkeypatch):
    """The trial config is built as the sweep builds it (first trial = the space's published recipe), preflighted,
    and trained for two tiny epochs by the same loop the Ray workers run."""
    from raydistill.train import loop
    from raydistill.train.preflight import preflight, teacher_config

    monkeypatch.setattr(loop, "_speed", lambda student, device: {"student_params": 1})  # latency is not tested here
    task, kind = TASK.get(name, ("sst2", "classification"))
    teacher = teachers(shape, kind)
    spec = sp.load(name)
    tshape = Shape.of(teacher_config(teacher))
    assert tshape == SHAPES[shape]
    base = RunConfig(
        task=task,
        teacher=teacher,
        data_dir=korean_dir if name in TASK else glue_dir,
        # one step of 2 rows per epoch, 4 rows of dev and of val scored: what any shape is checked by (the config, the
        # models built from it, a step of each stage and the scoring), at the least compute (a 24L-1024 teacher's
        # forward is most of a case's time)
        train=TrainConfig(epochs=2, max_steps=2, batch_size=2, max_length=24, train_limit=4, eval_limit=4),
    ).validate()
    sp.sample(spec, None, tshape)  # the sweep's validation pass
    study = optuna.create_study()
    for point in sp.start_points(spec, tshape):
        study.enqueue_trial(point)
    cfg = sp.trial_config(base, sp.sample(spec, study.ask(), tshape))
    cfg = preflight(cfg, load_data=False)
    s = cfg.student
    assert s.layers == round(tshape.layers / 2) and s.hidden == tshape.hidden  # every recipe starts at half depth
    reports = []
    out = loop.run(cfg, loop.Context(report=lambda m, c: reports.append(m)))
    assert len(reports) == 2 and math.isfinite(out["train_loss"])
    assert any(k.startswith("eval_") for k in out)
