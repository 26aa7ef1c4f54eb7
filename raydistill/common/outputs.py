"""Result folders the user names (``distill --output``, ``finetune --output``, ``best --export``, ``augment
--output``, ``data split --output``): a command writes into them and never deletes what it did not write, and never
writes into what it reads.

Each result folder carries ``MARKER``: the command that wrote it, the kind of result (``KINDS``) and the files it
wrote. A folder that is empty or carries the command's own marker (a re-run) takes a new result without a flag; one
holding anything else — the user's files, or another command's result — is refused before any work unless the user
passes ``--overwrite``, and then only the old result's files and same-named ones are replaced. A marker written
before kinds were recorded has the kind of the command it names. No ``--overwrite`` lets a command write into a
folder it reads (``check_not_read``). A new result is staged in a hidden sibling folder and moved in file by file
with SIGINT/SIGTERM held back, rolled back on any error, so the folder holds either the old result or the new one
whole. docs/RELIABILITY.md states the rule.
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
from raydistill.common.modes import as_umask
from raydistill.common.paths import write_json_atomic

MARKER = ".raydistill-written.json"
# the kind of result each command writes, recorded in its marker: a command replaces only its own (a re-run)
KINDS = {
    "raydistill finetune": "teacher",
    "raydistill distill": "student",
    "raydistill best --export": "exported student",
    "raydistill data split": "data split",
    "raydistill augment": "augmented training set",
}
# the flags naming what a command reads: folders read whole, and files (the user's other files sit beside them)
READ_FOLDERS = ("teacher", "model", "mlm", "data_dir", "augment_dir", "dataset")
READ_FILES = ("train_file", "eval_file", "test_file", "unlabeled_text")


def kind_of(command: str) -> str:
    return KINDS.get(command, "result")


def owner(folder: str) -> tuple[str, str] | None:
    """(command, kind) of the result in ``folder`` as its marker records them (an older marker: the kind of the
    command it names); None without a readable marker."""
    try:
        with open(os.path.join(folder, MARKER), encoding="utf-8") as f:
            mark = json.load(f)
        by = str(mark.get("written_by") or "")
        return by, str(mark.get("kind") or (kind_of(by) if by else ""))
    except (OSError, ValueError, AttributeError):
        return None


def check_output(path: str, flag: str, overwrite: bool = False, command: str = "") -> None:
    """Refuse, before any work, a result folder that holds files raydistill did not write or another command's
    result (unless ``overwrite``): ``command`` (``KINDS``' keys) may replace only a result of its own."""
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
    mark = owner(p) if entries else None
    if entries and command and mark != (command, kind_of(command)):
        by, kind = mark or ("", "")
        what = f"a {kind} written by {by}" if by else "a result of unknown origin"
        raise UserError(
            flag,
            f"{p} holds {what}, which {command} does not replace; choose another folder or pass --overwrite "
            f"(its files are replaced, files it did not write stay)",
        )


def check_in_place(folder: str, names: list[str], flag: str, overwrite: bool = False) -> None:
    """Files a command writes straight into its result ``folder`` (``adding_to``: model.onnx) are refused, before any
    work, where a file of that name is there that raydistill did not write (unless ``overwrite``)."""
    if overwrite or not folder or not os.path.isdir(folder):
        return
    ours = set(written(folder))
    theirs = [n for n in names if os.path.lexists(os.path.join(folder, n)) and n not in ours]
    if theirs:
        raise UserError(
            flag,
            f"{os.path.abspath(folder)} holds {', '.join(theirs)}, which raydistill did not write and would write "
            "over; move it away or pass --overwrite",
        )


def check_not_read(out: str, flag: str, args: object) -> None:
    """No command writes into what it reads: the ``flag`` folder ``out`` may not be, lie inside or contain a folder
    ``args`` names to read (``READ_FOLDERS``, ``--init checkpoint:DIR``), nor contain a file it reads
    (``READ_FILES``: a folder inside a file's folder never touches the file, and the working directory is often that
    folder). Paths are compared after ``realpath`` (links, ``..``); a name that is no local path (a hub name) is not
    a folder. Refused before any work, ``--overwrite`` or not: one line naming both flags."""
    if not out or "://" in out:
        return
    o = os.path.realpath(os.path.expanduser(out))
    for name, path in _reads(args):
        r = os.path.realpath(os.path.expanduser(path))
        if not os.path.exists(r):
            continue
        holds, inside = lies_under(r, o), lies_under(o, r) and os.path.isdir(r)
        if holds or inside:
            read = f"--{name.replace('_', '-')} reads"
            how = f"is the folder {read}" if o == r else f"{'holds' if holds else 'lies inside'} {r}, which {read}"
            raise UserError(
                flag, f"{o} {how}; write to another folder (no command writes into what it reads, --overwrite or not)"
            )


def _reads(args: object) -> list[tuple[str, str]]:
    """(flag, path) of every local thing the flags in ``args`` say a command reads."""
    data = getattr(args, "data", None)  # a request's data (a FileData), where flags have its fields as their own
    out = [(n, getattr(args, n, None) or getattr(data, n, None)) for n in READ_FOLDERS + READ_FILES]
    init = getattr(args, "init", None)
    if isinstance(init, str) and init.startswith("checkpoint:"):
        out.append(("init", init[len("checkpoint:") :]))
    return [(n, p) for n, p in out if isinstance(p, str) and p and "://" not in p]


def lies_under(path: str, folder: str) -> bool:
    """``path`` is ``folder`` or lies inside it (both real paths)."""
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


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
    if os.path.isdir(dest) and _device(dest) != _device(parent):  # a mount point, a link to another disk: inside it
        parent = dest
    return tempfile.mkdtemp(prefix=f".{os.path.basename(dest)}.{what}-", dir=parent)


def _device(path: str) -> int:
    return os.stat(path).st_dev


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


def _write_marker(folder: str, files: list[str], command: str, kind: str = "") -> None:
    mark = {"written_by": command, "kind": kind or kind_of(command), "files": sorted(set(files))}
    write_json_atomic(os.path.join(folder, MARKER), mark, indent=1)


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
    given, copied = src, False
    if _device(src) != _device(dest if os.path.isdir(dest) else staging_parent(dest)):
        src = staging(dest)  # another file system: copied to dest's first, so what follows are renames
        shutil.copytree(given, src, dirs_exist_ok=True)  # into the empty folder staging just made
        copied = True
    as_umask(src)  # the user's umask, not the owner-only modes of mkdtemp and safetensors (common/modes.py)
    new = _files(src)
    files = sorted(set(new) | {k for k in keep if os.path.isfile(os.path.join(dest, k))})
    if not os.path.exists(dest):
        _write_marker(src, files, command)
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        os.replace(src, dest)  # one rename: the whole result or none
        if copied:
            shutil.rmtree(given, ignore_errors=True)
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
            for f in done_new:  # back where they came from: a caller's folder (a checkpoint's student) stays whole
                with contextlib.suppress(OSError):
                    _move(dest, src, f)
            restored = 0
            for f in done_old:
                with contextlib.suppress(OSError):
                    _move(backup, dest, f)
                    restored += 1
            if restored == len(done_old):  # else the backup keeps what could not go back
                shutil.rmtree(backup, ignore_errors=True)
            if copied or _staged_for(src, dest):  # a copy of ours; a caller's own folder stays for the next try
                shutil.rmtree(src, ignore_errors=True)
            raise
    shutil.rmtree(src, ignore_errors=True)  # emptied by the moves
    if copied:
        shutil.rmtree(given, ignore_errors=True)
    shutil.rmtree(backup, ignore_errors=True)
    _prune_empty_dirs(dest, [f for f in old if f not in new])
    return dest


def link(src: str, dst: str) -> None:
    """Hard-link rather than copy (saved files are never rewritten in place); copy across file systems."""
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


def _staged_for(src: str, dest: str) -> bool:
    """``src`` is a folder ``staging(dest)`` made: nothing but what is being published."""
    return os.path.basename(src).startswith(f".{os.path.basename(dest)}.new-")


@contextlib.contextmanager
def result_view(folder: str):
    """A temporary folder holding only the files ``folder``'s marker lists (hard links where it can): what a command
    logs of its result, never a file of the user's beside it. The folder itself without a marker."""
    files = written(folder)
    if not files:
        yield folder
        return
    view = staging(folder, "view")
    try:
        for rel in files:
            src, dst = os.path.join(folder, rel), os.path.join(view, rel)
            if os.path.isfile(src):
                os.makedirs(os.path.dirname(dst), exist_ok=True)
                link(src, dst)
        yield view
    finally:
        shutil.rmtree(view, ignore_errors=True)


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


def mark_working(folder: str, command: str, kind: str) -> None:
    """Make ``folder`` a working folder of the product's (``OUTPUT.resume``): created where missing, carrying a marker
    of ``kind`` that lists no files (the folder is the product's whole)."""
    os.makedirs(folder, exist_ok=True)
    _write_marker(folder, [], command, kind)


def is_working(folder: str, kind: str, names: set[str]) -> bool:
    """``folder`` is a working folder the product made: it carries a marker of ``kind`` and holds nothing but
    ``names`` (a user's file put in it keeps it from being removed)."""
    if not os.path.isdir(folder):
        return False
    entries = set(os.listdir(folder))
    return MARKER in entries and entries <= names | {MARKER} and (owner(folder) or ("", ""))[1] == kind


def refuse_foreign_working(folder: str, kind: str, command: str, keeps: str, ours: bool) -> None:
    """``OUTPUT.resume`` is the product's alone: a folder of that name it did not make (``ours`` false: no marker of
    ``kind``, or a file of the user's in it) is refused before any work, ``--overwrite`` or not."""
    if os.path.lexists(folder) and not ours:
        raise UserError(
            "output",
            f"{folder} exists and is not a {kind} raydistill made ({command} keeps {keeps} in OUTPUT.resume); move it "
            "away or choose another --output",
        )


def remove_if_ours(folder: str, kind: str, names: set[str]) -> None:
    """Remove the working folder ``folder`` only when the product made it (``is_working``): a user's folder that
    happens to share the name is left alone."""
    if is_working(folder, kind, names):
        shutil.rmtree(folder, ignore_errors=True)
