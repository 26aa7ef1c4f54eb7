import pytest
import torch

from raydistill.common.errors import UserError
from raydistill.config.schema import StudentConfig
from raydistill.models.encoder import family, fingerprint, load_model
from raydistill.models.student import INITS, build_student, count_params, init_layers
from raydistill.testing import TinyShape, make_tiny_model

SIZES = dict(hidden=32, intermediate=64, heads=2)  # the tiny teachers' sizes (4 layers)


@pytest.fixture(scope="module")
def dirs(tmp_path_factory):
    root = tmp_path_factory.mktemp("models")
    return {
        "bert": make_tiny_model(root / "bert", kind="classification", num_labels=3, label_names=["a", "b", "c"]),
        "roberta": make_tiny_model(
            root / "roberta", kind="classification", num_labels=2, shape=TinyShape(family="roberta")
        ),
        "token": make_tiny_model(root / "token", kind="token", num_labels=5),
        "qa": make_tiny_model(root / "qa", kind="qa"),
        "regression": make_tiny_model(root / "reg", kind="regression"),
        "root": root,
    }


@pytest.fixture(scope="module")
def bert(dirs):
    return load_model(dirs["bert"], "classification", num_labels=3)


def _sd(module):
    return {k: v for k, v in module.state_dict().items()}


def assert_same(a, b):
    sa, sb = _sd(a), _sd(b)
    assert sa.keys() == sb.keys()
    for k in sa:
        assert torch.equal(sa[k], sb[k]), k


@pytest.mark.parametrize(
    "init,expected", [("first_k", [1, 2]), ("every_other", [1, 4]), ("uniform", [2, 4]), ("layers:1,4", [1, 4])]
)
def test_layer_copy_inits_copy_chosen_layers_embeddings_and_head(bert, init, expected):
    s = build_student(bert, StudentConfig(layers=2, init=init, **SIZES))
    assert init_layers(init, 2, 4) == expected
    for i, tl in enumerate(expected):
        assert_same(s.bert.encoder.layer[i], bert.bert.encoder.layer[tl - 1])
    assert_same(s.bert.embeddings, bert.bert.embeddings)
    assert_same(s.bert.pooler, bert.bert.pooler)
    assert_same(s.classifier, bert.classifier)
    assert s.config.num_hidden_layers == 2 and s.config._attn_implementation == "sdpa"


def test_paper_layer_choices():
    assert init_layers("every_other", 6, 12) == [1, 3, 5, 8, 10, 12]  # DistilBERT (top layer kept)
    assert init_layers("first_k", 3, 12) == [1, 2, 3]  # PKD
    assert init_layers("uniform", 4, 12) == [3, 6, 9, 12]
    assert init_layers("uniform", 8, 12) == [2, 3, 5, 6, 8, 9, 11, 12]  # round half up
    assert init_layers("random", 4, 12) is None
    assert set(INITS) == {"random", "first_k", "every_other", "uniform", "layers", "slice", "prune", "checkpoint"}


def test_random_init_keeps_family_head_and_labels(bert):
    s = build_student(bert, StudentConfig(layers=3, hidden=24, intermediate=48, heads=3, init="random"))
    assert type(s) is type(bert)
    assert (s.config.hidden_size, s.config.num_hidden_layers, s.config.num_attention_heads) == (24, 3, 3)
    assert s.config.num_labels == 3 and s.config.id2label == bert.config.id2label
    emb_s, emb_t = s.bert.embeddings.word_embeddings.weight, bert.bert.embeddings.word_embeddings.weight
    assert not torch.equal(emb_s, emb_t[:, :24])
    assert count_params(s) < count_params(bert)
    assert count_params(s) == sum(p.numel() for p in s.parameters())


def test_random_student_may_be_deeper_than_teacher(bert):
    assert build_student(bert, StudentConfig(layers=6, init="random", **SIZES)).config.num_hidden_layers == 6


def test_roberta_teacher_gives_roberta_student(dirs):
    t = load_model(dirs["roberta"], "classification", num_labels=2)
    s = build_student(t, StudentConfig(layers=2, init="every_other", **SIZES))
    assert family(s) == "roberta" and type(s).__name__ == "RobertaForSequenceClassification"
    assert_same(s.roberta.embeddings, t.roberta.embeddings)
    assert_same(s.roberta.encoder.layer[1], t.roberta.encoder.layer[3])  # every_other keeps the top layer
    assert_same(s.classifier, t.classifier)  # dense + out_proj


@pytest.mark.parametrize("kind,head", [("token", "classifier"), ("qa", "qa_outputs"), ("regression", "classifier")])
def test_other_heads_copied(dirs, kind, head):
    t = load_model(dirs[kind], kind)
    s = build_student(t, StudentConfig(layers=2, init="first_k", **SIZES))
    assert type(s) is type(t)
    assert s.config.problem_type == t.config.problem_type and s.config.num_labels == t.config.num_labels
    assert_same(getattr(s, head), getattr(t, head))


def test_base_student_has_no_unused_pooler(dirs):
    t = load_model(make_tiny_model(dirs["root"] / "base", kind="base"), "base")
    s = build_student(t, StudentConfig(layers=2, init="first_k", **SIZES))
    assert s.pooler is None  # DDP fails on parameters that get no gradient


@pytest.mark.parametrize(
    "field,kw",
    [
        ("student.hidden", dict(hidden=16, intermediate=64, heads=2)),
        ("student.intermediate", dict(hidden=32, intermediate=48, heads=2)),
        ("student.heads", dict(hidden=32, intermediate=64, heads=4)),
    ],
)
def test_layer_copy_needs_teacher_sizes(bert, field, kw):
    with pytest.raises(UserError) as e:
        build_student(bert, StudentConfig(layers=2, init="first_k", **kw))
    assert e.value.field == field and "--init random" in str(e.value)
    assert str(
        getattr(
            bert.config,
            {
                "student.hidden": "hidden_size",
                "student.intermediate": "intermediate_size",
                "student.heads": "num_attention_heads",
            }[field],
        )
    ) in str(e.value)


@pytest.mark.parametrize(
    "init,layers,field",
    [
        ("first_k", 5, "student.layers"),  # deeper than the 4-layer teacher
        ("layers:1,2", 3, "student.init"),  # wrong count
        ("layers:2,1", 2, "student.init"),  # not increasing
        ("layers:1,9", 2, "student.init"),  # beyond the teacher
        ("layers:a,b", 2, "student.init"),
        ("fancy", 2, "student.init"),
        ("first_k:3", 2, "student.init"),  # takes no argument
        ("checkpoint:/does/not/exist", 2, "student.init"),
    ],
)
def test_bad_inits(bert, init, layers, field):
    with pytest.raises(UserError) as e:
        build_student(bert, StudentConfig(layers=layers, init=init, **SIZES))
    assert e.value.field == field


def test_checkpoint_init_keeps_weights_and_builds_fresh_head(bert, dirs, tmp_path):
    # a general-distillation student: bare encoder, different sizes than the teacher
    gen_teacher = load_model(dirs["bert"], "base")
    general = build_student(gen_teacher, StudentConfig(layers=2, hidden=16, intermediate=32, heads=2))
    general.save_pretrained(tmp_path / "general")
    s = build_student(bert, StudentConfig(init=f"checkpoint:{tmp_path / 'general'}"))
    assert type(s) is type(bert) and s.config.num_hidden_layers == 2 and s.config.hidden_size == 16
    assert_same(s.bert.encoder, general.encoder)
    assert_same(s.bert.embeddings, general.embeddings)
    assert s.classifier.out_features == 3 and s.config.id2label == bert.config.id2label


def test_checkpoint_of_another_family_is_refused(bert, dirs, tmp_path):
    rob = build_student(load_model(dirs["roberta"], "classification"), StudentConfig(layers=1, init="random", **SIZES))
    rob.save_pretrained(tmp_path / "rob")
    with pytest.raises(UserError) as e:
        build_student(bert, StudentConfig(init=f"checkpoint:{tmp_path / 'rob'}"))
    assert e.value.field == "student.init" and "family" in str(e.value)


def test_checkpoint_with_other_head_size(bert, dirs, tmp_path):
    # a 2-label fine-tuned student used for a 3-label task: encoder kept, fresh 3-label head
    two = build_student(
        load_model(make_tiny_model(dirs["root"] / "two", kind="classification", num_labels=2), "classification"),
        StudentConfig(layers=2, init="first_k", **SIZES),
    )
    two.save_pretrained(tmp_path / "two")
    s = build_student(bert, StudentConfig(init=f"checkpoint:{tmp_path / 'two'}"))
    assert s.classifier.out_features == 3
    assert_same(s.bert.encoder, two.bert.encoder)


def test_load_model_errors(tmp_path, dirs):
    with pytest.raises(UserError) as e:
        load_model(tmp_path / "missing", "classification")
    assert e.value.field == "teacher"
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "config.json").write_text("{not json")
    with pytest.raises(UserError, match="config"):
        load_model(tmp_path / "broken", "classification")
    (tmp_path / "broken" / "config.json").write_text('{"model_type": "gpt2"}')
    with pytest.raises(UserError, match="BERT/RoBERTa"):
        load_model(tmp_path / "broken", "classification")
    with pytest.raises(UserError, match="3-label head"):
        load_model(dirs["bert"], "classification", num_labels=2)
    with pytest.raises(UserError):
        load_model(dirs["bert"], "nonsense")


def test_load_model_fresh_head_and_fingerprint(dirs):
    m = load_model(dirs["bert"], "token", num_labels=4)  # a classification checkpoint as a token tagger: fresh head
    assert m.classifier.out_features == 4 and family(m) == "bert" and m.config._attn_implementation == "sdpa"
    fp = fingerprint(dirs["bert"])
    assert fp == fingerprint(dirs["bert"]) and len(fp) == 12 and fp != fingerprint(dirs["roberta"])


def test_fingerprint_is_worked_out_once_per_folder_until_its_files_change(dirs, tmp_path, monkeypatch):
    import shutil

    from raydistill.models import encoder

    teacher = shutil.copytree(dirs["bert"], tmp_path / "teacher")
    hashed = []
    work = encoder._hash_model
    monkeypatch.setattr(encoder, "_hash_model", lambda path, weights: hashed.append(path) or work(path, weights))
    first = fingerprint(teacher)
    assert fingerprint(teacher) == first and fingerprint(teacher, length=20)[:12] == first and len(hashed) == 1
    weights = next(p for p in teacher.iterdir() if p.suffix == ".safetensors")
    data = bytearray(weights.read_bytes())
    data[-1] ^= 1  # the same size, other bytes, a newer time
    weights.write_bytes(bytes(data))
    assert fingerprint(teacher) != first and len(hashed) == 2
