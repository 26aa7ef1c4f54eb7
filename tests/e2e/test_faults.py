"""Faults survived (slow where Ray is involved): worker killed, NaN loss, MLflow down, half-written checkpoints."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.e2e.test_distill_ray import TINY_STUDENT, distill


@pytest.mark.slow
def test_worker_killed_mid_epoch_restarts_from_checkpoint(
    ray_session, tiny_teacher, glue_dir, mlflow_uri, tmp_path, capsys
):
    from mlflow.tracking import MlflowClient

    marker = tmp_path / "killed"
    out = distill(
        [
            "--method",
            "kd",
            "--task",
            "sst2",
            "--teacher",
            tiny_teacher("classification", 2),
            "--data-dir",
            glue_dir,
            *TINY_STUDENT,
            "--epochs",
            "3",
            "--max-steps",
            "9",
            "--batch-size",
            "16",
            "--max-length",
            "32",
            "--eval-limit",
            "16",
            "--num-workers",
            "2",
            "--max-failures",
            "1",
            "--output",
            str(tmp_path / "s"),
            "--tracking-uri",
            mlflow_uri,
            "--experiment",
            "faults",
            "--storage-path",
            str(tmp_path / "ray"),
            "--inject-fault",
            f"kill:rank=1,epoch=2,step=2,once={marker}",
        ],
        capsys,
    )
    assert marker.exists()  # the worker really died mid-epoch 2
    assert out["epoch"] == 3
    hist = MlflowClient(mlflow_uri).get_metric_history(out["run_id"], "eval_accuracy")
    assert sorted(m.step for m in hist) == [1, 2, 3]  # nothing logged twice


@pytest.mark.slow
def test_a_ray_train_run_that_failed_goes_on_when_the_command_is_given_again(
    ray_session, tiny_teacher, glue_dir, mlflow_uri, tmp_path, capsys
):
    """No restarts left (--max-failures 0): the run fails once its worker dies in epoch 2; the same command goes on
    from epoch 1's checkpoint on Ray Train (the same run name under the storage) into the same MLflow run."""
    from mlflow.tracking import MlflowClient

    from raydistill.distill.__main__ import main

    marker, out_dir = tmp_path / "killed", tmp_path / "s"
    argv = [
        "--method", "kd", "--task", "sst2", "--teacher", tiny_teacher("classification", 2), "--data-dir", glue_dir,
        *TINY_STUDENT, "--epochs", "3", "--max-steps", "9", "--batch-size", "16", "--max-length", "32",
        "--eval-limit", "16", "--output", str(out_dir), "--tracking-uri", mlflow_uri, "--experiment", "goes-on",
        "--storage-path", str(tmp_path / "ray"), "--inject-fault", f"kill:rank=0,epoch=2,step=2,once={marker}",
    ]  # fmt: skip
    with pytest.raises(SystemExit) as e:
        main(argv)
    assert e.value.code == 1 and marker.exists()
    kept = json.load(open(f"{out_dir}.resume/resume.json"))
    client = MlflowClient(mlflow_uri)
    assert client.get_run(kept["run_id"]).info.status == "FAILED"
    # the failed run has its checkpointed epoch in MLflow (from the checkpoint: the controller had not logged it)
    assert [m.step for m in client.get_metric_history(kept["run_id"], "eval_accuracy")] == [1]
    capsys.readouterr()
    main(argv)  # the same command: the marker keeps the worker alive this time
    said = capsys.readouterr()
    out = json.loads(said.out.strip().splitlines()[-1])
    assert f"resuming the interrupted run into {out_dir} after its epoch 1 (MLflow run {kept['run_id']}" in said.err
    assert out["run_id"] == kept["run_id"] and out["epoch"] == 3 and not os.path.exists(f"{out_dir}.resume")
    assert client.get_run(kept["run_id"]).info.status == "FINISHED"
    hist = client.get_metric_history(out["run_id"], "eval_accuracy")
    assert sorted(m.step for m in hist) == [1, 2, 3]  # epoch 1 once (from the failed run), 2 and 3 from the second


@pytest.mark.slow
def test_nan_loss_fails_the_run_with_its_reason(tiny_teacher, glue_dir, mlflow_uri, tmp_path, capsys):
    from mlflow.tracking import MlflowClient

    from raydistill.distill.__main__ import main

    with pytest.raises(SystemExit) as e:
        main(
            [
                "--method",
                "kd",
                "--task",
                "sst2",
                "--teacher",
                tiny_teacher("classification", 2),
                "--data-dir",
                glue_dir,
                *TINY_STUDENT,
                "--epochs",
                "2",
                "--max-steps",
                "4",
                "--batch-size",
                "16",
                "--max-length",
                "32",
                "--output",
                str(tmp_path / "s"),
                "--tracking-uri",
                mlflow_uri,
                "--experiment",
                "nan",
                "--storage-path",
                str(tmp_path / "ray"),
                "--inject-fault",
                "nan:epoch=1",
                # on (the default), the run stops as diverged instead: tests/unit/train/test_diverge.py
                "--no-stop-diverged",
            ]
        )
    assert e.value.code == 1
    assert "non-finite training loss" in capsys.readouterr().err
    c = MlflowClient(mlflow_uri)
    run = c.search_runs([c.get_experiment_by_name("nan").experiment_id])[0]
    assert run.info.status == "FAILED" and "non-finite" in run.data.tags["error"]


@pytest.mark.slow
def test_sweep_goes_on_past_failed_trials(ray_session, tiny_teacher, glue_dir, tmp_path, capsys, monkeypatch):
    from raydistill.commands import sweep

    monkeypatch.chdir(tmp_path)
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
            "--epochs",
            "1",
            "--max-steps",
            "2",
            "--batch-size",
            "16",
            "--max-length",
            "32",
            "--eval-limit",
            "16",
            "--name",
            "nan-sweep",
            "--tracking-uri",
            f"sqlite:///{tmp_path / 'm.db'}",
            "--inject-fault",
            "nan:epoch=1",
            "--no-stop-diverged",  # failed trials (on, they stop as diverged: tests/unit/train/test_diverge.py)
        ]
    )
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert out["trials"] == 2 and out["errors"] == 2 and out["best"] is None
    rows = json.load(open(tmp_path / "raydistill-results" / "sweeps" / "nan-sweep" / "summary.json"))
    assert all(r["status"] == "ERROR" and "non-finite" in r["error"] for r in rows), rows


def test_mlflow_server_unreachable_fails_fast_before_training(tiny_teacher, glue_dir, tmp_path):
    t0 = time.time()
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "raydistill.distill",
            "--method",
            "kd",
            "--task",
            "sst2",
            "--teacher",
            tiny_teacher("classification", 2),
            "--data-dir",
            glue_dir,
            *TINY_STUDENT,
            "--tracking-uri",
            "http://127.0.0.1:9",
            "--output",
            str(tmp_path / "s"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert p.returncode == 2, p.stderr
    assert "tracking_uri" in p.stderr and "unreachable" in p.stderr and "Traceback" not in p.stderr
    assert time.time() - t0 < 60 and not (tmp_path / "s").exists()


def test_metrics_are_spooled_not_dropped_when_mlflow_goes_down(tmp_path, monkeypatch):
    from raydistill.tracking import track

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(track.time, "sleep", lambda s: None)
    good = track.Tracker(f"sqlite:///{tmp_path / 'ok.db'}", "spool")
    run_id = good.start_run("r", {"a": 1})
    track.Tracker("http://127.0.0.1:9").log_metrics(run_id, {"eval_accuracy": 0.5}, step=1)  # server down: spooled
    rows = [json.loads(x) for x in open(track._spool_path())]
    assert rows and rows[0]["metrics"] == {"eval_accuracy": 0.5}
    rows[0]["uri"] = good.uri  # the server is back (here: the same store under its reachable URI)
    with open(track._spool_path(), "w") as f:
        f.write(json.dumps(rows[0]) + "\n")
    assert track.replay_spool() == 1
    assert good.client.get_metric_history(run_id, "eval_accuracy")[0].value == 0.5


def test_half_written_checkpoint_is_never_taken_as_valid(tiny_teacher, tmp_path):
    import torch

    from raydistill.train.checkpoint import save_checkpoint

    class Boom:
        def save_pretrained(self, path):
            os.makedirs(path)
            open(os.path.join(path, "partial"), "w").write("x")
            raise OSError(28, "No space left on device")

    target = tmp_path / "checkpoint"
    lin = torch.nn.Linear(2, 2)
    opt = torch.optim.SGD(lin.parameters(), lr=0.1)
    with pytest.raises(OSError):
        save_checkpoint(str(target), Boom(), None, lin, opt, torch.optim.lr_scheduler.StepLR(opt, 1), {})
    assert not target.exists() and os.listdir(tmp_path) == []


def test_same_config_and_seed_reproduce_the_dev_metric(tiny_teacher, glue_dir):
    from raydistill.train.loop import Context, run
    from tests.unit.train.test_loop import cfg_for

    cfg = cfg_for(
        "sst2",
        tiny_teacher("classification", 2),
        glue_dir,
        "pkd",
        epochs=1,
        alpha=0.5,
        beta=10.0,
        mapping="skip",
        temperature=2.0,
    )
    a, b = (run(cfg, Context()) for _ in range(2))
    assert abs(a["eval_accuracy"] - b["eval_accuracy"]) <= 1e-4
    assert a["train_loss"] == pytest.approx(b["train_loss"], abs=1e-4)


KILLED = "test_killed_sweep_driver_resumes_without_rerunning_finished_trials"


def _killed_sweep_cmd(teacher: str, glue_dir: str, db) -> list[str]:
    return [
        sys.executable,
        "-m",
        "raydistill.sweep",
        "pkd_glue",
        "--task",
        "sst2",
        "--data-dir",
        glue_dir,
        "--teacher",
        teacher,
        "--num-samples",
        "3",
        "--set",
        "student.hidden=32",
        "--set",
        "student.intermediate=64",
        "--set",
        "student.heads=2",
        "--set",
        "student.layers=2",
        "--set",
        "search.asha=false",  # this test is about resume; ASHA stops are covered in test_sweep
        "--set",
        "search.confirm=false",
        "--set",
        "search.control=false",
        "--epochs",
        "2",
        "--max-steps",
        "4",
        "--batch-size",
        "16",
        "--max-length",
        "32",
        "--eval-limit",
        "16",
        "--tracking-uri",
        f"sqlite:///{db}",
        "--name",
        "resumable",
        "--experiment",
        "resume",
    ]


def _kill_after_a_trial(cmd: list[str], cwd) -> float:
    """Start the sweep in its own process group (the kill takes its local Ray too) and SIGKILL the group once its
    first trial finished; returns the seconds that took (over 600: killed without a finished trial)."""
    import signal
    import sqlite3

    first = subprocess.Popen(
        cmd,
        cwd=cwd,
        env={**os.environ, "RAY_ADDRESS": ""},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    finished_sql = (
        "select count(*) from runs r join tags t on r.run_uuid = t.run_uuid "
        "where t.key = 'raydistill.trial_id' and r.status = 'FINISHED'"
    )
    start = time.time()
    deadline = start + 600
    while time.time() < deadline:  # a trial in a reused actor takes ~1.5 s: poll faster than that, or the sweep may
        time.sleep(0.2)  # have finished every trial before the kill (then Tune's unsaved last finish is trained again)
        try:
            if sqlite3.connect(cwd / "m.db").execute(finished_sql).fetchone()[0] >= 1:
                break
        except sqlite3.Error:
            pass
    os.killpg(first.pid, signal.SIGKILL)
    first.wait()
    return time.time() - start


@pytest.fixture(scope="module", autouse=True)
def killed_sweep(request, tiny_teacher, glue_dir, tmp_path_factory):
    """The killed sweep of test_killed_sweep_driver…, started with the module (when that test is selected) and killed
    by a watcher thread once its first trial finished, while the module's other tests run: (its folder, the
    watcher's future). A command of its own, own Ray and folder: nothing of the other tests reaches it."""
    selected = {item.originalname for item in request.session.items if item.module is request.module}
    if KILLED not in selected:
        yield None
        return
    d = tmp_path_factory.mktemp("killed-sweep")
    pool = ThreadPoolExecutor(max_workers=1)
    watcher = pool.submit(
        _kill_after_a_trial, _killed_sweep_cmd(tiny_teacher("classification", 2), glue_dir, d / "m.db"), d
    )
    yield d, watcher
    pool.shutdown(wait=True)


@pytest.mark.slow
def test_killed_sweep_driver_resumes_without_rerunning_finished_trials(killed_sweep, ray_session, capsys, monkeypatch):
    """SIGKILL the sweep driver after its first trial finished (on 2 CPUs another is mid-trial then); --resume
    finishes the rest with the same concurrency, re-runs nothing finished, duplicates no MLflow run, and the Optuna
    study continues. The killed sweep is a command of its own (its process group and local Ray killed), started with
    the module (``killed_sweep``); the resume runs in this process on the tests' shared Ray, whose 4 CPUs would
    allow 3 at once: the concurrency it keeps is the recorded one."""
    import optuna
    from mlflow.tracking import MlflowClient

    tmp_path, watcher = killed_sweep
    waited = watcher.result()
    assert waited < 600, f"the sweep to kill finished no trial in {waited:.0f} s: killed before the test could start"
    db = tmp_path / "m.db"
    c = MlflowClient(f"sqlite:///{db}")
    exp = c.get_experiment_by_name("resume")
    done_before = {
        r.data.tags["raydistill.trial_id"]: r.info.end_time
        for r in c.search_runs([exp.experiment_id], "attributes.status = 'FINISHED'")
        if "raydistill.trial_id" in r.data.tags
    }
    assert len(done_before) >= 1

    # only --name: the resumed sweep takes its space, flags, resources and concurrency from what it was started with
    from raydistill.commands import sweep

    monkeypatch.chdir(tmp_path)  # ./raydistill-results, where the killed sweep left its state
    capsys.readouterr()
    sweep.main(["pkd_glue", "--name", "resumable", "--resume"])  # raises where the command would exit non-zero
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert out["trials"] == 3 and out["errors"] == 0
    assert out["concurrency"] == min(len(os.sched_getaffinity(0)), 3)  # as started: 2 at once on 2 CPUs
    every = [r for r in c.search_runs([exp.experiment_id]) if "raydistill.trial_id" in r.data.tags]
    # a trial the dead driver had started in a reused actor before Tune saved it (it cannot be resumed: Tune samples
    # its place again) is no stopped trial and no duplicate: KILLED, tagged lost; at most the slots' worth
    lost = [r for r in every if "raydistill.lost" in r.data.tags]
    assert all(r.info.status == "KILLED" and "stopped_early" not in r.data.tags for r in lost) and len(lost) <= 2
    runs = [r for r in every if r not in lost]
    assert len(runs) == 3 and len({r.data.tags["raydistill.trial_id"] for r in every}) == len(every)  # no duplicates
    for r in runs:
        assert r.info.status == "FINISHED"
        assert sorted(m.step for m in c.get_metric_history(r.info.run_id, "eval_accuracy")) == [1, 2]
    assert len([r for r in c.search_runs([exp.experiment_id]) if r.data.tags.get("raydistill.role") == "sweep"]) == 1
    study = optuna.load_study(
        study_name="resume/resumable",  # EXPERIMENT/NAME: one optuna.db serves every experiment
        storage=f"sqlite:///{tmp_path / 'raydistill-results' / 'optuna.db'}"
        if not (tmp_path / "optuna.db").exists()
        else f"sqlite:///{tmp_path / 'optuna.db'}",
    )
    assert len(study.trials) >= 3
