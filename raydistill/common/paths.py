"""Places a command writes to: a folder it creates or replaces, a SQLite MLflow database. Checked before any work."""

from __future__ import annotations

import json
import os
import re
import tempfile
from typing import Any

from raydistill.common.errors import check

RESULTS_DIR = "raydistill-results"  # the product's own folder, in the directory a command runs in
URI = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://")  # s3://bucket/x, gs://…, file:///…: Ray's storage reads these itself
# schemes a --storage-path names remote storage with: "s3:/bucket" (one slash) is a typo, not a local folder "s3:"
STORAGE_SCHEMES = ("s3", "gs", "gcs", "hdfs", "abfs", "abfss", "az", "file", "http", "https")


def results_path(*parts: str) -> str:
    """An absolute path under the results folder (``./raydistill-results`` of the directory the command runs in)."""
    return os.path.abspath(os.path.join(RESULTS_DIR, *parts))


def is_uri(value: str) -> bool:
    return bool(URI.match(value))


def storage_location(value: str | None, field: str = "storage_path") -> str:
    """Where Ray keeps a command's runs (``--storage-path``): a URI as given (``s3://bucket/runs``: made absolute it
    would become a local folder ``./s3:``), a local folder made absolute (Ray runs trials in another directory), and
    ``./raydistill-results/ray`` where none is given. A remote scheme without ``//`` is refused."""
    if not value:
        return results_path("ray")
    if is_uri(value):
        return value
    scheme, colon, _ = value.partition(":")
    check(
        not (colon and scheme.lower() in STORAGE_SCHEMES),
        field,
        f"{value!r} is neither a URI nor a local folder; write {scheme.lower()}://BUCKET/PATH, or a folder path",
    )
    return os.path.abspath(os.path.expanduser(value))


def write_json_atomic(path: str, obj: Any, unique: bool = False, newline: bool = False, **dump: Any) -> None:
    """``obj`` as JSON at ``path``, written beside it and renamed into place: a reader (or a process killed mid-write)
    sees the old file or the new one, never half of one. ``unique``: a temporary name of this process's own, for a file
    several processes write at once."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tmp = f"{path}.{os.getpid()}.tmp" if unique else f"{path}.tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(obj, f, **dump)
        f.write("\n" if newline else "")  # a committed file ends with one
        # on disk before the rename: after a power cut or a lost machine the name must not point at unwritten data
        # (these are resume records, written once an epoch or a trial, so the wait is not on any hot path)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def free_bytes(folder: str) -> int:
    """Bytes a write into ``folder`` can still take (what an unprivileged process may use)."""
    import shutil

    return shutil.disk_usage(folder).free


def unwritable(path: str) -> str | None:
    """Why the folder ``path`` cannot be created or written, or None when it can (a probe file is created and
    removed in its nearest existing ancestor: permission bits alone mislead when running as root)."""
    p = os.path.abspath(os.path.expanduser(path))
    if os.path.exists(p) and not os.path.isdir(p):
        return f"{p} is a file"
    if os.path.islink(p) and not os.path.exists(p):  # found only at the end, after the work, when moved into
        return f"{p} is a link to {os.readlink(p)}, which does not exist"
    q = p
    while not os.path.exists(q):
        q = os.path.dirname(q)
    if not os.path.isdir(q):
        return f"cannot create {p}: {q} is a file"
    try:
        tempfile.TemporaryFile(dir=q).close()
    except OSError as e:
        why = e.strerror or type(e).__name__
        return f"cannot write to {p} ({why})" if q == p else f"cannot create {p}: {q} is not writable ({why})"
    return None


def check_writable(path: str, field: str) -> None:
    """``path`` (a folder the command will create or replace) can be written. Remote URIs (s3://, gs://) are left
    to their own client."""
    if not path or is_uri(path):
        return
    why = unwritable(path)
    check(why is None, field, f"{why}; pass a directory you can write to (--{field.replace('_', '-')} DIR)")


def check_tracking_uri_path(uri: str | None) -> None:
    """A ``sqlite:///PATH`` tracking URI whose database cannot be created or written is refused up front."""
    if not uri or not uri.startswith("sqlite:///"):
        return
    path = os.path.abspath(uri[len("sqlite:///") :])
    fix = "pass --tracking-uri sqlite:////writable/path/mlflow.db"
    check(not os.path.isdir(path), "tracking_uri", f"{path} is a directory, not a database file; {fix}")
    if os.path.isfile(path):
        check(os.access(path, os.W_OK), "tracking_uri", f"{path} is read-only; {fix}")
        return
    why = unwritable(os.path.dirname(path))
    check(why is None, "tracking_uri", f"cannot create the MLflow database {path} ({why}); {fix}")
