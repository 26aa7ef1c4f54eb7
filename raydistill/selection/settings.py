"""A space's ``search`` section, checked when the space loads: the algorithm, the confirmation's ``{top, seeds}`` and
the labels-only control's seeds — the settings of what chooses a sweep's student (the rules themselves: ``runs.py``).
"""

from __future__ import annotations

from typing import Any

from raydistill.common.errors import UserError

ALGORITHMS = ("tpe", "random")  # search.algorithm: Optuna's TPESampler (default) or RandomSampler
DEFAULT_CONFIRM = {"top": 3, "seeds": 2}  # a field search.confirm leaves out (the shipped GLUE spaces use these)


def check_search(search: dict[str, Any]) -> None:
    """A space's ``search.algorithm`` and ``search.confirm``, checked when the space loads (before Ray)."""
    algo = search.get("algorithm", "tpe")
    if algo not in ALGORITHMS:
        raise UserError("search.algorithm", f"must be one of {', '.join(ALGORITHMS)}, got {algo!r}")
    confirm_of(search)
    control_seeds(search)


def control_seeds(search: dict[str, Any]) -> int:
    """How many seeds the labels-only control trains (``search.control``, default true: the winner's shape and init
    trained on gold labels alone, ``orchestrate/control.py``): as many as the confirmation's fresh seeds, so both
    sides of the comparison have the same number of draws; ``DEFAULT_CONFIRM``'s where the sweep confirms nothing;
    0 with ``control: false``."""
    c = search.get("control", True)
    if not isinstance(c, bool):
        raise UserError("search.control", f"must be true or false, got {c!r}; e.g. --set search.control=false")
    if not c:
        return 0
    return confirm_of(search)["seeds"] or DEFAULT_CONFIRM["seeds"]


def confirm_of(search: dict[str, Any]) -> dict[str, int]:
    """``search.confirm`` as ``{top, seeds}``: the top trials re-trained with that many more seeds (absent or
    ``false``: none; a field left out: ``DEFAULT_CONFIRM``'s)."""
    c = search.get("confirm")
    if c is False or c is None:
        return {"top": 0, "seeds": 0}
    fix = "give positive integers, e.g. search.confirm: {top: 3, seeds: 2} (or false for no confirmation)"
    if not isinstance(c, dict) or set(c) - {"top", "seeds"}:
        raise UserError("search.confirm", f"must be a mapping with top and seeds, got {c!r}; {fix}")
    out = {**DEFAULT_CONFIRM, **c}
    for k, v in out.items():
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise UserError(f"search.confirm.{k}", f"must be a positive integer, got {v!r}; {fix}")
    return out
