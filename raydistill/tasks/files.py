"""The user's own data: CSV, TSV, JSON, JSON Lines or Parquet files with any columns (issue 37).

``FileData`` describes such a task as plain frozen data (files, columns, kind, labels, metric, a content
fingerprint); it is the ``data`` section of a ``RunConfig``, so it travels to Ray workers, checkpoints and MLflow
params like any other setting, and ``file_task`` turns it into the ``Task`` record every loader and metric reads.
``resolve`` completes what the user gave (absolute paths, guessed columns, kind, labels, metric) once, before Ray.

Every value is read as text with no NA guessing (the csv module, json and pyarrow directly: pandas and ``datasets``
turn "NA" or "null" into missing and "True" into a boolean); TSV is read with ``csv.QUOTE_NONE`` (GLUE text has
stray quotes).
"""

from __future__ import annotations

import csv
import functools
import hashlib
import json
import os
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass, replace

from raydistill.common.errors import UserError
from raydistill.tasks.base import Task

FORMATS = {".csv": "csv", ".tsv": "tsv", ".json": "json", ".jsonl": "jsonl", ".parquet": "parquet"}
KINDS = ("classification", "regression")
METRICS = {"classification": ("accuracy", "macro_f1", "f1", "mcc"), "regression": ("pearson", "spearman")}
DEFAULT_METRIC = {"classification": "accuracy", "regression": "pearson"}
# guessed columns, first match wins: a text column and the pair column that goes with it
TEXT_GUESS = (("text", "text_pair"), ("sentence1", "sentence2"), ("sentence", None), ("question", "sentence"))
LABEL_GUESS = ("label", "labels")
SPLIT_FILE = {"train": "train_file", "validation": "eval_file", "test": "test_file"}
FILES = tuple(SPLIT_FILE.values())
FIX_FORMAT = "give a .csv, .tsv, .json, .jsonl or .parquet file"


@dataclass(frozen=True)
class FileData:
    """A task on the user's files (the ``data`` section of a config; empty ``train_file``: a built-in task)."""

    train_file: str = ""  # absolute paths once resolved: Ray workers run elsewhere (files must reach every node)
    eval_file: str = ""  # the dev set that reports eval_*; "" = 10% of train held out as dev
    test_file: str = ""
    text_column: str = ""
    text_pair_column: str = ""
    label_column: str = ""
    kind: str = ""  # classification | regression; "" = from the label column
    metric: str = ""  # the main metric, among METRICS[kind]; "" = DEFAULT_METRIC[kind]
    labels: tuple[str, ...] = ()  # class names in index order; () = the training file's, sorted
    phrase_rows: bool = False  # training rows are phrases of whole sentences (SST-2): carve validation by sentence
    fingerprint: str = ""  # hash of the files' bytes; set once resolved

    def path(self, split: str) -> str:
        return getattr(self, SPLIT_FILE[split])

    def splits(self) -> tuple[str, ...]:
        """The splits that have a file."""
        return tuple(s for s in SPLIT_FILE if self.path(s))


def section_of(flags) -> dict:
    """A config's ``data`` section from a command's flags (``commands/args.add_data_args``); {} without
    ``--train-file``. Here, not beside the flags, because the sweep's driver (``orchestrate/``) needs it too."""
    if not getattr(flags, "train_file", None):
        return {}
    return {
        "train_file": flags.train_file,
        "eval_file": flags.eval_file or "",
        "test_file": flags.test_file or "",
        "text_column": flags.text_column or "",
        "text_pair_column": flags.text_pair_column or "",
        "label_column": flags.label_column or "",
        "kind": flags.task_kind or "",
        "metric": flags.task_metric or "",
        "phrase_rows": flags.phrase_rows,
    }


# --------------------------------------------------------------------------- reading a file, every value as text


def _text(v) -> str | None:
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


def read_columns(path: str, field: str, wanted: list[str]) -> list[tuple[int, list[str | None]]]:
    """``(line or record number, values of the wanted columns as text)`` for every row; a value absent is None."""
    fmt = file_format(path, field)
    try:
        if fmt in ("csv", "tsv"):
            return _csv_columns(path, fmt, field, wanted)
        records = _parquet(path, wanted) if fmt == "parquet" else _json_records(path, fmt)
        return [(n, _record(path, field, n, r, wanted)) for n, r in _numbered(records)]
    except UserError as e:
        raise UserError(e.field or field, e.message) from None
    except (csv.Error, UnicodeDecodeError) as e:
        raise UserError(field, f"{path} does not parse: {e}") from None


def _numbered(records) -> Iterator[tuple[int, object]]:
    if isinstance(records, list):  # Parquet: row numbers
        return ((i, r) for i, r in enumerate(records, 1))
    return records


def _record(path, field, n, r, wanted) -> list[str | None]:
    if not isinstance(r, dict):
        raise UserError(field, f"{path} line {n} is not an object with named fields")
    return [_text(r.get(c)) for c in wanted]


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


# --------------------------------------------------------------------------- completing the description


def _pick(given: str, field: str, flag: str, header: list[str], path: str, guesses) -> tuple[str, bool]:
    """The column ``given`` (checked against the header) or the first of ``guesses`` there; (name, guessed)."""
    if given:
        if given not in header:
            raise UserError(field, f"{path} has no column {given!r}; its columns: {', '.join(header)}")
        return given, False
    for g in guesses:
        if g in header:
            return g, True
    raise UserError(
        field, f"{path}: no column named {' or '.join(guesses)}; pass {flag} (its columns: {', '.join(header)})"
    )


def _columns(spec: FileData) -> tuple[FileData, list[str]]:
    header = columns_of(spec.train_file, "data.train_file")
    guessed = []
    text, g = _pick(
        spec.text_column, "data.text_column", "--text-column", header, spec.train_file, [t for t, _ in TEXT_GUESS]
    )
    guessed += [f"text column {text!r}"] if g else []
    pair = spec.text_pair_column
    if pair:
        _pick(pair, "data.text_pair_column", "--text-pair-column", header, spec.train_file, ())
    elif g or not spec.text_column:
        pair = dict(TEXT_GUESS).get(text) or ""
        pair = pair if pair in header else ""
        guessed += [f"pair column {pair!r}"] if pair else []
    label, g = _pick(spec.label_column, "data.label_column", "--label-column", header, spec.train_file, LABEL_GUESS)
    guessed += [f"label column {label!r}"] if g else []
    return replace(spec, text_column=text, text_pair_column=pair, label_column=label), guessed


def _wanted(spec: FileData) -> list[str]:
    return [c for c in (spec.text_column, spec.text_pair_column, spec.label_column) if c]


def _check_other_files(spec: FileData) -> None:
    for field in ("eval_file", "test_file"):
        path = getattr(spec, field)
        if path:
            header = columns_of(path, f"data.{field}")
            missing = [c for c in _wanted(spec) if c not in header]
            if missing:
                raise UserError(
                    f"data.{field}", f"{path} has no column {missing[0]!r}; its columns: {', '.join(header)}"
                )


def _is_number(v: str) -> bool:
    try:
        float(v)
    except ValueError:
        return False
    return True


def _label_order(values: set[str]) -> tuple[str, ...]:
    """Labels in index order: numbers numerically, other names alphabetically."""
    if all(v.strip().lstrip("-").isdigit() for v in values):
        return tuple(sorted(values, key=lambda v: int(v)))
    return tuple(sorted(values))


def _kind_and_labels(spec: FileData, values: list[str]) -> FileData:
    kind = spec.kind
    if kind and kind not in KINDS:
        raise UserError("data.kind", f"unknown kind {kind!r}; pass --task-kind {' or '.join(KINDS)}")
    if not kind:  # numbers that are not all whole: a score; anything else names a class
        numeric = all(_is_number(v) for v in values)
        kind = "regression" if numeric and not all(float(v).is_integer() for v in values) else "classification"
    if kind == "regression":
        bad = next((v for v in values if not _is_number(v)), None)
        if bad is not None:
            raise UserError(
                "data.label_column",
                f"{spec.train_file}: label {bad!r} is not a number; a regression label must be numeric "
                "(or pass --task-kind classification)",
            )
        return replace(spec, kind=kind, labels=())
    labels = tuple(spec.labels) or _label_order(set(values))
    if len(labels) < 2:
        raise UserError("data.label_column", f"{spec.train_file} has {len(labels)} label(s); classification needs 2+")
    unknown = sorted({v for v in values if _index(labels, v) is None})
    if unknown:  # labels given in a space's data section that leave some of the file's out
        raise UserError(
            "data.labels",
            f"{spec.train_file} has label(s) {', '.join(map(repr, unknown[:5]))} not in data.labels "
            f"({', '.join(labels)[:200]}); list every label, or leave data.labels out",
        )
    return replace(spec, kind=kind, labels=labels)


def _metric(spec: FileData) -> FileData:
    metric = spec.metric or DEFAULT_METRIC[spec.kind]
    allowed = metrics_of(spec.kind, len(spec.labels))
    if metric not in allowed:
        raise UserError(
            "data.metric",
            f"{metric!r} is not a {spec.kind} metric here; pass --task-metric one of {', '.join(allowed)}",
        )
    return replace(spec, metric=metric)


def metrics_of(kind: str, n_labels: int) -> tuple[str, ...]:
    """What a task of this kind reports; F1 of the positive label only where there is one (two labels)."""
    return tuple(m for m in METRICS[kind] if m != "f1" or n_labels == 2)


def fingerprint(paths) -> str:
    h = hashlib.sha256()
    for p in paths:
        with open(p, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
        h.update(b"\0")
    return h.hexdigest()[:16]


def resolve(spec: FileData, teacher: str | None = None) -> FileData:
    """The complete description of the user's task, checked before anything starts: absolute paths, the columns
    (given or guessed, the guess said in one line), kind, labels, metric and the files' fingerprint. ``teacher``: a
    local model folder whose head decides the kind and, where it names its labels, their order (``align``)."""
    paths = {f: os.path.abspath(os.path.expanduser(getattr(spec, f))) if getattr(spec, f) else "" for f in FILES}
    spec = replace(spec, train_file=paths["train_file"], eval_file=paths["eval_file"], test_file=paths["test_file"])
    spec, guessed = _columns(spec)
    _check_other_files(spec)
    values = [lab for _, lab in _labels(spec, "train")]
    head = teacher_head(teacher)
    spec = replace(spec, kind=spec.kind or head.kind) if head else spec
    spec = _kind_and_labels(spec, values)
    spec, note = align(spec, set(values), head) if head and spec.kind == "classification" else (spec, "")
    spec = _metric(spec)
    if spec.eval_file:
        _check_eval_labels(spec)
    spec = replace(spec, fingerprint=fingerprint(spec.path(s) for s in spec.splits()))
    for line in (describe(spec, guessed), note):  # said once every check passed: a refusal stays one line
        if line:
            _say(line)
    return spec


def describe(spec: FileData, guessed=()) -> str:
    cols = f"text {spec.text_column!r}" + (f", pair {spec.text_pair_column!r}" if spec.text_pair_column else "")
    labels = f", {len(spec.labels)} labels: {', '.join(spec.labels)[:200]}" if spec.labels else ""
    guess = f" (guessed {', '.join(guessed)}; --text-column / --label-column choose)" if guessed else ""
    return (
        f"data: {os.path.basename(spec.train_file)}: {cols}, label {spec.label_column!r}, {spec.kind}{labels}, "
        f"metric {spec.metric}{guess}"
    )


# --------------------------------------------------------------------------- labels aligned with the teacher

PLACEHOLDER = re.compile(r"LABEL_\d+")  # transformers' names for labels nobody named


@dataclass(frozen=True)
class Head:
    """What a teacher's config.json says of its task head: the kind, and its label names in index order (() where
    they are transformers' placeholders)."""

    kind: str
    names: tuple[str, ...]
    size: int


def teacher_head(teacher: str | None) -> Head | None:
    """The task head of a local teacher folder (its config.json read as JSON: no model loaded), or None where it has
    none (a plain encoder, a hub name, a broken config: preflight names those)."""
    path = os.path.join(teacher, "config.json") if teacher else ""
    try:
        with open(path, encoding="utf-8") as f:
            cfg = json.load(f)
    except (OSError, ValueError):
        return None
    if not isinstance(cfg, dict) or not any("SequenceClassification" in a for a in cfg.get("architectures") or ()):
        return None
    id2label = cfg.get("id2label") or {}
    names = tuple(str(id2label[k]) for k in sorted(id2label, key=int))
    kind = "regression" if cfg.get("problem_type") == "regression" or len(names) == 1 else "classification"
    named = not all(PLACEHOLDER.fullmatch(n) for n in names)
    return Head(kind, names if named else (), len(names))


def align(spec: FileData, values: set[str], head: Head) -> tuple[FileData, str]:
    """The file's labels in the teacher's index order, matched by name ignoring case (its soft targets then mean what
    the data's labels mean); a teacher with placeholder names takes the file's labels in sorted order, and the line
    returned says so. Labels the other side lacks are refused, both sets named."""
    if not head.names:
        order = ", ".join(f"{i}={n}" for i, n in enumerate(spec.labels))[:200]
        return (
            spec,
            f"data: the teacher's labels are unnamed (LABEL_0…); the file's take its indices in sorted order: {order}",
        )
    theirs = {n.lower() for n in head.names}
    ours = {v.lower() for v in values}
    if theirs != ours or len(theirs) != len(head.names):
        raise UserError(
            "teacher",
            f"its labels ({', '.join(head.names)[:200]}) are not the labels of {os.path.basename(spec.train_file)} "
            f"({', '.join(sorted(values))[:200]}); pass a teacher fine-tuned on these labels, or fix the label column",
        )
    return replace(spec, labels=head.names), ""


@functools.lru_cache(maxsize=64)
def _lookup(labels: tuple[str, ...]) -> dict[str, int]:
    """Label → index: the exact name, else the name in lower case (labels matched to a teacher's ignore case)."""
    lower = {n.lower(): i for i, n in enumerate(labels)}
    return {**(lower if len(lower) == len(labels) else {}), **{n: i for i, n in enumerate(labels)}}


def _index(labels: tuple[str, ...], raw: str) -> int | None:
    table = _lookup(labels)
    return table.get(raw, table.get(raw.lower()))


def _check_eval_labels(spec: FileData) -> None:
    if spec.kind != "classification":
        return
    extra = sorted({lab for _, lab in _labels(spec, "validation") if _index(spec.labels, lab) is None})
    if extra:
        raise UserError(
            "data.eval_file",
            f"{spec.eval_file} has label(s) {', '.join(map(repr, extra[:5]))} the training file lacks (its labels: "
            f"{', '.join(spec.labels)[:200]}); fix the labels or add training rows with them",
        )


def _labels(spec: FileData, split: str) -> list[tuple[int, str]]:
    """(line, label) of the rows with a text; a missing label is refused with the count of such rows."""
    return [(n, lab) for n, _, _, lab in _rows(spec, split)]


# --------------------------------------------------------------------------- rows of one split

_said: set[str] = set()
_pending: list[str] = []


def _say(line: str) -> None:
    """A line for ``report`` to print, once per process: a command says what it read only once its checks passed, so
    a refusal stays one line; a Ray worker, which never reports, reads the files silently."""
    if line not in _said:
        _said.add(line)
        _pending.append(line)


def report() -> None:
    """Print what ``resolve`` found (the columns it guessed, rows left out) on stderr, each line once."""
    while _pending:
        print(_pending.pop(0), file=sys.stderr, flush=True)


def _rows(spec: FileData, split: str) -> list[tuple[int, str, str | None, str]]:
    """(line, text, pair, label) of one split's rows; rows with an empty text dropped, said in one line."""
    path, field = spec.path(split), f"data.{SPLIT_FILE[split]}"
    if not path:
        raise UserError(field, f"no {split} file; pass --{SPLIT_FILE[split].replace('_', '-')} FILE")
    pair = bool(spec.text_pair_column)
    rows = read_columns(path, field, _wanted(spec))
    kept = [(n, v[0], v[1] if pair else None, v[-1]) for n, v in rows if v[0] and (not pair or v[1])]
    if len(kept) < len(rows):
        _say(f"data: {path}: {len(rows) - len(kept)} of {len(rows)} rows have an empty text and are left out")
    missing = [n for n, *_, lab in kept if lab is None or not lab.strip()]
    if missing:
        raise UserError(
            "data.label_column",
            f"{path}: {len(missing)} row(s) lack {spec.label_column!r} (first: line {missing[0]}); "
            "fill or drop those rows",
        )
    if not kept:
        raise UserError(field, f"{path} has no rows with a text; the {split} split would be empty")
    return kept  # type: ignore[return-value]


def _encode(spec: FileData, path: str, n: int, raw: str):
    if spec.kind == "regression":
        try:
            return float(raw)
        except ValueError:
            raise UserError("data.label_column", f"{path} line {n}: label {raw!r} is not a number") from None
    index = _index(spec.labels, raw)
    if index is None:
        raise UserError(
            "data.label_column",
            f"{path} line {n}: label {raw!r} is not one of the training file's labels ({', '.join(spec.labels)[:200]})",
        )
    return index


def load(spec: FileData, task, data_dir, split: str) -> list[dict]:
    """A split's examples in the format every loader returns (``base.py``): text, text_pair, label index or score."""
    split = {"dev": "validation", "eval": "validation"}.get(split, split)
    if split not in SPLIT_FILE:
        raise UserError("split", f"a task on files has no split {split!r}; known: train, validation, test")
    _check_unchanged(spec)
    path = spec.path(split)
    return [{"text": t, "text_pair": p, "label": _encode(spec, path, n, lab)} for n, t, p, lab in _rows(spec, split)]


def _check_unchanged(spec: FileData) -> None:
    """The files a run reads are the files its description was made of (a Ray worker on another node, a ``--resume``
    days later, ``best`` re-scoring a run): refused where their bytes changed since."""
    paths = tuple(spec.path(s) for s in spec.splits())
    if not spec.fingerprint:
        return
    now = _fingerprint_of(paths, tuple(_stamp(p) for p in paths))
    if now != spec.fingerprint:
        raise UserError(
            "data.train_file",
            f"{', '.join(paths)} changed since this run was set up (fingerprint {spec.fingerprint}, now {now}); "
            "restore the files or start a new run on them",
        )


def _stamp(path: str) -> tuple[int, int]:
    try:
        st = os.stat(path)
    except OSError as e:
        raise UserError("data.train_file", f"{path}: {e.strerror}; the run's files must be readable here") from None
    return st.st_mtime_ns, st.st_size


@functools.lru_cache(maxsize=32)
def _fingerprint_of(paths: tuple[str, ...], stamps: tuple) -> str:  # stamps: hashed again only if a file changed
    return fingerprint(paths)


def task_name(spec: FileData) -> str:
    """``file-STEM``: no built-in task starts so, and it is safe in run, sweep and folder names (no ``:``)."""
    return "file-" + os.path.splitext(os.path.basename(spec.train_file))[0]


@functools.lru_cache(maxsize=16)
def file_task(spec: FileData) -> Task:
    """The Task record of a resolved description (the same record in every process that has the description)."""
    if not spec.fingerprint:
        spec = resolve(spec)
    return Task(
        name=task_name(spec),
        kind=spec.kind,
        label_names=spec.labels,
        metrics=metrics_of(spec.kind, len(spec.labels)),
        main_metric=spec.metric,
        eval_split="validation" if spec.eval_file else "test",  # no dev file: 10% of train held out (split_train)
        language="any",
        loader=functools.partial(load, spec),
        pair=bool(spec.text_pair_column),
        phrase_rows=spec.phrase_rows,
    )
