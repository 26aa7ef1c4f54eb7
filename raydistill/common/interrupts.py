"""What a command does when it is interrupted (Ctrl-C, SIGTERM), registered by whatever part of it knows: the command
line that goes on (``resume_hint``), the cleanups (``on_interrupt``: end MLflow runs KILLED, stop Ray) and the quick
hooks run the moment the signal arrives (``at_signal``). ``commands.cli`` runs them; any stage may register."""

from __future__ import annotations

from typing import Any

# one command at a time per process: the cli wrapper resets it when a command starts
INTERRUPT: dict[str, Any] = {
    "hint": "",
    "cleanup": [],
    "at_signal": [],
    "signal": None,
    "later": [],
    "lost": False,  # the first signal's KeyboardInterrupt was swallowed (raised in a weakref callback): raise it again
    "unwinding": False,  # the command caught its KeyboardInterrupt: from then on every signal is deferred
}


def resume_hint(command: str) -> None:
    """What the one line printed on Ctrl-C / SIGTERM tells the user to run to go on."""
    INTERRUPT["hint"] = command


def on_interrupt(fn) -> None:
    """Run ``fn()`` when the command is interrupted, before its one line (e.g. end its MLflow runs KILLED)."""
    INTERRUPT["cleanup"].append(fn)


def at_signal(fn) -> None:
    """Run ``fn()`` the moment Ctrl-C or SIGTERM arrives, before the interrupt unwinds the command (quick things
    only: e.g. stop printing Ray workers' output, so a trial killed while the sweep unwinds prints nothing)."""
    INTERRUPT["at_signal"].append(fn)
