"""What chooses and what reports: metric names, the confirmation groups of a sweep, and the noise of a dev score.

A run logs per epoch ``val_<m>`` (the validation split carved from train) and ``eval_<m>`` (dev); its final metrics
``best_val_<m>`` (the best epoch by val) and ``best_eval_<m>`` (dev of that same epoch). A sweep chooses on
``best_val_<m>`` and reports ``best_eval_<m>``; ``--select-on dev`` chooses on ``best_eval_<m>`` (the old way).
``<m>`` is the task's main metric, or ``train.select_metric`` where set (``--select-metric macro_f1``).
Plain Python: the sweep, ``raydistill.best`` and the quality benchmark all read these rules from here.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from raydistill.common.errors import UserError

if TYPE_CHECKING:
    from mlflow.entities import Run

# per-run final metrics a run logs once (not a per-epoch curve): a sweep or `best` may rank by these too
FINAL = ("student_params", "latency_ms_b1", "latency_ms_b32", "pct_of_teacher", "speedup_b1")


def objective(main_metric: str, select_on: str = "val") -> str:
    """The metric a sweep chooses on: the best epoch's score on the split that chooses."""
    return f"best_{'val' if select_on == 'val' else 'eval'}_{main_metric}"


def report_metric(metric: str) -> str:
    """The dev number of what ``metric`` chose: ``best_val_x`` → ``best_eval_x``; any other metric reports itself."""
    return "best_eval_" + metric[len("best_val_") :] if metric.startswith("best_val_") else metric


def as_final(metric: str, field: str = "metric") -> str:
    """A ranking metric as a per-run final value: ``eval_x`` / ``val_x`` (per-epoch curves, whose latest value is the
    last epoch's, not the exported student's) become ``best_eval_x`` / ``best_val_x``; ``best_*`` and the final
    metrics in ``FINAL`` pass; anything else is refused in one line."""
    if metric.startswith(("eval_", "val_")):
        return "best_" + metric
    if metric.startswith("best_") or metric in FINAL:
        return metric
    raise UserError(
        field,
        f"{metric!r} is not a per-run result; rank by best_val_<metric> (chosen on the validation "
        f"split), best_eval_<metric> (dev) or one of {', '.join(FINAL)}",
    )


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


CONTROL_TAG = "raydistill.control_of"  # a labels-only control run: the trial whose student it shadows


def group_key(tags: dict[str, str]) -> str:
    """Which configuration a trial run trained: a confirmation run names the trial it repeats with another seed."""
    return tags.get("raydistill.confirm_of") or tags.get("raydistill.trial_id") or ""


def pick_confirmed(runs: list[Run], metric: str, mode: str = "max") -> tuple[Run, float] | tuple[None, None]:
    """The winner among runs that share configurations (``group_key``): with confirmation runs present, only the
    confirmed configurations compete, ranked by the mean of ``metric`` over their *fresh* seeds (the confirmation
    runs; the original trial's score, biased upward by the selection that made it a finalist, is left out); the
    winner's best fresh run by ``metric`` is returned, with that mean. ``runs`` are MLflow runs (``.data.tags``,
    ``.data.metrics``). Without confirmation runs, the single best run (mean = its own value). A sweep's labels-only
    control runs (``CONTROL_TAG``) never compete."""
    groups: dict[str, list[Run]] = {}
    fresh: dict[str, list[Run]] = {}
    for r in runs:
        if r.data.tags.get(CONTROL_TAG):  # a labels-only control is the yardstick, never a candidate
            continue
        if metric in r.data.metrics and math.isfinite(r.data.metrics[metric]):
            groups.setdefault(group_key(r.data.tags), []).append(r)
            if r.data.tags.get("raydistill.confirm_of"):
                fresh.setdefault(group_key(r.data.tags), []).append(r)
    pool = fresh or groups
    if not pool:
        return None, None
    sign = 1 if mode == "max" else -1
    mean = {k: sum(r.data.metrics[metric] for r in g) / len(g) for k, g in pool.items()}

    def tid(r: Run) -> str:  # ties: the lowest trial id, as the summary
        return r.data.tags.get("raydistill.trial_id", "")

    key = min(pool, key=lambda k: (-sign * mean[k], -len(pool[k]), min(tid(r) for r in pool[k])))
    best = min(pool[key], key=lambda r: (-sign * r.data.metrics[metric], tid(r)))
    return best, mean[key]


def bootstrap_ci(
    stat: Callable[[list[int]], float], n_examples: int, n: int = 1000, seed: int = 0, level: float = 0.95
) -> tuple[float, float]:
    """Percentile bootstrap interval of ``stat(indices)`` over dev examples resampled with replacement (``stat`` may
    compute any metric — accuracy, F1, Pearson, MCC — or the difference of two systems' metrics on the same rows)."""
    if n_examples <= 0:
        return (math.nan, math.nan)
    rng = random.Random(seed)
    vals = sorted(
        v for v in (stat([rng.randrange(n_examples) for _ in range(n_examples)]) for _ in range(n)) if math.isfinite(v)
    )
    if not vals:
        return (math.nan, math.nan)
    lo = vals[int((1 - level) / 2 * (len(vals) - 1))]
    hi = vals[int(round((1 + level) / 2 * (len(vals) - 1)))]
    return lo, hi
