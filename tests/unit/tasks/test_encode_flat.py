"""Text features held flat (issue 48: a list of Python ints per row took ~12× the arrays): ``encode`` tokenises a few
hundred rows at a time into int32 ids and int8 masks and segment ids, and each row still reads as the dict one
tokenizer call over every row made (the same keys, Python lists and ints, labels, indices), on real GLUE rows."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

from raydistill.tasks import encode as encoding
from raydistill.tasks import get_task
from raydistill.tasks.encode import IGNORE, MODEL_INPUTS, FlatFeatures, collate, encode, lengths
from raydistill.testing import make_tokenizer

ROWS = 1200  # past several chunks of CHUNK_TEST rows, the last one short
CHUNK_TEST = 250


def one_call(task, examples: list[dict], tok, max_length: int) -> list[dict]:
    """The features as ``encode`` made them before (a6671d0): one tokenizer call over every row, a dict per row."""
    pairs = [e.get("text_pair") for e in examples]
    texts = [e["text"] for e in examples]
    enc = tok(texts, pairs if any(p is not None for p in pairs) else None, truncation=True, max_length=max_length)
    cast = float if task.kind == "regression" else int
    none = float("nan") if task.kind == "regression" else IGNORE
    return [
        {
            **{k: enc[k][i] for k in MODEL_INPUTS if k in enc},
            "labels": none if ex["label"] is None else cast(ex["label"]),
            "feature_index": i,
        }
        for i, ex in enumerate(examples)
    ]


@pytest.fixture(scope="module")
def glue_rows(shared_data):
    """The first training rows of SST-2 (single sentences), MRPC (pairs) and STS-B (pairs, scores)."""
    out = {}
    for name in ("sst2", "mrpc", "stsb"):
        task = get_task(name)
        out[name] = task, task.loader(task, f"{shared_data}/glue", "train")[:ROWS]
    return out


@pytest.fixture(scope="module", params=["bert", "roberta"])
def glue_tok(request, glue_rows, tmp_path_factory):
    texts = [e[k] for _, rows in glue_rows.values() for e in rows[:800] for k in ("text", "text_pair") if e.get(k)]
    return make_tokenizer(tmp_path_factory.mktemp("tok"), request.param, texts=texts)


@pytest.mark.parametrize("name", ["sst2", "mrpc", "stsb"])
def test_flat_features_equal_one_tokenizer_call(glue_rows, glue_tok, name, monkeypatch):
    task, rows = glue_rows[name]
    rows = [dict(r, label=None) if i % 7 == 3 else r for i, r in enumerate(rows)]  # augmented copies: no gold label
    monkeypatch.setattr(encoding, "CHUNK", CHUNK_TEST)
    for length in (128, 16):  # 16: many rows truncated
        got, want = encode(task, rows, glue_tok, length), one_call(task, rows, glue_tok, length)
        feats = got.features
        assert isinstance(feats, FlatFeatures) and len(feats) == len(want) == len(rows)
        dtypes = {"input_ids": np.int32, "attention_mask": np.int8, "token_type_ids": np.int8}
        assert {k: c.dtype for k, c in feats.columns.items()} == {
            k: np.dtype(t) for k, t in dtypes.items() if k in want[0]
        }
        assert feats.labels.dtype == (np.float64 if task.kind == "regression" else np.int64)
        for f, w in zip(feats, want, strict=True):
            assert list(f) == list(w)  # the keys in the same order
            assert [f[k] for k in MODEL_INPUTS if k in w] == [w[k] for k in MODEL_INPUTS if k in w]
            nan = isinstance(w["labels"], float) and math.isnan(w["labels"])
            assert math.isnan(f["labels"]) if nan else f["labels"] == w["labels"]
            assert type(f["labels"]) is type(w["labels"]) and f["feature_index"] == w["feature_index"]
            assert type(f["input_ids"][0]) is int
        assert list(got.example_index) == list(range(len(rows)))
        assert lengths(feats) == [len(w["input_ids"]) for w in want]
        batch, old = collate(feats[:64], glue_tok.pad_token_id), collate(want[:64], glue_tok.pad_token_id)
        assert batch.keys() == old.keys()
        assert all(batch[k].dtype == old[k].dtype and batch[k].equal(old[k]) for k in batch if k != "labels")


def test_chunk_boundaries_do_not_change_the_features(glue_rows, glue_tok, monkeypatch):
    task, rows = glue_rows["mrpc"]
    rows = rows[:300]
    whole = encode(task, rows, glue_tok, 64)
    for chunk in (1, 7, len(rows) - 1):
        monkeypatch.setattr(encoding, "CHUNK", chunk)
        again = encode(task, rows, glue_tok, 64).features
        assert again == whole.features
        assert all(np.array_equal(again.columns[k], c) for k, c in whole.features.columns.items())  # type: ignore[attr-defined]


def test_flat_features_read_as_a_list_of_rows():
    ids = np.array([5, 6, 7, 8, 9], np.int32)
    feats = FlatFeatures(
        {"input_ids": ids, "attention_mask": np.ones(5, np.int8)}, np.array([0, 2, 2, 5]), np.array([1, 0, IGNORE])
    )
    rows = [
        {"input_ids": [5, 6], "attention_mask": [1, 1], "labels": 1, "feature_index": 0},
        {"input_ids": [], "attention_mask": [], "labels": 0, "feature_index": 1},
        {"input_ids": [7, 8, 9], "attention_mask": [1, 1, 1], "labels": IGNORE, "feature_index": 2},
    ]
    assert feats == rows and rows == feats and list(feats) == rows and feats != rows[:2]
    assert feats[-1] == rows[2] and feats[1:] == rows[1:] and feats[::-1] == rows[::-1]
    with pytest.raises(IndexError):
        feats[3]
    assert sorted(f["feature_index"] for f in random.Random(0).sample(feats, 3)) == [0, 1, 2]
    assert lengths(feats) == [2, 0, 3] and lengths(rows) == [2, 0, 3]


def test_no_rows_encode_to_no_features(glue_tok):
    enc = encode(get_task("sst2"), [], glue_tok, 32)
    assert len(enc) == 0 and list(enc.features) == [] and lengths(enc.features) == []
