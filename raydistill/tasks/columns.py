"""The user's data read: its source (files or a dataset, made absolute or pinned), its columns (given or guessed,
checked on every split) and one split's rows (text tasks: text, pair, label; token tasks: tokens, tags)."""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from dataclasses import replace

from raydistill.common.errors import UserError
from raydistill.tasks import dataset as hubdata
from raydistill.tasks import tags as tagging
from raydistill.tasks.filedata import FILES, LABEL_GUESS, SPLIT_FILE, TEXT_GUESS, FileData, _say
from raydistill.tasks.labelmap import _renamed
from raydistill.tasks.readers import (
    as_text,
    columns_of,
    delimiter_name,
    delimiter_of,
    file_format,
    read_files,
)

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


def _read(spec: FileData, split: str, wanted: list[str], lists=()) -> Sequence[tuple[int, list]]:
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


def _need(spec: FileData, split: str) -> None:
    """A split the data does not give (a test file never passed, a dataset's test split) is refused."""
    if split in spec.splits():
        return
    if spec.dataset:
        raise UserError("data.dataset", f"no {split} split is read from {spec.dataset}; pass --eval-split NAME")
    raise UserError(spec.field(split), f"no {split} file; pass --{SPLIT_FILE[split].replace('_', '-')} FILE")


def _rows(spec: FileData, split: str) -> Iterator[tuple[int, str, str | None, str]]:
    """(line, text, pair, label) of one split's rows, checked first; rows with an empty text dropped, said in one
    line. Each is made as it is read (issue 48: a 4-tuple per row kept for the whole split cost ~40 MB of 400k rows
    beside the examples made of them): the checks read the rows once, the caller once more."""
    _need(spec, split)
    where, pair = spec.where(split), bool(spec.text_pair_column)
    rows = _read(spec, split, _wanted(spec), _lists(spec))

    def kept() -> Iterator[tuple[int, str, str | None, str]]:
        return ((n, v[0], v[1] if pair else None, v[-1]) for n, v in rows if v[0] and (not pair or v[1]))

    count, missing = 0, []
    for n, *_, lab in kept():
        count += 1
        if lab is None or not lab.strip():
            missing.append(n)
    if count < len(rows):
        _say(f"data: {where}: {len(rows) - count} of {len(rows)} rows have an empty text and are left out")
    if missing:
        raise UserError(
            "data.label_column",
            f"{where}: {len(missing)} row(s) lack {spec.label_column!r} (first: {spec.unit} {missing[0]}); "
            "fill or drop those rows",
        )
    if not count:
        raise UserError(spec.field(split), f"{where} has no rows with a text; the {split} split would be empty")
    return _renamed(spec, where, kept()) if spec.label_map else kept()


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
