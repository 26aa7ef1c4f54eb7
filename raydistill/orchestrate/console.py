"""What the user sees of Ray in a terminal (issue 48 item 6): the trials' own lines, without Ray's
``(run_trial pid=…)`` prefixes and their colour codes, without "[repeated 2x across cluster]" folding (two trials
printing the same line is two lines), and without Ray's token-authentication notice. ``--verbose`` keeps Ray's own
printer and notices. Nothing is lost: Ray writes every worker's output to its session logs
(``/tmp/ray/session_latest/logs/worker-*.out|err``) whatever the driver prints.

Ray has no option for this: ``RAY_DEDUP_LOGS`` and ``RAY_DISABLE_WORKER_LOG_PREFIX`` are read once, when ``ray`` is
imported (ray._private.ray_constants), and the colour is Ray's prefix's; so the printer Ray registers on the driver
(``ray_print_logs`` in ``ray._private.ray_logging.global_worker_stdstream_dispatcher``, ray._private.worker.connect)
is replaced by ``_print``, which prints each forwarded line as the trial wrote it."""

from __future__ import annotations

import logging
import re
import sys

# the one INFO-level notice Ray logs as a warning when it starts a local cluster with token auth on by default
# (ray._private.authentication.authentication_token_setup): nothing for the user to do on their own machine
TOKEN_NOTICE_LOGGER = "ray._private.authentication.authentication_token_setup"
# the label a sweep's trial puts before its lines: its Tune trial id (orchestrate.trial.run_name starts with it)
TRIAL_ID = re.compile(r"^[0-9a-f]{8}(?:_[0-9]+)? ")


def quiet_notices(verbose: bool) -> None:
    """Ray's token-auth notice shown only with ``--verbose`` (called before ``ray.init``)."""
    logging.getLogger(TOKEN_NOTICE_LOGGER).setLevel(logging.INFO if verbose else logging.ERROR)


def plain_worker_output(verbose: bool) -> None:
    """After ``ray.init(log_to_driver=True)`` on the driver: the workers' forwarded lines printed as written (see the
    module's docstring); ``verbose`` keeps Ray's printer."""
    if verbose:
        return
    from ray._private import ray_logging

    dispatcher = ray_logging.global_worker_stdstream_dispatcher
    if any(name == "ray_print_logs" for name, _ in dispatcher.handlers):  # log_to_driver: Ray's printer is on
        dispatcher.remove_handler("ray_print_logs")
        dispatcher.add_handler("ray_print_logs", _print)


def _print(data: dict) -> None:
    """One batch of lines a worker (or the raylet: its own messages, such as a worker killed for memory) wrote."""
    from ray.experimental.tqdm_ray import RAY_TQDM_MAGIC

    if data.get("pid") == "autoscaler":  # a cluster's scaling events: Ray's own printer says them best
        from ray._private.worker import print_to_stdstream

        print_to_stdstream(data, ignore_prefix=False)
        return
    sink = sys.stderr if data.get("is_err") else sys.stdout
    said = "ray: " if data.get("pid") == "raylet" else ""
    for line in data.get("lines", []):
        if RAY_TQDM_MAGIC not in line:
            print(f"{said}{line}", file=sink)
    sink.flush()


def label(run_name: str | None) -> str:
    """What a run's lines start with: ``[TRIAL] `` for a sweep's trial (several print at once), nothing for a single
    run (``[rank0]`` told nothing: only rank 0 prints)."""
    m = TRIAL_ID.match(run_name or "")
    return f"[{m.group(0).strip()}] " if m else ""
