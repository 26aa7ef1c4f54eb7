#!/usr/bin/env python
"""Benchmark (d), GPU: examples/s and model-FLOPs utilisation (MFU) of BERT-base → TinyBERT-4 task distillation, a
6L-768 PKD student's step, the teacher's cache pass, and small-student trials packed on one GPU vs total throughput.

    python benchmarks/gpu.py                   # on a CUDA machine (default peak: H200/H100 bf16 dense, 989 TFLOP/s)
    python benchmarks/gpu.py --attention unpadded --compile     # the same on real tokens only, students compiled
    python benchmarks/gpu.py --smoke           # tiny models on CPU: runs every code path (what the tests run)

Part 1, MFU: the package's step (``build_objective``, ``step.Distiller``, ``step.make_optimizer``,
``step.teacher_outputs``, ``step.train_step``, as ``loop.run`` runs it on GPU: teacher and student step under
bf16 autocast, fp32 master weights, AdamW, clipping)
for TinyBERT task distillation, stage ``intermediate`` (embedding + attention-score + hidden MSE, mapping 3,6,9,12)
and stage ``pred`` (T²-scaled KL on logits), and for PKD (skip, T 20, α 0.7, β 100) of a 6L-768-3072 student (the
PKD / DistilBERT shape, batch 64). Teacher 12L-768-3072-12 (BERT-base shape, random weights), TinyBERT student
4L-312-1200-12, length 128, ragged batches (rows of length 64–128, padded as dynamic padding pads). Model FLOPs
over real (unpadded) tokens only, attention included (``FLOPS_FORMULA``, written into the report): per token of a
row of real length n, teacher forward 2·(4H² + 2HI)·L + 4·n·H·L, student 3× its forward (forward + backward), plus
the learned projections; MFU = counted FLOP/s ÷ ``--peak-tflops``. The cache pass: ``TeacherCache.ensure`` over 16,384
ragged rows (the teacher's forward only, in its dtype), after an untimed small pass.

Part 2, packing: K processes on one GPU (K in ``--pack``, default 1,2,4,8), each a pred-stage trial that trains its
own 4L-312 student with teacher logits from one shared ``TeacherCache`` (built once, memory-mapped by every
process: no teacher on the GPU). All start together after a barrier; total examples/s = Σ examples ÷ slowest
wall time; their aggregate MFU = Σ student FLOPs (3× the forward over real tokens; the teacher is the cache's) ÷
the slowest wall ÷ peak. In a sweep the same packing is ``--use-gpu --gpus-per-worker 1/K``.

``--attention unpadded`` and ``--compile`` set ``train.attention`` / ``train.compile`` of every step and the cache
pass (stages that read attention scores stay padded, as in training).
Last line: ``RESULT mfu_intermediate=… mfu_pred=… mfu_pkd=… mfu_cache_pass=… pack_K=<total ex/s ÷ K=1 ex/s>
mfu_pack_K=… …``.
"""

from __future__ import annotations

import os
import sys

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # this checkout's raydistill

import argparse
import json
import tempfile
import time

import torch
from common import TEXTS

SIZES = {
    "full": dict(
        t_layers=12,
        t_hidden=768,
        t_heads=12,
        t_inter=3072,
        s_layers=4,
        s_hidden=312,
        s_inter=1200,
        length=128,
        batch=256,
        pack_batch=64,
        pkd_layers=6,
        pkd_hidden=768,
        pkd_inter=3072,
        pkd_batch=64,
        cache_rows=16384,
    ),
    "smoke": dict(
        t_layers=4,
        t_hidden=64,
        t_heads=4,
        t_inter=128,
        s_layers=2,
        s_hidden=32,
        s_inter=64,
        length=32,
        batch=8,
        pack_batch=8,
        pkd_layers=2,
        pkd_hidden=64,
        pkd_inter=128,
        pkd_batch=8,
        cache_rows=32,
    ),
}


def encoder_flops_per_token(layers: int, hidden: int, inter: int, length: int) -> float:
    """Forward matmul FLOPs per token of a BERT encoder: QKV + output projections (4H²), FFN (2HI), ×2 for
    multiply-add, plus attention scores and context (2·T·H each, ×2)."""
    return layers * (2 * (4 * hidden * hidden + 2 * hidden * inter) + 4 * length * hidden)


def step_flops_per_token(sz: dict, stage: str, n_proj: int) -> float:
    teacher = encoder_flops_per_token(sz["t_layers"], sz["t_hidden"], sz["t_inter"], sz["length"])
    student = encoder_flops_per_token(sz["s_layers"], sz["s_hidden"], sz["s_inter"], sz["length"])
    proj = 2 * sz["s_hidden"] * sz["t_hidden"] * (n_proj if stage == "intermediate" else 0)
    return teacher + 3 * (student + proj)


FLOPS_FORMULA = (
    "step FLOPs = sum over real (unpadded) rows i of len_i * [teacher(len_i) + 3 * (student(len_i) + proj)], "
    "encoder(len) = layers * (2 * (4 H^2 + 2 H I) + 4 * len * H) per token (attention scores and context "
    "included, over the row's own real tokens), proj = 2 * H_s * H_t per projected layer (intermediate stage)"
)


def student_step_flops(sz: dict, lengths) -> float:
    """A packed trial's step from the teacher cache: 3× its student's forward over the real tokens (no teacher)."""
    return sum(
        3 * encoder_flops_per_token(sz["s_layers"], sz["s_hidden"], sz["s_inter"], int(n)) * int(n) for n in lengths
    )


def cache_pass(teacher_dir: str, sz: dict, device, root: str, peak_tflops: float) -> dict:
    """MFU of the teacher's cache pass (``TeacherCache.ensure``: the BERT-base-shaped teacher's forward over
    ``cache_rows`` ragged training rows, in the teacher's dtype), after an untimed small pass (CUDA start-up)."""
    from raydistill.tasks.encode import collate
    from raydistill.teacher.cache import CacheWants, TeacherCache, TeacherInputs
    from raydistill.train.objective import build_objective
    from raydistill.train.precision import teacher_dtype

    cfg = run_config(teacher_dir, sz, "pred", sz["pack_batch"], device.type == "cuda", os.path.join(root, "pass"))
    _, _, teacher, _ = build_objective(cfg)
    teacher.to(device)
    dtype, unpadded = teacher_dtype(cfg.train, device), cfg.train.attention == "unpadded"
    walls = []
    for n in (sz["pack_batch"] * 4, sz["cache_rows"]):
        key, feats = _cache_inputs(cfg, sz, n)
        sync(device)
        t0 = time.perf_counter()
        TeacherCache(cfg.teacher_cache, key, "classification", unpadded).ensure(
            teacher, TeacherInputs(feats, collate, 0), device, log=lambda *x: None, want=CacheWants(dtype)
        )
        sync(device)
        walls.append(time.perf_counter() - t0)
    lengths = [len(f["input_ids"]) for f in feats]
    flops = sum(encoder_flops_per_token(sz["t_layers"], sz["t_hidden"], sz["t_inter"], m) * m for m in lengths)
    del teacher
    if device.type == "cuda":
        torch.cuda.empty_cache()
    return {
        "rows": len(lengths),
        "real_tokens": sum(lengths),
        "wall_s": walls[-1],
        "examples_per_s": len(lengths) / walls[-1],
        "tflops_per_s": flops / walls[-1] / 1e12,
        "mfu": flops / walls[-1] / (peak_tflops * 1e12),
        "teacher_dtype": dtype,
        "attention": cfg.train.attention,
        "flops_formula": "teacher forward only: sum over rows of len * encoder(len) (FLOPS_FORMULA's encoder)",
    }


def step_flops(sz: dict, stage: str, n_proj: int, lengths) -> float:
    """Model FLOPs of one step over the real tokens of rows with ``lengths`` (``FLOPS_FORMULA``)."""
    return sum(step_flops_per_token({**sz, "length": int(n)}, stage, n_proj) * int(n) for n in lengths)


def make_teacher(root: str, sz: dict) -> str:
    from raydistill.testing import TinyShape, make_tiny_model

    return make_tiny_model(
        os.path.join(root, "teacher"),
        kind="classification",
        texts=TEXTS,
        shape=TinyShape(layers=sz["t_layers"], hidden=sz["t_hidden"], heads=sz["t_heads"], intermediate=sz["t_inter"]),
    )


def run_config(
    teacher_dir: str,
    sz: dict,
    stage: str,
    batch: int,
    use_gpu: bool,
    cache: str | None = None,
    student: str = "s",
    method: str = "tinybert",
):
    """The step's run: TinyBERT task distillation of the ``s_*`` student, or PKD (skip) of the ``pkd_*`` one; the
    layout (``attention``) and ``compile`` of ``sz``."""
    from raydistill.config.schema import DistillConfig, RunConfig, StudentConfig, TrainConfig

    distill = (
        DistillConfig(method="tinybert", stage=stage, mapping="uniform", alpha=1.0)
        if method == "tinybert"
        else DistillConfig(method="pkd", temperature=20, alpha=0.7, beta=100, mapping="skip")
    )
    return RunConfig(
        task="sst2",
        teacher=teacher_dir,
        teacher_cache=cache,
        student=StudentConfig(
            layers=sz[f"{student}_layers"],
            hidden=sz[f"{student}_hidden"],
            intermediate=sz[f"{student}_inter"],
            heads=sz["t_heads"],
            init="random",
        ),
        distill=distill,
        train=TrainConfig(
            batch_size=batch,
            max_length=sz["length"],
            epochs=1,
            max_steps=10**6,
            use_gpu=use_gpu,
            attention=sz.get("attention", "padded"),
            compile=sz.get("compile", False),
        ),
    ).validate()


def batches(n: int, vocab: int, batch: int, length: int, device, seed: int = 0) -> list[dict]:
    g = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(n):
        ids = torch.randint(5, vocab, (batch, length), generator=g)
        # ragged rows (one full-length): padding as dynamic padding leaves it; MFU counts the real tokens only
        lengths = torch.randint(length // 2, length + 1, (batch,), generator=g)
        lengths[0] = length
        mask = (torch.arange(length)[None, :] < lengths[:, None]).long()
        out.append(
            {
                k: v.to(device)
                for k, v in {
                    "input_ids": ids * mask,
                    "attention_mask": mask,
                    "token_type_ids": torch.zeros_like(ids),
                    "labels": torch.randint(0, 2, (batch,), generator=g),
                }.items()
            }
        )
    return out


def sync(device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


class Step:
    """The body of ``loop.run``'s inner loop on ``device`` (teacher live, or from ``cache`` when given)."""

    def __init__(self, cfg, device, cache=None):
        from raydistill.models.encoder import quiet_hf
        from raydistill.train.objective import build_objective
        from raydistill.train.precision import step_dtype, teacher_dtype
        from raydistill.train.step import Distiller, compile_student, make_optimizer

        quiet_hf()
        torch.manual_seed(0)
        self.objective, self.student, self.teacher, _ = build_objective(cfg)
        self.student.to(device).train()
        if cfg.train.compile:
            compile_student(self.student)  # as loop.run: the forward compiled in place, the first steps compile
        self.objective.to(device)
        if cache is None:
            self.teacher.to(device)  # else served from the cache: the teacher stays on the CPU, as in loop.run
        self.model = Distiller(self.student, self.objective)
        self.opt, self.sched = make_optimizer(
            cfg, list(self.student.parameters()) + list(self.objective.parameters()), 10**6
        )
        self.stage = self.objective.method.stage_for(0, 1)
        self.device, self.cache = device, cache
        self.t_dtype, self.s_dtype = teacher_dtype(cfg.train, device), step_dtype(cfg.train, device)
        self.n_proj = len(self.objective.projections)

    def __call__(self, batch, idx=None):
        from raydistill.train.step import StepOn, teacher_outputs, train_step

        t_out = teacher_outputs(
            self.teacher, self.cache, self.objective, batch, idx, self.stage, self.device, self.t_dtype
        )
        losses = train_step(
            self.model, batch, t_out, self.stage, self.opt, self.sched, on=StepOn(self.device, self.s_dtype)
        )
        return losses["loss"].detach()


def mfu(
    teacher_dir: str,
    sz: dict,
    device,
    stage: str,
    steps: int,
    warmup: int,
    peak_tflops: float,
    student: str = "s",
    method: str = "tinybert",
) -> dict:
    """MFU of one step: TinyBERT (``stage``) of the ``s_*`` student, or PKD of the ``pkd_*`` student (6L-768)."""
    batch = sz["batch"] if student == "s" else sz[f"{student}_batch"]
    cfg = run_config(teacher_dir, sz, stage, batch, device.type == "cuda", student=student, method=method)
    shape = {**sz, **{f"s_{k}": sz[f"{student}_{k}"] for k in ("layers", "hidden", "inter")}, "batch": batch}
    return _timed_steps(Step(cfg, device), shape, device, stage, steps, warmup, peak_tflops)


def _timed_steps(step, sz: dict, device, stage: str, steps: int, warmup: int, peak_tflops: float) -> dict:
    data = batches(warmup + steps, step.student.config.vocab_size, sz["batch"], sz["length"], device)
    for b in data[:warmup]:
        step(b)
    sync(device)
    t0 = time.perf_counter()
    for b in data[warmup:]:
        step(b)
    sync(device)
    dt = (time.perf_counter() - t0) / steps
    flops = sum(step_flops(sz, stage, step.n_proj, b["attention_mask"].sum(1).tolist()) for b in data[warmup:]) / steps
    out = {
        "real_tokens_per_step": sum(int(b["attention_mask"].sum()) for b in data[warmup:]) / steps,
        "flops_formula": FLOPS_FORMULA,
        "stage": stage,
        "student": f"{sz['s_layers']}L-{sz['s_hidden']}-{sz['s_inter']}",
        "batch": sz["batch"],
        "attention": sz.get("attention", "padded"),
        "compile": sz.get("compile", False),
        "s_per_step": dt,
        "examples_per_s": sz["batch"] / dt,
        "tflops_per_s": flops / dt / 1e12,
        "mfu": flops / dt / (peak_tflops * 1e12),
        "teacher_dtype": step.t_dtype,
        "step_dtype": step.s_dtype,
    }
    del step
    if device.type == "cuda":
        torch.cuda.empty_cache()
    return out


def _pack_worker(
    rank: int, teacher_dir: str, cache_root: str, sz: dict, device_name: str, steps: int, warmup: int, barrier, results
) -> None:
    """One packed trial: its own student, teacher logits from the shared cache."""
    from raydistill.tasks.encode import collate
    from raydistill.teacher.cache import TeacherCache, TeacherInputs

    device = torch.device(device_name)
    if device.type == "cpu":
        torch.set_num_threads(1)  # K trials share the cores
    cfg = run_config(teacher_dir, sz, "pred", sz["pack_batch"], device.type == "cuda", cache_root)
    key, feats = _cache_inputs(cfg, sz)
    unpadded = cfg.train.attention == "unpadded"
    cache = TeacherCache(cache_root, key, "classification", unpadded).ensure(
        None, TeacherInputs(feats, collate, 0), device
    )  # a hit
    step = Step(cfg, device, cache)
    n, B = len(feats), sz["pack_batch"]
    order = [list(range(s, s + B)) for s in range(0, n - B + 1, B)]
    data = [(collate([feats[i] for i in idx], 0), idx) for idx in order]
    data = [({k: v.to(device) for k, v in b.items()}, idx) for b, idx in data]
    for i in range(warmup):
        step(*data[i % len(data)])
    sync(device)
    barrier.wait()
    t0 = time.perf_counter()
    for i in range(steps):
        step(*data[i % len(data)])
    sync(device)
    wall = time.perf_counter() - t0
    # the teacher is served from the cache: a packed trial's model FLOPs are its student's, over real tokens
    flops = sum(student_step_flops(sz, data[i % len(data)][0]["attention_mask"].sum(1).tolist()) for i in range(steps))
    results[rank] = (steps * B, wall, flops)


def _cache_inputs(cfg, sz: dict, n: int = 1024):
    """Synthetic ragged training features (seeded, so every process builds the same list) and the cache key."""
    import hashlib

    from transformers import AutoConfig

    from raydistill.models.encoder import fingerprint
    from raydistill.train.precision import teacher_dtype

    g = torch.Generator().manual_seed(1)
    vocab = AutoConfig.from_pretrained(cfg.teacher).vocab_size
    # ragged rows (real lengths half the length to all of it), unpadded as tokenisation leaves them
    lengths = torch.randint(sz["length"] // 2, sz["length"] + 1, (n,), generator=g).tolist()
    feats = [
        {
            "input_ids": [2] + torch.randint(5, vocab, (m - 2,), generator=g).tolist() + [3],
            "attention_mask": [1] * m,
            "token_type_ids": [0] * m,
            "labels": i % 2,
        }
        for i, m in enumerate(lengths)
    ]
    device = torch.device("cuda" if cfg.train.use_gpu else "cpu")
    layout = cfg.train.attention
    desc = f"{fingerprint(cfg.teacher)}-{teacher_dtype(cfg.train, device)}-bench-{n}x{sz['length']}-ragged-{layout}"
    return hashlib.sha256(desc.encode()).hexdigest()[:20], feats  # the data is synthetic: keyed by its recipe


def packing(
    teacher_dir: str, sz: dict, device, ks: list[int], steps: int, warmup: int, root: str, peak_tflops: float
) -> dict:
    import torch.multiprocessing as mp

    from raydistill.tasks.encode import collate
    from raydistill.teacher.cache import CacheWants, TeacherCache, TeacherInputs
    from raydistill.train.objective import build_objective
    from raydistill.train.precision import teacher_dtype

    cache_root = os.path.join(root, "cache")
    cfg = run_config(teacher_dir, sz, "pred", sz["pack_batch"], device.type == "cuda", cache_root)
    key, feats = _cache_inputs(cfg, sz)
    _, _, teacher, _ = build_objective(cfg)
    TeacherCache(cache_root, key, "classification", cfg.train.attention == "unpadded").ensure(
        teacher.to(device), TeacherInputs(feats, collate, 0), device, want=CacheWants(teacher_dtype(cfg.train, device))
    )
    del teacher
    ctx = mp.get_context("spawn")
    out = {}
    for k in ks:
        barrier, results = ctx.Barrier(k), ctx.Manager().dict()
        procs = [
            ctx.Process(
                target=_pack_worker, args=(r, teacher_dir, cache_root, sz, str(device), steps, warmup, barrier, results)
            )
            for r in range(k)
        ]
        for p in procs:
            p.start()
        for p in procs:
            p.join()
        if any(p.exitcode for p in procs) or len(results) != k:
            raise RuntimeError(f"a packed trial failed (K={k}): exit codes {[p.exitcode for p in procs]}")
        ex = sum(e for e, _, _ in results.values())
        wall = max(t for _, t, _ in results.values())
        flops = sum(f for _, _, f in results.values())
        out[k] = {
            "trials": k,
            "examples_per_s": ex / wall,
            "per_trial_examples_per_s": ex / wall / k,
            "tflops_per_s": flops / wall / 1e12,  # aggregate: every trial's student FLOPs over the slowest wall
            "mfu": flops / wall / (peak_tflops * 1e12),
        }
        print(
            f"packing K={k}: total {ex / wall:.1f} examples/s ({ex / wall / k:.1f} per trial), "
            f"aggregate MFU {100 * out[k]['mfu']:.2f}%",
            flush=True,
        )
    base = out[ks[0]]["examples_per_s"]
    for k in ks:
        out[k]["vs_first"] = out[k]["examples_per_s"] / base
    return out


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--smoke", action="store_true", help="tiny models on CPU, 1 step each (seconds)")
    p.add_argument("--steps", type=int, default=None, help="timed steps (default 20; smoke 1)")
    p.add_argument("--warmup", type=int, default=None, help="untimed steps first (default 5; smoke 1)")
    p.add_argument("--pack", default=None, help="comma list of trials per GPU (default 1,2,4,8; smoke 1,2)")
    p.add_argument("--peak-tflops", type=float, default=989.4, help="bf16 dense peak of the GPU (H100/H200: 989.4)")
    p.add_argument("--json", help="also write the results here")
    p.add_argument(
        "--attention",
        default="padded",
        choices=("padded", "unpadded"),
        help="train.attention of every step and of the cache pass (unpadded: forwards on real tokens only)",
    )
    p.add_argument("--compile", action="store_true", help="train.compile: the students' forwards through torch.compile")
    a = p.parse_args(argv)
    sz = {**SIZES["smoke" if a.smoke else "full"], "attention": a.attention, "compile": a.compile}
    if not a.smoke and not torch.cuda.is_available():
        print("error: no CUDA device; this benchmark measures a GPU (use --smoke to check it on CPU)", file=sys.stderr)
        raise SystemExit(2)
    device = torch.device("cuda" if torch.cuda.is_available() and not a.smoke else "cpu")
    steps, warmup = a.steps or (1 if a.smoke else 20), a.warmup if a.warmup is not None else (1 if a.smoke else 5)
    ks = [int(k) for k in (a.pack or ("1,2" if a.smoke else "1,2,4,8")).split(",")]
    info = {
        "device": torch.cuda.get_device_name() if device.type == "cuda" else "cpu",
        "torch": torch.__version__,
        "peak_tflops": a.peak_tflops,
        "sizes": sz,
    }
    print("machine: " + json.dumps(info), flush=True)
    res = {"machine": info}
    with tempfile.TemporaryDirectory(prefix="raydistill-gpu-bench-") as root:
        teacher_dir = make_teacher(root, sz)
        for stage in ("intermediate", "pred"):
            res[f"mfu_{stage}"] = mfu(teacher_dir, sz, device, stage, steps, warmup, a.peak_tflops)
        res["mfu_pkd"] = mfu(teacher_dir, sz, device, "pkd", steps, warmup, a.peak_tflops, student="pkd", method="pkd")
        for name in ("intermediate", "pred", "pkd"):
            r = res[f"mfu_{name}"]
            print(
                f"{name} ({r['student']}): {r['examples_per_s']:.1f} examples/s, {r['tflops_per_s']:.1f} TFLOP/s, "
                f"MFU {100 * r['mfu']:.1f}% (teacher {r['teacher_dtype']}, step {r['step_dtype']})",
                flush=True,
            )
        res["cache_pass"] = r = cache_pass(teacher_dir, sz, device, root, a.peak_tflops)
        print(f"cache pass: {r['examples_per_s']:.1f} rows/s, MFU {100 * r['mfu']:.1f}%", flush=True)
        res["packing"] = packing(teacher_dir, sz, device, ks, steps, warmup, root, a.peak_tflops)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=1)
    print(
        "RESULT "
        + " ".join(
            [f"mfu_{s}={res[f'mfu_{s}']['mfu']:.3g}" for s in ("intermediate", "pred", "pkd")]
            + [f"mfu_cache_pass={res['cache_pass']['mfu']:.3g}"]
            + [f"pack_{k}={v['vs_first']:.2f} mfu_pack_{k}={v['mfu']:.3g}" for k, v in res["packing"].items()]
        )
    )
    return res


if __name__ == "__main__":
    main()
