"""Encoding, dynamic-padding collation and scoring round trips for every task kind, with small offline tokenizers."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from raydistill.tasks import get_task
from raydistill.tasks.encode import IGNORE, MODEL_INPUTS, collate, encode, label_keys, qa_predictions, score
from raydistill.testing import make_tokenizer

TEXTS = ["the movie was good and the plot was great", "what was good", "un believable", "a bad film"]


@pytest.fixture(scope="module", params=["bert", "roberta"])
def tok(request, tmp_path_factory):
    tok = make_tokenizer(tmp_path_factory.mktemp("tok"), request.param, texts=TEXTS)
    assert len(tok) > 20  # a real vocabulary, not just the special tokens
    return tok


def test_label_keys():
    assert MODEL_INPUTS == ("input_ids", "attention_mask", "token_type_ids")
    assert label_keys("qa") == ("start_positions", "end_positions")
    assert label_keys("classification") == label_keys("token") == ("labels",)


def test_classification_pair_and_collate_dynamic_padding(tok):
    task = get_task("mrpc")
    ex = [
        {"text": "a bad film", "text_pair": "the movie was good and the plot was great", "label": 1},
        {"text": "good", "text_pair": "bad", "label": 0},
    ]
    enc = encode(task, ex, tok, max_length=64)
    assert [f["labels"] for f in enc.features] == [1, 0] and [f["feature_index"] for f in enc.features] == [0, 1]
    assert ("token_type_ids" in enc.features[0]) == ("token_type_ids" in tok("x"))
    batch = collate(enc.features, tok.pad_token_id)
    longest = max(len(f["input_ids"]) for f in enc.features)
    assert batch["input_ids"].shape == (2, longest)  # padded to the batch, not to max_length
    short = len(enc.features[1]["input_ids"])
    assert (batch["input_ids"][1, short:] == tok.pad_token_id).all() and batch["attention_mask"][1, short:].sum() == 0
    assert batch["labels"].dtype == torch.long and batch["feature_index"].tolist() == [0, 1]
    assert len(encode(task, ex, tok, max_length=8).features[0]["input_ids"]) == 8  # truncation


def test_regression_labels_are_float(tok):
    task = get_task("stsb")
    enc = encode(task, [{"text": "good", "text_pair": "great", "label": 4.5}], tok, 32)
    batch = collate(enc.features, tok.pad_token_id)
    assert batch["labels"].dtype == torch.float32 and batch["labels"].tolist() == [4.5]


def test_an_augmented_copy_has_no_gold_label(tok):
    """A copy (label None, written by distill.augment) gets the label the losses skip: -100, or NaN for regression."""
    for name, gold, dtype in (("mrpc", 1, torch.long), ("stsb", 4.5, torch.float32)):
        ex = [
            {"text": "good", "text_pair": "great", "label": gold},
            {"text": "fine", "text_pair": "great", "label": None},
        ]
        batch = collate(encode(get_task(name), ex, tok, 32).features, tok.pad_token_id)
        got = batch["labels"].tolist()
        assert batch["labels"].dtype == dtype and got[0] == gold
        assert (got[1] == -100) if dtype == torch.long else math.isnan(got[1])


def test_token_labels_on_first_piece_only(tok):
    task = get_task("kmou_ner")
    ex = [{"tokens": ["the", "unbelievable", "movie"], "labels": [0, 1, 2]}, {"tokens": ["good"], "labels": [3]}]
    enc = encode(task, ex, tok, max_length=32)
    f = enc.features[0]
    assert len(f["labels"]) == len(f["input_ids"])
    assert [lab for lab in f["labels"] if lab != IGNORE] == [0, 1, 2]
    assert f["labels"][0] == IGNORE and f["labels"][-1] == IGNORE  # special tokens
    assert len(f["input_ids"]) - 2 > 3  # "unbelievable" really is split into several pieces
    first = [w for w in enc.word_ids[0] if w is not None]
    assert first == [0, 1, 2]
    batch = collate(enc.features, tok.pad_token_id)
    assert (batch["labels"][1, len(enc.features[1]["labels"]) :] == IGNORE).all()


def _one_hot(idx, size):
    row = np.zeros(size, dtype=np.float32)
    row[idx] = 1.0
    return row


def test_token_score_round_trip_and_truncation(tok):
    task = get_task("kmou_ner")
    ex = [
        {"tokens": ["the", "unbelievable", "movie", "good"], "labels": [1, 2, 0, 3]},
        {"tokens": ["a", "film"], "labels": [0, 5]},
    ]
    enc = encode(task, ex, tok, max_length=32)
    C = task.num_labels
    logits = [np.stack([_one_hot(max(lab, 0), C) for lab in f["labels"]]) for f in enc.features]
    assert score(task, ex, enc, {"logits": logits}) == {"f1": 1.0, "precision": 1.0, "recall": 1.0}
    # padded [n, L, C] array and shuffled rows (with feature_index) give the same result
    L = max(len(x) for x in logits)
    padded = np.stack([np.pad(x, ((0, L - len(x)), (0, 0))) for x in logits])
    assert score(task, ex, enc, {"logits": padded[::-1], "feature_index": np.array([1, 0])})["f1"] == 1.0
    # words cut off by truncation are predicted "O", so the missed entity lowers recall
    short = encode(task, ex, tok, max_length=4)
    lg = [np.stack([_one_hot(max(lab, 0), C) for lab in f["labels"]]) for f in short.features]
    assert score(task, ex, short, {"logits": lg})["recall"] < 1.0


def test_classification_and_regression_score_round_trip(tok):
    task = get_task("mrpc")
    ex = [{"text": "good", "text_pair": "great", "label": i % 2} for i in range(6)]
    enc = encode(task, ex, tok, 16)
    logits = np.stack([_one_hot(e["label"], 2) for e in ex])
    # macro-F1 comes beside every classification task's own metrics
    assert score(task, ex, enc, {"logits": logits}) == {"accuracy": 1.0, "f1": 1.0, "macro_f1": 1.0}
    assert score(task, ex, enc, {"logits": 1 - logits})["accuracy"] == 0.0
    task = get_task("stsb")
    ex = [{"text": "good", "text_pair": "great", "label": float(i)} for i in range(5)]
    enc = encode(task, ex, tok, 16)
    r = score(task, ex, enc, {"logits": np.arange(5.0)[:, None] * 2})  # [n, 1] is accepted
    assert r["pearson"] == pytest.approx(1.0) and r["spearman"] == pytest.approx(1.0)
    with pytest.raises(ValueError):
        score(task, ex, enc, {"logits": np.zeros(3)})


QA_CONTEXT = "the movie was good and the plot was great . a bad film is not a good movie . the plot was bad"


def _qa_examples():
    start = QA_CONTEXT.index("the plot was great")
    return [
        {
            "id": "1",
            "question": "what was great",
            "context": QA_CONTEXT,
            "answers": {"text": ["the plot was great"], "answer_start": [start]},
        },
        {
            "id": "2",
            "question": "what was good",
            "context": "the movie was good",
            "answers": {"text": ["the movie"], "answer_start": [0]},
        },
    ]


def test_qa_windows_and_positions(tok):
    task = get_task("korquad")
    ex = _qa_examples()
    enc = encode(task, ex, tok, max_length=24)
    assert enc.example_index.count(0) > 1 and enc.example_index[-1] == 1  # long context -> several windows
    inside = outside = 0
    for f, offs, e_i in zip(enc.features, enc.offsets, enc.example_index, strict=True):
        s, e = f["start_positions"], f["end_positions"]
        if s == 0:
            assert e == 0
            outside += 1
        else:
            assert offs[s] is not None and offs[e] is not None and s <= e
            assert ex[e_i]["context"][offs[s][0] : offs[e][1]].strip() == ex[e_i]["answers"]["text"][0]
            inside += 1
        assert len(offs) == len(f["input_ids"]) and offs[0] is None  # question/special pieces carry no offset
    assert inside >= 2 and outside >= 1
    batch = collate(enc.features, tok.pad_token_id)
    assert batch["start_positions"].shape == (len(enc),)


def test_qa_score_round_trip(tok):
    task = get_task("korquad")
    ex = _qa_examples()
    enc = encode(task, ex, tok, max_length=24)
    starts = [_one_hot(f["start_positions"], len(f["input_ids"])) for f in enc.features]
    ends = [_one_hot(f["end_positions"], len(f["input_ids"])) for f in enc.features]
    preds = qa_predictions(ex, enc, {"start_logits": starts, "end_logits": ends})
    assert [p.strip() for p in preds] == ["the plot was great", "the movie"]
    assert score(task, ex, enc, {"start_logits": starts, "end_logits": ends}) == {"exact_match": 1.0, "f1": 1.0}
    # never returns a span outside the context or longer than 30 tokens, even for flat logits
    flat = [np.zeros(len(f["input_ids"])) for f in enc.features]
    assert all(
        p in ex[i]["context"] for i, p in enumerate(qa_predictions(ex, enc, {"start_logits": flat, "end_logits": flat}))
    )


def test_qa_long_question_is_clipped(tok):
    task = get_task("korquad")
    ex = [{**_qa_examples()[1], "question": " ".join(["what was good"] * 30)}]
    enc = encode(task, ex, tok, max_length=24)  # would otherwise leave no room for the context
    assert all(len(f["input_ids"]) <= 24 for f in enc.features)
    assert any(f["start_positions"] > 0 for f in enc.features)
