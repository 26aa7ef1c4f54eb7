"""benchmarks/int8_variants.py: every weight format of a model scored and timed beside its fp32 file, the model's
own folder left as it was (the export writes into a copy)."""

from __future__ import annotations

import json
import os
import sys

import pytest

from tests.paths import ROOT
from tests.unit.export.test_onnx import exported_student

pytest.importorskip("onnxruntime")
sys.path.insert(0, str(ROOT / "benchmarks"))
import int8_variants  # noqa: E402


def test_each_variant_is_scored_timed_and_the_source_untouched(tiny_teacher, glue_dir, tmp_path, capsys):
    d = exported_student(tiny_teacher("classification"), "classification", tmp_path / "student")
    before = sorted(os.listdir(d))
    out = tmp_path / "v.json"
    int8_variants.main(["--model", f"{d}:sst2", "--data-dir", glue_dir, "--rounds", "2", "--json", str(out)])
    assert sorted(os.listdir(d)) == before
    res = json.loads(out.read_text())
    assert isinstance(res["machine"]["vnni"], list)
    (m,) = res["models"]
    assert set(m["variants"]) == {"fp32", "s8", "s8-7bit", "u8"} and m["task"] == "sst2"
    fp32 = m["variants"]["fp32"]
    assert fp32["max_dev_logit_diff_rel"] == 0 and all(v["b1_ms"] > 0 for v in m["variants"].values())
    assert all(v["mb"] < fp32["mb"] for k, v in m["variants"].items() if k != "fp32")
    assert capsys.readouterr().out.count("INT8VAR sst2 student ") == 4
