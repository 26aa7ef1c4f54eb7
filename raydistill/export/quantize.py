"""INT8 ONNX student (``raydistill.best --onnx --quantize``): dynamic quantisation of the exported ``model.onnx``, its
dev score next to the fp32 file's on the run's own dev set, and batch-1 latency against the teacher.

The teacher is timed in the student's own runtime too: exported to ONNX the way the student was (``onnxexport``) and
run in an ONNX Runtime session with the same threads, fp32 and dynamically quantised like the student. The headline
ratio compares like with like (INT8 ONNX student / fp32 ONNX teacher); the ratio against the PyTorch teacher is kept
under a name that says it crosses runtimes (moving the same student from PyTorch to ONNX Runtime alone makes it
faster, so that ratio credits distillation with the runtime's gain: docs/benchmarks/2026-11-24-latency-same-runtime.md).

Dynamic quantisation (``onnxruntime.quantization.quantize_dynamic``): MatMul weights stored as INT8 (per output
channel), activations quantised on the fly, so no calibration data is needed. Per-tensor weights, quantised
embeddings, and ONNX Runtime's pre-processing or BERT fusions before quantising were each tried and lost score or
speed: docs/benchmarks/2026-11-23-int8-onnx.md. The weights use 7 of their 8 bits (``reduce_range``): on x86 CPUs
without VNNI, ONNX Runtime multiplies u8 activations by s8 weights with an instruction whose 16-bit pair sums saturate
at full range, so the same file would compute other logits there; in 7 bits no pair sum can saturate, every CPU
computes the same integers, at the same speed and dev score (docs/benchmarks/2026-11-28-int8-no-vnni.md).
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from types import SimpleNamespace

import numpy as np
import torch

from raydistill.tasks.files import FileData
from raydistill.tracking.track import Tracker

INT8_NAME = "model.int8.onnx"
MAX_DROP_POINTS = 1.0  # the INT8 student may lose at most this many points (0.01 on a 0-1 metric) of dev score
# MatMul only, per channel: per-tensor weights lost dev score, and quantising the embedding Gathers too shrank the file
# but lost score for no speed (docs/benchmarks/2026-11-23-int8-onnx.md).
OP_TYPES = ("MatMul",)
# 7-bit weights: |u8 x s7| pair sums stay under 2**15, so no CPU saturates (module docstring)
REDUCE_RANGE = True


def quantize_onnx(
    fp32_path: str,
    out_path: str | None = None,
    per_channel: bool = True,
    op_types=OP_TYPES,
    reduce_range: bool = REDUCE_RANGE,
    weight_type: str = "s8",
) -> str:
    """Write the dynamically quantised INT8 copy of ``fp32_path`` (default: ``model.int8.onnx`` beside it);
    ``weight_type`` "s8" or "u8", ``reduce_range``: weights in 7 bits."""
    import logging

    from onnxruntime.quantization import QuantType, quantize_dynamic

    out_path = out_path or os.path.join(os.path.dirname(fp32_path), INT8_NAME)
    root = logging.getLogger()
    level = root.level
    # it advises quant_pre_process on the root logger; that made batch 1 slower at the same score (the INT8 report)
    root.setLevel(logging.ERROR)
    try:
        quantize_dynamic(
            fp32_path,
            out_path,
            weight_type={"s8": QuantType.QInt8, "u8": QuantType.QUInt8}[weight_type],
            per_channel=per_channel,
            reduce_range=reduce_range,
            op_types_to_quantize=list(op_types) if op_types else None,
        )
    finally:
        root.setLevel(level)
    return out_path


def ort_session(path: str, threads: int | None = None, spin: bool = False):
    """A CPU session with torch's thread count. ORT's pool spins like OpenMP's ACTIVE policy unless told not to;
    on a shared CPU that slows batch 1 down (docs/benchmarks/README.md, Machine), so spinning is off by default."""
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = threads or torch.get_num_threads()
    so.inter_op_num_threads = 1
    so.add_session_config_entry("session.intra_op.allow_spinning", "1" if spin else "0")
    return ort.InferenceSession(path, sess_options=so, providers=["CPUExecutionProvider"])


def ort_feed(sess, input_ids, attention_mask, token_type_ids=None) -> dict:
    """The inputs ``sess`` declares, as int64 numpy; files exported without segment ids just don't take them."""
    given = {
        "input_ids": input_ids,
        "attention_mask": attention_mask,
        "token_type_ids": token_type_ids if token_type_ids is not None else torch.zeros_like(input_ids),
    }
    return {i.name: np.asarray(given[i.name], dtype=np.int64) for i in sess.get_inputs()}


class OrtModel(torch.nn.Module):
    """An ONNX Runtime session behind the forward signature ``scoring.dev_metrics`` calls, so ONNX files are scored
    by the same code (encoding, batching, metrics) as the PyTorch students."""

    def __init__(self, path_or_session, threads: int | None = None):
        super().__init__()
        self.sess = ort_session(path_or_session, threads) if isinstance(path_or_session, str) else path_or_session
        self.names = [o.name for o in self.sess.get_outputs()]

    def forward(self, input_ids, attention_mask, token_type_ids=None, **_):
        got = self.sess.run(None, ort_feed(self.sess, input_ids, attention_mask, token_type_ids))
        return SimpleNamespace(**{n: torch.from_numpy(g) for n, g in zip(self.names, got, strict=True)})


def dev_data(
    task_name: str,
    tokenizer_dir: str,
    data_dir: str | None,
    max_length: int = 128,
    eval_limit: int = 0,
    data: FileData | None = None,
):
    """The run's own dev set (NSMC's held-out train rows included), encoded once for every model scored on it;
    ``data``: the run's own files (issue 37) instead of the built-in task ``task_name``."""
    from transformers import AutoTokenizer

    from raydistill.config.schema import RunConfig, task_of
    from raydistill.data.splits import train_and_eval_examples
    from raydistill.train.loop import RunData

    # the run's own dev rule and limit, through the one config the run itself read its examples with
    cfg = RunConfig.from_dict(
        {
            "task": None if data and data.given else task_name,
            "teacher": tokenizer_dir,
            "data_dir": data_dir,
            "data": data or FileData(),
            "train": {"eval_limit": eval_limit, "max_length": max_length},
        }
    )
    task = task_of(cfg)
    _, dev = train_and_eval_examples(cfg, task)
    tok = AutoTokenizer.from_pretrained(tokenizer_dir)
    return RunData.dev_only(task, dev, tok, max_length)


def dev_score(model_or_path, data, batch_size: int = 64) -> dict:
    """``eval_<metric>`` of a PyTorch model or an ONNX file (path) on ``data`` (``dev_data``)."""
    from raydistill.train.scoring import dev_metrics

    model = OrtModel(model_or_path) if isinstance(model_or_path, str) else model_or_path
    return dev_metrics(model, data, batch_size, torch.device("cpu"))


def time_b1(fns: dict, inputs: dict, rounds: int = 30, warmup: int = 3) -> dict:
    """Median ms of each ``fns[name](**inputs)``: every round runs all of them once, in alternating order, so load
    changes on a shared machine hit every variant alike."""
    names = list(fns)
    times: dict[str, list[float]] = {n: [] for n in names}
    for r in range(warmup + rounds):
        for n in names if r % 2 == 0 else names[::-1]:
            t0 = time.perf_counter()
            fns[n](**inputs)
            if r >= warmup:
                times[n].append((time.perf_counter() - t0) * 1000)
    return {n: statistics.median(v) for n, v in times.items()}


def teacher_onnx(teacher: str, kind: str, root: str, length: int = 128, segments: bool = False) -> dict:
    """The teacher as ``root/teacher.onnx`` (exported like the student) and its dynamic INT8 copy; ``{}`` with a
    warning when the export fails, so the student's numbers are not lost to the teacher's extra column."""
    from raydistill.export.onnx import to_onnx
    from raydistill.models.encoder import load_model

    path = os.path.join(root, "teacher.onnx")
    try:
        diff, _, _ = to_onnx(
            load_model(teacher, kind, attn_implementation="eager").eval(), kind, path, length, segments
        )
    except Exception as e:  # the same-runtime columns are left out, the rest still reported
        say(
            f"warning: the teacher's ONNX export failed ({type(e).__name__}: {e}); only the cross-runtime ratios "
            "(ONNX student vs PyTorch teacher) are reported"
        )
        return {}
    say(f"teacher exported to ONNX (matches PyTorch within {diff:.1e}); INT8 dynamic quantisation of it …")
    return {"teacher_ort": path, "teacher_ort_int8": quantize_onnx(path, os.path.join(root, "teacher.int8.onnx"))}


def compare_latency(
    int8_path: str, fp32_path: str, teacher, teacher_files: dict | None = None, length: int = 128, rounds: int = 30
) -> dict:
    """Batch-1 latency (ms, one process, interleaved, median) of the INT8 and fp32 ONNX students, the fp32 PyTorch
    ``teacher`` (a loaded model) and the teacher's ONNX files (``teacher_onnx``) on random token ids of ``length``.
    ``speedup_*_vs_teacher_ort`` compare ONNX Runtime with ONNX Runtime; ``*_cross_runtime`` the ONNX student with
    the PyTorch teacher."""
    paths = {"int8": int8_path, "fp32_onnx": fp32_path, **(teacher_files or {})}
    sessions = {k: ort_session(p) for k, p in paths.items()}
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(5, teacher.config.vocab_size, (1, length), generator=g)
    inputs = {"input_ids": ids, "attention_mask": torch.ones_like(ids)}

    def ort_fn(sess):
        return lambda **kw: sess.run(None, ort_feed(sess, **kw))

    def torch_fn(**kw):
        with torch.inference_mode():
            return teacher(**kw)

    ms = time_b1({"teacher_torch": torch_fn, **{k: ort_fn(s) for k, s in sessions.items()}}, inputs, rounds=rounds)
    out = {
        "int8_latency_ms_b1": ms["int8"],
        "fp32_onnx_latency_ms_b1": ms["fp32_onnx"],
        "teacher_torch_latency_ms_b1": ms["teacher_torch"],
        "speedup_int8_vs_fp32_onnx": ms["fp32_onnx"] / ms["int8"],
        "speedup_int8_vs_teacher_torch_cross_runtime": ms["teacher_torch"] / ms["int8"],
        "speedup_fp32_vs_teacher_torch_cross_runtime": ms["teacher_torch"] / ms["fp32_onnx"],
    }
    if "teacher_ort" in ms:
        out.update(
            {
                "teacher_ort_latency_ms_b1": ms["teacher_ort"],
                "teacher_ort_int8_latency_ms_b1": ms["teacher_ort_int8"],
                "speedup_int8_vs_teacher_ort": ms["teacher_ort"] / ms["int8"],
                "speedup_fp32_vs_teacher_ort": ms["teacher_ort"] / ms["fp32_onnx"],
                "speedup_int8_vs_teacher_int8_ort": ms["teacher_ort_int8"] / ms["int8"],
                "speedup_teacher_ort_vs_torch": ms["teacher_torch"] / ms["teacher_ort"],
            }
        )
    return out


def _param(params: dict, key: str, default=None):
    v = params.get(key)
    return default if v in (None, "", "None") else v


def quantize_report(model_dir: str, fp32_path: str, params: dict, length: int = 128, rounds: int = 30) -> dict:
    """Quantise ``fp32_path`` and compare it with the fp32 file (dev score on the run's dev set, from the trial's
    ``params``) and with the teacher (``params['teacher']``, batch-1 latency in PyTorch and, exported to a temporary
    folder, in ONNX Runtime)."""
    from raydistill.config.params import data_dir_of, data_of, task_of_params
    from raydistill.models.encoder import load_model

    task = task_of_params(params)
    # the dev set and the teacher first: a moved data folder or teacher fails before minutes of work
    data = dev_data(
        task.name,
        model_dir,
        data_dir_of(params),
        int(_param(params, "max_length", 128)),
        int(_param(params, "eval_limit", 0)),
        data_of(params),
    )
    teacher = load_model(params["teacher"], task.kind).eval()
    say(f"INT8 dynamic quantisation of {fp32_path} …")
    int8_path = quantize_onnx(fp32_path)
    say(f"dev score of the fp32 and INT8 ONNX students on {len(data.eval_examples)} {task.name} dev examples …")
    fp32, int8 = dev_score(fp32_path, data), dev_score(int8_path, data)
    out = {
        "int8_onnx_path": int8_path,
        "fp32_onnx_mb": os.path.getsize(fp32_path) / 2**20,
        "int8_onnx_mb": os.path.getsize(int8_path) / 2**20,
    }
    for k in fp32:
        m = k.removeprefix("eval_")
        out[f"fp32_dev_{m}"], out[f"int8_dev_{m}"] = fp32[k], int8[k]
    main = task.main_metric
    drop = 100 * (fp32[f"eval_{main}"] - int8[f"eval_{main}"])  # metrics are on a 0-1 scale: 1 point = 0.01
    out.update({"int8_dev_metric": main, "int8_drop_points": drop, "int8_within_1pt": drop <= MAX_DROP_POINTS})
    if drop > MAX_DROP_POINTS:
        say(
            f"warning: the INT8 student loses {drop:.2f} points of dev {main} ({fp32[f'eval_{main}']:.4f} -> "
            f"{int8[f'eval_{main}']:.4f}), more than {MAX_DROP_POINTS:g}; serve model.onnx (fp32) instead"
        )
    with tempfile.TemporaryDirectory(prefix="raydistill-teacher-onnx-") as root:
        say(f"ONNX export of the teacher {params['teacher']} (like the student's, to time both in ONNX Runtime) …")
        segments = "token_type_ids" in {i.name for i in ort_session(fp32_path).get_inputs()}
        files = teacher_onnx(params["teacher"], task.kind, root, length, segments)
        say(
            f"batch-1 latency, length {length}: INT8 and fp32 ONNX students, the teacher in PyTorch"
            f"{' and ONNX Runtime (fp32, INT8)' if files else ''}, {rounds} interleaved rounds …"
        )
        out.update(compare_latency(int8_path, fp32_path, teacher, files, length=length, rounds=rounds))
    return out


def summary_line(r: dict) -> str:
    """The headline compares like with like (ONNX Runtime student / ONNX Runtime teacher); the ratio against the
    PyTorch teacher is labelled cross-runtime."""
    m = r["int8_dev_metric"]
    head = (
        f"INT8 ONNX student: dev {m} {r[f'int8_dev_{m}']:.4f} (fp32 {r[f'fp32_dev_{m}']:.4f}, drop "
        f"{r['int8_drop_points']:.2f} points), {r['int8_onnx_mb']:.1f} MB (fp32 {r['fp32_onnx_mb']:.1f}); batch 1: "
        f"{r['int8_latency_ms_b1']:.2f} ms (fp32 ONNX {r['fp32_onnx_latency_ms_b1']:.2f} ms)"
    )
    cross = (
        f"cross-runtime vs the PyTorch fp32 teacher's {r['teacher_torch_latency_ms_b1']:.2f} ms: "
        f"{r['speedup_int8_vs_teacher_torch_cross_runtime']:.1f}x (fp32 ONNX "
        f"{r['speedup_fp32_vs_teacher_torch_cross_runtime']:.1f}x)"
    )
    if "speedup_int8_vs_teacher_ort" not in r:
        return f"{head}; same-runtime ratio not measured (teacher not exported); {cross}"
    return (
        f"{head}; same runtime (ONNX Runtime): {r['speedup_int8_vs_teacher_ort']:.1f}x the fp32 ONNX teacher's "
        f"{r['teacher_ort_latency_ms_b1']:.2f} ms (fp32 ONNX student {r['speedup_fp32_vs_teacher_ort']:.1f}x; "
        f"{r['speedup_int8_vs_teacher_int8_ort']:.1f}x the INT8 ONNX teacher's "
        f"{r['teacher_ort_int8_latency_ms_b1']:.2f} ms); {cross}"
    )


def say(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def log_report(tracker: Tracker, run_id: str, report: dict) -> None:
    """The report's numbers as metrics of the trial's run and the INT8 file under ``onnx/``; nothing else touched
    (the run keeps its status, params and earlier metrics)."""
    metrics = {k: float(v) for k, v in report.items() if isinstance(v, bool | int | float)}  # within_1pt: 1.0 / 0.0
    tracker.log_metrics(run_id, metrics)
    tracker.log_artifact(run_id, report["int8_onnx_path"], "onnx")
