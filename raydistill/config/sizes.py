"""Student sizes written relative to the teacher, resolved to numbers once the teacher's config is known.

Each size field of a search space (or ``raydistill.distill --student-…``) is either a number or relative:

  layers        int = that many layers; a fraction 0 < f ≤ 1 = round(f · teacher layers) (0.5 of 12 → 6);
                ``teacher`` = the teacher's depth
  hidden        int; ``teacher``; a fraction of the teacher's width, rounded to a multiple of the teacher's
                head count (0.4 of 768 → 312, TinyBERT's width)
  intermediate  int; ``teacher``; ``auto`` = the teacher's intermediate/hidden ratio × hidden (4 × hidden for BERT)
  heads         int; ``teacher``; a fraction of the teacher's head count (0.5 of 12 → 6); ``auto`` = the teacher's
                head count when it divides hidden (TinyBERT matches attention head by head), else hidden / the
                teacher's head size; ``keep_head_size`` = hidden / the teacher's head size, so heads follow the width
                and every head keeps the teacher's size (384 of a 12-head 768 teacher → 6 heads of 64; a fractional
                hidden then rounds to a multiple of the head size). Init ``prune`` keeps whole teacher heads.

Fields left out take ``DEFAULT``: half the teacher's depth at the teacher's width, which every init (``first_k``,
``every_other`` copy whole teacher layers) and every method can use. What a run logs is always the resolved numbers.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from raydistill.common.errors import UserError, check

FIELDS = ("layers", "hidden", "intermediate", "heads")
DEFAULT = {"layers": 0.5, "hidden": "teacher", "intermediate": "auto", "heads": "auto"}
KEEP = "keep_head_size"  # heads: hidden / the teacher's head size


@dataclass(frozen=True)
class Shape:
    """The sizes of a teacher (or a resolved student)."""

    layers: int
    hidden: int
    intermediate: int
    heads: int

    @classmethod
    def of(cls, hf_config: Any) -> Shape:
        return cls(
            hf_config.num_hidden_layers,
            hf_config.hidden_size,
            hf_config.intermediate_size,
            hf_config.num_attention_heads,
        )


def _fraction(field: str, v: float, what: str) -> float:
    check(
        0 < v <= 1,
        f"student.{field}",
        f"{v!r} is neither a whole number nor a fraction in (0, 1] of the "
        f"teacher's {what}; write e.g. {field}: 0.5, {field}: teacher, or a number",
    )
    return float(v)


def _number(field: str, v: object) -> int:
    if isinstance(v, str) and v.strip().lstrip("-").isdigit():
        v = int(v)
    if isinstance(v, float) and v.is_integer() and v != 1.0:
        v = int(v)
    check(
        isinstance(v, int) and not isinstance(v, bool) and v > 0,
        f"student.{field}",
        f"must be a positive integer, a fraction in (0, 1] or 'teacher', got {v!r}",
    )
    assert isinstance(v, int)  # the check above refused anything else
    return v


def _parse(field: str, v: object) -> tuple[str, Any]:
    """A size value as (kind, value): ('abs', int) | ('frac', float) | ('teacher' | 'auto' | KEEP, None)."""
    if isinstance(v, str):
        s = v.strip().lower()
        if s in ("teacher", "auto", KEEP):
            check(
                s != KEEP or field == "heads",
                f"student.{field}",
                f"'{KEEP}' applies to heads only; write {field}: teacher, a fraction or a number",
            )
            check(
                s == "teacher" or field in ("intermediate", "heads"),
                f"student.{field}",
                f"'auto' applies to intermediate and heads only; write {field}: teacher, a fraction or a number",
            )
            return s, None
        try:
            v = float(s) if "." in s else int(s)
        except ValueError:
            raise UserError(
                f"student.{field}",
                f"{v!r} is not a size; write a number, a fraction in (0, 1] of the teacher's, or 'teacher'",
            ) from None
    if isinstance(v, float) and (not v.is_integer() or v == 1.0):
        check(
            field in ("layers", "hidden", "heads"),
            f"student.{field}",
            f"a fraction applies to layers, hidden and heads; write {field}: auto, teacher or a number",
        )
        return "frac", _fraction(field, v, {"layers": "depth", "hidden": "width", "heads": "head count"}[field])
    return "abs", _number(field, v)


def resolve(values: dict[str, Any], teacher: Shape) -> dict[str, int]:
    """{layers, hidden, intermediate, heads} as positive ints for this teacher; a value that resolves to nothing
    valid is a UserError naming the field and the fix."""
    raw = {**DEFAULT, **{k: v for k, v in values.items() if k in FIELDS and v is not None}}
    p = {k: _parse(k, raw[k]) for k in FIELDS}
    t = teacher

    kind, v = p["layers"]
    layers = t.layers if kind == "teacher" else v if kind == "abs" else int(v * t.layers + 0.5)
    check(
        layers >= 1,
        "student.layers",
        f"{raw['layers']} of the teacher's {t.layers} layers rounds to 0 layers; "
        f"use a larger fraction (at least {1 / t.layers:.2g}) or a number of layers",
    )

    head_size = t.hidden // t.heads
    kind, v = p["hidden"]
    if kind == "frac":  # a multiple of the teacher's head count (or of its head size, for heads: keep_head_size)
        unit = head_size if p["heads"][0] == KEEP else t.heads
        hidden = max(unit, int(v * t.hidden / unit + 0.5) * unit)
    else:
        hidden = t.hidden if kind == "teacher" else v

    kind, v = p["intermediate"]
    ratio = t.intermediate / t.hidden
    intermediate = {"teacher": t.intermediate, "auto": int(ratio * hidden + 0.5)}.get(kind, v)

    kind, v = p["heads"]
    if kind == KEEP:
        check(
            hidden % head_size == 0,
            "student.hidden",
            f"{hidden} is not a multiple of the teacher's head size "
            f"{head_size}, so heads: {KEEP} cannot keep it; pick hidden = k·{head_size} or set student.heads",
        )
        heads = hidden // head_size
    elif kind == "auto":
        heads = t.heads if hidden % t.heads == 0 else hidden // head_size if hidden % head_size == 0 else 0
        check(
            heads > 0,
            "student.hidden",
            f"{hidden} is divisible neither by the teacher's {t.heads} heads nor by its "
            f"head size {head_size}; pick a hidden size that is a multiple of {t.heads}, or set student.heads",
        )
    else:
        heads = t.heads if kind == "teacher" else v if kind == "abs" else max(1, int(v * t.heads + 0.5))
    check(
        hidden % heads == 0,
        "student.hidden",
        f"{hidden} is not divisible by student.heads={heads}; pick hidden = k·heads or leave heads out (auto)",
    )
    return {"layers": layers, "hidden": hidden, "intermediate": intermediate, "heads": heads}


def any_relative(values: dict[str, Any]) -> bool:
    """Whether resolving ``values`` needs the teacher (a relative value, or a field left to DEFAULT)."""
    return any(k not in values or _parse(k, values[k])[0] != "abs" for k in FIELDS)


def check_value(field: str, v: object) -> None:
    """Refuse a size value that can never resolve (before the teacher is known): a bad word, a negative number."""
    _parse(field, v)


def check_fits(sizes: dict[str, int], teacher: Shape) -> None:
    """A resolved student is no deeper and no wider than its teacher."""
    check(
        sizes["layers"] <= teacher.layers,
        "student.layers",
        f"{sizes['layers']} layers is more than the teacher's {teacher.layers}; a student must be smaller: "
        "lower student.layers (or student.size), or write it as a fraction of the teacher's depth",
    )
    check(
        sizes["hidden"] <= teacher.hidden,
        "student.hidden",
        f"{sizes['hidden']} is wider than the teacher's {teacher.hidden}; a student must be smaller: write "
        "hidden: teacher or a fraction",
    )


def parse_size(s: str) -> dict[str, int]:
    """'4L-312-1200-12' → layers 4, hidden 312, intermediate 1200, heads 12 (heads optional: hidden/64)."""
    try:
        parts = str(s).upper().replace("L", "").split("-")
        layers, hidden, inter = int(parts[0]), int(parts[1]), int(parts[2])
        heads = int(parts[3]) if len(parts) > 3 else max(1, hidden // 64)
    except (ValueError, IndexError):
        raise UserError(
            "student.size", f"{s!r} is not LAYERS L-HIDDEN-INTERMEDIATE[-HEADS], e.g. 4L-312-1200-12"
        ) from None
    return {"layers": layers, "hidden": hidden, "intermediate": inter, "heads": heads}


def check_shape(sizes: dict[str, int], teacher: Shape) -> None:
    """A student that pruning can cut out of ``teacher``: no deeper, no more heads, no wider FFN, whole heads of the
    teacher's size (``sizes``: resolved layers, hidden, intermediate, heads)."""
    t, (m, h, i, a) = teacher, (sizes[k] for k in ("layers", "hidden", "intermediate", "heads"))
    d = t.hidden // t.heads
    check(
        m <= t.layers,
        "student.layers",
        f"init prune keeps teacher layers, so the student cannot have more "
        f"layers ({m}) than the teacher's {t.layers}; lower student.layers",
    )
    check(
        a <= t.heads,
        "student.heads",
        f"init prune keeps teacher heads, so the student cannot have more heads "
        f"({a}) than the teacher's {t.heads}; lower student.heads or set it to {KEEP}",
    )
    check(
        h % d == 0 and h <= t.hidden,
        "student.hidden",
        f"init prune keeps whole teacher heads of size {d}, so "
        f"hidden must be a multiple of {d} up to {t.hidden}, not {h}; pick hidden = k·{d}",
    )
    check(
        a * d == h,
        "student.heads",
        f"init prune keeps the teacher's head size {d}, so a {h}-wide student has "
        f"{h // d} heads, not {a}; set student.heads={h // d} (or {KEEP})",
    )
    check(
        i <= t.intermediate,
        "student.intermediate",
        f"init prune keeps teacher FFN neurons, so the student cannot "
        f"have more ({i}) than the teacher's {t.intermediate}; lower student.intermediate (auto follows hidden)",
    )
