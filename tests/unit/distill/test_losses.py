"""Every loss against a number worked out by hand from its formula (math/numpy, never the function itself)."""

import math

import numpy as np
import pytest
import torch

from raydistill.common.errors import UserError
from raydistill.distill import losses as L
from tests.paths import ROOT

t = torch.tensor


def approx(x):
    return pytest.approx(x, rel=1e-5, abs=1e-7)


def _softmax(z):
    e = np.exp(np.asarray(z, dtype=np.float64) - np.max(z))
    return e / e.sum()


def _kl(zt, zs, T):
    pt, ps = _softmax(np.asarray(zt) / T), _softmax(np.asarray(zs) / T)
    return float((pt * (np.log(pt) - np.log(ps))).sum())


def test_every_loss_says_what_it_computes():
    for name in (
        "soft_ce",
        "hard_loss",
        "logit_mse",
        "qa_logit_mse",
        "regression_mse",
        "hidden_mse",
        "attention_mse",
        "cosine_hidden",
        "pkd_patient",
        "mlm_loss",
    ):
        assert getattr(L, name).__doc__, name
    # the convention is written once, in docs/methods.md, and the module points there (issue 39)
    assert "docs/methods.md" in L.__doc__ and "The loss convention" in L.__doc__

    doc = (ROOT / "docs" / "methods.md").read_text(encoding="utf-8")
    convention = doc.split("## The loss convention", 1)[1].split("\n## ", 1)[0]
    assert "T²" in convention and "α" in convention and "β" in convention


def test_soft_ce_t_squared_and_batch_mean():
    # row 0: student [1, 0], teacher [0, 1], T = 2 -> z/T = [.5, 0] vs [0, .5]
    pt1 = math.exp(0.5) / (1 + math.exp(0.5))  # teacher prob of class 1
    kl_row0 = pt1 * math.log(pt1 / (1 - pt1)) + (1 - pt1) * math.log((1 - pt1) / pt1)
    # row 1: identical logits -> KL 0; batch mean halves row 0, T² = 4
    got = L.soft_ce(t([[1.0, 0.0], [3.0, -1.0]]), t([[0.0, 1.0], [3.0, -1.0]]), T=2.0)
    assert got.item() == approx(4 * kl_row0 / 2)
    assert L.soft_ce(t([[1.0, 0.0]]), t([[0.0, 1.0]]), T=1.0).item() == approx(_kl([0, 1], [1, 0], 1.0))
    assert L.soft_ce(t([[2.0, 5.0, 1.0]]), t([[2.0, 5.0, 1.0]]), T=4.0).item() == approx(0.0)


def test_soft_ce_token_mask_counts_real_tokens_only():
    s = t([[[1.0, 0.0], [9.0, -9.0]], [[0.0, 0.0], [0.0, 2.0]]])  # [B=2, T=2, C=2]
    te = t([[[0.0, 1.0], [-9.0, 9.0]], [[0.0, 0.0], [1.0, 0.0]]])
    mask = t([[1, 0], [1, 1]])
    expected = 9 * (_kl([0, 1], [1, 0], 3) + 0.0 + _kl([1, 0], [0, 2], 3)) / 3  # 3 real tokens, T = 3
    assert L.soft_ce(s, te, T=3.0, mask=mask).item() == approx(expected)


def test_hard_loss_per_kind():
    # classification: CE([2, 0], y=0) = log(1 + e^-2)
    ce = L.hard_loss("classification", t([[2.0, 0.0]]), {"labels": t([0])})
    assert ce.item() == approx(math.log(1 + math.exp(-2)))
    # regression: ((1.5-1)² + (0-1)²) / 2
    assert L.hard_loss("regression", t([[1.5], [0.0]]), {"labels": t([1.0, 1.0])}).item() == approx(0.625)
    # augmented copies have no gold label (-100, NaN): the mean is over the labelled rows only
    ce = L.hard_loss("classification", t([[2.0, 0.0], [9.0, -9.0], [0.0, math.log(3)]]), {"labels": t([0, -100, 1])})
    assert ce.item() == approx((math.log(1 + math.exp(-2)) + math.log(4 / 3)) / 2)
    mse = L.hard_loss("regression", t([[1.5], [7.0], [0.0]]), {"labels": t([1.0, float("nan"), 1.0])})
    assert mse.item() == approx(0.625)
    # token: only the first token counts; CE([0, ln 3], y=1) = log(4/3)
    logits = t([[[0.0, math.log(3)], [5.0, 0.0]]])
    assert L.hard_loss("token", logits, {"labels": t([[1, -100]])}).item() == approx(math.log(4 / 3))
    # qa: start CE([0, 0, 0], 2) = log 3; end CE([ln 2, 0, 0], 0) = log 2 => mean
    start, end = t([[0.0, 0.0, 0.0]]), t([[math.log(2), 0.0, 0.0]])
    batch = {"start_positions": t([2]), "end_positions": t([0])}
    assert L.hard_loss("qa", (start, end), batch).item() == approx((math.log(3) + math.log(2)) / 2)

    class Out:  # model outputs work as well as bare tensors
        start_logits, end_logits = start, end

    assert L.hard_loss("qa", Out(), batch).item() == approx((math.log(3) + math.log(2)) / 2)


def test_logit_and_regression_mse():
    assert L.logit_mse(t([[1.0, 2.0]]), t([[0.0, 0.0]])).item() == approx(2.5)  # (1 + 4) / 2
    s, te = t([[[1.0, 1.0], [7.0, 7.0]]]), t([[[0.0, 3.0], [0.0, 0.0]]])
    assert L.logit_mse(s, te, mask=t([[1, 0]])).item() == approx(2.5)  # (1 + 4) / 2, padded token ignored
    assert L.regression_mse(t([[2.0], [0.0]]), t([1.0, 3.0])).item() == approx(5.0)  # (1 + 9) / 2


def test_qa_logit_mse_masks_padding():
    s_start, t_start = t([[1.0, 2.0, 100.0]]), t([[0.0, 0.0, -1e4]])
    s_end, t_end = t([[0.0, 3.0, 5.0]]), t([[0.0, 0.0, 0.0]])
    mask = t([[1, 1, 0]])
    assert L.qa_logit_mse(s_start, s_end, t_start, t_end, mask).item() == approx(((1 + 4) / 2 + (0 + 9) / 2) / 2)


def test_hidden_mse_with_projection_and_mask():
    hs = t([[[1.0, 2.0], [5.0, 5.0]]])  # [1, 2, 2]
    W = t([[1.0, 0.0, 1.0], [0.0, 1.0, 1.0]])  # [2, 3]; h W = [1, 2, 3] for token 0
    ht = t([[[0.0, 2.0, 1.0], [5.0, 5.0, 10.0]]])  # token 1: h W = [5, 5, 10] -> diff 0
    assert L.hidden_mse(hs, ht, proj=W).item() == approx((1 + 0 + 4 + 0) / 6)
    assert L.hidden_mse(hs, ht, proj=W, mask=t([[1, 0]])).item() == approx(5 / 3)
    lin = torch.nn.Linear(2, 3, bias=False)
    with torch.no_grad():
        lin.weight.copy_(W.T)
    assert L.hidden_mse(hs, ht, proj=lin).item() == approx(5 / 6)
    assert L.embedding_mse(t([[[1.0, 3.0]]]), t([[[0.0, 0.0]]])).item() == approx(5.0)
    with pytest.raises(UserError):
        L.hidden_mse(hs, ht)  # 2 vs 3 wide without a projection


def test_attention_mse_over_real_query_key_pairs():
    s = t([[[[1.0, 2.0], [3.0, 4.0]]]])  # [B=1, A=1, 2, 2]
    te = torch.zeros(1, 1, 2, 2)
    # token 1 is padding: only the (query 0, key 0) score counts -> 1² / 1
    assert L.attention_mse(s, te, t([[1, 0]])).item() == approx(1.0)
    assert L.attention_mse(s, te, t([[1, 1]])).item() == approx((1 + 4 + 9 + 16) / 4)
    assert L.attention_mse(s, te).item() == approx((1 + 4 + 9 + 16) / 4)
    # two examples, two heads: the padded example adds 2 heads × 1 pair, the full one 2 heads × 4 pairs
    s2 = torch.stack([torch.cat([s[0], 2 * s[0]]), torch.cat([s[0], s[0]])])  # [2, 2, 2, 2]
    got = L.attention_mse(s2, torch.zeros_like(s2), t([[1, 1], [1, 0]])).item()
    assert got == approx(((1 + 4 + 9 + 16) + 4 * (1 + 4 + 9 + 16) + 1 + 1) / (8 + 2))
    with pytest.raises(UserError) as e:
        L.attention_mse(torch.zeros(1, 2, 2, 2), torch.zeros(1, 4, 2, 2), t([[1, 1]]))
    assert e.value.field == "student.heads"


def test_cosine_hidden_mean_over_real_tokens():
    hs = t([[[1.0, 0.0], [1.0, 1.0], [3.0, -1.0]]])
    ht = t([[[0.0, 1.0], [2.0, 2.0], [1.0, 1.0]]])  # cos: 0, 1, (3 - 1) / (sqrt 10 sqrt 2)
    c3 = 2 / (math.sqrt(10) * math.sqrt(2))
    assert L.cosine_hidden(hs, ht, t([[1, 1, 0]])).item() == approx((1 - 0 + 1 - 1) / 2)
    assert L.cosine_hidden(hs, ht, t([[1, 1, 1]])).item() == approx((1 + 0 + 1 - c3) / 3)


def test_pkd_patient_normalised_mse_averaged_over_layers():
    # layer 1: [3, 4] -> [.6, .8] vs [1, 0]: squares .16 + .64 over 2 dims = .4; layer 2: equal up to scale -> 0
    s = [t([[3.0, 4.0]]), t([[2.0, 0.0]])]
    te = [t([[1.0, 0.0]]), t([[5.0, 0.0]])]
    assert L.pkd_patient(s, te).item() == approx((0.4 + 0.0) / 2)
    with pytest.raises(UserError):
        L.pkd_patient(s, te[:1])


def test_mlm_loss_ignores_unmasked_positions():
    logits = torch.zeros(1, 3, 4)  # uniform over 4 tokens -> CE log 4
    logits[0, 1] = t([0.0, 0.0, 0.0, math.log(5)])  # p(3) = 5 / 8
    labels = t([[2, 3, -100]])
    assert L.mlm_loss(logits, labels).item() == approx((math.log(4) + math.log(8 / 5)) / 2)


def test_losses_are_differentiable_scalars():
    s = torch.randn(2, 3, requires_grad=True)
    loss = L.soft_ce(s, torch.randn(2, 3), T=2.0)
    loss.backward()
    assert loss.dim() == 0 and s.grad is not None
