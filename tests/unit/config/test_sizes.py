"""Student sizes relative to the teacher (raydistill/config/sizes.py): resolved numbers, and one-line refusals."""

from __future__ import annotations

import re

import optuna
import pytest

from raydistill.common.errors import UserError
from raydistill.config import space as sp
from raydistill.config.sizes import Shape, resolve

MINILM, BASE, LARGE = Shape(6, 384, 1536, 12), Shape(12, 768, 3072, 12), Shape(24, 1024, 4096, 16)
SHIPPED = [
    "pkd_glue",
    "kd_glue",
    "distilbert_glue",
    "tinybert_glue",
    "two_stage_nsmc",
    "two_stage_korquad",
    "two_stage_ner",
]


@pytest.mark.parametrize(
    "values,teacher,want",
    [
        ({}, BASE, (6, 768, 3072, 12)),  # default: half depth at the teacher's width
        ({"layers": 0.25}, BASE, (3, 768, 3072, 12)),  # PKD's 3-layer student
        ({"layers": 0.33, "hidden": 0.4}, BASE, (4, 312, 1248, 12)),  # TinyBERT-4's 312 wide, 12 heads of 26
        ({"layers": 0.5}, MINILM, (3, 384, 1536, 12)),
        ({"layers": "teacher", "hidden": 0.5}, LARGE, (24, 512, 2048, 16)),
        ({"layers": 4, "hidden": 312, "intermediate": 1200, "heads": 12}, BASE, (4, 312, 1200, 12)),  # absolute
        ({"hidden": 320, "heads": "auto"}, BASE, (6, 320, 1280, 5)),  # 12 does not divide 320: 64-wide heads
        ({"intermediate": "teacher", "heads": "teacher"}, LARGE, (12, 1024, 4096, 16)),
    ],
)
def test_resolve(values, teacher, want):
    assert tuple(resolve(values, teacher).values()) == want


@pytest.mark.parametrize(
    "values,field,msg",
    [
        ({"layers": 0.03}, "student.layers", "rounds to 0 layers"),
        ({"layers": 1.5}, "student.layers", "fraction in (0, 1]"),
        ({"layers": "auto"}, "student.layers", "'auto' applies to intermediate and heads"),
        ({"hidden": 100}, "student.hidden", "divisible neither"),
        ({"hidden": 100, "heads": 12}, "student.hidden", "not divisible by student.heads=12"),
        ({"intermediate": 0.5}, "student.intermediate", "a fraction applies to layers, hidden and heads"),
        ({"heads": "many"}, "student.heads", "is not a size"),
    ],
)
def test_bad_relative_size_names_the_field(values, field, msg):
    with pytest.raises(UserError, match=re.escape(msg)) as e:
        resolve(values, BASE)
    assert e.value.field == field


@pytest.mark.parametrize("teacher", [MINILM, BASE, LARGE], ids=["6L-384", "12L-768", "24L-1024"])
@pytest.mark.parametrize("name", SHIPPED)
def test_every_named_space_resolves_for_any_teacher(name, teacher):
    """No named space hard-codes a teacher width: every student it can draw is valid for each teacher, and the
    values a trial logs are the resolved numbers."""
    spec = sp.load(name)
    sp.sample(spec, None, teacher)  # the validation pass checks every combination of choices
    study = optuna.create_study(sampler=optuna.samplers.TPESampler(seed=0))
    for p in sp.start_points(spec, teacher):
        study.enqueue_trial(p)
    for _ in range(4):
        t = study.ask()
        vals = sp.sample(spec, t, teacher)
        sizes = [vals[f"student_{k}"] for k in ("layers", "hidden", "intermediate", "heads")]
        assert all(isinstance(v, int) and v > 0 for v in sizes)
        assert vals["student_layers"] < teacher.layers and vals["student_hidden"] <= teacher.hidden
        assert vals["student_hidden"] % vals["student_heads"] == 0
        if vals["method"] in ("tinybert", "two_stage"):
            assert vals["student_heads"] == teacher.heads  # attention scores are matched head by head


def test_relative_values_need_the_teacher_before_they_become_a_config():
    spec = sp.load("pkd_glue", ["student.layers=0.5"])
    assert "student_layers" not in sp.sample(spec, None)  # unresolved without a teacher: nothing half-built
    assert sp.sample(spec, None, MINILM)["student_layers"] == 3
