"""Reading the user's files with every value as text: CSV and TSV (the csv module; TSV with ``csv.QUOTE_NONE``, as
GLUE's text has stray quotes; a CSV's delimiter given, else sniffed among ``, ; tab |`` from its first lines), JSON,
JSON Lines and Parquet (json and pyarrow directly, where pandas and ``datasets`` would turn "NA" or "null" into missing
and "True" into a boolean); the columns checked before any row is read."""

from __future__ import annotations

import csv
import functools
import hashlib
import io
import json
import os
from collections.abc import Iterator

from raydistill.common.errors import UserError

FORMATS = {".csv": "csv", ".tsv": "tsv", ".json": "json", ".jsonl": "jsonl", ".parquet": "parquet"}
FIX_FORMAT = "give a .csv, .tsv, .json, .jsonl or .parquet file"
DELIMITERS = {",": "comma", ";": "semicolon", "\t": "tab", "|": "pipe"}  # sniffed in this order; named in messages
SNIFF_ROWS = 20  # the first rows that must all split into the header's number of fields
SNIFF_CHARS = 1 << 16


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


def delimiter_name(d: str) -> str:
    """How messages name a delimiter: ``semicolon``, or the character quoted."""
    return DELIMITERS.get(d, repr(d))


def delimiter_of(path: str, fmt: str, given: str = "") -> str:
    """The delimiter a CSV or TSV file is read with: the one given, a tab for TSV, else the CSV's sniffed one ("" for
    the other formats)."""
    if fmt not in ("csv", "tsv"):
        return ""
    if given or fmt == "tsv":
        return given or "\t"
    st = os.stat(path)
    return _sniffed(path, st.st_mtime_ns, st.st_size)


@functools.lru_cache(maxsize=32)
def _sniffed(path: str, mtime: int, size: int) -> str:  # mtime, size: sniffed again only if the file changed
    """The first of ``, ; tab |`` that splits the header into 2+ fields and each of the first rows into as many (a
    comma file stays a comma file whatever its text holds); else ``csv.Sniffer``'s guess among them; else a comma."""
    with open(path, encoding="utf-8-sig", newline="") as f:
        sample = f.read(SNIFF_CHARS)
    for d in DELIMITERS:
        rows = [r for r in csv.reader(io.StringIO(sample), delimiter=d) if r]
        rows = rows[:-1] if len(sample) == SNIFF_CHARS and len(rows) > 1 else rows  # the last may be cut short
        if rows and len(rows[0]) > 1 and all(len(r) == len(rows[0]) for r in rows[:SNIFF_ROWS]):
            return d
    try:
        return csv.Sniffer().sniff(sample, delimiters="".join(DELIMITERS)).delimiter
    except csv.Error:
        return ","


def _csv_rows(path: str, fmt: str, delimiter: str) -> Iterator[tuple[int, list[str]]]:
    csv.field_size_limit(2**31 - 1)
    with open(path, encoding="utf-8-sig", newline="") as f:
        if fmt == "tsv":
            reader = csv.reader(f, delimiter=delimiter, quoting=csv.QUOTE_NONE)
        else:
            reader = csv.reader(f, delimiter=delimiter)
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


def columns_of(path: str, field: str, delimiter: str = "") -> list[str]:
    """The file's column names, read before any row (a header, the first record's keys, the Parquet schema);
    ``delimiter``: a CSV's or TSV's, "" for its own (``delimiter_of``)."""
    fmt = file_format(path, field)
    try:
        if fmt in ("csv", "tsv"):
            return next(iter(_csv_rows(path, fmt, delimiter_of(path, fmt, delimiter))), (0, []))[1]
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


def read_columns(path: str, field: str, wanted: list[str], lists=(), delimiter: str = "") -> list[tuple[int, list]]:
    """``(line or record number, values of the wanted columns as text)`` for every row; a value absent is None; the
    columns in ``lists`` (tokens, tags) as they are, a list where the file holds one."""
    fmt = file_format(path, field)
    try:
        if fmt in ("csv", "tsv"):
            return _csv_columns(path, fmt, field, wanted, delimiter_of(path, fmt, delimiter))
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


def _csv_columns(path, fmt, field, wanted, delimiter) -> list[tuple[int, list[str | None]]]:
    rows = _csv_rows(path, fmt, delimiter)
    _, header = next(rows)
    idx = [header.index(c) for c in wanted]
    out: list[tuple[int, list[str | None]]] = []
    for n, row in rows:
        if len(row) != len(header):
            raise UserError(
                field,
                f"{path} line {n}: expected {len(header)} {delimiter_name(delimiter)}-separated fields, got "
                f"{len(row)} (--delimiter chooses)",
            )
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
