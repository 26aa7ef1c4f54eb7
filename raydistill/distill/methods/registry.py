"""The method registry: ``register`` adds a ``Method`` subclass under its name, ``get_method`` looks one up. Complete
once ``raydistill.distill.methods`` is imported (its ``__init__`` imports every method module)."""

from __future__ import annotations

import dataclasses
from typing import Any

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


def with_defaults(distill: Any, student: Any, *, labelled: bool) -> tuple[Any, Any]:
    """The one place a method's defaults are filled in (``RunConfig`` calls it whenever one is made, a trial's
    ``dataclasses.replace`` included): the ``distill`` fields left unset (None) get the method's ``defaults``
    (its ``general_defaults`` over them for a task without labels), an unset ``student.init`` ("") its
    ``default_init``. A value the user or the space set is never touched. An unknown method is left as it is
    (``RunConfig.validate`` names it)."""
    m = METHODS.get(distill.method)  # a DistillConfig (config/ sits above distill/)
    if m is None:
        return distill, student
    defaults = m.defaults | ({} if labelled else m.general_defaults)
    unset = {k: v for k, v in defaults.items() if getattr(distill, k) is None}
    if unset:
        distill = dataclasses.replace(distill, **unset)
    if not student.init:
        student = dataclasses.replace(student, init=m.default_init)
    return distill, student
