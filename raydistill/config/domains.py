"""A search space's values as objects: each field a space names is a ``Param`` — the dataclass field it sets
(``distill.temperature`` → ``DistillConfig.temperature``) and its ``Domain``, a fixed value or what Optuna draws from:

  YAML (unchanged)              object                 Optuna
  temperature: 4                Fixed(4)               (nothing drawn)
  {choice: [skip, last]}        Choice(("skip", …))    trial.suggest_categorical(name, choices)
  {uniform: [0.0, 1.0]}         Uniform(0.0, 1.0)      trial.suggest_float(name, low, high)
  {loguniform: [1, 20]}         LogUniform(1, 20)      trial.suggest_float(name, low, high, log=True)
  {int: [1, 6]}                 IntUniform(1, 6)       trial.suggest_int(name, low, high)

A domain keeps its bounds and choices as the YAML wrote them (``1``, not ``1.0``): they are what Optuna's studies
stored, so a resumed study sees the same distributions; the drawn value takes its field's type when the trial's config
is made (``space.trial_config``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from raydistill.common.errors import check

KINDS = ("choice", "uniform", "loguniform", "int")  # the YAML keys of a searched value
SHAPES = "{choice: [...]}, {uniform: [lo, hi]}, {loguniform: [lo, hi]}, {int: [lo, hi]}"


@dataclass(frozen=True)
class Domain:
    """What a field can take. ``draw`` asks Optuna (``trial=None``: the validation pass, which takes ``first``)."""

    kind: ClassVar[str] = "fixed"
    searched: ClassVar[bool] = True

    def draw(self, trial: Any, name: str) -> Any:
        return self.first() if trial is None else self.suggest(trial, name)

    def suggest(self, trial: Any, name: str) -> Any:
        raise NotImplementedError

    def values(self) -> list[Any]:
        """Every value it can take where that is a short list: the choices, a range's two ends, the fixed value."""
        raise NotImplementedError

    def first(self) -> Any:
        return self.values()[0]

    def contains(self, v: Any) -> bool:
        raise NotImplementedError

    def __str__(self) -> str:  # as the YAML reads, for messages: "loguniform [1, 20]"
        return f"{self.kind} {self.values()}"


@dataclass(frozen=True)
class Fixed(Domain):
    value: Any
    searched: ClassVar[bool] = False

    def draw(self, trial: Any, name: str) -> Any:
        return self.value

    def values(self) -> list[Any]:
        return [self.value]

    def contains(self, v: Any) -> bool:
        return bool(v == self.value)


@dataclass(frozen=True)
class Choice(Domain):
    options: tuple[Any, ...]
    kind: ClassVar[str] = "choice"

    def suggest(self, trial: Any, name: str) -> Any:
        return trial.suggest_categorical(name, list(self.options))

    def values(self) -> list[Any]:
        return list(self.options)

    def contains(self, v: Any) -> bool:
        return v in self.options


@dataclass(frozen=True)
class Uniform(Domain):
    low: float
    high: float
    kind: ClassVar[str] = "uniform"

    def suggest(self, trial: Any, name: str) -> Any:
        return trial.suggest_float(name, self.low, self.high)

    def values(self) -> list[Any]:
        return [self.low, self.high]

    def contains(self, v: Any) -> bool:
        return isinstance(v, (int, float)) and self.low <= v <= self.high


@dataclass(frozen=True)
class LogUniform(Uniform):
    kind: ClassVar[str] = "loguniform"

    def suggest(self, trial: Any, name: str) -> Any:
        return trial.suggest_float(name, self.low, self.high, log=True)


@dataclass(frozen=True)
class IntUniform(Uniform):
    kind: ClassVar[str] = "int"

    def suggest(self, trial: Any, name: str) -> Any:
        return trial.suggest_int(name, int(self.low), int(self.high))


RANGES: dict[str, type[Uniform]] = {"uniform": Uniform, "loguniform": LogUniform, "int": IntUniform}


def parse_domain(key: str, v: Any) -> Domain:
    """A value as the YAML writes it → its domain; ``key`` (``distill.temperature``) names it in the one-line error."""
    if not isinstance(v, dict):
        return Fixed(v)
    check(len(v) == 1 and next(iter(v)) in KINDS, key, f"a searched value is one of {SHAPES}; got {v!r}")
    kind, arg = next(iter(v.items()))
    check(isinstance(arg, list) and len(arg) >= 1, key, f"{kind} needs a list, got {arg!r}")
    if kind == "choice":
        return Choice(tuple(arg))
    check(
        len(arg) == 2 and all(isinstance(x, (int, float)) for x in arg) and arg[0] < arg[1],
        key,
        f"{kind} needs [low, high] numbers with low < high, got {arg!r}",
    )
    check(kind != "loguniform" or arg[0] > 0, key, "loguniform needs low > 0")
    return RANGES[kind](arg[0], arg[1])


@dataclass(frozen=True)
class Param:
    """One field a space sets: its section of ``RunConfig`` (``student``, ``distill``, ``train``), the field, its
    domain. ``name`` is the field's flat name (``schema.param_name``): Optuna's parameter, the Tune config's key and
    the MLflow param at once."""

    section: str
    field: str
    domain: Domain

    @property
    def key(self) -> str:
        """As ``--set`` and errors name it: ``distill.temperature`` (the space's top-level ``method``: ``method``)."""
        return f"{self.section}.{self.field}" if self.section else self.field

    @property
    def name(self) -> str:
        from raydistill.config.schema import param_name

        return param_name(self.section, self.field)

    def draw(self, trial: Any, name: str | None = None) -> Any:
        return self.domain.draw(trial, name or self.name)
