"""A sweep that searches augmentation: the space's `augment` checked at load, each augmented set built once from the
teacher's word embeddings, a trial training on its N's set, the train limit counting source rows, and no validation
row (or its copies) ever training."""

from __future__ import annotations

import json
import os

import pytest

from raydistill.common.errors import UserError


def test_augment_values_are_checked_when_the_space_loads():
    from raydistill.config import space as sp
    from raydistill.config.copies import counts

    assert counts({"choice": [0, 4]}) == [0, 4] and counts(2) == [2] and counts({"int": [0, 2]}) == [0, 1, 2]
    assert sp.sample(sp.load("kd_glue", ["augment={choice: [0, 4]}"]), None)["augment"] == 0
    for bad in ("augment=-1", "augment={choice: [0, 2.5]}", "augment={uniform: [0, 4]}", "augment=true"):
        with pytest.raises(UserError) as e:
            sp.load("kd_glue", [bad])
        assert e.value.field == "augment"


def test_sets_built_once_and_the_limit_counts_source_rows(tiny_teacher, glue_dir, tmp_path):
    from raydistill.config.schema import RunConfig
    from raydistill.data.augment_sets import build_sets
    from raydistill.data.splits import SOURCE, split_train, train_val_dev, val_indices
    from raydistill.tasks import get_task

    teacher = tiny_teacher("classification")
    base = RunConfig.from_dict(
        {"task": "sst2", "teacher": teacher, "data_dir": glue_dir, "train": {"max_length": 32, "train_limit": 20}}
    )
    dirs = build_sets({"choice": [0, 2]}, base, str(tmp_path), lambda m: None)
    assert list(dirs) == [2] and os.path.isfile(os.path.join(dirs[2], "train.jsonl"))
    knobs = json.load(open(os.path.join(dirs[2], "augment.json")))
    assert knobs["candidates"] == "embedding" and knobs["n"] == 2
    mtime = os.path.getmtime(os.path.join(dirs[2], "cache"))
    assert build_sets(2, base, str(tmp_path), lambda m: None) == dirs  # cached: the same folder, not rebuilt
    assert os.path.getmtime(os.path.join(dirs[2], "cache")) == mtime

    cfg = base.replace(augment_dir=dirs[2])
    train, val, _ = train_val_dev(cfg, get_task("sst2"))
    rows, cut = split_train(get_task("sst2"), glue_dir)
    held = cut.out_of_train
    val_idx = set(val_indices(rows, get_task("sst2"), 0.1, held))
    sources = {r[SOURCE] for r in train}
    assert len(sources) == 20 and not sources & val_idx  # 20 source rows, each with its copies; no validation row
    assert len(train) == 3 * 20  # the original and 2 copies of each
    plain, _, _ = train_val_dev(base, get_task("sst2"))
    assert [r["text"] for r in plain] == [r["text"] for r in train if r["text"] in {p["text"] for p in plain}][:20]


@pytest.mark.slow
def test_sweep_trains_each_trial_on_its_augmented_set(
    ray_session, tiny_teacher, glue_dir, tmp_path, capsys, monkeypatch
):
    from mlflow.tracking import MlflowClient

    from raydistill.commands import sweep

    monkeypatch.chdir(tmp_path)
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    sweep.main(
        [
            "kd_glue",
            "--task",
            "sst2",
            "--data-dir",
            glue_dir,
            "--teacher",
            tiny_teacher("classification", 2),
            "--num-samples",
            "2",
            "--set",
            "student.size=2L-32-64-2",
            "--set",
            "search.confirm=false",
            "--set",
            "search.control=false",
            "--set",
            "augment=1",
            "--set",
            "search.asha=false",
            "--epochs",
            "1",
            "--max-steps",
            "3",
            "--batch-size",
            "16",
            "--max-length",
            "32",
            "--train-limit",
            "40",
            "--eval-limit",
            "16",
            "--tracking-uri",
            uri,
            "--name",
            "aug",
            "--experiment",
            "aug",
        ]
    )
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert out["trials"] == 2 and out["errors"] == 0
    c = MlflowClient(uri)
    runs = c.search_runs([c.get_experiment_by_name("aug").experiment_id], "tags.`raydistill.trial_id` != ''")
    assert len(runs) == 2
    for r in runs:
        p = r.data.params
        assert p["augment_dir"] and p["augment_n"] == "1" and p["augment_candidates"] == "embedding"
        rows = {d.dataset.name: json.loads(d.dataset.profile)["num_rows"] for d in r.inputs.dataset_inputs}
        assert rows["sst2-train"] == 2 * 40  # 40 source rows (--train-limit), each with its 1 copy
