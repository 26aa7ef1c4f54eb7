"""Paper fidelity (issue 12): DistilBERT's layer extraction, per-method defaults (init, T, α), DistilBERT's general
distillation (dynamic masking, 5·soft + 2·MLM + 1·cos), one dev-set rule for every method, augmentation after the
hold-out."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
import torch
import torch.nn.functional as F

from raydistill.common.errors import UserError
from raydistill.config.coerce import build
from raydistill.config.schema import DistillConfig, RunConfig, StudentConfig, TrainConfig
from raydistill.models.encoder import load_model
from raydistill.models.student import build_student, init_layers
from raydistill.testing import TinyShape, make_tiny_model

TINY = dict(layers=2, hidden=32, intermediate=64, heads=2)


def run_cfg(method="kd", task="sst2", student=None, **distill):
    return RunConfig(
        task=task,
        teacher="unused",
        student=student or StudentConfig(**TINY),
        distill=DistillConfig(method=method, **distill),
    )


# ---------------------------------------------------------------- 1. every_other keeps the teacher's top layer
def test_every_other_takes_distilberts_layers():
    # DistilBERT's extract_distilbert.py: std_idx 0, 2, 4, 7, 9, 11 (0-based) for 12 → 6
    assert [t - 1 for t in init_layers("every_other", 6, 12)] == [0, 2, 4, 7, 9, 11]
    assert [t - 1 for t in init_layers("every_other", 3, 6)] == [0, 2, 5]
    assert [t - 1 for t in init_layers("every_other", 12, 24)] == list(range(0, 12, 2)) + list(range(13, 24, 2))
    assert init_layers("every_other", 4, 4) == [1, 2, 3, 4]


def test_every_other_copies_those_layers(tmp_path):
    teacher = load_model(make_tiny_model(tmp_path / "t12", shape=TinyShape(layers=12)), "classification", num_labels=2)
    student = build_student(teacher, StudentConfig(layers=6, hidden=32, intermediate=64, heads=2, init="every_other"))
    s_layers, t_layers = student.bert.encoder.layer, teacher.bert.encoder.layer
    for i, t in enumerate([0, 2, 4, 7, 9, 11]):
        for (name, a), b in zip(s_layers[i].state_dict().items(), t_layers[t].state_dict().values(), strict=True):
            assert torch.equal(a, b), (i, t, name)
    # the top student layer is the teacher's top layer, not layer 11 (1-based) as before
    top = s_layers[5].attention.self.query.weight
    assert torch.equal(top, t_layers[11].attention.self.query.weight)
    assert not torch.equal(top, t_layers[10].attention.self.query.weight)


# ---------------------------------------------------------------- 2. default init per method
@pytest.mark.parametrize(
    "method,init",
    [
        ("pkd", "first_k"),
        ("distilbert", "every_other"),
        ("kd", "random"),
        ("tinybert", "random"),
        ("two_stage", "random"),
        ("finetune", "random"),
    ],
)
def test_default_init_is_the_methods(method, init):
    cfg = run_cfg(method)
    assert cfg.student.init == init and cfg.to_params()["init"] == init
    # resolved once: a copy through a dict (Ray workers, checkpoints) keeps it
    assert RunConfig.from_dict(cfg.to_dict()) == cfg


def test_explicit_init_wins_and_pretrained_still_works():
    assert run_cfg("pkd", student=StudentConfig(**TINY, init="random")).student.init == "random"
    assert (
        RunConfig(
            task="sst2", teacher="t", student=StudentConfig(init="pretrained"), distill=DistillConfig(method="finetune")
        )
        .validate()
        .to_params()["init"]
        == "pretrained"
    )
    assert StudentConfig().init == ""  # unset outside a run: the method decides


def test_cli_init_defaults_to_the_methods(tmp_path):
    from raydistill.commands.distill import config_from_args, parser

    sizes = ["--student-layers", "2", "--student-hidden", "32", "--student-intermediate", "64", "--student-heads", "2"]

    def cfg(*extra):
        return config_from_args(parser().parse_args(["--teacher", str(tmp_path), "--task", "sst2", *sizes, *extra]))

    assert cfg("--method", "pkd").to_params()["init"] == "first_k"
    assert cfg("--method", "distilbert").to_params()["init"] == "every_other"
    assert cfg("--method", "pkd", "--init", "uniform").student.init == "uniform"


def test_default_init_reaches_the_student(tiny_teacher):
    from raydistill.train.objective import build_objective

    teacher_dir = tiny_teacher("classification", 2)
    cfg = RunConfig(
        task="sst2",
        teacher=teacher_dir,
        student=StudentConfig(**TINY),
        distill=DistillConfig(method="pkd", mapping="last"),
    ).validate()
    _, student, teacher, _ = build_objective(cfg)
    for i in range(2):  # first_k: the bottom two teacher layers
        assert torch.equal(
            student.bert.encoder.layer[i].output.dense.weight, teacher.bert.encoder.layer[i].output.dense.weight
        )


# ---------------------------------------------------------------- 3. method defaults for T and α
@pytest.mark.parametrize(
    "method,T,alpha", [("tinybert", 1.0, 1.0), ("kd", 4.0, 0.5), ("pkd", 4.0, 0.5), ("distilbert", 4.0, 0.5)]
)
def test_default_temperature_and_alpha(method, T, alpha):
    cfg = run_cfg(method).validate()
    assert (cfg.distill.temperature, cfg.distill.alpha) == (T, alpha)
    p = cfg.to_params()
    assert (float(p["temperature"]), float(p["alpha"])) == (T, alpha)


def test_explicit_temperature_and_alpha_win():
    d = run_cfg("tinybert", temperature=2.0, alpha=0.5).distill
    assert (d.temperature, d.alpha) == (2.0, 0.5)
    assert run_cfg("tinybert", alpha=0.0).distill.alpha == 0.0  # 0 is a value, not "unset"


def test_unset_fields_coerce_from_yaml_and_set():
    # sweep --set / YAML values for fields whose default is None still get their declared type
    d = build(DistillConfig, {"temperature": "7.5", "alpha": 1, "alpha_mlm": "2"}, "distill.")
    assert (d.temperature, d.alpha, d.alpha_mlm) == (7.5, 1.0, 2.0) and isinstance(d.alpha, float)
    with pytest.raises(UserError, match="expected float"):
        build(DistillConfig, {"temperature": "hot"}, "distill.")


def _cls_outputs(seed=0):
    g = torch.Generator().manual_seed(seed)
    from raydistill.distill.methods import Outputs

    return Outputs(logits=torch.randn(4, 3, generator=g)), Outputs(logits=torch.randn(4, 3, generator=g))


def test_tinybert_prediction_stage_is_soft_targets_at_T1():
    from raydistill.distill.methods import TinyBERT

    m = TinyBERT(run_cfg("tinybert"), "classification", [])
    s, t = _cls_outputs()
    out = m.losses("pred", s, t, {"labels": torch.tensor([0, 1, 2, 0])}, None)
    want = F.kl_div(F.log_softmax(s.logits, -1), F.softmax(t.logits, -1), reduction="batchmean")  # T = 1
    assert "hard" not in out and torch.allclose(out["loss"], want) and torch.allclose(out["soft"], want)


# ---------------------------------------------------------------- 4. DistilBERT general distillation
def test_distilbert_general_defaults_are_the_papers():
    d = run_cfg("distilbert", task="general").validate().distill
    assert (d.temperature, d.alpha, d.alpha_mlm, d.alpha_cos) == (2.0, 5.0, 2.0, 1.0)
    run_cfg("distilbert", task="general", alpha=5.0).validate()  # α > 1 is fine without a hard loss
    with pytest.raises(UserError) as e:
        run_cfg("distilbert", task="sst2", alpha=5.0).validate()  # on a task α and 1 − α split soft and hard
    assert e.value.field == "distill.alpha"
    assert run_cfg("tinybert", task="general").distill.alpha_mlm == 0.0


def test_distilbert_general_loss_is_5_soft_2_mlm_1_cos():
    from raydistill.distill.methods import DistilBERT, Outputs

    g = torch.Generator().manual_seed(0)
    B, L, V, H, T = 2, 5, 7, 4, 2.0
    mask = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]])
    labels = torch.full((B, L), -100)
    labels[0, 1], labels[0, 3], labels[1, 2] = 3, 5, 0
    s = Outputs(logits=torch.randn(B, L, V, generator=g), hidden=(None, torch.randn(B, L, H, generator=g)))
    t = Outputs(logits=torch.randn(B, L, V, generator=g), hidden=(None, torch.randn(B, L, H, generator=g)))
    obj = SimpleNamespace(project=lambda i, h: h)
    out = DistilBERT(run_cfg("distilbert", task="general"), "mlm", []).losses(
        "pred", s, t, {"attention_mask": mask, "labels": labels}, obj
    )

    real = mask.bool()
    p_t, log_p_s = F.softmax(t.logits / T, -1), F.log_softmax(s.logits / T, -1)
    soft = T * T * (p_t * (p_t.log() - log_p_s)).sum(-1)[real].mean()  # T²·KL per real token, averaged
    mlm = F.cross_entropy(s.logits[labels != -100], labels[labels != -100])
    cos = (1 - F.cosine_similarity(s.hidden[-1], t.hidden[-1], dim=-1))[real].mean()
    for k, v in (("soft", soft), ("mlm", mlm), ("cos", cos)):
        assert torch.allclose(out[k], v, atol=1e-6), k
    assert torch.allclose(out["loss"], 5 * soft + 2 * mlm + 1 * cos, atol=1e-5)


@pytest.fixture(scope="module")
def tok(tmp_path_factory):
    from transformers import AutoTokenizer

    from tests.conftest import _texts

    d = make_tiny_model(tmp_path_factory.mktemp("mlm"), kind="mlm", texts=_texts(), shape=TinyShape(layers=1))
    return AutoTokenizer.from_pretrained(d)


def test_dynamic_masking_fresh_per_epoch_deterministic_and_batch_independent(tok):
    from raydistill.data.general import DynamicMasking, encode_mlm
    from tests.conftest import _texts

    texts = [{"text": t} for t in _texts()[:20]]
    feats = encode_mlm(texts, tok, 32, seed=3).features
    plain = [tok(t["text"], truncation=True, max_length=32)["input_ids"] for t in texts]
    special = set(tok.all_special_ids)
    masker = DynamicMasking(tok, seed=3)
    idx = list(range(20))
    e0, e1 = masker(feats, idx, 0), masker(feats, idx, 1)
    assert e0 == masker(feats, idx, 0)  # deterministic
    assert [f["labels"] for f in e0] != [f["labels"] for f in e1]  # a fresh mask each epoch
    assert e0[7] == masker([feats[2], feats[7]], [2, 7], 0)[1]  # the mask does not depend on batch-mates
    assert masker(e1, idx, 0) == e0  # re-masking starts from the original pieces, not the previous mask
    for f, ids in zip(e0 + e1, plain + plain, strict=True):
        chosen = [i for i, lab in enumerate(f["labels"]) if lab != -100]
        n = sum(t not in special for t in ids)
        assert len(chosen) == max(1, int(0.15 * n + 0.5))  # BERT: round(15%), at least one
        assert all(ids[i] not in special and f["labels"][i] == ids[i] for i in chosen)
        assert all(f["input_ids"][i] == ids[i] for i in range(len(ids)) if i not in chosen)
    assert feats == encode_mlm(texts, tok, 32, seed=3).features  # the static (dev) mask is fixed


# ---------------------------------------------------------------- 5. one dev-set rule; augmentation after the hold-out
def nsmc_cfg(korean_dir, method="kd", seed=42, augment_dir=None):
    return RunConfig(
        task="nsmc",
        teacher="t",
        data_dir=korean_dir,
        augment_dir=augment_dir,
        student=StudentConfig(**TINY, init="random"),
        distill=DistillConfig(method=method),
        train=TrainConfig(seed=seed),
    )


def test_every_method_holds_out_dev_from_nsmc_train(korean_dir):
    from raydistill.data.splits import train_and_eval_examples
    from raydistill.tasks import get_task

    task = get_task("nsmc")
    full = task.loader(task, korean_dir, "train")
    test = task.loader(task, korean_dir, "test")
    splits = {m: train_and_eval_examples(nsmc_cfg(korean_dir, m), task) for m in ("kd", "pkd", "tinybert", "two_stage")}
    assert splits["kd"] == splits["pkd"] == splits["tinybert"] == splits["two_stage"]
    assert train_and_eval_examples(nsmc_cfg(korean_dir, seed=7), task) == splits["kd"]  # a property of the data
    from raydistill.data.splits import train_val_dev

    train, dev = splits["kd"]
    _, val, _ = train_val_dev(nsmc_cfg(korean_dir), task)
    assert (len(dev), len(val), len(train)) == (10, 9, 77) and dev != test[:10]  # 10% of 96 rows, rounded per label
    # train, the validation split and dev partition NSMC's train split
    assert sorted(map(json.dumps, train + val + dev)) == sorted(map(json.dumps, full))


def _held(korean_dir):
    from raydistill.data.splits import split_train
    from raydistill.tasks import get_task

    rows, held = split_train(get_task("nsmc"), korean_dir)
    return rows, held.out_of_train  # dev, and (phrase rows only) the training rows inside a dev sentence


def test_augmented_rows_of_held_out_examples_never_train(korean_dir, tmp_path):
    from raydistill.data.splits import train_and_eval_examples
    from raydistill.tasks import get_task

    rows, held = _held(korean_dir)
    # an augmented set made from every train row (as before the fix): two copies each, tagged with their source
    aug = [{**ex, "text": ex["text"] + extra, "source_index": i} for i, ex in enumerate(rows) for extra in ("", " !")]
    (tmp_path / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in aug))
    from raydistill.data.splits import val_indices

    train, dev = train_and_eval_examples(nsmc_cfg(korean_dir, augment_dir=str(tmp_path)), get_task("nsmc"))
    val = set(val_indices(rows, get_task("nsmc"), 0.1, held))  # validation rows never train either
    assert len(train) == 2 * (len(rows) - len(held) - len(val)) and not {r["source_index"] for r in train} & (
        held | val
    )
    assert dev == [rows[i] for i in sorted(held)]
    # a set that cannot say where its rows come from is refused where a hold-out applies
    (tmp_path / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(UserError) as e:
        train_and_eval_examples(nsmc_cfg(korean_dir, augment_dir=str(tmp_path)), get_task("nsmc"))
    assert e.value.field == "augment_dir"


def test_augment_command_augments_only_post_holdout_rows(korean_dir, tiny_teacher, tmp_path):
    from raydistill.distill import augment

    rows, held = _held(korean_dir)
    augment.main(
        [
            "--task",
            "nsmc",
            "--data-dir",
            korean_dir,
            "--mlm",
            tiny_teacher("mlm"),
            "--output",
            str(tmp_path),
            "--n",
            "1",
            "--k",
            "2",
            "--max-length",
            "32",
        ]
    )
    out = [json.loads(line) for line in (tmp_path / "train.jsonl").read_text().splitlines()]
    assert len(out) == 2 * (len(rows) - len(held))
    assert {r["source_index"] for r in out} == set(range(len(rows))) - held
    assert json.loads((tmp_path / "augment.json").read_text())["held_out_rows"] == len(held)
