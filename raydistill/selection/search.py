"""What chooses, below the stages that train: the best epoch of a run (``best_epoch``), and a space's ``search`` section
(the algorithm, the confirmation's ``{top, seeds}``, the labels-only control's seeds) checked when the space loads.

Every rule that picks among runs — the sweep's best trial, its confirmation's winner, ``raydistill best``'s pick — and
the metric names a pick ranks by live in ``selection/runs.py``. The epoch rule cannot: ``train/loop.py`` applies it
every epoch and results/ stands above train/, so it lives here, in the lowest folder both import.
"""

from __future__ import annotations

import math
from typing import Any

from raydistill.common.errors import UserError


def best_epoch(history: list[dict[str, Any]], key: str, final_stage: str | None = None) -> dict[str, Any]:
    """The epoch with the highest ``key`` (the task's main metric: higher is better), the earliest on ties; a NaN
    or missing value never wins (a regression student with constant output has NaN correlation), nor an epoch whose
    training loss went non-finite (its weights are NaN, whatever a constant answer scores).

    A method with stages (TinyBERT, the two-stage recipe) chooses among its ``final_stage``'s epochs once that stage
    has begun: the earlier stage trains the layers, not the prediction layer, so its epochs answer with a head the
    method has not trained yet (a sliced or fresh one); the papers score the student after its last stage. A run that
    never reached its last stage chooses among what it has."""

    def score(m: dict[str, Any]) -> float:
        ok = math.isfinite(m.get(key, math.nan)) and math.isfinite(m.get("train_loss", 0.0))
        return float(m[key]) if ok else -math.inf

    final = [m for m in history if m.get("stage") == final_stage]
    return max(final or history, key=score)


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
