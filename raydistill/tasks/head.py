"""What a teacher's config.json says of its task head (kind, label names), read without loading a model."""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass

PLACEHOLDER = re.compile(r"LABEL_\d+")  # transformers' names for labels nobody named


@dataclass(frozen=True)
class Head:
    """What a teacher's config.json says of its task head: the kind, and its label names in index order (() where
    they are transformers' placeholders)."""

    kind: str
    names: tuple[str, ...]
    size: int


def teacher_head(teacher: str | None) -> Head | None:
    """The task head of a local teacher folder (its config.json read as JSON: no model loaded), or None where it has
    none (a plain encoder, a hub name, a broken config: preflight names those)."""
    path = os.path.join(teacher, "config.json") if teacher else ""
    try:
        with open(path, encoding="utf-8") as f:
            cfg = json.load(f)
    except (OSError, ValueError):
        return None
    archs = cfg.get("architectures") or () if isinstance(cfg, dict) else ()
    token = any("TokenClassification" in a for a in archs)
    if not token and not any("SequenceClassification" in a for a in archs):
        return None
    id2label = cfg.get("id2label") or {}
    names = tuple(str(id2label[k]) for k in sorted(id2label, key=int))
    regression = cfg.get("problem_type") == "regression" or len(names) == 1
    kind = "token" if token else "regression" if regression else "classification"
    named = not all(PLACEHOLDER.fullmatch(n) for n in names)
    return Head(kind, names if named else (), len(names))
