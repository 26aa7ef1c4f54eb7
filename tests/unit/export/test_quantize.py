"""INT8 ONNX student (``raydistill.export.quantize``, ``raydistill.best --onnx --quantize``): close to fp32, smaller,
scored
on the run's dev set by the same code as the PyTorch students, timed against the teacher and logged to the trial."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import torch

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from raydistill.export.onnx import export_onnx
from raydistill.export.quantize import OrtModel, dev_data, dev_score, quantize_onnx
from raydistill.models.encoder import load_model
from raydistill.tasks.encode import collate
from raydistill.train.saved import evaluate_dir
from tests.unit.export.test_onnx import exported_student

# measured on the tiny random 2-layer, hidden-32 student below (logits of |x| <= 0.026): max |INT8 - fp32 logit|
# 1.1e-4 to 2.6e-4 over three batches, at most 1.5% of the largest logit; the test allows 5%
INT8_REL_TOL = 0.05


def test_int8_close_to_fp32_smaller_and_scored_like_pytorch(tiny_teacher, glue_dir, tmp_path):
    d = exported_student(tiny_teacher("classification"), "classification", tmp_path / "student")
    fp32 = export_onnx(d, "classification", length=32)["onnx_path"]
    int8 = quantize_onnx(fp32)
    assert int8 == os.path.join(d, "model.int8.onnx") and os.path.getsize(int8) < os.path.getsize(fp32)

    g = torch.Generator().manual_seed(1)
    ids = torch.randint(5, load_model(d, "classification").config.vocab_size, (4, 24), generator=g)
    mask = torch.ones_like(ids)
    mask[1, 15:] = 0
    want, got = (OrtModel(p)(ids, mask).logits.numpy() for p in (fp32, int8))
    assert np.abs(got - want).max() <= INT8_REL_TOL * np.abs(want).max()
    # 7-bit weights: u8 activations x weights in [-64, 64] never saturate a 16-bit pair sum, so CPUs without VNNI
    # compute what VNNI ones do (at 8 bits this model's error was 10% there, 1.5% on VNNI)
    import onnx
    from onnx import numpy_helper

    weights = [w for w in onnx.load(int8).graph.initializer if w.data_type == onnx.TensorProto.INT8]
    assert weights and max(np.abs(numpy_helper.to_array(w).astype(int)).max() for w in weights) <= 64

    # the dev-score helper on the fp32 file gives what the PyTorch path (raydistill.evaluate) gives
    data = dev_data("sst2", d, glue_dir, max_length=32, eval_limit=40)
    assert dev_score(fp32, data) == pytest.approx(evaluate_dir(d, "sst2", glue_dir, max_length=32, eval_limit=40))
    assert dev_score(fp32, data) == dev_score(load_model(d, "classification"), data)
    # the task's metric, macro-F1 and each class's recall beside it (issue 48)
    assert set(dev_score(int8, data)) == {
        "eval_accuracy",
        "eval_macro_f1",
        "eval_recall_negative",
        "eval_recall_positive",
    }


def test_pair_task_onnx_takes_segment_ids(tiny_teacher, glue_dir, tmp_path):
    """MRPC: BERT's second segment needs token_type_ids; ``segments=True`` exports them, and the ONNX file then
    matches PyTorch on real dev batches (without them it would not)."""
    d = exported_student(tiny_teacher("classification"), "classification", tmp_path / "student")
    data = dev_data("mrpc", d, glue_dir, max_length=48, eval_limit=8)
    batch = collate(data.eval_encoded.features, data.pad_id)
    assert batch["token_type_ids"].max() == 1
    inputs = {k: batch[k] for k in ("input_ids", "attention_mask", "token_type_ids")}
    with torch.no_grad():
        ref = load_model(d, "classification").eval()(**inputs).logits.numpy()
    without = OrtModel(export_onnx(d, "classification", length=32)["onnx_path"])(**inputs).logits.numpy()
    with_seg = OrtModel(export_onnx(d, "classification", length=32, segments=True)["onnx_path"])(
        **inputs
    ).logits.numpy()
    # the tiny random student's logits are ~0.005: segment ids move them by ~1e-4, the export matches within 1e-8
    assert np.abs(with_seg - ref).max() < 1e-6 < 1e-5 < np.abs(without - ref).max()
    assert dev_score(os.path.join(d, "model.onnx"), data) == pytest.approx(
        evaluate_dir(d, "mrpc", glue_dir, max_length=48, eval_limit=8)
    )


@pytest.mark.parametrize("argv", [["--quantize"], ["--export", "{tmp}/out", "--quantize"], ["--onnx", "--quantize"]])
def test_quantize_without_onnx_and_export_is_refused(tmp_path, argv):
    argv = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    uri = f"sqlite:///{tmp_path / 'none.db'}"
    proc = subprocess.run(
        [sys.executable, "-m", "raydistill.best", "--experiment", "x", "--tracking-uri", uri, *argv],
        capture_output=True,
        text=True,
        timeout=120,
    )
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr
    field = "onnx" if argv == ["--onnx", "--quantize"] else "quantize"  # --onnx alone is refused first
    assert lines[0].startswith(f"error: {field}: ") and "--export DIR" in lines[0], lines[0]
    assert not os.path.exists(tmp_path / "none.db") and not os.path.exists(tmp_path / "out")


def trial_run(uri: str, experiment: str, student_dir: str, params: dict, metrics: dict) -> str:
    """A finished trial run as a sweep leaves it: params, metrics and the student under ``student/``."""
    from raydistill.tracking.track import Tracker

    tracker = Tracker(uri, experiment)
    rid = tracker.start_run("trial-1", params, tags={"raydistill.trial_id": "t1"})
    tracker.log_metrics(rid, metrics)
    tracker.log_artifacts(rid, student_dir, "student")
    tracker.end_run(rid)
    return rid


def test_best_onnx_quantize_reports_and_logs_to_the_trial(tiny_teacher, glue_dir, tmp_path, capsys, monkeypatch):
    from mlflow.tracking import MlflowClient

    from raydistill.commands import best

    monkeypatch.chdir(tmp_path)
    teacher = tiny_teacher("classification")
    d = exported_student(teacher, "classification", tmp_path / "trained")
    score = evaluate_dir(d, "sst2", glue_dir, max_length=32, eval_limit=40)["eval_accuracy"]
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    params = {"task": "sst2", "teacher": teacher, "data_dir": glue_dir, "max_length": 32, "eval_limit": 40}
    rid = trial_run(uri, "q", d, params, {"eval_accuracy": score, "best_eval_accuracy": score, "latency_ms_b1": 1.0})
    c = MlflowClient(uri)
    before = c.get_run(rid)

    best.main(["--experiment", "q", "--tracking-uri", uri, "--export", str(tmp_path / "best"), "--onnx", "--quantize"])
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert out["run_id"] == rid and os.path.isfile(out["int8_onnx_path"])
    assert out["fp32_dev_accuracy"] == pytest.approx(score)  # the fp32 file re-scores what the trial logged
    assert out["int8_drop_points"] == pytest.approx(100 * (out["fp32_dev_accuracy"] - out["int8_dev_accuracy"]))
    assert out["int8_within_1pt"] == (out["int8_drop_points"] <= 1.0) and out["int8_dev_metric"] == "accuracy"
    for k in (
        "int8_latency_ms_b1",
        "fp32_onnx_latency_ms_b1",
        "teacher_torch_latency_ms_b1",
        "teacher_ort_latency_ms_b1",
        "teacher_ort_int8_latency_ms_b1",
    ):
        assert out[k] > 0
    # same runtime (ONNX Runtime both sides) and, labelled, the PyTorch teacher against the ONNX student
    assert out["speedup_int8_vs_teacher_ort"] == pytest.approx(
        out["teacher_ort_latency_ms_b1"] / out["int8_latency_ms_b1"]
    )
    assert out["speedup_fp32_vs_teacher_ort"] == pytest.approx(
        out["teacher_ort_latency_ms_b1"] / out["fp32_onnx_latency_ms_b1"]
    )
    assert out["speedup_int8_vs_teacher_int8_ort"] == pytest.approx(
        out["teacher_ort_int8_latency_ms_b1"] / out["int8_latency_ms_b1"]
    )
    assert out["speedup_int8_vs_teacher_torch_cross_runtime"] == pytest.approx(
        out["teacher_torch_latency_ms_b1"] / out["int8_latency_ms_b1"]
    )
    assert not any(k.startswith("int8_speedup") or k == "teacher_fp32_latency_ms_b1" for k in out)  # old, ambiguous
    assert out["int8_onnx_mb"] < out["fp32_onnx_mb"]

    after = c.get_run(rid)
    for k in (
        "int8_dev_accuracy",
        "fp32_dev_accuracy",
        "int8_drop_points",
        "speedup_int8_vs_teacher_ort",
        "speedup_fp32_vs_teacher_ort",
        "speedup_int8_vs_teacher_int8_ort",
        "speedup_int8_vs_teacher_torch_cross_runtime",
        "speedup_fp32_vs_teacher_torch_cross_runtime",
        "int8_latency_ms_b1",
        "teacher_torch_latency_ms_b1",
        "teacher_ort_latency_ms_b1",
    ):
        assert after.data.metrics[k] == pytest.approx(out[k])
    assert after.data.metrics["int8_within_1pt"] == float(out["int8_within_1pt"])
    # nothing that was there changes: status, params, earlier metrics, the student
    assert after.info.status == "FINISHED" and after.data.params == before.data.params
    assert {k: after.data.metrics[k] for k in before.data.metrics} == before.data.metrics
    arts = {a.path for a in c.list_artifacts(rid)} | {a.path for a in c.list_artifacts(rid, "onnx")}
    assert {"student", "onnx/model.int8.onnx"} <= arts


def test_int8_drop_over_one_point_warns_on_stderr(tiny_teacher, glue_dir, tmp_path, capsys, monkeypatch):
    from raydistill.export import quantize

    teacher = tiny_teacher("classification")
    d = exported_student(teacher, "classification", tmp_path / "s")
    fp32 = export_onnx(d, "classification", length=32)["onnx_path"]
    real = quantize.dev_score
    # an INT8 file that scores 5 points lower than the fp32 one
    monkeypatch.setattr(
        quantize,
        "dev_score",
        lambda p, data: {k: v - (0.05 if p.endswith(".int8.onnx") else 0) for k, v in real(fp32, data).items()},
    )
    capsys.readouterr()
    r = quantize.quantize_report(
        d,
        fp32,
        {"task": "sst2", "teacher": teacher, "data_dir": glue_dir, "max_length": "32", "eval_limit": "40"},
        rounds=2,
    )
    assert r["int8_drop_points"] == pytest.approx(5.0) and r["int8_within_1pt"] is False
    warn = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("warning:")]
    assert len(warn) == 1 and "5.00 points" in warn[0] and "model.onnx (fp32)" in warn[0]


def test_same_runtime_ratio_times_onnx_runtime_on_both_sides(tiny_teacher, glue_dir, tmp_path, capsys, monkeypatch):
    """The headline ratio divides an ONNX Runtime teacher's time by the ONNX Runtime student's: a timer that runs
    each variant once records which ONNX file (or none: PyTorch) each one ran, and returns made-up medians."""
    import onnxruntime as ort

    from raydistill.export import quantize

    teacher = tiny_teacher("classification")
    d = exported_student(teacher, "classification", tmp_path / "s")
    fp32 = export_onnx(d, "classification", length=32)["onnx_path"]
    ran, real_run = [], ort.InferenceSession.run
    monkeypatch.setattr(
        ort.InferenceSession, "run", lambda self, *a, **k: (ran.append(self._model_path), real_run(self, *a, **k))[1]
    )
    fake_ms = {"teacher_torch": 600.0, "teacher_ort": 300.0, "teacher_ort_int8": 150.0, "fp32_onnx": 20.0, "int8": 10.0}
    timed = {}

    def fake_time_b1(fns, inputs, rounds=30, warmup=3):
        for name, fn in fns.items():
            ran.clear()
            fn(**inputs)
            timed[name] = list(ran)
        return {n: fake_ms[n] for n in fns}

    monkeypatch.setattr(quantize, "time_b1", fake_time_b1)
    capsys.readouterr()
    r = quantize.quantize_report(
        d,
        fp32,
        {"task": "sst2", "teacher": teacher, "data_dir": glue_dir, "max_length": "32", "eval_limit": "40"},
        length=32,
        rounds=2,
    )
    # which runtime and which file each timed variant ran: the students' files, the teacher's own ONNX files
    # (exported to a temporary folder, not into the teacher's), the teacher in PyTorch (no ONNX Runtime call)
    assert timed["int8"] == [os.path.join(d, "model.int8.onnx")] and timed["fp32_onnx"] == [fp32]
    assert timed["teacher_torch"] == []
    t_fp32, t_int8 = timed["teacher_ort"], timed["teacher_ort_int8"]
    assert (
        len(t_fp32) == len(t_int8) == 1
        and t_fp32[0].endswith("teacher.onnx")
        and t_int8[0].endswith("teacher.int8.onnx")
        and os.path.dirname(t_fp32[0]) != teacher
        and not os.path.exists(t_fp32[0])
    )
    assert not os.path.exists(os.path.join(teacher, "model.onnx"))
    assert r["speedup_int8_vs_teacher_ort"] == 30.0 and r["speedup_fp32_vs_teacher_ort"] == 15.0
    assert r["speedup_int8_vs_teacher_int8_ort"] == 15.0 and r["speedup_teacher_ort_vs_torch"] == 2.0
    assert r["speedup_int8_vs_teacher_torch_cross_runtime"] == 60.0
    assert r["speedup_fp32_vs_teacher_torch_cross_runtime"] == 30.0 and r["speedup_int8_vs_fp32_onnx"] == 2.0
    line = quantize.summary_line(r)  # the headline is the same-runtime ratio, the PyTorch one labelled
    assert "same runtime (ONNX Runtime): 30.0x the fp32 ONNX teacher's 300.00 ms" in line
    assert line.index("30.0x") < line.index("cross-runtime vs the PyTorch fp32 teacher's 600.00 ms: 60.0x")


def test_teacher_export_failure_keeps_the_cross_runtime_numbers(tiny_teacher, glue_dir, tmp_path, capsys, monkeypatch):
    from raydistill.export import onnx, quantize

    teacher = tiny_teacher("classification")
    d = exported_student(teacher, "classification", tmp_path / "s")
    fp32 = export_onnx(d, "classification", length=32)["onnx_path"]

    def broken(*a, **k):
        raise RuntimeError("unsupported operator")

    monkeypatch.setattr(onnx, "to_onnx", broken)
    capsys.readouterr()
    r = quantize.quantize_report(
        d,
        fp32,
        {"task": "sst2", "teacher": teacher, "data_dir": glue_dir, "max_length": "32", "eval_limit": "40"},
        length=32,
        rounds=2,
    )
    warn = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("warning:")]
    assert len(warn) == 1 and "unsupported operator" in warn[0] and "cross-runtime" in warn[0]
    assert r["speedup_int8_vs_teacher_torch_cross_runtime"] > 0 and "speedup_int8_vs_teacher_ort" not in r
    assert "same-runtime ratio not measured" in quantize.summary_line(r)


@pytest.mark.slow
def test_tiny_sweep_then_best_onnx_quantize(ray_session, tiny_teacher, glue_dir, tmp_path, capsys, monkeypatch):
    """The real path: a sweep's trial, exported with --onnx --quantize; the fp32 ONNX file re-scores the trial's
    logged best dev score on its own dev set, and the INT8 numbers land on that trial's run."""
    from mlflow.tracking import MlflowClient

    from raydistill.commands import best, sweep
    from tests.e2e.test_sweep import TINY

    monkeypatch.chdir(tmp_path)
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    sweep.main(
        [
            "pkd_glue",
            "--task",
            "sst2",
            "--data-dir",
            glue_dir,
            "--teacher",
            tiny_teacher("classification", 2),
            "--num-samples",
            "1",
            *TINY,
            "--epochs",
            "1",
            "--max-steps",
            "4",
            "--batch-size",
            "16",
            "--max-length",
            "32",
            "--eval-limit",
            "32",
            "--tracking-uri",
            uri,
            "--name",
            "q8",
            "--experiment",
            "q8",
            "--set",
            "search.control=false",
        ]
    )
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1])["trials"] == 1
    best.main(["--experiment", "q8", "--tracking-uri", uri, "--export", str(tmp_path / "best"), "--onnx", "--quantize"])
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    # the trial was chosen on its validation split (``value``); the dev score it reports is ``report``
    assert out["report_metric"] == "best_eval_accuracy"
    assert out["fp32_dev_accuracy"] == pytest.approx(out["report"], abs=1e-9)
    assert os.path.isfile(tmp_path / "best" / "model.int8.onnx") and out["speedup_int8_vs_teacher_ort"] > 0
    metrics = MlflowClient(uri).get_run(out["run_id"]).data.metrics
    assert metrics["int8_dev_accuracy"] == pytest.approx(out["int8_dev_accuracy"])
    for k in ("speedup_int8_vs_teacher_ort", "speedup_int8_vs_teacher_torch_cross_runtime"):
        assert metrics[k] == pytest.approx(out[k])
