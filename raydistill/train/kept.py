"""The last run's data, kept by its process: a reused trial actor's next trial (another recipe, the same rows and
tokenizer) neither re-reads nor re-tokenises them (issue 49: no per-trial re-reads of the data files)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from raydistill.config.schema import RunConfig, task_of

# one entry: a process runs one sweep's trials at a time, and a run's encoded rows can be large
_KEPT: dict[tuple, Any] = {}


def data_key(cfg: RunConfig, tokenizer) -> tuple | None:
    """What a run's encoded rows depend on: the rows (``data.splits.rows_key``: what chooses them, their files'
    stamps), the tokenizer, the length, the tokenised augmented set's folder, and for masked-LM rows the seed that
    masks them; None where the rows are not files on this machine (the hub)."""
    from raydistill.data.splits import rows_key

    rows = rows_key(cfg)
    if rows is None:
        return None
    seed = cfg.train.seed if task_of(cfg).kind == "mlm" else None
    tok = (type(tokenizer).__name__, getattr(tokenizer, "name_or_path", ""), len(tokenizer))
    return rows, tok, cfg.train.max_length, cfg.teacher_cache, seed


def kept(key: tuple, make: Callable[[], Any]) -> Any:
    """``make()``'s dataclass for ``key``, made once per process while the key stays; each caller gets a shallow copy,
    so a run that sets one of its fields does not change what the next run gets."""
    if key not in _KEPT:
        _KEPT.clear()
        _KEPT[key] = make()
    return replace(_KEPT[key])
