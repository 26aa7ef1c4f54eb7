#!/usr/bin/env python
"""One ``raydistill distill`` command under two sets of flags, side by side in one run.

Each run is its own ``python -m raydistill.distill`` process (no Ray: a 1-worker run trains in the command's
process), alternating A, B, B, A, A, B, … so both sides see the same machine state. Each run reads its examples/s and
seconds from the command's JSON line; the wall is the process's.

    python benchmarks/distill_ab.py --a="--cpus-per-worker 1" --rounds 2 --work W -- \\
        --method pkd --teacher T --task mrpc --data-dir GLUE --epochs 1 --train-limit 1000 --eval-limit 200
    python benchmarks/distill_ab.py --smoke        # a tiny synthetic teacher: the real commands, ~20 s

Ends with one ``DISTILLAB a_examples_per_s=… b_examples_per_s=… ratio_b_over_a=…`` line (medians).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import time

from common import loadavg, machine

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
READ = ("train_examples_per_s", "time_train_s", "time_fit_s", "cpu_train_s")


def one(side: str, flags: list[str], common: list[str], work: str, i: int) -> dict:
    """One run of the command on ``side``'s flags: its JSON line's speed fields, the process wall, the load after."""
    out = os.path.join(work, f"{side}{i}")
    cmd = [sys.executable, "-m", "raydistill.distill", *common, *flags, "--output", out, "--overwrite"]
    cmd += ["--tracking-uri", f"sqlite:///{os.path.join(work, 'mlflow.db')}", "--storage-path", f"{out}-ray"]
    t = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=HERE)
    wall = time.perf_counter() - t
    if proc.returncode:
        raise SystemExit(f"{side} run {i} failed (exit {proc.returncode}):\n{proc.stderr[-2000:]}")
    line = json.loads(proc.stdout.strip().splitlines()[-1])
    return {"side": side, "round": i, "wall_s": round(wall, 1), "load": loadavg(), **{k: line.get(k) for k in READ}}


def median(rows: list[dict], side: str, key: str) -> float:
    return statistics.median(r[key] for r in rows if r["side"] == side and r[key] is not None)


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--a", default="", help="side A's flags, one string (default: none)")
    p.add_argument("--b", default="", help="side B's flags, one string (default: none: the command's defaults)")
    p.add_argument("--rounds", type=int, default=2, help="runs of each side, alternated")
    p.add_argument("--work", default="/tmp/distill-ab")
    p.add_argument("--json", help="write the runs and medians here")
    p.add_argument("--smoke", action="store_true")
    p.add_argument("common", nargs="*", help="the command's flags both sides share (after --)")
    a = p.parse_args(argv)
    common = smoke_args(a.work) if a.smoke else a.common
    sides = {"a": shlex.split(a.a), "b": shlex.split(a.b)}
    print(f"machine {machine()}, load {loadavg()}; A {sides['a']}, B {sides['b']}", flush=True)
    os.makedirs(a.work, exist_ok=True)
    rows = []
    for i in range(a.rounds):
        for side in "ab" if i % 2 == 0 else "ba":
            rows.append(one(side, sides[side], common, a.work, i))
            print(json.dumps(rows[-1]), flush=True)
    med = {f"{s}_{k}": median(rows, s, k) for s in "ab" for k in ("train_examples_per_s", "wall_s")}
    ratio = med["b_train_examples_per_s"] / med["a_train_examples_per_s"]
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"runs": rows, "medians": med, "ratio": ratio, "common": common, "sides": sides}, f, indent=1)
    print(
        f"DISTILLAB a_examples_per_s={med['a_train_examples_per_s']:.1f} b_examples_per_s="
        f"{med['b_train_examples_per_s']:.1f} a_wall_s={med['a_wall_s']} b_wall_s={med['b_wall_s']} "
        f"ratio_b_over_a={ratio:.2f}"
    )


def smoke_args(work: str) -> list[str]:
    """A tiny random teacher and a few SST-2-shaped rows: every part of the run, in seconds."""
    sys.path.insert(0, os.path.join(HERE, "tests"))
    from conftest import _texts

    from raydistill.testing import TinyShape, make_tiny_model

    glue = os.path.join(work, "glue", "SST-2")
    os.makedirs(glue, exist_ok=True)
    texts = _texts()
    for name, n in (("train.tsv", 64), ("dev.tsv", 16)):
        with open(os.path.join(glue, name), "w") as f:
            f.write("sentence\tlabel\n" + "".join(f"{texts[i % len(texts)]}\t{i % 2}\n" for i in range(n)))
    teacher = make_tiny_model(
        os.path.join(work, "teacher"), kind="classification", num_labels=2, texts=texts, shape=TinyShape()
    )
    shape = ["--student-layers", "1", "--student-hidden", "32", "--student-intermediate", "64", "--student-heads", "2"]
    return ["--method", "kd", "--teacher", teacher, "--task", "sst2", "--data-dir", os.path.dirname(glue), *shape,
            "--epochs", "1", "--max-length", "32", "--batch-size", "16"]  # fmt: skip


if __name__ == "__main__":
    main()
