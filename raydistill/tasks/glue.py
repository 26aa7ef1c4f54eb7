"""GLUE loaders (local TSV copies or the hub), plus the file helpers the Korean loaders share.

TSVs are split on tabs by hand (no CSV quoting, like ``quoting=csv.QUOTE_NONE``) because MRPC, QNLI and STS-B have
fields that start with a stray ``"``; files are read as ``utf-8-sig`` because MRPC's header starts with a BOM.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from raydistill.common.errors import UserError
from raydistill.common.hub import hub_reachable

SPLIT_ALIASES = {"dev": "validation", "valid": "validation", "eval": "validation"}


class MissingData(UserError):
    """A data file that is not there (``summary`` skips such splits; loaders let it propagate)."""


# --------------------------------------------------------------------------- shared helpers


def norm_split(task, split: str, splits: tuple[str, ...]) -> str:
    split = SPLIT_ALIASES.get(split, split)
    if split == "validation" and "validation" not in splits and task.eval_split in splits:
        split = task.eval_split  # MNLI: "validation" means validation_matched
    if split not in splits:
        raise UserError("split", f"task {task.name} has no split {split!r}; known: {', '.join(splits)}")
    return split


def find_file(data_dir, subdirs, filename: str, layout: str) -> Path:
    """First ``DIR/<subdir>/<filename>`` that exists, so both a task folder and its parent/root are accepted."""
    root = Path(os.path.expanduser(str(data_dir)))
    if not root.is_dir():
        raise UserError("data_dir", f"{root} is not a directory; expected layout: {layout}")
    tried = [root / d / filename if d else root / filename for d in subdirs]
    for path in tried:
        if path.is_file():
            return path
    raise MissingData(
        "data_dir", f"{filename} not found (looked for {', '.join(map(str, tried))}); expected layout: {layout}"
    )


def read_lines(path: Path):
    """Yield ``(line_number, line)`` without the line ending; only ``\\n`` ends a line (CRLF is stripped)."""
    with open(path, encoding="utf-8-sig", newline="\n") as f:
        for n, line in enumerate(f, 1):
            yield n, line.rstrip("\r\n")


def bad_label(path, lineno, value, allowed) -> UserError:
    return UserError("label", f"{path} line {lineno}: label {value!r} is not one of {', '.join(map(str, allowed))}")


def check_nonempty(examples: list, path, split: str) -> list:
    if not examples:
        raise UserError("split", f"{path} has no examples for split {split!r} (empty file?)")
    return examples


def hub_dataset(task, split: str):
    """``datasets.load_dataset`` for the task's hub copy, failing fast (and usefully) when offline."""
    if not hub_reachable():
        raise UserError(
            "data_dir",
            "the Hugging Face hub is unreachable; pass --data-dir DIR pointing at a local copy "
            "(e.g. the GLUE folder with SST-2/train.tsv ...)",
        )
    import datasets

    path, config = task.hub
    return datasets.load_dataset(path, config, split=split)


# --------------------------------------------------------------------------- GLUE

# task -> (folder, text column, pair column, label column); columns are header names, or indices for headerless CoLA
COLUMNS = {
    "cola": ("CoLA", 3, None, 1),
    "sst2": ("SST-2", "sentence", None, "label"),
    "mrpc": ("MRPC", "#1 String", "#2 String", "Quality"),
    "stsb": ("STS-B", "sentence1", "sentence2", "score"),
    "qqp": ("QQP", "question1", "question2", "is_duplicate"),
    "mnli": ("MNLI", "sentence1", "sentence2", "gold_label"),
    "qnli": ("QNLI", "question", "sentence", "label"),
    "rte": ("RTE", "sentence1", "sentence2", "label"),
    "wnli": ("WNLI", "sentence1", "sentence2", "label"),
}
# hub column names (nyu-mll/glue), where they differ from ("sentence1", "sentence2")
HUB_COLUMNS = {
    "cola": ("sentence", None),
    "sst2": ("sentence", None),
    "qqp": ("question1", "question2"),
    "mnli": ("premise", "hypothesis"),
    "qnli": ("question", "sentence"),
}
FILES = {
    "train": "train.tsv",
    "validation": "dev.tsv",
    "validation_matched": "dev_matched.tsv",
    "validation_mismatched": "dev_mismatched.tsv",
}


def splits(task) -> tuple[str, ...]:
    """GLUE test sets are unlabelled, so only train and dev splits exist."""
    if task.name == "mnli":
        return ("train", "validation_matched", "validation_mismatched")
    return ("train", "validation")


def load(task, data_dir, split: str) -> list[dict]:
    split = norm_split(task, split, splits(task))
    if data_dir is None:
        return _from_hub(task, split)
    folder, text_col, pair_col, label_col = COLUMNS[task.name]
    layout = f"DIR/{folder}/{FILES[split]} (GLUE layout, as written by download_glue_data.py)"
    path = find_file(data_dir, (folder, "", f"glue/{folder}", f"glue_data/{folder}"), FILES[split], layout)
    return check_nonempty(read_glue_tsv(task, path, text_col, pair_col, label_col), path, split)


def _label(task, raw: str, path, lineno):
    if task.kind == "regression":
        try:
            return float(raw)
        except ValueError:
            raise UserError("label", f"{path} line {lineno}: score {raw!r} is not a number") from None
    names = task.label_names
    if raw in names:
        return names.index(raw)
    if raw.isdigit() and int(raw) < len(names):
        return int(raw)
    raise bad_label(path, lineno, raw, [*range(len(names)), *names])


def read_glue_tsv(task, path: Path, text_col, pair_col, label_col) -> list[dict]:
    lines = read_lines(path)
    idx: Sequence[int | None]  # positions of the text, pair and label columns
    if isinstance(text_col, int):  # headerless (CoLA): fixed positions
        ncols, idx = 4, (text_col, pair_col, label_col)
    else:
        try:
            _, head = next(lines)
        except StopIteration:
            raise UserError("split", f"{path} is empty") from None
        header = head.split("\t")
        missing = [c for c in (text_col, pair_col, label_col) if c is not None and c not in header]
        if missing:
            raise UserError("data", f"{path}: header has no column {missing[0]!r} (header: {head[:120]!r})")
        ncols, idx = len(header), [header.index(c) if c is not None else None for c in (text_col, pair_col, label_col)]
    out = []
    for n, line in lines:
        if not line.strip():
            continue
        row = line.split("\t")
        if len(row) != ncols:
            if task.name == "qqp":  # a few QQP rows are broken; transformers' QqpProcessor skips them too
                continue
            raise UserError("data", f"{path} line {n}: expected {ncols} tab-separated fields, got {len(row)}")
        t, p, lab = idx
        assert t is not None and lab is not None  # every task has a text and a label column
        out.append(
            {
                "text": row[t],
                "text_pair": row[p] if p is not None else None,
                "label": _label(task, row[lab].strip(), path, n),
            }
        )
    return out


def _from_hub(task, split: str) -> list[dict]:
    ds = hub_dataset(task, split)
    a, b = HUB_COLUMNS.get(task.name, ("sentence1", "sentence2"))
    cast = float if task.kind == "regression" else int
    return [
        {"text": r[a], "text_pair": r[b] if b else None, "label": cast(r["label"])}
        for r in ds
        if task.kind == "regression" or r["label"] >= 0
    ]
