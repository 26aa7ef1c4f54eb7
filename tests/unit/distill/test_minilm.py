"""MiniLM / MiniLMv2 relation distillation: the loss against hand-computed values, the paper's structure (v1 = the
model's own attention distributions + value relation; v2 = Q-Q, K-K, V-V over relation heads independent of the
student's heads), the captures it reads, its shape checks, the slice init and the method through the loop."""

from __future__ import annotations

import math

import pytest
import torch

from raydistill.common.errors import UserError
from raydistill.config.schema import DistillConfig, RunConfig, StudentConfig, TrainConfig
from raydistill.distill import losses as L
from raydistill.distill.methods import MiniLM, Outputs, relation_heads, teacher_layer


def _softmax(xs):
    m = max(xs)
    e = [math.exp(x - m) for x in xs]
    return [v / sum(e) for v in e]


def _relation_by_hand(a, b, heads, mask):
    """R[b][r][i] = softmax_j over real keys of (a_r[i]·b_r[j]) / √d_r, with plain Python loops."""
    B, T, H = len(a), len(a[0]), len(a[0][0])
    d = H // heads
    out = []
    for n in range(B):
        real = [j for j in range(T) if mask[n][j]]
        per_head = []
        for r in range(heads):
            rows = []
            for i in range(T):
                dots = [sum(a[n][i][r * d + k] * b[n][j][r * d + k] for k in range(d)) / math.sqrt(d) for j in real]
                rows.append(dict(zip(real, _softmax(dots), strict=True)))
            per_head.append(rows)
        out.append(per_head)
    return out


def _relation_kl_by_hand(s_a, s_b, t_a, t_b, heads, mask, per="query"):
    """per="query": the mean over every real query of the batch; "sequence": 1/(A_r·|x|) Σ_r Σ_t KL per sequence x
    (MiniLM eq. 6/7, MiniLMv2), then the mean over the batch."""
    rs, rt = _relation_by_hand(s_a, s_b, heads, mask), _relation_by_hand(t_a, t_b, heads, mask)
    total, count, seqs = 0.0, 0, []
    for n in range(len(mask)):
        seq, real = 0.0, 0
        for i in range(len(mask[n])):
            if not mask[n][i]:
                continue
            count, real = count + 1, real + 1
            for r in range(heads):
                kl = sum(p * (math.log(p) - math.log(rs[n][r][i][j])) for j, p in rt[n][r][i].items()) / heads
                total, seq = total + kl, seq + kl
        seqs.append(seq / real)
    return total / count if per == "query" else sum(seqs) / len(seqs)


def test_relation_kl_matches_hand_computed_values_with_padding_and_different_widths():
    g = torch.Generator().manual_seed(0)
    mask = torch.tensor([[1, 1, 1, 0], [1, 1, 0, 0]])
    s_a, s_b = torch.randn(2, 4, 4, generator=g), torch.randn(2, 4, 4, generator=g)  # student width 4
    t_a, t_b = torch.randn(2, 4, 6, generator=g), torch.randn(2, 4, 6, generator=g)  # teacher width 6
    s_a[:, 3], t_b[1, 2:] = 1e3, -1e3  # padding garbage: must not count
    for per in ("sequence", "query"):
        got = L.relation_kl(s_a, s_b, t_a, t_b, heads=2, mask=mask, per=per)
        want = _relation_kl_by_hand(s_a.tolist(), s_b.tolist(), t_a.tolist(), t_b.tolist(), 2, mask.tolist(), per)
        assert got.item() == pytest.approx(want, rel=1e-5), per
        assert L.relation_kl(s_a, s_b, s_a, s_b, heads=2, mask=mask, per=per).item() == pytest.approx(0.0, abs=1e-6)
    args = (s_a.tolist(), s_b.tolist(), t_a.tolist(), t_b.tolist(), 2, mask.tolist())
    assert L.relation_kl(s_a, s_b, t_a, t_b, heads=2, mask=mask).item() == pytest.approx(
        _relation_kl_by_hand(*args, "sequence"), rel=1e-5
    )  # the default: the papers' reduction
    assert _relation_kl_by_hand(*args, "sequence") != pytest.approx(_relation_kl_by_hand(*args, "query"), rel=1e-3)


def test_per_sequence_mean_worked_example():
    """Two sequences, one head, width 1: sequence 1 has 2 real queries (teacher rows softmax(1, 2) and softmax(2, 4)
    against a uniform student), sequence 2 one real query whose only real key makes KL 0. Per sequence:
    (KL_1 + KL_2) / 2 / 2 for the first, 0 for the second, then the batch mean; per query: (KL_1 + KL_2 + 0) / 3."""
    t = torch.tensor([[[1.0], [2.0]], [[3.0], [0.0]]])
    s = torch.ones(2, 2, 1)
    mask = torch.tensor([[1, 1], [1, 0]])
    kl = [sum(p * math.log(p / 0.5) for p in _softmax(row)) for row in ([1.0, 2.0], [2.0, 4.0])]  # 0.1110, 0.3278
    assert L.relation_kl(s, s, t, t, 1, mask).item() == pytest.approx((sum(kl) / 2 + 0.0) / 2, rel=1e-6)
    assert L.relation_kl(s, s, t, t, 1, mask, per="query").item() == pytest.approx(sum(kl) / 3, rel=1e-6)
    assert L.relation_kl(s, s, t, t, 1, mask).item() == pytest.approx(0.5 * 0.5 * (0.1110 + 0.3278), abs=1e-4)
    with pytest.raises(UserError, match="distill.relation_mean"):
        L.relation_kl(s, s, t, t, 1, mask, per="token")


def test_relation_kl_worked_example_one_head():
    """Two tokens, width 1, one head: R_t = softmax([1·1, 1·2]) per query etc., by hand."""
    t = torch.tensor([[[1.0], [2.0]]])
    s = torch.tensor([[[1.0], [1.0]]])  # uniform student relation
    # teacher rows: q1 → softmax(1, 2), q2 → softmax(2, 4); student rows: uniform (1/2, 1/2)
    kl = 0.0
    for row in ([1.0, 2.0], [2.0, 4.0]):
        p = _softmax(row)
        kl += sum(pi * math.log(pi / 0.5) for pi in p)
    got = L.relation_kl(s, s, t, t, heads=1, mask=torch.ones(1, 2))
    assert got.item() == pytest.approx(kl / 2, rel=1e-6)
    assert got.item() == pytest.approx(0.5 * (0.1110 + 0.3278), abs=1e-4)  # 0.2689·ln(0.2689/0.5) + …


def test_relation_heads_must_divide_the_width():
    with pytest.raises(UserError, match="distill.relation_heads"):
        L.relation_kl(torch.zeros(1, 2, 6), torch.zeros(1, 2, 6), torch.zeros(1, 2, 8), torch.zeros(1, 2, 8), heads=4)


@pytest.fixture(scope="module")
def tiny_bert():
    from transformers import BertConfig, BertModel

    torch.manual_seed(0)
    cfg = BertConfig(
        vocab_size=50,
        hidden_size=32,
        num_hidden_layers=3,
        num_attention_heads=4,
        intermediate_size=64,
        attn_implementation="eager",
    )
    return BertModel(cfg).eval()


def test_capture_keeps_qkv_and_v1_qk_relation_is_the_attention_distribution(tiny_bert):
    """MiniLM v1 distils the attention distributions: the Q·K relation over the model's own heads (√d_k scaling,
    padding keys out) equals the probabilities the model's eager attention computes, on the real query rows."""
    from raydistill.models.features import AttentionCapture

    ids = torch.tensor([[2, 5, 7, 9, 3], [2, 8, 4, 0, 0]])
    mask = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]])
    with torch.no_grad():
        ref = tiny_bert(input_ids=ids, attention_mask=mask, output_attentions=True)
        with AttentionCapture(tiny_bert, (), qkv={2}) as cap:
            out = tiny_bert(input_ids=ids, attention_mask=mask)
    assert torch.allclose(out.last_hidden_state, ref.last_hidden_state, atol=1e-5)  # capture changes nothing
    assert set(cap.qkv) == {2} and not cap.scores
    q, k, v = cap.qkv[2]
    assert q.shape == k.shape == v.shape == (2, 4, 5, 8)
    logp = L._relation_logp(L.concat_heads(q), L.concat_heads(k), 4, mask, "model")
    probs = ref.attentions[2]
    for n in range(2):
        real = int(mask[n].sum())
        assert torch.allclose(logp[n, :, :real, :real].exp(), probs[n, :, :real, :real], atol=1e-5)


def _cfg(version=2, relation_heads=0, teacher_layer_=0, heads=2, hidden=16, stage="all"):
    return RunConfig(
        task="sst2",
        teacher="t",
        student=StudentConfig(layers=2, hidden=hidden, intermediate=32, heads=heads, init="random"),
        distill=DistillConfig(
            method="minilm", version=version, relation_heads=relation_heads, teacher_layer=teacher_layer_, stage=stage
        ),
        train=TrainConfig(epochs=2),
    ).validate()


def test_teacher_layer_resolution():
    d = DistillConfig(method="minilm")
    assert teacher_layer(d, 12) == 12
    assert teacher_layer(DistillConfig(teacher_layer=-2), 12) == 11
    assert teacher_layer(DistillConfig(teacher_layer=7), 12) == 7
    for bad in (13, -13):
        with pytest.raises(UserError, match="distill.teacher_layer"):
            teacher_layer(DistillConfig(teacher_layer=bad), 12)


def test_minilm_defaults_needs_and_shape_checks():
    cfg = _cfg()
    assert cfg.student.init == "random" and cfg.distill.version == 2
    assert RunConfig(task="sst2", teacher="t", distill=DistillConfig(method="minilm")).student.init == "slice"
    m = MiniLM(cfg, "classification", [], (2, 4))
    n = m.needs("intermediate")
    assert n.teacher_qkv == {3} and n.student_qkv == {1} and n.teacher_full and not n.hidden and not n.teacher_att
    assert m.needs("pred") == type(n)()
    assert MiniLM(_cfg(teacher_layer_=-2), "classification", [], (2, 4)).needs("intermediate").teacher_qkv == {2}
    MiniLM.check_shapes(_cfg(), 1, 16, 4, 32, 4)  # v2: 1 student head under a 4-head teacher is fine
    with pytest.raises(UserError, match="student.heads"):
        MiniLM.check_shapes(_cfg(version=1), 1, 16, 4, 32, 4)  # v1 matches attention head by head
    with pytest.raises(UserError, match="distill.relation_heads"):
        MiniLM.check_shapes(_cfg(relation_heads=3), 2, 16, 4, 32, 4)
    with pytest.raises(UserError, match="distill.version"):
        _cfg(version=3) and MiniLM.check(_cfg(version=3))
    assert cfg.to_params()["version"] == "2" and "version" not in RunConfig(task="sst2", teacher="t").to_params()
    assert cfg.to_params()["relation_mean"] == "sequence" and cfg.distill.relation_mean == "sequence"
    with pytest.raises(UserError, match="distill.relation_mean"):
        RunConfig.from_dict({"task": "sst2", "teacher": "t", "distill": {"method": "minilm", "relation_mean": "token"}})
    m = MiniLM(_cfg(), "classification", [], (2, 4))
    assert m.heads(1, 4, 16, 32) == 16
    assert MiniLM(_cfg(version=1), "classification", [], (2, 4)).heads(4, 4, 16, 32) == 4


def test_relation_heads_default_is_the_papers():
    """MiniLMv2 used 48 relation heads for base-size (12-head) teachers and 64 for large (16-head) ones: 4x the
    teacher's heads; when that does not divide both widths, the largest count below it that does."""
    d = DistillConfig(method="minilm")
    assert relation_heads(d, 12, 384, 768) == 48  # BERT-base -> 6L-384 (the paper's MiniLMv2 setting)
    assert relation_heads(d, 16, 384, 1024) == 64  # a large teacher
    assert relation_heads(d, 12, 384, 384) == 48  # the 12-head MiniLM-L6-H384 teacher: relation heads of width 8
    assert relation_heads(d, 12, 192, 384) == 48  # half its width: width 4 in the student
    assert relation_heads(d, 12, 312, 768) == 24  # 48 does not divide 312; gcd(312, 768) = 24
    assert relation_heads(d, 2, 16, 32) == 8
    assert relation_heads(DistillConfig(method="minilm", relation_heads=12), 12, 312, 768) == 12  # set: as given
    MiniLM.check_shapes(_cfg(), 2, 312, 12, 768, 12)  # the default always divides both widths
    with pytest.raises(UserError, match="distill.relation_heads"):
        MiniLM.check_shapes(_cfg(relation_heads=48), 2, 312, 12, 768, 12)


def _qkv(g, heads, width, B=2, T=5):
    d = width // heads
    return tuple(torch.randn(B, heads, T, d, generator=g) for _ in range(3))


@pytest.mark.parametrize("version,relations", [(1, {"qk", "vv"}), (2, {"qq", "kk", "vv"})])
def test_minilm_losses_are_the_papers_relations(version, relations):
    g = torch.Generator().manual_seed(3)
    heads_s = 4 if version == 1 else 1  # v2: the student's head count is free
    m = MiniLM(_cfg(version=version, heads=heads_s), "classification", [], (2, 4))
    s_qkv, t_qkv = _qkv(g, heads_s, 16), _qkv(g, 4, 32)
    batch = {"attention_mask": torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]])}
    out = m.losses("intermediate", Outputs(qkv={1: s_qkv}), Outputs(qkv={3: t_qkv}), batch, None)
    assert set(out) == relations | {"loss"}
    sx = dict(zip("qkv", (L.concat_heads(x) for x in s_qkv), strict=True))
    tx = dict(zip("qkv", (L.concat_heads(x) for x in t_qkv), strict=True))
    heads = 4 if version == 1 else 16  # v1: the attention heads; v2: 4 x the teacher's 4 heads, dividing 16 and 32
    for name in relations:
        a, b = name
        assert out[name].item() == pytest.approx(
            L.relation_kl(sx[a], sx[b], tx[a], tx[b], heads, batch["attention_mask"], per="sequence").item()
        )
    assert out["loss"].item() == pytest.approx(sum(out[r].item() for r in relations))


def test_slice_init_copies_the_leading_block_of_every_other_layer(tiny_teacher):
    from raydistill.models.encoder import load_model
    from raydistill.models.student import build_student

    teacher = load_model(tiny_teacher("classification", 2), "classification")  # 4 layers, hidden 32, 2 heads
    student = build_student(teacher, StudentConfig(layers=2, hidden=16, intermediate=32, heads=1, init="slice"))
    t, s = teacher.state_dict(), student.state_dict()
    emb = "bert.embeddings.word_embeddings.weight"
    assert torch.equal(s[emb], t[emb][:, :16])
    # every_other 4→2 takes teacher layers 1 and 4 (0-based 0 and 3)
    q = "bert.encoder.layer.{}.attention.self.query.weight"
    assert torch.equal(s[q.format(0)], t[q.format(0)][:16, :16])
    assert torch.equal(s[q.format(1)], t[q.format(3)][:16, :16])
    ff = "bert.encoder.layer.1.intermediate.dense.weight"
    assert torch.equal(s[ff], t[ff.replace("layer.1", "layer.3")][:32, :16])
    assert torch.equal(s["classifier.weight"], t["classifier.weight"][:, :16])


def test_heads_as_a_fraction_of_the_teachers():
    from raydistill.config.sizes import Shape, resolve

    t = Shape(6, 384, 1536, 12)
    assert resolve({"layers": 0.5, "hidden": 0.5, "heads": 0.5}, t) == {
        "layers": 3,
        "hidden": 192,
        "intermediate": 768,
        "heads": 6,
    }
    assert resolve({"hidden": "teacher", "heads": 0.5}, t)["heads"] == 6


def test_minilm_runs_through_the_loop_and_learns_the_relations(tiny_teacher, glue_dir):
    """Both stages through loop.run (no Ray) with a narrower student of another head count: the relation loss
    falls over stage 1, then the prediction stage trains as kd."""
    from raydistill.train.loop import Context, run

    teacher = tiny_teacher("classification", 2)
    cfg = RunConfig(
        task="sst2",
        teacher=teacher,
        data_dir=glue_dir,
        student=StudentConfig(layers=2, hidden=16, intermediate=32, heads=1, init="slice"),
        distill=DistillConfig(method="minilm", temperature=2.0, alpha=0.5, intermediate_epochs=2),
        train=TrainConfig(epochs=3, batch_size=8, max_length=64, lr=3e-3, eval_limit=16, train_limit=64),
    ).validate()
    reports = []
    out = run(cfg, Context(report=lambda m, c: reports.append(m)))
    stages = [r["stage"] for r in reports]
    assert stages == ["intermediate", "intermediate", "pred"]
    assert {"train_qq", "train_kk", "train_vv"} <= set(reports[0])
    assert reports[1]["train_loss"] < reports[0]["train_loss"]
    assert math.isfinite(out["train_loss"]) and "train_soft" in reports[-1]
