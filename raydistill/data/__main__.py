"""Dataset CLI: ``python -m raydistill.data summary --task TASK [--data-dir DIR]``.

Prints one JSON object as the last stdout line:
  {"task", "kind", "splits": {split: n_examples}, "labels": {split: ...}, "metrics", "main_metric"}
where ``labels`` is, per split: class-name counts (classification), {"min", "max", "mean"} of the score (regression),
entity-type counts (token), {"questions", "paragraphs"} (qa). Splits whose file is missing are left out.
"""

from __future__ import annotations

import json
from collections import Counter

from raydistill.commands.cli import HelpFormatter, Parser, cli
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


def summary(task_name: str, data_dir) -> dict:
    task = get_task(task_name)
    splits, labels, missing = {}, {}, []
    for split in SPLITS[task.name]:
        try:
            examples = load_split(task, data_dir, split)
        except MissingData as e:
            missing.append(str(e).split(": ", 1)[-1])
            continue
        splits[split], labels[split] = len(examples), label_summary(task, examples)
    if not splits:
        raise UserError("data_dir", f"no split of {task.name} found: {missing[0]}")
    return {
        "task": task.name,
        "kind": task.kind,
        "splits": splits,
        "labels": labels,
        "metrics": list(task.metrics),
        "main_metric": task.main_metric,
    }


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
    p.add_argument("--task", required=True, help="task name (python -m raydistill list tasks)")
    p.add_argument(
        "--data-dir",
        default=None,
        help="local copy of the data: the GLUE root or the task's own folder (default: the Hugging Face hub)",
    )
    args = parser.parse_args(argv)
    print(json.dumps(summary(args.task, args.data_dir), ensure_ascii=False))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
