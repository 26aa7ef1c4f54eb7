"""A sweep with identical inputs is recognised (issue 48 item 5): the second prints the first's result, naming it,
trains nothing and writes nothing; --rerun trains a new sweep; other inputs are a new sweep (slow: two tiny sweeps)."""

from __future__ import annotations

import json

import pytest

from tests.e2e.test_sweep import TINY

pytestmark = pytest.mark.slow


def test_a_repeated_sweep_reuses_the_finished_one(ray_session, tiny_teacher, glue_dir, tmp_path, capsys, monkeypatch):
    from mlflow.tracking import MlflowClient

    from raydistill.commands import sweep

    monkeypatch.chdir(tmp_path)
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    argv = ["pkd_glue", "--task", "sst2", "--data-dir", glue_dir, "--teacher", tiny_teacher("classification", 2)]
    argv += [*TINY, "--set", "search.control=false", "--num-samples", "1", "--epochs", "1", "--max-steps", "3"]
    argv += ["--batch-size", "16", "--max-length", "32", "--eval-limit", "16", "--tracking-uri", uri]
    argv += ["--experiment", "again"]

    def sweeps() -> list:
        c = MlflowClient(uri)
        exp = c.get_experiment_by_name("again")
        return [r for r in c.search_runs([exp.experiment_id]) if r.data.tags.get("raydistill.role") == "sweep"]

    first = sweep.main(argv + ["--name", "first"])
    capsys.readouterr()
    (parent,) = sweeps()
    assert parent.data.tags["raydistill.sweep_fingerprint"]

    again = sweep.main(argv)  # identical inputs, its own default name: recognised, nothing trained
    out, err = capsys.readouterr()
    assert "sweep first finished with identical inputs" in err and "--rerun" in err
    assert json.loads(out.strip().splitlines()[-1]) == {**json.loads(json.dumps(first, default=str)), "reused": "first"}
    assert again["best"]["trial"] == first["best"]["trial"] and len(sweeps()) == 1

    sweep.main(argv + ["--rerun", "--name", "second"])  # asked to train again: a new sweep
    assert "sweep first had identical inputs" in capsys.readouterr().err
    assert sorted(r.info.run_name for r in sweeps()) == ["first", "second"]

    sweep.main(argv + ["--seed", "7", "--name", "third"])  # another input: another sweep, no word of the first
    assert "identical inputs" not in capsys.readouterr().err and len(sweeps()) == 3
