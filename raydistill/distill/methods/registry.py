"""The method registry: ``register`` adds a ``Method`` subclass under its name, ``get_method`` looks one up. Complete
once ``raydistill.distill.methods`` is imported (its ``__init__`` imports every method module)."""

from __future__ import annotations

from raydistill.common.errors import UserError
from raydistill.distill.methods.base import Method

METHODS: dict[str, type[Method]] = {}


def register(name):
    def deco(cls):
        cls.name = name
        METHODS[name] = cls
        return cls

    return deco


def get_method(name: str) -> type[Method]:
    if name not in METHODS:
        raise UserError("distill.method", f"unknown method {name!r}; known: {', '.join(sorted(METHODS))}")
    return METHODS[name]
