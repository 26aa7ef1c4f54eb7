"""``raydistill COMMAND`` (the console command) and ``python -m raydistill COMMAND``: each command run by its own
parser and ``main``, its usage, help and errors naming it ``raydistill COMMAND``; ``python -m raydistill.COMMAND``
runs the same."""

from __future__ import annotations

import importlib
import sys
import textwrap
from typing import NamedTuple


class Command(NamedTuple):
    module: str  # whose ``main`` runs it
    args: str  # its arguments in short, for the listing
    as_module: str  # the same command as ``python -m``
    what: str


COMMANDS = {
    "list": Command(
        "raydistill.commands.list",
        "[spaces|methods|tasks|inits]",
        "python -m raydistill list",
        "what the package ships, one line each",
    ),
    "data": Command(
        "raydistill.commands.data",
        "summary|split --task T",
        "python -m raydistill.data",
        "count the examples and labels of a task's data, or write the rows a run sees",
    ),
    "finetune": Command(
        "raydistill.commands.finetune",
        "--model M --output DIR",
        "python -m raydistill.finetune",
        "fine-tune a teacher on a task",
    ),
    "distill": Command(
        "raydistill.commands.distill",
        "--method M --teacher DIR",
        "python -m raydistill.distill",
        "one distillation run",
    ),
    "augment": Command(
        "raydistill.commands.augment",
        "--task T --output DIR",
        "python -m raydistill.distill.augment",
        "TinyBERT data augmentation of a task's training rows",
    ),
    "sweep": Command(
        "raydistill.commands.sweep", "SPACE", "python -m raydistill.sweep", "search a space of distillation runs"
    ),
    "best": Command(
        "raydistill.commands.best",
        "--experiment NAME",
        "python -m raydistill.best",
        "pick, export and register the best student of a sweep",
    ),
    "evaluate": Command(
        "raydistill.commands.evaluate",
        "--model DIR --task T",
        "python -m raydistill.evaluate",
        "score a saved model on a task's dev set",
    ),
}


def usage() -> str:
    rows = [(f"raydistill {name} {c.args}", c.what) for name, c in COMMANDS.items()]
    width = max(len(r[0]) for r in rows)
    return (
        "raydistill: knowledge distillation of BERT-like encoders.\n\nusage: raydistill COMMAND [options]  (each "
        "command takes --help)\n\ncommands:\n"
        + "\n".join(f"  {cmd.ljust(width)}  {what}" for cmd, what in rows)
        + "\n\n"
        + "each runs as a module too:\n"
        + textwrap.fill(
            ", ".join(c.as_module.replace(" ", "\xa0") for c in COMMANDS.values()),
            100,
            initial_indent="  ",
            subsequent_indent="  ",
        ).replace("\xa0", " ")
        + "\nand from Python: raydistill.api (run_sweep, run_distill, finetune_teacher, best_student)"
    )


def main(argv: list[str] | None = None) -> int:
    """Run ``raydistill COMMAND ARGS…``; exit status 0, or what the command exits with (2: bad input)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(usage())
        return 0
    if argv[0] not in COMMANDS:
        print(
            f"error: command: unknown command {argv[0]!r}; one of {', '.join(COMMANDS)} (see raydistill --help)",
            file=sys.stderr,
        )
        return 2
    from raydistill.commands.cli import named

    with named(f"raydistill {argv[0]}"):
        importlib.import_module(COMMANDS[argv[0]].module).main(argv[1:])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
