"""A real two-node Ray cluster on one machine (slow): a head and a second raylet started with `ray start`
on loopback, token authentication on.

* a 2-worker DDP run with SPREAD puts its two ranks on different nodes and ends with the same train loss
  and dev metrics as the same run PACKed onto one node;
* `ray job submit -- python -m raydistill.sweep pkd_glue …` runs a small sweep to success on the cluster,
  with the sweep's parent run and its trials in MLflow, and the job API refuses a client with a wrong token;
* such a submitted sweep, stopped with `ray job stop` after its first trial, finishes when submitted again with
  `--resume --name … --storage-path …`, without running the finished trial again.

The last two share one submitted sweep (``resumed_sweep``, stopped then resumed): each of its submissions costs a
driver's start and trials' imports on the cluster, and the sweep the first test checked was the same one.

Isolation from the in-process Ray of other tests (``ray_session``) and from any other Ray on the machine:
every command that talks to this cluster runs in a subprocess with ``RAY_ADDRESS`` and the auth variables
set; the pytest process never calls ``ray.init`` here. Each node has its own ``--temp-dir`` under one short
``/tmp/rdmn-*`` folder (two nodes sharing a temp dir share runtime_env folders: when the worker node drops
a job's working_dir it deletes the driver's current directory on the head; and ``--temp-dir`` means
``/tmp/ray/ray_current_cluster`` is never rewritten, so a plain ``ray.init()`` elsewhere never joins this
cluster), their own token (``ray get-auth-token --generate`` with ``HOME`` in the temp dir: the user's
``~/.ray/auth_token`` is neither read nor written) and free ports for everything. Teardown never runs
``ray stop`` (it stops every Ray on the machine, other sessions' included): both ``ray start --block``
processes get SIGTERM (they stop their own node's processes), then any process left whose environment
carries this cluster's marker variable is killed.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.paths import ROOT

pytestmark = pytest.mark.slow

REPO = ROOT
MARKER = "RAYDISTILL_MULTINODE_CLUSTER"
TINY_STUDENT = [
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
]
TINY_SPACE = [
    "--set",
    "student.hidden=32",
    "--set",
    "student.intermediate=64",
    "--set",
    "student.heads=2",
    "--set",
    "student.layers={choice: [2, 4]}",
    "--set",
    "train.lr=0.001",
    "--set",
    "search.confirm=false",
    "--set",
    "search.control=false",
]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def ray_cli() -> list[str]:
    exe = shutil.which("ray", path=os.path.dirname(sys.executable)) or shutil.which("ray")
    return [exe] if exe else [sys.executable, "-m", "ray.scripts.scripts"]


@dataclass
class Cluster:
    gcs: str  # 127.0.0.1:PORT, what drivers join (RAY_ADDRESS)
    dashboard: str  # http://127.0.0.1:PORT, the job and state API
    env: dict  # environment of every client: RAY_ADDRESS + token auth
    temp_dir: str

    def run(self, argv, *, cwd, timeout, env=None, check=True) -> subprocess.CompletedProcess:
        p = subprocess.run(
            argv, cwd=cwd, env={**self.env, **(env or {})}, capture_output=True, text=True, timeout=timeout
        )
        if check and p.returncode != 0:
            pytest.fail(
                f"{argv[:4]} exited {p.returncode}\n--- stdout\n{p.stdout[-6000:]}\n--- stderr\n{p.stderr[-6000:]}"
            )
        return p

    def state(self, check=True) -> dict | None:
        """Nodes (id → custom node resource) and RayTrainWorker actors (job id, node id) from the state API."""
        code = (
            "import json, sys\n"
            "from ray.util.state import list_actors, list_nodes\n"
            "a = sys.argv[1]\n"
            "nodes = {n.node_id: sorted(k for k in n.resources_total if k.startswith('node_'))"
            " for n in list_nodes(address=a, detail=True) if n.state == 'ALIVE'}\n"
            "workers = [(w.job_id, w.node_id, w.pid) for w in list_actors(address=a, detail=True, limit=10000,"
            " filters=[('class_name', '=', 'RayTrainWorker')], raise_on_missing_output=False)]\n"
            "print(json.dumps({'nodes': nodes, 'workers': workers}))\n"
        )
        p = self.run([sys.executable, "-c", code, self.dashboard], cwd=self.temp_dir, timeout=120, check=check)
        return json.loads(p.stdout.strip().splitlines()[-1]) if p.returncode == 0 else None

    def alive_nodes(self) -> int:
        """How many nodes are alive, from the dashboard's state API over HTTP in this process: the readiness poll asks
        once a second, and a subprocess per poll (``state``) would import Ray each time."""
        token = Path(self.env["RAY_AUTH_TOKEN_PATH"]).read_text().strip()
        url = f"{self.dashboard}/api/v0/nodes?limit=100"
        with urllib.request.urlopen(
            urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"}), timeout=10
        ) as r:
            nodes = json.load(r)["data"]["result"]["result"]
        return sum(n["state"] == "ALIVE" for n in nodes)


def _marked_pids(marker: str) -> list[int]:
    """Processes whose environment carries this cluster's marker: everything its two `ray start`s spawned."""
    needle = f"{MARKER}={marker}".encode()
    pids = []
    for d in os.listdir("/proc"):
        if not d.isdigit() or int(d) == os.getpid():
            continue
        try:
            with open(f"/proc/{d}/environ", "rb") as f:
                if needle in f.read().split(b"\0"):
                    pids.append(int(d))
        except OSError:
            pass
    return pids


def _stop(procs, marker: str) -> None:
    for p in reversed(procs):  # the second node first, the head (GCS) last
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
        try:
            p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            p.kill()
    deadline = time.time() + 10
    while _marked_pids(marker) and time.time() < deadline:
        time.sleep(0.5)
    for pid in _marked_pids(marker):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


@pytest.fixture(scope="module")
def cluster():
    if not sys.platform.startswith("linux"):
        pytest.skip("multi-raylet test runs on Linux only")
    temp_dir = tempfile.mkdtemp(prefix="rdmn-", dir="/tmp")  # short: unix socket paths live under it
    marker = secrets.token_hex(8)
    base = {
        k: v
        for k, v in os.environ.items()
        if k not in ("RAY_ADDRESS", "RAY_API_SERVER_ADDRESS", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH", "RAY_AUTH_MODE")
    }
    base.update(
        {
            MARKER: marker,
            "RAY_USAGE_STATS_ENABLED": "0",
            "TOKENIZERS_PARALLELISM": "false",
            "HF_HUB_OFFLINE": "1",
            "RAY_TRAIN_V2_ENABLED": "1",
            "RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S": "0",  # SIGTERM stops a node at once, no 30 s drain
            "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
        }
    )

    # the cluster's own token, made the documented way, in the temp dir instead of the user's ~/.ray
    gen = subprocess.run(
        [*ray_cli(), "get-auth-token", "--generate"],
        env={**base, "HOME": temp_dir},
        capture_output=True,
        text=True,
        timeout=120,
    )
    token_path = os.path.join(temp_dir, ".ray", "auth_token")
    assert gen.returncode == 0 and os.path.isfile(token_path), gen.stderr
    os.chmod(token_path, 0o600)
    auth = {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN_PATH": token_path}

    port, dash = free_port(), free_port()
    common = [
        "--block",
        "--node-ip-address",
        "127.0.0.1",
        "--num-cpus",
        "2",
        "--num-gpus",
        "0",
        "--object-store-memory",
        str(150 * 1024**2),
        "--disable-usage-stats",
    ]

    def node_args(name):  # a temp dir per node: nodes sharing one would share (and delete) runtime_env files
        return [
            "--temp-dir",
            os.path.join(temp_dir, name),
            "--node-manager-port",
            str(free_port()),
            "--object-manager-port",
            str(free_port()),
            "--dashboard-agent-listen-port",
            str(free_port()),
            "--dashboard-agent-grpc-port",
            str(free_port()),
            "--runtime-env-agent-port",
            str(free_port()),
            "--metrics-export-port",
            str(free_port()),
        ]

    head = [
        *ray_cli(),
        "start",
        "--head",
        "--port",
        str(port),
        "--include-dashboard",
        "true",
        "--dashboard-host",
        "127.0.0.1",
        "--dashboard-port",
        str(dash),
        "--ray-client-server-port",
        str(free_port()),
        "--resources",
        json.dumps({"node_a": 1}),
        *common,
        *node_args("h"),
    ]
    worker = [
        *ray_cli(),
        "start",
        "--address",
        f"127.0.0.1:{port}",
        "--resources",
        json.dumps({"node_b": 1}),
        *common,
        *node_args("w"),
    ]
    procs, logs = [], []
    env = {**base, **auth}
    c = Cluster(
        gcs=f"127.0.0.1:{port}",
        dashboard=f"http://127.0.0.1:{dash}",
        env={**env, "RAY_ADDRESS": f"127.0.0.1:{port}"},
        temp_dir=temp_dir,
    )
    try:
        for i, argv in enumerate((head, worker)):
            log = open(os.path.join(temp_dir, f"ray-start-{i}.log"), "w")
            logs.append(log)
            procs.append(
                subprocess.Popen(
                    argv, env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=temp_dir
                )
            )
            if i == 0:
                _wait_for(lambda: _port_open(dash), 120, procs, temp_dir, "head dashboard")
        _wait_for(lambda: c.alive_nodes() == 2, 120, procs, temp_dir, "2 alive nodes")
        yield c
    finally:
        _stop(procs, marker)
        for log in logs:
            log.close()
        shutil.rmtree(temp_dir, ignore_errors=True)


def _port_open(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def _wait_for(pred, timeout, procs, temp_dir, what):
    deadline = time.time() + timeout
    while time.time() < deadline:
        dead = [p for p in procs if p.poll() is not None]
        if dead:
            break
        try:
            if pred():
                return
        except Exception:  # not up yet
            pass
        time.sleep(1)
    logs = "".join(
        Path(temp_dir, f).read_text()[-3000:] for f in sorted(os.listdir(temp_dir)) if f.startswith("ray-start-")
    )
    pytest.fail(f"local cluster: no {what} within {timeout}s\n{logs}")


def _worker_nodes(state: dict, before: set) -> tuple[str, list[str]]:
    """The job id of the one new Train run since ``before`` and the node resource of each of its workers."""
    new = [w for w in state["workers"] if tuple(w) not in before]
    jobs = {w[0] for w in new}
    assert len(jobs) == 1 and len(new) == 2, new
    return jobs.pop(), sorted(state["nodes"][w[1]][0] for w in new)


def test_ddp_across_two_nodes_matches_one_node(cluster, tiny_teacher, glue_dir, tmp_path):
    from mlflow.tracking import MlflowClient

    teacher = tiny_teacher("classification", 2, dropout=0.0)
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    state = cluster.state()
    assert sorted(v[0] for v in state["nodes"].values()) == ["node_a", "node_b"]
    seen = {tuple(w) for w in state["workers"]}
    results = {}
    for strategy in ("SPREAD", "PACK"):
        t0 = time.time()
        p = cluster.run(
            [
                sys.executable,
                "-m",
                "raydistill.distill",
                "--method",
                "kd",
                "--task",
                "sst2",
                "--teacher",
                teacher,
                "--data-dir",
                glue_dir,
                *TINY_STUDENT,
                "--alpha",
                "0.5",
                "--epochs",
                "2",
                "--max-steps",
                "6",
                "--batch-size",
                "16",
                "--max-length",
                "32",
                "--eval-limit",
                "16",
                "--num-workers",
                "2",
                "--placement-strategy",
                strategy,
                "--output",
                str(tmp_path / strategy),
                "--tracking-uri",
                uri,
                "--experiment",
                "multinode",
                "--storage-path",
                str(tmp_path / "ray"),
            ],
            cwd=tmp_path,
            timeout=600,
        )
        out = json.loads(p.stdout.strip().splitlines()[-1])
        state = cluster.state()
        _, nodes = _worker_nodes(state, seen)
        seen = {tuple(w) for w in state["workers"]}
        hist = MlflowClient(uri).get_metric_history(out["run_id"], "train_loss")
        results[strategy] = (out, nodes, [m.value for m in sorted(hist, key=lambda m: m.step)])
        print(f"{strategy}: ranks on {nodes}, {time.time() - t0:.1f}s")
        assert MlflowClient(uri).get_run(out["run_id"]).data.params["world_size"] == "2"

    (spread, spread_nodes, spread_loss), (pack, pack_nodes, pack_loss) = results["SPREAD"], results["PACK"]
    assert spread_nodes == ["node_a", "node_b"]  # one rank on each node
    assert len(set(pack_nodes)) == 1  # both ranks on one node
    assert len(spread_loss) == 2 and spread["epoch"] == 2
    assert spread_loss == pytest.approx(pack_loss, rel=1e-4, abs=1e-5)
    evals = sorted(k for k in spread if k.startswith("eval_"))
    assert evals and evals == sorted(k for k in pack if k.startswith("eval_"))
    for k in evals:
        assert spread[k] == pytest.approx(pack[k], rel=1e-4, abs=1e-5), k


def test_driver_without_the_token_is_refused_in_one_line(cluster, tiny_teacher, glue_dir, tmp_path):
    """A driver joining from RAY_ADDRESS without RAY_AUTH_MODE=token (or with the dashboard URL as
    RAY_ADDRESS) exits 2 with one line naming the fix, before any MLflow run or training."""
    argv = [
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
        "--max-steps",
        "1",
        "--output",
        str(tmp_path / "s"),
        "--tracking-uri",
        f"sqlite:///{tmp_path / 'mlflow.db'}",
        "--storage-path",
        str(tmp_path / "ray"),
    ]
    no_mode = {k: v for k, v in cluster.env.items() if k != "RAY_AUTH_MODE"}
    cases = (
        (no_mode, "RAY_AUTH_MODE=token"),
        ({**cluster.env, "RAY_ADDRESS": cluster.dashboard}, "ray job submit"),
    )
    # both drivers at once: each is refused on its own (nothing of the other is read), and each start is mostly
    # single-threaded imports, so two take about the time of one on 2 cores
    procs = [
        (subprocess.Popen(argv, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True), x)
        for env, x in cases
    ]
    for p, expect in procs:
        _, err = p.communicate(timeout=300)
        errors = [ln for ln in err.splitlines() if ln.startswith("error: ")]
        assert p.returncode == 2 and len(errors) == 1 and "Traceback" not in err, err[-3000:]
        assert errors[0].startswith("error: RAY_ADDRESS: ") and expect in errors[0], errors
    assert not (tmp_path / "s").exists()


RUNTIME_ENV = {
    "excludes": [".git", "raydistill-results", "outputs", ".pytest_cache", "__pycache__", "*.egg-info"],
    "env_vars": {"TOKENIZERS_PARALLELISM": "false", "HF_HUB_OFFLINE": "1"},
}


@dataclass
class Resumed:
    """What the stopped-then-resumed submitted sweep left: the MLflow store, the trials finished when it was
    stopped (trial id → run id, end time), `ray job status` of the stopped job, the resubmission, its JSON line."""

    db: Path
    experiment: str
    n_done: int
    status: str
    logs: str
    before: dict
    second: subprocess.CompletedProcess
    summary: dict | None


@pytest.fixture(scope="module")
def resumed_sweep(cluster, tiny_teacher, glue_dir, tmp_path_factory) -> Resumed:
    """docs/CLUSTER.md "Stop and resume a submitted sweep", run once for the two tests below (each checks its own
    part of it: a submitted sweep's runs on the cluster, and its stop and resume): `ray job submit` a 2-trial sweep,
    `ray job stop` it once its first trial finished, then `ray job submit … --resume --name NAME --storage-path URI`
    finishes it. The storage path is a URI (file://), so the sweep keeps its resume state as it does for s3:// /
    gs://: in the job's working directory on the head, found again by an identical --working-dir."""
    import sqlite3

    from mlflow.tracking import MlflowClient

    tmp_path = tmp_path_factory.mktemp("resumed-sweep")
    db, storage, name = tmp_path / "mlflow.db", f"file://{tmp_path / 'ray'}", "mn-resume"
    env = {k: v for k, v in cluster.env.items() if k != "RAY_ADDRESS"}  # `ray job` gets --address instead

    def job(*argv, timeout=120, check=True):
        return cluster.run([*ray_cli(), "job", *argv], cwd=tmp_path, env=env, timeout=timeout, check=check)

    def submit(submission_id, *flags, wait=True):
        return job(
            "submit",
            "--address",
            cluster.dashboard,
            "--submission-id",
            submission_id,
            "--working-dir",
            str(REPO),
            "--runtime-env-json",
            json.dumps(RUNTIME_ENV),
            *([] if wait else ["--no-wait"]),
            "--",
            "python",
            "-m",
            "raydistill.sweep",
            "pkd_glue",
            *flags,
            "--name",
            name,
            "--storage-path",
            storage,
            timeout=900,
            check=False,
        )

    first = submit(
        "mn-resume-1",
        "--task",
        "sst2",
        "--data-dir",
        glue_dir,
        "--teacher",
        tiny_teacher("classification", 2),
        "--num-samples",
        "2",
        "--max-concurrent",
        "1",
        *TINY_SPACE,
        "--epochs",
        "1",
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
        "--experiment",
        "multinode-resume",
        wait=False,
    )
    assert first.returncode == 0, first.stderr[-3000:]
    finished_sql = (
        "select count(*) from runs r join tags t on r.run_uuid = t.run_uuid "
        "where t.key = 'raydistill.trial_id' and r.status = 'FINISHED'"
    )
    deadline, n_done = time.time() + 600, 0
    while time.time() < deadline and not n_done:
        time.sleep(2)
        try:
            n_done = sqlite3.connect(db).execute(finished_sql).fetchone()[0]
        except sqlite3.Error:
            pass
    job("stop", "--address", cluster.dashboard, "mn-resume-1", check=False)
    status = job("status", "--address", cluster.dashboard, "mn-resume-1").stdout
    logs = job("logs", "--address", cluster.dashboard, "mn-resume-1", check=False).stdout[-4000:]
    before = {}
    if n_done:
        c = MlflowClient(f"sqlite:///{db}")
        exp = c.get_experiment_by_name("multinode-resume")
        before = {
            r.data.tags["raydistill.trial_id"]: (r.info.run_id, r.info.end_time)
            for r in c.search_runs([exp.experiment_id], "attributes.status = 'FINISHED'")
            if "raydistill.trial_id" in r.data.tags
        }
    print(f"stopped with {len(before)} of 2 trials finished")

    # only --resume --name --storage-path: the rest (space, flags, tracking URI) comes from the stopped sweep's state
    second = submit("mn-resume-2", "--resume")
    lines = [ln for ln in second.stdout.splitlines() if ln.startswith('{"sweep"')]
    summary = json.loads(lines[-1]) if lines else None
    return Resumed(db, "multinode-resume", n_done, status, logs, before, second, summary)


def test_job_submit_runs_sweep_on_cluster(cluster, resumed_sweep, tmp_path):
    """`ray job submit -- python -m raydistill.sweep pkd_glue …` runs a sweep to success on the cluster (the submitted
    sweep of ``resumed_sweep``: its trials run there in both jobs), its parent run and its trials FINISHED in MLflow,
    each trial a child of the parent with its metrics; the job API refuses a client holding another token."""
    # the job API refuses a client holding a different token
    bad = tmp_path / "wrong_token"
    bad.write_text(secrets.token_hex(32))
    refused = cluster.run(
        [*ray_cli(), "job", "list", "--address", cluster.dashboard],
        cwd=tmp_path,
        timeout=120,
        env={"RAY_AUTH_TOKEN_PATH": str(bad)},
        check=False,
    )
    assert refused.returncode != 0

    p = resumed_sweep.second
    assert p.returncode == 0, f"--- stdout\n{p.stdout[-8000:]}\n--- stderr\n{p.stderr[-4000:]}"
    assert re.search(r"Job '[\w-]+' succeeded", p.stdout), p.stdout[-4000:]
    summary = resumed_sweep.summary
    assert summary is not None and summary["trials"] == 2 and summary["errors"] == 0

    from mlflow.tracking import MlflowClient

    c = MlflowClient(f"sqlite:///{resumed_sweep.db}")
    runs = c.search_runs([c.get_experiment_by_name(resumed_sweep.experiment).experiment_id])
    parents = [r for r in runs if r.data.tags.get("raydistill.role") == "sweep"]
    children = [r for r in runs if r.data.tags.get("raydistill.trial_id")]
    assert len(parents) == 1 and parents[0].info.run_id == summary["parent_run_id"]
    assert parents[0].info.status == "FINISHED"
    assert len(children) == 2
    for r in children:
        assert r.info.status == "FINISHED" and r.data.tags["mlflow.parentRunId"] == summary["parent_run_id"]
        assert {"eval_accuracy", "train_loss", "student_params"} <= set(r.data.metrics)


def test_submitted_sweep_stopped_then_resumed_reruns_no_finished_trial(resumed_sweep):
    """docs/CLUSTER.md "Stop and resume a submitted sweep": `ray job stop` a submitted 2-trial sweep once its first
    trial finished, then a second `ray job submit … --resume --name … --storage-path URI` finishes the sweep without
    running the finished trial again (``resumed_sweep`` runs it)."""
    from mlflow.tracking import MlflowClient

    r = resumed_sweep
    assert r.n_done >= 1 and "was stopped" in r.status, (r.status, r.logs)
    second = r.second
    assert second.returncode == 0 and "Job 'mn-resume-2' succeeded" in second.stdout, (
        f"--- stdout\n{second.stdout[-8000:]}\n--- stderr\n{second.stderr[-4000:]}"
    )
    summary = r.summary
    assert summary is not None and summary["trials"] == 2 and summary["errors"] == 0
    c = MlflowClient(f"sqlite:///{r.db}")
    exp = c.get_experiment_by_name(r.experiment)
    runs = [x for x in c.search_runs([exp.experiment_id]) if "raydistill.trial_id" in x.data.tags]
    assert len(runs) == 2 and len({x.data.tags["raydistill.trial_id"] for x in runs}) == 2  # no duplicate trial
    assert all(x.info.status == "FINISHED" for x in runs)
    after = {x.data.tags["raydistill.trial_id"]: (x.info.run_id, x.info.end_time) for x in runs}
    assert all(after[t] == r.before[t] for t in r.before), (r.before, after)  # a finished trial is not run again
    for x in runs:
        assert [m.step for m in c.get_metric_history(x.info.run_id, "eval_accuracy")] == [1]
    parents = [x for x in c.search_runs([exp.experiment_id]) if x.data.tags.get("raydistill.role") == "sweep"]
    assert len(parents) == 1 and parents[0].info.run_id == summary["parent_run_id"]
