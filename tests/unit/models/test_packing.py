"""Unpadded forwards (models/packing.py, train.attention) and the compiled student step (train.compile): the same
outputs, losses and gradients as the padded, eager path."""

from __future__ import annotations

import pytest
import torch

from raydistill.config.schema import DistillConfig, RunConfig, StudentConfig, TrainConfig
from raydistill.models.encoder import load_model
from raydistill.models.packing import packed_forward, prepare

TINY = dict(layers=2, hidden=32, intermediate=64, heads=2)
TEXTS = ["a good film", "bad", "a truly good and very fine film here", "fine film"]


def _batch(tokenizer, labels=True) -> dict:
    batch = dict(tokenizer(TEXTS, padding=True, return_tensors="pt"))
    if labels:
        batch["labels"] = torch.tensor([1, 0, 1, 1])
    return batch


@pytest.mark.parametrize("family,kind", [("bert", "classification"), ("roberta", "token"), ("bert", "qa")])
def test_packed_forward_matches_padded(tiny_teacher, family, kind):
    from transformers import AutoTokenizer

    path = tiny_teacher(kind, 3 if kind == "token" else 2, family=family)
    model = load_model(path, kind).eval()
    inputs = _batch(AutoTokenizer.from_pretrained(path), labels=False)
    real = inputs["attention_mask"].bool()
    assert not real.all()  # the batch has padding
    padded = model(**inputs, output_hidden_states=True)
    prepare(model)
    packed = packed_forward(model, inputs, hidden_states=True)
    for key in ("logits", "start_logits", "end_logits"):
        a, b = getattr(padded, key, None), getattr(packed, key, None)
        if a is not None:
            a, b = (a[real], b[real]) if a.shape[:2] == real.shape else (a, b)
            torch.testing.assert_close(b, a, atol=1e-5, rtol=1e-5)
    assert len(packed.hidden_states) == len(padded.hidden_states)
    for a, b in zip(padded.hidden_states, packed.hidden_states, strict=True):
        torch.testing.assert_close(b[real], a[real], atol=1e-5, rtol=1e-5)
    # a padded call on the prepared model is plain sdpa again
    key = "start_logits" if kind == "qa" else "logits"
    torch.testing.assert_close(getattr(model(**inputs), key), getattr(padded, key))


def _step(model, teacher, objective, batch, stage):
    """Losses and gradients of one step (dropout off: the layouts draw their masks differently)."""
    from raydistill.train.step import teacher_outputs

    model.zero_grad(set_to_none=True)
    t_out = teacher_outputs(teacher, None, objective, batch, list(range(len(TEXTS))), stage, "cpu", "fp32")
    losses = model(batch, t_out, stage)
    losses["loss"].backward()
    grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    return {k: v.detach() for k, v in losses.items()}, grads


def _objective(tiny_teacher, method: str, **distill):
    from raydistill.train.objective import build_objective
    from raydistill.train.step import Distiller

    cfg = RunConfig(
        task="sst2",
        teacher=tiny_teacher("classification", 2),
        student=StudentConfig(**TINY),
        distill=DistillConfig(method=method, **distill),
        train=TrainConfig(attention="padded"),
    ).validate()
    objective, student, teacher, tokenizer = build_objective(cfg)
    model = Distiller(student, objective).eval()
    return model, teacher, objective, _batch(tokenizer)


def _assert_same(a, b, atol=1e-5):
    (la, ga), (lb, gb) = a, b
    assert la.keys() == lb.keys() and ga.keys() == gb.keys()
    for k in la:
        torch.testing.assert_close(lb[k], la[k], atol=atol, rtol=1e-4)
    for k in ga:
        torch.testing.assert_close(gb[k], ga[k], atol=atol, rtol=1e-4, msg=lambda m, k=k: f"{k}: {m}")


@pytest.mark.parametrize(
    "method,distill",
    [("kd", {}), ("pkd", {}), ("distilbert", {}), ("two_stage", {}), ("tinybert", {}), ("minilm", {})],
)
def test_unpadded_step_equals_padded(tiny_teacher, method, distill):
    # tinybert's and minilm's intermediate stages read scores or queries/keys/values: they stay padded
    model, teacher, objective, batch = _objective(tiny_teacher, method, **distill)
    for stage in objective.method.stages:
        objective.use_layout("padded")
        padded = _step(model, teacher, objective, batch, stage)
        objective.use_layout("unpadded")
        _assert_same(padded, _step(model, teacher, objective, batch, stage))


def test_compiled_student_step_equals_eager(tiny_teacher):
    from raydistill.train.step import compile_student

    torch._dynamo.reset()
    model, teacher, objective, batch = _objective(tiny_teacher, "distilbert")
    objective.use_layout("unpadded")
    eager = _step(model, teacher, objective, batch, "pred")
    compile_student(model.student, backend="aot_eager")
    _assert_same(eager, _step(model, teacher, objective, batch, "pred"))
    assert not any("_orig_mod" in k for k in model.student.state_dict())  # checkpoints keep their keys


def test_cache_key_differs_by_layout(tiny_teacher, glue_dir):
    from raydistill.teacher.cache import cache_key

    def cfg(attention):
        return RunConfig(
            task="sst2",
            teacher=tiny_teacher("classification", 2),
            data_dir=glue_dir,
            train=TrainConfig(attention=attention),
        ).validate()

    assert cache_key(cfg("padded"), "classification") != cache_key(cfg("unpadded"), "classification")


def test_attention_layout_is_checked():
    from raydistill.common.errors import UserError

    with pytest.raises(UserError, match="train.attention"):
        TrainConfig(attention="packed").validate()


@pytest.mark.parametrize("lengths", [[3, 1, 4], [2, 0, 3, 0], [5]])
def test_flat_index_places_each_token_in_its_row(lengths):
    # searchsorted over all of cu_seqlens (not its slice cu[1:], which torch 2.11's Inductor cannot lower on a GPU):
    # every packed token lands at its row's next position in the padded layout, empty rows included
    from raydistill.models.packing import _flat_index

    cu = torch.tensor([0, *torch.tensor(lengths).cumsum(0).tolist()], dtype=torch.int32)
    max_len = max(lengths)
    want = [r * max_len + j for r, n in enumerate(lengths) for j in range(n)]
    assert _flat_index(cu, sum(lengths), max_len).tolist() == want
