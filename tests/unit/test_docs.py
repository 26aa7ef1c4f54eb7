"""The README and docs/ hold together: every relative link resolves (the file, and a ``#anchor`` to a heading of it),
the README's commands table names only commands that exist (each answers ``--help``), and every module path the docs
and the code name exists."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.paths import ROOT

DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
LINK = re.compile(r"!?\[(?:[^\]\\]|\\.)*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
FENCE = re.compile(r"^\s*(```|~~~)")


def prose(text: str) -> list[str]:
    """The lines outside fenced code blocks, inline code spans blanked (a link shown as code is not a link)."""
    out, fenced = [], False
    for line in text.splitlines():
        if FENCE.match(line):
            fenced = not fenced
            out.append("")
            continue
        out.append("" if fenced else re.sub(r"`+[^`]*`+", "``", line))
    return out


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: links reduced to their text, lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading).strip().lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    seen: dict[str, int] = {}
    out = set()
    fenced = False
    for line in path.read_text(encoding="utf-8").splitlines():
        if FENCE.match(line):
            fenced = not fenced
        m = None if fenced else re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if m:
            s = slug(m.group(1))
            n = seen.get(s, 0)
            seen[s] = n + 1
            out.add(s if n == 0 else f"{s}-{n}")
    return out


def links(path: Path) -> list[tuple[int, str]]:
    return [
        (i, m.group(1))
        for i, line in enumerate(prose(path.read_text(encoding="utf-8")), 1)
        for m in LINK.finditer(line)
        if not re.match(r"^[a-z][a-z0-9+.-]*:", m.group(1), re.I)  # http:, https:, mailto:, …
    ]


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(doc):
    bad = []
    for line, target in links(doc):
        file, _, anchor = target.partition("#")
        dest = (doc.parent / file).resolve() if file else doc
        where = f"{doc.relative_to(ROOT)}:{line}: {target}"
        if not dest.exists():
            bad.append(f"{where} (no such file)")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            bad.append(f"{where} (no heading with that anchor in {dest.relative_to(ROOT)})")
    assert not bad, "broken links:\n" + "\n".join(bad)


def test_link_checker_sees_a_broken_link(tmp_path):
    doc = tmp_path / "x.md"
    fenced = "```\n[fenced](y.md)\n```\n"
    doc.write_text("# A title\n[ok](#a-title) [bad](#nope) [gone](missing.md) `[code](x.md)`\n" + fenced)
    assert links(doc) == [(2, "#a-title"), (2, "#nope"), (2, "missing.md")]
    assert anchors(doc) == {"a-title"}
    assert slug("Quickstart: minutes on a laptop CPU, offline") == "quickstart-minutes-on-a-laptop-cpu-offline"
    assert slug("`search`: the [YAML](a.md) keys") == "search-the-yaml-keys"


# a pointer from the code to the docs: README.md or a docs/ or benchmarks/ file, with a #anchor or, in parentheses,
# a section by its heading ("(docs/methods.md, "The loss convention")"); a bare README names no file
POINTER = re.compile(r"(?<![\w/.-])((?:docs|benchmarks)/[\w./-]*\.md|README\.md)(?:#([\w-]+)|, \"?([^)\"]+)\"?\))?")
BARE_README = re.compile(r"\bREADME\b(?!\.md)")


def code_texts(source: str) -> list[tuple[int, str]]:
    """(line, text) of every string (messages, docstrings, f-strings' literal parts) and comment of a module."""
    import ast
    import io
    import tokenize

    out = [
        (node.lineno, node.value)
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Constant) and isinstance(node.value, str)
    ]
    tokens = tokenize.generate_tokens(io.StringIO(source).readline)
    return out + [(t.start[0], t.string) for t in tokens if t.type == tokenize.COMMENT]


def broken_pointers(text: str) -> list[str]:
    """What in ``text`` points at a file, heading or section of the docs that does not exist."""
    bad = [f"{text[max(m.start() - 40, 0) : m.end() + 20]!r}: README names no file" for m in BARE_README.finditer(text)]
    for m in POINTER.finditer(text):
        dest = ROOT / m.group(1)
        anchor = m.group(2) or (slug(m.group(3)) if m.group(3) else "")
        if not dest.is_file():
            bad.append(f"{m.group(0)!r}: no such file")
        elif anchor and anchor not in anchors(dest):
            bad.append(f"{m.group(0)!r}: no heading with the anchor {anchor!r} in {m.group(1)}")
    return bad


def test_every_pointer_from_the_code_to_the_docs_exists():
    """Issue 48 item 6: a message (or docstring, or comment) that says where to read on names a file that exists
    and, where it names a section, a heading of it (the offline error pointed to a README section "Offline")."""
    bad = []
    for py in sorted((ROOT / "raydistill").rglob("*.py")):
        for line, text in code_texts(py.read_text(encoding="utf-8")):
            bad += [f"{py.relative_to(ROOT)}:{line}: {b}" for b in broken_pointers(text)]
    assert not bad, "broken pointers to the docs:\n" + "\n".join(bad)


def test_the_pointer_checker_sees_a_broken_pointer():
    assert broken_pointers("run offline (see README, Offline)")
    assert broken_pointers("(README.md#offline)") and broken_pointers("(docs/CLUSTER.md, section 2)")
    assert broken_pointers("docs/no-such-file.md")
    assert not broken_pointers("(README.md#quickstart-minutes-on-a-laptop-cpu-offline)")
    assert not broken_pointers('(docs/methods.md, "The loss convention") and docs/benchmarks/README.md#machine')


def readme_commands() -> list[list[str]]:
    """The argv that asks each command of the README's commands table for its ``--help``: the first column's
    ``python -m MODULE`` (or ``raydistill SUB``), with its subcommand where it names one (``summary|split``: each)."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("\n## Commands\n", 1)[1].split("\n## ", 1)[0]
    argvs = []
    for row in re.findall(r"^\|\s*`([^`]+)`\s*\|", section, re.M):
        words = row.replace("\\|", "|").split()
        if words[:2] == ["python", "-m"]:
            module, rest = words[2], words[3:]
        elif words[0] == "raydistill":
            module, rest = "raydistill", words[1:]
        else:
            raise AssertionError(f"README commands table: {row!r} is neither python -m MODULE nor raydistill SUB")
        subs = rest[0].split("|") if rest and re.fullmatch(r"[a-z][a-z_]*(\|[a-z][a-z_]*)*", rest[0]) else [""]
        argvs += [[sys.executable, "-m", module, *([s] if s else []), "--help"] for s in subs]
    return argvs


def test_readme_commands_exist():
    argvs = readme_commands()
    assert len(argvs) >= 8, argvs  # the table was found and read
    failed = []
    for argv in argvs:
        r = subprocess.run(argv, capture_output=True, text=True, cwd=ROOT, timeout=120)
        if r.returncode != 0 or "usage" not in (r.stdout + r.stderr).lower():
            failed.append(f"{' '.join(argv[1:])}: exit {r.returncode}: {(r.stderr or r.stdout).strip()[-300:]}")
    assert not failed, "README commands that do not answer --help:\n" + "\n".join(failed)


GROUPED_CARVE = "2026-11-26"  # the day the validation split became a carve by group (issue 36)


def test_results_rows_say_which_split_chose_them():
    """Issue 45 item 8: a README results row chosen before the grouped carve says so, and so does its report's top;
    a row the grouped split chose says that."""
    section = ROOT.joinpath("README.md").read_text(encoding="utf-8").split("## Results", 1)[1].split("\n## ", 1)[0]
    rows = [ln for ln in section.splitlines() if ln.startswith("| [")]
    header = next(ln for ln in section.splitlines() if ln.startswith("| task"))
    cols = [c.strip() for c in header.strip("|").split("|")]
    assert rows and "chosen on" in cols and "date" in cols, header
    for row in rows:
        cells = dict(zip(cols, (c.strip() for c in row.strip("|").split("|")), strict=True))
        report = ROOT / LINK.search(cells[cols[0]]).group(1)
        if cells["date"] < GROUPED_CARVE:
            assert "row-wise" in cells["chosen on"], row
            assert "row-wise validation split" in report.read_text(encoding="utf-8")[:1500], report
        else:
            assert "grouped" in cells["chosen on"], row


# a module path named in the docs or the code (`folder/module.py`), looked up from these folders of the repository
MODULE_PATH = re.compile(r"(?<![\w/.-])((?:[a-z_]+/)+[a-z_0-9]+\.py)\b")
PATH_ROOTS = ("", "raydistill", "tests", "tests/unit")
# paths in other projects, named for comparison
FOREIGN = ("textbrewer/",)


def stale_module_paths(files: list[Path]) -> list[str]:
    """``file:line: path`` for each module path a file names that no file of the repository has."""
    out = []
    for f in files:
        for i, line in enumerate(f.read_text(encoding="utf-8").splitlines(), 1):
            for m in MODULE_PATH.findall(line):
                if not m.startswith(FOREIGN) and not any((ROOT / r / m).exists() for r in PATH_ROOTS):
                    out.append(f"{f.relative_to(ROOT) if f.is_relative_to(ROOT) else f}:{i}: {m}")
    return out


def test_every_module_path_the_docs_and_code_name_exists():
    """A module moved or renamed leaves no stale path behind in the docs (the dated reports aside: they name the tree
    they measured), the package, the tests or the benchmarks."""
    files = [ROOT / "README.md", *(ROOT / "docs").glob("*.md")]
    files += [p for d in ("raydistill", "tests", "benchmarks") for p in (ROOT / d).rglob("*.py")]
    files.remove(Path(__file__).resolve())  # this file names moved paths on purpose, in its checker's own test
    assert not stale_module_paths(files)


def test_the_stale_path_checker_sees_a_moved_module(tmp_path):
    doc = tmp_path / "doc.md"
    doc.write_text("the cache lives in `train/teacher_cache.py`; the loop in `train/loop.py`\n")
    assert [s.split(": ")[1] for s in stale_module_paths([doc])] == ["train/teacher_cache.py"]
