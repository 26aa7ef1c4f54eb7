"""The user's own data: CSV, TSV, JSON, JSON Lines or Parquet files with any columns (issue 37), or a dataset by
name — a hub dataset or a local folder that ``datasets.load_dataset`` reads (issue 38, ``dataset.py``); text
classification, regression, or token classification (a list of tokens and one of tags per row: ``tags.py``).

``FileData`` describes such a task as plain frozen data (files or dataset and splits, columns, kind, labels, metric, a
content fingerprint); it is the ``data`` section of a ``RunConfig``, so it travels to Ray workers, checkpoints and
MLflow params like any other setting, and ``file_task`` turns it into the ``Task`` record every loader and metric
reads. ``resolve`` completes what the user gave (absolute paths, the dataset's revision and splits, guessed columns,
kind, labels, metric) once, before Ray.

Every value is read as text with no NA guessing (the csv module, json and pyarrow directly: pandas and ``datasets``
turn "NA" or "null" into missing and "True" into a boolean); TSV is read with ``csv.QUOTE_NONE`` (GLUE text has
stray quotes).
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
from collections.abc import Sequence
from dataclasses import replace

from raydistill.common.errors import UserError
from raydistill.tasks import dataset as hubdata
from raydistill.tasks import tags as tagging
from raydistill.tasks.base import Task
from raydistill.tasks.columns import (
    _check_other_splits,
    _columns,
    _files,
    _lists,
    _located,
    _named,
    _read,
    _rows,
    _token_columns,
    _token_rows,
    _wanted,
)
from raydistill.tasks.examples import Examples
from raydistill.tasks.filedata import (  # noqa: F401 (the names every reader of the user's data imports from here)
    SPLIT_FILE,
    FileData,
    _pending,
    _say,
    forget_unreported,
    metrics_of,
    report,
)
from raydistill.tasks.head import PLACEHOLDER, Head, teacher_head  # noqa: F401
from raydistill.tasks.labelmap import parse_label_map
from raydistill.tasks.labels import (
    _check_eval_labels,
    _check_map_names,
    _checked_labels,
    _encode,
    _kind_and_labels,
    _labels,
    _metric,
    align,
)
from raydistill.tasks.readers import delimiter_name, delimiter_of, file_format


def _tagging(spec: FileData, head: Head | None) -> bool:
    """Whether the task is token classification: said (``--task-kind token``, a tokens or tags column) or, with
    nothing said, the teacher's head is a token head."""
    said = bool(spec.tokens_column or spec.tags_column)
    if said and spec.kind not in ("", "token"):
        raise UserError(
            "data.kind", f"--tokens-column and --tags-column make a token task; leave --task-kind {spec.kind} out"
        )
    return said or spec.kind == "token" or (not spec.kind and head is not None and head.kind == "token")


def resolve(spec: FileData, teacher: str | None = None) -> FileData:
    """The complete description of the user's task, checked before anything starts: absolute paths (a dataset's
    revision and splits), the columns (given or guessed, the guess said in one line), kind, labels, metric and the
    data's fingerprint. ``teacher``: a local model folder whose head decides the kind and, where it names its
    labels, their order (``align``)."""
    spec = _located(spec)
    head = teacher_head(teacher)
    if _tagging(spec, head):
        spec, guessed, note = _resolve_tags(replace(spec, kind="token"), head)
    else:
        spec = replace(spec, kind=spec.kind or head.kind) if head and head.kind != "token" else spec
        spec, guessed, note = _resolve_labels(spec, head)
    spec = _metric(spec)
    if "validation" in spec.splits():
        _check_eval_labels(spec)
    spec = replace(spec, fingerprint=_content(spec))
    for line in (describe(spec, guessed), note):  # said once every check passed: a refusal stays one line
        if line:
            _say(line)
    return spec


def _resolve_labels(spec: FileData, head: Head | None) -> tuple[FileData, list[str], str]:
    """A text task's columns, kind and labels (aligned with a classification teacher's), and what to say of them."""
    spec, guessed = _columns(spec)
    _check_other_splits(spec)
    parse_label_map(spec.label_map) if spec.label_map else ()  # a malformed map refused before any row is read
    values = [lab for _, lab in _labels(spec, "train")]
    spec = _kind_and_labels(spec, values)
    named = head and head.kind != "token" and spec.kind == "classification"
    if named and head and head.names:
        _check_map_names(spec, head)
    spec, note = align(spec, set(values), head) if head and named else (spec, "")
    return spec, guessed, note


def _resolve_tags(spec: FileData, head: Head | None) -> tuple[FileData, list[str], str]:
    """A token task's columns and tags (the data's: named by a dataset's class labels, else O first, then by type;
    aligned with a token teacher's), checked as BIO tags."""
    spec, guessed = _token_columns(spec)
    _check_other_splits(spec)
    seen = {t for _, _, tags in _token_rows(spec, "train") for t in tags}
    labels = tuple(spec.labels) or _named(spec, spec.tags_column) or tagging.tag_order(seen)
    spec = _checked_labels(replace(spec, labels=labels), seen)
    spec, note = align(spec, seen, head) if head and head.kind == "token" else (spec, "")
    tagging.check_bio(spec.labels, spec.where("train"))
    return spec, guessed, note


def _content(spec: FileData) -> str:
    """The fingerprint of what the task reads: the files' bytes, or a dataset's rows (its wanted columns)."""
    if spec.dataset:
        return _rows_fingerprint(replace(spec, fingerprint=""), hubdata.stamp(spec.dataset))
    return _files(spec, _wanted(spec), _lists(spec))[1]  # the rows read in the same pass, kept for the run


@functools.lru_cache(maxsize=16)
def _rows_fingerprint(spec: FileData, stamp: tuple) -> str:  # stamp: hashed again only if a local folder changed
    h = hashlib.sha256()
    for split in spec.splits():
        rows = _read(spec, split, _wanted(spec), _lists(spec))
        h.update(json.dumps([spec.split_name(split), rows], ensure_ascii=False, default=str).encode())
    return h.hexdigest()[:16]


def describe(spec: FileData, guessed=()) -> str:
    if spec.kind == "token":
        cols, flags = f"tokens {spec.tokens_column!r}, tags {spec.tags_column!r}", "--tokens-column / --tags-column"
    else:
        cols = f"text {spec.text_column!r}" + (f", pair {spec.text_pair_column!r}" if spec.text_pair_column else "")
        cols, flags = f"{cols}, label {spec.label_column!r}", "--text-column / --label-column"
        cols += f" (--label-map {spec.label_map})" if spec.label_map else ""
    what = "tags" if spec.kind == "token" else "labels"
    labels = f", {len(spec.labels)} {what}: {', '.join(spec.labels)[:200]}" if spec.labels else ""
    guess = f" (guessed {', '.join(guessed)}; {flags} choose)" if guessed else ""
    return f"data: {_source(spec)}: {cols}, {spec.kind}{labels}, metric {spec.metric}{guess}"


def _source(spec: FileData) -> str:
    if not spec.dataset:
        fmt = file_format(spec.train_file, "data.train_file")
        used = delimiter_of(spec.train_file, fmt, spec.delimiter)
        said = f" ({delimiter_name(used)}-separated)" if used and used != {"csv": ",", "tsv": "\t"}[fmt] else ""
        return os.path.basename(spec.train_file) + said
    name = spec.dataset + (f" ({spec.dataset_config})" if spec.dataset_config else "")
    dev = f"dev {spec.eval_split!r}" if spec.eval_split else "dev: 10% of train held out (--eval-split NAME chooses)"
    return f"{name}, train {spec.train_split!r}, {dev}"


# --------------------------------------------------------------------------- label values renamed (--label-map)


def load(spec: FileData, task, data_dir, split: str) -> Sequence[dict]:
    """A split's examples in the format every loader returns (``base.py``): text, text_pair, label index or score
    (held by column: ``Examples``, no dict per row kept); tokens and tag indices (a list of dicts)."""
    split = {"dev": "validation", "eval": "validation"}.get(split, split)
    if split not in SPLIT_FILE:
        raise UserError("split", f"a task on your own data has no split {split!r}; known: train, validation, test")
    _check_unchanged(spec)
    where = spec.where(split)
    if spec.kind == "token":
        return [
            {"tokens": toks, "labels": [_encode(spec, where, n, t) for t in tags]}
            for n, toks, tags in _token_rows(spec, split)
        ]
    texts: list[str] = []
    pairs: list[str | None] = []
    labels: list = []
    for n, t, p, lab in _rows(spec, split):
        texts.append(t)
        pairs.append(p)
        labels.append(_encode(spec, where, n, lab))
    return Examples(texts, pairs if any(p is not None for p in pairs) else None, labels)


def _check_unchanged(spec: FileData) -> None:
    """The data a run reads is the data its description was made of (a Ray worker on another node, a ``--resume``
    days later, ``best`` re-scoring a run): refused where the files' bytes (a dataset's rows) changed since."""
    if not spec.fingerprint:
        return
    now = _content(spec)
    if spec.dataset:
        what, field, fix = spec.dataset, "data.dataset", "restore its rows"
    else:
        what = ", ".join(spec.path(s) for s in spec.splits())
        field, fix = "data.train_file", "restore the files"
    if now != spec.fingerprint:
        raise UserError(
            field,
            f"{what} changed since this run was set up (fingerprint {spec.fingerprint}, now {now}); "
            f"{fix} or start a new run on them",
        )


def task_name(spec: FileData) -> str:
    """``file-STEM`` (``dataset-NAME[-CONFIG]``): no built-in task starts so, and it is safe in run, sweep and folder
    names (no ``:`` or ``/``)."""
    if spec.dataset:
        stem = os.path.basename(spec.dataset.rstrip("/")) + (f"-{spec.dataset_config}" if spec.dataset_config else "")
        return "dataset-" + re.sub(r"[^A-Za-z0-9._-]+", "-", stem)
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
        eval_split="validation" if "validation" in spec.splits() else "test",  # none: 10% of train held out as dev
        language="any",
        loader=functools.partial(load, spec),
        pair=bool(spec.text_pair_column),
        phrase_rows=spec.phrase_rows,
    )
