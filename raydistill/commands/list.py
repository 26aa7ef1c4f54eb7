"""``python -m raydistill list [spaces|methods|tasks|inits]``: what the package ships, one line each.

Every line is read from the component itself: a search space's YAML ``description``, a method's ``description``
attribute, a task's record (kind, main metric, language), an init function's docstring. A new space, method, task or
init shows up here without this module changing.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field

from raydistill.commands.cli import HelpFormatter, Parser, cli
from raydistill.commands.flags import add_fields, flag, request_from

GROUPS = ("spaces", "methods", "tasks", "inits")


@dataclass(frozen=True)
class ListRequest:
    """What one listing is asked for: the list command's flags as typed values, generated from these fields."""

    group: str | None = field(
        default=None,
        metadata=flag("the one group to list (default: all four)", positional=True, nargs="?", choices=GROUPS),
    )
    json: bool = field(
        default=False,
        metadata=flag("print one JSON object {group: {name: description}} instead", action="store_true"),
    )


def first_line(text: str | None) -> str:
    """The first sentence-line of a docstring or description, whitespace collapsed."""
    for para in (text or "").strip().split("\n\n"):
        line = " ".join(para.split())
        if line:
            return line
    return ""


def spaces() -> list[tuple[str, str]]:
    import yaml

    from raydistill.config.space import SPACES_DIR

    out = []
    for f in sorted(os.listdir(SPACES_DIR)):
        if f.endswith(".yaml"):
            with open(os.path.join(SPACES_DIR, f), encoding="utf-8") as fh:
                raw = yaml.safe_load(fh) or {}
            where = ", ".join(f"{k} {raw[k]}" for k in ("method", "task") if isinstance(raw.get(k), str))
            out.append((f[:-5], first_line(raw.get("description")) + (f" ({where})" if where else "")))
    return out


def methods() -> list[tuple[str, str]]:
    from raydistill.distill.methods import METHODS

    return [(name, first_line(getattr(cls, "description", "") or cls.__doc__)) for name, cls in sorted(METHODS.items())]


def tasks() -> list[tuple[str, str]]:
    from raydistill.tasks import TASKS

    out = []
    for name, t in TASKS.items():
        labels = f"{t.num_labels} labels" if t.kind in ("classification", "token") else ""
        text = (
            "raw text from --unlabeled-text (general distillation, no labels)"
            if not t.labelled
            else ("sentence pairs" if t.pair else "single sentences")
        )
        out.append(
            (
                name,
                f"{t.kind}, {', '.join(x for x in (labels, text) if x)}; metric {t.main_metric}; language {t.language}",
            )
        )
    return out


def inits() -> list[tuple[str, str]]:
    from raydistill.models.student import INITS

    arg = {"layers": "layers:1,3,5", "checkpoint": "checkpoint:DIR"}
    return [(arg.get(name, name), first_line(fn.__doc__)) for name, fn in INITS.items()]


def listing(group: str) -> list[tuple[str, str]]:
    return {"spaces": spaces, "methods": methods, "tasks": tasks, "inits": inits}[group]()


TITLES = {
    "spaces": "search spaces (python -m raydistill.sweep NAME)",
    "methods": "methods (--method NAME)",
    "tasks": "tasks (--task NAME)",
    "inits": "student inits (--init NAME)",
}


def render(groups, as_json: bool = False) -> str:
    if as_json:
        return json.dumps({g: dict(listing(g)) for g in groups}, ensure_ascii=False)
    blocks = []
    for g in groups:
        rows = listing(g)
        width = max(len(n) for n, _ in rows)
        blocks.append("\n".join([f"{TITLES[g]}:"] + [f"  {n.ljust(width)}  {d}" for n, d in rows]))
    return "\n\n".join(blocks)


def parser() -> Parser:
    p = Parser(
        prog="python -m raydistill list",
        formatter_class=HelpFormatter,
        description="List what raydistill ships: search spaces, distillation methods, tasks "
        "and student initialisations, with one line each.",
    )
    add_fields(p, ListRequest, ("group", "json"), ListRequest())
    return p


@cli
def main(argv=None) -> str:
    r = request_from(ListRequest, parser().parse_args(argv))
    text = render([r.group] if r.group else GROUPS, r.json)
    print(text, flush=True)
    return text
