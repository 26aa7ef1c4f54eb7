"""Dataset CLI.

``python -m raydistill.data summary --task TASK [--data-dir DIR]`` prints one JSON object as the last stdout line:
  {"task", "kind", "splits": {split: n_examples}, "labels": {split: ...}, "carve": {...}, "metrics", "main_metric"}
where ``labels`` is, per split: class-name counts (classification), {"min", "max", "mean"} of the score (regression),
entity-type counts (token), {"questions", "paragraphs"} (qa). Splits whose file is missing are left out; the user's
files' splits are named by their flags (``train``, ``eval``, ``test``). ``carve``: the
validation split a run chooses on (data/carve.py), how many training rows it took out and how many of its rows still
occur inside a training row (0).

``python -m raydistill.data split --task TASK [--data-dir DIR] --output DIR`` writes ``train.jsonl``,
``validation.jsonl`` and ``dev.jsonl``: the rows a run of the task trains on, chooses on and reports on.
"""

from __future__ import annotations

import json
import os
import shutil
from collections import Counter

from raydistill.commands.cli import HelpFormatter, Parser, add_overwrite, cli
from raydistill.common.errors import UserError
from raydistill.tasks import SPLITS, get_task, load_split
from raydistill.tasks.glue import MissingData


def label_summary(task, examples: list[dict]) -> dict:
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


def _task(task_name: str | None, data: dict | None = None):
    """The built-in task and its splits, or the user's files (``--train-file``: the data section, resolved as a run
    resolves it) and the splits they give."""
    if not data:
        task = get_task(task_name or "")
        return task, SPLITS[task.name]
    from raydistill.config.schema import RunConfig, task_of

    cfg = RunConfig.from_dict({"task": task_name, "teacher": "-", "data": data})
    return task_of(cfg), cfg.data.splits()


def summary(task_name: str | None, data_dir, val_fraction: float = 0.1, data: dict | None = None) -> dict:
    task, names = _task(task_name, data)
    splits, labels, missing = {}, {}, []
    for split in names:
        try:
            examples = load_split(task, data_dir, split)
        except MissingData as e:
            missing.append(str(e).split(": ", 1)[-1])
            continue
        name = {"validation": "eval"}.get(split, split) if data else split  # a file's split: the flag that named it
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


def split(args) -> dict:
    """Write the rows a run trains on, chooses on and reports on, one JSON object per row."""
    from raydistill.commands.args import data_section
    from raydistill.common.outputs import publish, staging
    from raydistill.config.schema import RunConfig, task_of
    from raydistill.data.splits import train_val_dev

    train = {"val_fraction": args.val_fraction}
    cfg = RunConfig.from_dict(
        {"task": args.task, "teacher": "-", "data_dir": args.data_dir, "train": train, "data": data_section(args)}
    )
    task = task_of(cfg)
    parts = dict(zip(("train", "validation", "dev"), train_val_dev(cfg, task), strict=True))
    tmp = staging(args.output)
    try:
        for name, rows in parts.items():
            with open(os.path.join(tmp, f"{name}.jsonl"), "w", encoding="utf-8") as f:
                f.writelines(json.dumps(_row(task, r), ensure_ascii=False) + "\n" for r in rows)
        publish(tmp, args.output, "raydistill data split")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)  # ours: empty once published
    return {"task": task.name, "output": os.path.abspath(args.output), **{k: len(v) for k, v in parts.items()}}


def _data_dir_arg(p: Parser) -> None:
    from raydistill.commands.args import add_data_args

    p.add_argument(
        "--task", help="task name (python -m raydistill list tasks); default: none, --train-file names your own data"
    )
    p.add_argument(
        "--data-dir",
        default=None,
        help="local copy of the data: the GLUE root or the task's own folder (default: the Hugging Face hub)",
    )
    p.add_argument(
        "--val-fraction",
        type=float,
        default=0.1,
        help="share of the training rows (SST-2: of its sentences) carved as the validation split, as a run's "
        "--val-fraction",
    )
    add_data_args(p)


@cli
def main(argv=None):
    parser = Parser(
        prog="python -m raydistill.data",
        formatter_class=HelpFormatter,
        description="Look at a task's data before training on it.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="command")
    summary_help = "count the examples and labels of every split of a task"
    p = sub.add_parser(
        "summary",
        help=summary_help,
        formatter_class=HelpFormatter,
        description=(
            f"{summary_help[0].upper()}{summary_help[1:]}, and print them as one JSON object on the last line of "
            f"stdout "
            "(splits whose file is missing are left out)."
        ),
    )
    _data_dir_arg(p)
    split_help = "write the rows a run trains on, chooses on and reports on (train, validation, dev .jsonl)"
    p = sub.add_parser(
        "split",
        help=split_help,
        formatter_class=HelpFormatter,
        description=f"{split_help[0].upper()}{split_help[1:]}: one JSON object per row, labels by name.",
    )
    _data_dir_arg(p)
    p.add_argument("--output", required=True, help="folder to write the three files into (empty or new)")
    add_overwrite(p, "raydistill data split")
    args = parser.parse_args(argv)
    from raydistill.commands.args import data_section
    from raydistill.tasks.files import report

    if args.command == "split":
        out = split(args)
    else:
        out = summary(args.task, args.data_dir, args.val_fraction, data_section(args))
    report()  # the columns guessed in the user's files
    print(json.dumps(out, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
