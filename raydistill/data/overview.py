"""A task's data as a run sees it, for ``raydistill data``: ``summary`` counts the examples and labels of every split
and the validation split a run carves (``carve``), ``write_split`` writes the rows a run trains on, chooses on and
reports on. A built-in task by name, or the user's data described as a run describes it (its ``data`` section)."""

from __future__ import annotations

import json
import os
import shutil
from collections import Counter
from collections.abc import Sequence

from raydistill.common.errors import UserError
from raydistill.tasks import SPLITS, get_task, load_split
from raydistill.tasks.files import FileData
from raydistill.tasks.glue import MissingData


def label_summary(task, examples: Sequence[dict]) -> dict:
    if task.kind == "classification":
        counts = Counter(task.label_names[e["label"]] for e in examples)
        return {name: counts.get(name, 0) for name in task.label_names}
    if task.kind == "regression":
        ys = [e["label"] for e in examples]
        return {"min": min(ys), "max": max(ys), "mean": round(sum(ys) / len(ys), 4)}
    if task.kind == "token":
        from seqeval.metrics.sequence_labeling import get_entities

        counts = Counter(t for e in examples for t, _, _ in get_entities([task.label_names[i] for i in e["labels"]]))
        return dict(sorted(counts.items()))
    return {"questions": len(examples), "paragraphs": len({e["context"] for e in examples})}


def _task(task_name: str | None, data: FileData | None = None):
    """The built-in task and its splits, or the user's files (``--train-file``: the data section, resolved as a run
    resolves it) and the splits they give."""
    if data is None or not data.given:
        task = get_task(task_name or "")
        return task, SPLITS[task.name]
    from raydistill.config.schema import RunConfig, task_of

    cfg = RunConfig.from_dict({"task": task_name, "teacher": "-", "data": data})
    return task_of(cfg), cfg.data.splits()


def summary(task_name: str | None, data_dir, val_fraction: float = 0.1, data: FileData | None = None) -> dict:
    task, names = _task(task_name, data)
    splits, labels, missing = {}, {}, []
    for split in names:
        try:
            examples = load_split(task, data_dir, split)
        except MissingData as e:
            missing.append(str(e).split(": ", 1)[-1])
            continue
        # a file's split: the flag that named it
        name = {"validation": "eval"}.get(split, split) if data and data.given else split
        splits[name], labels[name] = len(examples), label_summary(task, examples)
    if not splits:
        raise UserError("data_dir", f"no split of {task.name} found: {missing[0]}")
    return {
        "task": task.name,
        "kind": task.kind,
        "splits": splits,
        "labels": labels,
        **({"carve": carve_summary(task, data_dir, val_fraction)} if "train" in splits and task.labelled else {}),
        "metrics": list(task.metrics),
        "main_metric": task.main_metric,
    }


def carve_summary(task, data_dir, val_fraction: float) -> dict:
    """The validation split a run of ``task`` chooses on: its size, the training rows the carve took out, and how many
    validation rows still occur inside a training row (as a substring for phrase tasks, the same text or pair
    otherwise)."""
    from raydistill.data.carve import carve, inside_count
    from raydistill.data.splits import split_train

    try:
        rows, held = split_train(task, data_dir)
        cut = carve(rows, task, val_fraction, held.out_of_train)
    except UserError as e:  # too few rows to carve: the summary still counts the splits, and says why
        return {"val_fraction": val_fraction, "error": str(e)}
    train = [r for i, r in enumerate(rows) if i not in held.out_of_train and i not in cut.out_of_train]
    return {
        "val_fraction": val_fraction,
        "validation": len(cut.val),
        "dropped_from_train": len(cut.dropped),
        "validation_inside_train": inside_count(task, train, [rows[i] for i in cut.val]),
    }


def _row(task, r: dict) -> dict:
    """A row as ``data split`` writes it: label names instead of indices."""
    if task.kind == "classification":
        out = {"text": r["text"], **({"text_pair": r["text_pair"]} if r.get("text_pair") is not None else {})}
        return {**out, "label": task.label_names[r["label"]]}
    if task.kind == "token":
        return {"tokens": r["tokens"], "labels": [task.label_names[i] for i in r["labels"]]}
    if task.kind == "regression":
        return {k: r[k] for k in ("text", "text_pair", "label") if r.get(k) is not None}
    return dict(r)


def write_split(cfg, output: str) -> dict:
    """Write the rows a run of ``cfg`` trains on, chooses on and reports on to ``output``, one JSON object per row
    (``train.jsonl``, ``validation.jsonl``, ``dev.jsonl``); their counts."""
    from raydistill.common.outputs import publish, staging
    from raydistill.config.schema import task_of
    from raydistill.data.splits import train_val_dev

    task = task_of(cfg)
    parts = dict(zip(("train", "validation", "dev"), train_val_dev(cfg, task), strict=True))
    tmp = staging(output)
    try:
        for name, rows in parts.items():
            with open(os.path.join(tmp, f"{name}.jsonl"), "w", encoding="utf-8") as f:
                f.writelines(json.dumps(_row(task, r), ensure_ascii=False) + "\n" for r in rows)
        publish(tmp, output, "raydistill data split")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)  # ours: empty once published
    return {"task": task.name, "output": os.path.abspath(output), **{k: len(v) for k, v in parts.items()}}
