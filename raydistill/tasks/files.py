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
import sys
from dataclasses import dataclass, field, replace
from typing import Any

from raydistill.common.errors import UserError
from raydistill.tasks import dataset as hubdata
from raydistill.tasks import tags as tagging
from raydistill.tasks.base import Task
from raydistill.tasks.readers import (
    as_text,
    columns_of,
    delimiter_name,
    delimiter_of,
    file_format,
    read_files,
)

KINDS = ("classification", "regression", "token")
METRICS = {
    "classification": ("accuracy", "macro_f1", "f1", "mcc"),
    "regression": ("pearson", "spearman"),
    "token": tagging.METRICS,
}
DEFAULT_METRIC = {"classification": "accuracy", "regression": "pearson", "token": "f1"}
# guessed columns, first match wins (the exact name, else the name in any case): a text column and the pair column
# that goes with it; a label column
TEXT_GUESS = (("text", "text_pair"), ("sentence1", "sentence2"), ("sentence", None), ("question", "sentence"))
LABEL_GUESS = ("label", "labels", "category", "class", "target", "y")
SPLIT_FILE = {"train": "train_file", "validation": "eval_file", "test": "test_file"}
SPLIT_NAME = {"train": "train_split", "validation": "eval_split"}  # a dataset's splits
FILES = tuple(SPLIT_FILE.values())


def _flag(help: str, default: Any = "", **more: Any) -> Any:
    """A field the commands offer as a flag (``commands/flags.py`` generates it from ``help`` and ``more``: ``flag``,
    its name where not the field's; ``choices``; ``metavar``); unset, "" (off, for an on/off field)."""
    return field(default=default, metadata={"help": help, **more})


@dataclass(frozen=True)
class FileData:
    """A task on the user's data (the ``data`` section of a config): files, or a dataset by name; neither (empty
    ``train_file`` and ``dataset``): a built-in task."""

    # absolute paths once resolved: Ray workers run elsewhere (files must reach every node)
    train_file: str = _flag("training rows: a .csv, .tsv, .json, .jsonl or .parquet file (default: none, --task)")
    eval_file: str = _flag("the dev set that reports eval_* (default: 10% of the training rows held out as dev)")
    test_file: str = _flag(
        "a labelled test set, scored only by python -m raydistill.evaluate --split test (default: none)"
    )
    # a hub dataset name, or a local folder (absolute once resolved) that load_dataset reads
    dataset: str = _flag(
        "a Hugging Face hub dataset (owner/name) or a local folder of data files that datasets.load_dataset reads "
        "(DIR/train.jsonl, DIR/validation.jsonl; .parquet, .csv), instead of --train-file (default: none)"
    )
    dataset_config: str = _flag("the dataset's configuration (default: its only or default one)")
    dataset_revision: str = ""  # the hub commit it was resolved at (every reader reads it); "" for a local folder
    train_split: str = _flag("the dataset's split to train on (default: train)")  # "train" once resolved
    # "" = validation where it has one, else 10% of train held out
    eval_split: str = _flag(
        "the dataset's split that reports eval_* (default: validation where it has one, else 10% of the training "
        "rows held out as dev)"
    )
    # "" = a tab for TSV, sniffed for CSV (readers.py)
    delimiter: str = _flag(
        "a .csv or .tsv file's field delimiter, one character (\\t or tab: a tab) (default: a tab for .tsv; for .csv "
        "the first of , ; tab | that splits the header and the first rows alike)"
    )
    text_column: str = _flag("column of the text (default: text, sentence1, sentence or question, in any case)")
    text_pair_column: str = _flag("second text of a pair task (default: text_pair / sentence2 beside them)")
    label_column: str = _flag("column of the label (default: label, labels, category, class, target or y, in any case)")
    # the file's label values renamed before anything reads them ("0=neg,1=pos": numbers in a file, names in the
    # teacher); kept as the text the user gave so it survives params, YAML and JSON unchanged; "" = none
    label_map: str = _flag(
        "the file's label values renamed before anything reads them, such as 0=negative,1=positive for a file of "
        "numbers and a teacher whose labels are named; without a named teacher the map's order is the labels' "
        "(default: the values as they are)",
        metavar="VALUE=NAME,...",
    )
    # token classification: a list of tokens per row, and a list of tags, one per token
    tokens_column: str = _flag(
        "token classification: the column of each row's list of tokens (JSON Lines, Parquet or a dataset; default: "
        "tokens or words, where --tags-column, --task-kind token or a token teacher asks for it)"
    )
    tags_column: str = _flag("the column of its list of BIO tags, one per token (default: ner_tags, tags)")
    # "" = from the teacher's head, the columns, the labels
    kind: str = _flag(
        "default: the teacher's head, else regression when every label is a number and some are not whole, else "
        "classification",
        flag="task-kind",
        choices=KINDS,
    )
    # the main metric, among METRICS[kind]; "" = DEFAULT_METRIC[kind]
    metric: str = _flag(
        "the metric that chooses: accuracy, macro_f1, f1 (positive = the second label), mcc; pearson, spearman; "
        "token: f1, precision, recall (entities, seqeval) (default: accuracy; pearson; f1)",
        flag="task-metric",
    )
    labels: tuple[str, ...] = ()  # class or tag names in index order; () = the data's (named, else sorted)
    # training rows are phrases of whole sentences (SST-2): carve validation by sentence
    phrase_rows: bool = _flag(
        "training rows are phrases cut from whole sentences (as SST-2's): carve validation by sentence", default=False
    )
    fingerprint: str = ""  # hash of the files' bytes (a dataset: of its rows); set once resolved

    @property
    def given(self) -> bool:
        """Whether this names the user's data (otherwise the config's built-in ``task`` does)."""
        return bool(self.train_file or self.dataset)

    @property
    def flag(self) -> str:
        """The flag that names the data, as messages say it."""
        return "--dataset" if self.dataset else "--train-file"

    def path(self, split: str) -> str:
        """A split's file ("" for a dataset)."""
        return getattr(self, SPLIT_FILE[split])

    def split_name(self, split: str) -> str:
        """A split's name in the dataset ("" for files, or a split it does not give)."""
        if not self.dataset:
            return ""
        return (self.train_split or "train") if split == "train" else getattr(self, SPLIT_NAME.get(split, ""), "")

    def splits(self) -> tuple[str, ...]:
        """The splits that have a file or a dataset split."""
        return tuple(s for s in SPLIT_FILE if self.path(s) or self.split_name(s))

    def where(self, split: str) -> str:
        """A split's source as messages name it: its file, or ``dataset[split]``."""
        return f"{self.dataset}[{self.split_name(split)}]" if self.dataset else self.path(split)

    def field(self, split: str) -> str:
        """The config field that names a split's source."""
        return f"data.{SPLIT_NAME.get(split, 'dataset')}" if self.dataset else f"data.{SPLIT_FILE[split]}"

    @property
    def unit(self) -> str:
        """What a row number counts: a file's line (a record), a dataset's row index."""
        return "index" if self.dataset else "line"


def section_of(flags) -> dict:
    """A config's ``data`` section from a command's flags (``commands/args.add_data_args``); {} without
    ``--train-file`` or ``--dataset``. Here, not beside the flags, because the sweep's driver (``orchestrate/``) needs
    it too."""
    if not getattr(flags, "train_file", None) and not getattr(flags, "dataset", None):
        return {}
    names = {"kind": "task_kind", "metric": "task_metric"}
    keys = [*FILES, "dataset", "dataset_config", "train_split", "eval_split", "delimiter", "text_column"]
    keys += ["text_pair_column"]
    keys += ["label_column", "label_map", "tokens_column", "tags_column", "kind", "metric"]
    return {k: getattr(flags, names.get(k, k), None) or "" for k in keys} | {
        "phrase_rows": bool(getattr(flags, "phrase_rows", False))
    }


# --------------------------------------------------------------------------- the data's source: files or a dataset


def _split(spec: FileData, split: str):
    """One split of the dataset (a ``datasets.Dataset``); a split it lacks is refused with the ones it has."""
    dd = hubdata.load(spec.dataset, spec.dataset_config, spec.dataset_revision)
    return hubdata.split_of(dd, spec.dataset, spec.split_name(split), spec.field(split))


def _header(spec: FileData, split: str) -> list[str]:
    """A split's column names."""
    if spec.dataset:
        return hubdata.columns(_split(spec, split))
    return columns_of(spec.path(split), spec.field(split), spec.delimiter)


def _its_columns(spec: FileData, split: str, header: list[str]) -> str:
    """ "its columns: a, b", and for a CSV or TSV file the delimiter that split them (a wrong one gives one column)."""
    path = spec.path(split)
    used = delimiter_of(path, file_format(path, spec.field(split)), spec.delimiter) if path else ""
    said = f", read as {delimiter_name(used)}-separated (--delimiter chooses)" if used else ""
    return f"its columns: {', '.join(header)}{said}"


def _read(spec: FileData, split: str, wanted: list[str], lists=()) -> list[tuple[int, list]]:
    """``(row number, values)`` of a split's rows: the wanted columns as text, those in ``lists`` as they are."""
    if not spec.dataset:
        return _files(spec, wanted, lists)[0][spec.splits().index(split)].get()
    rows = hubdata.read(_split(spec, split), wanted)
    return [(n, [v if c in lists else as_text(v) for c, v in zip(wanted, vals, strict=True)]) for n, vals in rows]


def _files(spec: FileData, wanted: list[str], lists=()):
    """Every split file's rows and their fingerprint: all of them read together, once, the first time one is asked
    for (``readers.read_files``: the rows and the hash of the bytes in one pass, kept for the process)."""
    sources = [(spec.path(s), spec.field(s)) for s in spec.splits()]
    return read_files(sources, wanted, lists, spec.delimiter, shared=(spec.label_column,))  # a label: few values


def _named(spec: FileData, column: str) -> tuple[str, ...]:
    """The class names a dataset's feature gives the column, in index order; () for files or a plain column."""
    return hubdata.class_names(_split(spec, "train"), column) if spec.dataset else ()


def _short(spec: FileData) -> str:
    """The data in a few words: the training file's name, or the dataset's."""
    return spec.dataset if spec.dataset else os.path.basename(spec.train_file)


def _located(spec: FileData) -> FileData:
    """Absolute paths, or the dataset as every reader reads it: a folder made absolute, a hub dataset pinned at its
    revision, its splits named (dev: ``validation`` where it has one); one source's flags beside the other's
    refused."""
    if not spec.dataset:
        for f in ("dataset_config", "train_split", "eval_split"):
            if getattr(spec, f):
                flag = "--" + f.replace("_", "-")
                raise UserError(
                    f"data.{f}", f"{flag} goes with --dataset NAME; for files pass --train-file, --eval-file"
                )
        paths = [os.path.abspath(os.path.expanduser(getattr(spec, f))) if getattr(spec, f) else "" for f in FILES]
        return _delimited(replace(spec, train_file=paths[0], eval_file=paths[1], test_file=paths[2]))
    if spec.delimiter:
        raise UserError("data.delimiter", "--delimiter goes with .csv and .tsv files; leave it out for --dataset")
    files = [f for f in FILES if getattr(spec, f)]
    if files:
        flag = "--" + files[0].replace("_", "-")
        raise UserError("data.dataset", f"--dataset and {flag} both name the data; give one of them")
    name = hubdata.located(spec.dataset)
    revision = spec.dataset_revision or hubdata.revision(name, spec.dataset_config)
    spec = replace(spec, dataset=name, dataset_revision=revision, train_split=spec.train_split or "train")
    names = hubdata.load(name, spec.dataset_config, revision)
    spec = replace(spec, eval_split=spec.eval_split or ("validation" if "validation" in names else ""))
    for split in spec.splits():
        _split(spec, split)
    return spec


def _delimited(spec: FileData) -> FileData:
    """A given delimiter as one character (``\\t`` or ``tab`` written out: a tab), for CSV or TSV files only."""
    if not spec.delimiter:
        return spec
    d = {"\\t": "\t", "tab": "\t"}.get(spec.delimiter, spec.delimiter)
    if len(d) != 1 or d in '"\r\n':
        raise UserError(
            "data.delimiter",
            f"{spec.delimiter!r} is not one character (nor a quote or a line break); pass such as --delimiter ';'",
        )
    for split in spec.splits():
        if file_format(spec.path(split), spec.field(split)) not in ("csv", "tsv"):
            raise UserError("data.delimiter", f"{spec.path(split)} is not a CSV or TSV file; leave --delimiter out")
    return replace(spec, delimiter=d)


# --------------------------------------------------------------------------- completing the description


def _pick(given: str, field: str, flag: str, header: list[str], where: tuple[str, str], guesses) -> tuple[str, bool]:
    """The column ``given`` (checked against the header) or the first of ``guesses`` there; (name, guessed).
    ``where``: the split's source and its columns as messages say them (``_its_columns``)."""
    path, cols = where
    if given:
        if given not in header:
            raise UserError(field, f"{path} has no column {given!r}; {cols}")
        return given, False
    for g in guesses:
        if _find(header, g):
            return _find(header, g), True
    named = ", ".join(guesses[:-1]) + " or " + guesses[-1] if len(guesses) > 1 else "".join(guesses)
    raise UserError(field, f"{path}: no column named {named}; pass {flag}; {cols}")


def _find(header: list[str], name: str) -> str:
    """The header's column called ``name``: that exact name, else the first in another case (``Category``); ""."""
    if not name or name in header:
        return name
    return next((h for h in header if h.lower() == name.lower()), "")


def _columns(spec: FileData) -> tuple[FileData, list[str]]:
    header = _header(spec, "train")
    where = spec.where("train"), _its_columns(spec, "train", header)
    guessed = []
    text, g = _pick(spec.text_column, "data.text_column", "--text-column", header, where, [t for t, _ in TEXT_GUESS])
    guessed += [f"text column {text!r}"] if g else []
    pair = spec.text_pair_column
    if pair:
        _pick(pair, "data.text_pair_column", "--text-pair-column", header, where, ())
    elif g or not spec.text_column:
        pair = _find(header, dict(TEXT_GUESS).get(text.lower()) or "")
        guessed += [f"pair column {pair!r}"] if pair else []
    label, g = _pick(spec.label_column, "data.label_column", "--label-column", header, where, LABEL_GUESS)
    guessed += [f"label column {label!r}"] if g else []
    return replace(spec, text_column=text, text_pair_column=pair, label_column=label), guessed


def _no_lists(spec: FileData, split: str) -> None:
    """A CSV or TSV file holds text, not the lists a token task reads."""
    path = spec.path(split)
    fmt = file_format(path, spec.field(split)) if path else ""
    if fmt in ("csv", "tsv"):
        raise UserError(
            "data.tokens_column",
            f"{path} is a {fmt.upper()} file, which holds no lists; token classification reads a list of tokens and "
            "a list of tags per row: write the rows as JSON Lines or Parquet",
        )


def _token_columns(spec: FileData) -> tuple[FileData, list[str]]:
    for f in ("text_column", "text_pair_column", "label_column", "label_map"):
        if getattr(spec, f):
            raise UserError(
                f"data.{f}",
                f"token classification reads --tokens-column and --tags-column; leave --{f.replace('_', '-')} out",
            )
    _no_lists(spec, "train")
    header = _header(spec, "train")
    where = spec.where("train"), _its_columns(spec, "train", header)
    toks, g = _pick(spec.tokens_column, "data.tokens_column", "--tokens-column", header, where, tagging.TOKENS_GUESS)
    guessed = [f"tokens column {toks!r}"] if g else []
    tags, g = _pick(spec.tags_column, "data.tags_column", "--tags-column", header, where, tagging.TAGS_GUESS)
    guessed += [f"tags column {tags!r}"] if g else []
    return replace(spec, tokens_column=toks, tags_column=tags), guessed


def _wanted(spec: FileData) -> list[str]:
    if spec.kind == "token":
        return [spec.tokens_column, spec.tags_column]
    return [c for c in (spec.text_column, spec.text_pair_column, spec.label_column) if c]


def _lists(spec: FileData) -> frozenset[str]:
    """The columns read as lists: a token task's tokens and tags."""
    return frozenset(_wanted(spec)) if spec.kind == "token" else frozenset()


def _check_other_splits(spec: FileData) -> None:
    for split in spec.splits()[1:]:  # dev and test: the training split's columns
        if spec.kind == "token":
            _no_lists(spec, split)
        header = _header(spec, split)
        missing = [c for c in _wanted(spec) if c not in header]
        if missing:
            raise UserError(
                spec.field(split),
                f"{spec.where(split)} has no column {missing[0]!r}; {_its_columns(spec, split, header)}",
            )


def _is_number(v: str) -> bool:
    try:
        float(v)
    except ValueError:
        return False
    return True


def _whole(v: str) -> bool:
    return v.strip().lstrip("-").isdigit()


def _label_order(values: set[str]) -> tuple[str, ...]:
    """Labels in index order: numbers numerically, other names alphabetically."""
    if all(_whole(v) for v in values):
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
        if spec.label_map:
            raise UserError("data.label_map", "--label-map names classes; a regression label is a number: leave it out")
        bad = next((v for v in values if not _is_number(v)), None)
        if bad is not None:
            raise UserError(
                "data.label_column",
                f"{spec.where('train')}: label {bad!r} is not a number; a regression label must be numeric "
                "(or pass --task-kind classification)",
            )
        return replace(spec, kind=kind, labels=())
    named = tuple(spec.labels) or _map_names(spec) or _named(spec, spec.label_column)
    labels = named or _label_order(set(values))
    return _checked_labels(replace(spec, kind=kind, labels=labels), set(values))


def _checked_labels(spec: FileData, values: set[str]) -> FileData:
    """Two labels or more, and every one the data holds among them (labels given in a space's data section may
    leave some out)."""
    what, field = ("tag", "data.tags_column") if spec.kind == "token" else ("label", "data.label_column")
    if len(spec.labels) < 2:
        raise UserError(field, f"{spec.where('train')} has {len(spec.labels)} {what}(s); {spec.kind} needs 2+")
    unknown = sorted({v for v in values if _index(spec.labels, v) is None})
    if unknown:
        raise UserError(
            "data.labels",
            f"{spec.where('train')} has {what}(s) {', '.join(map(repr, unknown[:5]))} not in data.labels "
            f"({', '.join(spec.labels)[:200]}); list every {what}, or leave data.labels out",
        )
    return spec


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
    return tuple(m for m in METRICS[kind] if m != "f1" or n_labels == 2 or kind == "token")


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

MAP_FIX = "write it as VALUE=NAME pairs, such as --label-map 0=negative,1=positive"


@functools.lru_cache(maxsize=16)
def parse_label_map(text: str) -> tuple[tuple[str, str], ...]:
    """``0=neg,1=pos`` as ``(("0", "neg"), ("1", "pos"))`` in the order given; a malformed map is refused."""
    pairs: list[tuple[str, str]] = []
    for item in text.split(","):
        value, eq, name = (part.strip() for part in item.partition("="))
        if not eq or not value or not name:
            raise UserError("data.label_map", f"{item.strip()!r} is not VALUE=NAME; {MAP_FIX}")
        if value in dict(pairs):
            raise UserError("data.label_map", f"value {value!r} is mapped twice; map each value once")
        pairs.append((value, name))
    return tuple(pairs)


def _map_names(spec: FileData) -> tuple[str, ...]:
    """The names a label map gives, in its order (index 0 is the first value's name): its order is the labels'
    where no teacher names them."""
    return tuple(dict.fromkeys(name for _, name in parse_label_map(spec.label_map))) if spec.label_map else ()


def _renamed(spec: FileData, where: str, rows: list) -> list:
    """Rows whose label is the map's name for the file's value; a value the map lacks is refused."""
    table = dict(parse_label_map(spec.label_map))
    out = []
    for n, text, pair, raw in rows:
        name = table.get(raw, table.get(raw.strip()))
        if name is None:
            raise UserError(
                "data.label_map",
                f"{where} {spec.unit} {n}: label {raw!r} is not in --label-map {spec.label_map}; map every value "
                "the file holds",
            )
        out.append((n, text, pair, name))
    return out


def _check_map_names(spec: FileData, head: Head) -> None:
    """Every name a label map gives is one of the named teacher's labels (case ignored)."""
    theirs = {n.lower() for n in head.names}
    stray = [n for n in _map_names(spec) if n.lower() not in theirs]
    if stray:
        raise UserError(
            "data.label_map",
            f"{stray[0]!r} is not a label of the teacher (its labels: {', '.join(head.names)[:200]}); map the "
            "file's values to those names",
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
    archs = cfg.get("architectures") or () if isinstance(cfg, dict) else ()
    token = any("TokenClassification" in a for a in archs)
    if not token and not any("SequenceClassification" in a for a in archs):
        return None
    id2label = cfg.get("id2label") or {}
    names = tuple(str(id2label[k]) for k in sorted(id2label, key=int))
    regression = cfg.get("problem_type") == "regression" or len(names) == 1
    kind = "token" if token else "regression" if regression else "classification"
    named = not all(PLACEHOLDER.fullmatch(n) for n in names)
    return Head(kind, names if named else (), len(names))


def align(spec: FileData, values: set[str], head: Head) -> tuple[FileData, str]:
    """The data's labels in the teacher's index order, matched by name ignoring case (its soft targets then mean what
    the data's labels mean); a teacher with placeholder names takes the data's labels in their order, and the line
    returned says so. Labels the other side lacks are refused, both sets named (a token teacher may know tags the
    data never uses)."""
    if not head.names:
        order = ", ".join(f"{i}={n}" for i, n in enumerate(spec.labels))[:200]
        if spec.kind == "classification" and spec.label_map:
            whose = "--label-map's names take its indices in the map's order"
        elif spec.kind == "classification" and not spec.dataset:
            whose = "the file's take its indices in sorted order"
        else:
            whose = f"the data's {'tags' if spec.kind == 'token' else 'labels'} take its indices in this order"
        return spec, f"data: the teacher's labels are unnamed (LABEL_0…); {whose}: {order}"
    theirs = {n.lower() for n in head.names}
    ours = {v.lower() for v in values}
    fits = theirs >= ours if spec.kind == "token" else theirs == ours
    if not fits or len(theirs) != len(head.names):
        raise UserError(
            "teacher",
            f"its labels ({', '.join(head.names)[:200]}) are not the labels of {_short(spec)} "
            f"({', '.join(sorted(values))[:200]}); {_numbers_hint(spec, values, head)}pass a teacher fine-tuned on "
            f"these labels, or fix the {'tags' if spec.kind == 'token' else 'label'} column",
        )
    return replace(spec, labels=head.names), ""


def _numbers_hint(spec: FileData, values: set[str], head: Head) -> str:
    """Whole numbers in the file and names in the teacher: the map that says which is which, as the fix."""
    if spec.kind != "classification" or spec.label_map or not values or not all(_whole(v) for v in values):
        return ""
    # no pairing offered: the file's numbers say nothing of which name they stand for, and a guess copied as is
    # would swap the classes silently
    numbers = ", ".join(_label_order(values))
    names = ", ".join(head.names)
    return (
        f"say which of the numbers {numbers} is which of the teacher's names {names} with --label-map VALUE=NAME,… "
        "(from how the file was labelled), or "
    )


@functools.lru_cache(maxsize=64)
def _lookup(labels: tuple[str, ...]) -> dict[str, int]:
    """Label → index: the exact name, else the name in lower case (labels matched to a teacher's ignore case)."""
    lower = {n.lower(): i for i, n in enumerate(labels)}
    return {**(lower if len(lower) == len(labels) else {}), **{n: i for i, n in enumerate(labels)}}


def _index(labels: tuple[str, ...], raw: str) -> int | None:
    table = _lookup(labels)
    return table.get(raw, table.get(raw.lower()))


def _check_eval_labels(spec: FileData) -> None:
    if spec.kind == "regression":
        return
    if spec.kind == "token":
        seen = {t for _, _, tags in _token_rows(spec, "validation") for t in tags}
    else:
        seen = {lab for _, lab in _labels(spec, "validation")}
    extra = sorted(v for v in seen if _index(spec.labels, v) is None)
    if extra:
        what = "tag" if spec.kind == "token" else "label"
        source = "split" if spec.dataset else "file"
        raise UserError(
            spec.field("validation"),
            f"{spec.where('validation')} has {what}(s) {', '.join(map(repr, extra[:5]))} the training {source} lacks "
            f"(its {what}s: {', '.join(spec.labels)[:200]}); fix the {what}s or add training rows with them",
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


def forget_unreported() -> None:
    """Drop the lines a command found but never printed (refused after its data resolved): the next command in this
    process (an API caller's) must not print them as its own, and may say them again."""
    for line in _pending:
        _said.discard(line)
    _pending.clear()


def report() -> None:
    """Print what ``resolve`` found (the columns it guessed, rows left out) on stderr, each line once."""
    while _pending:
        print(_pending.pop(0), file=sys.stderr, flush=True)


def _need(spec: FileData, split: str) -> None:
    """A split the data does not give (a test file never passed, a dataset's test split) is refused."""
    if split in spec.splits():
        return
    if spec.dataset:
        raise UserError("data.dataset", f"no {split} split is read from {spec.dataset}; pass --eval-split NAME")
    raise UserError(spec.field(split), f"no {split} file; pass --{SPLIT_FILE[split].replace('_', '-')} FILE")


def _rows(spec: FileData, split: str) -> list[tuple[int, str, str | None, str]]:
    """(line, text, pair, label) of one split's rows; rows with an empty text dropped, said in one line."""
    _need(spec, split)
    where, pair = spec.where(split), bool(spec.text_pair_column)
    rows = _read(spec, split, _wanted(spec), _lists(spec))
    kept = [(n, v[0], v[1] if pair else None, v[-1]) for n, v in rows if v[0] and (not pair or v[1])]
    if len(kept) < len(rows):
        _say(f"data: {where}: {len(rows) - len(kept)} of {len(rows)} rows have an empty text and are left out")
    missing = [n for n, *_, lab in kept if lab is None or not lab.strip()]
    if missing:
        raise UserError(
            "data.label_column",
            f"{where}: {len(missing)} row(s) lack {spec.label_column!r} (first: {spec.unit} {missing[0]}); "
            "fill or drop those rows",
        )
    if not kept:
        raise UserError(spec.field(split), f"{where} has no rows with a text; the {split} split would be empty")
    return _renamed(spec, where, kept) if spec.label_map else kept


def _token_rows(spec: FileData, split: str) -> list[tuple[int, list[str], list[str]]]:
    """(row, tokens, tags) of one split, every token and tag as text; rows without tokens dropped, said in one
    line."""
    _need(spec, split)
    where = spec.where(split)
    rows = _read(spec, split, _wanted(spec), _lists(spec))
    kept, empty = tagging.pairs(rows, where, spec.unit, (spec.tokens_column, spec.tags_column))
    if empty:
        _say(f"data: {where}: {empty} of {len(rows)} rows have no tokens and are left out")
    if not kept:
        raise UserError(spec.field(split), f"{where} has no rows with tokens; the {split} split would be empty")
    return [(n, [as_text(t) or "" for t in toks], [str(as_text(t)) for t in tags]) for n, toks, tags in kept]


def _encode(spec: FileData, path: str, n: int, raw: str):
    if spec.kind == "regression":
        try:
            return float(raw)
        except ValueError:
            raise UserError("data.label_column", f"{path} line {n}: label {raw!r} is not a number") from None
    index = _index(spec.labels, raw)
    if index is None:
        field, what, source = (
            ("data.tags_column", "tag", "data's")
            if spec.kind == "token"
            else ("data.label_column", "label", "training file's")
        )
        raise UserError(
            field,
            f"{path} {spec.unit} {n}: {what} {raw!r} is not one of the {source} {what}s "
            f"({', '.join(spec.labels)[:200]})",
        )
    return index


def load(spec: FileData, task, data_dir, split: str) -> list[dict]:
    """A split's examples in the format every loader returns (``base.py``): text, text_pair, label index or score;
    tokens and tag indices."""
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
    return [{"text": t, "text_pair": p, "label": _encode(spec, where, n, lab)} for n, t, p, lab in _rows(spec, split)]


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
