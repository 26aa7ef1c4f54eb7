"""The Python API: a sweep, one distillation run, the best student and a teacher's fine-tune as functions.

Each function is the command of the same name run in this process (``raydistill sweep``, ``distill``, ``best``,
``finetune``): its keyword arguments are the command's flags in snake_case (``num_samples=8`` is ``--num-samples 8``,
``use_gpu=True`` is ``--use-gpu``). Each builds its command's typed, frozen request from them directly, as the
command builds it from its flags (``orchestrate.request.SweepRequest``, ``commands.distill.DistillRequest``,
``commands.finetune.FinetuneRequest``, ``commands.best.BestRequest``), each value checked as the flag's parse checks
it; no command line in between. The data is one ``FileData``
(exported here as ``Data``), the description the data flags are generated from. Each returns the dict the command
prints as its last line of JSON; bad input raises ``UserError`` with the field and the one-line message the command
prints; a run that fails raises ``RunFailed``. Ray is started (or the cluster in RAY_ADDRESS joined) only where this
process is not connected to one already, and then stopped on the way out; a Ray the caller started is used and left
running; the caller's environment variables, library log levels and signal handlers are as they were after the call.
Ctrl-C ends the runs a call opened KILLED, then goes on as KeyboardInterrupt. docs/api.md shows it in use.

The functions' names differ from the command modules' (``raydistill.commands.sweep`` is what ``python -m
raydistill.sweep`` runs): ``from raydistill import run_sweep`` loads this module only when asked.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from raydistill.common.errors import RunFailed, UserError, check
from raydistill.tasks.filedata import FileData

Data = FileData  # what a run trains and reports on: the user's files or a dataset (docs/your-data.md)

__all__ = ["Data", "RunFailed", "UserError", "best_student", "finetune_teacher", "run_distill", "run_sweep"]
SWEEP = "python -m raydistill.sweep"  # each command as its messages name it
DISTILL = "python -m raydistill.distill"
FINETUNE = "python -m raydistill.finetune"
BEST = "python -m raydistill.best"


def run_sweep(
    space: str | None = None,
    *,
    teacher: str | None = None,
    data: FileData | dict[str, Any] | None = None,
    overrides: dict[str, Any] | None = None,
    **settings: Any,
) -> dict[str, Any]:
    """``raydistill sweep SPACE``: search a space (a shipped name or a YAML path) on ``data`` with ``teacher``; the
    best trial. ``overrides`` are the space's fields (``--set``): ``{"student.layers": 4, "distill.temperature":
    {"loguniform": [1, 8]}}``. ``run_sweep(resume=True, name=NAME)`` continues a sweep, started here or by the
    command."""
    from raydistill.commands import sweep

    check("set" not in settings, "set", "give the space's fields once: as overrides, not as set")
    request = sweep_request(space, teacher, _data(data, settings), overrides or {}, settings)
    return _command(lambda r: sweep.execute(*sweep.settled(r)), request)


def sweep_request(
    space: str | None, teacher: str | None, data: FileData, overrides: dict[str, Any], settings: dict[str, Any]
) -> Any:
    """The ``SweepRequest`` the sweep command builds from the flags these settings name: the train flags as the
    train fields given, ``teacher_cache`` / ``no_teacher_cache`` as the cache's folder, the others the request's own
    fields, each of its field's type."""
    from raydistill.commands.args import teacher_cache_dir
    from raydistill.commands.flags import SELECTION_FLAGS, SWEEP_TRAIN_FLAGS
    from raydistill.config.coerce import coerced
    from raydistill.config.schema import TrainConfig
    from raydistill.orchestrate.driver import SECOND_OBJECTIVE
    from raydistill.orchestrate.request import SweepRequest

    given = {k: v for k, v in settings.items() if v is not None}
    train = coerced(TrainConfig, {k: given.pop(k) for k in SWEEP_TRAIN_FLAGS + SELECTION_FLAGS if k in given}, "")
    cache = teacher_cache_dir(given.pop("teacher_cache", None), _switch(given.pop("no_teacher_cache", False)))
    if given.get("multi_objective") is True:  # the flag alone: its own default
        given["multi_objective"] = "params"
    elif given.get("multi_objective") is False:  # off, as None
        given.pop("multi_objective")
    choices = ", ".join(sorted(SECOND_OBJECTIVE))
    mo = given.get("multi_objective")
    check(mo is None or mo in SECOND_OBJECTIVE, "multi_objective", f"one of {choices} (or True), got {mo!r}")
    made = {"space", "teacher", "data", "overrides", "train", "teacher_cache"}
    own = {f.name for f in dataclasses.fields(SweepRequest)} - made
    for key, value in given.items():
        check(key in own, key, unknown(SWEEP))
        if isinstance(SweepRequest.__dataclass_fields__[key].default, bool):
            _switch(value, key)
    return SweepRequest(
        **coerced(SweepRequest, given, ""),
        space=space or "",
        teacher=teacher,
        data=data,
        overrides=tuple(overrides.items()),
        train=tuple(train.items()),
        teacher_cache=cache,
    )


def _switch(value: Any, key: str = "no_teacher_cache") -> bool:
    check(isinstance(value, bool), key, f"True or False, got {value!r}")
    return bool(value)


def run_distill(
    method: str, *, teacher: str, data: Data | dict[str, Any] | None = None, **settings: Any
) -> dict[str, Any]:
    """``raydistill distill``: one distillation run of ``method`` (kd, pkd, tinybert, …) from ``teacher`` on ``data``;
    the student is written to ``output`` (default ``outputs/student``). Its scores (``eval_*``, ``best_*``)."""
    from raydistill.commands import distill

    return _command(distill.execute, distill_request(method, teacher, data, settings))


def finetune_teacher(
    model: str, *, output: str, data: Data | dict[str, Any] | None = None, **settings: Any
) -> dict[str, Any]:
    """``raydistill finetune``: the pretrained encoder ``model`` fine-tuned on ``data`` into ``output``, a teacher
    (reused where a finished one with the same inputs is there). Its dev scores."""
    from raydistill.commands import finetune

    return _command(finetune.execute, finetune_request(model, output, data, settings))


def best_student(experiment: str, **settings: Any) -> dict[str, Any]:
    """``raydistill best``: the best trial of ``experiment`` (``sweep=NAME``: of one sweep), exported to ``export``
    (``onnx=True``, ``quantize=True``) and registered as ``register`` where given. The trial's run, scores and
    params."""
    from raydistill.commands import best

    return _command(best.execute, best_request(experiment, settings))


def distill_request(method: str, teacher: str, data: Any, settings: dict[str, Any]) -> Any:
    """The ``DistillRequest`` the distill command builds from the flags these settings name: the train and distill
    flags as those sections' fields, ``teacher_cache`` / ``no_teacher_cache`` as the cache's folder, the data, the
    others the request's own fields."""
    from raydistill.commands.args import teacher_cache_dir
    from raydistill.commands.distill import DistillRequest
    from raydistill.commands.flags import LAYER_FLAGS, LOSS_FLAGS
    from raydistill.config.schema import DistillConfig

    given = _settings(DISTILL, data, settings, method=method, teacher=teacher)
    sections = {**_train(), "distill": (DistillConfig, LOSS_FLAGS + LAYER_FLAGS)}
    cache = given.pop("teacher_cache", None), _switch(given.pop("no_teacher_cache", False), "no_teacher_cache")
    return _request(DistillRequest, DISTILL, given, sections, teacher_cache=teacher_cache_dir(*cache))


def finetune_request(model: str, output: str, data: Any, settings: dict[str, Any]) -> Any:
    """The ``FinetuneRequest`` the finetune command builds from the flags these settings name."""
    from raydistill.commands.finetune import FinetuneRequest

    return _request(
        FinetuneRequest, FINETUNE, _settings(FINETUNE, data, settings, model=model, output=output), _train()
    )


def best_request(experiment: str, settings: dict[str, Any]) -> Any:
    """The ``BestRequest`` the best command builds from the flags these settings name."""
    from raydistill.commands.best import BestRequest

    return _request(BestRequest, BEST, {"experiment": experiment, **settings}, {})


def _train() -> dict[str, Any]:
    """The train section of a training command's request: the train fields every training command has flags for."""
    from raydistill.commands.flags import SELECTION_FLAGS, TRAIN_FLAGS
    from raydistill.config.schema import TrainConfig

    return {"train": (TrainConfig, TRAIN_FLAGS + SELECTION_FLAGS)}


def _settings(prog: str, data: Any, settings: dict[str, Any], **named: Any) -> dict[str, Any]:
    """A training command's settings: its named arguments, the data (one ``FileData``: ``data``, and data flags given
    as settings; none without a training file or dataset, as the flags make it), the other settings."""
    from raydistill.commands.flags import flagged

    given = _data(data, settings)
    # as the data flags make it: each flag's kind of value, the fields that are no flag left out
    flags = {
        f.name: _value(FileData, f, v, prog) for f in flagged(FileData) if (v := getattr(given, f.name)) != f.default
    }
    given = FileData(**flags)
    return {**named, "data": given if given.given else FileData(), **settings}


def _request(cls: type[Any], prog: str, settings: dict[str, Any], sections: dict[str, Any], **made: Any) -> Any:
    """The request ``cls`` of the command ``prog`` that an API call's settings describe, as the command builds it from
    its flags (each setting the flag of its name in snake_case; None: the flag's default): a setting that names a
    field of one of ``sections`` (name → (config class, the fields its flags set)) joins that section's values; the
    others are the request's own fields; ``made``: fields made otherwise. Each value is checked as the flag's parse
    checks it (``_value``); a setting the command has no flag for is refused by name."""
    own = {f.name: f for f in dataclasses.fields(cls) if f.name not in {*sections, *made}}
    where = {name: sec for sec, (_, names) in sections.items() for name in names}
    # every field a section's flags set, as the command's parse sets it: the config's default, the request's own
    # where it has one (a fine-tune's learning rate), the setting given
    values = {
        sec: {n: getattr(c(), n) for n in names} | dict(getattr(cls(), sec)) for sec, (c, names) in sections.items()
    }
    kw: dict[str, Any] = {}
    for key, value in settings.items():
        if value is None:  # the flag's default
            continue
        check(key in own or key in where, key, unknown(prog))
        if key in where:
            sec_cls = sections[where[key]][0]
            values[where[key]][key] = _value(sec_cls, sec_cls.__dataclass_fields__[key], value, prog)
        elif key == "data":
            kw[key] = value
        else:
            kw[key] = _value(cls, own[key], value, prog)
    return cls(**kw, **{sec: tuple(v.items()) for sec, v in values.items()}, **made)


def _value(cls: type[Any], f: dataclasses.Field[Any], value: Any, prog: str) -> Any:
    """A setting's value as the parse of its flag reads it: an on/off flag True or False; one value; a number as
    argparse's ``int`` or ``float`` reads its text, and one of the flag's choices, with argparse's words."""
    from raydistill.commands.flags import flag_of
    from raydistill.config.coerce import field_type_of

    name = f.name
    if isinstance(f.default, bool):
        return _switch(value, name)
    check(not isinstance(value, list | tuple | dict | set), name, f"one value, got {value!r}")
    want = field_type_of(cls, f)
    kind = want if want in (int, float) else str
    try:
        value = kind(str(value))
    except ValueError:
        raise UserError(flag_of(f), f"invalid {kind.__name__} value: {str(value)!r} (see {prog} --help)") from None
    choices = f.metadata.get("choices")
    if choices and value not in choices:
        among = ", ".join(map(repr, choices))
        raise UserError(flag_of(f), f"invalid choice: {value!r} (choose from {among}) (see {prog} --help)")
    return value


def _command(execute: Callable[[Any], dict[str, Any]], request: Any) -> dict[str, Any]:
    """The command's ``execute`` of ``request`` as its ``cli`` runs it (``_call``), the places the request writes to
    checked first, as the command's parse checks them (``cli.check_paths``)."""
    from raydistill.commands.cli import check_paths

    def run() -> dict[str, Any]:
        check_paths(request)
        return execute(request)

    return _call(run)


def unknown(prog: str) -> str:
    """What a setting the command has no flag for is told."""
    return f"not a flag of {prog}: the settings are its flags in snake_case (see {prog} --help)"


def _call(run: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """``run`` as a command's ``cli`` runs it (its interrupt record, the places it writes to checked; the caller's
    signal handlers, environment variables and library log levels kept), inside a Ray of its own unless the caller
    has one; Ctrl-C: its cleanups, then re-raised."""
    from raydistill.commands.cli import command_scope, handlers_kept, run_cleanups, state_kept
    from raydistill.orchestrate.connect import owned_ray

    # the caller's environment, log levels and signal handlers back after Ray stops
    with state_kept(), command_scope(), handlers_kept(), owned_ray():
        try:
            return run()
        except KeyboardInterrupt:
            run_cleanups()  # the runs it opened end KILLED (a Ray it started stops with the scope)
            raise


def _data(data: FileData | dict[str, Any] | None, settings: dict[str, Any] | None = None) -> FileData:
    """The data a call names: a ``FileData``, or a dict of its fields (``label_map`` text or a dict, ``{0: "neg",
    1: "pos"}``: the map in the dict's order); data flags given as settings (``train_file=``) join it, and leave
    ``settings``; a field given both ways is refused."""
    from raydistill.commands.flags import dest, flagged

    fields = {dest(f): f.name for f in flagged(FileData)}  # a data flag's setting name → the field it sets
    settings = {} if settings is None else settings
    loose = {fields[k]: settings.pop(k) for k in list(settings) if k in fields and settings[k] is not None}
    if data is None:
        data = {}
    if isinstance(data, dict):
        known = {f.name for f in dataclasses.fields(FileData)}
        for key in data:
            check(key in known, "data", f"no field {key!r}; one of: {', '.join(sorted(known))}")
        data = FileData(**{k: v for k, v in data.items() if v is not None})
    what = type(data).__name__
    check(isinstance(data, FileData), "data", f"a raydistill.api.Data or a dict of its fields, got {what}")
    twice = sorted(k for k in loose if getattr(data, k) != getattr(FileData(), k))
    if twice:
        raise UserError(twice[0], "given twice, in data and as a setting; give it once")
    data = dataclasses.replace(data, **loose)
    if isinstance(data.label_map, dict):  # the flag's text, in the dict's order
        text = ",".join(f"{value}={name}" for value, name in data.label_map.items())
        data = dataclasses.replace(data, label_map=text)
    return data
