"""docs/ARCHITECTURE.md's mechanical claims, checked on the code: one folder per pipeline stage, each importing only
from the stages below it (command modules exempt), at most 10 modules at the package's top, Ray imported only under
raydistill/orchestrate/, no import cycle between modules, every module named in the module table."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "raydistill"
# the pipeline's stages, lowest first: a module may import its own stage and those before it. The package's top
# (the commands: sweep, best, finetune, evaluate, the API) stands above them all.
STAGES = (
    "common",
    "tasks",
    "tracking",
    "distill",
    "config",
    "models",
    "data",
    "train",
    "export",
    "results",
    "orchestrate",
    "commands",
)
# command modules inside a stage's folder, kept at the names users type (``python -m raydistill.distill.augment``)
COMMANDS = ("__main__", "raydistill.distill.augment")
MAX_TOP_MODULES = 10


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


def test_each_stage_imports_only_from_stages_below_it():
    known = modules()
    upward = []
    for name, f in known.items():
        if name.endswith(COMMANDS) or stage(name) == len(STAGES):
            continue
        for target, line in imports(name, f, known):
            if stage(target) > stage(name):
                upward.append(f"{f.relative_to(ROOT)}:{line} imports {target}")
    assert not upward, "imports from a stage above:\n" + "\n".join(upward)


def test_the_stage_rule_sees_a_lazy_import_from_above(tmp_path):
    f = tmp_path / "m.py"
    f.write_text("def f():\n    from raydistill.train.loop import run\n")
    ((target, _),) = imports("raydistill.config.m", f, modules())
    assert stage(target) > stage("raydistill.config.m")


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
