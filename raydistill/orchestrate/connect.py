"""Joining Ray: the cluster in RAY_ADDRESS, or a local Ray of this command's own (two commands on one host never
mix)."""

from __future__ import annotations

import contextlib
import logging
import os
import sys

import ray

from raydistill.orchestrate.resources import Cluster


def init_ray(num_cpus: int | None = None, log_to_driver: bool = True, verbose: bool = False) -> bool:
    """Join the cluster in RAY_ADDRESS (no resource arguments allowed then; ``RAY_ADDRESS=auto`` joins the cluster a
    ``ray start --head`` on this host started), else start a local Ray of this command's own, even when another
    cluster runs on this host, with its dashboard bound to 127.0.0.1.

    A cluster with token authentication admits this driver only with ``RAY_AUTH_MODE=token`` and the
    cluster's token (``RAY_AUTH_TOKEN``, ``RAY_AUTH_TOKEN_PATH`` or ``~/.ray/auth_token``) in its
    environment; a job started by ``ray job submit`` inherits both from the cluster. A refused token, or
    a dashboard URL in RAY_ADDRESS, is a one-line UserError saying what to set instead of a Ray traceback.

    Returns whether this call started or joined Ray: False where this process was already connected (a test's
    session Ray, the caller of ``raydistill.api``), whose Ray is then not this command's to stop.
    """
    if ray.is_initialized():
        return False
    from raydistill.orchestrate.console import plain_worker_output, quiet_notices

    quiet_notices(verbose)
    os.environ.setdefault("RAY_TRAIN_V2_ENABLED", "1")
    address = os.environ.get("RAY_ADDRESS")
    if address:
        from raydistill.common.errors import UserError

        if address.startswith(("http://", "https://")):
            raise UserError(
                "RAY_ADDRESS",
                f"{address} is a dashboard / job API address: submit the command with "
                f"`ray job submit --address {address} -- python -m ...`, or set RAY_ADDRESS to the "
                "cluster's GCS address (HOST:6379)",
            )
        try:
            ray.init(address=address, log_to_driver=True)
        except Exception as e:
            chain: list[str] = []  # the error and its causes, one line each
            c: BaseException | None = e
            while c is not None and len(chain) < 10:
                chain.append(f"{type(c).__name__}: {c}")
                c = c.__cause__ or c.__context__
            if any("InvalidAuthToken" in t or "AuthenticationError" in t for t in chain):
                mode = os.environ.get("RAY_AUTH_MODE", "unset")
                raise UserError(
                    "RAY_ADDRESS",
                    f"the cluster at {address} refused this client's token "
                    f"(RAY_AUTH_MODE is {mode}): export RAY_AUTH_MODE=token and the cluster's token "
                    "as RAY_AUTH_TOKEN, RAY_AUTH_TOKEN_PATH or ~/.ray/auth_token "
                    "(docs/CLUSTER.md#2-authenticate-ray-token-auth-ray--252)",
                ) from None
            raise
        from raydistill.orchestrate.guard import watch

        watch(ray.get_runtime_context().gcs_address)  # a cluster lost mid-command: one line, no run left RUNNING
    else:
        start_local(num_cpus, log_to_driver, verbose)
    plain_worker_output(verbose)  # the trials' lines as they wrote them: no pid prefixes, colour or folding
    return True


# a free port asked of the OS is free only until someone else binds it (Ray's own services included): a start that
# loses that race is tried again on a fresh port, this many times in all
PORT_TRIES = 5


def start_local(num_cpus: int | None, log_to_driver: bool, verbose: bool) -> None:
    """A new local Ray of this command's own (``address="local"``: never the cluster a ``ray start --head`` on this
    host left in ``ray_current_cluster``), its dashboard on a free loopback port, tried again on a fresh port when
    another process took the first before Ray bound it."""
    # the dashboard (bound to loopback) hosts the state API Ray Train uses to clean up placement groups.
    # Its actors find that API by RAY_API_SERVER_ADDRESS, inherited from this process by the raylet and every
    # worker it starts; unset, they look for "the" local Ray and fail when a second command runs its own.
    # Set only while Ray starts: this process's children (a `ray job submit` to a cluster) must not inherit it.
    env = {k: os.environ.get(k, v) for k, v in LOCAL_TRAIN_ENV.items()}
    for attempt in range(1, PORT_TRIES + 1):
        port = free_port()
        before = _children()
        try:
            with _environ({**env, "RAY_API_SERVER_ADDRESS": f"http://127.0.0.1:{port}"}), _lost_bind_ended(before):
                ray.init(
                    address="local",
                    num_cpus=num_cpus,
                    include_dashboard=True,
                    dashboard_host="127.0.0.1",
                    dashboard_port=port,
                    logging_level=logging.INFO if verbose else logging.WARNING,
                    log_to_driver=log_to_driver,
                    configure_logging=False,
                )
            return
        except Exception as e:  # only a lost port race is tried again
            if attempt == PORT_TRIES or not port_taken(e):
                raise
            _stop(_children() - before)  # the half-started Ray (its GCS, monitor, reaper) of the failed try
            with contextlib.suppress(Exception):
                ray.shutdown()
            print(
                f"raydistill: port {port} was taken before Ray's dashboard bound it; starting Ray again on another "
                f"(try {attempt + 1} of {PORT_TRIES})",
                file=sys.stderr,
                flush=True,
            )


@contextlib.contextmanager
def _lost_bind_ended(before: set[int]):
    """While Ray starts: a dashboard of this start (a child process not in ``before``) whose log says it lost its
    port is ended at once. It stays up after the error it logs, and ray.init waits out its whole startup timeout
    (RAY_DASHBOARD_STARTUP_TIMEOUT_S, 60 s) before it reports the lost race; a dashboard process that has exited is
    what makes it report at once."""
    import signal
    import threading

    done = threading.Event()

    def watch() -> None:
        while not done.wait(0.25):
            for pid in _children() - before:
                log = _dashboard_log(pid)
                if log and _says_port_lost(log):
                    with contextlib.suppress(OSError):
                        os.kill(pid, signal.SIGKILL)

    t = threading.Thread(target=watch, name="raydistill-dashboard-bind", daemon=True)
    t.start()
    try:
        yield
    finally:
        done.set()
        t.join()


def _dashboard_log(pid: int) -> str | None:
    """The log file of child ``pid`` when it is Ray's dashboard (its command line names the log folder)."""
    with contextlib.suppress(OSError):
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            args = f.read().decode(errors="replace").split("\0")
        if any(a.endswith(os.path.join("dashboard", "dashboard.py")) for a in args):
            logdir = next((a.split("=", 1)[1] for a in args if a.startswith("--log-dir=")), None)
            return os.path.join(logdir, "dashboard.log") if logdir else None
    return None


def _says_port_lost(log: str) -> bool:
    with contextlib.suppress(OSError), open(log, errors="replace") as f:
        return "Failed to find a valid port for dashboard" in f.read()  # its bind's error, as its log says it
    return False


def port_taken(e: BaseException) -> bool:
    """Whether a failed local start lost the race for its dashboard port (Ray's own check of the port, or the
    dashboard's bind, which ray.init reports with the tail of dashboard.log)."""
    text = f"{e}"
    return any(
        m in text
        for m in ("already occupied", "Failed to find a valid port", "Address already in use", "address already in use")
    )


def _children() -> set[int]:
    """This process's child processes (Linux /proc; elsewhere none are known)."""
    me, out = os.getpid(), set()
    with contextlib.suppress(OSError):
        for d in os.listdir("/proc"):
            if d.isdigit():
                with contextlib.suppress(OSError, IndexError, ValueError):
                    with open(f"/proc/{d}/stat") as f:  # "pid (comm) state ppid ...": comm may hold spaces
                        if int(f.read().rsplit(")", 1)[1].split()[1]) == me:
                            out.add(int(d))
    return out


def _stop(pids: set[int], grace_s: float = 3.0) -> None:
    """SIGTERM these child processes, SIGKILL what is left after ``grace_s``, and reap them."""
    import signal
    import time

    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in pids:
            with contextlib.suppress(OSError):
                os.kill(pid, sig)
        deadline = time.time() + grace_s
        while pids and time.time() < deadline:
            for pid in list(pids):
                with contextlib.suppress(ChildProcessError, OSError):
                    if os.waitpid(pid, os.WNOHANG)[0] == pid:
                        pids.discard(pid)
                        continue
                if not os.path.exists(f"/proc/{pid}"):
                    pids.discard(pid)
            time.sleep(0.1)


@contextlib.contextmanager
def _environ(values: dict):
    old = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


# A trial's fixed cost on one machine (docs/benchmarks/2026-11-23-sweep-throughput.md): Ray Train's controller polls its
# workers every 2 s by default and starts a preemption-watcher actor (a process) per run, for spot nodes a local machine
# does not have. Set in the environment to override.
LOCAL_TRAIN_ENV = {"RAY_TRAIN_HEALTH_CHECK_INTERVAL_S": "0.5", "RAY_TRAIN_ENABLE_PREEMPTION_WATCHER": "0"}


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def shutdown() -> None:
    """Disconnect from (and for a local Ray, stop) the Ray this command started or joined: after it, no worker's
    output is forwarded to this process's stderr (an interrupted command's one line stays its last)."""
    if ray.is_initialized():
        ray.shutdown()


@contextlib.contextmanager
def owned_ray():
    """A Ray started (or a cluster joined) inside is stopped (left) on the way out, however it ends; one this process
    was connected to before (the caller's) is left running."""
    before = ray.is_initialized()
    try:
        yield
    finally:
        if not before:
            shutdown()


def mute_workers() -> None:
    """Stop printing Ray workers' forwarded output in this process (what they printed so far and Ray held back as
    repeats is printed first). Called the moment Ctrl-C arrives: a trial actor Ray kills while the command unwinds
    prints its SIGTERM traceback, which must not reach the user ahead of the command's one line."""
    from ray._private import ray_logging, worker

    ray_logging.global_worker_stdstream_dispatcher.remove_handler("ray_print_logs")
    no_prefix = worker._should_ignore_worker_log_prefix(worker.global_worker)
    for dedup, sink in ((ray_logging.stdout_deduplicator, sys.stdout), (ray_logging.stderr_deduplicator, sys.stderr)):
        for batch in dedup.flush():
            worker.print_worker_logs(batch, sink, no_prefix)


def cluster() -> Cluster:
    """What the Ray this process joined holds (CPUs, GPUs)."""
    return Cluster.of(ray.cluster_resources())
