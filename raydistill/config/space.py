"""Declarative search spaces (search_spaces/*.yaml, shipped with the package) → a validated SweepSpec and an Optuna
define-by-run space.

A value is either fixed (``temperature: 4``) or searched:
  {choice: [a, b]}   {uniform: [lo, hi]}   {loguniform: [lo, hi]}   {int: [lo, hi]}
``student.size`` searches whole architectures at once: {choice: ["4L-312-1200-12", "6L-768-3072-12"]}.
Student sizes may be relative to the teacher (``layers: {choice: [0.25, 0.5]}``, ``hidden: teacher``; see
``raydistill.sizes``), resolved once the teacher's config is known.
Conditional: β is only sampled for methods that use it; a ``mapping`` choice is filtered to the mappings
valid for the sampled student depth (Optuna params ``mapping_<M>L`` so each depth keeps a fixed choice set).
"""

from __future__ import annotations

import copy
import itertools
import os
from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from typing import Any

import yaml

from raydistill.common.errors import UserError, check
from raydistill.config.schema import DistillConfig, RunConfig, StudentConfig, TrainConfig, split_init
from raydistill.config.selection import check_search
from raydistill.config.sizes import FIELDS, Shape, any_relative, check_fits, check_value, parse_size, resolve


def _spaces_dir() -> str:
    """The named spaces: ``raydistill.search_spaces`` where raydistill is installed (a wheel, or editable through
    pyproject's ``package-dir``), else ``search_spaces/`` beside the package in a checkout (a Ray job's working dir)."""
    import importlib.util

    spec = importlib.util.find_spec("raydistill.search_spaces")
    if spec and spec.submodule_search_locations:
        return list(spec.submodule_search_locations)[0]
    return os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "search_spaces")


SPACES_DIR = _spaces_dir()
TOP_KEYS = {
    "name",
    "description",
    "method",
    "task",
    "teacher",
    "data_dir",
    "data",
    "metric",
    "mode",
    "num_samples",
    "student",
    "distill",
    "train",
    "search",
    "max_concurrent",
    "num_workers",
    "augment",
}
SEARCH_KEYS = {
    "algorithm",
    "seed",
    "asha",
    "objectives",
    "grace_period",
    "reduction_factor",
    "start_from",
    "confirm",
    "control",
}
DOMAINS = ("choice", "uniform", "loguniform", "int")
# Optuna/MLflow param names for each searchable field
PARAM = {
    ("student", "layers"): "student_layers",
    ("student", "hidden"): "student_hidden",
    ("student", "intermediate"): "student_intermediate",
    ("student", "heads"): "student_heads",
    ("student", "init"): "init",
    ("student", "size"): "student_size",
}


@dataclass(frozen=True)
class SweepSpec:
    name: str
    method: object  # fixed string or a domain dict
    task: str | None
    teacher: str | None
    data_dir: str | None
    metric: str | None  # None → the task's main metric
    mode: str
    num_samples: int
    student: dict[str, Any]
    distill: dict[str, Any]
    train: dict[str, Any]
    search: dict[str, Any] = field(default_factory=dict)
    data: dict[str, Any] = field(default_factory=dict)  # the user's files or dataset (FileData fields), else {}
    raw: dict[str, Any] = field(default_factory=dict)
    overridden: frozenset[str] = frozenset()  # "section.field" keys changed by --set


def resolve_path(space: str) -> str:
    if os.path.isfile(space):
        return space
    path = os.path.join(SPACES_DIR, f"{space}.yaml")
    if not os.path.isfile(path):
        known = (
            sorted(f[:-5] for f in os.listdir(SPACES_DIR) if f.endswith(".yaml")) if os.path.isdir(SPACES_DIR) else []
        )
        raise UserError("space", f"unknown search space {space!r}; known: {', '.join(known)} (or pass a YAML path)")
    return path


def load(space: str, overrides: Sequence[str] = ()) -> SweepSpec:
    path = resolve_path(space)
    try:
        with open(path, encoding="utf-8") as f:
            raw = yaml.safe_load(f)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark else ""
        raise UserError("space", f"{path} is not valid YAML{where}: {getattr(e, 'problem', e)}") from None
    check(isinstance(raw, dict), "space", f"{path} must be a YAML mapping of keys (name, method, student, …)")
    for o in overrides:
        apply_override(raw, o)
    keys = frozenset(o.split("=", 1)[0].strip() for o in overrides)
    return parse(raw, default_name=os.path.splitext(os.path.basename(path))[0], overridden=keys)


def apply_override(raw: dict[str, Any], item: str) -> None:
    """--set student.layers=4: YAML-typed value at a dotted key."""
    check("=" in item, "set", f"{item!r} is not KEY=VALUE, e.g. --set student.layers=4")
    key, value = item.split("=", 1)
    parts = key.strip().split(".")
    node = raw
    for p in parts[:-1]:
        node = node.setdefault(p, {})
        check(isinstance(node, dict), "set", f"{key} goes through a non-mapping value")
    try:
        node[parts[-1]] = yaml.safe_load(value)
    except yaml.YAMLError:
        raise UserError("set", f"cannot parse the value of {key!r}: {value!r}") from None


def parse(raw: dict[str, Any], default_name: str = "sweep", overridden: frozenset[str] = frozenset()) -> SweepSpec:
    raw = copy.deepcopy(raw)
    for k in raw:
        check(k in TOP_KEYS, k, f"unknown key in the search space; known keys: {', '.join(sorted(TOP_KEYS))}")
    sections = {}
    for sec, cls in (("student", StudentConfig), ("distill", DistillConfig), ("train", TrainConfig)):
        values = raw.get(sec) or {}
        check(isinstance(values, dict), sec, "must be a mapping")
        known = {f.name for f in fields(cls)} | ({"size"} if sec == "student" else set())
        for k, v in values.items():
            check(k in known, f"{sec}.{k}", f"unknown key; known: {', '.join(sorted(known))}")
            _check_domain(f"{sec}.{k}", v)
        sections[sec] = values
    search = raw.get("search") or {}
    check(isinstance(search, dict), "search", "must be a mapping")
    for k in search:
        check(k in SEARCH_KEYS, f"search.{k}", f"unknown key; known: {', '.join(sorted(SEARCH_KEYS))}")
    check_search(search)  # algorithm, confirm and control, before Ray
    from raydistill.config.augment import check_augment

    check_augment(raw.get("augment"))
    mode = raw.get("mode", "max")
    check(mode in ("max", "min"), "mode", f"must be max or min, got {mode!r}")
    n = raw.get("num_samples", 8)
    check(isinstance(n, int) and n >= 1, "num_samples", f"must be a positive integer, got {n!r}")
    method = raw.get("method", "kd")
    _check_domain("method", method)
    spec = SweepSpec(
        data=_data(raw.get("data")),
        name=raw.get("name", default_name),
        method=method,
        task=raw.get("task"),
        teacher=raw.get("teacher"),
        data_dir=raw.get("data_dir"),
        metric=raw.get("metric"),
        mode=mode,
        num_samples=n,
        student=sections["student"],
        distill=sections["distill"],
        train=sections["train"],
        search=search,
        raw=raw,
        overridden=overridden,
    )
    sample_fixed(spec)  # type-check fixed values and domain bounds now, not inside a trial
    start_points(spec)
    return spec


def _data(values: Any) -> dict[str, Any]:
    """A space's ``data: {train_file: …, text_column: …}`` (or ``{dataset: …, eval_split: …}``): its keys and types
    checked now, the data read when the sweep plans (``tasks.files.resolve``); paths are relative to the directory
    the sweep starts in."""
    from raydistill.config.schema import build
    from raydistill.tasks.files import FileData

    values = values or {}
    check(isinstance(values, dict), "data", "must be a mapping of data fields (train_file, eval_file, text_column, …)")
    check("fingerprint" not in values, "data.fingerprint", "is computed from the files; leave it out")
    build(FileData, values, "data.")
    check(
        not values or bool(values.get("train_file") or values.get("dataset")),
        "data.train_file",
        "is required in a data section (or data.dataset: a hub dataset or a local folder)",
    )
    return dict(values)


def _check_domain(name: str, v: Any) -> None:
    if not isinstance(v, dict):
        return
    check(
        len(v) == 1 and next(iter(v)) in DOMAINS,
        name,
        "a searched value is one of {choice: [...]}, {uniform: [lo, hi]}, {loguniform: [lo, hi]}, {int: [lo, hi]}; "
        f"got {v!r}",
    )
    kind, arg = next(iter(v.items()))
    check(isinstance(arg, list) and len(arg) >= 1, name, f"{kind} needs a list, got {arg!r}")
    if kind != "choice":
        check(
            len(arg) == 2 and all(isinstance(x, (int, float)) for x in arg) and arg[0] < arg[1],
            name,
            f"{kind} needs [low, high] numbers with low < high, got {arg!r}",
        )
        if kind == "loguniform":
            check(arg[0] > 0, name, "loguniform needs low > 0")


def _suggest(trial: Any, name: str, v: Any) -> Any:
    if not isinstance(v, dict):
        return v
    kind, arg = next(iter(v.items()))
    if trial is None:  # validation pass: take the first choice / the low end
        return arg[0]
    if kind == "choice":
        return trial.suggest_categorical(name, arg)
    if kind == "int":
        return trial.suggest_int(name, int(arg[0]), int(arg[1]))
    return trial.suggest_float(name, arg[0], arg[1], log=kind == "loguniform")


def sample(spec: SweepSpec, trial: Any, teacher: Shape | None = None) -> dict[str, Any]:
    """Draw one trial's values (Optuna define-by-run; ``trial=None``: the first value of every domain); returns a
    flat dict of MLflow-style param names.

    Student sizes may be relative to the teacher (``raydistill.sizes``): Optuna sees the value as written (0.5,
    ``teacher``), the returned dict holds the resolved numbers, so Tune and MLflow show the student's real sizes."""
    out: dict[str, Any] = {"method": _suggest(trial, "method", spec.method)}
    _sample_student(spec, trial, teacher, out)
    _sample_distill(spec, trial, teacher.layers if teacher is not None else None, out)
    for k, v in spec.train.items():
        if isinstance(v, dict):  # fixed train values live in the base config, where CLI flags override them
            out[k] = _suggest(trial, k, v)
    if "augment" in spec.raw:  # augmented copies per training row (0 = none): sets built once per sweep
        out["augment"] = _suggest(trial, "augment", spec.raw["augment"])
    return out


def _sample_student(spec: SweepSpec, trial: Any, teacher: Shape | None, out: dict[str, Any]) -> None:
    st = dict(spec.student)
    if "size" in st:
        out["student_size"] = _suggest(trial, "student_size", st.pop("size"))
        st.update(parse_size(out["student_size"]))
    sizes = {}
    for k, v in st.items():
        val = _suggest(trial, PARAM[("student", k)], v)
        if k in FIELDS:
            sizes[k] = val
        else:
            out[PARAM[("student", k)]] = val
    if teacher is not None:
        if trial is None:
            check_student_space(spec, teacher)
        out.update({PARAM[("student", k)]: v for k, v in resolve(sizes, teacher).items()})
    elif not any_relative(sizes):
        out.update({PARAM[("student", k)]: v for k, v in sizes.items()})


def _sample_distill(spec: SweepSpec, trial: Any, teacher_layers: int | None, out: dict[str, Any]) -> None:
    from raydistill.distill.mapping import layer_pairs, valid_mapping
    from raydistill.distill.methods import get_method

    m = get_method(out["method"])
    for k, v in spec.distill.items():
        if k == "beta" and not m.uses_beta:
            continue  # conditional: β only where the method uses it
        if k == "mapping" and isinstance(v, dict) and "choice" in v and teacher_layers:
            layers = out["student_layers"]
            valid = [c for c in v["choice"] if valid_mapping(c, layers, teacher_layers)]
            check(
                bool(valid),
                "distill.mapping",
                f"none of {v['choice']} is valid for a {layers}-layer student of a {teacher_layers}-layer teacher",
            )
            out["mapping"] = _suggest(trial, f"mapping_{layers}L", {"choice": valid})
            continue
        if k == "mapping" and not isinstance(v, dict) and teacher_layers and m.maps_layers:
            layer_pairs(v, out["student_layers"], teacher_layers)  # a fixed mapping
        out[k] = _suggest(trial, k, v)


def start_points(spec: SweepSpec, teacher: Shape | None = None) -> list[dict[str, Any]]:
    """``search.start_from`` as Optuna params to enqueue (``recipes.start_points``)."""
    from raydistill.config.recipes import start_points as points

    return points(spec, PARAM, teacher)


def check_student_space(spec: SweepSpec, teacher: Shape) -> None:
    """Every student the space can draw resolves to valid sizes no deeper or wider than the teacher (before Ray)."""
    st = dict(spec.student)
    combos = [parse_size(c) for c in _values(st.pop("size"))] if "size" in st else [{}]
    fields_ = [k for k in FIELDS if k in st]
    prunes = any(split_init(str(v))[0] == "prune" for v in _values(st.get("init", "")))
    for base in combos:
        for vals in itertools.product(*(_values(st[k]) for k in fields_)):
            sizes = resolve({**base, **dict(zip(fields_, vals, strict=True))}, teacher)
            check_fits(sizes, teacher)
            if prunes:  # a student the space may cut out of the teacher by importance keeps whole teacher heads
                from raydistill.config.sizes import check_shape

                check_shape(sizes, teacher)


def _values(v: Any) -> list[Any]:
    """Every value a field can take: the choices, the two ends of a range, or the fixed value."""
    return list(next(iter(v.values()))) if isinstance(v, dict) else [v]


def sample_fixed(spec: SweepSpec) -> dict[str, Any]:
    """Type-check by building the configs from the first value of every domain."""
    from raydistill.config.schema import build

    for k in FIELDS:
        for v in _values(spec.student.get(k, [])) if k in spec.student else ():
            check_value(k, v)
    vals = sample(spec, None)
    student = {k: vals[p] for (sec, k), p in PARAM.items() if sec == "student" and p in vals and k != "size"}
    if all(PARAM[("student", k)] in vals for k in FIELDS):  # relative sizes are checked once the teacher is known
        build(StudentConfig, student, "student.").validate()
    else:  # what can be checked without the teacher: two absolute sizes that cannot go together
        h, n = (_values(spec.student.get(k))[0] for k in ("hidden", "heads"))
        if isinstance(h, int) and isinstance(n, int) and n > 0:
            check(h % n == 0, "student.hidden", f"{h} is not divisible by student.heads={n}; pick hidden = k·heads")
    distill = {k: vals[k] for k in spec.distill if k in vals}
    build(DistillConfig, {"method": vals["method"], **distill}, "distill.").validate()
    build(TrainConfig, {k: vals.get(k, v) for k, v in spec.train.items()}, "train.")
    return vals


def trial_config(base: RunConfig, sampled: dict[str, Any]) -> RunConfig:
    """One trial's RunConfig: the sweep's base config with the sampled values (flat param names, as ``sample``
    returns them) applied. The base was filled with its own method's defaults; the trial's method fills in its own."""
    d = base.to_dict()
    d["student"]["init"] = ""
    d["distill"].update(temperature=None, alpha=None, alpha_mlm=None)
    s = dict(sampled)
    if "student_size" in s:
        d["student"].update(parse_size(s.pop("student_size")))
    for (sec, k), name in PARAM.items():
        if sec == "student" and name in s:
            d["student"][k] = s.pop(name)
    for sec in ("distill", "train"):
        d[sec].update({k: s.pop(k) for k in list(s) if k in d[sec]})
    return RunConfig.from_dict(d)
