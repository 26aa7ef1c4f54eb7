"""Init ``prune`` (raydistill/models/prune.py): importance scores by hand, the teacher reproduced at full size, the
kept indices cut consistently for BERT, RoBERTa and ELECTRA, closer to the teacher than ``slice`` and ``random``,
seeded, saved beside the student; ``slice`` telling what it left random; heads that keep the teacher's head size;
and every refusal up front (one line, exit 2, before Ray)."""

from __future__ import annotations

import itertools
import json
import logging
import os

import optuna
import pytest
import torch

from raydistill.common.errors import UserError
from raydistill.config import space as sp
from raydistill.config.domains import Choice
from raydistill.config.schema import DistillConfig, RunConfig, StudentConfig, TrainConfig
from raydistill.config.sizes import Shape, check_shape, resolve
from raydistill.models import prune
from raydistill.models.encoder import load_model
from raydistill.models.student import build_student
from tests.paths import ROOT
from tests.unit.commands.test_bad_input import E, assert_one_line, distill, main_of, mlflow_runs, paths, trapped  # noqa: F401

MINILM, BASE, LARGE = Shape(6, 384, 1536, 12), Shape(12, 768, 3072, 12), Shape(24, 1024, 4096, 16)


def electra(embedding_size: int, seed: int = 0):
    """A tiny ELECTRA classifier in memory (hidden 32, 2 heads, 4 layers): its embeddings follow the hidden size
    (``embedding_size`` 32) or are projected to it (24)."""
    from transformers import ElectraConfig, ElectraForSequenceClassification

    torch.manual_seed(seed)
    cfg = ElectraConfig(
        vocab_size=80,
        embedding_size=embedding_size,
        hidden_size=32,
        num_hidden_layers=4,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=64,
        num_labels=2,
    )
    return ElectraForSequenceClassification(cfg).eval()


@pytest.fixture(scope="module")
def teachers(tiny_teacher):
    out = {
        f: load_model(tiny_teacher("classification", family=f), "classification").eval() for f in ("bert", "roberta")
    }
    out.update({"electra": electra(32), "electra-projected": electra(24)})
    return out


def random_batches(n: int | None, seed: int = 0, vocab: int = 60, length: int = 12):
    """Batches of model inputs; the last three positions of every row are padding."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(5, vocab, (n or 24, length), generator=g)
    mask = torch.ones_like(ids)
    mask[:, -3:] = 0
    return [{"input_ids": ids[i : i + 8], "attention_mask": mask[i : i + 8]} for i in range(0, len(ids), 8)]


def sizes(layers, hidden, intermediate, heads, init="prune"):
    return StudentConfig(layers=layers, hidden=hidden, intermediate=intermediate, heads=heads, init=init)


# ---------------------------------------------------------------- scores, by hand
def test_importance_matches_a_hand_computation(teachers):
    t = teachers["bert"]
    batch = {"input_ids": random_batches(8)[0]["input_ids"]}
    batch["attention_mask"] = torch.ones_like(batch["input_ids"])  # no padding: plain means over every token
    s = prune.importance(t, [batch])
    with torch.no_grad():
        h = t(**batch, output_hidden_states=True).hidden_states
        for i, layer in enumerate(t.bert.encoder.layer):
            ctx = layer.attention.self(h[i])[0]  # [B, L, heads·d]
            w = layer.attention.output.dense.weight
            heads = [
                (ctx[..., 16 * k : 16 * (k + 1)] @ w[:, 16 * k : 16 * (k + 1)].T).norm(dim=-1).mean() for k in range(2)
            ]
            assert torch.allclose(s["heads"][i], torch.stack(heads), rtol=1e-4)
            act = layer.intermediate(layer.attention(h[i])[0])
            assert torch.allclose(s["neurons"][i], act.abs().mean((0, 1)), rtol=1e-4)
            cos = torch.nn.functional.cosine_similarity(h[i], h[i + 1], dim=-1)
            assert s["block"][i].item() == pytest.approx((1 - cos).mean().item(), rel=1e-4)
    assert s["channels"].shape == (32,) and bool((s["channels"] > 0).all())


def test_top_keeps_order_and_breaks_ties_by_index():
    assert prune.top(torch.tensor([0.1, 0.5, 0.5, 0.9, 0.5]), 3) == [1, 2, 3]
    assert prune.top(torch.tensor([3.0, 1.0, 2.0]), 3) == [0, 1, 2]


# ---------------------------------------------------------------- students
@pytest.mark.parametrize("family", ["bert", "roberta", "electra", "electra-projected"])
def test_full_size_prune_is_the_teacher(teachers, family):
    t = teachers[family]
    s = build_student(t, sizes(4, 32, 64, 2), examples=random_batches).eval()
    assert s.prune_plan["kept"] == s.prune_plan["of"] and s.prune_plan["layers"] == [1, 2, 3, 4]
    for b in random_batches(16, seed=1):
        with torch.no_grad():
            assert torch.allclose(s(**b).logits, t(**b).logits, atol=1e-5)


@pytest.mark.parametrize("family", ["bert", "roberta", "electra", "electra-projected"])
def test_narrow_prune_cuts_every_tensor_by_the_same_kept_indices(teachers, family, caplog):
    t = teachers[family]
    with caplog.at_level(logging.WARNING):
        s = build_student(t, sizes(2, 16, 40, 1, "prune:block,16"), examples=random_batches).eval()
    assert not caplog.records, "no tensor may be left random"
    plan = s.prune_plan
    assert plan["samples"] == 16 and plan["layer_rule"] == "block" and len(plan["layers"]) == 2
    assert [len(h) for h in plan["heads"]] == [1, 1] and [len(n) for n in plan["neurons"]] == [40, 40]
    ch = torch.tensor(plan["channels"])
    assert len(ch) == 16 and plan["channels"] == sorted(plan["channels"])
    base, tb = s.base_model, t.base_model
    for i, tl in enumerate(plan["layers"]):
        sl, tlay = base.encoder.layer[i], tb.encoder.layer[tl - 1]
        rows = torch.tensor([16 * h + j for h in plan["heads"][i] for j in range(16)])
        neurons = torch.tensor(plan["neurons"][i])
        assert torch.equal(sl.attention.self.key.weight, tlay.attention.self.key.weight[rows][:, ch])
        assert torch.equal(sl.attention.self.value.bias, tlay.attention.self.value.bias[rows])
        assert torch.equal(sl.attention.output.dense.weight, tlay.attention.output.dense.weight[ch][:, rows])
        assert torch.equal(sl.attention.output.LayerNorm.weight, tlay.attention.output.LayerNorm.weight[ch])
        assert torch.equal(sl.intermediate.dense.weight, tlay.intermediate.dense.weight[neurons][:, ch])
        assert torch.equal(sl.output.dense.weight, tlay.output.dense.weight[ch][:, neurons])
    if family == "electra-projected":  # the embeddings keep their own width; the projection into the stream is cut
        assert torch.equal(base.embeddings.word_embeddings.weight, tb.embeddings.word_embeddings.weight)
        assert torch.equal(base.embeddings_project.weight, tb.embeddings_project.weight[ch])
    else:
        assert torch.equal(base.embeddings.word_embeddings.weight, tb.embeddings.word_embeddings.weight[:, ch])
        assert torch.equal(base.embeddings.position_embeddings.weight, tb.embeddings.position_embeddings.weight[:, ch])
        assert torch.equal(base.embeddings.LayerNorm.bias, tb.embeddings.LayerNorm.bias[ch])
    if family == "bert":
        assert torch.equal(s.bert.pooler.dense.weight, t.bert.pooler.dense.weight[ch][:, ch])
        assert torch.equal(s.classifier.weight, t.classifier.weight[:, ch])
    else:  # RoBERTa / ELECTRA classification head: dense then out_proj
        assert torch.equal(s.classifier.dense.weight, t.classifier.dense.weight[ch][:, ch])
        assert torch.equal(s.classifier.out_proj.weight, t.classifier.out_proj.weight[:, ch])
    assert s(**random_batches(8)[0]).logits.shape == (8, 2)


def test_same_seed_same_student_other_seed_other_sample(tiny_teacher, glue_dir):
    from transformers import AutoTokenizer

    from raydistill.data.splits import prune_rows, train_and_eval_examples
    from raydistill.tasks import get_task
    from raydistill.train.objective import prune_examples

    path = tiny_teacher("classification")
    t, tok = load_model(path, "classification").eval(), AutoTokenizer.from_pretrained(path)

    def cfg(seed):
        return RunConfig(task="sst2", teacher=path, data_dir=glue_dir, train=TrainConfig(seed=seed, max_length=32))

    plans = [
        build_student(t, sizes(2, 16, 32, 1, "prune:64"), examples=prune_examples(cfg(s), tok)).prune_plan
        for s in (0, 0, 1)
    ]
    assert plans[0] == plans[1] and plans[0]["samples"] == 64
    task = get_task("sst2")
    rows0, rows1 = prune_rows(cfg(0), task, 64), prune_rows(cfg(1), task, 64)
    train = train_and_eval_examples(cfg(0), task)[0]
    assert rows0 != rows1 and all(r in train for r in rows0 + rows1)
    assert len(prune_rows(cfg(0), task, None)) == min(256, len(train))  # the default: all of 192 rows here


def test_prune_is_closer_to_the_teacher_than_slice_and_random(tiny_teacher, glue_dir):
    """A tiny teacher fine-tuned on the fixture (so its units are not equally important): the half-width student
    cut by prune starts closer to it (KL of the predictions on the dev set) than slice's leading block, and
    far closer than random weights."""
    import random

    from transformers import AutoTokenizer

    from raydistill.data.splits import train_and_eval_examples
    from raydistill.tasks import get_task
    from raydistill.tasks.encode import collate, encode
    from raydistill.train.objective import prune_examples

    path = tiny_teacher("classification", layers=4, hidden=64, heads=4, intermediate=128, dropout=0.0)
    tok, task = AutoTokenizer.from_pretrained(path), get_task("sst2")
    cfg = RunConfig(task="sst2", teacher=path, data_dir=glue_dir, train=TrainConfig(max_length=32))
    train, dev = train_and_eval_examples(cfg, task)
    feats, rng = encode(task, train, tok, 32).features, random.Random(0)
    torch.manual_seed(0)
    t = load_model(path, "classification").train()
    opt = torch.optim.AdamW(t.parameters(), lr=1e-3)
    for _ in range(60):
        t(**{k: v for k, v in collate(rng.sample(feats, 32), 0).items() if k != "feature_index"}).loss.backward()
        opt.step()
        opt.zero_grad()
    t.eval().requires_grad_(False)
    dev_b = {
        k: v for k, v in collate(encode(task, dev, tok, 32).features, 0).items() if k not in ("labels", "feature_index")
    }

    def kl(init):
        torch.manual_seed(0)
        s = build_student(t, sizes(2, 32, 64, 2, init), examples=prune_examples(cfg, tok)).eval()
        with torch.no_grad():
            lt, ls = t(**dev_b).logits.log_softmax(-1), s(**dev_b).logits.log_softmax(-1)
        return (lt.exp() * (lt - ls)).sum(-1).mean().item()

    got = {init: kl(init) for init in ("prune", "slice", "random")}
    assert got["prune"] < got["slice"] < got["random"], got
    assert got["prune"] < 0.5 * got["random"], got


def test_the_loop_builds_a_pruned_student_and_saves_what_it_kept(tiny_teacher, glue_dir):
    """Through loop.run (no Ray): build_objective hands the run's training rows to prune, and every checkpoint's
    student carries prune.json (so the exported student and its MLflow artifacts do)."""
    from raydistill.train.loop import Context, run

    cfg = RunConfig(
        task="sst2",
        teacher=tiny_teacher("classification"),
        data_dir=glue_dir,
        student=sizes(2, 16, 32, 1, "prune:32"),
        distill=DistillConfig(method="kd"),
        train=TrainConfig(epochs=1, max_steps=2, batch_size=8, max_length=32, train_limit=48, eval_limit=8),
    ).validate()
    seen = []

    def report(metrics, ckpt_dir):
        with open(os.path.join(ckpt_dir, "best_student", "prune.json")) as f:
            seen.append(json.load(f))

    run(cfg, Context(report=report))
    assert len(seen) == 1 and seen[0]["samples"] == 32 and seen[0]["kept"]["channels"] == 16


# ---------------------------------------------------------------- shapes prune refuses, and slice telling the truth
@pytest.mark.parametrize(
    "student,field",
    [
        ((2, 24, 64, 2), "student.hidden"),  # 24 is not a multiple of the teacher's head size 16
        ((2, 32, 64, 4), "student.heads"),  # more heads than the teacher's 2
        ((6, 32, 64, 2), "student.layers"),  # deeper than the teacher
        ((2, 32, 128, 2), "student.intermediate"),  # a wider FFN than the teacher's
    ],
)
def test_prune_refuses_a_shape_the_teacher_cannot_give(teachers, student, field):
    with pytest.raises(UserError) as e:
        build_student(teachers["bert"], sizes(*student), examples=random_batches)
    assert e.value.field == field


@pytest.mark.parametrize("init", ["prune:0", "prune:lots", "prune:block,x"])
def test_prune_refuses_a_bad_argument(teachers, init):
    with pytest.raises(UserError) as e:
        build_student(teachers["bert"], sizes(2, 16, 32, 1, init), examples=random_batches)
    assert e.value.field == "student.init"


def test_slice_refuses_a_wider_ffn_and_names_what_it_left_random(teachers, caplog):
    t = teachers["bert"]
    with pytest.raises(UserError) as e:
        build_student(t, sizes(2, 16, 128, 1, "slice"))
    assert e.value.field == "student.intermediate"
    with caplog.at_level(logging.WARNING):
        build_student(t, sizes(2, 16, 32, 1, "slice"))  # the teacher's head size: nothing to say
    assert not caplog.records
    with caplog.at_level(logging.WARNING):
        build_student(t, sizes(2, 48, 64, 3, "slice"))  # wider than the teacher (preflight refuses it before)
    left = [r.getMessage() for r in caplog.records if "left" in r.getMessage()]
    assert len(left) == 1 and "bert.embeddings.word_embeddings.weight" in left[0]
    assert "bert.encoder.layer.0.intermediate.dense.weight" in left[0]
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        build_student(t, sizes(2, 32, 64, 4, "slice"))  # heads of 8, the teacher's are 16
    assert [r.getMessage() for r in caplog.records] == [
        "init slice: the student's head size 8 is not the teacher's 16, so each student head is cut from parts of "
        "teacher heads; keep the teacher's head size (heads: keep_head_size) or use --init prune"
    ]


# ---------------------------------------------------------------- heads that follow the width
@pytest.mark.parametrize(
    "values,teacher,want",
    [
        ({"hidden": 0.5, "heads": "keep_head_size"}, BASE, (6, 384, 1536, 6)),
        ({"hidden": 0.5, "heads": "keep_head_size"}, MINILM, (3, 192, 768, 6)),
        ({"hidden": 0.5, "heads": "keep_head_size"}, LARGE, (12, 512, 2048, 8)),
        ({"hidden": 0.4, "heads": "keep_head_size"}, BASE, (6, 320, 1280, 5)),  # rounds to a multiple of 64
        ({"hidden": "teacher", "heads": "keep_head_size"}, BASE, (6, 768, 3072, 12)),
    ],
)
def test_keep_head_size(values, teacher, want):
    assert tuple(resolve(values, teacher).values()) == want


@pytest.mark.parametrize(
    "values,field",
    [
        ({"hidden": 100, "heads": "keep_head_size"}, "student.hidden"),
        ({"intermediate": "keep_head_size"}, "student.intermediate"),
    ],
)
def test_keep_head_size_refusals(values, field):
    with pytest.raises(UserError) as e:
        resolve(values, BASE)
    assert e.value.field == field


@pytest.mark.parametrize("teacher", [MINILM, BASE, LARGE], ids=["6L-384", "12L-768", "24L-1024"])
def test_every_minilm_glue_student_keeps_the_teachers_head_size(teacher):
    spec = sp.load("minilm_glue")
    assert spec.student["init"] == Choice(("slice", "prune"))
    head = teacher.hidden // teacher.heads
    for layers, hidden in itertools.product(spec.student["layers"].values(), spec.student["hidden"].values()):
        r = resolve({"layers": layers, "hidden": hidden, "heads": spec.student["heads"].first()}, teacher)
        assert r["hidden"] == r["heads"] * head
        check_shape(r, teacher)  # prune can cut every one of them
    study = optuna.create_study(sampler=optuna.samplers.TPESampler(seed=0))
    for p in sp.start_points(spec, teacher):
        study.enqueue_trial(p)
    for _ in range(6):
        vals = sp.sample(spec, study.ask(), teacher)
        assert vals["student_hidden"] == vals["student_heads"] * head and vals["init"] in ("slice", "prune")


# ---------------------------------------------------------------- refused up front: one line, exit 2, before Ray
CASES = [
    (
        "distill-prune-not-whole-heads",
        ["--init", "prune", "--student-hidden", "24", "--student-heads", "2"],
        "student.hidden",
    ),
    ("distill-prune-more-heads", ["--init", "prune", "--student-heads", "4"], "student.heads"),
    ("distill-prune-deeper-than-teacher", ["--init", "prune", "--student-layers", "6"], "student.layers"),
    ("distill-prune-wider-ffn", ["--init", "prune", "--student-intermediate", "128"], "student.intermediate"),
    ("distill-prune-sample-0", ["--init", "prune:0"], "student.init"),
    ("distill-prune-sample-past-train", ["--init", "prune:100000"], "student.init"),
    ("distill-prune-bad-arg", ["--init", "prune:lots"], "student.init"),
    ("distill-slice-wider-ffn", ["--init", "slice", "--student-intermediate", "128"], "student.intermediate"),
]


@pytest.mark.parametrize("extra,field", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_refused_in_process(extra, field, E, trapped, capsys, monkeypatch):  # noqa: F811
    import ray

    monkeypatch.chdir(E.tmp)
    with pytest.raises(SystemExit) as e:
        main_of("distill")(distill(E, *extra))
    out, err = capsys.readouterr()
    assert e.value.code == 2, err
    assert_one_line(err, field)
    assert ray.is_initialized() == trapped and mlflow_runs(E.uri) == 0 and not os.path.exists(E.out)


def test_refused_end_to_end(E):  # noqa: F811
    import subprocess
    import sys

    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    p = subprocess.run(
        [sys.executable, "-m", "raydistill.distill", *distill(E, "--init", "prune:100000")],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd=E.tmp,
    )
    assert p.returncode == 2, p.stderr
    assert "prune:100000 asks for 100000 scoring examples but the run trains on 172" in assert_one_line(
        p.stderr, "student.init"
    )
    assert "Started a local Ray instance" not in p.stdout + p.stderr and mlflow_runs(E.uri) == 0


def test_every_case_is_documented():

    doc = (ROOT / "docs" / "RELIABILITY.md").read_text(encoding="utf-8")
    assert not [c[0] for c in CASES if f"`{c[0]}`" not in doc]
