"""Reading the user's files with every value as text: CSV and TSV (the csv module; TSV with ``csv.QUOTE_NONE``, as
GLUE's text has stray quotes), JSON, JSON Lines and Parquet (json and pyarrow directly, where pandas and ``datasets``
would turn "NA" or "null" into missing and "True" into a boolean); the columns checked before any row is read."""

from __future__ import annotations

import csv
import hashlib
import json
import os
from collections.abc import Iterator

from raydistill.common.errors import UserError

FORMATS = {".csv": "csv", ".tsv": "tsv", ".json": "json", ".jsonl": "jsonl", ".parquet": "parquet"}
FIX_FORMAT = "give a .csv, .tsv, .json, .jsonl or .parquet file"


def as_text(v) -> str | None:
    """A JSON or Parquet value as the text a CSV would hold (None stays missing)."""
    if v is None or isinstance(v, str):
        return v
    if isinstance(v, float):
        return repr(v)
    return json.dumps(v, ensure_ascii=False) if not isinstance(v, int) or isinstance(v, bool) else str(v)


def file_format(path: str, field: str) -> str:
    fmt = FORMATS.get(os.path.splitext(path)[1].lower())
    if fmt is None:
        raise UserError(field, f"{path}: unknown file type; {FIX_FORMAT}")
    if not os.path.isfile(path):
        raise UserError(field, f"{path} does not exist; {FIX_FORMAT}")
    return fmt


def _csv_rows(path: str, fmt: str) -> Iterator[tuple[int, list[str]]]:
    csv.field_size_limit(2**31 - 1)
    opts = {"delimiter": "\t", "quoting": csv.QUOTE_NONE} if fmt == "tsv" else {}
    with open(path, encoding="utf-8-sig", newline="") as f:
        reader = csv.reader(f, **opts)  # type: ignore[arg-type]
        for row in reader:
            if row:  # blank lines
                yield reader.line_num, row


def _json_records(path: str, fmt: str) -> Iterator[tuple[int, object]]:
    with open(path, encoding="utf-8-sig") as f:
        text = f.read()
    if fmt == "json" and text.lstrip()[:1] in ("[", "{"):
        try:
            data = json.loads(text)
        except json.JSONDecodeError as e:
            if text.lstrip()[:1] == "[":
                raise UserError("", f"{path} line {e.lineno} is not JSON: {e.msg}") from None
            data = None  # JSON Lines in a .json file, as datasets reads them
        if isinstance(data, dict) and len(data) == 1 and isinstance(next(iter(data.values())), list):
            data = next(iter(data.values()))  # {"data": [...]}
        if isinstance(data, list):
            yield from ((i, r) for i, r in enumerate(data, 1))
            return
    for n, line in enumerate(text.splitlines(), 1):
        if line.strip():
            try:
                yield n, json.loads(line)
            except json.JSONDecodeError as e:
                raise UserError("", f"{path} line {n} is not JSON: {e.msg}") from None


def _parquet(path: str, columns: list[str] | None):
    import pyarrow.parquet as pq

    try:
        if columns is None:
            return pq.read_schema(path).names
        return pq.read_table(path, columns=columns).to_pylist()
    except Exception as e:  # pyarrow's errors have no common base worth naming
        raise UserError("", f"{path} is not a Parquet file pyarrow can read: {str(e).splitlines()[0][:200]}") from None


def columns_of(path: str, field: str) -> list[str]:
    """The file's column names, read before any row (a header, the first record's keys, the Parquet schema)."""
    fmt = file_format(path, field)
    try:
        if fmt in ("csv", "tsv"):
            return next(iter(_csv_rows(path, fmt)), (0, []))[1]
        if fmt == "parquet":
            return _parquet(path, None)
        first = next(iter(_json_records(path, fmt)), (0, {}))[1]
    except UserError as e:
        raise UserError(field, e.message) from None
    except (csv.Error, UnicodeDecodeError) as e:
        raise UserError(field, f"{path} does not parse: {e}") from None
    if not isinstance(first, dict):
        raise UserError(field, f"{path}: the first record is not an object with named fields")
    return list(first)


def read_columns(path: str, field: str, wanted: list[str], lists=()) -> list[tuple[int, list]]:
    """``(line or record number, values of the wanted columns as text)`` for every row; a value absent is None; the
    columns in ``lists`` (tokens, tags) as they are, a list where the file holds one."""
    fmt = file_format(path, field)
    try:
        if fmt in ("csv", "tsv"):
            return _csv_columns(path, fmt, field, wanted)
        records = _parquet(path, wanted) if fmt == "parquet" else _json_records(path, fmt)
        return [(n, _record(path, field, n, r, wanted, lists)) for n, r in _numbered(records)]
    except UserError as e:
        raise UserError(e.field or field, e.message) from None
    except (csv.Error, UnicodeDecodeError) as e:
        raise UserError(field, f"{path} does not parse: {e}") from None


def _numbered(records) -> Iterator[tuple[int, object]]:
    if isinstance(records, list):  # Parquet: row numbers
        return ((i, r) for i, r in enumerate(records, 1))
    return records


def _record(path, field, n, r, wanted, lists=()) -> list:
    if not isinstance(r, dict):
        raise UserError(field, f"{path} line {n} is not an object with named fields")
    return [r.get(c) if c in lists else as_text(r.get(c)) for c in wanted]


def _csv_columns(path, fmt, field, wanted) -> list[tuple[int, list[str | None]]]:
    rows = _csv_rows(path, fmt)
    _, header = next(rows)
    idx = [header.index(c) for c in wanted]
    out: list[tuple[int, list[str | None]]] = []
    for n, row in rows:
        if len(row) != len(header):
            sep = "tab-separated" if fmt == "tsv" else "comma-separated"
            raise UserError(field, f"{path} line {n}: expected {len(header)} {sep} fields, got {len(row)}")
        out.append((n, [row[i] for i in idx]))
    return out


def fingerprint(paths) -> str:
    h = hashlib.sha256()
    for p in paths:
        with open(p, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
        h.update(b"\0")
    return h.hexdigest()[:16]
