"""Progress of long work on stderr: step/total, items per second and time left.

On a terminal it is one live line redrawn in place; otherwise (logs, ``ray job logs``, a Ray worker whose output the
driver forwards) one whole line every ~10% of the work, so two trials' progress lines interleave but never garble.
"""

from __future__ import annotations

import sys
import time


def _clock(seconds: float) -> str:
    seconds = int(max(seconds, 0) + 0.5)
    h, rest = divmod(seconds, 3600)
    return f"{h}:{rest // 60:02d}:{rest % 60:02d}" if h else f"{rest // 60}:{rest % 60:02d}"


class Progress:
    """``update(items)`` after each step of ``total``; ``done()`` at the end. ``log`` (a one-line printer) replaces
    stderr, e.g. a Ray worker's rank-0 logger; ``live`` forces or forbids the redrawn line (default: stderr is a
    TTY)."""

    def __init__(self, what: str, total: int, unit: str = "ex", log=None, live: bool | None = None, every: float = 0.1):
        self.what, self.total, self.unit = what, max(int(total), 0), unit
        self.log = log or (lambda m: print(m, file=sys.stderr, flush=True))
        self.live = (log is None and sys.stderr.isatty()) if live is None else live
        self.step = self.items = 0
        self.t0 = time.perf_counter()
        self.every = max(1, int(self.total * every)) if self.total else 1
        self._next = self.every

    def line(self) -> str:
        elapsed = time.perf_counter() - self.t0
        rate = self.items / elapsed if elapsed > 0 else 0.0
        pct = 100.0 * self.step / self.total if self.total else 100.0
        left = elapsed / self.step * (self.total - self.step) if self.step else 0.0
        return (
            f"{self.what}: {self.step}/{self.total} ({pct:.0f}%) {rate:.1f} {self.unit}/s, "
            f"{_clock(elapsed)} elapsed, {_clock(left)} left"
        )

    def update(self, items: int = 0, steps: int = 1) -> None:
        self.step += steps
        self.items += items
        if self.live:
            print("\r" + self.line(), end="", file=sys.stderr, flush=True)
        elif self.step >= self._next or self.step == self.total:
            self._next = (self.step // self.every + 1) * self.every
            self.log(self.line())

    def done(self) -> None:
        if self.live:
            print("\r" + self.line(), file=sys.stderr, flush=True)
