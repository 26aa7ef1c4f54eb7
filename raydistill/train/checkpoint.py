"""Checkpoints of a run: the latest student (for resume), the best epoch's student, the objective, optimizer and
scheduler state, written to a temporary folder and renamed so a half-written one is never taken as valid."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import socket
import tempfile

import torch

from raydistill.common.modes import as_umask
from raydistill.common.outputs import link
from raydistill.common.paths import free_bytes
from raydistill.models.prune import PLAN_FILE

# below this many free bytes a failed checkpoint write is put down to the full disk: torch's writer says only
# "basic_ios::clear: iostream error" (no errno), and a full disk leaves next to nothing free
FULL_DISK = 16 << 20


class DiskFullError(OSError):
    """A checkpoint that found no room on its disk: the folder, what is free, and the fix, in one line."""


def copy_dir(src: str, dst: str) -> None:
    shutil.rmtree(dst, ignore_errors=True)
    shutil.copytree(src, dst, copy_function=link)


def run_temp(kind: str) -> str:
    """A temporary folder of this run's (``raydistill-KIND-WHERE-PID-…``: its best student between checkpoints, a
    checkpoint until it is reported), removed by the run when it ends. A process killed outright (Tune stopping a
    trial, a session's end) leaves its folders behind: each new one first removes those of processes no longer alive,
    of its prefix and its ``WHERE`` only (``_where``: a process id means nothing in another container sharing the
    temporary folder, where a live run's folder would look dead)."""
    tmp, where = tempfile.gettempdir(), _where()
    for name in os.listdir(tmp):
        m = re.fullmatch(rf"raydistill-{kind}-{where}-(\d+)-\w+", name)
        if m and not _alive(int(m[1])):
            shutil.rmtree(os.path.join(tmp, name), ignore_errors=True)
    return tempfile.mkdtemp(prefix=f"raydistill-{kind}-{where}-{os.getpid()}-")


def _where() -> str:
    """This machine and process-id namespace, in 8 hex digits: where ``_alive`` can answer for a process id."""
    try:
        ns = os.readlink("/proc/self/ns/pid")
    except OSError:  # no /proc (macOS): one namespace per machine
        ns = ""
    return hashlib.sha1(f"{socket.gethostname()}|{ns}".encode()).hexdigest()[:8]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def save_checkpoint(path: str, student, tokenizer, objective, opt, sched, state: dict, best: str | None = None) -> None:
    """Write to a temporary folder, then rename: a half-written checkpoint is never taken as valid.

    ``student`` is the latest student (what a resumed run continues); ``best_student`` a copy of the folder
    ``best``, or of this student when ``best`` is None (it is the best so far)."""
    tmp = tempfile.mkdtemp(prefix=".tmp-", dir=os.path.dirname(os.path.abspath(path)) or ".")
    try:
        student.save_pretrained(os.path.join(tmp, "student"))
        tokenizer.save_pretrained(os.path.join(tmp, "student"))
        if getattr(student, "prune_plan", None):  # init prune: what it kept, beside the weights (models/prune.py)
            with open(os.path.join(tmp, "student", PLAN_FILE), "w", encoding="utf-8") as f:
                json.dump(student.prune_plan, f)
        copy_dir(best or os.path.join(tmp, "student"), os.path.join(tmp, "best_student"))
        torch.save(
            {"objective": objective.state_dict(), "optimizer": opt.state_dict(), "scheduler": sched.state_dict()},
            os.path.join(tmp, "train_state.pt"),
        )
        with open(os.path.join(tmp, "state.json"), "w") as f:
            json.dump(state, f)
        as_umask(tmp)  # readable as the user's files: safetensors and mkdtemp make them owner-only
        if os.path.exists(path):
            shutil.rmtree(path)
        os.replace(tmp, path)
    except BaseException as e:
        full = isinstance(e, (OSError, RuntimeError)) and _disk_full(tmp, e)
        shutil.rmtree(tmp, ignore_errors=True)
        if full:
            raise DiskFullError(
                f"no space left on the disk of {os.path.dirname(tmp)} for a checkpoint "
                f"({free_bytes(os.path.dirname(tmp)) >> 20} MiB free once its partial copy was removed): free space "
                "there, or point TMPDIR (where each epoch's checkpoint is written before it is kept) at a larger disk"
            ) from e
        raise


def _disk_full(folder: str, e: OSError | RuntimeError) -> bool:
    """Whether a write into ``folder`` failed for want of room: ENOSPC said, or (torch's writer says no errno) next
    to nothing left free."""
    import errno

    if getattr(e, "errno", None) == errno.ENOSPC:
        return True
    try:
        return free_bytes(folder) < FULL_DISK
    except OSError:  # the folder itself gone: not a question of room, and the run's own error says what happened
        return False


def load_state(resume_dir: str):
    with open(os.path.join(resume_dir, "state.json")) as f:
        state = json.load(f)
    blobs = torch.load(os.path.join(resume_dir, "train_state.pt"), map_location="cpu", weights_only=True)
    return state, blobs


def load_history(resume_dir: str) -> list[dict]:
    """The metrics of every epoch a checkpoint has trained (its ``state.json``), none where it has no state."""
    path = os.path.join(resume_dir, "state.json")
    if not os.path.isfile(path):
        return []
    with open(path) as f:
        return json.load(f).get("history", [])


def resume_student(resume_dir: str | None) -> str | None:
    """The student a resumed run continues: the latest one, or in a finished run's checkpoint (``finish``) the best
    one, all it keeps (such a run trains no further: it reports its last epoch again)."""
    if not resume_dir:
        return None
    latest = os.path.join(resume_dir, "student")
    return latest if os.path.isdir(latest) else os.path.join(resume_dir, BEST)


BEST = "best_student"
TRAINING_ONLY = ("optimizer", "scheduler")  # what only a run that trains on needs


def finish(path: str) -> int:
    """Shrink the checkpoint folder ``path`` of a run that has ended (its student exported and logged) to what a run
    resumed after its end still reads: the best student, the history and the objective's state. The AdamW state (two
    copies of the weights) and the latest student go: nothing trains from them again. Each file is replaced by a
    rename, so a crash leaves the old file or the new one. Returns the bytes freed."""
    before = disk_bytes(path)
    state = os.path.join(path, "train_state.pt")
    if os.path.isfile(state):
        blobs = torch.load(state, map_location="cpu", weights_only=True)
        if any(k in blobs for k in TRAINING_ONLY):
            torch.save({k: v for k, v in blobs.items() if k not in TRAINING_ONLY}, state + ".tmp")
            os.replace(state + ".tmp", state)
    latest = os.path.join(path, "student")
    if os.path.isdir(latest) and os.path.isdir(os.path.join(path, BEST)):
        shutil.rmtree(latest)
    return before - disk_bytes(path)


def disk_bytes(root: str) -> int:
    """Bytes the files under ``root`` take on disk, a hard-linked file counted once (as ``du`` counts it)."""
    seen, total = set(), 0
    for d, _, names in os.walk(root):
        for n in names:
            st = os.lstat(os.path.join(d, n))
            if (st.st_dev, st.st_ino) not in seen:
                seen.add((st.st_dev, st.st_ino))
                total += st.st_blocks * 512
    return total
