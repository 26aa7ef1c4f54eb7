"""Benchmark (a): a 3-trial sweep with and without the shared teacher-output cache, side by side in one run.

12L-768 teacher → 4L-312 student, 512 SST-2 examples at length 64, 3 trials × 2 epochs.
    python benchmarks/sweep_cache.py --data-dir ../shared/data/glue          # full size
    python benchmarks/sweep_cache.py --smoke                                  # tiny models, seconds
    python benchmarks/sweep_cache.py --data-dir ../shared/data/glue --teacher both   # bf16 and fp32 teacher
Prints `RATIO sweep_no_cache/sweep_cache=X.XX` as its last line (the package's default teacher precision).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time


def sst2_folder(data_dir: str | None, root: str, n: int) -> str:
    """SST-2 in the GLUE layout: the real files when given, else a small synthetic set."""
    if data_dir:
        return os.path.abspath(data_dir)
    import random

    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))
    from conftest import sentence

    rng = random.Random(0)
    os.makedirs(f"{root}/SST-2", exist_ok=True)
    for split, m in (("train", n), ("dev", 64)):
        rows = ["sentence\tlabel"] + [f"{sentence(rng, y)}\t{y}" for y in (rng.randint(0, 1) for _ in range(m))]
        open(f"{root}/SST-2/{split}.tsv", "w").write("\n".join(rows) + "\n")
    return root


def sweep_setup(data_dir: str | None, work: str, n: int, smoke: bool):
    """SST-2 data and a random-weight teacher under ``work``: (data dir, teacher dir, student size, examples,
    max length). Full size: 12L-768 → 4L-312 at length 64; smoke: 4L-32 → 2L-32 at length 32."""
    from raydistill.tasks import get_task
    from raydistill.testing import TinyShape, make_tiny_model

    data = sst2_folder(data_dir, os.path.join(work, "glue"), n)
    task = get_task("sst2")
    texts = [e["text"] for e in task.loader(task, data, "train")[:n]]
    if smoke:
        teacher = make_tiny_model(
            f"{work}/teacher", texts=texts, shape=TinyShape(layers=4, hidden=32, heads=2, intermediate=64)
        )
        return data, teacher, "2L-32-64-2", 64, 32
    teacher = make_tiny_model(
        f"{work}/teacher", texts=texts, shape=TinyShape(layers=12, hidden=768, heads=12, intermediate=3072)
    )
    return data, teacher, "4L-312-1200-12", n, 64


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--data-dir", help="GLUE folder with SST-2 (default: synthetic)")
    p.add_argument("--smoke", action="store_true", help="tiny teacher and student")
    p.add_argument("--examples", type=int, default=512)
    p.add_argument("--trials", type=int, default=3, help="trials per sweep (the cache is built by the first)")
    p.add_argument("--epochs", type=int, default=2, help="epochs per trial")
    p.add_argument(
        "--teacher",
        default="default",
        choices=("default", "fp32", "both"),
        help="teacher precision: the package default (bf16 autocast on CPUs with native bf16), fp32, or "
        "both side by side (4 sweeps)",
    )
    a = p.parse_args()
    os.environ.setdefault("RAY_TRAIN_HEALTH_CHECK_INTERVAL_S", "0.5")
    from raydistill.commands import sweep
    from raydistill.orchestrate.connect import init_ray

    a.data_dir = a.data_dir and os.path.abspath(a.data_dir)  # before the chdir below
    work = tempfile.mkdtemp(prefix="bench-cache-")
    os.chdir(work)
    data, teacher, size, examples, length = sweep_setup(a.data_dir, work, a.examples, a.smoke)
    os.environ["RAYDISTILL_CACHE_DIR"] = f"{work}/memo"  # latency memo; set before Ray starts so trials inherit it
    init_ray()
    common = [
        "kd_glue",
        "--task",
        "sst2",
        "--data-dir",
        data,
        "--teacher",
        teacher,
        "--num-samples",
        str(a.trials),
        "--set",
        f"student.size={size}",
        "--set",
        "student.init=random",
        "--set",
        "search.asha=false",
        "--set",
        "search.confirm=false",
        "--set",
        "search.control=false",  # the labels-only control trains without the teacher: not what the cache changes
        "--epochs",
        str(a.epochs),
        "--max-concurrent",
        "1",  # one trial at a time, as measured: the cache is the variable
        "--train-limit",
        str(examples),
        "--eval-limit",
        "64",
        "--max-length",
        str(length),
        "--batch-size",
        "32",
        "--tracking-uri",
        f"sqlite:///{work}/m.db",
        "--teacher-cache",
        f"{work}/cache",
    ]
    precisions = {"default": [""], "fp32": ["_fp32"], "both": ["", "_fp32"]}[a.teacher]
    runs = [
        (f"{label}{prec}", extra + (["--fp32-teacher"] if prec else []))
        for prec in precisions
        for label, extra in (("no_cache", ["--no-teacher-cache"]), ("cache", []))
    ]
    times = {}
    for label, extra in runs:
        shutil.rmtree(f"{work}/cache", ignore_errors=True)  # cold cache: building it is part of the timed sweep
        shutil.rmtree(f"{work}/memo", ignore_errors=True)  # each sweep measures the student's latency once
        t0 = time.perf_counter()
        sweep.main(common + extra + ["--name", f"bench-{label.replace('_', '-')}"])
        times[label] = time.perf_counter() - t0
        print(f"sweep {label}: {times[label]:.1f} s", file=sys.stderr, flush=True)
    print("sweep wall time: " + " ".join(f"{k}={v:.1f}s" for k, v in times.items()))
    if "no_cache_fp32" in times and "cache" in times:
        print(
            f"RATIO sweep_no_cache_fp32/sweep_cache={times['no_cache_fp32'] / times['cache']:.2f}  "
            "(fp32 teacher, no cache vs the package default)"
        )
    for prec in precisions[::-1]:  # the default precision's ratio last
        print(f"RATIO sweep_no_cache{prec}/sweep_cache{prec}={times['no_cache' + prec] / times['cache' + prec]:.2f}")


if __name__ == "__main__":
    main()
