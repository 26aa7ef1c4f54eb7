"""The description of a task on the user's data (``FileData``: files or a dataset, columns, kind, labels, metric,
fingerprint), the names and metrics its kinds know, and the lines ``resolve`` says of it (``report``)."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import Any

from raydistill.tasks import tags as tagging

KINDS = ("classification", "regression", "token")
METRICS = {
    "classification": ("accuracy", "macro_f1", "f1", "mcc"),
    "regression": ("pearson", "spearman"),
    "token": tagging.METRICS,
}
DEFAULT_METRIC = {"classification": "accuracy", "regression": "pearson", "token": "f1"}
# guessed columns, first match wins (the exact name, else the name in any case): a text column and the pair column
# that goes with it; a label column
# (`review`/`sentiment`: the shape of the common movie-review CSVs; `document`: NSMC's own files)
TEXT_GUESS = (
    ("text", "text_pair"),
    ("sentence1", "sentence2"),
    ("sentence", None),
    ("question", "sentence"),
    ("review", None),
    ("document", None),
    ("content", None),
    ("comment", None),
)
LABEL_GUESS = ("label", "labels", "category", "class", "target", "sentiment", "y")
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
    text_column: str = _flag(
        "column of the text (default: text, sentence1, sentence, question, review, document, content or comment, "
        "in any case)"
    )
    text_pair_column: str = _flag("second text of a pair task (default: text_pair / sentence2 beside them)")
    label_column: str = _flag(
        "column of the label (default: label, labels, category, class, target, sentiment or y, in any case)"
    )
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


def metrics_of(kind: str, n_labels: int) -> tuple[str, ...]:
    """What a task of this kind reports; F1 of the positive label only where there is one (two labels)."""
    return tuple(m for m in METRICS[kind] if m != "f1" or n_labels == 2 or kind == "token")


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
