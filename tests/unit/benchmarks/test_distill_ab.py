"""benchmarks/distill_ab.py: one distill command under two sets of flags, alternated, each run its own process."""

from __future__ import annotations

import json
import sys

from tests.paths import ROOT

sys.path.insert(0, str(ROOT / "benchmarks"))
import distill_ab  # noqa: E402


def test_the_smoke_runs_both_sides_each_in_its_process_and_reads_their_json_lines(tmp_path, capsys):
    out = tmp_path / "ab.json"
    distill_ab.main(
        ["--smoke", "--a", "--cpus-per-worker 1", "--rounds", "1", "--work", str(tmp_path), "--json", str(out)]
    )
    got = json.loads(out.read_text())
    assert [(r["side"], r["round"]) for r in got["runs"]] == [("a", 0), ("b", 0)]  # then B before A: --rounds 2
    assert got["sides"] == {"a": ["--cpus-per-worker", "1"], "b": []}
    assert all(r["train_examples_per_s"] > 0 and r["wall_s"] > 0 for r in got["runs"])
    assert capsys.readouterr().out.strip().splitlines()[-1].startswith("DISTILLAB a_examples_per_s=")
