"""Flags generated from the fields of the frozen configs and of the commands' requests, so a field is declared once:
its type and default where the dataclass declares it, its help in the field's ``metadata`` (``help``; ``flag``, its
name where not the field's; ``choices``; ``metavar``; how its default is said: ``said``, a template of the value,
``unset``, the words for an empty default; ``sweep``: ``plain`` where the sweep's flag says its default as distill's
does). A request's own flags say in the metadata too how they parse where the type does not (``flag()``: ``required``,
``action``, ``nargs``, ``const``, ``positional``, ``parsed``, the parse's default where it is not the request's,
``hidden``, a test hook's); each command adds them in its --help's order (``add_fields`` with the names in order). A
field without ``help`` is no flag. The values parsed come back as the same objects: ``section`` (a ``train`` dict),
``data_of`` (a ``FileData``), ``request_from`` (a command's request)."""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Iterable
from typing import Any

from raydistill.config.schema import TrainConfig
from raydistill.tasks.files import FileData

DEFAULTS = TrainConfig()  # the flags' defaults (frozen: one instance serves every parser)
# the train fields every training command offers, in --help's order: the run's length and batches, then what chooses
TRAIN_FLAGS = (
    "epochs",
    "max_steps",
    "epoch_rows",
    "train_limit",
    "eval_limit",
    "max_length",
    "batch_size",
    "lr",
    "seed",
)
# the sweep's, in its --help's order (as it always was: its seed before its lr)
SWEEP_TRAIN_FLAGS = (*TRAIN_FLAGS[:-2], "seed", "lr")
assert TRAIN_FLAGS[-2:] == ("lr", "seed")
# DistillConfig's fields in distill's --help order: the losses' weights, then the layers and stages they read
LOSS_FLAGS = ("temperature", "alpha", "beta", "alpha_cos", "alpha_mlm")
LAYER_FLAGS = ("mapping", "stage", "intermediate_epochs", "version", "relation_heads", "relation_mean", "teacher_layer")
SELECTION_FLAGS = (
    "val_fraction",
    "select_on",
    "select_metric",
    "group_by_length",
    "attention",
    "cpu_bf16",
    "stop_diverged",
    "compile",
)


def flag(help: str, **how: Any) -> dict[str, Any]:
    """A request field's metadata that makes it a flag of its command (``add_fields``): its help, and how it parses
    where its type does not say (``required``, ``action``, ``nargs``, ``const``, ``choices``, ``metavar``,
    ``parsed``: the parse's default where the request's is none of a flag's, ``positional``, ``hidden``)."""
    return {"help": help, **how}


def flag_of(f: dataclasses.Field[Any]) -> str:
    """The option a field is given as: ``--max-steps`` for ``max_steps``, ``--task-kind`` for ``FileData.kind``."""
    return "--" + f.metadata.get("flag", f.name.replace("_", "-"))


def dest(f: dataclasses.Field[Any]) -> str:
    """Where argparse keeps the flag's value (``task_kind`` for ``--task-kind``)."""
    return flag_of(f)[2:].replace("-", "_")


def flagged(cls: type[Any], names: Iterable[str] | None = None) -> list[dataclasses.Field[Any]]:
    """The fields of ``cls`` that are flags: ``names`` in that order, else every field with help in field order."""
    by_name = {f.name: f for f in dataclasses.fields(cls)}
    if names is None:
        return [f for f in by_name.values() if "help" in f.metadata]
    return [by_name[n] for n in names]


def add_fields(p: Any, cls: type[Any], names: Iterable[str] | None = None, base: Any = None) -> None:
    """A flag on ``p`` (a parser or a group) for each field of ``cls`` (``flagged``), its default ``base``'s value
    (None: no default, nothing given is nothing set)."""
    for f in flagged(cls, names):
        name = f.name if f.metadata.get("positional") else flag_of(f)
        p.add_argument(name, **_argument(cls, f, base))


# metadata handed to argparse as it is: a request's own flag says how it parses where its type does not
AS_DECLARED = ("choices", "metavar", "required", "nargs", "const", "action")


def _argument(cls: type[Any], f: dataclasses.Field[Any], base: Any) -> dict[str, Any]:
    """``add_argument``'s keywords for the flag of field ``f``: its help and default phrase, its default (``base``'s
    value, else None; ``parsed``: the parse's own where a request's default is no flag's), what it parses to."""
    m = f.metadata
    kw: dict[str, Any] = {"default": getattr(base, f.name) if base is not None else None}
    if "parsed" in m:
        kw["default"] = m["parsed"]
    for key in AS_DECLARED:
        if key in m:
            kw[key] = tuple(m[key]) if key == "choices" else m[key]
    if "action" in m:
        pass  # as declared: a request's on/off flag (store_true) or a repeated one (append)
    elif isinstance(f.default, bool) and base is None:
        kw["action"] = "store_true"  # off unless given
        kw["default"] = False
    elif isinstance(f.default, bool):
        kw["action"] = argparse.BooleanOptionalAction
    elif _number(cls, f):
        kw["type"] = _number(cls, f)
    hidden = m.get("hidden")  # a test hook: parsed, not shown
    kw["help"] = argparse.SUPPRESS if hidden else m["help"].replace("%", "%%") + _said(f, base)  # argparse %-formats
    return kw


def _number(cls: type[Any], f: dataclasses.Field[Any]) -> type[Any] | None:
    """``int`` or ``float`` for a numeric field (one unset by default too: ``float | None``), else None."""
    from raydistill.config.coerce import field_type_of

    want = field_type_of(cls, f)
    return want if want in (int, float) else None


def add_overrides(p: Any, names: Iterable[str]) -> None:
    """The sweep's train flags: no defaults of their own, each overriding the space's value; their help says so."""
    for f in flagged(TrainConfig, names):
        kw: dict[str, Any] = {}
        if isinstance(f.default, bool):
            kw["action"] = argparse.BooleanOptionalAction
        elif isinstance(f.default, int | float) and f.metadata.get("sweep") != "plain":
            p.add_argument(
                flag_of(f),
                type=type(f.default),
                help=f"as in raydistill.distill (default: the space's train.{f.name}, else raydistill.distill's)",
            )
            continue
        elif isinstance(f.default, int | float):
            kw["type"] = type(f.default)
        if "choices" in f.metadata:
            kw["choices"] = tuple(f.metadata["choices"])
        if f.metadata.get("sweep") == "plain":
            said = _said(f, DEFAULTS) or f" (default: {f.default})"
        else:
            said = f" (default: the space's train.{f.name}, else {_value(f, f.default)})"
        p.add_argument(flag_of(f), default=None, help=f.metadata["help"] + said, **kw)


def _value(f: dataclasses.Field[Any], value: Any) -> str:
    """A default as help says it: on/off, the words for an unset one, else the value."""
    if isinstance(value, bool):
        return "on" if value else "off"
    return f.metadata["unset"] if value == "" and "unset" in f.metadata else str(value)


def _said(f: dataclasses.Field[Any], base: Any) -> str:
    """The help's default phrase where argparse's own ``(default: X)`` (``HelpFormatter``) would not say it right:
    an on/off flag, an empty default that means something, a template of the value; "" where it does."""
    if base is None or "action" in f.metadata:  # a request's own on/off flag: off unless given, as argparse says
        return ""
    value = getattr(base, f.name)
    if "said" in f.metadata:
        return str(f.metadata["said"]).format(value=value)
    if isinstance(value, bool) or (value == "" and "unset" in f.metadata):
        return f" (default: {_value(f, value)})"
    return ""


def section(a: argparse.Namespace, names: Iterable[str], **extra: Any) -> dict[str, Any]:
    """The values of the flags of these train fields, by field name, with ``extra``: a config's ``train`` section."""
    return {name: getattr(a, name) for name in names} | extra


def data_of(a: argparse.Namespace) -> FileData:
    """The data the flags describe (``FileData``'s flags): the user's files or dataset; an empty one (a built-in
    task) without ``--train-file`` or ``--dataset``."""
    if not getattr(a, "train_file", None) and not getattr(a, "dataset", None):
        return FileData()
    given: dict[str, Any] = {f.name: getattr(a, dest(f)) or f.default for f in flagged(FileData)}
    return FileData(**given)


def request_from(cls: type[Any], a: argparse.Namespace, **made: Any) -> Any:
    """A command's request (a frozen dataclass ``cls``) of its parsed flags: each field the value of the flag of its
    name, but those ``made`` from several flags (the data, a config's section, the teacher cache's folder)."""
    return cls(**{f.name: getattr(a, f.name) for f in dataclasses.fields(cls) if f.name not in made}, **made)
