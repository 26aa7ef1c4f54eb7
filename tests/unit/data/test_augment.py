"""TinyBERT data augmentation: seeded, pair-preserving, MLM / embedding candidates, cached."""

from __future__ import annotations

import pytest
import torch

from raydistill.common.errors import UserError
from raydistill.data import augment as aug
from raydistill.data.candidates import whole_word_ids
from raydistill.testing import TinyShape, make_tiny_model

# "tac", "sta", "mats" are not in the vocab but their letters are: each splits into several ##pieces.
TEXTS = ["the cat sat on the mat .", "a dog ran to the park !", "good movie , bad plot", "zebra xylophone quiz"]
EXAMPLES = [
    {"text": "the cat sat on the mat .", "text_pair": None, "label": 1},
    {"text": "a dog ran to the park !", "text_pair": None, "label": 0},
    {"text": "good movie , bad plot", "text_pair": None, "label": 1},
]


@pytest.fixture(scope="module")
def mlm(tmp_path_factory):
    d = make_tiny_model(
        tmp_path_factory.mktemp("mlm"), kind="mlm", texts=TEXTS, shape=TinyShape(family="bert", layers=2)
    )
    tok, _ = aug._load_mlm(d)
    assert len(tok) > 50, (
        "make_tiny_model wrote a 5-token vocab: transformers 5 ignores vocab_file=/merges_file=; "
        "raydistill/testing.py must pass vocab=/merges="
    )
    return d


def test_deterministic_and_count(mlm):
    a = aug.augment(EXAMPLES, mlm, p=0.5, k=3, n=4, seed=7)
    assert a == aug.augment(EXAMPLES, mlm, p=0.5, k=3, n=4, seed=7)
    assert len(a) == len(EXAMPLES) * (4 + 1)
    assert a[: len(EXAMPLES)] == EXAMPLES  # originals first
    assert a != aug.augment(EXAMPLES, mlm, p=0.5, k=3, n=4, seed=8)
    assert any(x["text"] not in {e["text"] for e in EXAMPLES} for x in a)  # something was replaced
    copies = a[len(EXAMPLES) :]
    for i in range(len(EXAMPLES)):  # example by example; a copy has no gold label (the teacher labels it)
        assert all(c["label"] is None and c["text_pair"] is None for c in copies[4 * i : 4 * i + 4])


def test_p_zero_copies_are_identical(mlm):
    a = aug.augment(EXAMPLES, mlm, p=0.0, k=5, n=3)
    assert a == [ex for ex in EXAMPLES] + [{**ex, "label": None} for ex in EXAMPLES for _ in range(3)]


def test_pairs_keep_their_own_partner(mlm):
    # Every example has its own marker word in both sentences; punctuation is never replaced, and each
    # sentence keeps a distinct number of "!" so its origin can be read off any augmented copy.
    markers = ["cat", "dog", "movie", "plot"]
    pairs = [
        {"text": f"{m} is good {'!' * (i + 1)}", "text_pair": f"{m} was bad {'?' * (i + 1)}", "label": i}
        for i, m in enumerate(markers)
    ]
    n = 6
    a = aug.augment(pairs, mlm, p=0.7, k=4, n=n, seed=1)
    assert len(a) == len(pairs) * (n + 1)
    changed = 0
    for j, c in enumerate(a[len(pairs) :]):
        i = j // n
        assert c["label"] is None  # the teacher labels a copy; its origin is read off the marks below
        assert c["text"].endswith(" " + "!" * (i + 1)) and c["text"].count("!") == i + 1
        assert c["text_pair"].endswith(" " + "?" * (i + 1)) and c["text_pair"].count("?") == i + 1
        changed += c["text"] != pairs[i]["text"] or c["text_pair"] != pairs[i]["text_pair"]
        kept = "text_pair" if (j % n) % 2 == 0 else "text"  # TinyBERT's code: one side per copy, the other kept
        assert c[kept] == pairs[i][kept], (j, c)
    assert changed > 0


def _top1_whole_word(mlm, masked_sentence):
    tok, model = aug._load_mlm(mlm)
    enc = tok(masked_sentence, return_tensors="pt")
    pos = enc["input_ids"][0].tolist().index(tok.mask_token_id)
    with torch.no_grad():
        logits = model(**enc).logits[0, pos]
    ww_ids, ww_words = whole_word_ids(tok, logits.shape[0])
    return ww_words[int(logits[ww_ids].argmax())]


def test_single_piece_word_gets_mlm_top1(mlm):
    ex = [{"text": "the cat sat", "text_pair": None, "label": 0}]
    out = aug.augment(ex, mlm, p=1.0, k=1, n=2, seed=3)
    want = " ".join(["the"] + [_top1_whole_word(mlm, s) for s in ("the [MASK] sat", "the cat [MASK]")])
    assert out[1]["text"] == out[2]["text"] == want  # "the": a stop word, never swapped


def test_only_letter_words_that_are_not_stop_words_are_swapped(mlm):
    """TinyBERT's rule: numbers, punctuation, words with digits and its stop words stay; content words may go."""
    ex = [{"text": "The stock rose $2.11, or 11 percent, to 2003 highs and did not fall.", "label": 0}]
    out = aug.augment(ex, mlm, p=1.0, k=3, n=8, seed=0)
    for c in out[1:]:
        for kept in ("The ", "$2.11, ", " or 11 ", " to 2003 ", " and did not "):
            assert kept in c["text"], (kept, c["text"])
    assert any(c["text"] != ex[0]["text"] for c in out[1:])


def test_multi_piece_word_gets_embedding_neighbour(mlm):
    tok, model = aug._load_mlm(mlm)
    pieces = tok.tokenize("tac")
    assert len(pieces) > 1 and pieces[1].startswith("##")
    emb = model.get_input_embeddings().weight.detach()
    ww_ids, ww_words = whole_word_ids(tok, emb.shape[0])
    q = emb[tok.convert_tokens_to_ids(pieces)].mean(0)
    sims = torch.nn.functional.cosine_similarity(emb[ww_ids], q[None], dim=-1)
    nearest = [ww_words[i] for i in sims.topk(3).indices.tolist()]

    out = aug.augment([{"text": "tac", "text_pair": None, "label": 0}], mlm, p=1.0, k=3, n=12, seed=0)
    got = {c["text"] for c in out[1:]}
    assert got <= set(nearest) and len(got) > 1
    assert aug.augment([{"text": "tac", "text_pair": None, "label": 0}], mlm, p=1.0, k=1, n=1)[1]["text"] == nearest[0]


def test_cache_reuse(mlm, tmp_path, monkeypatch):
    first = aug.augment_cached(EXAMPLES, mlm, tmp_path, p=0.5, k=3, n=2, seed=4)
    files = list(tmp_path.glob("*.jsonl"))
    assert len(files) == 1 and len(files[0].stem) == 64
    assert first == aug.augment(EXAMPLES, mlm, p=0.5, k=3, n=2, seed=4)

    def boom(*a, **kw):
        raise AssertionError("the model should not be loaded on a cache hit")

    monkeypatch.setattr(aug, "_load_mlm", boom)
    assert aug.augment_cached(EXAMPLES, mlm, tmp_path, p=0.5, k=3, n=2, seed=4) == first
    with pytest.raises(AssertionError):  # different knobs miss the cache
        aug.augment_cached(EXAMPLES, mlm, tmp_path, p=0.5, k=3, n=2, seed=5)


def test_bad_mlm_dir(tmp_path):
    with pytest.raises(UserError, match="bert-base-uncased") as e:
        aug.augment(EXAMPLES, tmp_path / "missing", n=1)
    assert e.value.field == "augment_mlm"
    clf = make_tiny_model(tmp_path / "clf", kind="classification", texts=TEXTS, shape=TinyShape(layers=1))
    with pytest.raises(UserError, match="not a masked LM"):
        aug.augment(EXAMPLES, clf, n=1)
