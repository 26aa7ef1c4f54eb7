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

from raydistill.commands.args import TASK_OR_FILES, add_data_args
from raydistill.commands.cli import HelpFormatter, Parser, add_overwrite, cli
from raydistill.commands.flags import add_fields, data_of, flag, request_from
from raydistill.data.overview import summary, write_split
from raydistill.tasks.filedata import FileData


@dataclass(frozen=True)
class DataRequest:
    """What one look at a task's data is asked to do: the data command's flags as typed values (``command``: the
    sub-command, ``summary`` or ``split``; ``output`` and ``overwrite``: ``split``'s own). A field with ``help`` in
    its metadata is a flag of the command, generated from it."""

    command: str = "summary"  # the sub-command's name (argparse's sub-parsers), no flag
    task: str | None = field(default=None, metadata=TASK_OR_FILES)
    data_dir: str | None = field(
        default=None,
        metadata=flag("local copy of the data: the GLUE root or the task's own folder (default: the Hugging Face hub)"),
    )
    val_fraction: float = field(
        default=0.1,
        metadata=flag(
            "share of the training rows (SST-2: of its sentences) carved as the validation split, as a run's "
            "--val-fraction"
        ),
    )
    data: FileData = field(default_factory=FileData)  # the user's files or dataset (empty: a built-in task)
    output: str = field(default="", metadata=flag("folder to write the three files into (empty or new)", required=True))
    overwrite: bool = False  # its flag: cli.add_overwrite, every writing command's


D = DataRequest()  # the flags' defaults: the request's own


def split(r: DataRequest) -> dict:
    """Write the rows a run trains on, chooses on and reports on, one JSON object per row."""
    from raydistill.config.schema import RunConfig

    train = {"val_fraction": r.val_fraction}
    cfg = RunConfig.from_dict({"task": r.task, "teacher": "-", "data_dir": r.data_dir, "train": train, "data": r.data})
    return write_split(cfg, r.output)


def execute(r: DataRequest) -> dict:
    """The sub-command ``r`` names: the summary, or the rows written; what ``main`` prints."""
    from raydistill.config.schema import TrainConfig
    from raydistill.tasks.files import report

    TrainConfig(val_fraction=r.val_fraction).validate()  # summary's too: it carves validation as a run would
    out = split(r) if r.command == "split" else summary(r.task, r.data_dir, r.val_fraction, r.data)
    report()  # the columns guessed in the user's files
    return out


def _data_dir_arg(p: Parser) -> None:
    add_fields(p, DataRequest, ("task", "data_dir", "val_fraction"), D)
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
    add_fields(p, DataRequest, ("output",), D)
    add_overwrite(p, "raydistill data split")
    args = parser.parse_args(argv)
    given = {"output": getattr(args, "output", ""), "overwrite": getattr(args, "overwrite", False)}  # split's own
    out = execute(request_from(DataRequest, args, data=data_of(args), **given))
    print(json.dumps(out, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
