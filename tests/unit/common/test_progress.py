"""Progress lines: a line every ~10% off a terminal (whole lines, so parallel trials never garble), a live line on
one."""

from __future__ import annotations

import io
import sys

from raydistill.common.progress import Progress, _clock


def test_a_line_every_tenth_with_rate_and_time_left():
    lines = []
    p = Progress("epoch 1/3", 20, log=lines.append)
    for _ in range(20):
        p.update(items=32)
    p.done()
    assert (
        len(lines) == 10
        and lines[0].startswith("epoch 1/3: 2/20 (10%)")
        and lines[-1].startswith("epoch 1/3: 20/20 (100%)")
    )
    assert all(" ex/s, " in ln and " elapsed, " in ln and ln.endswith(" left") for ln in lines)
    assert lines[-1].endswith("0:00 left")


def test_small_totals_still_report_each_step_and_the_end():
    lines = []
    p = Progress("cache", 3, unit="batch", log=lines.append)
    for _ in range(3):
        p.update(items=1)
    assert [ln.split(" (")[0] for ln in lines] == ["cache: 1/3", "cache: 2/3", "cache: 3/3"]
    assert "batch/s" in lines[0]


def test_live_line_on_a_terminal(monkeypatch):
    err = io.StringIO()
    monkeypatch.setattr(sys, "stderr", err)
    p = Progress("fine-tune", 4, live=True)
    for _ in range(4):
        p.update(items=8)
    p.done()
    out = err.getvalue()
    assert out.count("\r") == 5 and out.endswith("\n") and "4/4 (100%)" in out


def test_clock():
    assert (_clock(5), _clock(65), _clock(3725)) == ("0:05", "1:05", "1:02:05")
