"""User-facing errors: one line naming the field and the fix, exit status 2, no traceback."""
from __future__ import annotations

import functools
import sys

EXIT_USAGE = 2


class UserError(ValueError):
    """Bad input that the user can fix. ``field`` names what is wrong; the message says how to fix it."""

    def __init__(self, field: str, message: str):
        self.field, self.message = field, message
        super().__init__(f"{field}: {message}")

    def __reduce__(self):  # picklable, so it crosses Ray process boundaries intact
        return (type(self), (self.field, self.message))


def check(cond: bool, field: str, message: str) -> None:
    if not cond:
        raise UserError(field, message)


def cli(main):
    """Decorator for ``main(argv)`` entry points: a UserError becomes one stderr line and exit status 2."""

    @functools.wraps(main)
    def wrapper(argv=None):
        try:
            return main(argv)
        except UserError as e:
            print(f"error: {e}", file=sys.stderr)
            raise SystemExit(EXIT_USAGE) from None

    return wrapper
