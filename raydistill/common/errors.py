"""User-facing errors: ``UserError(field, message)`` names the field and the fix; ``raydistill.commands.cli`` prints
it as one
line and exits 2."""

from __future__ import annotations

import re


class UserError(ValueError):
    """Bad input that the user can fix. ``field`` names what is wrong; the message says how to fix it."""

    def __init__(self, field: str, message: str):
        self.field, self.message = field, message
        super().__init__(f"{field}: {message}")

    def __reduce__(self):  # picklable, so it crosses Ray process boundaries intact
        return (type(self), (self.field, self.message))


class RunFailed(RuntimeError):
    """A run that started and failed (``raydistill.api``; the command prints the message as its one line and exits
    1). Its message is the root cause in one line; ``__cause__`` is the error itself."""


def check(cond: bool, field: str, message: str) -> None:
    if not cond:
        raise UserError(field, message)


def failure_reason(e: BaseException) -> str:
    """The root cause of a failed run in one line (e.g. the NonFiniteLoss a Ray Train worker raised)."""
    lines = str(e).splitlines()
    causes = [ln.strip() for ln in lines if re.match(r"\s*[\w.]+(Error|Exception|Loss|Interrupt): ", ln)]
    return (causes[-1] if causes else lines[0] if lines else type(e).__name__)[:300]  # the innermost cause
