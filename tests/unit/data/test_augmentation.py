"""TinyBERT data augmentation: seeded, pair-preserving, MLM / embedding candidates, cached."""

from __future__ import annotations

import pytest
import torch

from raydistill.common.errors import UserError
from raydistill.data import augmentation as aug
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
    a = aug.augment(EXAMPLES, mlm, aug.AugmentOptions(p=0.5, k=3, n=4, seed=7))
    assert a == aug.augment(EXAMPLES, mlm, aug.AugmentOptions(p=0.5, k=3, n=4, seed=7))
    assert len(a) == len(EXAMPLES) * (4 + 1)
    assert a[: len(EXAMPLES)] == EXAMPLES  # originals first
    assert a != aug.augment(EXAMPLES, mlm, aug.AugmentOptions(p=0.5, k=3, n=4, seed=8))
    assert any(x["text"] not in {e["text"] for e in EXAMPLES} for x in a)  # something was replaced
    copies = a[len(EXAMPLES) :]
    for i in range(len(EXAMPLES)):  # example by example; a copy has no gold label (the teacher labels it)
        assert all(c["label"] is None and c["text_pair"] is None for c in copies[4 * i : 4 * i + 4])


def test_p_zero_copies_are_identical(mlm):
    a = aug.augment(EXAMPLES, mlm, aug.AugmentOptions(p=0.0, k=5, n=3))
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
    a = aug.augment(pairs, mlm, aug.AugmentOptions(p=0.7, k=4, n=n, seed=1))
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
    out = aug.augment(ex, mlm, aug.AugmentOptions(p=1.0, k=1, n=2, seed=3))
    want = " ".join(["the"] + [_top1_whole_word(mlm, s) for s in ("the [MASK] sat", "the cat [MASK]")])
    assert out[1]["text"] == out[2]["text"] == want  # "the": a stop word, never swapped


def test_only_letter_words_that_are_not_stop_words_are_swapped(mlm):
    """TinyBERT's rule: numbers, punctuation, words with digits and its stop words stay; content words may go."""
    ex = [{"text": "The stock rose $2.11, or 11 percent, to 2003 highs and did not fall.", "label": 0}]
    out = aug.augment(ex, mlm, aug.AugmentOptions(p=1.0, k=3, n=8, seed=0))
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

    out = aug.augment(
        [{"text": "tac", "text_pair": None, "label": 0}], mlm, aug.AugmentOptions(p=1.0, k=3, n=12, seed=0)
    )
    got = {c["text"] for c in out[1:]}
    assert got <= set(nearest) and len(got) > 1
    assert (
        aug.augment([{"text": "tac", "text_pair": None, "label": 0}], mlm, aug.AugmentOptions(p=1.0, k=1, n=1))[1][
            "text"
        ]
        == nearest[0]
    )


def test_cache_reuse(mlm, tmp_path, monkeypatch):
    first = aug.augment_cached(EXAMPLES, mlm, tmp_path, aug.AugmentOptions(p=0.5, k=3, n=2, seed=4))
    files = list(tmp_path.glob("*.jsonl"))
    assert len(files) == 1 and len(files[0].stem) == 64
    assert first == aug.augment(EXAMPLES, mlm, aug.AugmentOptions(p=0.5, k=3, n=2, seed=4))

    def boom(*a, **kw):
        raise AssertionError("the model should not be loaded on a cache hit")

    monkeypatch.setattr(aug, "_load_mlm", boom)
    assert aug.augment_cached(EXAMPLES, mlm, tmp_path, aug.AugmentOptions(p=0.5, k=3, n=2, seed=4)) == first
    with pytest.raises(AssertionError):  # different knobs miss the cache
        aug.augment_cached(EXAMPLES, mlm, tmp_path, aug.AugmentOptions(p=0.5, k=3, n=2, seed=5))


def test_bad_mlm_dir(tmp_path):
    with pytest.raises(UserError, match="bert-base-uncased") as e:
        aug.augment(EXAMPLES, tmp_path / "missing", aug.AugmentOptions(n=1))
    assert e.value.field == "augment_mlm"
    clf = make_tiny_model(tmp_path / "clf", kind="classification", texts=TEXTS, shape=TinyShape(layers=1))
    with pytest.raises(UserError, match="not a masked LM"):
        aug.augment(EXAMPLES, clf, aug.AugmentOptions(n=1))


def _model_files(d):
    """A model folder as the cache key sees it: its files' names and bytes (nothing is loaded)."""
    d.mkdir()
    (d / "config.json").write_text('{"model_type": "bert"}')
    (d / "vocab.txt").write_text("[PAD]\n[UNK]\nthe\ncat\n")
    return d


def test_the_cache_key_is_the_one_existing_caches_were_written_under(tmp_path):
    """The keys below were computed by the code before the knobs became ``AugmentOptions`` (keyword arguments), for
    these rows, model files and knobs: a set built before (e.g. a benchmark's mrpc-augment-v3) is found again, not
    rebuilt. A new CACHE_VERSION is the one deliberate way to change them."""
    d = _model_files(tmp_path / "model")
    knobs = aug.AugmentOptions(p=0.5, k=3, n=2, seed=4, candidates="embedding")
    assert aug.cache_path(EXAMPLES, d, "C", knobs).name == (
        "599e866ca3593ebba1c997b31dcfa42650075733dba1f7a89579722292a2b492.jsonl"
    )
    assert aug.cache_path(EXAMPLES, d, "C", aug.AugmentOptions()).name == (
        "a4f23edfe991d6e9b844368117fc68e51d264b44d45a2c1140011a203f1fb515.jsonl"
    )
    # the old code's build took the first ``limit`` rows, then keyed those: a limit keys as its rows did
    limited = aug.AugmentOptions(n=3, max_length=64, limit=2)
    assert aug.cache_path(EXAMPLES, d, "C", limited).name == (
        "d68cc0d75fc28f3ddc482dffe143435f36953049fa8ffd6b61857af9c1f47dac.jsonl"
    )
    # batch_size changes no copy, so it keys nothing
    bigger = aug.AugmentOptions(batch_size=7)
    assert aug.cache_path(EXAMPLES, d, "C", bigger) == aug.cache_path(EXAMPLES, d, "C", aug.AugmentOptions())


@pytest.mark.parametrize(
    "knobs,field",
    [
        ({"p": 1.5}, "augment_p"),
        ({"k": 0}, "augment_k"),
        ({"k": 2.0}, "augment_k"),
        ({"n": -1}, "augment_n"),
        ({"batch_size": 0}, "augment_batch"),
        ({"max_length": 2}, "augment_batch"),
        ({"limit": 0}, "augment_limit"),
        ({"candidates": "glove"}, "augment_candidates"),
    ],
)
def test_bad_knobs_are_refused_when_the_options_are_made(knobs, field):
    """Before any model or row is loaded: the options cannot exist with a value that cannot work."""
    with pytest.raises(UserError) as e:
        aug.AugmentOptions(**knobs)
    assert e.value.field == field


def test_limit_takes_the_first_rows_wherever_rows_are_taken(mlm, tmp_path):
    two = aug.AugmentOptions(p=0.5, k=3, n=2, seed=4, limit=2)
    out = aug.augment(EXAMPLES, mlm, two)
    assert out[:2] == EXAMPLES[:2] and len(out) == 2 * 3
    assert aug.augment_cached(EXAMPLES, mlm, tmp_path, two) == out
    assert aug.cache_path(EXAMPLES, mlm, tmp_path, two) == aug.cache_path(EXAMPLES[:2], mlm, tmp_path, two)


def test_a_large_augmented_set_is_announced_with_its_cost(monkeypatch, tmp_path):
    """A set past ``LARGE_SET_ROWS`` (SST-2 x20: 1.4M rows) gets one line saying what scales with it and the way out,
    before any trial trains on it; a small task's set gets none."""
    from raydistill.config.schema import RunConfig
    from raydistill.data import augment_sets, augmentation
    from raydistill.models import encoder

    monkeypatch.setattr(encoder, "fingerprint", lambda path: "f" * 40)
    base = RunConfig.from_dict({"task": "sst2", "teacher": str(tmp_path)})
    for rows, said in ((67_349, True), (5_749, False)):
        monkeypatch.setattr(augmentation, "build", lambda req, rows=rows: (rows, rows * 21, None))
        lines: list[str] = []
        augment_sets.build_sets(20, base, str(tmp_path), lines.append)
        notes = [x for x in lines if "large transfer set" in x]
        assert bool(notes) == said
        if said:
            assert "1,414,329 rows (67,349 x 21)" in notes[0] and "--set augment=0" in notes[0]
