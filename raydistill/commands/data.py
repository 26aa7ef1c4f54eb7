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
from dataclasses import dataclass, field

from raydistill.commands.cli import HelpFormatter, Parser, add_overwrite, cli
from raydistill.commands.flags import data_of, request_from
from raydistill.data.overview import summary, write_split
from raydistill.tasks.filedata import FileData


@dataclass(frozen=True)
class DataRequest:
    """What one look at a task's data is asked to do: the data command's flags as typed values (``command``: the
    sub-command, ``summary`` or ``split``; ``output`` and ``overwrite``: ``split``'s own)."""

    command: str = "summary"
    task: str | None = None
    data_dir: str | None = None
    val_fraction: float = 0.1
    data: FileData = field(default_factory=FileData)  # the user's files or dataset (empty: a built-in task)
    output: str = ""
    overwrite: bool = False


D = DataRequest()  # the flags' defaults: the request's own


def split(r: DataRequest) -> dict:
    """Write the rows a run trains on, chooses on and reports on, one JSON object per row."""
    from raydistill.config.schema import RunConfig

    train = {"val_fraction": r.val_fraction}
    cfg = RunConfig.from_dict({"task": r.task, "teacher": "-", "data_dir": r.data_dir, "train": train, "data": r.data})
    return write_split(cfg, r.output)


def execute(r: DataRequest) -> dict:
    """The sub-command ``r`` names: the summary, or the rows written; what ``main`` prints."""
    from raydistill.tasks.files import report

    out = split(r) if r.command == "split" else summary(r.task, r.data_dir, r.val_fraction, r.data)
    report()  # the columns guessed in the user's files
    return out


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
        default=D.val_fraction,
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
    given = {"output": getattr(args, "output", ""), "overwrite": getattr(args, "overwrite", False)}  # split's own
    out = execute(request_from(DataRequest, args, data=data_of(args), **given))
    print(json.dumps(out, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
