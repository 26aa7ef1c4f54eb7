"""orchestrate/driver: a new sweep's name is its own — one named as an earlier sweep (its resume record under the
storage path, or a sweep run of the experiment) is refused before Ray starts, saying how to continue that one; its
Optuna study is named by experiment and sweep (one optuna.db serves every experiment of a store)."""

from __future__ import annotations

import json
import os

import pytest

from raydistill.common.errors import UserError


def _planned(tiny_teacher, glue_dir, tmp_path, *extra):
    from raydistill.commands import sweep
    from raydistill.orchestrate.driver import Sweep

    argv = ["kd_glue", "--task", "sst2", "--data-dir", glue_dir, "--teacher", tiny_teacher("classification", 2)]
    argv += ["--set", "student.hidden=32", "--set", "student.intermediate=64", "--set", "student.heads=2"]
    argv += ["--set", "student.layers=2", "--tracking-uri", f"sqlite:///{tmp_path / 'm.db'}", "--eval-limit", "8"]
    argv += ["--storage-path", str(tmp_path / "ray"), "--experiment", "e", *extra]
    return Sweep.plan(*sweep._arguments(argv))


def test_a_name_an_earlier_sweep_holds_is_refused_before_ray(tiny_teacher, glue_dir, tmp_path, monkeypatch):
    import ray

    from raydistill.orchestrate import connect

    # both doors to Ray shut: the suite's shared Ray may already be up, so `ray.is_initialized()` cannot tell
    monkeypatch.setattr(connect, "init_ray", lambda **k: pytest.fail("Ray started"))
    monkeypatch.setattr(ray, "init", lambda *a, **k: pytest.fail("ray.init called"))
    record = tmp_path / "ray" / "exp1" / "raydistill_sweep.json"
    record.parent.mkdir(parents=True)
    record.write_text(json.dumps({"name": "exp1", "parent_run_id": "abc"}))
    s = _planned(tiny_teacher, glue_dir, tmp_path, "--name", "exp1")
    with pytest.raises(UserError) as e:
        s.start()
    assert e.value.field == "name" and "--resume --name exp1 continues it" in str(e.value)
    assert json.loads(record.read_text()) == {"name": "exp1", "parent_run_id": "abc"}  # its record untouched
    # a record written before its parent run opened (Ray refused the start, a Ctrl-C): nothing shared, started anew
    record.write_text(json.dumps({"name": "exp1"}))
    from raydistill.orchestrate.repeat import check_new_name

    check_new_name(s, str(record))

    s = _planned(
        tiny_teacher, glue_dir, tmp_path, "--name", "exp2"
    )  # no record here, but a sweep run of the experiment
    s.tracker.start_run("exp2", {}, tags={"raydistill.role": "sweep"})
    with pytest.raises(UserError) as e:
        s.start()
    assert "experiment 'e'" in str(e.value) and not os.path.exists(tmp_path / "ray" / "exp2")
    (tmp_path / "ray" / "exp3-confirm").mkdir()  # another sweep's confirmation experiment, as Tune named it
    (tmp_path / "ray" / "exp3-confirm" / "tuner.pkl").write_bytes(b"")
    s = _planned(tiny_teacher, glue_dir, tmp_path, "--name", "exp3-confirm")
    with pytest.raises(UserError) as e:
        s.start()
    assert "exp3-confirm" in str(e.value)


def test_the_optuna_study_is_named_by_experiment_and_sweep(tiny_teacher, glue_dir, tmp_path):
    from raydistill.orchestrate.search import make_searcher

    s = _planned(tiny_teacher, glue_dir, tmp_path, "--name", "exp1")
    limiter = make_searcher(
        s.spec, s.base, metric=s.metric, mode=s.mode, name=s.name, teacher=s.teacher_shape, n_at_once=1,
        multi_objective=None,
    )  # fmt: skip
    limiter.searcher.set_search_properties(s.metric, s.mode, {})
    assert limiter.searcher._study_name == "e/exp1"


def test_a_sweep_that_fails_ends_its_runs_failed_never_running(tiny_teacher, glue_dir, tmp_path):
    """Any error once the parent run is open (a teacher's fine-tune, Tune, MLflow) ends the parent FAILED with why,
    its running trials closed; the command re-raises the error (commands/sweep.execute)."""
    s = _planned(tiny_teacher, glue_dir, tmp_path, "--name", "boom")
    s.parent = s.tracker.start_run("boom", {}, tags={"raydistill.role": "sweep"})
    child = s.tracker.start_run("t", {}, tags={"raydistill.trial_id": "t"}, parent_run_id=s.parent)
    s.failed(RuntimeError("the teacher's fine-tune ran out of memory"))
    c = s.tracker.client
    parent = c.get_run(s.parent)
    assert parent.info.status == "FAILED" and "ran out of memory" in parent.data.tags["error"]
    assert c.get_run(child).info.status != "RUNNING"
