"""A space's ``augment``: augmented copies per training row (0 = none), fixed (``augment: 4``) or searched
(``augment: {choice: [0, 4]}``), checked when the space loads; the sets are built by ``data.augment_sets``."""

from __future__ import annotations

from typing import Any

from raydistill.common.errors import check


def check_augment(raw: Any) -> None:
    """A space's ``augment``: a non-negative integer, or a domain over them (checked when the space loads)."""
    if raw is None:
        return
    vals = list(next(iter(raw.values()))) if isinstance(raw, dict) else [raw]
    kind = next(iter(raw)) if isinstance(raw, dict) else "fixed"
    check(
        kind in ("fixed", "choice", "int"), "augment", f"must be a number of copies or {{choice: [0, 4]}}, got {raw!r}"
    )
    if kind == "int":
        vals = list(range(int(vals[0]), int(vals[1]) + 1))
    for v in vals:
        check(
            isinstance(v, int) and not isinstance(v, bool) and 0 <= v <= 64,
            "augment",
            f"augmented copies per training row must be an integer in [0, 64] (0 = none), got {v!r}",
        )


def counts(raw: Any) -> list[int]:
    """Every number of copies the space can draw (0 included where it can)."""
    if raw is None:
        return []
    if isinstance(raw, dict):
        kind, arg = next(iter(raw.items()))
        return list(range(arg[0], arg[1] + 1)) if kind == "int" else list(arg)
    return [raw]
