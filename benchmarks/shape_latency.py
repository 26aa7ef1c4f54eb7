#!/usr/bin/env python
"""Which student shapes fit inside a latency bound? Batch-1 latency of a teacher and of students of given shapes
(layers,hidden,intermediate,heads), all PyTorch fp32 in one process, timed in alternating rounds (teacher, s1, s2, …,
then reversed), medians and ratios of medians. Latency does not depend on the weights, so each student is the
teacher's config with its shape changed by the product's ``student_config`` (what ``build_student`` builds),
randomly initialised.

    python benchmarks/shape_latency.py --teacher W/teachers/sst2 --shapes 3,192,768,6 2,384,1536,12 3,384,1536,12

Ends with one `SHAPES teacher_ms=… {shape: ratio to the teacher}` line; a shape within half the teacher's batch-1
latency has a ratio ≤ 0.5.
"""

from __future__ import annotations

import os
import sys

# see benchmarks/step_speed.py: waiting OpenMP threads sleep instead of spinning; set before torch loads
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
# benchmark the checkout this file is in, not whatever raydistill is installed
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import argparse
import json
import time

import torch
from transformers import AutoConfig, AutoModelForSequenceClassification

from raydistill.config.schema import StudentConfig
from raydistill.models.student import student_config


def timed(model, ids, mask) -> float:
    t0 = time.perf_counter()
    model(input_ids=ids, attention_mask=mask)
    return (time.perf_counter() - t0) * 1000


@torch.no_grad()
def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--teacher", required=True, help="a Hugging Face model folder")
    p.add_argument("--shapes", nargs="+", required=True, help="layers,hidden,intermediate,heads per student")
    p.add_argument("--length", type=int, default=128)
    p.add_argument("--rounds", type=int, default=40)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--threads", type=int, default=0, help="torch threads (default: torch's own)")
    a = p.parse_args()
    if a.threads:
        torch.set_num_threads(a.threads)
    tc = AutoConfig.from_pretrained(a.teacher)
    models = {"teacher": AutoModelForSequenceClassification.from_pretrained(a.teacher).eval()}
    for s in a.shapes:
        layers, hidden, inter, heads = (int(x) for x in s.split(","))
        cfg = student_config(tc, StudentConfig(layers=layers, hidden=hidden, intermediate=inter, heads=heads))
        models[f"{layers}L-{hidden}"] = AutoModelForSequenceClassification.from_config(cfg).eval()
    ids = torch.randint(5, tc.vocab_size, (1, a.length))
    mask = torch.ones_like(ids)
    order, times = list(models), {k: [] for k in models}
    for r in range(a.warmup + a.rounds):
        for k in order if r % 2 == 0 else order[::-1]:
            t = timed(models[k], ids, mask)
            if r >= a.warmup:
                times[k].append(t)
    med = {k: sorted(v)[len(v) // 2] for k, v in times.items()}
    params = {k: sum(x.numel() for x in m.parameters()) for k, m in models.items()}
    print(f"threads {torch.get_num_threads()}, length {a.length}, {a.rounds} rounds, load {os.getloadavg()[0]:.2f}")
    for k in models:
        print(
            f"{k:>10}  {params[k] / 1e6:6.1f}M params  {med[k]:7.2f} ms  {med[k] / med['teacher']:.3f} of the teacher"
        )
    ratios = {k: round(med[k] / med["teacher"], 3) for k in models if k != "teacher"}
    print(f"SHAPES teacher_ms={med['teacher']:.2f} {json.dumps(ratios)}")


if __name__ == "__main__":
    main()
