"""The Task record every loader, encoder and metric agrees on.

Example formats (what ``Task.load`` returns, one dict per example; a user's text file's held by column, each row
read as that dict: ``examples.Examples``):
  classification: {"text": str, "text_pair": str | None, "label": int}     label = index into label_names
  regression:     {"text": str, "text_pair": str | None, "label": float}
  token:          {"tokens": list[str], "labels": list[int]}                 labels = indices into label_names
  qa:             {"id": str, "question": str, "context": str,
                   "answers": {"text": list[str], "answer_start": list[int]}}
  mlm:            {"text": str}  (general distillation: raw text from --unlabeled-text, no labels)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

KINDS = ("classification", "regression", "token", "qa", "mlm")


@dataclass(frozen=True)
class Task:
    name: str
    kind: str  # one of KINDS
    label_names: tuple[str, ...]  # classification / token tags; () for regression and qa
    metrics: tuple[str, ...]  # metric names this task reports, e.g. ("accuracy", "f1")
    main_metric: str  # what sweeps optimise (higher is better)
    eval_split: str  # split used as the dev set: "validation" or "test"
    language: str  # "en" | "ko"
    loader: Callable  # loader(task, data_dir | None, split) -> a sequence of dicts (``examples.Examples``, lists)
    hub: tuple[str, str | None] = ("", None)  # (datasets path, config name) for the hub default
    pair: bool = False  # sentence-pair task
    labelled: bool = True  # gold labels: a hard loss and a task head (False: general distillation)
    # training rows are phrases cut from whole sentences and dev holds whole sentences (SST-2): the validation split
    # is carved by sentence (data/carve.py)
    phrase_rows: bool = False

    @property
    def num_labels(self) -> int:
        return 1 if self.kind == "regression" else len(self.label_names)
