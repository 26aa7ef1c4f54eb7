"""train/kept: a process keeps its last run's encoded rows for the next run on the same rows and tokenizer."""

from __future__ import annotations

import dataclasses

import pytest
from transformers import AutoTokenizer

from raydistill.config.schema import RunConfig
from raydistill.train import kept, loop


@pytest.fixture
def loads(monkeypatch):
    """Each time the rows were read and tokenised."""
    calls = []
    real = loop._load_data

    def load(cfg, tok):
        calls.append(cfg)
        return real(cfg, tok)

    monkeypatch.setattr(loop, "_load_data", load)
    monkeypatch.setattr(kept, "_KEPT", {})
    return calls


def _cfg(teacher, glue, **train):
    return RunConfig.from_dict(
        {"task": "sst2", "teacher": teacher, "data_dir": str(glue), "train": {"max_length": 32, **train}}
    )


def test_the_next_trial_on_the_same_rows_reads_nothing(tiny_teacher, glue_dir, loads):
    teacher = tiny_teacher()
    tok = AutoTokenizer.from_pretrained(teacher)
    a = _cfg(teacher, glue_dir, lr=1e-4, seed=1)
    b = a.replace(run_name="other", distill=dataclasses.replace(a.distill, temperature=9.0))
    b = b.replace(train=dataclasses.replace(b.train, lr=5e-4, seed=2))
    first, second = loop.load_data(a, tok), loop.load_data(b, tok)
    assert len(loads) == 1
    assert second is not first and second.train is first.train  # a copy of the kept data, the same features
    second.val_examples = []  # a run that sets a field (teacher/reference.py does) leaves the kept one whole
    assert len(loop.load_data(a, tok).val_examples) == len(first.val_examples) > 0


def test_another_length_or_rows_tokenises_again(tiny_teacher, glue_dir, loads):
    teacher = tiny_teacher()
    tok = AutoTokenizer.from_pretrained(teacher)
    a = _cfg(teacher, glue_dir)
    loop.load_data(a, tok)
    loop.load_data(a.replace(train=dataclasses.replace(a.train, max_length=16)), tok)
    loop.load_data(a.replace(train=dataclasses.replace(a.train, train_limit=20)), tok)
    assert len(loads) == 3


def test_rows_from_the_hub_are_never_kept(tiny_teacher):
    tok = AutoTokenizer.from_pretrained(tiny_teacher())
    assert kept.data_key(RunConfig.from_dict({"task": "sst2", "teacher": "-"}), tok) is None
