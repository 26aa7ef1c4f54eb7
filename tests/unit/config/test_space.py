"""Search-space parsing: every shipped space loads, overrides apply, bad files give one-line errors."""

from __future__ import annotations

import os

import optuna
import pytest

from raydistill.common.errors import UserError
from raydistill.config import space as sp
from raydistill.config.domains import Choice, Fixed, LogUniform, Uniform
from raydistill.config.sizes import Shape, parse_size
from tests.paths import ROOT

BERT_BASE = Shape(12, 768, 3072, 12)

SHIPPED = sorted(f[:-5] for f in os.listdir(sp.SPACES_DIR) if f.endswith(".yaml"))


def test_all_named_sweeps_ship():
    assert set(SHIPPED) >= {
        "pkd_glue",
        "kd_glue",
        "distilbert_glue",
        "tinybert_glue",
        "two_stage_nsmc",
        "two_stage_korquad",
        "two_stage_ner",
        "pkd_aug_glue",
        "tinybert_aug_glue",
    }


@pytest.mark.parametrize("name", SHIPPED)
def test_shipped_space_parses_and_samples(name):
    spec = sp.load(name)
    study = optuna.create_study(sampler=optuna.samplers.TPESampler(seed=0))
    vals = sp.sample(spec, study.ask(), BERT_BASE)
    assert spec.method.contains(vals["method"])


def test_pkd_glue_covers_the_paper_and_starts_from_its_best():
    """PKD's grid (T 5–20, α 0.2–0.7, β 10–1000, 3 and 6 of 12 layers) lies inside the searched ranges, and the
    reported best (T=20, α=0.7, β=100, PKD-Skip) is the first trial at half the teacher's depth."""
    spec = sp.load("pkd_glue")
    assert spec.distill["temperature"] == LogUniform(1, 20) and spec.distill["alpha"] == Uniform(0.0, 1.0)
    beta = spec.distill["beta"]
    assert isinstance(beta, LogUniform) and beta.low <= 10 and beta.high >= 1000
    assert spec.train["lr"] == LogUniform(1.0e-5, 3.0e-4)
    assert spec.distill["mapping"] == Choice(("skip", "last")) and spec.student["init"] == Fixed("first_k")
    assert spec.student["hidden"] == Fixed("teacher")
    depths = {
        sp.sample(sp.load("pkd_glue", [f"student.layers={f}"]), None, BERT_BASE)["student_layers"]
        for f in spec.student["layers"].values()
    }
    assert depths == {3, 6}
    first = sp.start_points(spec, BERT_BASE)[0]
    assert first["temperature"] == 20 and first["alpha"] == 0.7 and first["beta"] == 100
    assert first["mapping_6L"] == "skip" and "mapping_5L" not in first  # skip needs N divisible by M
    study = optuna.create_study()
    study.enqueue_trial(first)
    vals = sp.sample(spec, study.ask(), BERT_BASE)
    assert (vals["student_layers"], vals["temperature"], vals["alpha"], vals["beta"], vals["mapping"]) == (
        6,
        20,
        0.7,
        100,
        "skip",
    )


def _first_trial(spec, teacher: Shape) -> dict:
    """What a space's first trial trains on ``teacher``: its first start point, sampled."""
    study = optuna.create_study()
    for point in sp.start_points(spec, teacher):
        study.enqueue_trial(point)
    return sp.sample(spec, study.ask(), teacher)


def test_pkd_aug_glue_starts_from_the_benchmarks_winning_row():
    """The augmenting space (issue 46 item 4) starts from the transfer benchmark's STS-B row that beat labels-only at
    the same steps: a pruned student at half the teacher's depth and width (MiniLM-L6: 3L-192, FFN 768, 6 heads of its
    32), PKD's recipe, x20 copies, 10 epochs of 10,000 fresh rows; its labels-only control keeps those epochs and rows
    (the loop then trains the same steps on the task's own rows)."""
    from raydistill.config.schema import RunConfig, TrainConfig
    from raydistill.orchestrate.control import control_points

    spec = sp.load("pkd_aug_glue")
    assert (spec.train["epochs"].first(), spec.train["epoch_rows"].first()) == (10, 10000)
    for teacher, size in ((Shape(6, 384, 1536, 12), (3, 192, 768, 6)), (BERT_BASE, (6, 384, 1536, 6))):
        vals = _first_trial(spec, teacher)
        got = tuple(vals[f"student_{k}"] for k in ("layers", "hidden", "intermediate", "heads"))
        assert got == size and vals["init"] == "prune" and vals["augment"] == 20
        assert (vals["temperature"], vals["alpha"], vals["beta"], vals["mapping"], vals["lr"]) == (
            20,
            0.7,
            100,
            "skip",
            1e-4,
        )
    base = RunConfig(task="stsb", teacher="t", train=TrainConfig(epochs=10, epoch_rows=10000)).validate()
    control = sp.trial_config(base, control_points({"trial": "t1", "config": vals}, base, 0, 2)[0])
    assert control.distill.method == "finetune" and control.augment_dir is None
    assert (control.train.epochs, control.train.epoch_rows) == (10, 10000)


def test_tinybert_aug_glue_starts_from_the_benchmarks_winning_row():
    """The space that ships TinyBERT on x20 (issue 46 item 4) starts from the transfer benchmark's MRPC row that beat
    labels-only: half the teacher's depth at its width from its first layers (MiniLM-L6: 3L-384, FFN 1536, 12 heads),
    TinyBERT's uniform mapping and T 1, x20 copies, 10 epochs of each stage (7,000 fresh rows each); its labels-only
    control keeps those epochs and rows, on the task's own rows."""
    from raydistill.config.schema import RunConfig, TrainConfig
    from raydistill.orchestrate.control import control_points

    spec = sp.load("tinybert_aug_glue")
    assert (spec.train["epochs"].first(), spec.train["epoch_rows"].first()) == (20, 7000)
    for teacher, size in ((Shape(6, 384, 1536, 12), (3, 384, 1536, 12)), (BERT_BASE, (6, 768, 3072, 12))):
        vals = _first_trial(spec, teacher)
        got = tuple(vals[f"student_{k}"] for k in ("layers", "hidden", "intermediate", "heads"))
        assert got == size and vals["init"] == "first_k" and vals["augment"] == 20
        assert (vals["method"], vals["temperature"], vals["alpha"], vals["mapping"], vals["lr"]) == (
            "tinybert",
            1,
            1.0,
            "uniform",
            1e-4,
        )
    base = RunConfig(task="mrpc", teacher="t", train=TrainConfig(epochs=20, epoch_rows=7000)).validate()
    trial = sp.trial_config(base, vals)
    assert trial.distill.method == "tinybert" and trial.distill.stage == "all"
    assert trial.distill.intermediate_epochs == 0  # half the epochs: 10 of each stage
    control = sp.trial_config(base, control_points({"trial": "t1", "config": vals}, base, 0, 2)[0])
    assert control.distill.method == "finetune" and control.augment_dir is None
    assert (control.train.epochs, control.train.epoch_rows) == (20, 7000)


def test_asha_grace_period_leaves_the_warm_up_epoch_alone():
    assert sp.load("pkd_glue").search["asha"]["grace_period"] >= 2


def test_tinybert_sizes_and_mappings():
    spec = sp.load("tinybert_glue")
    assert spec.distill["mapping"] == Choice(("uniform", "top", "bottom"))
    first = sp.start_points(spec, BERT_BASE)[0]
    assert first["temperature"] == 1 and first["mapping_6L"] == "uniform"  # TinyBERT's T=1 and g(m)=m·N/M
    assert parse_size("4L-312-1200-12") == {"layers": 4, "hidden": 312, "intermediate": 1200, "heads": 12}


def test_set_override_fixes_a_searched_value():
    spec = sp.load("pkd_glue", ["student.layers=4", "distill.temperature=7.5"])
    vals = sp.sample(spec, optuna.create_study().ask(), BERT_BASE)
    assert vals["student_layers"] == 4 and vals["temperature"] == 7.5


def test_beta_only_where_the_method_uses_it():
    kd = sp.parse({"method": "kd", "distill": {"beta": {"choice": [1, 2]}, "temperature": 2}})
    assert "beta" not in sp.sample(kd, optuna.create_study().ask(), BERT_BASE)
    pkd = sp.parse({"method": "pkd", "distill": {"beta": {"choice": [1, 2]}}})
    assert "beta" in sp.sample(pkd, optuna.create_study().ask(), BERT_BASE)


def test_mapping_choices_follow_student_depth():
    """12-layer teacher, 5-layer student: PKD-Skip needs N divisible by M, so only 'last' can be drawn."""
    spec = sp.parse({"method": "pkd", "student": {"layers": 5}, "distill": {"mapping": {"choice": ["skip", "last"]}}})
    study = optuna.create_study(sampler=optuna.samplers.TPESampler(seed=0))
    for _ in range(5):
        t = study.ask()
        assert sp.sample(spec, t, BERT_BASE)["mapping"] == "last"
        assert "mapping_5L" in t.params


@pytest.mark.parametrize(
    "raw,field",
    [
        ({"bogus": 1}, "bogus"),
        ({"student": {"layer": 3}}, "student.layer"),
        ({"distill": {"temperature": {"chose": [1]}}}, "distill.temperature"),
        ({"distill": {"alpha": {"uniform": [0.9, 0.1]}}}, "distill.alpha"),
        ({"distill": {"temperature": 0}}, "distill.temperature"),
        ({"distill": {"alpha": 1.5}}, "distill.alpha"),
        ({"train": {"epochs": "many"}}, "train.epochs"),
        ({"method": "nope"}, "distill.method"),
        ({"mode": "up"}, "mode"),
        ({"num_samples": 0}, "num_samples"),
        ({"student": {"hidden": 100, "heads": 12}}, "student.hidden"),
        ({"search": {"sampler": "grid"}}, "search.sampler"),
    ],
)
def test_bad_space_names_the_key(raw, field):
    with pytest.raises(UserError) as e:
        sp.parse(raw)
    assert e.value.field == field


def test_malformed_yaml_and_unknown_space(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("method: [kd\n")
    with pytest.raises(UserError, match="not valid YAML at line"):
        sp.load(str(bad))
    with pytest.raises(UserError, match="unknown search space 'nope'"):
        sp.load("nope")
    with pytest.raises(UserError) as e:
        sp.load("pkd_glue", ["student.layers"])
    assert e.value.field == "set"


def test_searcher_does_not_train_a_finished_configuration_again():
    """Two points in the space: after one finished, the next proposal is the other one; once both finished, a repeat
    is allowed (the space is exhausted). Repeats are told to Optuna with the finished trial's value."""
    from raydistill.orchestrate.search import PrunedAwareOptunaSearch

    def space(trial):
        trial.suggest_categorical("x", [1, 2])

    for seed_trial in range(3):  # TPE's random start repeats itself often; the searcher must not
        s = PrunedAwareOptunaSearch(
            space=space, metric="m", mode="max", sampler=optuna.samplers.TPESampler(seed=seed_trial)
        )
        first = s.suggest("a")
        s.on_trial_complete("a", {"m": 0.5, "training_iteration": 1})
        second = s.suggest("b")
        assert second != first
        s.on_trial_complete("b", {"m": 0.7, "training_iteration": 1})
        assert s.suggest("c") in ({"x": 1}, {"x": 2})  # exhausted: a repeat after max_resample tries
        values = {tuple(t.params.items()): t.value for t in s._ot_study.get_trials() if t.value is not None}
        assert values == {(("x", first["x"]),): 0.5, (("x", second["x"]),): 0.7}  # repeats told the same value


def test_named_spaces_ship_inside_the_wheel(tmp_path):
    """A plain (non-editable) install finds the named spaces: ``search_spaces/`` at the repository's top is installed
    as the package ``raydistill.search_spaces``, and the wheel, installed outside the checkout, lists them."""
    import shutil
    import subprocess
    import sys
    import zipfile

    root = ROOT
    src = tmp_path / "src"  # a copy: setuptools writes build/ and *.egg-info into the tree it builds
    for d in ("raydistill", "search_spaces"):
        shutil.copytree(root / d, src / d, ignore=shutil.ignore_patterns("__pycache__"))
    for f in ("pyproject.toml", "README.md"):
        shutil.copy(root / f, src / f)
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(tmp_path),
            str(src),
        ],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    (wheel,) = tmp_path.glob("raydistill-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    shipped = {p.name for p in (root / "search_spaces").glob("*.yaml")}
    assert shipped and {f"raydistill/search_spaces/{n}" for n in shipped} <= names
    packages = {n.rsplit("/", 1)[0] for n in names if n.startswith("raydistill/") and n.endswith("/__init__.py")}
    on_disk = {p.parent.relative_to(root).as_posix() for p in (root / "raydistill").rglob("__init__.py")}
    assert on_disk | {"raydistill/search_spaces"} <= packages  # no stage left out of pyproject's package list
    target, away = tmp_path / "site", tmp_path / "elsewhere"
    away.mkdir()
    r = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(target), str(wheel)],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    env = {**os.environ, "PYTHONPATH": str(target)}
    r = subprocess.run(
        [sys.executable, "-m", "raydistill", "list", "spaces"], cwd=away, env=env, capture_output=True, text=True
    )
    assert r.returncode == 0, r.stderr[-2000:]
    assert all(n[:-5] in r.stdout for n in shipped), r.stdout
    r = subprocess.run(
        [sys.executable, "-c", "import raydistill.config.space as s; print(s.SPACES_DIR)"],
        cwd=away,
        env=env,
        capture_output=True,
        text=True,
    )
    assert r.stdout.strip().startswith(str(target)), r.stdout + r.stderr  # the wheel's copy, not the checkout's


def test_a_space_that_may_prune_is_checked_for_whole_teacher_heads_before_any_trial():
    """A space drawing ``init: prune`` with heads that change the head size is refused once the teacher is known
    (before Ray), naming the field; with ``heads: keep_head_size`` every student it can draw is cut out whole."""
    minilm = Shape(6, 384, 1536, 12)  # head size 32
    raw = {
        "method": "minilm",
        "student": {
            "layers": 0.5,
            "hidden": {"choice": ["teacher", 0.5]},
            "heads": 6,
            "init": {"choice": ["slice", "prune"]},
        },
    }
    with pytest.raises(UserError) as e:
        sp.sample(sp.parse(raw), None, minilm)
    assert e.value.field == "student.heads" and "head size 32" in str(e.value)
    raw["student"]["heads"] = "keep_head_size"
    assert sp.sample(sp.parse(raw), None, minilm)["student_heads"] in (6, 12)
    raw["student"].update(heads=6, init="slice")  # slice may change the head size: no prune check
    sp.sample(sp.parse(raw), None, minilm)
