"""A run's persisted checkpoints on this machine's disk: which are complete, the latest's epoch history, and the
shrinking of an ended run's checkpoint (in process and on Ray Train alike)."""

from __future__ import annotations

import json
import logging
import os

log = logging.getLogger("raydistill")


def local_dir(checkpoint) -> str | None:
    """The checkpoint's folder where it is on this machine's disk (a folder the in-process runner persisted, or a Ray
    checkpoint in local storage), else None (remote storage)."""
    if isinstance(checkpoint, str):
        return checkpoint
    if getattr(getattr(checkpoint, "filesystem", None), "type_name", "") == "local":
        return checkpoint.path
    return None


def shrink(checkpoint) -> None:
    """A run that has ended keeps a checkpoint without its optimizer state and latest student (train.checkpoint's
    ``finish``): on this machine's disk only (a checkpoint in remote storage is left as it is)."""
    from raydistill.train.checkpoint import finish

    path = local_dir(checkpoint)
    folder = os.path.join(path, "checkpoint") if path else ""
    if folder and os.path.isdir(folder):
        freed = finish(folder)
        log.debug("checkpoint %s shrunk by %d bytes", folder, freed)


# checkpoints kept per run (in process and on Ray Train): the latest. It is written beside the old one and put in place
# atomically before the old one goes, so one is enough to resume; each holds the student, the best student and the
# AdamW state, so keeping two doubled the disk a search fills
KEEP = 1


def checkpoints(run_dir: str) -> list[str]:
    """Complete persisted checkpoints, oldest first (a half-copied one is still named ``….tmp``; beside Ray Train's
    lies its ``checkpoint_manager_snapshot.json``)."""
    if not os.path.isdir(run_dir):
        return []
    names = sorted(n for n in os.listdir(run_dir) if n.startswith("checkpoint_") and not n.endswith((".tmp", ".json")))
    return [os.path.join(run_dir, n) for n in names if os.path.isdir(os.path.join(run_dir, n))]


# Ray Train's record of the checkpoints its controller registered, beside them
SNAPSHOT = "checkpoint_manager_snapshot.json"


def latest_history(run_dir: str) -> list[dict]:
    """The metrics of every epoch the run's latest complete checkpoint has trained; none without one. On Ray Train the
    latest its controller registered: a worker copies a checkpoint into its final folder before the controller hears
    of it, so the newest folder may be half-copied (the worker killed) or never reported (another rank died), and Ray
    resumes from the registered one. A record that cannot be read counts as none (warned): the run trains again."""
    from raydistill.train.checkpoint import load_history

    snapshot = os.path.join(run_dir, SNAPSHOT)
    try:
        if os.path.isfile(snapshot):
            with open(snapshot) as f:
                name = (json.load(f).get("latest_checkpoint_result") or {}).get("checkpoint_dir_name")
            return load_history(os.path.join(run_dir, name, "checkpoint")) if name else []
        kept = checkpoints(run_dir)
        return load_history(os.path.join(kept[-1], "checkpoint")) if kept else []
    except (OSError, ValueError) as e:
        log.warning("the checkpoints in %s could not be read (%s): taken as none", run_dir, e)
        return []
