"""Which examples a run trains and evaluates on: limits, held-out validation, augmented training data."""
from __future__ import annotations

import json
import os
import random

from ..errors import UserError

HOLDOUT = 0.1  # share of train held out as validation when a task has no separate dev split


def holdout_split(examples: list, seed: int, frac: float = HOLDOUT) -> tuple[list, list]:
    idx = list(range(len(examples)))
    random.Random(seed).shuffle(idx)
    n_val = max(1, int(len(examples) * frac))
    val = set(idx[:n_val])
    return [e for i, e in enumerate(examples) if i not in val], [examples[i] for i in sorted(val)]


def train_and_eval_examples(cfg, task) -> tuple[list, list]:
    """Train and dev examples for one run.

    two_stage holds out 10% of train as validation when the task has no dev split of its own (NSMC: its
    labelled test set stays untouched for the final number). ``augment_dir`` swaps the training examples
    for the augmented set written by ``raydistill.distill.augment`` (originals included).
    """
    if task.kind == "mlm":
        return general_examples(cfg)
    train = task.loader(task, cfg.data_dir, "train")
    if cfg.distill.method == "two_stage" and task.eval_split == "test":
        train, dev = holdout_split(train, cfg.train.seed)
    else:
        dev = task.loader(task, cfg.data_dir, task.eval_split)
    if cfg.augment_dir:
        train = read_jsonl(os.path.join(cfg.augment_dir, "train.jsonl"), "augment_dir")
    if cfg.train.train_limit:
        train = train[: cfg.train.train_limit]
    if cfg.train.eval_limit:
        dev = dev[: cfg.train.eval_limit]
    for name, split in (("train", train), ("validation", dev)):
        if not split:
            raise UserError("data_dir", f"the {name} split of task {task.name} is empty; check the data files")
    return train, dev


def general_examples(cfg) -> tuple[list, list]:
    """Unlabelled text (one text per line) for general distillation; 10% held out to report MLM loss."""
    path = cfg.unlabeled_text
    if not path or not os.path.isfile(path):
        raise UserError("unlabeled_text", f"{path!r} is not a file; pass --unlabeled-text FILE (one text per line)")
    with open(path, encoding="utf-8") as f:
        texts = [{"text": line.strip()} for line in f if line.strip()]
    if len(texts) < 2:
        raise UserError("unlabeled_text", f"{path} has fewer than 2 non-empty lines")
    train, dev = holdout_split(texts, cfg.train.seed)
    if cfg.train.train_limit:
        train = train[: cfg.train.train_limit]
    if cfg.train.eval_limit:
        dev = dev[: cfg.train.eval_limit]
    return train, dev


def read_jsonl(path: str, field: str) -> list:
    if not os.path.isfile(path):
        raise UserError(field, f"{path} does not exist; write it with python -m raydistill.distill.augment")
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def data_fingerprint(cfg) -> str:
    """Short hash of the exact train and dev examples a run sees (after limits, hold-out, augmentation)."""
    import hashlib

    if cfg.task == "general":
        train, dev = general_examples(cfg)
    else:
        from ..tasks import get_task

        train, dev = train_and_eval_examples(cfg, get_task(cfg.task))
    blob = json.dumps([train, dev], sort_keys=True, ensure_ascii=False, default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:16]
