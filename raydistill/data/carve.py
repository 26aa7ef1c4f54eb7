"""The validation split: carved from a task's training rows by group, so no text sits on both sides.

What chooses (a run's best epoch, a sweep's trials) should look like what reports (dev) and share no text with what
trains. Rows that share text form a group, and a group goes to one side whole:

- **phrase tasks** (``Task.phrase_rows``, SST-2: training rows are phrases cut from whole sentences, dev holds whole
  sentences): the units drawn are the *sentences* — rows that are no word span of another row — and every training row
  a validation sentence contains (or that contains one), as a case-insensitive character substring, leaves training.
- **other text tasks**: identical text (case and spacing ignored) is one group; for a pair task the unordered pair is
  the key. A sentence repeated with another partner may sit on both sides: the GLUE dev sets do the same (of the dev
  rows, RTE 38%, STS-B 17%, MRPC 11% and WNLI 92% share a sentence with a training row), so splitting such sentences
  apart would make validation less like dev, not more.
- **QA**: the context is the group (dev questions are about contexts never trained on).

Within that, validation takes ``frac`` of the units, stratified: per label (classification), per fifth of the score
range by rank (regression), or one stratum (token, QA), drawn with the fixed ``VAL_SEED`` so every run and trial of a
task chooses on the same rows. The carve is computed once per data (``carve`` keeps it in memory and on disk: the
containment pass over SST-2 takes seconds), keyed by everything that changes its rows (``_digest``).

The dev set a task holds out of its only training rows (NSMC; your file without --eval-file; ``splits.DEV``) is
drawn by the same rule, its own seed, before validation is carved from what is left.
"""

from __future__ import annotations

import bisect
import contextlib
import functools
import hashlib
import json
import os
import random
from collections.abc import Hashable, Iterable, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass

from raydistill.common.errors import UserError
from raydistill.common.paths import results_path, write_json_atomic

VAL_SEED = 7  # a property of the data: every run and trial of a task chooses on the same rows
CARVE_VERSION = 2  # part of every data fingerprint: a teacher cache or sweep from the row-wise carve (1) is rebuilt
# the saved carve's key: 3 added the task's phrase_rows and the side (a file task with and without --phrase-rows has
# one name and one kind, so key 2 handed a --phrase-rows run the carve made without it)
KEY_VERSION = 3
FIX = "raise --val-fraction, or choose on dev with --select-on dev"


@dataclass(frozen=True)
class Side:
    """What a carve draws: the validation split (it chooses) or the dev set held out of a task's only training rows
    (it reports: NSMC, your file without --eval-file). One rule for both; each its own seed, and its own flag and fix
    when the rows are too few."""

    name: str
    seed: int
    field: str
    fix: str
    labels_checked: bool  # validation refuses a label left with no row on one side; dev reports what it holds


VALIDATION = Side("validation", VAL_SEED, "val_fraction", FIX, True)


@dataclass(frozen=True)
class Carve:
    """Indices into the task's training rows: the validation split, and the training rows left out because a
    validation row contains them or they contain one (phrase tasks only)."""

    val: tuple[int, ...]
    dropped: tuple[int, ...] = ()

    @functools.cached_property
    def out_of_train(self) -> set[int]:
        return set(self.val) | set(self.dropped)


def norm(text: str) -> str:
    """Case and spacing ignored: how rows are compared."""
    return " ".join(str(text).lower().split())


def group_key(row: dict, kind: str) -> Hashable:
    """Rows with the same key are one group (module docstring)."""
    if kind == "qa":
        return norm(row["context"])
    if kind == "token":
        return norm(" ".join(row["tokens"]))
    if row.get("text_pair") is not None:
        return tuple(sorted((norm(row["text"]), norm(row["text_pair"]))))
    return norm(row["text"])


def strata(rows: Sequence, keep: Sequence[int], kind: str) -> dict[int, Hashable]:
    """Each kept row's stratum: its label (classification), its fifth of the score range by rank (regression), or 0."""
    if kind == "classification":
        return {i: rows[i]["label"] for i in keep}
    if kind == "regression":
        ranked = sorted(keep, key=lambda i: rows[i]["label"])
        return {i: 5 * r // max(len(ranked), 1) for r, i in enumerate(ranked)}
    return dict.fromkeys(keep, 0)


def sentences(texts: dict[int, str]) -> list[int]:
    """Rows whose text is no proper word span of another row's (SST-2's 6,885 treebank sentences among its 67,349
    phrases). Word spans of every row in a set: seconds, where a substring scan of every pair would take minutes."""
    unique = set(texts.values())
    inside: set[str] = set()
    for text in unique:
        words = text.split()
        n = len(words)
        for i in range(n):
            for j in range(i + 1, n + 1 if i else n):  # every proper span (the whole row excluded)
                span = " ".join(words[i:j])
                if span in unique:
                    inside.add(span)
    return [i for i, t in texts.items() if t not in inside]


def _fill(units: list[list[int]], label: dict[int, Hashable], target: dict[Hashable, int]) -> list[int]:
    """Take whole units, in the given order, while every stratum stays within its target."""
    got = dict.fromkeys(target, 0)
    out: list[int] = []
    for unit in units:
        need: dict[Hashable, int] = {}
        for i in unit:
            need[label[i]] = need.get(label[i], 0) + 1
        if all(got[s] + k <= target[s] for s, k in need.items()):
            for s, k in need.items():
                got[s] += k
            out.extend(unit)
            if got == target:
                break
    return out


def _targets(label: dict[int, Hashable], n_units: int, frac: float) -> dict[Hashable, int]:
    """Validation rows per stratum: ``frac`` of the units, shared out as the strata share all kept rows."""
    counts: dict[Hashable, int] = {}
    for s in label.values():
        counts[s] = counts.get(s, 0) + 1
    total = sum(counts.values())
    return {s: round(frac * n_units * c / total) for s, c in counts.items()}


def _check_sizes(task, n_keep: int, n_units: int, frac: float, side: Side) -> None:
    unit = "sentences" if getattr(task, "phrase_rows", False) else "training rows"
    if n_units * frac < (2 if side.labels_checked else 1) or n_keep - n_units * frac < 2:
        _too_few(task, n_units, unit, frac, side)


def _too_few(task, n_units: int, unit: str, frac: float, side: Side):
    raise UserError(
        side.field,
        f"task {task.name} has {n_units} {unit}: too few to carve a {frac:g} {side.name} split and still train; "
        f"{side.fix}",
    )


def _check_labels(
    task, frac: float, val: list[int], train: Iterable[int], label: dict[int, Hashable], target: dict
) -> None:
    """Refuse a carve that leaves a label with no validation row or no training row. ``train`` is read once (rows
    left to train, as they are found: no set of them, issue 48 — two sets of every row cost ~40 MB of 400k rows)."""
    in_val, in_train = {label[i] for i in val}, {label[i] for i in train}
    for s in sorted(target, key=str):
        side = "validation" if s not in in_val else "training" if s not in in_train else None
        if side:
            name = task.label_names[s] if task.kind == "classification" and isinstance(s, int) else s
            raise UserError(
                "val_fraction",
                f"--val-fraction {frac:g} leaves label {name!r} of task {task.name} with no {side} "
                f"row once rows that share text are kept together; {FIX}",
            )


def _grouped(rows: Sequence, task, frac: float, keep: list[int], side: Side) -> Carve:
    label = strata(rows, keep, task.kind)
    groups: dict[Hashable, list[int]] = {}
    for i in keep:
        groups.setdefault(group_key(rows[i], task.kind), []).append(i)
    units = list(groups.values())
    val, target = _draw(task, frac, units, label, len(keep), side)
    if side.labels_checked:
        val_set = set(val)
        _check_labels(task, frac, val, (i for i in keep if i not in val_set), label, target)
    return Carve(tuple(val))


def _draw(
    task, frac: float, units: list[list[int]], label: dict[int, Hashable], n_target: int, side: Side
) -> tuple[list, dict]:
    """The side's rows: whole ``units`` in a fixed shuffled order (the side's seed), ``frac`` of ``n_target`` rows per
    stratum (shared out as the strata share all kept rows); and those per-stratum targets."""
    _check_sizes(task, len(label), len(units), frac, side)
    random.Random(side.seed).shuffle(units)
    target = _targets(label, n_target, frac)
    val = sorted(_fill(units, label, target))
    if not val:  # every stratum's share rounded to no row
        _too_few(task, len(units), "groups of rows", frac, side)
    return val, target


def _phrases(rows: Sequence, task, frac: float, keep: list[int], side: Side) -> Carve:
    texts = {i: norm(rows[i]["text"]) for i in keep}
    label = strata(rows, keep, task.kind)
    by_text: dict[str, list[int]] = {}
    for i in sentences(texts):
        by_text.setdefault(texts[i], []).append(i)
    units = [by_text[t] for t in sorted(by_text)]
    val, target = _draw(task, frac, units, label, len(units), side)
    val_set = set(val)
    joined = "\x00".join(texts[i] for i in val)
    inside = {i for i in keep if i not in val_set and texts[i] and texts[i] in joined}
    rest = [i for i in keep if i not in val_set and i not in inside]
    around = _containing(texts, val, rest)
    dropped = sorted(inside | around)
    if side.labels_checked:
        _check_labels(task, frac, val, (i for i in rest if i not in around), label, target)
    return Carve(tuple(val), tuple(dropped))


def _containing(texts: dict[int, str], val: list[int], rest: list[int]) -> set[int]:
    """Training rows that contain a validation sentence (a sentence is no *word span* of another row, but it may
    still be a character substring of one)."""
    joined = "\x00".join(texts[i] for i in rest)
    starts, pos = [], 0
    for i in rest:
        starts.append(pos)
        pos += len(texts[i]) + 1
    out: set[int] = set()
    for v in val:
        at = joined.find(texts[v])
        while at >= 0:
            out.add(rest[bisect.bisect_right(starts, at) - 1])
            at = joined.find(texts[v], at + 1)
    return out


def inside_count(task, train: list, val: list) -> int:
    """How many ``val`` rows occur inside a ``train`` row: as a case-insensitive substring for phrase tasks, as the
    same group key (text, pair, context) otherwise."""
    if getattr(task, "phrase_rows", False):
        joined = "\x00".join(norm(r["text"]) for r in train)
        return sum(1 for r in val if norm(r["text"]) in joined)
    keys = {group_key(r, task.kind) for r in train}
    return sum(1 for r in val if group_key(r, task.kind) in keys)


def _digest(rows: Sequence, task, frac: float, exclude: AbstractSet[int], side: Side) -> str:
    """The carve's key: everything that changes which rows it takes (the rows themselves: their columns, labels and
    order; the fraction, the rows excluded, the grouping rule, the side and its seed)."""
    h = hashlib.sha256()
    phrases = bool(getattr(task, "phrase_rows", False))
    head = [KEY_VERSION, CARVE_VERSION, task.name, task.kind, phrases, frac, sorted(exclude), side.name, side.seed]
    h.update(json.dumps(head).encode())
    for r in rows:
        h.update(json.dumps(r, sort_keys=True, ensure_ascii=False, default=str).encode())
    return h.hexdigest()[:20]


_MEMO: dict[str, Carve] = {}


def carve(rows: Sequence, task, frac: float, exclude: AbstractSet[int] = frozenset(), side: Side = VALIDATION) -> Carve:
    """The validation split of ``rows`` (less ``exclude``, the rows held out as dev), or with ``side`` the dev set
    held out of them: the module docstring's rule, computed once per data and kept in memory and in
    ``raydistill-results/splits/`` (trials run in other processes). Refuses a fraction that leaves a label with no
    validation or no training row."""
    key = _digest(rows, task, frac, exclude, side)
    if key in _MEMO:
        return _MEMO[key]
    path = results_path("splits", f"{task.name}-{side.name}-{key}.json")
    if os.path.isfile(path):
        with open(path, encoding="utf-8") as f:
            saved = json.load(f)
        out = Carve(tuple(saved["val"]), tuple(saved["dropped"]))
    else:
        keep = [i for i in range(len(rows)) if i not in exclude]
        out = (_phrases if getattr(task, "phrase_rows", False) else _grouped)(rows, task, frac, keep, side)
        with contextlib.suppress(OSError):  # a read-only working directory: computed again next time
            os.makedirs(os.path.dirname(path), exist_ok=True)
            write_json_atomic(path, {"val": list(out.val), "dropped": list(out.dropped)}, unique=True)
    _MEMO[key] = out
    return out
