"""``python -m raydistill``: the commands, and ``python -m raydistill list`` (what the package ships)."""

from __future__ import annotations

import sys

COMMANDS = (
    ("list", "python -m raydistill list [spaces|methods|tasks|inits]", "what the package ships, one line each"),
    ("data", "python -m raydistill.data summary --task T", "count the examples and labels of a task's data"),
    ("finetune", "python -m raydistill.finetune", "fine-tune a teacher on a task"),
    ("distill", "python -m raydistill.distill", "one distillation run"),
    ("augment", "python -m raydistill.distill.augment", "TinyBERT data augmentation of a task's training rows"),
    ("sweep", "python -m raydistill.sweep SPACE", "search a space of distillation runs"),
    ("best", "python -m raydistill.best", "pick, export and register the best student of a sweep"),
    ("evaluate", "python -m raydistill.evaluate", "score a saved model on a task's dev set"),
)


def usage() -> str:
    width = max(len(c) for _, c, _ in COMMANDS)
    return "raydistill: knowledge distillation of BERT-like encoders.\n\ncommands (each takes --help):\n" + "\n".join(
        f"  {c.ljust(width)}  {what}" for _, c, what in COMMANDS
    )


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "list":
        from raydistill.commands.listing import main as list_main

        return list_main(argv[1:])
    if argv and argv[0] not in ("-h", "--help"):
        print(
            f"error: command: unknown command {argv[0]!r}; use list, or python -m raydistill.COMMAND (see python -m "
            "raydistill --help)",
            file=sys.stderr,
        )
        raise SystemExit(2)
    print(usage())
    return None


if __name__ == "__main__":
    main()
