"""Declarative search spaces (search_spaces/*.yaml, shipped with the package) → a validated SweepSpec and an Optuna
define-by-run space.

A value is either fixed (``temperature: 4``) or searched:
  {choice: [a, b]}   {uniform: [lo, hi]}   {loguniform: [lo, hi]}   {int: [lo, hi]}
each parsed once into a domain object bound to the field it sets (``config.domains``: ``Param``, ``LogUniform``, …).
``student.size`` searches whole architectures at once: {choice: ["4L-312-1200-12", "6L-768-3072-12"]}.
Student sizes may be relative to the teacher (``layers: {choice: [0.25, 0.5]}``, ``hidden: teacher``; see
``config/sizes.py``), resolved once the teacher's config is known.
Conditional: β is only sampled for methods that use it; a ``mapping`` choice is filtered to the mappings
valid for the sampled student depth (Optuna params ``mapping_<M>L`` so each depth keeps a fixed choice set).
"""

from __future__ import annotations

import copy
import itertools
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from typing import Any

import yaml

from raydistill.common.errors import UserError, check
from raydistill.config.coerce import build, coerced
from raydistill.config.domains import Choice, Domain, Fixed, IntUniform, Param, Uniform, parse_domain
from raydistill.config.schema import (
    FIELD_OF,
    DistillConfig,
    RunConfig,
    StudentConfig,
    TrainConfig,
    field_type,
    param_name,
    split_init,
)
from raydistill.config.sizes import FIELDS, Shape, any_relative, check_fits, check_value, parse_size, resolve
from raydistill.selection.settings import check_search


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
SECTIONS = {"student": StudentConfig, "distill": DistillConfig, "train": TrainConfig}  # what a space may set


@dataclass(frozen=True)
class SweepSpec:
    name: str
    method: Domain  # distill.method, written at the space's top (``method: pkd``)
    task: str | None
    teacher: str | None
    data_dir: str | None
    metric: str | None  # None → the task's main metric
    mode: str
    num_samples: int
    params: tuple[Param, ...]  # the student, distill and train fields the space sets, in its order
    augment: Domain | None = None  # augmented copies per training row, fixed or searched; None: not set
    search: dict[str, Any] = field(default_factory=dict)
    data: dict[str, Any] = field(default_factory=dict)  # the user's files or dataset (FileData fields), else {}
    raw: dict[str, Any] = field(default_factory=dict)
    overridden: frozenset[str] = frozenset()  # "section.field" keys changed by --set

    def section(self, sec: str) -> dict[str, Domain]:
        """The domains the space gives a section's fields (``size`` among the student's), in its order."""
        return {p.field: p.domain for p in self.params if p.section == sec}

    @property
    def student(self) -> dict[str, Domain]:
        return self.section("student")

    @property
    def distill(self) -> dict[str, Domain]:
        return self.section("distill")

    @property
    def train(self) -> dict[str, Domain]:
        return self.section("train")

    def fixed(self, sec: str) -> dict[str, Any]:
        """A section's fixed values (a sweep's base config holds the train ones, where flags override them)."""
        return {k: d.value for k, d in self.section(sec).items() if isinstance(d, Fixed)}


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


def load(space: str, overrides: Sequence[str | tuple[str, Any]] = ()) -> SweepSpec:
    """The space ``space`` (a shipped name or a YAML path) with ``overrides`` set: ``(dotted key, value)`` pairs, or
    ``KEY=VALUE`` text as ``--set`` gives it (the value read as YAML: ``parse_override``)."""
    path = resolve_path(space)
    try:
        with open(path, encoding="utf-8") as f:
            raw = yaml.safe_load(f)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark else ""
        raise UserError("space", f"{path} is not valid YAML{where}: {getattr(e, 'problem', e)}") from None
    check(isinstance(raw, dict), "space", f"{path} must be a YAML mapping of keys (name, method, student, …)")
    pairs = [parse_override(o) if isinstance(o, str) else o for o in overrides]
    for key, value in pairs:
        apply_override(raw, key, value)
    keys = frozenset(key for key, _ in pairs)
    return parse(raw, default_name=os.path.splitext(os.path.basename(path))[0], overridden=keys)


def parse_override(item: str) -> tuple[str, Any]:
    """--set student.layers=4: the dotted key and its value read as YAML."""
    check("=" in item, "set", f"{item!r} is not KEY=VALUE, e.g. --set student.layers=4")
    key, value = item.split("=", 1)
    try:
        return key.strip(), yaml.safe_load(value)
    except yaml.YAMLError:
        raise UserError("set", f"cannot parse the value of {key!r}: {value!r}") from None


def apply_override(raw: dict[str, Any], key: str, value: Any) -> None:
    """The value at a dotted key of the space (``student.layers``)."""
    parts = key.split(".")
    node = raw
    for p in parts[:-1]:
        node = node.setdefault(p, {})
        check(isinstance(node, dict), "set", f"{key} goes through a non-mapping value")
    node[parts[-1]] = copy.deepcopy(value)  # the caller's value (an API's dict) never changed by the space


def parse(raw: dict[str, Any], default_name: str = "sweep", overridden: frozenset[str] = frozenset()) -> SweepSpec:
    """A space's YAML (after ``--set``) → its ``SweepSpec``: every key known, every domain parsed once and bound to
    the field it sets, its values of that field's type; the first draw built into configs (``sample_fixed``)."""
    raw = copy.deepcopy(raw)
    for k in raw:
        check(k in TOP_KEYS, k, f"unknown key in the search space; known keys: {', '.join(sorted(TOP_KEYS))}")
    params = tuple(p for sec in SECTIONS for p in _params(sec, raw.get(sec)))
    search = raw.get("search") or {}
    check(isinstance(search, dict), "search", "must be a mapping")
    for k in search:
        check(k in SEARCH_KEYS, f"search.{k}", f"unknown key; known: {', '.join(sorted(SEARCH_KEYS))}")
    check_search(search)  # algorithm, confirm and control, before Ray
    from raydistill.config.copies import check_augment

    check_augment(raw.get("augment"))
    mode = raw.get("mode", "max")
    check(mode in ("max", "min"), "mode", f"must be max or min, got {mode!r}")
    n = raw.get("num_samples", 8)
    check(isinstance(n, int) and n >= 1, "num_samples", f"must be a positive integer, got {n!r}")
    spec = SweepSpec(
        data=_data(raw.get("data")),
        name=raw.get("name", default_name),
        method=parse_domain("method", raw.get("method", "kd")),
        task=raw.get("task"),
        teacher=raw.get("teacher"),
        data_dir=raw.get("data_dir"),
        metric=raw.get("metric"),
        mode=mode,
        num_samples=n,
        params=params,
        augment=parse_domain("augment", raw["augment"]) if "augment" in raw else None,
        search=search,
        raw=raw,
        overridden=overridden,
    )
    sample_fixed(spec)  # the first values built into configs now, not inside a trial
    start_points(spec)
    return spec


def _params(sec: str, values: Any) -> list[Param]:
    """A section of the space as ``Param``s: each key a field of the section's dataclass (or the student's ``size``),
    its domain parsed and its values checked against the field's type."""
    values = values or {}
    check(isinstance(values, dict), sec, "must be a mapping")
    known = {f.name for f in fields(SECTIONS[sec])} | ({"size"} if sec == "student" else set())
    out = []
    for k, v in values.items():
        check(k in known, f"{sec}.{k}", f"unknown key; known: {', '.join(sorted(known))}")
        out.append(Param(sec, k, parse_domain(f"{sec}.{k}", v)))
        _check_type(out[-1])
    return out


def _check_type(p: Param) -> None:
    """Every value the domain names (the choices, a range's ends, the fixed value) is of its field's type, and a
    range draws that type: a trial never meets a value its config refuses."""
    if p.section == "student" and p.field in (*FIELDS, "size"):
        return  # sizes may be relative to the teacher: sample_fixed checks them (sizes.check_value, parse_size)
    want = field_type(p.section, p.field)
    if isinstance(p.domain, Uniform) and want is not None:
        draws = int if isinstance(p.domain, IntUniform) else float
        check(
            want is float or want is draws,
            p.key,
            f"{p.domain.kind} draws {draws.__name__} values; the field takes {want.__name__}"
            + (" (for integers: {int: [lo, hi]})" if want is int else ""),
        )
    for v in p.domain.values():
        coerced(SECTIONS[p.section], {p.field: v}, f"{p.section}.")


def _data(values: Any) -> dict[str, Any]:
    """A space's ``data: {train_file: …, text_column: …}`` (or ``{dataset: …, eval_split: …}``): its keys and types
    checked now, the data read when the sweep plans (``tasks.files.resolve``); paths are relative to the directory
    the sweep starts in."""
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


def sample(spec: SweepSpec, trial: Any, teacher: Shape | None = None) -> dict[str, Any]:
    """Draw one trial's values (Optuna define-by-run through each domain; ``trial=None``: every domain's first value);
    returns a flat dict of param names (``schema.param_name``: Optuna's, Tune's and MLflow's).

    Student sizes may be relative to the teacher (``config/sizes.py``): Optuna sees the value as written (0.5,
    ``teacher``), the returned dict holds the resolved numbers, so Tune and MLflow show the student's real sizes."""
    out: dict[str, Any] = {"method": spec.method.draw(trial, "method")}
    _sample_student(spec, trial, teacher, out)
    _sample_distill(spec, trial, teacher.layers if teacher is not None else None, out)
    for p in spec.params:
        if p.section == "train" and p.domain.searched:  # fixed train values live in the base config (flags win)
            out[p.name] = p.draw(trial)
    if spec.augment is not None:  # augmented copies per training row (0 = none): sets built once per sweep
        out["augment"] = spec.augment.draw(trial, "augment")
    return out


def _sample_student(spec: SweepSpec, trial: Any, teacher: Shape | None, out: dict[str, Any]) -> None:
    st = spec.student
    if "size" in st:
        out["student_size"] = st.pop("size").draw(trial, "student_size")
        st.update({k: Fixed(v) for k, v in parse_size(out["student_size"]).items()})
    sizes = {}
    for k, d in st.items():
        val = d.draw(trial, param_name("student", k))
        if k in FIELDS:
            sizes[k] = val
        else:
            out[param_name("student", k)] = val
    if teacher is not None:
        if trial is None:
            check_student_space(spec, teacher)
        out.update({param_name("student", k): v for k, v in resolve(sizes, teacher).items()})
    elif not any_relative(sizes):
        out.update({param_name("student", k): v for k, v in sizes.items()})


def _sample_distill(spec: SweepSpec, trial: Any, teacher_layers: int | None, out: dict[str, Any]) -> None:
    from raydistill.distill.mapping import layer_pairs, valid_mapping
    from raydistill.distill.methods import get_method

    m = get_method(out["method"])
    for k, d in spec.distill.items():
        if k == "beta" and not m.uses_beta:
            continue  # conditional: β only where the method uses it
        if k == "mapping" and isinstance(d, Choice) and teacher_layers:
            layers = out["student_layers"]
            valid = [c for c in d.options if valid_mapping(c, layers, teacher_layers)]
            check(
                bool(valid),
                "distill.mapping",
                f"none of {list(d.options)} is valid for a {layers}-layer student of a {teacher_layers}-layer teacher",
            )
            # Optuna's name per depth, so each depth keeps a fixed choice set
            out["mapping"] = Choice(tuple(valid)).draw(trial, f"mapping_{layers}L")
            continue
        if k == "mapping" and isinstance(d, Fixed) and teacher_layers and m.maps_layers:
            layer_pairs(d.value, out["student_layers"], teacher_layers)  # a fixed mapping
        out[k] = d.draw(trial, k)


def start_points(spec: SweepSpec, teacher: Shape | None = None) -> list[dict[str, Any]]:
    """``search.start_from`` as Optuna params to enqueue (``recipes.start_points``)."""
    from raydistill.config.recipes import start_points as points

    method = Param("", "method", spec.method)  # written at the space's top
    return points(spec.search.get("start_from"), (method, *spec.params), spec.overridden, teacher)


def check_student_space(spec: SweepSpec, teacher: Shape) -> None:
    """Every student the space can draw resolves to valid sizes no deeper or wider than the teacher (before Ray)."""
    st = spec.student
    combos = [parse_size(c) for c in st.pop("size").values()] if "size" in st else [{}]
    fields_ = [k for k in FIELDS if k in st]
    prunes = any(split_init(str(v))[0] == "prune" for v in (st["init"].values() if "init" in st else [""]))
    for base in combos:
        for vals in itertools.product(*(st[k].values() for k in fields_)):
            sizes = resolve({**base, **dict(zip(fields_, vals, strict=True))}, teacher)
            check_fits(sizes, teacher)
            if prunes:  # a student the space may cut out of the teacher by importance keeps whole teacher heads
                from raydistill.config.sizes import check_shape

                check_shape(sizes, teacher)


def sample_fixed(spec: SweepSpec) -> dict[str, Any]:
    """Type-check by building the configs from the first value of every domain; every method the space names is
    known."""
    from raydistill.distill.methods import get_method

    for m in spec.method.values():
        get_method(m)
    st = spec.student
    for k in FIELDS:
        for v in st[k].values() if k in st else ():
            check_value(k, v)
    vals = sample(spec, None)
    drawn = {f.name: param_name("student", f.name) for f in fields(StudentConfig)}
    student = {k: vals[name] for k, name in drawn.items() if name in vals}
    if all(k in student for k in FIELDS):  # relative sizes are checked once the teacher is known
        build(StudentConfig, student, "student.").validate()
    else:  # what can be checked without the teacher: two absolute sizes that cannot go together
        h, n = (st[k].first() if k in st else None for k in ("hidden", "heads"))
        if isinstance(h, int) and isinstance(n, int) and n > 0:
            check(h % n == 0, "student.hidden", f"{h} is not divisible by student.heads={n}; pick hidden = k·heads")
    distill = {k: vals[k] for k in spec.distill if k in vals}
    build(DistillConfig, {"method": vals["method"], **distill}, "distill.").validate()
    build(TrainConfig, {k: vals.get(k, d.first()) for k, d in spec.train.items()}, "train.")
    return vals


def trial_config(base: RunConfig, sampled: Mapping[str, Any]) -> RunConfig:
    """One trial's RunConfig: ``dataclasses.replace`` of the base's sections with the sampled values (flat names, as
    ``sample`` returns them, each coerced to its field's type). The space owns the student and distill sections:
    a field it leaves out is its dataclass's default, unset where a method has one, which the trial's own method then
    fills (``RunConfig.__post_init__`` → ``methods.registry.with_defaults``, the one place). The train section is the
    base's — the flags and the space's fixed values — with the drawn ones."""
    drawn = _by_section(sampled)
    return base.replace(
        student=replace(StudentConfig(), **coerced(StudentConfig, drawn["student"], "student.")),
        distill=replace(DistillConfig(), **coerced(DistillConfig, drawn["distill"], "distill.")),
        train=replace(base.train, **coerced(TrainConfig, drawn["train"], "train.")),
    ).validate()


def _by_section(sampled: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """Sampled values by section and field (``schema.FIELD_OF``): ``student_size`` gives the four sizes, which the
    resolved ``student_*`` values then override. Keys that set no field pass by: Optuna's per-depth
    ``mapping_<M>L`` (its value is the trial's ``mapping`` too) and the sweep's own keys (``augment``,
    ``confirm_of``, ``control_of``), which the trial reads itself."""
    out: dict[str, dict[str, Any]] = {sec: {} for sec in SECTIONS}
    if "student_size" in sampled:
        out["student"].update(parse_size(sampled["student_size"]))
    for name, v in sampled.items():
        if name in FIELD_OF:
            sec, f = FIELD_OF[name]
            out[sec][f] = v
    return out
