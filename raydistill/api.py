"""The Python API: a sweep, one distillation run, the best student and a teacher's fine-tune as functions.

Each function is the command of the same name run in this process (``raydistill sweep``, ``distill``, ``best``,
``finetune``): its keyword arguments are the command's flags in snake_case (``num_samples=8`` is ``--num-samples 8``,
``use_gpu=True`` is ``--use-gpu``), so the command's parser stays the one source of flags, defaults and checks. It
returns the dict the command prints as its last line of JSON; bad input raises ``UserError`` with the field and the
one-line message the command prints; a run that fails raises ``RunFailed``. Ray is started (or the cluster in
RAY_ADDRESS joined) only where this process is not connected to one already, and then stopped on the way out; a Ray
the caller started is used and left running; the caller's environment variables, library log levels and signal
handlers are as they were after the call. Ctrl-C ends the runs a call opened KILLED, then goes on as
KeyboardInterrupt. docs/api.md shows it in use.

The functions' names differ from the command modules' (``raydistill.commands.sweep`` is what ``python -m
raydistill.sweep`` runs): ``from raydistill import run_sweep`` loads this module only when asked.
"""

from __future__ import annotations

import argparse
import dataclasses
from dataclasses import dataclass
from typing import Any

from raydistill.common.errors import RunFailed, UserError, check

__all__ = ["Data", "RunFailed", "UserError", "best_student", "finetune_teacher", "run_distill", "run_sweep"]


@dataclass(frozen=True)
class Data:
    """What a run trains and reports on: a built-in ``task`` (with ``data_dir``, a local copy), your own files
    (``train_file`` and the rest) or a ``dataset`` (a hub name or a folder ``datasets.load_dataset`` reads): the
    commands' flags of the same names (docs/your-data.md)."""

    task: str | None = None
    data_dir: str | None = None
    train_file: str | None = None
    eval_file: str | None = None
    test_file: str | None = None
    dataset: str | None = None
    dataset_config: str | None = None
    train_split: str | None = None
    eval_split: str | None = None
    delimiter: str | None = None  # a CSV's field delimiter (default: sniffed among , ; tab |)
    text_column: str | None = None
    text_pair_column: str | None = None
    label_column: str | None = None
    label_map: str | dict[Any, str] | None = None  # the file's label values to the teacher's names: "0=neg,1=pos"
    tokens_column: str | None = None  # entity tags: a list of tokens and one of BIO tags per row
    tags_column: str | None = None
    task_kind: str | None = None  # classification | regression | token (default: the teacher's head, the columns)
    task_metric: str | None = None  # accuracy, macro_f1, f1, mcc; pearson, spearman
    phrase_rows: bool = False


def run_sweep(
    space: str | None = None,
    *,
    teacher: str | None = None,
    data: Data | dict[str, Any] | None = None,
    overrides: dict[str, Any] | None = None,
    **settings: Any,
) -> dict[str, Any]:
    """``raydistill sweep SPACE``: search a space (a shipped name or a YAML path) on ``data`` with ``teacher``; the
    best trial. ``overrides`` are the space's fields (``--set``): ``{"student.layers": 4, "distill.temperature":
    {"loguniform": [1, 8]}}``. ``run_sweep(resume=True, name=NAME)`` continues a sweep, started here or by the
    command."""
    from raydistill.commands import sweep

    flags = _flags(data, settings, teacher=teacher)
    if overrides:
        check("set" not in settings, "set", "give the space's fields once: as overrides, not as set")
        flags["set"] = [f"{key}={_yaml(value)}" for key, value in overrides.items()]
    return _call(sweep.run, [space] if space else [], sweep.parser(), flags)


def run_distill(
    method: str, *, teacher: str, data: Data | dict[str, Any] | None = None, **settings: Any
) -> dict[str, Any]:
    """``raydistill distill``: one distillation run of ``method`` (kd, pkd, tinybert, …) from ``teacher`` on ``data``;
    the student is written to ``output`` (default ``outputs/student``). Its scores (``eval_*``, ``best_*``)."""
    from raydistill.commands import distill

    return _call(distill.run, [], distill.parser(), _flags(data, settings, method=method, teacher=teacher))


def finetune_teacher(
    model: str, *, output: str, data: Data | dict[str, Any] | None = None, **settings: Any
) -> dict[str, Any]:
    """``raydistill finetune``: the pretrained encoder ``model`` fine-tuned on ``data`` into ``output``, a teacher
    (reused where a finished one with the same inputs is there). Its dev scores."""
    from raydistill.commands import finetune

    return _call(finetune.run, [], finetune.parser(), _flags(data, settings, model=model, output=output))


def best_student(experiment: str, **settings: Any) -> dict[str, Any]:
    """``raydistill best``: the best trial of ``experiment`` (``sweep=NAME``: of one sweep), exported to ``export``
    (``onnx=True``, ``quantize=True``) and registered as ``register`` where given. The trial's run, scores and
    params."""
    from raydistill.commands import best

    return _call(best.run, [], best.parser(), {"experiment": experiment, **settings})


def _call(run, positional: list[str], parser: argparse.ArgumentParser, flags: dict[str, Any]) -> dict[str, Any]:
    """The command ``run`` on the flags' command line, as its ``cli`` runs it (its interrupt record, the places it
    writes to checked; the caller's signal handlers, environment variables and library log levels kept), inside a Ray
    of its own unless the caller has one; Ctrl-C: its cleanups, then re-raised."""
    from raydistill.commands.cli import command_scope, handlers_kept, run_cleanups, state_kept
    from raydistill.orchestrate.connect import owned_ray

    argv = positional + _argv(parser, flags)
    # the caller's environment, log levels and signal handlers back after Ray stops
    with state_kept(), command_scope(), handlers_kept(), owned_ray():
        try:
            return run(argv)
        except KeyboardInterrupt:
            run_cleanups()  # the runs it opened end KILLED (a Ray it started stops with the scope)
            raise


def _argv(parser: argparse.ArgumentParser, flags: dict[str, Any]) -> list[str]:
    """The command line of ``parser``'s command that sets these flags (keys: the flags' names in snake_case; None:
    the flag's default). Every value goes as ``--flag=VALUE``, which argparse reads back whatever VALUE starts with."""
    options = {a.dest: a for a in parser._actions if a.option_strings and not isinstance(a, argparse._HelpAction)}
    argv: list[str] = []
    for key, value in flags.items():
        if value is None:
            continue
        check(
            key in options,
            key,
            f"not a flag of {parser.prog}: the settings are its flags in snake_case (see {parser.prog} --help)",
        )
        action = options[key]
        flag = action.option_strings[0]
        if action.nargs == 0:  # an on/off flag (--use-gpu; --group-by-length / --no-group-by-length)
            check(isinstance(value, bool), key, f"True or False, got {value!r}")
            negative = isinstance(action, argparse.BooleanOptionalAction) and not value
            argv += [f"--no-{flag[2:]}"] if negative else [flag] if value else []
        elif isinstance(action, argparse._AppendAction):  # --set KEY=VALUE, repeated
            values = [value] if isinstance(value, str) else list(value)
            argv += [f"{flag}={v}" for v in values]
        elif action.nargs == "?" and value is True:  # --multi-objective alone: its own default
            argv.append(flag)
        else:
            check(not isinstance(value, list | tuple | dict | set), key, f"one value, got {value!r}")
            argv.append(f"{flag}={value}")
    return argv


def _flags(data: Data | dict[str, Any] | None, settings: dict[str, Any], **named: Any) -> dict[str, Any]:
    """A function's flags: its named arguments, the data's, the other settings; a flag given twice is refused."""
    given = _data(data)
    twice = sorted(given.keys() & settings.keys())
    if twice:
        raise UserError(twice[0], "given twice, in data and as a setting; give it once")
    return {**named, **given, **settings}


def _data(data: Data | dict[str, Any] | None) -> dict[str, Any]:
    """The flags that say what a run trains on."""
    if data is None:
        return {}
    if isinstance(data, dict):
        known = {f.name for f in dataclasses.fields(Data)}
        for key in data:
            check(key in known, "data", f"no field {key!r}; one of: {', '.join(sorted(known))}")
        data = Data(**data)
    check(isinstance(data, Data), "data", f"a raydistill.api.Data or a dict of its fields, got {type(data).__name__}")
    flags = {k: v for k, v in dataclasses.asdict(data).items() if v is not None and v is not False}
    if isinstance(flags.get("label_map"), dict):  # {0: "neg", 1: "pos"}: the flag's text, in the dict's order
        flags["label_map"] = ",".join(f"{value}={name}" for value, name in flags["label_map"].items())
    return flags


def _yaml(value: Any) -> str:
    """A Python value as the YAML text ``--set KEY=VALUE`` reads back to it (1e-5 stays a float, "yes" a string)."""
    import yaml

    text = yaml.safe_dump(value, default_flow_style=True, width=1 << 30)
    return text.removesuffix("\n...\n").strip()
