"""Task registry: every task the package can train or distill, with its loader, labels and metrics.

All metrics are reported on a 0-1 scale (KorQuAD EM/F1 too, unlike the official script's 0-100).
"""

from __future__ import annotations

from collections.abc import Sequence

from raydistill.common.errors import UserError
from raydistill.tasks import glue, korean
from raydistill.tasks.base import KINDS, Task
from raydistill.tasks.files import FileData, file_task

NLI2 = ("entailment", "not_entailment")


def _glue(
    name,
    labels,
    metrics=("accuracy",),
    main="accuracy",
    kind="classification",
    pair=True,
    eval_split="validation",
    phrase_rows=False,
):
    return Task(
        name=name,
        kind=kind,
        label_names=labels,
        metrics=metrics,
        main_metric=main,
        eval_split=eval_split,
        language="en",
        loader=glue.load,
        hub=("nyu-mll/glue", name),
        pair=pair,
        phrase_rows=phrase_rows,
    )


_NER = ("f1", "precision", "recall")
_ALL = [
    _glue("cola", ("unacceptable", "acceptable"), ("mcc",), "mcc", pair=False),
    _glue("sst2", ("negative", "positive"), pair=False, phrase_rows=True),
    _glue("mrpc", ("not_equivalent", "equivalent"), ("accuracy", "f1")),
    _glue("stsb", (), ("pearson", "spearman"), "pearson", kind="regression"),
    _glue("qqp", ("not_duplicate", "duplicate"), ("accuracy", "f1")),
    _glue("mnli", ("entailment", "neutral", "contradiction"), eval_split="validation_matched"),
    _glue("qnli", NLI2),
    _glue("rte", NLI2),
    _glue("wnli", ("not_entailment", "entailment")),
    Task(
        "nsmc",
        "classification",
        ("negative", "positive"),
        ("accuracy",),
        "accuracy",
        "test",
        "ko",
        korean.load_nsmc,
        hub=("e9t/nsmc", None),
    ),
    Task(
        "korquad",
        "qa",
        (),
        ("exact_match", "f1"),
        "f1",
        "validation",
        "ko",
        korean.load_korquad,
        hub=("KorQuAD/squad_kor_v1", None),
        pair=True,
    ),
    Task(
        "kmou_ner",
        "token",
        korean.ner_labels(korean.NER_TYPES["kmou_ner"]),
        _NER,
        "f1",
        "validation",
        "ko",
        korean.load_kmou,
    ),
    Task(
        "klue_ner",
        "token",
        korean.ner_labels(korean.NER_TYPES["klue_ner"]),
        _NER,
        "f1",
        "validation",
        "ko",
        korean.load_klue,
        hub=("klue/klue", "ner"),
    ),
]


def _no_dataset(task, data_dir, split):
    raise UserError(
        "task",
        "general distillation reads its text from --unlabeled-text (one text per line); it has no dataset to load",
    )


# general distillation (DistilBERT, TinyBERT stage 1): masked-LM on raw text, no gold labels
GENERAL = Task(
    "general", "mlm", (), ("mlm_accuracy", "mlm_loss"), "mlm_accuracy", "validation", "any", _no_dataset, labelled=False
)
_ALL.append(GENERAL)
TASKS: dict[str, Task] = {t.name: t for t in _ALL}
assert all(t.kind in KINDS for t in _ALL)

SPLITS: dict[str, tuple[str, ...]] = {
    **{n: glue.splits(TASKS[n]) for n in glue.COLUMNS},
    "nsmc": tuple(korean.NSMC_FILES),
    "korquad": tuple(korean.KORQUAD_FILES),
    "kmou_ner": tuple(korean.KMOU_FILES),
    "klue_ner": tuple(korean.KLUE_FILES),
    "general": ("train", "validation"),
}


def get_task(name: str) -> Task:
    """Look a task up by name; case, ``-`` and ``_`` are ignored so ``SST-2`` and ``kmou-ner`` work too."""
    key = str(name).lower().replace("-", "").replace("_", "")
    for task in TASKS.values():
        if task.name.replace("_", "") == key:
            return task
    raise UserError("task", f"unknown task {name!r}; known: {', '.join(TASKS)}")


def make_task(name: str, data: FileData | None = None) -> Task:
    """The task a config describes: the user's data when ``data`` names it (files or a dataset), else the built-in
    ``name``."""
    return file_task(data) if data is not None and data.given else get_task(name)


def check_labelled(task: Task, command: str) -> None:
    """Refuse a task without labels (``general``) in a command that trains or scores on labels: general distillation
    runs through ``raydistill.distill`` alone."""
    if not task.labelled:
        raise UserError(
            "task",
            f"{command} needs a labelled task (python -m raydistill list tasks); general "
            "distillation runs through python -m raydistill.distill --task general --unlabeled-text FILE",
        )


def load_split(task: Task | str, data_dir, split: str) -> Sequence[dict]:
    """Examples of one split (see base.py for their format); ``data_dir=None`` means the Hugging Face hub."""
    task = get_task(task) if isinstance(task, str) else task
    return task.loader(task, data_dir, split)


__all__ = ["GENERAL", "TASKS", "SPLITS", "FileData", "Task", "check_labelled", "get_task", "load_split", "make_task"]
