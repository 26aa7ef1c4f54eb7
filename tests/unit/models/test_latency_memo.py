"""The latency memo keeps only timings taken on a machine no busier than its cores: one taken under load would be
every later run's reported latency."""

from __future__ import annotations

import json

from raydistill.models import latency


def test_a_timing_under_load_is_reported_but_not_memoised(tmp_path, monkeypatch, tiny_teacher):
    from transformers import AutoModelForSequenceClassification

    model = AutoModelForSequenceClassification.from_pretrained(tiny_teacher())
    calls = []

    def fake(model, length, device):
        calls.append(1)
        return {"latency_ms_b1": 10.0 * len(calls), "latency_ms_b32": 100.0}

    monkeypatch.setattr(latency, "measure_latency", fake)
    monkeypatch.setattr(latency.os, "cpu_count", lambda: 2)
    monkeypatch.setattr(latency, "busy", lambda: 7.5)
    assert latency.student_speed(model, 16, str(tmp_path))["latency_ms_b1"] == 10.0
    assert not (tmp_path / "latency-cache.json").exists()
    assert latency.student_speed(model, 16, str(tmp_path))["latency_ms_b1"] == 20.0  # measured again
    monkeypatch.setattr(latency, "busy", lambda: 1.0)
    quiet = latency.student_speed(model, 16, str(tmp_path))
    assert quiet["latency_ms_b1"] == 30.0 and "load" not in quiet
    assert latency.student_speed(model, 16, str(tmp_path))["latency_ms_b1"] == 30.0  # memoised
    memo = json.loads((tmp_path / "latency-cache.json").read_text())
    key = next(iter(memo))
    memo[key] = {"latency_ms_b1": 1431.0, "latency_ms_b32": 4401.0}  # an entry from before the rule: no load
    (tmp_path / "latency-cache.json").write_text(json.dumps(memo))
    assert latency.student_speed(model, 16, str(tmp_path))["latency_ms_b1"] == 40.0
