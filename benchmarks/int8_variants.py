"""Which INT8 weight format to ship, on this machine's CPU: each ONNX model in ``--model DIR:TASK`` exported once
(fp32), then dynamically quantised per variant (``raydistill.export.quantize.quantize_onnx``), each scored on the
task's whole dev set and timed at batch 1 (length 128; fp32 and every variant interleaved in one process).

Variants: ``s8`` (INT8 weights, 8-bit range), ``s8-7bit`` (INT8 weights in 7 bits, ONNX Runtime's ``reduce_range``),
``u8`` (UINT8 weights). On x86 CPUs without VNNI, ONNX Runtime multiplies u8 activations by s8 weights with an
instruction whose 16-bit pair sums saturate; the 7-bit range or u8 weights avoid that. Also reports the largest
|INT8 - fp32| logit over the dev set relative to the largest fp32 logit, and the CPU's VNNI flags.

    python benchmarks/int8_variants.py --data-dir ../shared/data/glue --model TEACHER_DIR:rte --json out.json
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(__file__))

from common import loadavg, machine  # noqa: E402

from raydistill.export.onnx import export_onnx  # noqa: E402
from raydistill.export.quantize import (  # noqa: E402
    OrtModel,
    dev_data,
    dev_score,
    ort_feed,
    ort_session,
    quantize_onnx,
    time_b1,
)
from raydistill.tasks import make_task  # noqa: E402
from raydistill.tasks.encode import collate  # noqa: E402

VARIANTS = {
    "s8": {"reduce_range": False},
    "s8-7bit": {"reduce_range": True},
    "u8": {"weight_type": "u8", "reduce_range": False},
}


def vnni_flags() -> list[str]:
    try:
        flags = next(ln for ln in open("/proc/cpuinfo") if ln.startswith("flags")).split()
    except (OSError, StopIteration):
        return []
    return sorted(f for f in flags if "vnni" in f)


def dev_logits(path: str, data) -> np.ndarray:
    model, out = OrtModel(path), []
    feats = data.eval_encoded.features
    for i in range(0, len(feats), 64):
        batch = collate(feats[i : i + 64], data.pad_id)
        keys = ("input_ids", "attention_mask", "token_type_ids")
        out.append(model(**{k: batch[k] for k in keys if k in batch}).logits.numpy())
    return np.concatenate(out)


def runner(sess):
    return lambda **kw: sess.run(None, ort_feed(sess, **kw))


def one_model(spec: str, data_dir: str, rounds: int, root: str) -> dict:
    model_dir, task_name = spec.rsplit(":", 1)
    task = make_task(task_name, None)
    work = os.path.join(root, os.path.basename(model_dir.rstrip("/")) + "-" + task_name)
    os.makedirs(work)
    link = os.path.join(work, "model")  # export_onnx writes beside the model: a copy keeps the source untouched
    shutil.copytree(model_dir, link, ignore=shutil.ignore_patterns("*.onnx", "transfer-build"))
    fp32 = export_onnx(link, task.kind, segments=task.pair)["onnx_path"]
    data = dev_data(task_name, link, data_dir)
    files = {"fp32": fp32}
    for name, kw in VARIANTS.items():
        files[name] = quantize_onnx(fp32, os.path.join(work, f"{name}.onnx"), **kw)
    want = dev_logits(fp32, data)
    out: dict = {"model": model_dir, "task": task_name, "dev_rows": len(data.eval_examples), "variants": {}}
    for name, path in files.items():
        got = dev_logits(path, data) if name != "fp32" else want
        score = dev_score(path, data)[f"eval_{task.main_metric}"]
        out["variants"][name] = {
            "dev": score,
            "mb": os.path.getsize(path) / 2**20,
            "max_dev_logit_diff_rel": float(np.abs(got - want).max() / np.abs(want).max()),
        }
    sessions = {n: ort_session(p) for n, p in files.items()}
    g = torch.Generator().manual_seed(0)
    with open(os.path.join(link, "config.json")) as f:
        vocab = json.load(f)["vocab_size"]
    ids = torch.randint(5, vocab, (1, 128), generator=g)
    inputs = {"input_ids": ids, "attention_mask": torch.ones_like(ids)}
    fns = {n: runner(s) for n, s in sessions.items()}
    for n, ms in time_b1(fns, inputs, rounds=rounds).items():
        out["variants"][n]["b1_ms"] = ms
    return out


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", action="append", required=True, help="DIR:TASK (a trained model and its GLUE task)")
    p.add_argument("--data-dir", required=True)
    p.add_argument("--rounds", type=int, default=60)
    p.add_argument("--json", default="")
    a = p.parse_args(argv)
    res = {"machine": {**machine(), "vnni": vnni_flags(), "load_start": loadavg()}, "models": []}
    with tempfile.TemporaryDirectory(prefix="int8-variants-") as root:
        for spec in a.model:
            r = one_model(spec, a.data_dir, a.rounds, root)
            res["models"].append(r)
            for n, v in r["variants"].items():
                print(
                    f"INT8VAR {r['task']} {os.path.basename(r['model'].rstrip('/'))} {n}: dev {v['dev']:.4f} "
                    f"b1 {v['b1_ms']:.2f} ms, {v['mb']:.1f} MB, max |dlogit| {100 * v['max_dev_logit_diff_rel']:.1f}%",
                    flush=True,
                )
    res["machine"]["load_end"] = loadavg()
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
