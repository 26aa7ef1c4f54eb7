"""A run's best epoch (``best_epoch``): the one rule the loop applies itself, every epoch, to choose the student a run
reports and exports; the rules that pick among runs are in ``runs.py``."""

from __future__ import annotations

import math
from typing import Any


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
