import pytest
import torch

from raydistill.common.errors import UserError
from raydistill.config.schema import StudentConfig
from raydistill.models import features
from raydistill.models.encoder import load_model
from raydistill.models.features import AttentionCapture, forward_features
from raydistill.models.student import build_student
from raydistill.testing import TinyShape, make_tiny_model

LAYERS = 4


@pytest.fixture(scope="module", params=["bert", "roberta"])
def model(request, tmp_path_factory):
    d = make_tiny_model(
        tmp_path_factory.mktemp(request.param),
        kind="classification",
        shape=TinyShape(family=request.param, layers=LAYERS, hidden=32, heads=2, intermediate=64),
    )
    return load_model(d, "classification")


def batch(model):
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(3, model.config.vocab_size, (3, 7), generator=g)
    mask = torch.ones(3, 7, dtype=torch.long)
    mask[1, 5:] = 0
    mask[2, 3:] = 0
    return {"input_ids": ids, "attention_mask": mask}


@pytest.fixture
def sdpa_calls(monkeypatch):
    calls = []
    real = torch.nn.functional.scaled_dot_product_attention

    def counting(*a, **kw):
        calls.append(1)
        return real(*a, **kw)

    monkeypatch.setattr(torch.nn.functional, "scaled_dot_product_attention", counting)
    return calls


def manual_scores(model, hidden_in, layer):
    sa = model.base_model.encoder.layer[layer].attention.self
    B, T, _ = hidden_in.shape

    def split(x):
        return x.view(B, T, sa.num_attention_heads, sa.attention_head_size).transpose(1, 2)

    return split(sa.query(hidden_in)) @ split(sa.key(hidden_in)).transpose(-1, -2) * sa.attention_head_size**-0.5


def test_eval_outputs_equal_and_only_requested_layers_captured(model, sdpa_calls):
    model.eval()
    inputs = batch(model)
    with torch.no_grad():
        ref = model(**inputs, output_hidden_states=True)
        assert len(sdpa_calls) == LAYERS  # plain model: every layer fused
        sdpa_calls.clear()
        with AttentionCapture(model, {1, 3}) as cap:
            out = model(**inputs, output_hidden_states=True)
    assert len(sdpa_calls) == LAYERS - 2  # layers 0 and 2 stayed on sdpa
    assert sorted(cap.scores) == [1, 3]
    assert cap.scores[1].shape == (3, 2, 7, 7)
    torch.testing.assert_close(out.logits, ref.logits, atol=1e-5, rtol=0)
    for a, b in zip(out.hidden_states, ref.hidden_states, strict=True):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=0)
    # pre-softmax, before the padding mask: q kᵀ · scaling from the layer's input
    for layer in (1, 3):
        torch.testing.assert_close(
            cap.scores[layer], manual_scores(model, ref.hidden_states[layer], layer), atol=1e-5, rtol=1e-5
        )
    assert model.config._attn_implementation == "sdpa" and not features._ACTIVE


def test_train_mode_grads_equal_and_flow_through_scores(model):
    model.train()
    for m in model.modules():  # dropout off so both runs are deterministic
        if isinstance(m, torch.nn.Dropout):
            m.p = 0.0
    inputs = batch(model)
    model.zero_grad()
    model(**inputs).logits.sum().backward()
    ref = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    model.zero_grad()
    with AttentionCapture(model, {0, 2}) as cap:
        out = model(**inputs)
    out.logits.sum().backward()
    for n, g in ref.items():
        torch.testing.assert_close(dict(model.named_parameters())[n].grad, g, atol=1e-5, rtol=1e-4)

    model.zero_grad()
    with AttentionCapture(model, {1}) as cap:
        model(**inputs)
    assert cap.scores[1].requires_grad
    cap.scores[1].pow(2).mean().backward()
    layers = model.base_model.encoder.layer
    assert layers[1].attention.self.query.weight.grad.abs().sum() > 0
    assert layers[2].attention.self.query.weight.grad is None  # above the captured layer: no gradient
    model.eval()


def test_teacher_and_student_captured_together(model, sdpa_calls):
    model.eval()
    student = build_student(model, StudentConfig(layers=2, hidden=32, intermediate=64, heads=2, init="first_k"))
    inputs = batch(model)
    with AttentionCapture(model, {3}) as t_cap, AttentionCapture(student, {1}) as s_cap:
        with torch.no_grad():
            model(**inputs)
        student(**inputs)
    assert len(sdpa_calls) == (LAYERS - 1) + 1
    assert not t_cap.scores[3].requires_grad and s_cap.scores[1].requires_grad
    assert sorted(t_cap.scores) == [3] and sorted(s_cap.scores) == [1]
    # an empty layer set leaves the model untouched
    with torch.no_grad(), AttentionCapture(model, set()) as none:
        model(**inputs)
    assert none.scores == {} and model.config._attn_implementation == "sdpa"


def test_forward_features_and_errors(model):
    model.eval()
    with torch.no_grad():
        out, scores = forward_features(model, batch(model), attention_layers=[0, LAYERS - 1])
    assert len(out.hidden_states) == LAYERS + 1 and sorted(scores) == [0, LAYERS - 1]
    with pytest.raises(UserError):
        AttentionCapture(model, {LAYERS})
    cap = AttentionCapture(model, {0})
    with cap, pytest.raises(UserError):
        with AttentionCapture(model, {0}):
            pass
    assert model.config._attn_implementation == "sdpa" and not features._ACTIVE


def test_restores_on_error(model):
    with pytest.raises(RuntimeError):
        with AttentionCapture(model, {0}):
            raise RuntimeError("boom")
    assert model.config._attn_implementation == "sdpa" and not features._ACTIVE
