"""An augmented set's encoded rows cached on disk (``data/encoded.py``): the same features ``encode`` makes, read back
by the next run instead of tokenised again, one entry per exact rows, tokenizer, length and kind."""

from __future__ import annotations

import json
import math
import os

import pytest

from raydistill.data import encoded
from raydistill.tasks import get_task
from raydistill.tasks.encode import IGNORE, encode
from raydistill.testing import make_tokenizer

TEXTS = ["the movie was good and the plot was great", "what was good", "un believable", "a bad film"]
PAIRS = [
    {"text": "a bad film", "text_pair": "the movie was good and the plot was great", "label": 1},
    {"text": "good", "text_pair": "bad", "label": None},  # an augmented copy: no gold label
    {"text": "what was good", "text_pair": "un believable", "label": 0},
]


@pytest.fixture(scope="module", params=["bert", "roberta"])
def tok(request, tmp_path_factory):
    return make_tokenizer(tmp_path_factory.mktemp("tok"), request.param, texts=TEXTS)


def _entries(root) -> list[str]:
    folder = os.path.join(root, "encoded")
    return sorted(os.listdir(folder)) if os.path.isdir(folder) else []


def _no_encode(*a, **k):
    raise AssertionError("tokenised again: the cached rows were not used")


def test_cached_rows_equal_encode_and_are_read_back(tok, tmp_path, monkeypatch):
    task = get_task("mrpc")
    want = encode(task, PAIRS, tok, 16)
    first = encoded.encode_cached(task, PAIRS, tok, 16, str(tmp_path))
    assert len(_entries(tmp_path)) == 1 and first.features == want.features
    assert os.stat(os.path.join(tmp_path, "encoded", _entries(tmp_path)[0])).st_mode & 0o777 == 0o644
    monkeypatch.setattr(encoded, "encode", _no_encode)
    again = encoded.encode_cached(task, PAIRS, tok, 16, str(tmp_path))
    # the very features: keys in encode's order, Python ints, labels (IGNORE for the copy), indices
    assert again.features == want.features and again.example_index == want.example_index
    assert [list(f) for f in again.features] == [list(f) for f in want.features]
    assert type(again.features[0]["input_ids"][0]) is int and again.features[1]["labels"] == IGNORE


def test_regression_labels_kept_nan_included(tok, tmp_path, monkeypatch):
    task = get_task("stsb")
    rows = [{**r, "label": None if r["label"] is None else 2.5 * r["label"]} for r in PAIRS]
    want = encode(task, rows, tok, 16)
    encoded.encode_cached(task, rows, tok, 16, str(tmp_path))
    monkeypatch.setattr(encoded, "encode", _no_encode)
    got = encoded.encode_cached(task, rows, tok, 16, str(tmp_path))
    labels = [f["labels"] for f in got.features]
    assert labels[0] == 2.5 and labels[2] == 0.0 and math.isnan(labels[1]) and type(labels[0]) is float
    assert [f["input_ids"] for f in got.features] == [f["input_ids"] for f in want.features]


def test_one_entry_per_rows_length_and_tokenizer(tok, tmp_path, tmp_path_factory):
    task = get_task("mrpc")
    encoded.encode_cached(task, PAIRS, tok, 16, str(tmp_path))
    encoded.encode_cached(task, PAIRS, tok, 8, str(tmp_path))  # truncated otherwise: its own entry
    encoded.encode_cached(task, PAIRS[:2], tok, 16, str(tmp_path))
    other = make_tokenizer(tmp_path_factory.mktemp("other"), "bert", texts=TEXTS[:2])
    encoded.encode_cached(task, PAIRS, other, 16, str(tmp_path))
    assert len(_entries(tmp_path)) == 4
    short = encoded.encode_cached(task, PAIRS, tok, 8, str(tmp_path))
    assert short.features == encode(task, PAIRS, tok, 8).features


def test_no_root_or_other_kinds_are_encoded_as_before(tok, tmp_path):
    assert (
        encoded.encode_cached(get_task("mrpc"), PAIRS, tok, 16, None).features
        == encode(get_task("mrpc"), PAIRS, tok, 16).features
    )
    rows = [{"tokens": ["a", "bad", "film"], "labels": [0, 1, 0]}]
    encoded.encode_cached(get_task("klue_ner"), rows, tok, 16, str(tmp_path))
    assert _entries(tmp_path) == []


def test_an_unreadable_entry_is_encoded_again(tok, tmp_path):
    task = get_task("mrpc")
    encoded.encode_cached(task, PAIRS, tok, 16, str(tmp_path))
    (path,) = _entries(tmp_path)
    with open(os.path.join(tmp_path, "encoded", path), "wb") as f:
        f.write(b"not a zip")
    assert encoded.encode_cached(task, PAIRS, tok, 16, str(tmp_path)).features == encode(task, PAIRS, tok, 16).features


def test_augmented_run_tokenises_its_set_once(glue_dir, tiny_teacher, tmp_path, monkeypatch):
    """A run on an augmented set writes its encoded rows beside the teacher cache; the next run (another seed) reads
    them and sees the same training features."""
    from transformers import AutoTokenizer

    from raydistill.config.schema import RunConfig, TrainConfig
    from raydistill.train import loop

    teacher = tiny_teacher("classification")
    rows = (tmp_path / "aug").mkdir() or [
        {"text": f"{w} film", "text_pair": "a film", "label": i % 2 if k == 0 else None, "source_index": i}
        for i, w in enumerate(["good", "bad", "great", "awful", "fine", "poor"] * 8)
        for k in range(3)
    ]
    (tmp_path / "aug" / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    cfg = RunConfig(
        task="mrpc",
        teacher=teacher,
        data_dir=glue_dir,
        augment_dir=str(tmp_path / "aug"),
        teacher_cache=str(tmp_path / "cache"),
        train=TrainConfig(max_length=32, eval_limit=4),
    ).validate()
    tok = AutoTokenizer.from_pretrained(teacher)
    first = loop.load_data(cfg, tok)
    assert len(_entries(tmp_path / "cache")) == 1 and 0 < len(first.train) <= len(rows)
    monkeypatch.setattr(encoded, "encode", _no_encode)
    again = loop.load_data(cfg.replace(train=TrainConfig(max_length=32, eval_limit=4, seed=43)), tok)
    assert again.train == first.train


def test_the_key_is_the_one_entries_were_written_under(tok):
    """The rows are hashed a batch at a time now: the same bytes as the whole list's JSON once was, so every entry
    written before is found again (the key's version stays 1)."""
    import hashlib

    task, rows = get_task("mrpc"), PAIRS * 700  # past the 1,024 rows hashed at a time
    for some in (rows, PAIRS, []):
        h = hashlib.sha256()
        h.update(json.dumps([encoded.VERSION, task.kind, 16, type(tok).__name__]).encode())
        spec = json.loads(tok.backend_tokenizer.to_str())
        for state in ("truncation", "padding"):
            spec.pop(state, None)
        h.update(json.dumps(spec, sort_keys=True).encode())
        whole = [(e["text"], e.get("text_pair"), e["label"]) for e in some]
        h.update(json.dumps(whole, ensure_ascii=False, default=str).encode())
        assert encoded._key(task, some, tok, 16) == h.hexdigest()[:24]


def test_an_entry_in_the_first_layout_is_read_as_flat_features(tok, tmp_path, monkeypatch):
    """An entry as version 1 wrote it (row by row from lists: int32 ids, int8 masks, int64 offsets and labels) reads
    back as the flat features encode makes now, and a new entry is written in that same layout."""
    import numpy as np

    from raydistill.tasks.encode import FlatFeatures

    task = get_task("mrpc")
    want = encode(task, PAIRS, tok, 16)
    rows = [dict(f) for f in want.features]
    keys = [k for k, v in rows[0].items() if isinstance(v, list)]
    old = {
        "keys": np.array(keys),
        "offsets": np.concatenate([[0], np.cumsum([len(f["input_ids"]) for f in rows])]),
        "labels": np.array([f["labels"] for f in rows]),
        **{k: np.array([t for f in rows for t in f[k]], np.int32 if k == "input_ids" else np.int8) for k in keys},
    }
    key = encoded._key(task, PAIRS, tok, 16)
    (tmp_path / "encoded").mkdir()
    np.savez(tmp_path / "encoded" / f"{key}.npz", **old)
    monkeypatch.setattr(encoded, "encode", _no_encode)
    got = encoded.encode_cached(task, PAIRS, tok, 16, str(tmp_path))
    assert isinstance(got.features, FlatFeatures) and got.features == rows
    monkeypatch.undo()
    encoded.encode_cached(task, PAIRS, tok, 16, str(tmp_path / "new"))
    with np.load(tmp_path / "new" / "encoded" / f"{key}.npz") as z:
        assert sorted(z.files) == sorted(old)
        for name, arr in old.items():
            assert z[name].dtype == arr.dtype and np.array_equal(z[name], arr)
