"""A section of the run configuration made from plain values (YAML, flags, an Optuna sample, MLflow params): each
value coerced to its field's type, an unknown key or a wrong type a one-line error naming the field."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import Field, fields
from typing import TYPE_CHECKING, Any, TypeVar

from raydistill.common.errors import UserError

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

_S = TypeVar("_S", bound="DataclassInstance")  # a section class


def build(section_cls: type[_S], values: dict[str, Any], prefix: str) -> _S:
    """Make a frozen section from a dict, refusing unknown keys and wrong types with a one-line error."""
    return section_cls(**coerced(section_cls, values, prefix))


def coerced(section_cls: type[Any], values: Mapping[str, Any], prefix: str) -> dict[str, Any]:
    """``values`` for fields of ``section_cls``, each coerced to its field's type (an int drawn for a float field
    becomes a float, as from YAML); an unknown key or a value of the wrong type is a one-line error naming
    ``prefix + key``."""
    known = {f.name: f for f in fields(section_cls)}
    kw = {}
    for k, v in values.items():
        if k not in known:
            raise UserError(f"{prefix}{k}", f"unknown key; known keys: {', '.join(sorted(known))}")
        f = known[k]
        names = str(f.type).replace(" ", "").startswith("tuple[str,")
        kw[k] = _names(v, f"{prefix}{k}") if names else _coerce(v, field_type_of(section_cls, f), f"{prefix}{k}")
    return kw


def _names(v: Any, name: str) -> tuple[str, ...]:
    """A field of names in order (a task's labels): a YAML list, whose numbers are names too ([0, 1] as a file's
    labels 0 and 1), or one comma-separated string; each name once (a name twice would leave an index no row has)."""
    if isinstance(v, str):
        v = [x.strip() for x in v.split(",") if x.strip()]
    if not isinstance(v, (list, tuple)) or any(isinstance(x, (dict, list, tuple)) or x is None for x in v):
        raise UserError(name, f"expected a list of names, got {v!r}; e.g. [negative, positive]")
    out = tuple(str(x).strip() for x in v)
    twice = sorted({x for x in out if out.count(x) > 1})
    if twice:
        raise UserError(name, f"names {', '.join(twice)} more than once; give each name once, in index order")
    return out


def field_type_of(cls: type[Any], f: Field[Any]) -> type[Any] | None:
    """The type a value for field ``f`` is coerced to: its default's, or for an unset-able field (default None) the
    first type of its annotation ("float | None" → float); None when ``cls`` has no defaults."""
    try:
        default = getattr(cls(), f.name)
    except TypeError:
        return None
    if default is not None:
        return type(default)
    return {"float": float, "int": int, "str": str, "bool": bool}.get(str(f.type).split("|")[0].strip())


def _coerce(v: Any, want: type[Any] | None, name: str) -> Any:
    if want is None or v is None or isinstance(v, want):
        return v
    try:
        if want is bool:
            if isinstance(v, str) and v.lower() in ("true", "false", "1", "0"):
                return v.lower() in ("true", "1")
            raise ValueError
        if want is int and isinstance(v, float) and not v.is_integer():
            raise ValueError
        return want(v)
    except (TypeError, ValueError):
        raise UserError(name, f"expected {want.__name__}, got {v!r}") from None
