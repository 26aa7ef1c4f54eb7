"""Python keyword arguments as a command's command line, for the API functions whose command has no typed request
yet (``distill``, ``finetune``, ``best``): its keys are the flags' names in snake_case, read back through the
command's own parser (one source of its flags, defaults and checks)."""

from __future__ import annotations

import argparse
from typing import Any

from raydistill.common.errors import check


def argv_of(parser: argparse.ArgumentParser, flags: dict[str, Any]) -> list[str]:
    """The command line of ``parser``'s command that sets these flags (keys: the flags' names in snake_case; None:
    the flag's default). Every value goes as ``--flag=VALUE``, which argparse reads back whatever VALUE starts with."""
    options = {a.dest: a for a in parser._actions if a.option_strings and not isinstance(a, argparse._HelpAction)}
    argv: list[str] = []
    for key, value in flags.items():
        if value is None:
            continue
        check(key in options, key, unknown(parser.prog))
        action = options[key]
        flag = action.option_strings[0]
        if action.nargs == 0:  # an on/off flag (--use-gpu; --group-by-length / --no-group-by-length)
            check(isinstance(value, bool), key, f"True or False, got {value!r}")
            negative = isinstance(action, argparse.BooleanOptionalAction) and not value
            argv += [f"--no-{flag[2:]}"] if negative else [flag] if value else []
        elif isinstance(action, argparse._AppendAction):  # repeated
            values = [value] if isinstance(value, str) else list(value)
            argv += [f"{flag}={v}" for v in values]
        elif action.nargs == "?" and value is True:  # a flag alone: its own default
            argv.append(flag)
        else:
            check(not isinstance(value, list | tuple | dict | set), key, f"one value, got {value!r}")
            argv.append(f"{flag}={value}")
    return argv


def unknown(prog: str) -> str:
    """What a setting the command has no flag for is told."""
    return f"not a flag of {prog}: the settings are its flags in snake_case (see {prog} --help)"
