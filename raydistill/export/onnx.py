"""ONNX export of a loaded model, checked against PyTorch: the one export the student (``best --onnx``), the teacher
timed beside it (``best --onnx --quantize``) and the latency benchmark share, so both sides of a same-runtime ratio
come from the same graph recipe (opset 17, dynamic batch and length, the same inputs); ``check_onnx_installed`` and
``export_onnx`` (the student's file beside its folder, timed) for ``best --onnx``. Torch loads only when a model is
exported: ``best --quantize`` sets OpenMP's wait policy before it does."""

from __future__ import annotations

import os
import sys
import time

from raydistill.common.errors import check

OPSET = 17


def to_onnx(model, kind: str, path: str, length: int = 128, segments: bool = False):
    """Write ``model`` (loaded with eager attention, in eval mode) to ``path`` and run it once in ONNX Runtime on two
    random rows of ``length`` tokens. ``segments`` (sentence-pair and QA tasks): the file also takes
    ``token_type_ids``, which BERT's second segment needs. Returns (max |ORT - PyTorch|, the session, one row of the
    inputs as numpy); refused (``onnx``) above 1e-4."""
    import numpy as np
    import onnxruntime as ort
    import torch

    ids = torch.randint(5, model.config.vocab_size, (2, length))
    inputs = {"input_ids": ids, "attention_mask": torch.ones_like(ids)}
    if segments and getattr(model.config, "type_vocab_size", 1) > 1:  # RoBERTa has one segment: nothing to feed
        inputs["token_type_ids"] = (torch.arange(length) >= length // 2).long().expand(2, -1).contiguous()
    names = ["start_logits", "end_logits"] if kind == "qa" else ["logits"]
    torch.onnx.export(
        model,
        tuple(inputs.values()),
        path,
        input_names=list(inputs),
        output_names=names,
        dynamic_axes={k: {0: "batch", 1: "seq"} for k in inputs},
        opset_version=OPSET,
        dynamo=False,
    )
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    got = sess.run(None, {k: v.numpy() for k, v in inputs.items()})
    with torch.no_grad():
        ref = model(**inputs)
    diff = max(float(np.abs(g - getattr(ref, n).numpy()).max()) for g, n in zip(got, names, strict=True))
    check(diff < 1e-4, "onnx", f"ONNX output differs from PyTorch by {diff:.2e} (> 1e-4)")
    return diff, sess, {k: v[:1].numpy() for k, v in inputs.items()}


def check_onnx_installed() -> None:
    """``--onnx`` needs the ``[onnx]`` extra (onnx, onnxruntime), which a plain install leaves out."""
    missing = []
    for name in ("onnx", "onnxruntime"):
        try:
            __import__(name)
        except ImportError:
            missing.append(name)
    check(
        not missing,
        "onnx",
        f"--onnx needs {' and '.join(missing)}, which a plain install leaves out; install the "
        '[onnx] extra: pip install -c constraints.txt -e ".[onnx]" (or pip install onnx onnxruntime)',
    )


def export_onnx(model_dir: str, kind: str, length: int = 128, segments: bool = False) -> dict:
    """ONNX export of the student plus a check that ONNX Runtime matches PyTorch within 1e-4. ``segments``
    (sentence-pair and QA tasks): the file also takes ``token_type_ids``, which BERT's second segment needs."""
    from raydistill.export.onnx import OPSET, to_onnx
    from raydistill.models.encoder import load_model
    from raydistill.models.latency import measure_latency

    model = load_model(model_dir, kind, attn_implementation="eager").eval()
    path = os.path.join(model_dir, "model.onnx")
    print(f"ONNX export of {model_dir} (opset {OPSET}) …", file=sys.stderr, flush=True)
    t0 = time.perf_counter()
    diff, sess, one = to_onnx(model, kind, path, length, segments)
    print(
        f"ONNX export done in {time.perf_counter() - t0:.1f} s; ONNX Runtime matches PyTorch within {diff:.1e}",
        file=sys.stderr,
        flush=True,
    )
    torch_ms = measure_latency(model, batch_sizes=(1,), length=length)["latency_ms_b1"]

    times = []
    for i in range(12):
        t0 = time.perf_counter()
        sess.run(None, one)
        if i >= 2:
            times.append((time.perf_counter() - t0) * 1000)
    return {
        "onnx_path": path,
        "onnx_max_abs_diff": diff,
        "torch_latency_ms_b1": torch_ms,
        "onnx_latency_ms_b1": sorted(times)[len(times) // 2],
    }
