"""Command-line entry points: the ``cli`` decorator turns a UserError (argparse's own errors included: ``Parser``,
every command's parser, raises them as one) into one stderr line ``error: FIELD: how to fix it`` and exit status 2,
and has the command's parse check the places it writes to first."""

from __future__ import annotations

import argparse
import contextlib
import contextvars
import functools
import re
import sys
from typing import Any, NoReturn

from raydistill.common.errors import UserError
from raydistill.common.interrupts import INTERRUPT as _INTERRUPT
from raydistill.common.outputs import KINDS, check_not_read, check_output
from raydistill.common.paths import check_tracking_uri_path, check_writable, storage_location

EXIT_USAGE = 2
EXIT_INTERRUPTED = 130  # 128 + SIGINT, as a shell reports a command stopped by Ctrl-C (SIGTERM: 143)
# arguments that name a place the command writes to: checked writable right after parsing (see ``cli``)
WRITABLE_ARGS = ("output", "storage_path", "export")
# result folders: refused when they hold what the command did not write, or anything it reads
RESULT_ARGS = ("output", "export")


# Armed by ``cli`` for one command: the first ``Parser.parse_args`` in it (the entry point's own) checks the paths
# it names; a later one (the sweep's re-parse of a resumed sweep's flags) and one outside a command do not.
_CHECK_PATHS: contextvars.ContextVar[bool] = contextvars.ContextVar("raydistill_check_paths", default=False)
# The name a command's parser shows in its usage, help and errors when ``raydistill COMMAND`` runs it (``named``);
# unset, each keeps its own (``python -m raydistill.sweep``).
_PROG: contextvars.ContextVar[str] = contextvars.ContextVar("raydistill_prog", default="")


class Parser(argparse.ArgumentParser):
    """The parser of every command (sub-command parsers too: ``add_subparsers`` makes them of the parent's class).
    argparse's own errors (wrong type, bad choice, missing or unknown flag) are a one-line UserError instead of the
    usage block argparse prints. The entry point's parse checks every argument in ``WRITABLE_ARGS`` (``--output``,
    ``--storage-path``, ``--export``) writable before any work, and refuses a result folder (``--output``,
    ``--export``) that is, holds or lies in a folder the command reads, and one holding files raydistill did not write
    or another command's result without ``--overwrite``. Run as ``raydistill COMMAND``
    (``named``), a command's own parser shows that name instead of ``python -m raydistill.X``."""

    def __init__(self, *args, **kwargs):
        name = _PROG.get()
        if name and str(kwargs.get("prog") or "").startswith("python -m raydistill"):  # not a sub-command's parser
            kwargs["prog"] = name
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        message = " ".join(str(message).split())
        m = re.match(r"argument ([^\s:]+)(?:/\S+)?: (.*)", message)
        if m:  # "argument --temperature: invalid float value: 'hot'"
            field, msg = m.group(1), m.group(2)
        elif m := re.match(r"the following arguments are required: ([^\s,]+)", message):
            field, msg = m.group(1), message
        elif m := re.match(r"unrecognized arguments: (\S+)", message):
            field, msg = m.group(1), message
        else:
            field, msg = "arguments", message
        raise UserError(field, f"{msg} (see {self.prog} --help)")

    def parse_args(self, args=None, namespace=None):
        first = _CHECK_PATHS.get()
        _CHECK_PATHS.set(False)  # before parsing, as the one-shot it is: a parse that fails uses it up too
        ns = super().parse_args(args, namespace)
        if first:
            check_paths(ns)
        return ns


def check_paths(ns: Any) -> None:
    """The places a command's flags (or request) name to write to: writable, and a result folder free to write."""
    for dest in WRITABLE_ARGS:
        value = getattr(ns, dest, None)
        if isinstance(value, str) and value:
            if dest == "storage_path":
                storage_location(value)  # "s3:/bucket" refused here, not taken for a local folder
            check_writable(value, dest)
            if dest in RESULT_ARGS:  # the folder rule (outputs.py): nothing the command did not write is lost
                check_not_read(value, dest, ns)  # first: no --overwrite lets a command write into what it reads
                writer = getattr(ns, "result_writer", "")
                check_output(value, dest, overwrite=bool(getattr(ns, "overwrite", False)), command=writer)
    if isinstance(getattr(ns, "tracking_uri", None), str):
        check_tracking_uri_path(ns.tracking_uri)


@contextlib.contextmanager
def named(prog: str):
    """Within it, a command's parser shows ``prog`` (``raydistill sweep``) in its usage, help and errors."""
    token = _PROG.set(prog)
    try:
        yield
    finally:
        _PROG.reset(token)


@contextlib.contextmanager
def command_scope():
    """What a command runs inside, from the shell (``cli``) or from Python (``raydistill.api``): a fresh interrupt
    record of its own, and its first parse checking the places it writes to."""
    from raydistill.tasks.files import forget_unreported

    _INTERRUPT.update(hint="", cleanup=[], at_signal=[], signal=None, later=[], lost=False, unwinding=False)
    checking = _CHECK_PATHS.set(True)
    forget_unreported()
    try:
        yield
    finally:
        _CHECK_PATHS.reset(checking)
        forget_unreported()  # a refused command's data lines are not the next command's to print


def run_cleanups() -> None:
    """The interrupted command's ``on_interrupt`` cleanups, last registered first; one that fails is said, and the
    rest still run."""
    for fn in reversed(_INTERRUPT["cleanup"]):
        try:
            fn()
        except Exception as e:  # the rest, and the command's one line, still have to come
            print(f"warning: cleanup after the interrupt failed: {e}", file=sys.stderr, flush=True)


def add_overwrite(p: argparse.ArgumentParser, writer: str, flag: str = "--output") -> None:
    """``--overwrite`` for a command that writes a result folder (the folder rule: outputs.py); ``writer``: the
    command as its result's marker names it (``outputs.KINDS``), which may replace its own results without it."""
    assert writer in KINDS, writer
    p.set_defaults(result_writer=writer)
    p.add_argument(
        "--overwrite",
        action="store_true",
        help=f"write into a {flag} folder that holds files raydistill did not write or another command's result: "
        "that result's files and same-named files are replaced, the others stay (without it such a folder is "
        "refused; an empty folder or one holding this command's earlier result needs no flag; never a folder the "
        "command reads)",
    )


def _interrupt(signum, frame):
    """SIGINT and SIGTERM. The first one runs the ``at_signal`` hooks and raises KeyboardInterrupt (SIGTERM ends a
    command the way Ctrl-C does: runs closed, one line); from then on the handler is deferred: a further signal (a
    terminal's second Ctrl-C, a supervisor's SIGTERM) is noted, not acted on, so the cleanups always finish."""
    if _INTERRUPT["signal"] is not None:
        if _INTERRUPT["lost"]:  # the first one's KeyboardInterrupt was swallowed (``_raise_lost``): raise it now
            _INTERRUPT["lost"] = False
            raise KeyboardInterrupt
        _INTERRUPT["later"].append(signum)
        return
    _INTERRUPT["signal"] = signum
    for fn in _INTERRUPT["at_signal"]:
        with contextlib.suppress(Exception):
            fn()
    raise KeyboardInterrupt


def _raise_lost(previous_hook):
    """An ``sys.unraisablehook``: Python swallows an exception raised in a weakref callback or ``__del__``, so a
    KeyboardInterrupt our handler raised there is lost, and the command would run on with every later signal deferred.
    It is raised again by the same signal sent from a thread once the callback has returned (raising it inside the
    hook would be swallowed too). Anything else goes to the previous hook."""
    import os
    import threading

    def resend(signum):
        if _INTERRUPT["lost"]:  # not if the command ended meanwhile: its caller's handlers would get a stray signal
            os.kill(os.getpid(), signum)

    def hook(unraisable):
        ours = issubclass(unraisable.exc_type, KeyboardInterrupt) and _INTERRUPT["signal"] is not None
        if not ours or _INTERRUPT["unwinding"]:
            previous_hook(unraisable)
            return
        _INTERRUPT["lost"] = True
        threading.Timer(0.05, resend, (_INTERRUPT["signal"],)).start()

    return hook


def exit_status(signum: int | None) -> int:
    """A shell's status for a command ended by ``signum``: 130 for SIGINT (or a KeyboardInterrupt no signal of ours
    raised), 143 for SIGTERM."""
    import signal

    return 128 + signal.SIGTERM if signum == signal.SIGTERM else EXIT_INTERRUPTED


class HelpFormatter(argparse.HelpFormatter):
    """``--help`` of every command: each option's default is shown (``(default: X)``) unless its help already
    says it, it has none (None) or it is an on/off flag."""

    def _get_help_string(self, action):
        text = action.help or ""
        if "default" in text or any(action.default is v for v in (None, False, argparse.SUPPRESS)) or action.required:
            return text
        if action.option_strings or action.nargs in ("?", "*"):
            value = action.default if not isinstance(action.default, list) or action.default else "none"
            return f"{text} (default: {value})" if text else f"(default: {value})"
        return text


def cli(main):
    """Decorator for ``main(argv)`` entry points: a UserError (argparse's own errors included) becomes one
    stderr line ``error: FIELD: how to fix it`` and exit status 2; paths the command writes to are checked first.
    Ctrl-C or SIGTERM: the ``at_signal`` hooks run at once, the command unwinds, its ``on_interrupt`` cleanups run
    (further signals meanwhile are noted, not acted on), then one line (``interrupted; resume with …`` where the
    command said how) and exit status 130 (SIGINT) or 143 (SIGTERM), no traceback."""

    @functools.wraps(main)
    def wrapper(argv=None):
        with command_scope():
            return _run(main, argv)

    return wrapper


def _run(main, argv):
    """``cli``'s command run with the signal handlers installed, its errors and interrupts turned into one line."""
    import signal

    with handlers_kept() as before:
        for sig, handler in before.items():  # an ignored Ctrl-C (a background job) stays ignored
            if handler is signal.default_int_handler or sig == signal.SIGTERM:
                signal.signal(sig, _interrupt)
        sys.unraisablehook = _raise_lost(previous_hook := sys.unraisablehook)
        try:
            return main(argv)
        except UserError as e:
            print(f"error: {e}", file=sys.stderr, flush=True)
            raise SystemExit(EXIT_USAGE) from None
        except KeyboardInterrupt:
            _INTERRUPT.update(unwinding=True, lost=False)
            if _INTERRUPT["signal"] is None:  # raised by Python's own Ctrl-C handler: defer what follows all the same
                _INTERRUPT["signal"] = signal.SIGINT
            run_cleanups()
            hint = _INTERRUPT["hint"]
            print("interrupted" + (f"; resume with: {hint}" if hint else ""), file=sys.stderr, flush=True)
            raise SystemExit(exit_status(_INTERRUPT["signal"])) from None
        finally:
            _INTERRUPT["lost"] = False  # a command that ended before its lost interrupt was sent again: none is sent
            sys.unraisablehook = previous_hook


@contextlib.contextmanager
def handlers_kept():
    """SIGINT's and SIGTERM's handlers (the main thread's; yielded) put back on the way out, whatever was installed
    meanwhile (``cli``'s own; Ray Train's driver installs a SIGINT handler it leaves behind): a command called in
    process (tests, a notebook, ``raydistill.api``) leaves the caller's handlers."""
    import signal
    import threading

    main_thread = threading.current_thread() is threading.main_thread()
    before = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)} if main_thread else {}
    try:
        yield before
    finally:
        for sig, handler in before.items():
            if handler is not None:
                signal.signal(sig, handler)


# the library loggers a command quiets (models/encoder.quiet_hf, the MLflow model log, a dataset load): the levels
# transformers' and the others' ``set_verbosity`` set are these loggers' own
LIBRARY_LOGGERS = ("transformers", "datasets", "huggingface_hub", "mlflow", "ray", "ray.tune", "ray.train")


@contextlib.contextmanager
def state_kept():
    """The process-wide state a command changes, put back on the way out for a caller in the same process
    (``raydistill.api``, a notebook): every environment variable as it was (``RAY_TRAIN_V2_ENABLED``,
    ``TUNE_DISABLE_SIGINT_HANDLER``, ``RAY_AIR_NEW_OUTPUT``, the thread pools' sizes: set for the command's own Ray
    and Tune, they would change what the caller's next Ray or Tune does), the library loggers' levels and
    transformers' progress bars."""
    import logging
    import os

    from transformers.utils import logging as hf_logging

    env = dict(os.environ)
    levels = {name: logging.getLogger(name).level for name in LIBRARY_LOGGERS}
    bars = hf_logging.is_progress_bar_enabled()
    try:
        yield
    finally:
        for key in set(os.environ) - set(env):
            del os.environ[key]
        for key, value in env.items():
            if os.environ.get(key) != value:
                os.environ[key] = value
        for name, level in levels.items():
            logging.getLogger(name).setLevel(level)
        (hf_logging.enable_progress_bar if bars else hf_logging.disable_progress_bar)()
