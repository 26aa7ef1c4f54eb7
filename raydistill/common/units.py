"""Numbers as a person reads them (a summary, an epoch's log line): every stage formats a count the same way."""

from __future__ import annotations


def size(n: float) -> str:
    """A parameter count as a person reads it: ``17.4M``, ``880.0K``, ``110M`` (``1.739e+07`` reads as nothing)."""
    for unit, scale in (("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if abs(n) >= scale:
            x = n / scale
            return f"{x:.1f}{unit}" if abs(x) < 100 else f"{x:.0f}{unit}"
    return f"{n:g}"
