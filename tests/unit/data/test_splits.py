"""data/splits: a run's data digests worked out once per process for the same rows, again when the rows change."""

from __future__ import annotations

import dataclasses
import os
import shutil

import pytest

from raydistill.config.schema import RunConfig
from raydistill.data import splits


@pytest.fixture
def counted(monkeypatch):
    """How often the rows were read and hashed."""
    calls = []
    real = splits._work_digests

    def work(cfg):
        calls.append(cfg)
        return real(cfg)

    monkeypatch.setattr(splits, "_work_digests", work)
    monkeypatch.setattr(splits, "_KEPT", {})
    return calls


def _with(section, **changes):
    return dataclasses.replace(section, **changes)


def _cfg(glue, **train):
    return RunConfig.from_dict({"task": "sst2", "teacher": "-", "data_dir": str(glue), "train": train})


def test_trials_that_differ_only_in_their_recipe_read_the_rows_once(glue_dir, counted):
    # every trial of a sweep asked again: on SST-2 ~2.5 s of re-reading and hashing per trial, in its fixed cost
    a = _cfg(glue_dir, lr=1e-4, seed=1)
    b = a.replace(run_name="other", output="elsewhere", train=_with(a.train, lr=3e-4, seed=2))
    b = b.replace(distill=_with(b.distill, temperature=7.0), student=_with(b.student, layers=2))
    first = splits.data_fingerprint(a), splits.datasets(a)
    assert (splits.data_fingerprint(b), splits.datasets(b)) == first
    assert len(counted) == 1


def test_what_chooses_the_rows_reads_them_again(glue_dir, counted):
    a = _cfg(glue_dir)
    fps = {splits.data_fingerprint(a)}
    fps.add(splits.data_fingerprint(a.replace(train=_with(a.train, train_limit=50))))
    fps.add(splits.data_fingerprint(a.replace(train=_with(a.train, val_fraction=0.2))))
    fps.add(splits.data_fingerprint(a.replace(train=_with(a.train, eval_limit=10))))
    assert len(counted) == 4 and len(fps) == 4


def test_a_changed_file_reads_the_rows_again(glue_dir, tmp_path, counted):
    glue = tmp_path / "glue"
    shutil.copytree(glue_dir, glue)
    cfg = _cfg(glue)
    before = splits.data_fingerprint(cfg)
    train = glue / "SST-2" / "train.tsv"
    lines = train.read_text().splitlines()
    train.write_text("\n".join(lines[:-1]) + "\n")  # one row fewer
    os.utime(train, ns=(1, 1))  # even with a time set back: the size changed
    assert splits.data_fingerprint(cfg) != before
    assert len(counted) == 2


def test_a_file_two_folders_down_is_stamped(tmp_path):
    # GLUE's loader also reads DIR/glue/SST-2/train.tsv, the NER ones DIR/ner/2016klp/ner.train
    deep = tmp_path / "glue" / "SST-2"
    deep.mkdir(parents=True)
    (deep / "train.tsv").write_text("sentence\tlabel\n")
    cfg = RunConfig.from_dict({"task": "sst2", "teacher": "-", "data_dir": str(tmp_path)})
    before = splits._data_stamp(cfg)
    (deep / "train.tsv").write_text("sentence\tlabel\na\t1\n")
    assert [name for name, *_ in before[0]] == ["glue/SST-2/train.tsv"]
    assert splits._data_stamp(cfg) != before


def test_no_memo_without_a_data_folder(counted, monkeypatch):
    # rows from the hub (no folder, no files to stamp) are worked out each time
    assert splits._data_stamp(RunConfig.from_dict({"task": "sst2", "teacher": "-"})) is None
    assert splits._data_stamp(RunConfig.from_dict({"task": "sst2", "teacher": "-", "data_dir": "/nowhere"})) is None
