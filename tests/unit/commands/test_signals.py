"""Ctrl-C and SIGTERM in a ``cli`` command: the ``at_signal`` hooks run the moment the signal arrives (before the
command unwinds), then the ``on_interrupt`` cleanups, then one line and exit 130 (SIGINT) or 143 (SIGTERM); a further
signal during the unwinding or the cleanups is noted, not acted on, so every cleanup finishes; the caller's handlers
come back after;
an ignored Ctrl-C stays ignored. ``mute_workers`` stops the Ray workers' forwarded output (a trial actor killed while
the sweep unwinds printed Ray's SIGTERM traceback ahead of the one line: CI, test_interrupt_between_trials)."""

from __future__ import annotations

import os
import signal

import pytest

from raydistill.commands.cli import EXIT_INTERRUPTED, cli, exit_status
from raydistill.common.interrupts import at_signal, on_interrupt, resume_hint


def _spin():
    for _ in range(10**6):  # a Python signal handler runs between bytecodes
        pass


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_at_signal_hooks_run_before_the_command_unwinds_then_cleanups_then_one_line(sig, capsys):
    events = []

    @cli
    def main(argv=None):
        resume_hint("go on")
        at_signal(lambda: events.append("at_signal"))
        on_interrupt(lambda: events.append("cleanup"))
        try:
            os.kill(os.getpid(), sig)
            for _ in range(10**6):  # the handler runs between bytecodes
                pass
        finally:
            events.append("unwound")

    before = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
    with pytest.raises(SystemExit) as e:
        main()
    assert e.value.code == (143 if sig == signal.SIGTERM else EXIT_INTERRUPTED) == exit_status(sig)
    assert events == ["at_signal", "unwound", "cleanup"]
    assert capsys.readouterr().err.strip().splitlines() == ["interrupted; resume with: go on"]
    assert (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)) == before  # the caller's again


def test_a_hook_that_fails_at_the_signal_does_not_stop_the_interrupt(capsys):
    @cli
    def main(argv=None):
        at_signal(lambda: 1 / 0)
        os.kill(os.getpid(), signal.SIGINT)
        for _ in range(10**6):
            pass

    with pytest.raises(SystemExit) as e:
        main()
    assert e.value.code == EXIT_INTERRUPTED and capsys.readouterr().err.strip() == "interrupted"


def test_an_ignored_ctrl_c_stays_ignored():
    seen = []

    @cli
    def main(argv=None):
        seen.append(signal.getsignal(signal.SIGINT))

    old = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        main()
        assert seen == [signal.SIG_IGN] and signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGINT, old)


def test_mute_workers_stops_the_forwarded_output_and_prints_what_ray_held_back(capsys):
    from ray._private import ray_logging

    from raydistill.orchestrate.connect import mute_workers

    dispatcher = ray_logging.global_worker_stdstream_dispatcher
    saved = list(dispatcher.handlers)
    printed, other = [], []
    held = {
        "ip": "10.0.0.1",
        "pid": 7,
        "job": "01",
        "is_err": True,
        "lines": ["held back"],
        "actor_name": "",
        "task_name": "run_trial",
        "localhost": "10.0.0.2",
    }
    try:
        dispatcher.add_handler("ray_print_logs", printed.append)
        dispatcher.add_handler("someone_else", other.append)
        for pid in (7, 8):  # the same line from a second worker: Ray holds it back to count its repeats
            ray_logging.stderr_deduplicator.deduplicate({**held, "pid": pid})
        mute_workers()
        dispatcher.emit({"lines": ["Traceback (most recent call last):"], "is_err": True})
        assert printed == [] and len(other) == 1  # only the printing handler is gone
        assert "held back" in capsys.readouterr().err
    finally:
        dispatcher.handlers = saved


@pytest.mark.parametrize(
    "first,second", [(signal.SIGINT, signal.SIGINT), (signal.SIGINT, signal.SIGTERM), (signal.SIGTERM, signal.SIGTERM)]
)
def test_a_second_signal_during_the_cleanups_does_not_cut_them_short(first, second, capsys):
    """Two Ctrl-Cs in quick succession (a terminal's reaches the child, then its parent forwards one), or a SIGTERM
    while the cleanups run: every cleanup finishes, one line, the first signal's status."""
    events = []

    def cleanup(i):
        def fn():
            events.append(f"start {i}")
            os.kill(os.getpid(), second)
            _spin()
            events.append(f"end {i}")

        return fn

    @cli
    def main(argv=None):
        on_interrupt(cleanup(1))
        on_interrupt(cleanup(2))
        os.kill(os.getpid(), first)
        _spin()

    with pytest.raises(SystemExit) as e:
        main()
    assert e.value.code == exit_status(first)
    assert events == ["start 2", "end 2", "start 1", "end 1"]
    assert capsys.readouterr().err.strip().splitlines() == ["interrupted"]


def test_a_second_signal_while_the_command_unwinds_does_not_cut_its_finally_short(capsys):
    """A run's own ``except``/``finally`` (ending its MLflow run) is part of the cleanup: a second Ctrl-C there is
    deferred too."""
    events = []

    @cli
    def main(argv=None):
        try:
            os.kill(os.getpid(), signal.SIGINT)
            _spin()
        finally:
            events.append("finally starts")
            os.kill(os.getpid(), signal.SIGINT)
            _spin()
            events.append("finally ends")

    with pytest.raises(SystemExit) as e:
        main()
    assert e.value.code == EXIT_INTERRUPTED and events == ["finally starts", "finally ends"]
    assert capsys.readouterr().err.strip() == "interrupted"


def test_a_ctrl_c_that_lands_in_a_weakref_callback_still_ends_the_command(capsys):
    """Python swallows an exception raised inside a weakref callback or ``__del__`` ("Exception ignored in ..."): a
    Ctrl-C whose handler ran there was lost, and every later one deferred as "already interrupted", so the sweep ran
    to the end (CI, test_interrupt_between_trials). The lost interrupt is raised again once the callback returns."""
    import time
    import weakref

    events = []

    class Thing:
        pass

    def callback(_ref):
        signal.raise_signal(signal.SIGINT)  # the handler runs here, inside the callback
        _spin()

    @cli
    def main(argv=None):
        at_signal(lambda: events.append("at_signal"))
        thing = Thing()
        ref = weakref.ref(thing, callback)
        try:
            del thing
            deadline = time.time() + 10
            while time.time() < deadline:
                time.sleep(0.01)
            events.append("ran to the end")
        finally:
            del ref

    with pytest.raises(SystemExit) as e:
        main()
    err = capsys.readouterr().err
    assert e.value.code == EXIT_INTERRUPTED and events == ["at_signal"]
    assert err.strip() == "interrupted" and "Traceback" not in err and "ignored" not in err


def test_a_lost_interrupt_is_not_sent_again_after_the_command_ended():
    """A command that returns before its lost interrupt is sent again (the resend waits for the callback to return)
    leaves no stray signal for its caller, whose handlers are back by then."""
    import time
    import weakref

    received = []

    class Thing:
        pass

    def callback(_ref):
        signal.raise_signal(signal.SIGTERM)  # swallowed inside the callback

    @cli
    def main(argv=None):
        thing = Thing()
        ref = weakref.ref(thing, callback)
        del thing
        del ref
        return "done"

    old = signal.signal(signal.SIGTERM, lambda sig, frame: received.append(sig))  # the caller's, put back
    try:
        assert main() == "done"
        time.sleep(0.3)  # past the resend's delay
    finally:
        signal.signal(signal.SIGTERM, old)
    assert received == []
