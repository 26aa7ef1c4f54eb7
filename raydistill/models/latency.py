"""Student size and speed: parameter count and batch-1 / batch-32 latency, memoised per architecture."""

from __future__ import annotations

import hashlib
import json
import os
import platform
import time

import torch

from raydistill.common.paths import write_json_atomic


def memo_dir() -> str:
    """Per-user, per-machine memo folder (``RAYDISTILL_CACHE_DIR`` or ~/.cache/raydistill): shared by every trial,
    run and sweep on this machine, whether or not the teacher cache is on."""
    return os.environ.get("RAYDISTILL_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "raydistill")


def cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            return next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), platform.machine())
    except OSError:
        return platform.processor() or platform.machine()


def arch_key(config, device: str, length: int) -> str:
    keys = ("model_type", "num_hidden_layers", "hidden_size", "intermediate_size", "num_attention_heads", "vocab_size")
    desc = {k: getattr(config, k, None) for k in keys} | {
        "device": device,
        "length": length,
        "threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "hardware": torch.cuda.get_device_name() if device == "cuda" else cpu_name(),
    }
    return hashlib.sha256(json.dumps(desc, sort_keys=True).encode()).hexdigest()[:16]


@torch.no_grad()
def measure_latency(
    model, batch_sizes=(1, 32), length: int = 128, device: str = "cpu", repeats: int = 10, warmup: int = 2
) -> dict[str, float]:
    """Median wall time (ms) of a forward pass at each batch size, sequence length ``length``."""
    model = model.to(device).eval()
    out = {}
    for b in batch_sizes:
        ids = torch.randint(5, model.config.vocab_size, (b, length), device=device)
        mask = torch.ones_like(ids)
        times = []
        for i in range(warmup + repeats):
            if device == "cuda":
                torch.cuda.synchronize()
            t0 = time.perf_counter()
            model(input_ids=ids, attention_mask=mask)
            if device == "cuda":
                torch.cuda.synchronize()
            if i >= warmup:
                times.append((time.perf_counter() - t0) * 1000)
        out[f"latency_ms_b{b}"] = sorted(times)[len(times) // 2]
    return out


def student_speed(model, length: int = 128, cache_dir: str | None = None) -> dict[str, float]:
    """Params and latency of ``model``, memoised in a JSON file keyed by architecture and device."""
    device = "cuda" if torch.cuda.is_available() else "cpu"
    key = arch_key(model.config, device, length)
    path = os.path.abspath(os.path.join(cache_dir or memo_dir(), "latency-cache.json"))
    cache = read_memo(path)
    speed = cache.get(key)
    if not speed or "load" not in speed:  # entries without their load predate the rule below: measured again
        speed = {**measure_latency(model, length=length, device=device), "load": busy()}
        if device == "cuda" or quiet(speed["load"]):
            cache[key] = speed
            write_memo(path, cache)
    times = {k: v for k, v in speed.items() if k.startswith("latency_ms_")}
    return {"student_params": float(sum(p.numel() for p in model.parameters())), **times}


def quiet(load: float) -> bool:
    """Whether a CPU timing taken at this load is worth memoising: no more runnable threads than cores."""
    return load <= (os.cpu_count() or 1)


def busy() -> float:
    """The 1-minute load average: a CPU timing taken with more runnable threads than cores is slowed by them, so it is
    reported for its run but not memoised for every later run of the architecture."""
    try:
        return os.getloadavg()[0]
    except OSError:
        return 0.0


def read_memo(path: str) -> dict:
    if not os.path.exists(path):
        return {}
    with open(path) as f:
        return json.load(f)


def write_memo(path: str, memo: dict) -> None:
    """Atomically: trials on one machine read and write the memo folder at once."""
    write_json_atomic(path, memo, unique=True)
