"""Which Ray a command runs on (slow: real Ray, each case in its own subprocess, never the test session's Ray):

* without RAY_ADDRESS a command starts a local Ray of its own even when a `ray start --head` cluster runs on the
  host, and joins that cluster only when told (``RAY_ADDRESS=auto``);
* a cluster that goes away under a command that joined it (RAY_ADDRESS) ends the command within a bound, in one
  line naming the cluster, with its MLflow run FAILED rather than left RUNNING;
* a dashboard port taken by someone else before Ray binds it (checked by Ray, or taken between Ray's check and the
  dashboard's bind) costs a retry on a fresh port, never the command, and leaves no half-started Ray behind.

The `ray start --head` here gets its own RAY_TMPDIR (where `ray_current_cluster` lives) and HOME, so no other Ray
on the machine sees it, and it is stopped by SIGTERM to its own `ray start --block` process, never `ray stop`.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

from tests.paths import ROOT

pytestmark = pytest.mark.slow

REPO = ROOT


def clean_env(**extra) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    env.update(
        {
            "RAY_USAGE_STATS_ENABLED": "0",
            "TOKENIZERS_PARALLELISM": "false",
            "HF_HUB_OFFLINE": "1",
            "RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S": "0",
            "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
        }
    )
    env.update(extra)
    return env


def ray_cli() -> list[str]:
    exe = shutil.which("ray", path=os.path.dirname(sys.executable)) or shutil.which("ray")
    return [exe] if exe else [sys.executable, "-m", "ray.scripts.scripts"]


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Head:
    """`ray start --head --block` with its own temp dir, HOME and RAY_TMPDIR; stopped by SIGTERM to that process."""

    def __init__(self, dashboard: bool = False):
        self.root = tempfile.mkdtemp(prefix="rdc-", dir="/tmp")  # short: unix socket paths live under it
        self.port = free_port()
        self.env = clean_env(HOME=self.root, RAY_TMPDIR=self.root)
        self.log = open(os.path.join(self.root, "head.log"), "w")
        self.proc = subprocess.Popen(
            [
                *ray_cli(),
                "start",
                "--head",
                "--block",
                "--port",
                str(self.port),
                "--num-cpus",
                "1",
                "--num-gpus",
                "0",
                "--node-ip-address",
                "127.0.0.1",
                "--disable-usage-stats",
                *(
                    [
                        "--include-dashboard",
                        "true",
                        "--dashboard-host",
                        "127.0.0.1",
                        "--dashboard-port",
                        str(free_port()),
                    ]
                    if dashboard
                    else ["--include-dashboard", "false"]
                ),
                "--object-store-memory",
                str(100 * 1024**2),
                "--ray-client-server-port",
                str(free_port()),
                "--dashboard-agent-listen-port",
                str(free_port()),
                "--runtime-env-agent-port",
                str(free_port()),
                "--metrics-export-port",
                str(free_port()),
            ],
            env=self.env,
            stdout=self.log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            cwd=self.root,
        )
        # `ray start` without --temp-dir: RAY_TMPDIR/ray/ray_current_cluster names it, as /tmp/ray/… would
        current = Path(self.root, "ray", "ray_current_cluster")
        deadline = time.time() + 120
        while not (current.exists() and current.read_text().strip()) and time.time() < deadline:
            assert self.proc.poll() is None, Path(self.root, "head.log").read_text()[-3000:]
            time.sleep(0.5)
        assert current.exists(), Path(self.root, "head.log").read_text()[-3000:]
        self.address = current.read_text().strip()
        assert self.address.endswith(f":{self.port}")

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)  # stops this node's processes only
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.log.close()
        shutil.rmtree(self.root, ignore_errors=True)


@pytest.fixture
def head():
    h = Head()
    yield h
    h.stop()


WHERE = """
import json, ray
from raydistill.orchestrate.connect import init_ray
init_ray({args})
print(json.dumps({{"gcs": ray.get_runtime_context().gcs_address, "nodes": len(ray.nodes()),
                  "cpus": ray.cluster_resources().get("CPU")}}))
ray.shutdown()
"""


def where(*drivers: tuple[dict, str]) -> list[dict]:
    """Each ``(env, init_ray arguments)`` driver's Ray, the drivers run at once (a local Ray writes no
    ``ray_current_cluster``: a driver started beside another never sees it; two starts of mostly single-threaded
    imports take about the time of one on 2 cores)."""
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WHERE.format(args=args)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=env["HOME"],
        )
        for env, args in drivers
    ]
    found = []
    for p in procs:
        out, err = p.communicate(timeout=240)
        assert p.returncode == 0, err[-3000:]
        found.append(json.loads(out.strip().splitlines()[-1]))
    return found


def test_without_ray_address_a_command_starts_its_own_ray_beside_a_running_cluster(head):
    own, told = where(
        (head.env, "num_cpus=2"),  # num_cpus: a join would refuse it ("When connecting to an existing cluster")
        ({**head.env, "RAY_ADDRESS": "auto"}, ""),  # joining the host's cluster is asked for by name
    )
    assert own["gcs"] != head.address and own["cpus"] == 2 and own["nodes"] == 1
    assert told["gcs"].endswith(f":{head.port}") and told["cpus"] == 1


RACE = """
import json, os, socket, sys
import ray
import ray._private.services as services
from raydistill.orchestrate import connect

held = socket.socket()  # busy before Ray looks: Ray's own check of the port refuses it
held.bind(("127.0.0.1", 0))
held.listen()
ports = [held.getsockname()[1], connect.free_port(), None]
chosen = []

def free_port():
    p = ports[len(chosen)] or connect_free_port()
    chosen.append(p)
    return p

connect_free_port, connect.free_port = connect.free_port, free_port
grab = socket.socket()  # free when Ray checks it, taken before the dashboard binds it: the race seen in sweeps
start = services.start_ray_process

def start_ray_process(command, process_type, *a, **kw):
    if process_type == "dashboard" and len(chosen) == 2:
        grab.bind(("127.0.0.1", chosen[1]))
        grab.listen()
    return start(command, process_type, *a, **kw)

services.start_ray_process = start_ray_process
connect.init_ray(num_cpus=1, log_to_driver=False)
gcs = 0
for pid in connect._children():
    try:
        gcs += open(f"/proc/{pid}/cmdline", "rb").read().split(b"\\0")[0].endswith(b"gcs_server")
    except OSError:
        pass
print(json.dumps({"chosen": chosen, "dashboard": ray._private.worker.get_dashboard_url(), "gcs_servers": gcs,
                  "api_env": os.environ.get("RAY_API_SERVER_ADDRESS"),
                  "task": ray.get(ray.remote(lambda: 1).remote())}))
ray.shutdown()
"""


def test_a_dashboard_port_taken_before_ray_binds_it_costs_a_retry_not_the_command(tmp_path):
    if not sys.platform.startswith("linux"):
        pytest.skip("Linux only (/proc)")
    env = clean_env(HOME=str(tmp_path))
    p = subprocess.run([sys.executable, "-c", RACE], env=env, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert p.returncode == 0, p.stderr[-4000:]
    out = json.loads(p.stdout.strip().splitlines()[-1])
    first, second, third = out["chosen"]
    assert len({first, second, third}) == 3
    assert out["dashboard"].endswith(f":{third}") and out["task"] == 1
    assert out["gcs_servers"] == 1  # the two failed starts left no GCS behind
    assert out["api_env"] is None  # set only while Ray starts
    assert f"port {first} was taken" in p.stderr and f"port {second} was taken" in p.stderr
    # the second try's dashboard, which lost its port after Ray's check, was ended as soon as its log said so (-9:
    # SIGKILL, connect._lost_bind_ended), not waited for through Ray's 60-s dashboard startup timeout (no return code)
    assert re.search(r"Failed to start the dashboard\s*, return code -9", p.stderr), p.stderr[-3000:]


def test_a_cluster_lost_mid_command_ends_it_in_one_line(tiny_teacher, glue_dir, tmp_path):
    from mlflow.tracking import MlflowClient

    h = Head(dashboard=True)
    try:
        uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
        drv = subprocess.Popen(
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
                "--student-layers",
                "2",
                "--student-hidden",
                "32",
                "--student-intermediate",
                "64",
                "--student-heads",
                "2",
                "--init",
                "random",
                "--epochs",
                "200",
                "--batch-size",
                "16",
                "--max-length",
                "32",
                "--eval-limit",
                "16",
                "--output",
                str(tmp_path / "s"),
                "--tracking-uri",
                uri,
                "--experiment",
                "lost",
                "--storage-path",
                str(tmp_path / "ray"),
            ],
            env={**h.env, "RAY_ADDRESS": h.address},
            cwd=tmp_path,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        lines: list[str] = []
        reader = threading.Thread(target=lambda: lines.extend(drv.stderr), daemon=True)  # to EOF: the guardian too
        reader.start()
        deadline = time.time() + 300
        while not any(ln.startswith("epoch=1 ") for ln in lines) and time.time() < deadline and drv.poll() is None:
            time.sleep(0.5)
        assert drv.poll() is None and any(ln.startswith("epoch=1 ") for ln in lines), "".join(lines)[-4000:]
        t0 = time.time()
        h.stop()  # the whole cluster goes: raylet, GCS, the run's workers
        reader.join(timeout=120)
        took = time.time() - t0
        rc = drv.wait(timeout=10)
    finally:
        if drv.poll() is None:
            os.killpg(drv.pid, signal.SIGKILL)
        h.stop()
    errors = [ln.strip() for ln in lines if ln.startswith("error: ")]
    print(f"cluster lost: exit {rc} after {took:.1f}s: {errors}")
    assert rc != 0 and took < 90, (rc, took, "".join(lines)[-4000:])
    assert len(errors) == 1 and f"the Ray cluster at {h.address} went away" in errors[0], "".join(lines)[-4000:]
    assert "run the command again" in errors[0]
    runs = MlflowClient(uri).search_runs([MlflowClient(uri).get_experiment_by_name("lost").experiment_id])
    assert len(runs) == 1 and runs[0].info.status == "FAILED", [r.info.status for r in runs]
    assert runs[0].info.run_id in errors[0] and runs[0].data.tags.get("error")


def test_guardian_stays_quiet_once_the_driver_said_the_line(monkeypatch, capsys):
    """The driver prints the lost-cluster line itself and tells the guardian so (``guard.say``); if Ray then ends the
    driver before its goodbye, the guardian still ends the runs FAILED but does not print the line a second time."""
    import io

    from raydistill.orchestrate import guard

    ended = []
    monkeypatch.setattr(guard, "reachable", lambda address, timeout=2.0: False)
    monkeypatch.setattr(guard, "_end", lambda runs, reason: ended.append((sorted(runs), reason)))
    monkeypatch.setattr(signal, "signal", lambda *a: None)  # the guardian ignores Ctrl-C; pytest's must stay
    opened = json.dumps(
        {"event": "open", "uri": "u", "run_id": "r1", "name": "n", "role": None, "space": None, "status": None}
    )
    for said in (False, True):
        stdin = [opened, json.dumps({"said": True})] if said else [opened]
        monkeypatch.setattr(sys, "stdin", io.StringIO("\n".join(stdin) + "\n"))
        guard.main("192.0.2.9:1")
        lines = capsys.readouterr().err.strip().splitlines()
        assert len(lines) == (0 if said else 1) and all("192.0.2.9:1 went away" in ln for ln in lines), lines
    assert ended == [(["r1"], "the Ray cluster at 192.0.2.9:1 went away")] * 2
