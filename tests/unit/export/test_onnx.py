"""ONNX export of a student (``raydistill.export.onnx.export_onnx``): the file is written and ONNX Runtime matches
PyTorch."""

from __future__ import annotations

import os

import numpy as np
import pytest
import torch

pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from raydistill.config.schema import StudentConfig
from raydistill.export.onnx import export_onnx
from raydistill.models.encoder import load_model
from raydistill.models.student import build_student

OUTPUTS = {"classification": ["logits"], "qa": ["start_logits", "end_logits"]}


def exported_student(teacher_dir: str, kind: str, out_dir) -> str:
    """A 2-layer student of ``teacher_dir`` saved like ``raydistill.best --export`` writes it (model + tokenizer)."""
    from transformers import AutoTokenizer

    torch.manual_seed(0)
    student = build_student(
        load_model(teacher_dir, kind), StudentConfig(layers=2, hidden=32, intermediate=64, heads=2, init="random")
    )
    student.save_pretrained(out_dir)
    AutoTokenizer.from_pretrained(teacher_dir).save_pretrained(out_dir)
    return str(out_dir)


@pytest.mark.parametrize("kind", ["classification", "qa"])
def test_export_onnx_matches_pytorch(tiny_teacher, tmp_path, kind):
    d = exported_student(tiny_teacher(kind), kind, tmp_path / "student")
    out = export_onnx(d, kind, length=32)

    assert out["onnx_path"] == os.path.join(d, "model.onnx") and os.path.isfile(out["onnx_path"])
    assert 0 <= out["onnx_max_abs_diff"] < 1e-4
    assert out["onnx_latency_ms_b1"] > 0 and out["torch_latency_ms_b1"] > 0

    # an independent check on another batch size and length (the axes are dynamic), with padding
    model = load_model(d, kind, attn_implementation="eager").eval()
    sess = ort.InferenceSession(out["onnx_path"], providers=["CPUExecutionProvider"])
    assert [o.name for o in sess.get_outputs()] == OUTPUTS[kind]
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(5, model.config.vocab_size, (3, 20), generator=g)
    mask = torch.ones_like(ids)
    mask[1, 14:] = 0
    mask[2, 7:] = 0
    got = sess.run(None, {"input_ids": ids.numpy(), "attention_mask": mask.numpy()})
    with torch.no_grad():
        ref = model(input_ids=ids, attention_mask=mask)
    for name, arr in zip(OUTPUTS[kind], got, strict=True):
        want = getattr(ref, name).numpy()
        assert arr.shape == want.shape
        real = mask.numpy().astype(bool) if kind == "qa" else np.ones(want.shape, bool)  # QA: padded positions aside
        assert np.abs(arr - want)[real].max() < 1e-4, name
