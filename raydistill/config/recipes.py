"""Published recipes a space tries first (``search.start_from``), as Optuna params to enqueue: each key names a field
of the space, and its value must lie in that field's domain."""

from __future__ import annotations

from dataclasses import fields
from typing import TYPE_CHECKING, Any

from raydistill.common.errors import check
from raydistill.config.schema import DistillConfig, StudentConfig, TrainConfig
from raydistill.config.sizes import Shape

if TYPE_CHECKING:
    from raydistill.config.space import SweepSpec


def start_points(
    spec: SweepSpec, param: dict[tuple[str, str], str], teacher: Shape | None = None
) -> list[dict[str, Any]]:
    """``search.start_from`` (published recipes, tried first) as Optuna params to enqueue. A key names a field
    of the space (``layers``, ``temperature``, ``lr``, …); its value must lie in that field's domain. A field the
    space (or ``--set``) fixes keeps its fixed value: the recipe's is ignored."""
    from raydistill.distill.mapping import valid_mapping

    points = spec.search.get("start_from") or []
    check(
        isinstance(points, list) and all(isinstance(p, dict) for p in points),
        "search.start_from",
        "must be a list of mappings, e.g. [{temperature: 20, alpha: 0.7, lr: 1.0e-4}]",
    )
    domains, where = {"method": ("method", spec.method)}, {"method": "method"}
    for sec in ("student", "distill", "train"):
        for k, v in getattr(spec, sec).items():
            domains[k], where[k] = (param.get((sec, k), k), v), f"{sec}.{k}"
    known = set(domains) | {f.name for c in (StudentConfig, DistillConfig, TrainConfig) for f in fields(c)} | {"size"}
    out: list[dict[str, Any]] = []
    for i, point in enumerate(points):
        params: dict[str, Any] = {}
        for k, v in point.items():
            field_ = f"search.start_from[{i}].{k}"
            check(k in known, field_, f"unknown field; use a field of the space: {', '.join(sorted(domains))}")
            name, dom = domains.get(k, (k, None))
            if not isinstance(dom, dict):
                continue  # fixed in the space or by --set: that value wins
            kind, arg = next(iter(dom.items()))
            inside = v in arg if kind == "choice" else isinstance(v, (int, float)) and arg[0] <= v <= arg[1]
            if not inside and where[k] in spec.overridden:
                continue  # --set changed this field's domain: the user's domain wins over the recipe
            check(inside, field_, f"{v!r} is outside the space's {kind} {arg}; change the recipe or widen the space")
            if k != "mapping":
                params[name] = v
            elif teacher is not None:  # the mapping is drawn per student depth (mapping_<M>L): fix it where valid
                params.update(
                    {f"mapping_{m}L": v for m in range(1, teacher.layers + 1) if valid_mapping(v, m, teacher.layers)}
                )
        out.append(params)
    return out
