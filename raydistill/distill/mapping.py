"""Which teacher layer each student layer learns from, as 1-based (student_layer, teacher_layer) pairs.

Layer 0 is the embedding output and is never returned; TinyBERT-style hidden/embedding losses add (0, 0)
themselves. With M student and N teacher layers (registry ``MAPPINGS``):

  uniform  m → floor(m·N/M), m = 1..M           TinyBERT g(m) = m·N/M (floored); 12→4: 3,6,9,12; 12→5: 2,4,7,9,12
  skip     m → (N/M)·m,     m = 1..M−1          PKD-Skip (needs N divisible by M); 12→6: 2,4,6,8,10; 12→3: 4,8
  last     m → N−M+m,       m = 1..M−1          PKD-Last; 12→6: 7..11; 12→3: 10,11
  top      m → N−M+m,       m = 1..M            the top M teacher layers
  bottom   m → m,           m = 1..M            the bottom M teacher layers
  "3,6,9,12" or [3, 6, 9, 12]                   explicit: M strictly increasing teacher layers within 1..N

PKD maps only layers 1..M−1 because the student's last layer is already taught by the prediction loss.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from itertools import pairwise

from raydistill.common.errors import UserError, check


def _uniform(m: int, n: int) -> list[int]:
    return [i * n // m for i in range(1, m + 1)]


def _skip(m: int, n: int) -> list[int]:
    check(
        n % m == 0,
        "distill.mapping",
        f"skip needs the teacher's {n} layers to be a multiple of the student's {m}; "
        "use uniform, last, or an explicit list such as 2,5,8",
    )
    return [i * (n // m) for i in range(1, m)]


def _last(m: int, n: int) -> list[int]:
    return [n - m + i for i in range(1, m)]


def _top(m: int, n: int) -> list[int]:
    return [n - m + i for i in range(1, m + 1)]


def _bottom(m: int, n: int) -> list[int]:
    return list(range(1, m + 1))


MAPPINGS: dict[str, Callable[[int, int], list[int]]] = {
    "uniform": _uniform,
    "skip": _skip,
    "last": _last,
    "top": _top,
    "bottom": _bottom,
}


def parse_layer_list(spec: str | Sequence[int], m: int, n: int, field: str, label: str, bad_syntax: str) -> list[int]:
    """An explicit list of 1-based teacher layers, one per student layer, strictly increasing within 1..n.
    Shared by ``--mapping 3,6,9,12`` and ``--init layers:1,3,5``."""
    try:
        layers = [int(x) for x in (spec.split(",") if isinstance(spec, str) else spec) if str(x).strip()]
    except ValueError:
        raise UserError(field, bad_syntax) from None
    check(
        len(layers) == m,
        field,
        f"{label} names {len(layers)} teacher layers but the student has {m}; give one teacher layer per student layer",
    )
    check(
        all(1 <= x <= n for x in layers) and all(a < b for a, b in pairwise(layers)),
        field,
        f"{label} must be strictly increasing 1-based teacher layers within 1..{n}",
    )
    return layers


def _explicit(spec: str | Sequence[int], m: int, n: int) -> list[int]:
    return parse_layer_list(
        spec,
        m,
        n,
        "distill.mapping",
        repr(spec),
        f"unknown mapping {spec!r}; use one of {', '.join(MAPPINGS)} or a comma-separated "
        "list of teacher layers such as 3,6,9,12",
    )


def check_spec(spec: str | Sequence[int], teacher_layers: int | None = None) -> None:
    """A mapping every method can be given, whether or not it maps layers: a name in ``MAPPINGS`` or a list of
    strictly increasing 1-based teacher layers (within ``1..teacher_layers`` when the teacher is known). How many
    layers a list names is checked against the student by ``layer_pairs``, for the methods that map layers."""
    if isinstance(spec, str) and spec.strip() in MAPPINGS:
        return
    bad = (
        f"unknown mapping {spec!r}; use one of {', '.join(MAPPINGS)} or a comma-separated list of teacher layers "
        "such as 3,6,9,12"
    )
    try:
        layers = [int(x) for x in (spec.split(",") if isinstance(spec, str) else spec) if str(x).strip()]
    except (TypeError, ValueError):
        raise UserError("distill.mapping", bad) from None
    check(bool(layers), "distill.mapping", bad)
    top = teacher_layers or max(layers)
    check(
        all(1 <= x <= top for x in layers) and all(a < b for a, b in pairwise(layers)),
        "distill.mapping",
        f"{spec!r} must be strictly increasing 1-based teacher layers"
        + (f" within 1..{teacher_layers}" if teacher_layers else ""),
    )


def layer_pairs(name_or_list: str | Sequence[int], student_layers: int, teacher_layers: int) -> list[tuple[int, int]]:
    """(student_layer, teacher_layer) pairs, both 1-based, for a mapping name or an explicit list (module docstring)."""
    m, n = student_layers, teacher_layers
    check(m > 0, "distill.mapping", f"the student has {m} layers; it needs at least 1 (set student.layers)")
    check(m <= n, "distill.mapping", f"the student has more layers ({m}) than the teacher ({n}); lower student.layers")
    if isinstance(name_or_list, str) and name_or_list.strip() in MAPPINGS:
        teachers = MAPPINGS[name_or_list.strip()](m, n)
    else:
        teachers = _explicit(name_or_list, m, n)
    return [(s, t) for s, t in enumerate(teachers, start=1)]


def valid_mapping(name, m: int, n: int) -> bool:
    """Whether mapping ``name`` gives an ``m``-layer student of an ``n``-layer teacher its layer pairs."""
    try:
        layer_pairs(name, m, n)
        return True
    except UserError:
        return False
