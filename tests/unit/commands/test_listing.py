"""``python -m raydistill list``: every shipped space, method, task and init with its own one-line description."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from raydistill.commands import list as listing
from tests.paths import ROOT


def test_every_group_lists_every_registered_name_with_a_description():
    from raydistill.config.space import SPACES_DIR
    from raydistill.distill.methods import METHODS
    from raydistill.models.student import INITS
    from raydistill.tasks import TASKS

    want = {
        "spaces": {f[:-5] for f in os.listdir(SPACES_DIR) if f.endswith(".yaml")},
        "methods": set(METHODS),
        "tasks": set(TASKS),
        "inits": {n.split(":")[0] for n in INITS},
    }
    for group in listing.GROUPS:
        rows = listing.listing(group)
        assert {n.split(":")[0] for n, _ in rows} == want[group], group
        for name, text in rows:
            assert text and "\n" not in text and "``" not in text, (group, name, text)


def test_components_describe_themselves():
    """A new method or init is listed by what it says of itself: a one-line ``description`` on each method class, a
    docstring on each init function (so e.g. a new ``prune`` init needs only its docstring)."""
    from raydistill.distill.methods import METHODS
    from raydistill.models.student import INITS

    for name, cls in METHODS.items():
        d = cls.__dict__.get("description") or ""
        assert d and "\n" not in d and len(d) <= 120, f"method {name} needs a one-line description attribute"
    for name, fn in INITS.items():
        assert listing.first_line(fn.__doc__), f"init {name} needs a docstring: its line in `list inits`"


def test_tasks_say_kind_metric_and_language():
    rows = dict(listing.tasks())
    assert rows["rte"] == "classification, 2 labels, sentence pairs; metric accuracy; language en"
    assert rows["stsb"].startswith("regression") and "metric pearson" in rows["stsb"]
    assert "language ko" in rows["korquad"] and rows["korquad"].startswith("qa")
    assert "--unlabeled-text" in rows["general"] and rows["general"].startswith("mlm")


def test_spaces_read_their_yaml_description():
    rows = dict(listing.spaces())
    assert rows["pkd_glue"] == (
        "Patient-KD, student from the first k teacher layers, PKD-Skip vs PKD-Last (method pkd, task rte)"
    )
    assert "minilm_glue" in rows


def test_list_with_no_group_prints_all_four(capsys):
    listing.main([])
    out = capsys.readouterr().out
    for title in listing.TITLES.values():
        assert title + ":" in out
    assert "  kd " in out and "  pkd_glue " in out and "  klue_ner " in out and "  every_other " in out


def test_one_group_and_json(capsys):
    listing.main(["methods"])
    out = capsys.readouterr().out
    assert out.startswith("methods (--method NAME):") and "tasks (" not in out
    listing.main(["tasks", "--json"])
    got = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert set(got) == {"tasks"} and "sst2" in got["tasks"]


def test_unknown_group_is_one_line(capsys):
    with pytest.raises(SystemExit) as e:
        listing.main(["models"])
    err = capsys.readouterr().err
    assert e.value.code == 2 and err.startswith("error: group: invalid choice") and len(err.strip().splitlines()) == 1


def test_python_m_raydistill_list_end_to_end():
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    p = subprocess.run(
        [sys.executable, "-m", "raydistill", "list", "spaces"], capture_output=True, text=True, timeout=120, env=env
    )
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith("search spaces") and "pkd_glue" in p.stdout
    p = subprocess.run([sys.executable, "-m", "raydistill"], capture_output=True, text=True, timeout=60, env=env)
    assert p.returncode == 0 and "python -m raydistill list" in p.stdout and "python -m raydistill.sweep" in p.stdout
    p = subprocess.run(
        [sys.executable, "-m", "raydistill", "lsit"], capture_output=True, text=True, timeout=60, env=env
    )
    assert p.returncode == 2 and p.stderr.startswith("error: command: unknown command 'lsit'")
