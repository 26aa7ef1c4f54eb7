"""benchmarks/data_digests.py runs and prints its one JSON line (what it measures: its report, not this test)."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.paths import ROOT


def test_data_digests_prints_its_line(glue_dir):
    cmd = [sys.executable, str(ROOT / "benchmarks" / "data_digests.py"), "--data-dir", str(glue_dir), "--trials", "3"]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True, cwd=ROOT).stdout.strip().splitlines()[-1]
    got = json.loads(out)
    assert got["task"] == "sst2" and got["trials"] == 3
    assert {"first_s", "later_median_s", "total_s", "commit"} <= set(got)
