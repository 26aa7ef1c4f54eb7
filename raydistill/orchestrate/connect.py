"""Joining Ray: the cluster in RAY_ADDRESS, or a local Ray of this command's own (two commands on one host never mix)."""
from __future__ import annotations

import contextlib
import logging
import os

import ray

from ..resources import Cluster


def init_ray(num_cpus: int | None = None, log_to_driver: bool = True, verbose: bool = False) -> None:
    """Join the cluster in RAY_ADDRESS (no resource arguments allowed then), else start a local Ray
    with its dashboard bound to 127.0.0.1.

    A cluster with token authentication admits this driver only with ``RAY_AUTH_MODE=token`` and the
    cluster's token (``RAY_AUTH_TOKEN``, ``RAY_AUTH_TOKEN_PATH`` or ``~/.ray/auth_token``) in its
    environment; a job started by ``ray job submit`` inherits both from the cluster. A refused token, or
    a dashboard URL in RAY_ADDRESS, is a one-line UserError saying what to set instead of a Ray traceback.
    """
    if ray.is_initialized():
        return
    os.environ.setdefault("RAY_TRAIN_V2_ENABLED", "1")
    address = os.environ.get("RAY_ADDRESS")
    if address:
        from ..errors import UserError

        if address.startswith(("http://", "https://")):
            raise UserError("RAY_ADDRESS", f"{address} is a dashboard / job API address: submit the command with "
                            f"`ray job submit --address {address} -- python -m ...`, or set RAY_ADDRESS to the "
                            "cluster's GCS address (HOST:6379)")
        try:
            ray.init(address=address, log_to_driver=True)
        except Exception as e:
            chain, c = [], e
            while c is not None and len(chain) < 10:
                chain.append(f"{type(c).__name__}: {c}")
                c = c.__cause__ or c.__context__
            if any("InvalidAuthToken" in t or "AuthenticationError" in t for t in chain):
                mode = os.environ.get("RAY_AUTH_MODE", "unset")
                raise UserError("RAY_ADDRESS", f"the cluster at {address} refused this client's token "
                                f"(RAY_AUTH_MODE is {mode}): export RAY_AUTH_MODE=token and the cluster's token "
                                "as RAY_AUTH_TOKEN, RAY_AUTH_TOKEN_PATH or ~/.ray/auth_token "
                                "(docs/CLUSTER.md, section 2)") from None
            raise
    else:
        # the dashboard (bound to loopback) hosts the state API Ray Train uses to clean up placement groups.
        # Its actors find that API by RAY_API_SERVER_ADDRESS, inherited from this process by the raylet and every
        # worker it starts; unset, they look for "the" local Ray and fail when a second command runs its own.
        # Set only while Ray starts: this process's children (a `ray job submit` to a cluster) must not inherit it.
        port = free_port()
        env = {k: os.environ.get(k, v) for k, v in LOCAL_TRAIN_ENV.items()}
        with _environ({**env, "RAY_API_SERVER_ADDRESS": f"http://127.0.0.1:{port}"}):
            ray.init(num_cpus=num_cpus, include_dashboard=True, dashboard_host="127.0.0.1", dashboard_port=port,
                     logging_level=logging.INFO if verbose else logging.WARNING,
                     log_to_driver=log_to_driver, configure_logging=False)


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


# A trial's fixed cost on one machine (benchmarks/sweep_throughput.py, BENCHMARKS.md): Ray Train's controller polls its
# workers every 2 s by default and starts a preemption-watcher actor (a process) per run, for spot nodes a local machine
# does not have. Set in the environment to override.
LOCAL_TRAIN_ENV = {"RAY_TRAIN_HEALTH_CHECK_INTERVAL_S": "0.5", "RAY_TRAIN_ENABLE_PREEMPTION_WATCHER": "0"}


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cluster() -> Cluster:
    """What the Ray this process joined holds (CPUs, GPUs)."""
    return Cluster.of(ray.cluster_resources())
