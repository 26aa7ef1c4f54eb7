"""benchmarks/distill_ab.py: one distill command under two sets of flags, alternated ABBA, medians and their ratio
(each run is a real ``raydistill.distill`` process in the benchmark; here ``one`` stands in for it)."""

from __future__ import annotations

import json
import sys

import pytest

from tests.paths import ROOT

sys.path.insert(0, str(ROOT / "benchmarks"))
import distill_ab  # noqa: E402


def test_the_sides_alternate_and_the_ratio_is_of_the_medians(tmp_path, capsys, monkeypatch):
    speed = {"a": [100.0, 110.0], "b": [150.0, 170.0]}
    ran = []

    def one(side, flags, common, work, i):
        ran.append((side, i, tuple(flags), tuple(common)))
        return {"side": side, "round": i, "wall_s": 10.0 + i, "train_examples_per_s": speed[side][i]}

    monkeypatch.setattr(distill_ab, "one", one)
    monkeypatch.setattr(distill_ab, "machine", lambda: {})
    out = tmp_path / "ab.json"
    distill_ab.main(["--a", "--cpus-per-worker 1", "--rounds", "2", "--work", str(tmp_path), "--json", str(out),
                     "--", "--method", "kd"])  # fmt: skip
    assert [(s, i) for s, i, _, _ in ran] == [("a", 0), ("b", 0), ("b", 1), ("a", 1)]  # ABBA: the same machine state
    assert {f for _, _, f, _ in ran} == {("--cpus-per-worker", "1"), ()} and {c for *_, c in ran} == {
        ("--method", "kd")
    }
    got = json.loads(out.read_text())
    assert got["ratio"] == pytest.approx(160.0 / 105.0)
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert last.startswith("DISTILLAB a_examples_per_s=105.0 b_examples_per_s=160.0") and last.endswith("=1.52")
