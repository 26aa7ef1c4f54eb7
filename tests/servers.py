"""Real tracking servers for the tests: a PostgreSQL cluster of the test's own (Debian's package, trust auth, bound to
127.0.0.1 on a free port, in a temporary folder) and ``mlflow server`` in front of a backend store, over HTTP.

Each is started by a fixture and stopped when the fixture ends; where one cannot start (no PostgreSQL installed, no
driver) the fixture skips with one line saying what is missing. Nothing here reads or writes outside its folder.
"""

from __future__ import annotations

import contextlib
import glob
import importlib.util
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

# A loaded 2-core machine took 105 s to bring `mlflow server` up (its imports and the store's migrations): the
# start waits long, and a server that died meanwhile is seen at once
START_TIMEOUT_S = 300


class Unavailable(Exception):
    """The server cannot start here: the message is the skip line."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _pg_bin(name: str) -> str:
    """A PostgreSQL program: Debian keeps them under /usr/lib/postgresql/VERSION/bin (only wrappers on the PATH)."""
    found = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"), reverse=True) or [shutil.which(name) or ""]
    if not found[0]:
        raise Unavailable(f"PostgreSQL's {name} is not installed (Debian: apt-get install postgresql)")
    return found[0]


def _as_owner(cmd: list[str]) -> list[str]:
    """PostgreSQL refuses to run as root: as root, run it as the ``postgres`` user Debian's package creates."""
    if os.geteuid() != 0:
        return cmd
    if not shutil.which("runuser"):
        raise Unavailable("running as root without runuser: cannot start PostgreSQL as another user")
    try:
        import pwd

        pwd.getpwnam("postgres")
    except KeyError as e:
        raise Unavailable("running as root and no 'postgres' user to run PostgreSQL as") from e
    return ["runuser", "-u", "postgres", "--", *cmd]


def _run(cmd: list[str], log: str) -> None:
    with open(log, "a") as f:
        p = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, timeout=START_TIMEOUT_S)
    if p.returncode:
        program = cmd[cmd.index("--") + 1] if cmd[0] == "runuser" else cmd[0]
        with open(log, errors="replace") as f:  # the folder goes with the fixture: the reason goes in the line
            last = ([line.strip() for line in f if line.strip()] or ["no output"])[-1]
        raise Unavailable(f"{os.path.basename(program)} failed: {last}")


@contextlib.contextmanager
def postgres():
    """A fresh PostgreSQL cluster on 127.0.0.1 with a database ``mlflow``, in a temporary folder of its own (as
    root, owned by ``postgres``: pytest's folders are root's alone); yields its SQLAlchemy URI."""
    if importlib.util.find_spec("psycopg") is None:  # SQLAlchemy's driver for postgresql://
        raise Unavailable("the psycopg driver is not installed (pip install 'psycopg[binary]')")
    root = tempfile.mkdtemp(prefix="raydistill-test-postgres-")
    try:
        if os.geteuid() == 0:
            shutil.chown(root, user="postgres")
        yield from _cluster(root)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _cluster(root: str):
    data, log, port = os.path.join(root, "data"), os.path.join(root, "postgres.log"), free_port()
    _run(_as_owner([_pg_bin("initdb"), "-D", data, "--auth=trust", "-U", "mlflow", "-E", "UTF8"]), log + ".init")
    ctl = _pg_bin("pg_ctl")
    opts = f"-h 127.0.0.1 -p {port} -k {root}"  # TCP on loopback only; its socket in its own folder
    _run(_as_owner([ctl, "-D", data, "-l", log, "-o", opts, "-w", "-t", str(START_TIMEOUT_S), "start"]), log + ".ctl")
    try:
        _run(_as_owner([_pg_bin("createdb"), "-h", "127.0.0.1", "-p", str(port), "-U", "mlflow", "mlflow"]), log)
        yield f"postgresql://mlflow@127.0.0.1:{port}/mlflow"
    finally:
        subprocess.run(_as_owner([ctl, "-D", data, "-m", "fast", "stop"]), capture_output=True, timeout=120)


def _healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(url + "/health", timeout=5) as r:
            return r.status == 200
    except OSError:
        return False


@contextlib.contextmanager
def mlflow_server(store: str, root: str):
    """``mlflow server`` on 127.0.0.1 over the backend ``store``, artifacts served from ``root``; yields its URL.
    One uvicorn worker: with several, uvicorn's supervisor killed workers whose start outlasted its 5 s health ping
    on a loaded machine, and the server never answered."""
    os.makedirs(root, exist_ok=True)
    port, log = free_port(), os.path.join(root, "mlflow-server.log")
    cmd = [sys.executable, "-m", "mlflow", "server", "--backend-store-uri", store, "--host", "127.0.0.1"]
    cmd += ["--port", str(port), "--workers", "1", "--artifacts-destination", os.path.join(root, "artifacts")]
    env = {k: v for k, v in os.environ.items() if k.upper() not in ("HTTP_PROXY", "HTTPS_PROXY")}
    # no GenAI job runner: it starts seven huey consumers, which outlived the server's SIGTERM
    env["MLFLOW_SERVER_ENABLE_JOB_EXECUTION"] = "false"
    with open(log, "w") as f:
        proc = subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT, cwd=root, env=env, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + START_TIMEOUT_S
        while not _healthy(url):
            if proc.poll() is not None or time.time() > deadline:
                raise RuntimeError(f"mlflow server did not start (exit {proc.poll()}); see {log}")
            time.sleep(1)
        yield url
    finally:
        _stop_group(proc)


def _stop_group(proc: subprocess.Popen) -> None:
    """SIGTERM to the server's process group, then SIGKILL to whatever of it is left (nothing outlives the test)."""
    for sig, wait in ((signal.SIGTERM, 30), (signal.SIGKILL, 10)):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, sig)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=wait)
