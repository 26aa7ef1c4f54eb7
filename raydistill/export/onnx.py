"""ONNX export of a loaded model, checked against PyTorch: the one export the student (``best --onnx``), the teacher
timed beside it (``best --onnx --quantize``) and the latency benchmark share, so both sides of a same-runtime ratio
come from the same graph recipe (opset 17, dynamic batch and length, the same inputs)."""

from __future__ import annotations

import numpy as np
import torch

from raydistill.common.errors import check

OPSET = 17


def to_onnx(model, kind: str, path: str, length: int = 128, segments: bool = False):
    """Write ``model`` (loaded with eager attention, in eval mode) to ``path`` and run it once in ONNX Runtime on two
    random rows of ``length`` tokens. ``segments`` (sentence-pair and QA tasks): the file also takes
    ``token_type_ids``, which BERT's second segment needs. Returns (max |ORT - PyTorch|, the session, one row of the
    inputs as numpy); refused (``onnx``) above 1e-4."""
    import onnxruntime as ort

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
