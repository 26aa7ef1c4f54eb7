"""Published recipes a space tries first (``search.start_from``), as Optuna params to enqueue: each key names a field
of the space, and its value must lie in that field's domain."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import fields
from typing import Any

from raydistill.common.errors import check
from raydistill.config.domains import Param
from raydistill.config.schema import DistillConfig, StudentConfig, TrainConfig
from raydistill.config.sizes import Shape


def start_points(
    points: Any, params: Sequence[Param], overridden: frozenset[str] = frozenset(), teacher: Shape | None = None
) -> list[dict[str, Any]]:
    """``search.start_from`` (``points``: published recipes, tried first) as Optuna params to enqueue, each under its
    ``Param``'s name. A key names a field of the space (``layers``, ``temperature``, ``lr``, …); its value must lie in
    that field's domain. A field the space (or ``--set``) fixes keeps its fixed value: the recipe's is ignored; a
    field whose domain ``--set`` changed (``overridden``) drops a recipe value outside it."""
    from raydistill.distill.mapping import valid_mapping

    points = points or []
    check(
        isinstance(points, list) and all(isinstance(p, dict) for p in points),
        "search.start_from",
        "must be a list of mappings, e.g. [{temperature: 20, alpha: 0.7, lr: 1.0e-4}]",
    )
    by_field = {p.field: p for p in params}
    known = set(by_field) | {f.name for c in (StudentConfig, DistillConfig, TrainConfig) for f in fields(c)} | {"size"}
    out: list[dict[str, Any]] = []
    for i, point in enumerate(points):
        enqueued: dict[str, Any] = {}
        for k, v in point.items():
            where = f"search.start_from[{i}].{k}"
            check(k in known, where, f"unknown field; use a field of the space: {', '.join(sorted(by_field))}")
            p = by_field.get(k)
            if p is None or not p.domain.searched:
                continue  # fixed in the space or by --set: that value wins
            inside = p.domain.contains(v)
            if not inside and p.key in overridden:
                continue  # --set changed this field's domain: the user's domain wins over the recipe
            check(inside, where, f"{v!r} is outside the space's {p.domain}; change the recipe or widen the space")
            if k != "mapping":
                enqueued[p.name] = v
            elif teacher is not None:  # the mapping is drawn per student depth (mapping_<M>L): fix it where valid
                enqueued.update(
                    {f"mapping_{m}L": v for m in range(1, teacher.layers + 1) if valid_mapping(v, m, teacher.layers)}
                )
        out.append(enqueued)
    return out
