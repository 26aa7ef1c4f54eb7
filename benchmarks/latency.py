#!/usr/bin/env python
"""Inference latency: exported 4L-312 student vs its 12L-768 teacher, PyTorch and ONNX Runtime, CPU.

    python benchmarks/latency.py            # batch 1 and 32, length 128 (``--onnx-teacher`` is the default now)
    python benchmarks/latency.py --smoke    # tiny models, a few seconds (what the tests run)

The teacher is a randomly initialised BERT classifier (``raydistill.testing.make_tiny_model``; latency does not
depend on the weights), the student a 4L-312-1200-12 ``build_student`` of it, saved with ``save_pretrained``
(what ``python -m raydistill.best --export`` writes) and loaded back with the package's ``load_model`` (sdpa), then
exported with ``raydistill.export.onnx.export_onnx`` (which checks ONNX Runtime against PyTorch within 1e-4).

For each batch size every variant runs once per round, in alternating order (A, B, C, then C, B, A, ...), in one
process; the report gives medians (ms) and ratios of medians:

  teacher        PyTorch fp32
  student        PyTorch fp32
  student_ort    ONNX Runtime, CPU provider, intra-op threads = torch threads
  teacher_bf16 / student_bf16   (extra column) PyTorch under torch.autocast("cpu", bfloat16), on CPUs with
                 AVX512-BF16/AMX; outputs are compared with fp32 and the max abs logit difference is printed
  student_ort_int8    that file dynamically quantised to INT8 (``raydistill.export.quantize.quantize_onnx``, what
                 ``raydistill.best --onnx --quantize`` writes: MatMul weights INT8 per channel); its max abs logit
                 difference from PyTorch fp32 is printed
  student_ort_fused   (extra) ONNX Runtime's BERT fusions (``onnxruntime.transformers.optimizer``) on that file
  teacher_ort    the teacher exported the same way (``--no-onnx-teacher`` leaves it and the next one out)
  teacher_ort_int8    that file dynamically quantised like the student's

Ratios come in three groups (JSON ``summary[bN]``, and one printed line each): ``same_runtime`` (teacher and student
in the same runtime and precision: PyTorch fp32, ORT fp32, ORT INT8, bf16 autocast, and the INT8 ORT student against
the fp32 ORT teacher); ``same_model`` (one model, two runtimes or precisions: what the
runtime alone is worth); ``cross_runtime`` (PyTorch fp32 teacher / ORT student: distillation and the runtime's gain
together, labelled so it is not read as either).

ORT runs with ``session.intra_op.allow_spinning=0`` (like ``OMP_WAIT_POLICY=PASSIVE`` for torch) unless
``--omp-active``. Wall-clock and process-CPU-time medians are both reported.

Last line, like with like: ``RATIO b1 teacher/student=… teacher_ort/student_ort=… b32 …`` (PyTorch / PyTorch, ORT
fp32 / ORT fp32); before it ``INT8 same-runtime b1 teacher_ort/student_ort_int8=…
teacher_ort_int8/student_ort_int8=… b32 …`` and ``CROSS-RUNTIME b1 teacher/student_ort=…
teacher/student_ort_int8=… b32 …`` (PyTorch teacher).
"""

from __future__ import annotations

import os
import sys

# see benchmarks/step_speed.py: without it a 2-thread forward on a shared, oversubscribed CPU measures the scheduler
if "--omp-active" not in sys.argv:
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
# benchmark the checkout this file is in, not whatever raydistill is installed
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import argparse
import contextlib
import json
import statistics
import tempfile
import time

import torch
from common import TEXTS, loadavg
from common import machine as _machine

from raydistill.export.quantize import ort_session, quantize_onnx

# (numerator, denominator) variant pairs; a pair is reported when both were timed
RATIO_GROUPS = {
    "same_runtime": [
        ("teacher", "student"),
        ("teacher_ort", "student_ort"),
        ("teacher_ort", "student_ort_int8"),
        ("teacher_ort_int8", "student_ort_int8"),
        ("teacher_bf16", "student_bf16"),
    ],
    "same_model": [
        ("student", "student_ort"),
        ("teacher", "teacher_ort"),
        ("student_ort", "student_ort_int8"),
        ("teacher_ort", "teacher_ort_int8"),
        ("student", "student_ort_fused"),
        ("student", "student_bf16"),
    ],
    "cross_runtime": [("teacher", "student_ort"), ("teacher", "student_ort_int8"), ("teacher", "student_ort_fused")],
}
GROUP_LABELS = {
    "same_runtime": "same runtime (teacher/student: PyTorch fp32, ORT fp32, ORT INT8 student vs ORT fp32 "
    "teacher, ORT INT8, bf16)",
    "same_model": "same model, runtime or precision only",
    "cross_runtime": "CROSS-RUNTIME (PyTorch fp32 teacher / ORT student)",
}


def machine() -> dict:
    import onnxruntime

    return {**_machine(), "onnxruntime": onnxruntime.__version__}


def sizes(smoke: bool) -> dict:
    if smoke:
        return dict(
            t_layers=4,
            t_hidden=64,
            t_heads=4,
            t_inter=128,
            s_layers=2,
            s_hidden=32,
            s_inter=64,
            s_heads=4,
            length=32,
            batches=(1, 4),
        )
    return dict(
        t_layers=12,
        t_hidden=768,
        t_heads=12,
        t_inter=3072,
        s_layers=4,
        s_hidden=312,
        s_inter=1200,
        s_heads=12,
        length=128,
        batches=(1, 32),
    )


def build(root: str, sz: dict) -> tuple[str, str]:
    """Teacher folder and exported student folder."""
    from raydistill.config.schema import StudentConfig
    from raydistill.models.encoder import load_model
    from raydistill.models.student import build_student
    from raydistill.testing import TinyShape, make_tiny_model

    t_dir = make_tiny_model(
        os.path.join(root, "teacher"),
        kind="classification",
        texts=TEXTS,
        shape=TinyShape(layers=sz["t_layers"], hidden=sz["t_hidden"], heads=sz["t_heads"], intermediate=sz["t_inter"]),
    )
    teacher = load_model(t_dir, "classification")
    torch.manual_seed(0)
    student = build_student(
        teacher,
        StudentConfig(
            layers=sz["s_layers"], hidden=sz["s_hidden"], intermediate=sz["s_inter"], heads=sz["s_heads"], init="random"
        ),
    )
    s_dir = os.path.join(root, "student")
    student.save_pretrained(s_dir)
    from transformers import AutoTokenizer

    AutoTokenizer.from_pretrained(t_dir).save_pretrained(s_dir)
    return t_dir, s_dir


def fused_onnx(path: str, config, threads: int, spin: bool, ids, mask, ref):
    """ONNX Runtime's BERT graph fusions (fused attention, LayerNorm, GELU: ``onnxruntime.transformers.optimizer``)
    on top of ``export_onnx``'s file; returns (session, max |logits - PyTorch|) or (None, reason)."""
    try:
        from onnxruntime.transformers.optimizer import optimize_model

        opt = optimize_model(
            path,
            model_type="bert",
            num_heads=config.num_attention_heads,
            hidden_size=config.hidden_size,
            opt_level=1,
            use_gpu=False,
        )
        out = path.replace(".onnx", ".fused.onnx")
        opt.save_model_to_file(out)
        sess = ort_session(out, threads, spin)
        got = sess.run(None, {"input_ids": ids.numpy(), "attention_mask": mask.numpy()})[0]
        return sess, float(abs(got - ref).max())
    except Exception as e:  # an extra column; report why it is missing
        return None, f"{type(e).__name__}: {e}"


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--smoke", action="store_true", help="tiny models, few repeats (seconds)")
    p.add_argument("--repeats-b1", type=int, default=None, help="timed rounds at batch 1 (default 30; smoke 3)")
    p.add_argument("--repeats", type=int, default=None, help="timed rounds at the large batch (default 5; smoke 2)")
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--threads", type=int, default=0, help="torch and ORT intra-op threads (default: torch's own)")
    p.add_argument("--no-bf16", action="store_true", help="skip the bf16-autocast extra columns")
    p.add_argument("--onnx-teacher", action="store_true", help="(the default now) time the teacher in ONNX Runtime too")
    p.add_argument("--no-onnx-teacher", action="store_true", help="leave the teacher's ONNX Runtime columns out")
    p.add_argument("--omp-active", action="store_true", help="leave OMP_WAIT_POLICY unset (see step_speed.py)")
    p.add_argument("--json", help="also write the results here")
    a = p.parse_args(argv)
    if a.threads:
        torch.set_num_threads(a.threads)
    threads = torch.get_num_threads()
    sz = sizes(a.smoke)
    rep1 = a.repeats_b1 if a.repeats_b1 is not None else (3 if a.smoke else 30)
    repn = a.repeats if a.repeats is not None else (2 if a.smoke else 5)
    info = machine()
    print("machine: " + json.dumps(info), flush=True)
    print("sizes: " + json.dumps(sz), flush=True)
    bf16 = info["bf16_native"] and not a.no_bf16

    from raydistill.export.onnx import export_onnx
    from raydistill.models.encoder import load_model, quiet_hf
    from raydistill.models.student import count_params

    quiet_hf()
    with tempfile.TemporaryDirectory(prefix="raydistill-latency-") as root:
        t_dir, s_dir = build(root, sz)
        teacher = load_model(t_dir, "classification").eval()
        student = load_model(s_dir, "classification").eval()
        params = {"teacher": count_params(teacher), "student": count_params(student)}
        t0 = time.perf_counter()
        exp = export_onnx(s_dir, "classification", length=sz["length"])
        print(
            f"export_onnx(student): {time.perf_counter() - t0:.1f} s, max |ORT - torch| = "
            f"{exp['onnx_max_abs_diff']:.2e}",
            flush=True,
        )
        spin = a.omp_active
        t0 = time.perf_counter()
        int8_path = quantize_onnx(exp["onnx_path"])
        sessions = {
            "student_ort": ort_session(exp["onnx_path"], threads, spin),
            "student_ort_int8": ort_session(int8_path, threads, spin),
        }
        g = torch.Generator().manual_seed(1)
        ids = torch.randint(5, teacher.config.vocab_size, (2, sz["length"]), generator=g)
        with torch.inference_mode():
            ref = student(input_ids=ids, attention_mask=torch.ones_like(ids)).logits.numpy()
        got = sessions["student_ort_int8"].run(
            None, {"input_ids": ids.numpy(), "attention_mask": torch.ones_like(ids).numpy()}
        )[0]
        int8 = {
            "max_abs_logit_diff": float(abs(got - ref).max()),
            "quantize_s": time.perf_counter() - t0,
            "fp32_mb": os.path.getsize(exp["onnx_path"]) / 2**20,
            "int8_mb": os.path.getsize(int8_path) / 2**20,
        }
        print(
            f"student_ort_int8: quantised in {int8['quantize_s']:.1f} s, {int8['int8_mb']:.1f} MB (fp32 "
            f"{int8['fp32_mb']:.1f} MB), max |ORT int8 - torch fp32| = {int8['max_abs_logit_diff']:.2e}",
            flush=True,
        )
        fused, why = fused_onnx(exp["onnx_path"], student.config, threads, spin, ids, torch.ones_like(ids), ref)
        notes = {}
        if fused is not None and why < 1e-4:
            sessions["student_ort_fused"] = fused
            print(f"student_ort_fused: max |ORT - torch| = {why:.2e}", flush=True)
        else:
            notes["student_ort_fused"] = f"left out: {why if fused is None else f'max diff {why:.2e} > 1e-4'}"
            print(f"note: student_ort_fused {notes['student_ort_fused']}", flush=True)
        if not a.no_onnx_teacher:
            t_exp = export_onnx(t_dir, "classification", length=sz["length"])
            print(f"export_onnx(teacher): max |ORT - torch| = {t_exp['onnx_max_abs_diff']:.2e}", flush=True)
            sessions["teacher_ort"] = ort_session(t_exp["onnx_path"], threads, spin)
            sessions["teacher_ort_int8"] = ort_session(quantize_onnx(t_exp["onnx_path"]), threads, spin)

        def torch_fn(model, amp: bool):
            ctx = (lambda: torch.autocast("cpu", dtype=torch.bfloat16)) if amp else contextlib.nullcontext

            def f(ids, mask):
                with torch.inference_mode(), ctx():
                    return model(input_ids=ids, attention_mask=mask).logits

            return f

        def ort_fn(sess):
            def f(ids, mask):
                return sess.run(None, {"input_ids": ids.numpy(), "attention_mask": mask.numpy()})[0]

            return f

        variants = {"teacher": torch_fn(teacher, False), "student": torch_fn(student, False)}
        variants.update({k: ort_fn(s) for k, s in sessions.items()})
        if bf16:
            variants["teacher_bf16"] = torch_fn(teacher, True)
            variants["student_bf16"] = torch_fn(student, True)

        g = torch.Generator().manual_seed(0)
        results, cpu_results, bf16_diff = {}, {}, {}
        for b in sz["batches"]:
            ids = torch.randint(5, teacher.config.vocab_size, (b, sz["length"]), generator=g)
            mask = torch.ones_like(ids)
            if bf16:
                for who in ("teacher", "student"):
                    ref = variants[who](ids, mask).float()
                    got = variants[f"{who}_bf16"](ids, mask).float()
                    bf16_diff[f"{who}_b{b}"] = float((ref - got).abs().max())
            reps = rep1 if b == 1 else repn
            names = list(variants)
            times = {n: [] for n in names}
            cpu_times = {n: [] for n in names}
            for r in range(a.warmup + reps):
                for n in names if r % 2 == 0 else names[::-1]:
                    c0, t0 = time.process_time(), time.perf_counter()
                    variants[n](ids, mask)
                    ms, cpu_ms = (time.perf_counter() - t0) * 1000, (time.process_time() - c0) * 1000
                    if r >= a.warmup:
                        times[n].append(ms)
                        cpu_times[n].append(cpu_ms)
            results[b] = {n: statistics.median(v) for n, v in times.items()}
            cpu_results[b] = {n: statistics.median(v) for n, v in cpu_times.items()}
            print(f"batch {b} wall: " + "  ".join(f"{n}={v:.2f} ms" for n, v in results[b].items()), flush=True)
            print(f"batch {b} cpu:  " + "  ".join(f"{n}={v:.2f} ms" for n, v in cpu_results[b].items()), flush=True)
    info["loadavg_end"] = loadavg()

    def ratios(b, table):
        r = table[b]
        return {
            group: {f"{x}/{y}": r[x] / r[y] for x, y in pairs if x in r and y in r}
            for group, pairs in RATIO_GROUPS.items()
        }

    summary = {f"b{b}": ratios(b, results) for b in sz["batches"]}
    cpu_summary = {f"b{b}": ratios(b, cpu_results) for b in sz["batches"]}
    print(f"params: {json.dumps(params)}  (teacher/student = {params['teacher'] / params['student']:.1f}x)")
    for b in sz["batches"]:
        for group, label in GROUP_LABELS.items():
            print(
                f"ratios b{b} {label}: wall "
                + "  ".join(f"{k}={v:.2f}" for k, v in summary[f"b{b}"][group].items())
                + " | cpu "
                + "  ".join(f"{k}={v:.2f}" for k, v in cpu_summary[f"b{b}"][group].items()),
                flush=True,
            )
    if bf16_diff:
        print("bf16 max |logit diff| vs fp32: " + json.dumps(bf16_diff), flush=True)
    out = {
        "machine": info,
        "sizes": {k: list(v) if isinstance(v, tuple) else v for k, v in sz.items()},
        "params": params,
        "latency_ms": {f"b{b}": r for b, r in results.items()},
        "cpu_ms": {f"b{b}": r for b, r in cpu_results.items()},
        "summary": summary,
        "cpu_summary": cpu_summary,
        "notes": notes,
        "bf16_max_abs_logit_diff": bf16_diff,
        "onnx_max_abs_diff": exp["onnx_max_abs_diff"],
        "int8": int8,
        "repeats": {"b1": rep1, "large": repn, "warmup": a.warmup},
    }
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1)
    b1, bn = sz["batches"]

    def line(group, keys):
        return " ".join(
            f"b{b} " + " ".join(f"{k}={summary[f'b{b}'][group][k]:.2f}" for k in keys if k in summary[f"b{b}"][group])
            for b in (b1, bn)
        )

    if not a.no_onnx_teacher:
        print(
            "INT8 same-runtime "
            + line("same_runtime", ("teacher_ort/student_ort_int8", "teacher_ort_int8/student_ort_int8")),
            flush=True,
        )
    print("CROSS-RUNTIME " + line("cross_runtime", ("teacher/student_ort", "teacher/student_ort_int8")), flush=True)
    print("RATIO " + line("same_runtime", ("teacher/student", "teacher_ort/student_ort")), flush=True)
    return out


if __name__ == "__main__":
    main()
