"""The guard of a driver on a joined cluster (``orchestrate/guard.py``), without Ray: a driver that dies, or hangs
with its cluster's GCS unreachable, ends in one line with its MLflow runs (and their RUNNING children) FAILED; a
driver that ends normally leaves its runs as they are and prints nothing more."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time

from tests.paths import ROOT

REPO = ROOT


def env() -> dict:
    return {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}


def dead_address() -> str:
    with socket.socket() as s:  # a port nobody listens on once closed
        s.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{s.getsockname()[1]}"


def runs(uri: str) -> tuple[str, str]:
    """A sweep-like parent run and one RUNNING child."""
    from raydistill.tracking.track import Tracker

    tracker = Tracker(uri, "g")
    parent = tracker.start_run("my-sweep", {"space": "pkd_glue"}, tags={"raydistill.role": "sweep"})
    child = tracker.start_run("trial", {}, parent_run_id=parent)
    return parent, child


def status(uri: str, run_id: str):
    from mlflow.tracking import MlflowClient

    r = MlflowClient(uri).get_run(run_id)
    return r.info.status, r.data.tags.get("error")


def test_guardian_marks_a_dead_drivers_runs_failed_in_one_line(tmp_path):
    uri = f"sqlite:///{tmp_path / 'm.db'}"
    parent, child = runs(uri)
    address = dead_address()
    for bye in (True, False):
        g = subprocess.Popen(
            [sys.executable, "-m", "raydistill.orchestrate.guard", address],
            stdin=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env(),
        )
        msg = {"event": "open", "uri": uri, "run_id": parent, "name": "my-sweep", "role": "sweep", "space": "pkd_glue"}
        _, err = g.communicate(json.dumps(msg) + "\n" + (json.dumps({"bye": True}) + "\n" if bye else ""), timeout=120)
        if bye:  # the driver ended normally: nothing said, nothing touched
            assert g.returncode == 0 and err.strip() == "" and status(uri, parent) == ("RUNNING", None)
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith(f"error: RAY_ADDRESS: the Ray cluster at {address} went away")
    assert parent in lines[0] and "python -m raydistill.sweep pkd_glue --name my-sweep --resume" in lines[0]
    for run_id in (parent, child):
        assert status(uri, run_id) == ("FAILED", f"the Ray cluster at {address} went away")


HANG = """
import sys, time
from raydistill.tracking.track import Tracker
from raydistill.orchestrate import guard
guard.POLL_S, guard.LOST_S = 0.2, 1e9
guard.watch(sys.argv[1])
print(Tracker(sys.argv[2], "g").start_run("run", {}), flush=True)
guard.LOST_S = 1.0  # from here on (the run open), an unreachable GCS ends the driver within about a second
time.sleep(120)  # blocked, as a driver in ray.get on a cluster whose GCS is gone
"""


def test_a_driver_hanging_on_an_unreachable_gcs_ends_within_seconds(tmp_path):
    uri = f"sqlite:///{tmp_path / 'm.db'}"
    address = dead_address()
    t0 = time.time()
    p = subprocess.run(
        [sys.executable, "-c", HANG, address, uri], capture_output=True, text=True, timeout=120, env=env()
    )
    took = time.time() - t0
    run_id = p.stdout.strip().splitlines()[-1]
    errors = [ln for ln in p.stderr.splitlines() if ln.startswith("error: ")]
    assert p.returncode == 1 and took < 60, (p.returncode, took, p.stderr[-2000:])
    assert len(errors) == 1 and "went away" in errors[0] and "run the command again" in errors[0], p.stderr[-2000:]
    assert status(uri, run_id)[0] == "FAILED"


def test_a_run_the_driver_ended_failed_just_before_dying_is_still_named(tmp_path):
    """The CI race: the driver's own error handling marked its run FAILED (and told the guardian "close"), then Ray
    took the process down before its one line. The guardian's line names that run (not "none"), keeps the driver's
    reason on it, and still ends its RUNNING children; a run closed FINISHED is not named."""
    from raydistill.tracking.track import Tracker

    uri = f"sqlite:///{tmp_path / 'm.db'}"
    tracker = Tracker(uri, "g")
    parent, child = runs(uri)
    done = tracker.start_run("teacher", {})
    tracker.end_run(done)
    tracker.set_tags(parent, {"error": "RayActorError: the actor died"})
    tracker.end_run(parent, "FAILED")
    address = dead_address()
    msgs = [
        {"event": "open", "uri": uri, "run_id": done, "name": "teacher"},
        {"event": "close", "uri": uri, "run_id": done, "status": "FINISHED"},
        {"event": "open", "uri": uri, "run_id": parent, "name": "my-sweep", "role": "sweep", "space": "pkd_glue"},
        {"event": "close", "uri": uri, "run_id": parent, "status": "FAILED"},
    ]
    g = subprocess.Popen(
        [sys.executable, "-m", "raydistill.orchestrate.guard", address],
        stdin=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env(),
    )
    _, err = g.communicate("".join(json.dumps(m) + "\n" for m in msgs), timeout=120)
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and f"MLflow run(s) {parent} marked FAILED" in lines[0], err
    assert "--name my-sweep --resume" in lines[0]
    assert status(uri, parent) == ("FAILED", "RayActorError: the actor died")
    assert status(uri, child) == ("FAILED", f"the Ray cluster at {address} went away")
    assert status(uri, done) == ("FINISHED", None)


def test_the_lost_cluster_line_resumes_from_the_sweeps_own_storage():
    """A cluster's sweep keeps its state in remote storage: the resume command the line gives names it, or it would
    look in the default local folder and find no sweep."""
    from raydistill.orchestrate.guard import lost_line

    run = {"role": "sweep", "name": "s1", "space": "pkd_glue", "storage": "s3://bucket/ray"}
    line = lost_line("10.0.0.1:6379", {"r1": run})
    assert "python -m raydistill.sweep pkd_glue --name s1 --resume --storage-path s3://bucket/ray`" in line
    assert "--storage-path" not in lost_line("10.0.0.1:6379", {"r1": {**run, "storage": None}})
