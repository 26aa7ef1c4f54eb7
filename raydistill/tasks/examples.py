"""A text task's examples held by column (issue 48): the user's text classification and regression rows.

A dict per example cost ~184 B beside its text, 74 MB of a 400k-row file: more than the flat arrays its rows encode
to (``encode.FlatFeatures``) and the largest part of a run's peak before training. Here the texts, pairs and labels
are one list each (the texts are the very strings ``readers.read_files`` keeps for the process), a split of them
(train, validation, dev) an index into those lists, and row ``i`` reads as the dict it always was, built when asked
for: ``{"text", "text_pair", "label"}`` in that order. Every reader (the carve, the digests, ``encode``, scoring)
sees no difference; nothing writes into an example (a write would go to a copy).
"""

from __future__ import annotations

import array
import operator
from collections.abc import Iterable, Iterator, Sequence


def row_index(i, n: int, what: str) -> int:
    """``i`` as a list reads it among ``n`` rows (negative from the end), else an IndexError naming ``what``."""
    i = operator.index(i)
    if not -n <= i < n:
        raise IndexError(f"{what} index out of range")
    return i % n


class Examples(Sequence):
    """``texts``, ``pairs`` (None: the task has no pair column) and ``labels`` (class ids or scores), one per row of
    the columns; ``at``: the rows this sequence holds, in order (None: every row)."""

    def __init__(self, texts: list, pairs: list | None, labels: list, at: array.array | None = None):
        self.texts, self.pairs, self.labels, self.at = texts, pairs, labels, at

    def __len__(self) -> int:
        return len(self.texts) if self.at is None else len(self.at)

    def _row(self, j: int) -> dict:
        pair = None if self.pairs is None else self.pairs[j]
        return {"text": self.texts[j], "text_pair": pair, "label": self.labels[j]}

    def __getitem__(self, i):  # an int: that row; a slice: a list of rows, as a list gives
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        i = row_index(i, len(self), "example")
        return self._row(i if self.at is None else self.at[i])

    def __iter__(self) -> Iterator[dict]:
        return map(self._row, range(len(self.texts)) if self.at is None else self.at)

    def take(self, idx: Iterable[int]) -> Examples:
        """The rows at ``idx`` (positions in this sequence, each in range), in that order: a view of the same
        columns, one 8-byte index per row."""
        picked = array.array("q", idx)
        if picked and (min(picked) < 0 or max(picked) >= len(self)):
            raise IndexError("example index out of range")
        if self.at is not None:
            picked = array.array("q", (self.at[i] for i in picked))
        return Examples(self.texts, self.pairs, self.labels, picked)

    def __reduce__(self):  # pickled (a Ray task's argument) as the rows it holds, not the whole columns
        rows = range(len(self.texts)) if self.at is None else self.at
        pairs = None if self.pairs is None else [self.pairs[j] for j in rows]
        return Examples, ([self.texts[j] for j in rows], pairs, [self.labels[j] for j in rows])

    def __eq__(self, other) -> bool:  # equal to any sequence of the same rows (the list of dicts this once was)
        if not isinstance(other, Sequence) or isinstance(other, str | bytes):
            return NotImplemented
        return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))

    __hash__ = None  # type: ignore[assignment]  # compared by value

    def __repr__(self) -> str:
        return f"Examples({len(self)} rows)"


def take(rows: Sequence[dict], idx: Iterable[int]) -> Sequence[dict]:
    """The rows at ``idx``, in that order: a view where ``rows`` are ``Examples`` (no dict made), else a list."""
    if isinstance(rows, Examples):
        return rows.take(idx)
    return [rows[i] for i in idx]
