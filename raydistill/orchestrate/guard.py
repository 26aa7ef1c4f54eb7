"""A joined Ray cluster lost mid-command ends the command in one line, its MLflow runs FAILED, never left RUNNING.

Losing the cluster ends a driver in one of two ways, neither of which lets it clean up: Ray's core worker exits the
process at once when its node's raylet goes (no ``finally``, no ``atexit``), or, with its raylet alive but the GCS
gone, the driver blocks in Ray for minutes and a SIGTERM waits behind it. So:

* ``watch`` starts a small guardian process beside the driver. The driver tells it (a pipe) which MLflow runs it
  opened and closed (``Tracker.start_run`` / ``end_run``); a driver that ends normally says goodbye. When the pipe
  closes without one, the driver died: the guardian marks its open runs and their still-RUNNING children (a sweep's
  trials) FAILED with the reason, and prints the command's one line (``error: RAY_ADDRESS: the Ray cluster at ADDR
  went away …; resume with …``) on the driver's stderr.
* a watchdog thread in the driver connects to the cluster's GCS port every ``POLL_S``; unreachable for ``LOST_S``,
  it ends the driver (``os._exit``), and the guardian says why.
"""

from __future__ import annotations

import atexit
import json
import os
import socket
import subprocess
import sys
import threading
import time

POLL_S = 2.0
LOST_S = 20.0  # the GCS unreachable this long: the cluster is gone (a restarted head is a new cluster anyway)

_guardian: subprocess.Popen[str] | None = None
_address: str | None = None
_opened: dict[str, dict] = {}  # the MLflow runs this driver has open or ended FAILED, for its one line
_lock = threading.Lock()


def reachable(address: str, timeout: float = 2.0) -> bool:
    """Whether something accepts connections at the GCS address ``HOST:PORT``."""
    host, _, port = address.rpartition(":")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout):
            return True
    except (OSError, ValueError):
        return False


def lost_line(address: str, runs: dict) -> str:
    """The command's one line when the cluster at ``address`` went away under it."""
    sweeps = [r for r in runs.values() if r.get("role") == "sweep"]
    if sweeps:
        s = sweeps[0]
        where = f" --storage-path {s['storage']}" if s.get("storage") else ""  # a cluster's: remote, not the default
        how = f"resume with `python -m raydistill.sweep {s.get('space') or 'SPACE'} --name {s['name']} --resume{where}`"
    else:
        how = "run the command again"
    ids = ", ".join(runs) or "none"
    return (
        f"error: RAY_ADDRESS: the Ray cluster at {address} went away mid-command; MLflow run(s) {ids} marked "
        f"FAILED; {how} once RAY_ADDRESS names a live cluster"
    )


def watch(address: str) -> None:
    """Guard this driver against losing the cluster at ``address`` (its GCS ``HOST:PORT``)."""
    global _guardian, _address
    if _guardian is not None:
        return
    from raydistill.tracking import track

    _address = address

    _guardian = subprocess.Popen(
        [sys.executable, "-m", "raydistill.orchestrate.guard", address],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
    )
    track.WATCHERS.append(_tell)
    atexit.register(release)
    threading.Thread(target=_watchdog, args=(address,), name="raydistill-cluster-watchdog", daemon=True).start()


def release() -> None:
    """The driver ends normally: the guardian leaves quietly."""
    global _guardian
    with _lock:
        g, _guardian = _guardian, None
    if g is not None:
        assert g.stdin is not None  # started with stdin=PIPE
        try:
            g.stdin.write(json.dumps({"bye": True}) + "\n")
            g.stdin.close()
            g.wait(timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            pass


def _tell(
    event: str,
    uri: str,
    run_id: str,
    name: str | None = None,
    tags: dict | None = None,
    params: dict | None = None,
    status: str | None = None,
) -> None:
    with _lock:
        if _guardian is None:
            return
        msg = {
            "event": event,
            "uri": uri,
            "run_id": run_id,
            "name": name,
            "role": (tags or {}).get("raydistill.role"),
            "space": (params or {}).get("space"),
            "storage": (params or {}).get("storage_path"),
            "status": status,
        }
        follow(_opened, msg)
        _send(msg)


def _send(msg: dict) -> None:
    """One message down the guardian's pipe (the caller holds ``_lock`` and has a guardian)."""
    assert _guardian is not None and _guardian.stdin is not None  # the caller's guardian, started with stdin=PIPE
    try:
        _guardian.stdin.write(json.dumps(msg) + "\n")
        _guardian.stdin.flush()
    except OSError:
        pass


def lost(e: BaseException | None = None, wait_s: float = 10.0) -> str | None:
    """The one line for a driver still alive when its cluster went away (its runs already ended by their own error
    handling), or None while the cluster is there (or none was joined). A Ray system error (an actor or node died)
    waits up to ``wait_s`` for the GCS to go: a stopping head ends its raylet, and so the run's actors, first."""
    if _address is None:
        return None
    deadline = time.time() + (wait_s if e is not None and _ray_failure(e) else 0)
    while reachable(_address):
        if time.time() >= deadline:
            return None
        time.sleep(0.5)
    return lost_line(_address, _opened)


def say(line: str) -> None:
    """Print the command's one line, then tell the guardian it is said: a driver that Ray (or the watchdog) ends
    before its goodbye must not get the line twice."""
    print(line, file=sys.stderr, flush=True)
    with _lock:
        if _guardian is not None:
            _send({"said": True})


def _ray_failure(e: BaseException | None) -> bool:
    import ray.exceptions as rx

    kinds = tuple(
        getattr(rx, k)
        for k in ("RayActorError", "ActorUnavailableError", "RaySystemError", "NodeDiedError")
        if hasattr(rx, k)
    )
    seen = 0
    while e is not None and seen < 10:
        if isinstance(e, kinds):
            return True
        e, seen = e.__cause__ or e.__context__, seen + 1
    return False


def _watchdog(address: str) -> None:
    down_since = None
    while True:
        time.sleep(POLL_S)
        if reachable(address):
            down_since = None
        elif down_since is None:
            down_since = time.time()
        elif time.time() - down_since >= LOST_S:
            os._exit(1)  # Ray may hold the main thread (and SIGTERM) for minutes; the guardian says why


def _end(runs: dict, reason: str) -> None:
    from raydistill.tracking.track import Tracker

    for run_id, r in runs.items():
        try:
            tracker = Tracker(r["uri"])
            c = tracker.client
            exp = c.get_run(run_id).info.experiment_id
            for child in c.search_runs(
                [exp], filter_string=f"tags.`mlflow.parentRunId` = '{run_id}' and attributes.status = 'RUNNING'"
            ):
                tracker.set_tags(child.info.run_id, {"error": reason})
                tracker.end_run(child.info.run_id, "FAILED")
            if not r.get("ended"):  # one the driver ended FAILED itself keeps its own reason
                tracker.set_tags(run_id, {"error": reason})
                tracker.end_run(run_id, "FAILED")
        except Exception as e:  # one run's tracking server down must not keep the others open
            print(f"raydistill: could not mark MLflow run {run_id} FAILED: {e}", file=sys.stderr, flush=True)


def follow(runs: dict, msg: dict) -> None:
    """Keep ``runs`` to the runs the command's one line names: open ones, and ones the driver itself ended FAILED
    (its own error handling can get there just before Ray takes the process down)."""
    if msg["event"] == "open":
        runs[msg["run_id"]] = msg
    elif msg.get("status") == "FAILED":
        runs.setdefault(msg["run_id"], msg)["ended"] = True
    else:
        runs.pop(msg["run_id"], None)


def main(address: str) -> None:
    """The guardian: follows the driver's open MLflow runs on stdin until it says goodbye or dies."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the driver's to handle; its pipe tells us the rest
    runs: dict[str, dict] = {}
    said = False  # the driver printed the one line itself (``say``) before it died
    for line in sys.stdin:
        msg = json.loads(line)
        if msg.get("bye"):
            return
        if msg.get("said"):
            said = True
            continue
        follow(runs, msg)
    # the driver died without saying goodbye: the cluster went away (its GCS gone within seconds), or it was killed
    for _ in range(10):
        gone = not reachable(address)
        if gone:
            break
        time.sleep(1)
    if gone:
        _end(runs, f"the Ray cluster at {address} went away")
        if not said:
            print(lost_line(address, runs), file=sys.stderr, flush=True)
    elif runs:
        _end(runs, "the driver process died")
        print(
            f"error: the driver died (the Ray cluster at {address} is still up); MLflow run(s) {', '.join(runs)} "
            "marked FAILED",
            file=sys.stderr,
            flush=True,
        )


if __name__ == "__main__":
    main(sys.argv[1])
