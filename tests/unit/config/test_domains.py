"""The typed search space (issue 47 item 3): domains parsed once from the YAML and bound to the field they set,
checked against the field's type at load, sampled through Optuna by the same names as before, and a trial's config
made by ``dataclasses.replace`` with the method's defaults filled in one place."""

from __future__ import annotations

import pickle

import optuna
import pytest

from raydistill.common.errors import UserError
from raydistill.config import space as sp
from raydistill.config.domains import Choice, Fixed, IntUniform, LogUniform, Param, Uniform, parse_domain
from raydistill.config.schema import DistillConfig, RunConfig, StudentConfig, param_name
from raydistill.config.sizes import Shape

BERT_BASE = Shape(12, 768, 3072, 12)


@pytest.mark.parametrize(
    "yaml_value,domain",
    [
        (4, Fixed(4)),
        ("first_k", Fixed("first_k")),
        ({"choice": ["skip", "last"]}, Choice(("skip", "last"))),
        ({"uniform": [0.0, 1.0]}, Uniform(0.0, 1.0)),
        ({"loguniform": [1, 20]}, LogUniform(1, 20)),
        ({"int": [1, 6]}, IntUniform(1, 6)),
    ],
)
def test_each_yaml_form_is_one_domain_object(yaml_value, domain):
    assert parse_domain("distill.temperature", yaml_value) == domain
    assert domain.searched == (not isinstance(domain, Fixed))


@pytest.mark.parametrize(
    "bad",
    [{"normal": [0, 1]}, {"choice": []}, {"uniform": [1, 1]}, {"loguniform": [0, 1]}, {"int": [1]}, {"a": 1, "b": 2}],
)
def test_a_malformed_domain_is_one_line_naming_its_key(bad):
    with pytest.raises(UserError) as e:
        parse_domain("distill.temperature", bad)
    assert e.value.field == "distill.temperature"


def test_the_spaces_domains_are_bound_to_the_fields_they_set():
    spec = sp.load("pkd_glue")
    by_key = {p.key: p for p in spec.params}
    t = by_key["distill.temperature"]
    assert (t.section, t.field, t.domain, t.name) == ("distill", "temperature", LogUniform(1, 20), "temperature")
    assert by_key["student.layers"].name == "student_layers" and by_key["student.init"].name == "init"
    assert by_key["train.lr"].domain == LogUniform(1.0e-5, 3.0e-4) and spec.fixed("train")["epochs"] == 4
    assert spec.method == Fixed("pkd")


@pytest.mark.parametrize(
    "section,values,field",
    [
        # only the first value used to be built at load: a later choice failed inside a trial
        ("distill", {"temperature": {"choice": [2, "hot"]}}, "distill.temperature"),
        # a float range on an integer field drew 23.7 for a batch size: refused at load now
        ("train", {"batch_size": {"uniform": [16, 64]}}, "train.batch_size"),
        ("train", {"group_by_length": {"loguniform": [1, 2]}}, "train.group_by_length"),
        ("distill", {"temprature": 4}, "distill.temprature"),  # an unknown key: the existing one-line error
    ],
)
def test_every_value_of_a_domain_is_checked_against_its_fields_type_at_load(section, values, field):
    with pytest.raises(UserError) as e:
        sp.parse({"method": "kd", section: values})
    assert e.value.field == field


def test_every_method_a_space_names_is_known_at_load():
    with pytest.raises(UserError) as e:
        sp.parse({"method": {"choice": ["kd", "pkdd"]}})
    assert e.value.field == "distill.method" and "pkdd" in str(e.value)


class Recorder:
    """A fake Optuna trial: records every suggest call, answers the low end / the first choice."""

    def __init__(self):
        self.calls = []

    def suggest_float(self, name, low, high, *, log=False):
        self.calls.append(("float", name, low, high, log))
        return low

    def suggest_int(self, name, low, high):
        self.calls.append(("int", name, low, high))
        return low

    def suggest_categorical(self, name, choices):
        self.calls.append(("categorical", name, list(choices)))
        return choices[0]


def test_optuna_is_asked_through_the_domains_by_the_names_it_always_had():
    spec = sp.load("pkd_glue", ["train.warmup_ratio={uniform: [0.0, 0.2]}", "augment={int: [0, 2]}"])
    t = Recorder()
    vals = sp.sample(spec, t, BERT_BASE)
    assert t.calls == [
        ("categorical", "student_layers", [0.5, 0.25]),
        ("float", "temperature", 1, 20, True),
        ("float", "alpha", 0.0, 1.0, False),
        ("float", "beta", 1, 1000, True),
        ("categorical", "mapping_6L", ["skip", "last"]),  # per depth: each depth keeps one choice set
        ("float", "lr", 1.0e-5, 3.0e-4, True),
        ("float", "warmup_ratio", 0.0, 0.2, False),
        ("int", "augment", 0, 2),
    ]
    assert vals["student_layers"] == 6 and vals["student_hidden"] == 768 and vals["init"] == "first_k"


def test_a_fixed_trial_gives_back_its_values():
    spec = sp.load("pkd_glue")
    point = {"student_layers": 0.25, "temperature": 7.5, "alpha": 0.3, "beta": 50.0, "mapping_3L": "last", "lr": 1e-4}
    vals = sp.sample(spec, optuna.trial.FixedTrial(point), BERT_BASE)
    assert vals["student_layers"] == 3 and vals["mapping"] == "last"
    assert (vals["temperature"], vals["alpha"], vals["beta"], vals["lr"]) == (7.5, 0.3, 50.0, 1e-4)


def test_recipes_are_enqueued_by_the_params_names():
    spec = sp.load("pkd_glue")
    first = sp.start_points(spec, BERT_BASE)[0]
    assert first["student_layers"] == 0.5 and first["temperature"] == 20 and first["mapping_6L"] == "skip"
    with pytest.raises(UserError) as e:
        sp.load("pkd_glue", ["search.start_from=[{temperature: 40}]"])
    assert e.value.field == "search.start_from[0].temperature" and "loguniform [1, 20]" in str(e.value)


def base_config() -> RunConfig:
    return RunConfig.from_dict({"task": "sst2", "teacher": "t", "train": {"epochs": 2, "lr": 1e-3}})


def test_a_trial_gets_its_own_methods_defaults_where_the_space_sets_none():
    base = base_config()  # made as kd: T=4, α=0.5 filled in
    assert (base.distill.temperature, base.distill.alpha) == (4.0, 0.5)
    cfg = sp.trial_config(base, {"method": "tinybert", "student_layers": 4, "mapping_4L": "top", "mapping": "top"})
    # TinyBERT's own T=1, α=1 (not kd's leaking through the base), its default init; the base's train flags kept
    assert (cfg.distill.temperature, cfg.distill.alpha, cfg.distill.alpha_mlm) == (1.0, 1.0, 0.0)
    assert cfg.student.layers == 4 and cfg.distill.mapping == "top" and (cfg.train.epochs, cfg.train.lr) == (2, 1e-3)
    pkd = sp.trial_config(base, {"method": "pkd"})
    assert (pkd.student.init, pkd.distill.temperature, pkd.distill.alpha) == ("first_k", 4.0, 0.5)  # PKD's init


def test_a_value_the_space_sets_wins_over_the_methods_default():
    base = base_config()
    cfg = sp.trial_config(base, {"method": "tinybert", "temperature": 4, "init": "first_k", "lr": 3e-4})
    assert cfg.distill.temperature == 4.0 and isinstance(cfg.distill.temperature, float)  # the field's type
    assert cfg.distill.alpha == 1.0 and cfg.student.init == "first_k" and cfg.train.lr == 3e-4


def test_a_trial_config_is_validated():
    with pytest.raises(UserError) as e:
        sp.trial_config(base_config(), {"method": "kd", "alpha": 1.5})
    assert e.value.field == "distill.alpha"


def test_method_defaults_are_filled_in_one_place():
    from raydistill.distill.methods.registry import with_defaults

    d, s = with_defaults(DistillConfig(method="tinybert"), StudentConfig(), labelled=True)
    assert (d.temperature, d.alpha, s.init) == (1.0, 1.0, "random")
    d, s = with_defaults(DistillConfig(method="distilbert", temperature=3.0), StudentConfig(init="x"), labelled=False)
    assert (d.temperature, d.alpha, d.alpha_mlm, s.init) == (3.0, 5.0, 2.0, "x")  # general distillation's; set kept
    d, _ = with_defaults(DistillConfig(method="nope"), StudentConfig(), labelled=True)
    assert d.temperature is None  # unknown: validate() names it


KD_PARAMS = {
    "task",
    "teacher",
    "data_dir",
    "method",
    "temperature",
    "alpha",
    "beta",
    "mapping",
    "stage",
    "alpha_cos",
    "alpha_mlm",
    "student_layers",
    "student_hidden",
    "student_intermediate",
    "student_heads",
    "init",
    "loss_convention",
    "epochs",
    "max_steps",
    "batch_size",
    "lr",
    "weight_decay",
    "warmup_ratio",
    "max_length",
    "train_limit",
    "eval_limit",
    "seed",
    "num_workers",
    "use_gpu",
    "bf16",
    "cpu_bf16",
    "select_metric",  # train fields added since (issue 48): params of their own
    "stop_diverged",
    "epoch_rows",  # issue 46: an augmented run scores val more than once a pass
    "teacher_bf16",
    "val_fraction",
    "select_on",
    "group_by_length",
    "attention",
    "compile",
    "augment_dir",
}


def test_mlflow_params_keep_their_names():
    """Derived from the fields now: the names existing runs, ``best`` and the teacher's fingerprint read."""
    assert set(base_config().to_params()) == KD_PARAMS
    minilm = RunConfig.from_dict({"task": "sst2", "teacher": "t", "distill": {"method": "minilm"}}).to_params()
    assert set(minilm) == KD_PARAMS | {"version", "relation_heads", "teacher_layer", "relation_mean"}
    assert base_config().to_params()["temperature"] == "4.0" and minilm["init"] == "slice"


def test_each_field_has_one_flat_name():
    assert [param_name("student", f) for f in ("layers", "init", "size")] == ["student_layers", "init", "student_size"]
    assert param_name("distill", "temperature") == "temperature" and param_name("train", "lr") == "lr"
    assert Param("", "method", Fixed("kd")).key == "method"


def test_ray_train_gets_the_config_object_itself(tmp_path):
    from raydistill.orchestrate.run import make_trainer

    cfg = base_config()
    trainer = make_trainer(cfg, name="t", storage_path=str(tmp_path))
    sent = trainer.train_loop_config["cfg"]
    assert sent is cfg and pickle.loads(pickle.dumps(sent)) == cfg  # no to_dict / from_dict on the way
