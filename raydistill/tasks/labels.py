"""The labels of the user's data: its kind and label names (numbers in order, names sorted, a dataset's class
names, a label map's order), aligned with a named teacher's by name, the metric, and a label's index."""

from __future__ import annotations

import functools
import math
from collections.abc import Iterator
from dataclasses import replace

from raydistill.common.errors import UserError
from raydistill.tasks.columns import _named, _rows, _short, _token_rows
from raydistill.tasks.filedata import DEFAULT_METRIC, KINDS, FileData, metrics_of
from raydistill.tasks.head import Head
from raydistill.tasks.labelmap import _map_names


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
        endless = next((v for v in values if not math.isfinite(float(v))), None)
        if endless is not None:  # a NaN target trains NaN losses; a summary of it is not even JSON
            raise UserError(
                "data.label_column",
                f"{spec.where('train')}: label {endless!r} is not a finite number; fix those rows or drop them",
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


def _labels(spec: FileData, split: str) -> Iterator[tuple[int, str]]:
    """(line, label) of the rows with a text, as they are read; a missing label is refused (before the first) with
    the count of such rows."""
    return ((n, lab) for n, _, _, lab in _rows(spec, split))


def _encode(spec: FileData, path: str, n: int, raw: str):
    if spec.kind == "regression":
        try:
            value = float(raw)
        except ValueError:
            raise UserError("data.label_column", f"{path} line {n}: label {raw!r} is not a number") from None
        if not math.isfinite(value):
            raise UserError("data.label_column", f"{path} line {n}: label {raw!r} is not a finite number") from None
        return value
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
