"""``--help`` of every command: every option has a help line that shows its default, and each description is plain
text for users (no docstring markup, no internal names)."""

from __future__ import annotations

import argparse
import importlib
import json
import re

import pytest

from tests.paths import FIXTURES

COMMANDS = {
    name: f"raydistill.commands.{name}"
    for name in ("sweep", "distill", "finetune", "best", "evaluate", "data", "augment", "list")
}


class _Built(BaseException):
    def __init__(self, parser):
        self.parser = parser


def built_parser(module: str) -> argparse.ArgumentParser:
    """The ArgumentParser a command's ``main`` builds: found by running ``main`` up to its ``parse_args`` (which is
    stopped there), so a parser built inline in ``main`` is walked as well as one from a ``parser()`` function."""
    main = importlib.import_module(module).main
    main = getattr(main, "__wrapped__", main)  # past the cli decorator: its signal handlers and path checks stay out
    orig = argparse.ArgumentParser.parse_args

    def stop(self, args=None, namespace=None):
        raise _Built(self)

    argparse.ArgumentParser.parse_args = stop
    try:
        main([])
    except _Built as b:
        return b.parser
    finally:
        argparse.ArgumentParser.parse_args = orig
    raise AssertionError(f"{module}.main never parsed its arguments")


def parsers(name: str):
    """The command's parser and any sub-command parsers (``data summary``)."""
    p = built_parser(COMMANDS[name])
    out = [(name, p)]
    for a in p._actions:
        if isinstance(a, argparse._SubParsersAction):
            out += [(f"{name} {sub}", sp) for sub, sp in a.choices.items()]
    return out


ALL = [pair for name in COMMANDS for pair in parsers(name)]


@pytest.mark.parametrize("name,p", ALL, ids=[n for n, _ in ALL])
def test_every_option_has_help_with_its_default(name, p):
    fmt = p._get_formatter()
    bad = []
    for a in p._actions:
        if isinstance(a, (argparse._HelpAction, argparse._SubParsersAction)) or a.help == argparse.SUPPRESS:
            continue  # --help itself; SUPPRESS'd test hooks
        flag = "/".join(a.option_strings) or a.dest
        text = fmt._get_help_string(a) if a.help else ""
        if not text.strip():
            bad.append(f"{flag}: no help")
            continue
        on_off = a.nargs == 0  # store_true and friends: off unless given
        if not (a.required or on_off) and "default" not in text:
            bad.append(f"{flag}: help does not show the default ({text!r})")
        text % {"default": a.default, "prog": p.prog}  # argparse expands %-fields: a stray % breaks --help
    assert not bad, f"{name}: " + "; ".join(bad)


@pytest.mark.parametrize("name,p", ALL, ids=[n for n, _ in ALL])
def test_description_is_plain_text(name, p):
    d = p.description or ""
    assert d.strip(), f"{name} has no description"
    assert "``" not in d, f"{name}: docstring markup in the description"
    assert not re.search(r"\b(orchestrate|summary\.finish|run_sweep|preflight|RunConfig|__main__)\b", d), (
        f"{name}: internal names in the description: {d}"
    )
    p.format_help()  # renders


def _help(name):
    return dict(ALL)[name].format_help()


def test_sweep_does_not_promise_a_ray_train_run_per_trial():
    text = " ".join(_help("sweep").split())
    assert "each trial a Ray Train run" not in text and "Ray Train run" not in text
    assert "in its Tune trial process" in text or "Tune trial process" in text


def test_distill_stage_names_minilm():
    a = next(a for a in dict(ALL)["distill"]._actions if "--stage" in a.option_strings)
    assert "minilm" in a.help


def test_best_help_names_the_champion_alias():
    text = " ".join(_help("best").split())
    assert "champion" in text


def test_task_general_is_offered_only_where_it_runs():
    """General distillation runs through distill alone; sweep and finetune refuse it, so their help does not offer
    it."""
    assert "general" in " ".join(_help("distill").split())
    for name in ("sweep", "finetune"):
        task = next(a for a in dict(ALL)[name]._actions if "--task" in a.option_strings)
        assert "'general'" not in (task.help or ""), name


def test_every_command_keeps_its_options():
    """The options of every command (and ``data``'s sub-commands), in --help's order, pinned in
    tests/fixtures/command_options.json: a move or a refactor of the commands leaves what users type as it was. A new
    or renamed option is a deliberate change to that file."""
    pinned = json.loads((FIXTURES / "command_options.json").read_text(encoding="utf-8"))
    now = {
        name: [
            "/".join(a.option_strings) or a.dest
            for a in p._actions
            if not isinstance(a, (argparse._HelpAction, argparse._SubParsersAction))
        ]
        for name, p in ALL
    }
    assert now == pinned


HELP_FIXTURE = FIXTURES / "command_help.json"


def _helps(monkeypatch) -> dict[str, str]:
    monkeypatch.setenv("COLUMNS", "120")  # argparse wraps --help to the terminal's width
    return {name: p.format_help() for name, p in ALL}


def test_every_commands_help_is_kept_word_for_word(monkeypatch):
    """The full --help of every command (and ``data``'s sub-commands) at 120 columns, pinned in
    tests/fixtures/command_help.json: flags generated from the requests' fields (``commands/flags.py``) print the help
    the hand-written ones printed, order, defaults and wrapping included. A changed help is a deliberate change to
    that file (``python -m tests.unit.commands.test_help`` writes it)."""
    pinned = json.loads(HELP_FIXTURE.read_text(encoding="utf-8"))
    now = _helps(monkeypatch)
    assert sorted(now) == sorted(pinned)
    for name in now:
        assert now[name] == pinned[name], name


if __name__ == "__main__":  # rewrite the pinned help after a deliberate change
    mp = pytest.MonkeyPatch()
    HELP_FIXTURE.write_text(json.dumps(_helps(mp), indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    mp.undo()
