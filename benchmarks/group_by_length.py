"""Benchmark: one training epoch with and without --group-by-length, side by side in one run.

The quality benchmark's MRPC trial as the sweep runs it: PKD (the space's first recipe), a 3L-384 student of the
fine-tuned 6L MiniLM teacher, teacher outputs from the cache (built once, untimed), batch 32, length 128, one torch
thread, the validation split carved as usual. The two settings alternate (plain, grouped, grouped, plain: ABBA) so a
drift in the machine's state falls on both. Per run: the training phase's seconds (`time_train_s`, the loop's own
clock), the padded token slots its batches fill, and the whole epoch's wall (training + val/dev scoring + latency).
Then scoring alone (``scoring.model_outputs`` on dev + val, the student each epoch is scored as): rows in the split's
order vs longest first (the default), ABBA again.

    python benchmarks/group_by_length.py --teacher WORK/teachers/mrpc --data-dir ../shared/data/glue
    python benchmarks/group_by_length.py --smoke      # tiny teacher and synthetic MRPC, seconds
    ... --scoring-only                               # only the scoring comparison
    ... --optimizer-only                             # only: one grouped epoch with per-tensor vs fused AdamW (ABBA)
Last lines: `RATIO scoring in order/by length=...`, then `RATIO plain/grouped train_s=... tokens=...`
(`--optimizer-only`: `RATIO per-tensor/fused AdamW train_s=...`).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time

import torch

sys.path.insert(0, os.path.dirname(__file__))
from common import loadavg, machine


def one_epoch(cfg, grouped: bool, fused: bool = True) -> dict:
    from dataclasses import replace

    from raydistill.teacher.cache import open_cache
    from raydistill.train import loop, step

    step.FUSED_ADAMW = fused

    cfg = replace(cfg, train=replace(cfg.train, group_by_length=grouped))
    reports = []
    t0 = time.perf_counter()
    loop.run(cfg, loop.Context(report=lambda m, c: reports.append(m), open_cache=open_cache))
    m = reports[-1]
    return {
        "grouped": grouped,
        "fused": fused,
        "wall_s": time.perf_counter() - t0,
        "time_train_s": m["time_train_s"],
        "val_accuracy": m.get("val_accuracy"),
        "load": loadavg(),
    }


def slots(cfg, grouped: bool) -> tuple[int, int]:
    """(padded token slots, real tokens) of epoch 1's batches: the work the steps do, and the least they could."""
    from transformers import AutoTokenizer

    from raydistill.data.batches import epoch_batches, padded_tokens
    from raydistill.train import loop

    data = loop.load_data(cfg, AutoTokenizer.from_pretrained(cfg.teacher))
    lengths = [len(f["input_ids"]) for f in data.train]
    b = list(epoch_batches(len(lengths), cfg.train.batch_size, 0, cfg.train.seed, 0, 1, lengths if grouped else None))
    return padded_tokens(b, lengths), sum(lengths[i] for x in b for i in x)


def compare_scoring(cfg) -> tuple[list, float]:
    """Seconds to score the half-depth student on dev and val (batch 32, as the loop does), rows in split order or
    longest first, ABBA; printed per run. Returns the runs and the ratio of the medians (in order / longest first)."""
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    from raydistill.models.student import build_student
    from raydistill.train import loop, scoring

    data = loop.load_data(cfg, AutoTokenizer.from_pretrained(cfg.teacher))
    student = build_student(AutoModelForSequenceClassification.from_pretrained(cfg.teacher), cfg.student)
    real, score = scoring.by_length, []
    for by_length in (False, True, True, False):
        scoring.by_length = real if by_length else (lambda feats: list(range(len(feats))))
        try:
            t0 = time.perf_counter()
            scoring.dev_metrics(student, data, 32, torch.device("cpu"))
            score.append((by_length, time.perf_counter() - t0))
        finally:
            scoring.by_length = real
        print(
            f"scoring dev + val, rows {'longest first' if by_length else 'in order     '}: {score[-1][1]:.2f} s; "
            f"load {loadavg()}",
            flush=True,
        )
    med = {b: statistics.median(sec for x, sec in score if x == b) for b in (False, True)}
    return score, med[False] / med[True]


def half_depth(teacher: str) -> dict:
    """The benchmark's student: half the teacher's layers (its first k), at its width."""
    from raydistill.config.sizes import Shape
    from raydistill.train.preflight import teacher_config

    t = Shape.of(teacher_config(teacher))
    return {
        "layers": round(t.layers / 2),
        "hidden": t.hidden,
        "intermediate": t.intermediate,
        "heads": t.heads,
        "init": "first_k",
    }


def synthetic_mrpc(root: str, n: int) -> str:
    """MRPC in the GLUE layout with pair lengths from 8 to ~40 words (the smoke run)."""
    import random

    rng = random.Random(0)
    words = "the a movie film story plot actor good bad fun dull long short great terrible said company year".split()

    def say():
        return " ".join(rng.choice(words) for _ in range(rng.randint(4, 20)))

    os.makedirs(f"{root}/MRPC", exist_ok=True)
    for split, m in (("train", n), ("dev", 32)):
        rows = ["\ufeffQuality\t#1 ID\t#2 ID\t#1 String\t#2 String"]
        rows += [f"{rng.randint(0, 1)}\t{i}\t{i + 1}\t{say()}\t{say()}" for i in range(m)]
        with open(f"{root}/MRPC/{split}.tsv", "w", encoding="utf-8") as f:
            f.write("\n".join(rows) + "\n")
    return root


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--teacher", help="fine-tuned MRPC teacher folder")
    p.add_argument("--data-dir", help="GLUE root with MRPC/")
    p.add_argument("--smoke", action="store_true", help="tiny teacher and synthetic data")
    p.add_argument("--json", help="write the results here")
    p.add_argument("--scoring-only", action="store_true", help="only the scoring comparison (no training epochs)")
    p.add_argument("--optimizer-only", action="store_true", help="only per-tensor vs fused AdamW, grouped batches")
    a = p.parse_args()
    from raydistill.config.schema import RunConfig

    torch.set_num_threads(1)
    work = tempfile.mkdtemp(prefix="bench-gbl-")
    teacher, data_dir, train = a.teacher, a.data_dir, {"epochs": 1, "batch_size": 32, "max_length": 128, "lr": 1e-4}
    if a.smoke:
        from raydistill.testing import TinyShape, make_tiny_model

        data_dir = synthetic_mrpc(f"{work}/glue", 320)
        teacher = make_tiny_model(f"{work}/teacher", shape=TinyShape(layers=4, hidden=32, heads=2, intermediate=64))
    if not (teacher and data_dir):
        sys.exit("pass --teacher and --data-dir (or --smoke)")
    cfg = RunConfig.from_dict(
        {
            "task": "mrpc",
            "teacher": teacher,
            "data_dir": data_dir,
            "output": f"{work}/out",
            "teacher_cache": f"{work}/cache",
            "student": half_depth(teacher),
            "distill": {"method": "pkd", "temperature": 20, "alpha": 0.7, "beta": 100, "mapping": "skip"},
            "train": train,
        }
    )
    if a.scoring_only:
        print(f"RATIO scoring in order/by length={compare_scoring(cfg)[1]:.2f}")
        return
    if a.optimizer_only:
        one_epoch(cfg, True)  # builds the teacher cache; untimed
        runs = [one_epoch(cfg, True, f) for f in (False, True, True, False)]
        for r in runs:
            print(
                f"{'fused     ' if r['fused'] else 'per-tensor'} AdamW: train {r['time_train_s']:.1f} s, epoch wall "
                f"{r['wall_s']:.1f} s, val accuracy {r['val_accuracy']:.4f}; load {r['load']}",
                flush=True,
            )
        if a.json:
            with open(a.json, "w") as f:
                json.dump({"machine": machine(), "runs": runs}, f, indent=1)
        med = {f: statistics.median(r["time_train_s"] for r in runs if r["fused"] == f) for f in (False, True)}
        print(f"RATIO per-tensor/fused AdamW train_s={med[False] / med[True]:.2f}")
        return
    one_epoch(cfg, False)  # builds the teacher cache; untimed
    runs = [one_epoch(cfg, g) for g in (False, True, True, False)]
    tok = {g: slots(cfg, g) for g in (False, True)}
    for r in runs:
        print(
            f"{'grouped' if r['grouped'] else 'plain  '}: train {r['time_train_s']:.1f} s, epoch wall "
            f"{r['wall_s']:.1f} s, "
            f"val accuracy {r['val_accuracy']:.4f}; load {r['load']}",
            flush=True,
        )
    for g in (False, True):
        print(
            f"{'grouped' if g else 'plain  '}: {tok[g][0]} padded token slots for {tok[g][1]} real tokens "
            f"({tok[g][0] / tok[g][1]:.2f}x)"
        )
    med = {g: statistics.median(r["time_train_s"] for r in runs if r["grouped"] == g) for g in (False, True)}
    score, score_ratio = compare_scoring(cfg)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(
                {"machine": machine(), "runs": runs, "token_slots": {str(g): tok[g] for g in tok}, "scoring": score},
                f,
                indent=1,
            )
    print(f"RATIO scoring in order/by length={score_ratio:.2f}")
    print(f"RATIO plain/grouped train_s={med[False] / med[True]:.2f} tokens={tok[False][0] / tok[True][0]:.2f}")


if __name__ == "__main__":
    main()
