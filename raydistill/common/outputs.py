"""Result folders the user names (``distill --output``, ``finetune --output``, ``best --export``, ``augment
--output``): a command writes into them and never deletes what it did not write.

Each result folder carries ``MARKER``, the list of files the command wrote. A folder that is empty or carries the
marker takes a new result without a flag; one holding anything else is refused before any work unless the user
passes ``--overwrite``, and then only same-named files are replaced. A new result is staged in a hidden sibling
folder and moved in file by file with SIGINT/SIGTERM held back, rolled back on any error, so the folder holds either
the old result or the new one whole. docs/RELIABILITY.md states the rule.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import tempfile
import threading

from raydistill.common.errors import UserError
from raydistill.common.paths import write_json_atomic

MARKER = ".raydistill-written.json"


def check_output(path: str, flag: str, overwrite: bool = False) -> None:
    """Refuse, before any work, a result folder that holds files raydistill did not write (unless ``overwrite``)."""
    if not path or "://" in path:
        return
    p = os.path.abspath(os.path.expanduser(path))
    if not os.path.isdir(p) or overwrite:
        return
    entries = os.listdir(p)
    if entries and MARKER not in entries:
        raise UserError(
            flag,
            f"{p} holds files raydistill did not write; choose an empty folder or pass --overwrite "
            f"(files it did not write stay, same-named ones are replaced)",
        )


def written(folder: str) -> list[str]:
    """The files (relative paths) the marker of ``folder`` says raydistill wrote there; [] without one."""
    try:
        with open(os.path.join(folder, MARKER), encoding="utf-8") as f:
            return [str(x) for x in json.load(f)["files"]]
    except (OSError, ValueError, KeyError, TypeError):
        return []


def staging(dest: str, what: str = "new") -> str:
    """A new hidden folder beside ``dest`` (same file system, so moving a file in is a rename) to build a result in
    (``what="old"``: to set the old result aside while the new one moves in)."""
    dest = os.path.abspath(dest)
    parent = os.path.dirname(dest)
    os.makedirs(parent, exist_ok=True)
    return tempfile.mkdtemp(prefix=f".{os.path.basename(dest)}.{what}-", dir=parent)


def _files(root: str) -> list[str]:
    out = []
    for d, _, names in os.walk(root):
        out += [os.path.relpath(os.path.join(d, n), root) for n in names]
    return sorted(f for f in out if f != MARKER)


@contextlib.contextmanager
def signals_held():
    """SIGINT and SIGTERM wait until the block ends (then the first arrives as usual): a move of a few renames is not
    cut in half by a Ctrl-C. Python's handlers are swapped, not the thread's signal mask: a process-wide signal goes
    to any thread that does not block it (Ray's, MLflow's), and Python runs its handler in the main thread anyway."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    got: list[int] = []
    old = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    for s, h in old.items():
        if h not in (signal.SIG_IGN, None):
            signal.signal(s, lambda n, f: got.append(n))
    try:
        yield
    finally:
        for s, h in old.items():
            if h is not None:
                signal.signal(s, h)
        if got:
            signal.raise_signal(got[0])


def _write_marker(folder: str, files: list[str], command: str) -> None:
    write_json_atomic(os.path.join(folder, MARKER), {"written_by": command, "files": sorted(set(files))}, indent=1)


def _move(src_root: str, dst_root: str, rel: str) -> None:
    dst = os.path.join(dst_root, rel)
    os.makedirs(os.path.dirname(dst), exist_ok=True)
    os.replace(os.path.join(src_root, rel), dst)


def _prune_empty_dirs(root: str, rels) -> None:
    """Remove the folders ``rels`` lived in once they are empty (never ``root`` itself)."""
    for rel in sorted({os.path.dirname(r) for r in rels if os.path.dirname(r)}, key=len, reverse=True):
        with contextlib.suppress(OSError):
            os.removedirs(os.path.join(root, rel))  # climbs until a folder is not empty: root, which keeps the marker


def publish(src: str, dest: str, command: str, keep: tuple[str, ...] = ()) -> str:
    """Make the folder ``src`` (the command's own: a ``staging`` folder, or one inside its working folders) the
    result in ``dest``: the files the old marker lists and same-named files are replaced, other files stay. ``keep``:
    files already in ``dest`` that this command wrote in place (a cache) and the marker lists too."""
    dest = os.path.abspath(dest)
    if os.stat(src).st_dev != os.stat(staging_parent(dest)).st_dev:
        moved = staging(dest)  # another file system: copy beside dest first, so what follows are renames
        shutil.copytree(src, moved, dirs_exist_ok=True)  # into the empty folder staging just made
        shutil.rmtree(src, ignore_errors=True)
        src = moved
    new = _files(src)
    files = sorted(set(new) | {k for k in keep if os.path.isfile(os.path.join(dest, k))})
    if not os.path.exists(dest):
        _write_marker(src, files, command)
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        os.replace(src, dest)  # one rename: the whole result or none
        return dest
    old = [f for f in written(dest) if f not in keep and os.path.isfile(os.path.join(dest, f))]
    clash = [f for f in new if f not in old and os.path.lexists(os.path.join(dest, f))]
    backup = staging(dest, "old")
    done_old, done_new = [], []
    with signals_held():
        try:
            for f in old + clash:  # set aside, to put back if anything below fails
                _move(dest, backup, f)
                done_old.append(f)
            for f in new:
                _move(src, dest, f)
                done_new.append(f)
            _write_marker(dest, files, command)
        except BaseException:
            for f in done_new:
                with contextlib.suppress(OSError):
                    os.remove(os.path.join(dest, f))
            restored = 0
            for f in done_old:
                with contextlib.suppress(OSError):
                    _move(backup, dest, f)
                    restored += 1
            if restored == len(done_old):  # else the backup keeps what could not go back
                shutil.rmtree(backup, ignore_errors=True)
            raise
        finally:
            shutil.rmtree(src, ignore_errors=True)
    shutil.rmtree(backup, ignore_errors=True)
    _prune_empty_dirs(dest, [f for f in old if f not in new])
    return dest


@contextlib.contextmanager
def adding_to(folder: str, command: str):
    """Files a command writes straight into its result ``folder`` after ``publish`` (model.onnx) join its marker."""
    before = set(_files(folder))
    try:
        yield
    finally:
        _write_marker(folder, written(folder) + [f for f in _files(folder) if f not in before], command)


def staging_parent(dest: str) -> str:
    """The nearest existing ancestor of ``dest`` (to compare file systems before the folder exists)."""
    q = os.path.dirname(os.path.abspath(dest))
    while not os.path.exists(q):
        q = os.path.dirname(q)
    return q


def remove_if_ours(folder: str, names: set[str]) -> None:
    """Remove the working folder ``folder`` the product made, only when everything in it has one of ``names``
    (a user's folder that happens to share the name is left alone)."""
    if os.path.isdir(folder) and set(os.listdir(folder)) <= names:
        shutil.rmtree(folder, ignore_errors=True)
