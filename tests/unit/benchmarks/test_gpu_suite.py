"""benchmarks/gpu_suite.py keeps what it measured (issue 49 item 3): the bound kills a part's process tree without
raising, a part writes its results as it goes, a cut part reports what finished, and results.json is always written.
The whole suite's smoke is tests/e2e/test_benchmarks_smoke.py::test_gpu_suite_smoke (slow); these are cheap."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from tests.paths import ROOT

BENCH = ROOT / "benchmarks"
sys.path.insert(0, str(BENCH))

import gpu_suite


def _gone(pid: int) -> bool:
    """Ended: no such process, or a zombie nobody has reaped yet."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


def _wait_for(path: Path, timeout: float = 30.0) -> None:
    deadline = time.time() + timeout
    while not (path.exists() and path.read_text().strip()) and time.time() < deadline:
        time.sleep(0.05)
    assert path.exists(), path


def test_kill_tree_kills_every_descendant_without_raising(tmp_path):
    """The bound's kill raised ``IndexError: pop from empty list`` (issue 49): it popped its to-do list once per
    process of the machine. Here a child that already exited and a grandchild in a session of its own (as a product
    command starts Ray) are both in the tree."""
    script = "sh -c 'exit 0'; setsid sleep 300 & echo $! > grandchild; sleep 300"
    p = subprocess.Popen(["sh", "-c", script], cwd=tmp_path, start_new_session=True)
    _wait_for(tmp_path / "grandchild")
    grandchild = int((tmp_path / "grandchild").read_text())
    gpu_suite.kill_tree(p.pid)
    p.wait(timeout=30)
    deadline = time.time() + 30
    while not _gone(grandchild) and time.time() < deadline:
        time.sleep(0.05)
    assert _gone(grandchild)
    gpu_suite.kill_tree(p.pid)  # a tree that has ended: nothing to do, nothing raised


def test_bounded_cuts_a_command_and_keeps_what_it_printed(tmp_path):
    code = "import json, time; print(json.dumps({'done': 1}), flush=True); time.sleep(300)"
    t0 = time.time()
    r = gpu_suite.bounded([sys.executable, "-c", code], str(tmp_path / "log"), 3.0)
    assert r["timed_out"] and r["rc"] != 0 and r["json"] == {"done": 1} and time.time() - t0 < 60
    assert '{"done": 1}' in (tmp_path / "log").read_text()


def test_a_part_that_fails_keeps_what_it_wrote_and_the_others_run(tmp_path, monkeypatch):
    """results.json is written as a part goes, whatever ends it; a failing part does not cost the next one."""
    seen = []

    def broken(a, out, res, save):
        res["measured"] = 1.5
        save()
        seen.append(json.loads((tmp_path / "results.json").read_text())["tests"]["measured"])
        raise RuntimeError("lost")

    def fine(a, out, res, save):
        res["ok"] = True

    monkeypatch.setattr(gpu_suite, "PARTS", {"tests": broken, "quality": fine})
    out = gpu_suite.main(["--out", str(tmp_path), "--smoke", "--parts", "tests,quality"])
    on_disk = json.loads((tmp_path / "results.json").read_text())
    assert seen == [1.5] and on_disk["tests"]["measured"] == 1.5 and "RuntimeError: lost" in on_disk["tests"]["error"]
    assert on_disk["tests"]["ok"] is False and on_disk["quality"]["ok"] is True and out["quality"]["ok"]


def test_a_cut_sweep_reports_the_trials_mlflow_holds(tmp_path):
    """The quality part cut in its confirmation: the finished trials (search and confirmation) and the best of them
    on val, with its dev score, come from the MLflow store."""
    from raydistill.tracking.track import Tracker

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    tracker = Tracker(uri, "gpu-quality")
    for name, val, dev, confirm in (("t1", 0.80, 0.78, None), ("t2", 0.85, 0.79, None), ("c1", 0.83, 0.81, "t2")):
        tags = {"raydistill.trial_id": name, **({"raydistill.confirm_of": confirm} if confirm else {})}
        rid = tracker.start_run(name, {}, tags=tags)
        tracker.log_metrics(rid, {"best_val_accuracy": val, "best_eval_accuracy": dev, "fixed_cost_s": 2.0})
        tracker.end_run(rid)
    rid = tracker.start_run("c2", {}, tags={"raydistill.confirm_of": "t2"})  # cut mid-run: no fixed cost yet
    tracker.log_metrics(rid, {"best_val_accuracy": 0.99, "best_eval_accuracy": 0.5})
    s = gpu_suite.sweep_result({"rc": -9, "wall_s": 600.0, "timed_out": True}, uri, "gpu-quality")
    assert s["timed_out"] and s["trials"] == 3 and s["confirmations_finished"] == 1 and s["trials_per_hour"] == 18.0
    assert s["best_finished"] == {"run_name": "t2", "val": 0.85, "dev": 0.79, "confirm_of": None}


def test_a_part_cut_by_its_bound_leaves_results_json(tmp_path):
    """The smoke cut on purpose: the quality and augment parts on a 3-second bound are cut in their teachers'
    fine-tunes; results.json holds both, flagged cut, with the step each was cut in, and the suite ends normally."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    cmd = [sys.executable, str(BENCH / "gpu_suite.py"), "--smoke", "--out", str(tmp_path), "--limit-s", "3"]
    proc = subprocess.run([*cmd, "--parts", "quality,augment"], env=env, capture_output=True, text=True, timeout=280)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert proc.stdout.strip().splitlines()[-1].endswith("ok=False")
    res = json.loads((tmp_path / "results.json").read_text())
    q, a = res["quality"], res["augment"]
    assert q["cut"] and q["cut_in"] == "teacher" and q["teacher"]["timed_out"] and q["ok"] is False
    assert a["cut"] and a["cut_in"] == "sst2/teacher" and a["tasks"]["sst2"]["teacher"]["timed_out"]
    assert "teacher" in q and res["machine"]["cpus"]


def test_the_quality_part_runs_its_sweep_again_on_ray_train_and_compares(tmp_path, monkeypatch):
    """The quality part's second sweep (``--before-limit-s`` > 0): the same sweep command with ``--ray-train-trials``,
    its own experiment and Ray storage, bounded by ``--before-limit-s``; ``after_vs_before`` is after / before of
    trials per hour, fixed cost and seconds per trial. ``--before-limit-s 0`` skips it (the smoke, whose sweeps' real
    plumbing, --ray-train-trials included, test_sweep_throughput_smoke runs)."""
    from argparse import Namespace

    runs: list[tuple[list[str], float]] = []

    def bounded(cmd, log, limit_s, cwd=None):
        runs.append((cmd, limit_s))
        before = "--ray-train-trials" in cmd
        return {"rc": 0, "wall_s": 9.0, "timed_out": False, "json": {"tph": 50.0 if before else 100.0}}

    def sweep_result(sw, uri, experiment):
        tph = sw["json"]["tph"]
        return {
            "experiment": experiment,
            "trials": 1,
            "trials_per_hour": tph,
            "fixed_cost_s": 3600 / tph,
            "per_trial_s": 0,
        }

    monkeypatch.setattr(gpu_suite, "quality_inputs", lambda a, out: ("data", "enc", [], [], ["--epochs", "1"]))
    monkeypatch.setattr(gpu_suite, "bounded", bounded)
    monkeypatch.setattr(gpu_suite, "sweep_result", sweep_result)
    monkeypatch.setattr(gpu_suite, "export_best", lambda uri, out, log, limit_s, sweep: {"rc": 0, "timed_out": False})
    a = Namespace(limit_s=600.0, before_limit_s=120.0, space="pkd_glue", num_samples=1)
    res: dict = {}
    gpu_suite.part_quality(a, str(tmp_path), res, lambda: None)
    (ft, _), (after, _), (before, before_limit) = runs
    assert ft[2] == "raydistill.finetune" and after[2] == before[2] == "raydistill.sweep"
    # the same sweep but for its name, experiment and Ray storage, every trial on Ray Train
    own = {str(tmp_path / "ray-gpu-quality-ray-train"): str(tmp_path / "ray"), "gpu-quality-ray-train": "gpu-quality"}
    assert before[-1] == "--ray-train-trials" and [own.get(x, x) for x in before[:-1]] == after
    assert before[before.index("--experiment") + 1] == "gpu-quality-ray-train" and before_limit == 120.0
    assert res["ok"] and res["before"]["experiment"] == "gpu-quality-ray-train" and res["after"] is res["sweep"]
    assert res["after_vs_before"] == {"trials_per_hour": 2.0, "fixed_cost_s": 0.5, "per_trial_s": None}
    runs.clear()
    res = {}
    gpu_suite.part_quality(Namespace(**{**vars(a), "before_limit_s": 0.0}), str(tmp_path), res, lambda: None)
    assert len(runs) == 2 and "before" not in res and "after_vs_before" not in res and res["ok"]


def test_sweep_set_reaches_the_quality_sweeps(tmp_path):
    """``--sweep-set KEY=VALUE`` (repeatable) becomes the quality part's sweep's ``--set``s: a short lease can leave
    out the confirmation without a second copy of the suite."""
    a = argparse.Namespace(
        smoke=False,
        max_length=64,
        teacher_epochs=2,
        teacher_lr=1e-4,
        epochs=3,
        train_limit=8000,
        gpus_per_worker=0.125,
        sweep_set=["search.confirm=false", "search.control=true"],
        data_dir=str(tmp_path),
        encoder=str(tmp_path),
    )
    *_, sweep = gpu_suite.quality_inputs(a, str(tmp_path))
    assert sweep[-4:] == ["--set", "search.confirm=false", "--set", "search.control=true"]
