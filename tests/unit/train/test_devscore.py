"""Scoring runs rows longest first (little padding) and hands the outputs back in the split's own order: every row's
output is the one it gets alone, for sequence-level and token-level tasks, whatever the batch size."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from transformers import AutoModelForSequenceClassification, AutoModelForTokenClassification

from raydistill.tasks.encode import Encoded, collate
from raydistill.testing import make_tiny_model
from raydistill.train.scoring import by_length, model_outputs
from raydistill.train.step import forward


def _features(n=23, seed=0):
    rng = np.random.default_rng(seed)
    return [
        {
            "input_ids": [2] + rng.integers(5, 60, size=int(k)).tolist() + [3],
            "attention_mask": [1] * (int(k) + 2),
            "labels": int(k) % 2,
            "feature_index": i,
        }
        for i, k in enumerate(rng.integers(1, 40, size=n))
    ]


def test_by_length_is_longest_first_and_stable():
    feats = [{"input_ids": [0] * k} for k in (3, 7, 3, 9, 7)]
    assert by_length(feats) == [3, 1, 4, 0, 2]


@pytest.mark.parametrize(
    "kind,cls", [("classification", AutoModelForSequenceClassification), ("token", AutoModelForTokenClassification)]
)
def test_outputs_come_back_in_row_order_and_match_each_row_alone(kind, cls, tmp_path):
    model = cls.from_pretrained(make_tiny_model(tmp_path / "m", kind, 3)).eval()
    feats = _features()
    with torch.no_grad():
        alone = [forward(model, collate([f], 0), need_hidden=False).logits[0].numpy() for f in feats]
    task = type("T", (), {"kind": kind})()
    for batch_size in (1, 4, 64):
        got = model_outputs(model, task, Encoded(feats, list(range(len(feats)))), 0, batch_size, torch.device("cpu"))
        assert len(got["logits"]) == len(feats)
        for row, want in zip(got["logits"], alone, strict=True):
            np.testing.assert_allclose(row, want, atol=1e-5)
