"""docs/ARCHITECTURE.md's mechanical claims, checked on the code: one folder per pipeline stage, each importing only
from the stages below it (lazy imports and imports under ``if TYPE_CHECKING:`` included), every command in
raydistill/commands/ (the old module paths users type are shims: an import of the command's ``main`` and its call,
nothing else), at most 10 modules at the package's top, Ray imported only under raydistill/orchestrate/, no import
cycle between modules, every module named in the module table, unit tests in a folder per stage."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from tests.paths import ROOT

PKG = ROOT / "raydistill"
# the pipeline's stages, lowest first: a module may import its own stage and those before it. The package's top
# (the API, the test models, the shims of the commands' old names) stands above them all.
STAGES = (
    "common",
    "tasks",
    "tracking",
    # every rule that picks a run (its best epoch, the sweep's best trial, the confirmation, best's pick): the loop
    # applies the epoch rule every epoch, so the room stands below train/ and everything above reads it
    "selection",
    "distill",
    "config",
    "models",
    "data",
    "train",
    # the teacher's fine-tune runs the train stage's loop and its reference score is the loop's scoring, so teacher/
    # stands above train/; its output cache reaches the loop from the launchers (Context.open_cache). Below it stay
    # what every model shares: loading an encoder folder (models/encoder.py) and a folder's label names (tasks/head.py)
    "teacher",
    "export",
    "results",
    "orchestrate",
    "commands",
)
# upward imports left for a reason, by module: {"raydistill.X.y": "why, and the issue that removes it"}. Empty: every
# module imports only from its own stage and those below it (a shim is no exemption here: it is recognised by shape).
ALLOWED_UPWARD: dict[str, str] = {}
# modules outside commands/ that may read sys.argv or define ``main``, with the reason; none may build a parser
ENTRY_POINTS = {
    # the guardian process orchestrate/connect.py spawns itself (``python -m raydistill.orchestrate.guard ADDRESS``),
    # not a command a user types: its one argument is the Ray address it watches, read from sys.argv
    "raydistill.orchestrate.guard": "the guardian process connect.py spawns, not a user's command",
}
MAX_TOP_MODULES = 10
# the size rules (issue 47's "Done when"): a module a person can read in one sitting, a function that fits a screen and
# a call that names few enough things to read
MAX_MODULE_LINES = 500
MAX_FUNCTION_LINES = 60
MAX_PARAMS = 8  # self/cls not counted; *args and **kwargs count one each
# what still breaks a size rule, by "module" or "module:function": why, and the work that removes it. A fixed entry is
# removed (test_the_size_allow_list_is_still_needed), not kept as a loophole.
OVERSIZE: dict[str, str] = {}


def modules() -> dict[str, Path]:
    """Dotted module name → file, for every .py file of the package."""
    out = {}
    for f in sorted(PKG.rglob("*.py")):
        parts = list(f.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = f
    return out


def type_only(tree: ast.AST) -> set[int]:
    """Lines of imports under ``if TYPE_CHECKING:`` (annotations only: never run, so never a cycle)."""
    lines = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            lines |= {
                n.lineno for stmt in node.body for n in ast.walk(stmt) if isinstance(n, ast.Import | ast.ImportFrom)
            }
    return lines


def imports(name: str, path: Path, known: dict, typing: bool = True) -> list[tuple[str, int]]:
    """(module, line) of every package module ``name`` imports, at module level or inside a function (a lazy import
    makes a cycle all the same, only later); ``typing=False`` leaves out the imports only type checkers run."""
    is_pkg = path.name == "__init__.py"
    here = name.split(".") if is_pkg else name.split(".")[:-1]
    found = []
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skip = set() if typing else type_only(tree)
    for node in ast.walk(tree):
        if getattr(node, "lineno", None) in skip:
            continue
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = here[: len(here) - node.level + 1] if node.level else []
            mod = ".".join(base + ([node.module] if node.module else []))
            # ``from . import x`` / ``from .pkg import mod``: x may be a module of its own
            targets = [f"{mod}.{a.name}" if f"{mod}.{a.name}" in known else mod for a in node.names]
        else:
            continue
        for t in targets:
            while t and t not in known:  # raydistill.tasks.glue.load → raydistill.tasks.glue
                t = t.rpartition(".")[0]
            if t and t != name:
                found.append((t, node.lineno))
    return found


def third_party(path: Path) -> set[str]:
    roots = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            roots |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            roots.add(node.module.split(".")[0])
    return roots


def strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's algorithm, iterative."""
    index, low, on, stack, out, counter = {}, {}, set(), [], [], [0]
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter[0]
        counter[0] += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on.discard(w)
                        comp.append(w)
                        if w == v:
                            break
                    out.append(sorted(comp))
    return out


def stage(name: str) -> int:
    """The stage index of a dotted module name; the package's top is above every stage."""
    parts = name.split(".")
    return STAGES.index(parts[1]) if len(parts) > 2 or (len(parts) == 2 and parts[1] in STAGES) else len(STAGES)


def test_every_folder_is_a_stage_and_the_top_stays_small():
    folders = {p.name for p in PKG.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    assert folders == set(STAGES), f"folders that are not stages (or stages without a folder): {folders ^ set(STAGES)}"
    top = sorted(p.name for p in PKG.glob("*.py"))
    assert len(top) <= MAX_TOP_MODULES, f"{len(top)} modules at the package's top: {top}"


# test folders beside the stages' own: the benchmarks' scripts are not a stage of the package
TEST_ONLY_FOLDERS = {"benchmarks"}


def test_the_unit_tests_mirror_the_stages():
    """tests/unit/<stage>/ for every stage and nothing else: a stage's tests are found where its code is."""
    unit = ROOT / "tests" / "unit"
    folders = {p.name for p in unit.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    assert folders - TEST_ONLY_FOLDERS == set(STAGES), f"test folders off the stages: {folders ^ set(STAGES)}"


def is_shim(path: Path) -> bool:
    """A module that only keeps a command's old name: a docstring, ``from raydistill.commands.X import main`` (and
    other names re-exported from that command module), and ``if __name__ == "__main__":`` calling ``main()`` (``raise
    SystemExit(main())`` too). Anything else — a function, another import, an assignment — is not a shim."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    body = list(tree.body)
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]  # the docstring
    if not body or not _runs_main(body[-1]):
        return False
    imports = body[:-1]
    return bool(imports) and all(
        isinstance(s, ast.ImportFrom)
        and not s.level
        and (s.module or "").startswith("raydistill.commands.")
        and "main" in {a.name for a in s.names}
        for s in imports
    )


def _runs_main(node: ast.stmt) -> bool:
    """``if __name__ == "__main__":`` whose every statement is ``main()`` or ``raise SystemExit(main())``."""
    if not (isinstance(node, ast.If) and not node.orelse and ast.unparse(node.test) == "__name__ == '__main__'"):
        return False
    calls_main = "main()"
    return all(
        (isinstance(s, ast.Expr) and ast.unparse(s) == calls_main)
        or (isinstance(s, ast.Raise) and ast.unparse(s) == f"raise SystemExit({calls_main})")
        for s in node.body
    )


def upward_imports(known: dict[str, Path]) -> list[str]:
    """Every import of a module from a stage above its own (a shim's import of its command apart)."""
    upward = []
    for name, f in known.items():
        if stage(name) == len(STAGES) or name in ALLOWED_UPWARD or is_shim(f):
            continue
        for target, line in imports(name, f, known):
            if stage(target) > stage(name):
                upward.append(f"{f.relative_to(ROOT)}:{line} imports {target}")
    return upward


def test_each_stage_imports_only_from_stages_below_it():
    upward = upward_imports(modules())
    assert not upward, "imports from a stage above:\n" + "\n".join(upward)


def test_the_allow_lists_are_still_needed():
    """An allow-list entry whose module no longer imports upward, or no longer reads argv (or is gone), is removed,
    not kept as a loophole."""
    known = modules()
    stale = [
        n for n in ALLOWED_UPWARD if n not in known or all(stage(t) <= stage(n) for t, _ in imports(n, known[n], known))
    ]
    assert not stale, f"ALLOWED_UPWARD entries with nothing to allow: {stale}"
    idle = [n for n in ENTRY_POINTS if n not in known or not command_parts(known[n])]
    assert not idle, f"ENTRY_POINTS entries with nothing to allow: {idle}"


def test_the_stage_rule_sees_an_import_only_type_checkers_run(tmp_path):
    f = tmp_path / "m.py"
    f.write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from raydistill.train.loop import RunData\n")
    ((target, _),) = imports("raydistill.config.m", f, modules())
    assert stage(target) > stage("raydistill.config.m")


def command_parts(path: Path) -> list[str]:
    """What makes a module a command: building an argparse parser (``ArgumentParser(…)``, the commands' ``Parser(…)``,
    sub-parsers), parsing (``parse_args``, ``parse_known_args``), reading ``sys.argv``, a top-level ``main``."""
    found = []
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            fn = node.func
            called = fn.attr if isinstance(fn, ast.Attribute) else fn.id if isinstance(fn, ast.Name) else ""
            if called in ("ArgumentParser", "Parser", "add_subparsers", "parse_args", "parse_known_args"):
                found.append(f"{called}() at line {node.lineno}")
        elif isinstance(node, ast.Attribute) and ast.unparse(node) == "sys.argv":
            found.append(f"sys.argv at line {node.lineno}")
    found += [f"def main at line {n.lineno}" for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "main"]
    return found


def test_commands_live_only_in_commands():
    """A command — a parser, a parse of argv, a ``main`` — is a module of raydistill/commands/; everywhere else only a
    shim keeps a command's old name (``python -m raydistill.sweep``)."""
    outside = []
    for name, f in modules().items():
        if name.startswith("raydistill.commands") or is_shim(f):
            continue
        parts = command_parts(f)
        if name in ENTRY_POINTS:
            parts = [p for p in parts if not p.startswith(("sys.argv", "def main"))]
        outside += [f"{f.relative_to(ROOT)}: {p}" for p in parts]
    assert not outside, "command code outside raydistill/commands/:\n" + "\n".join(outside)


def test_a_shim_is_recognised_by_its_shape_alone(tmp_path):
    shim = '"""python -m raydistill.x"""\n\nfrom raydistill.commands.x import main\n\nif __name__ == "__main__":\n'
    cases = {
        shim + "    main()\n": True,
        shim + "    raise SystemExit(main())\n": True,
        shim.replace("import main", "import main, parser") + "    main()\n": True,  # a name re-exported too
        shim + "    main()\n    print('more')\n": False,
        shim + "    main(['--help'])\n": False,
        shim.replace("from raydistill.commands.x", "from raydistill.train.loop") + "    main()\n": False,
        "import os\n" + shim + "    main()\n": False,
        shim + "    main()\n\n\ndef helper():\n    pass\n": False,
        shim.replace("\nif __name__", "\nX = 1\nif __name__") + "    main()\n": False,
        "from raydistill.commands.x import main\n": False,  # no call: a plain module that imports from above
    }
    for i, (text, shim_shaped) in enumerate(cases.items()):
        f = tmp_path / f"m{i}.py"
        f.write_text(text)
        assert is_shim(f) is shim_shaped, text


def test_the_command_rule_sees_a_parser_outside_commands(tmp_path):
    f = tmp_path / "m.py"
    f.write_text("import argparse, sys\n\ndef main():\n    argparse.ArgumentParser().parse_args(sys.argv[1:])\n")
    assert len(command_parts(f)) == 4  # ArgumentParser(), parse_args(), sys.argv, def main


def test_the_stage_rule_sees_a_lazy_import_from_above(tmp_path):
    f = tmp_path / "m.py"
    f.write_text("def f():\n    from raydistill.train.loop import run\n")
    ((target, _),) = imports("raydistill.config.m", f, modules())
    assert stage(target) > stage("raydistill.config.m")


def argparse_parts(path: Path) -> list[str]:
    """What of argparse a module holds: an import of it, a ``Namespace`` named (a parsed command line passed on)."""
    found = [f"import argparse (line {n})" for n in _argparse_imports(path)]
    text = path.read_text(encoding="utf-8")
    found += [f"Namespace (line {text.count(chr(10), 0, m.start()) + 1})" for m in re.finditer(r"\bNamespace\b", text)]
    return found


def _argparse_imports(path: Path) -> list[int]:
    lines = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
        names += [node.module or ""] if isinstance(node, ast.ImportFrom) else []
        lines += [node.lineno for name in names if name.split(".")[0] == "argparse"]
    return lines


def test_argparse_only_in_commands():
    """A command's flags end where the command builds its typed request: no module outside raydistill/commands/
    imports argparse or passes a parsed ``Namespace`` on (a shim has neither)."""
    outside = [
        f"{f.relative_to(ROOT)}: {part}"
        for name, f in modules().items()
        if not name.startswith("raydistill.commands")
        for part in argparse_parts(f)
    ]
    assert not outside, "argparse outside raydistill/commands/:\n" + "\n".join(outside)


def test_the_argparse_rule_sees_an_import_and_a_namespace(tmp_path):
    f = tmp_path / "m.py"
    f.write_text("from argparse import Namespace\n\n\ndef f(a: 'Namespace'):\n    from types import SimpleNamespace\n")
    assert argparse_parts(f) == ["import argparse (line 1)", "Namespace (line 1)", "Namespace (line 4)"]


def test_ray_is_imported_only_under_orchestrate():
    outside = [
        str(f.relative_to(ROOT))
        for name, f in modules().items()
        if not name.startswith("raydistill.orchestrate") and "ray" in third_party(f)
    ]
    assert not outside, f"Ray imported outside raydistill/orchestrate/: {outside}"


def test_no_import_cycle():
    known = modules()
    graph = {n: {t for t, _ in imports(n, f, known, typing=False)} for n, f in known.items()}
    # a package's __init__ importing its own submodules is how a package exposes them, not a cycle of modules
    for n in graph:
        graph[n] = {t for t in graph[n] if not (known[n].name == "__init__.py" and t.startswith(n + "."))}
    cycles = [c for c in strongly_connected(graph) if len(c) > 1]
    assert not cycles, f"import cycles (each a strongly connected component): {cycles}"


def test_the_cycle_finder_finds_a_cycle():
    assert strongly_connected({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"], ["d"]]


def module_table() -> list[tuple[str, str]]:
    doc = (ROOT / "docs" / "ARCHITECTURE.md").read_text(encoding="utf-8")
    table = doc.split("## Modules", 1)[1].split("\n## ", 1)[0]
    rows = []
    for line in table.splitlines():
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", line.strip().strip("|"))]
        if len(cells) >= 2 and cells[0] and not set(cells[0]) <= set("-: ") and cells[0] != "module":
            rows.append((cells[0], cells[1]))
    return rows


def test_every_module_is_named_in_the_module_table():
    """Each module of raydistill/ appears in the first column of docs/ARCHITECTURE.md's table, by its path below
    raydistill/ (``orchestrate/run.py``), or by name in the row of its folder (``tasks/``: ``glue.py``,
    ``models/``: ``student.build_student``)."""
    rows = module_table()
    names = " ".join(re.findall(r"`([^`]+)`", " ".join(first for first, _ in rows)))
    by_folder = {first.strip("`"): first + " " + what for first, what in rows if first.strip("`").endswith("/")}
    missing = []
    for f in modules().values():
        rel = f.relative_to(PKG).as_posix()
        if f.name == "__init__.py" and rel != "__init__.py":
            continue  # a package is named by its folder
        if rel == "__init__.py":
            continue
        folder = rel.rpartition("/")[0] + "/" if "/" in rel else ""
        if re.search(rf"(^|\s){re.escape(rel)}(\s|$)", names):
            continue
        stem = re.escape(f.name[:-3])  # glue.py, or student.build_student: the module by name in its folder's row
        if folder and folder in by_folder and re.search(rf"(^|[\s`(]){stem}\.", by_folder[folder]):
            continue
        missing.append(rel)
    assert not missing, f"modules missing from docs/ARCHITECTURE.md's module table: {missing}"


def size_breaches(known: dict[str, Path]) -> dict[str, str]:
    """Every module over ``MAX_MODULE_LINES`` and every function over ``MAX_FUNCTION_LINES`` lines or ``MAX_PARAMS``
    parameters, keyed as ``OVERSIZE`` is."""
    out = {}
    for name, f in known.items():
        text = f.read_text(encoding="utf-8")
        if (n := len(text.splitlines())) > MAX_MODULE_LINES:
            out[name] = f"{n} lines"
        for node in ast.walk(ast.parse(text)):
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            a = node.args
            params = [p.arg for p in a.posonlyargs + a.args + a.kwonlyargs if p.arg not in ("self", "cls")]
            params += [p.arg for p in (a.vararg, a.kwarg) if p]
            length = (node.end_lineno or node.lineno) - node.lineno + 1
            if len(params) > MAX_PARAMS or length > MAX_FUNCTION_LINES:
                out[f"{name}:{node.name}"] = f"{len(params)} params, {length} lines"
    return out


def test_modules_and_functions_stay_small():
    breaches = {k: v for k, v in size_breaches(modules()).items() if k not in OVERSIZE}
    assert not breaches, (
        f"over {MAX_MODULE_LINES} lines a module, {MAX_FUNCTION_LINES} lines or {MAX_PARAMS} params a function "
        "(a frozen dataclass groups parameters that travel together):\n"
        + "\n".join(f"{k}: {v}" for k, v in sorted(breaches.items()))
    )


def test_the_size_allow_list_is_still_needed():
    stale = sorted(set(OVERSIZE) - set(size_breaches(modules())))
    assert not stale, f"OVERSIZE entries that no longer break a size rule: {stale}"


def test_the_size_rule_counts_lines_and_parameters(tmp_path):
    f = tmp_path / "m.py"
    long_body = "".join(f"    x{i} = {i}\n" for i in range(MAX_FUNCTION_LINES))
    params = ", ".join(f"p{i}" for i in range(MAX_PARAMS))
    ok, wide = f"def ok(self, {params}):\n    pass\n", f"def wide({params}, *rest):\n    pass\n"
    f.write_text(f"{ok}\n\n{wide}\n\ndef long():\n{long_body}")
    assert size_breaches({"m": f}) == {"m:wide": f"{MAX_PARAMS + 1} params, 2 lines", "m:long": "0 params, 61 lines"}
