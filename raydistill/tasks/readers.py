"""Reading the user's files with every value as text: CSV and TSV (the csv module; TSV with ``csv.QUOTE_NONE``, as
GLUE's text has stray quotes; a CSV's delimiter given, else sniffed among ``, ; tab |`` from its first lines), JSON,
JSON Lines and Parquet (json and pyarrow directly, where pandas and ``datasets`` would turn "NA" or "null" into missing
and "True" into a boolean); the columns checked before any row is read.

A file is read once per process, streaming (issue 48): the column names come from its first 64 KiB (``_head``), and
``read_files`` reads the rows of every file of a task in one pass each, CSV and TSV row by row, JSON Lines line by
line, Parquet a batch of rows at a time, hashing the bytes as they stream by (the same fingerprint ``fingerprint``
gives), and keeps the result for the process while the files' sizes and times stay the same. Only a ``.json`` document
(an array) is parsed whole: json has no streaming parser."""

from __future__ import annotations

import array
import csv
import datetime
import decimal
import functools
import hashlib
import io
import json
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from raydistill.common.errors import UserError

FORMATS = {".csv": "csv", ".tsv": "tsv", ".json": "json", ".jsonl": "jsonl", ".parquet": "parquet"}
FIX_FORMAT = "give a .csv, .tsv, .json, .jsonl or .parquet file"
DELIMITERS = {",": "comma", ";": "semicolon", "\t": "tab", "|": "pipe"}  # sniffed in this order; named in messages
SNIFF_ROWS = 20  # the first rows that must all split into the header's number of fields
SNIFF_CHARS = 1 << 16
BLOCK = 1 << 20  # bytes read (and hashed) at a time
PARQUET_BATCH = 8192  # rows converted to Python values at a time
SHARED_MAX = 4096  # distinct values of a shared column (a label) held once each


def as_text(v) -> str | None:
    """A JSON or Parquet value as the text a CSV would hold (None stays missing): Parquet's decimals, dates and
    times as they print, its binary values decoded as UTF-8."""
    if v is None or isinstance(v, str):
        return v
    if isinstance(v, float):
        return repr(v)
    if isinstance(v, (bytes, bytearray)):
        return bytes(v).decode("utf-8", errors="replace")
    if isinstance(v, (decimal.Decimal, datetime.date, datetime.time, datetime.timedelta)):
        return v.isoformat() if isinstance(v, (datetime.date, datetime.time)) else str(v)
    if isinstance(v, int) and not isinstance(v, bool):
        return str(v)
    return json.dumps(v, ensure_ascii=False, default=str)


def file_format(path: str, field: str) -> str:
    fmt = FORMATS.get(os.path.splitext(path)[1].lower())
    if fmt is None:
        raise UserError(field, f"{path}: unknown file type; {FIX_FORMAT}")
    if not os.path.isfile(path):
        raise UserError(field, f"{path} does not exist; {FIX_FORMAT}")
    return fmt


def stamp(path: str, field: str = "data.train_file") -> tuple[int, int]:
    """A file's modification time and size: what changes when its bytes do (every memo here is keyed by it)."""
    try:
        st = os.stat(path)
    except OSError as e:
        raise UserError(field, f"{path}: {e.strerror}; the run's files must be readable here") from None
    return st.st_mtime_ns, st.st_size


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
    return _sniffed(path, stamp(path))


@functools.lru_cache(maxsize=32)
def _head(path: str, st: tuple[int, int]) -> str:  # st: read again only if the file changed
    """The file's first ``SNIFF_CHARS`` characters (a BOM left out): where its delimiter and columns are read."""
    with open(path, encoding="utf-8-sig", newline="") as f:
        return f.read(SNIFF_CHARS)


def _whole(head: str) -> bool:
    """Whether ``_head`` holds the whole file."""
    return len(head) < SNIFF_CHARS


@functools.lru_cache(maxsize=32)
def _sniffed(path: str, st: tuple[int, int]) -> str:
    """The first of ``, ; tab |`` that splits the header into 2+ fields and each of the first rows into as many (a
    comma file stays a comma file whatever its text holds); else ``csv.Sniffer``'s guess among them; else a comma."""
    sample = _head(path, st)
    for d in DELIMITERS:
        rows = [r for r in csv.reader(io.StringIO(sample), delimiter=d) if r]
        rows = rows[:-1] if not _whole(sample) and len(rows) > 1 else rows  # the last may be cut short
        if rows and len(rows[0]) > 1 and all(len(r) == len(rows[0]) for r in rows[:SNIFF_ROWS]):
            return d
    try:
        return csv.Sniffer().sniff(sample, delimiters="".join(DELIMITERS)).delimiter
    except csv.Error:
        return ","


def _csv_reader(f, fmt: str, delimiter: str):
    csv.field_size_limit(2**31 - 1)
    if fmt == "tsv":
        return csv.reader(f, delimiter=delimiter, quoting=csv.QUOTE_NONE)
    return csv.reader(f, delimiter=delimiter)


def _csv_rows(f, fmt: str, delimiter: str) -> Iterator[tuple[int, list[str]]]:
    """``(line, fields)`` of a CSV or TSV text stream's rows, blank lines skipped."""
    reader = _csv_reader(f, fmt, delimiter)
    for row in reader:
        if row:
            yield reader.line_num, row


def _jsonl_records(path: str, lines) -> Iterator[tuple[int, object]]:
    """``(line, value)`` of each non-blank line of a JSON Lines text stream."""
    for n, line in enumerate(lines, 1):
        if line.strip():
            try:
                yield n, json.loads(line)
            except json.JSONDecodeError as e:
                raise UserError("", f"{path} line {n} is not JSON: {e.msg}") from None


def _json_records(path: str, text: str) -> Iterator[tuple[int, object]]:
    """The records of a ``.json`` file's whole text: an array (or ``{"data": [...]}``), else JSON Lines."""
    if text.lstrip()[:1] in ("[", "{"):
        try:
            data = json.loads(text)
        except json.JSONDecodeError as e:
            if text.lstrip()[:1] == "[":
                raise UserError("", f"{path} line {e.lineno} is not JSON: {e.msg}") from None
            data = None  # JSON Lines in a .json file, as datasets reads them
        if isinstance(data, dict) and len(data) == 1 and isinstance(next(iter(data.values())), list):
            data = next(iter(data.values()))  # {"data": [...]}
        elif isinstance(data, dict):
            under = [k for k, v in data.items() if isinstance(v, list) and v and isinstance(v[0], dict)]
            if under:  # rows beside other keys ({"version": 1, "data": [...]}); a lone object is a row of JSON Lines
                raise UserError(
                    "",
                    f"{path}: its rows are under {under[0]!r} beside other keys ({', '.join(map(str, data))}); give "
                    f'the rows alone: an array, {{"{under[0]}": [...]}} or JSON Lines',
                )
        if isinstance(data, list):
            yield from ((i, r) for i, r in enumerate(data, 1))
            return
    yield from _jsonl_records(path, io.StringIO(text))


def _unparsed(path: str, e: Exception) -> str:
    if isinstance(e, UnicodeDecodeError):
        return f"{path} is not UTF-8 text ({e.reason}); save it as UTF-8 (e.g. iconv -f latin1 -t utf-8 FILE)"
    return f"{path} does not parse: {e}"


def _parquet_error(path: str, e: Exception) -> UserError:
    return UserError("", f"{path} is not a Parquet file pyarrow can read: {str(e).splitlines()[0][:200]}")


def _first_record(path: str, fmt: str, head: str):
    """The first record of a JSON or JSON Lines file: from its head where the head holds its first line whole."""
    stripped = head.lstrip()
    if fmt == "jsonl" and (_whole(head) or "\n" in stripped or "\r" in stripped):  # its first line whole
        return next(_jsonl_records(path, io.StringIO(head, newline=None)), (0, {}))[1]
    if fmt == "jsonl":
        with open(path, encoding="utf-8-sig") as f:  # a first line longer than the head
            return next(_jsonl_records(path, f), (0, {}))[1]
    with open(path, encoding="utf-8-sig") as f:  # a .json document: parsed whole
        return next(_json_records(path, f.read()), (0, {}))[1]


def _header(path: str, fmt: str, delimiter: str, head: str) -> list[str]:
    """A CSV's or TSV's header: from its head where a whole row follows it (or the head is the whole file)."""
    rows = list(_csv_rows(io.StringIO(head), fmt, delimiter))
    if rows and (len(rows) > 1 or _whole(head)):
        return rows[0][1]
    with open(path, encoding="utf-8-sig", newline="") as f:  # a header longer than the head
        return next(_csv_rows(f, fmt, delimiter), (0, []))[1]


def columns_of(path: str, field: str, delimiter: str = "") -> list[str]:
    """The file's column names, read before any row (a header, the first record's keys, the Parquet schema) from its
    first bytes; ``delimiter``: a CSV's or TSV's, "" for its own (``delimiter_of``)."""
    fmt = file_format(path, field)
    try:
        if fmt == "parquet":
            import pyarrow.parquet as pq

            try:
                return pq.read_schema(path).names
            except Exception as e:  # pyarrow's errors have no common base worth naming
                raise _parquet_error(path, e) from None
        head = _head(path, stamp(path, field))
        if not head.strip():  # no header to guess columns from, no rows to train on
            raise UserError(field, f"{path} is empty; give a file of rows (a CSV or TSV with its header line first)")
        if fmt in ("csv", "tsv"):
            return _header(path, fmt, delimiter_of(path, fmt, delimiter), head)
        first = _first_record(path, fmt, head)
    except UserError as e:
        raise UserError(field, e.message) from None
    except (csv.Error, UnicodeDecodeError) as e:
        raise UserError(field, _unparsed(path, e)) from None
    if not isinstance(first, dict):
        raise UserError(field, f"{path}: the first record is not an object with named fields")
    return list(first)


# --------------------------------------------------------------------------- every row, in one pass


class _Hashing(io.RawIOBase):
    """A binary file whose bytes go into a hash as they are read: the fingerprint in the same pass as the rows."""

    def __init__(self, raw, h) -> None:
        super().__init__()
        self._raw, self._h = raw, h

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:
        n = self._raw.readinto(b)
        if n:
            self._h.update(memoryview(b)[:n])
        return n

    def drain(self) -> None:
        """The bytes no parser asked for (it stopped at an error; Parquet's): hashed too, so the fingerprint always
        covers the whole file."""
        for block in iter(lambda: self._raw.read(BLOCK), b""):
            self._h.update(block)


class Table(Sequence):
    """A file's rows held by column, as the process keeps them (issue 48: a tuple and a list per row cost ~130 B beside
    its values, 56 MB of 400k rows): the line or record numbers in one array, each wanted column's values in one
    list. Row ``i`` reads as ``(number, [values])``, the pair ``read_columns`` always gave."""

    def __init__(self, width: int) -> None:
        self.numbers = array.array("q")
        self.columns: list[list] = [[] for _ in range(width)]

    def append(self, n: int, values: list) -> None:
        self.numbers.append(n)
        for col, v in zip(self.columns, values, strict=True):
            col.append(v)

    def __len__(self) -> int:
        return len(self.numbers)

    def __getitem__(self, i):  # an int: that row; a slice: a list of rows, as a list gives
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        return self.numbers[i], [col[i] for col in self.columns]

    def __iter__(self) -> Iterator[tuple[int, list]]:
        for n, *values in zip(self.numbers, *self.columns, strict=True):
            yield n, values

    def __eq__(self, other) -> bool:  # equal to any sequence of the same rows (the list this once was)
        if not isinstance(other, Sequence) or isinstance(other, str | bytes):
            return NotImplemented
        return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))

    __hash__ = None  # type: ignore[assignment]  # grows while read, compared by value


@dataclass(frozen=True)
class Rows:
    """One file's rows as ``read_columns`` gives them, or the error that stopped its reading (raised when they are
    asked for, as a file read on its own would)."""

    rows: Table
    error: UserError | None = None

    def get(self) -> Table:
        if self.error is not None:
            raise self.error
        return self.rows


def read_files(sources, wanted, lists=(), delimiter: str = "", shared=()) -> tuple[tuple[Rows, ...], str]:
    """Every row of each ``(path, field)`` in ``sources`` (``read_columns``'s values) and the fingerprint of all of
    them (``fingerprint``), each file read once, streaming; kept for the process until a file's size or time
    changes. ``shared``: columns of few distinct values (a label), held as one string per value, not one per row."""
    stamps = tuple(stamp(p, f) for p, f in sources)
    return _read_files(tuple(sources), (tuple(wanted), frozenset(lists), tuple(shared)), delimiter, stamps)


@functools.lru_cache(maxsize=2)  # the rows of a task's files: one task at a time, the last two kept
def _read_files(sources, columns, delimiter, stamps) -> tuple[tuple[Rows, ...], str]:
    h = hashlib.sha256()
    out = []
    for path, field in sources:
        out.append(_read_one(path, field, columns, delimiter, h))
        h.update(b"\0")
    return tuple(out), h.hexdigest()[:16]


def _read_one(path: str, field: str, columns, delimiter: str, h) -> Rows:
    """One file's rows, its bytes hashed into ``h`` as they are read; ``columns``: wanted, lists, shared."""
    fmt = file_format(path, field)
    wanted, lists, shared = columns
    share = [i for i, c in enumerate(wanted) if c in shared and c not in lists]
    seen: dict = {}
    rows = Table(len(wanted))
    with open(path, "rb", buffering=0) as raw:
        tee = _Hashing(raw, h)
        try:
            for n, vals in _parsed(raw, tee, path, fmt, field, wanted, lists, delimiter):
                for i in share:  # the first SHARED_MAX values kept (a label has few; a score column, many)
                    v = vals[i]
                    vals[i] = seen.get(v) or (seen.setdefault(v, v) if len(seen) < SHARED_MAX else v)
                rows.append(n, vals)
            error = None
        except UserError as e:
            error = UserError(e.field or field, e.message)
        except (csv.Error, UnicodeDecodeError) as e:
            error = UserError(field, _unparsed(path, e))
        tee.drain()
    return Rows(rows, error)


def _parsed(raw, tee, path, fmt, field, wanted, lists, delimiter) -> Iterator[tuple[int, list]]:
    """``(line or record number, values)`` of a file being read through ``tee``."""
    if fmt == "parquet":
        tee.drain()  # Parquet is read from its end (the footer): its bytes hashed in order first
        raw.seek(0)
        yield from _parquet_rows(raw, path, wanted, lists)
        return
    text = io.TextIOWrapper(io.BufferedReader(tee, BLOCK), "utf-8-sig", newline="" if fmt in ("csv", "tsv") else None)
    if fmt in ("csv", "tsv"):
        yield from _csv_columns(text, path, fmt, field, wanted, delimiter_of(path, fmt, delimiter))
        return
    records = _jsonl_records(path, text) if fmt == "jsonl" else _json_records(path, text.read())
    yield from ((n, _record(path, field, n, r, wanted, lists)) for n, r in records)


def _parquet_rows(f, path: str, wanted, lists) -> Iterator[tuple[int, list]]:
    n = 0
    for batch in _parquet_batches(f, path, wanted):
        for r in batch:
            n += 1
            yield n, _record(path, "", n, r, wanted, lists)


def _parquet_batches(f, path: str, wanted) -> Iterator[list[dict]]:
    """The file's rows of the wanted columns, a batch at a time as Python values; what pyarrow cannot read said."""
    import pyarrow.parquet as pq

    try:
        batches = pq.ParquetFile(f).iter_batches(batch_size=PARQUET_BATCH, columns=list(wanted))
        while True:
            batch = next(batches, None)
            if batch is None:
                return
            yield batch.to_pylist()
    except Exception as e:  # pyarrow's errors have no common base worth naming
        raise _parquet_error(path, e) from None


def read_columns(path: str, field: str, wanted: list[str], lists=(), delimiter: str = "") -> Table:
    """``(line or record number, values of the wanted columns as text)`` for every row; a value absent is None; the
    columns in ``lists`` (tokens, tags) as they are, a list where the file holds one."""
    return read_files(((path, field),), wanted, lists, delimiter)[0][0].get()


def _record(path, field, n, r, wanted, lists=()) -> list:
    if not isinstance(r, dict):
        raise UserError(field, f"{path} line {n} is not an object with named fields")
    return [r.get(c) if c in lists else as_text(r.get(c)) for c in wanted]


def _csv_columns(f, path, fmt, field, wanted, delimiter) -> Iterator[tuple[int, list]]:
    rows = _csv_rows(f, fmt, delimiter)
    _, header = next(rows, (0, []))
    missing = [c for c in wanted if c not in header]
    if missing:  # checked before any row is read; here the file changed since
        raise UserError(field, f"{path} has no column {missing[0]!r}; its columns: {', '.join(header)[:200]}")
    idx = [header.index(c) for c in wanted]
    for n, row in rows:
        if len(row) != len(header):
            raise UserError(
                field,
                f"{path} line {n}: expected {len(header)} {delimiter_name(delimiter)}-separated fields, got "
                f"{len(row)} (--delimiter chooses)",
            )
        yield n, [row[i] for i in idx]


def fingerprint(paths) -> str:
    """The hash of the files' bytes, each followed by a zero byte (``read_files`` gives the same while it reads)."""
    h = hashlib.sha256()
    for p in paths:
        with open(p, "rb") as f:
            for block in iter(lambda: f.read(BLOCK), b""):
                h.update(block)
        h.update(b"\0")
    return h.hexdigest()[:16]
