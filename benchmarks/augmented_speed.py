#!/usr/bin/env python
"""An augmented trial's speed, before and after a change, beside a plain trial, in one run (issue 46, item 1).

Each measurement runs in a fresh subprocess on one code tree (``--before DIR``: a checkout or ``git archive`` of the
code before; this checkout after), alternating before / after so both see the same load:

  data   ``loop.load_data`` of the whole augmented set (what every trial and seed pays before its first step)
  trial  ``loop.run`` in process (what a sweep's 1-worker trial runs), augmented and plain, its ``time_<phase>_s``
         and ``train_examples_per_s``; the teacher cache is warmed first, so a trial measures a seed after the first

    python benchmarks/augmented_speed.py --before /tmp/base --teacher T --data-dir GLUE --augment-dir AUG \\
        --train-limit 500 --max-steps 10 --eval-limit 200 --rounds 2 --work W
    python benchmarks/augmented_speed.py --before . --after-flags=--cpu-bf16 ...   # fp32 vs the bf16 step, one tree
Ends with one ``AUGSPEED …`` line: the median seconds per phase of each tree and configuration.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

from common import loadavg, machine

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PKD = (
    "--method pkd --student-layers 3 --student-hidden 384 --student-intermediate 1536 --student-heads 12 "
    "--init first_k --temperature 20 --alpha 0.7 --beta 100 --mapping skip --lr 1e-4 --batch-size 32"
)

CHILD = r"""
import json, os, sys, time
import torch
torch.set_num_threads(int(os.environ["THREADS"]))
try:
    from raydistill.commands.distill import config_from_args, parser
except ImportError:  # a tree from before the commands moved to commands/ (--before)
    from raydistill.distill.__main__ import config_from_args, parser
from raydistill.train.loop import Context, load_data, run
try:
    from raydistill.teacher.cache import open_cache
    launcher = {"open_cache": open_cache}
except ImportError:  # a tree from before the cache moved to teacher/ (--before): the loop opened it itself
    launcher = {}
from transformers import AutoTokenizer
mode, argv = sys.argv[1], sys.argv[2:]
cfg = config_from_args(parser().parse_args(argv))
t = time.perf_counter()
if mode == "data":
    data = load_data(cfg, AutoTokenizer.from_pretrained(cfg.teacher))
    out = {"rows": len(data.train), "time_data_s": time.perf_counter() - t}
else:
    out = {}
    def report(m, c):  # a staged method's epochs each under their stage's name too (its intermediate is the slow one)
        out.update(m)
        if m.get("stage"):
            out.update({f"{m['stage']}_{k}": m[k] for k in ("train_examples_per_s", "time_train_s") if k in m})
    run(cfg, Context(report=report, **launcher))
    out = {k: v for k, v in out.items() if k.startswith("time_") or k.endswith("train_examples_per_s")}
    out["wall_s"] = time.perf_counter() - t
print("CHILD " + json.dumps(out), flush=True)
"""


def child(tree: str, mode: str, argv: list[str], threads: int) -> dict:
    env = {**os.environ, "PYTHONPATH": tree, "THREADS": str(threads), "HF_HUB_OFFLINE": "1"}
    env.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    env.setdefault("TOKENIZERS_PARALLELISM", "false")
    load = loadavg()
    p = subprocess.run([sys.executable, "-c", CHILD, mode, *argv], env=env, capture_output=True, text=True)
    line = next((ln for ln in p.stdout.splitlines() if ln.startswith("CHILD ")), None)
    if p.returncode or line is None:
        raise SystemExit(f"{mode} on {tree} failed:\n{p.stderr[-3000:]}")
    return {**json.loads(line[6:]), "load": load}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--before", required=True, help="the code before: a folder holding the raydistill package")
    p.add_argument("--teacher", required=True)
    p.add_argument("--data-dir", required=True, help="GLUE folder")
    p.add_argument("--task", default="mrpc")
    p.add_argument("--augment-dir", required=True, help="an augmented set (python -m raydistill.distill.augment)")
    p.add_argument(
        "--train-limit", default="500", help="source rows of the trials (their copies follow); '' for all of them"
    )
    p.add_argument("--max-steps", default="10", help="steps in all, split over the epochs")
    p.add_argument("--epochs", type=int, default=1, help="2 with a staged --recipe: one epoch of each stage")
    p.add_argument("--eval-limit", default="200", help="'' for every dev row")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument(
        "--after-flags",
        default="",
        help="flags only the after tree's trials get, e.g. '--cpu-bf16' (with --before this checkout: one change of "
        "flags measured on one code tree)",
    )
    p.add_argument(
        "--recipe",
        default=PKD,
        help="the trials' method flags (default: pkd_glue's first recipe on a 3L-384 student); e.g. the transfer "
        "benchmark's TinyBERT flags, to time its intermediate stage",
    )
    p.add_argument(
        "--cache-dir",
        help="the teacher cache (default WORK/cache); another run's, to time its built cache (the trials must see "
        "its rows: no --train-limit, or the key differs and a new cache is built)",
    )
    p.add_argument(
        "--fresh-rows",
        action="store_true",
        help="each trial a seed of its own, so it reads rows no trial before it read (a cache's page-cache misses "
        "are then each trial's own)",
    )
    p.add_argument("--work", default="raydistill-results/augmented-speed")
    a = p.parse_args()
    work = os.path.abspath(a.work)
    run_args = [
        *a.recipe.split(),
        *("--teacher", a.teacher, "--task", a.task, "--data-dir", a.data_dir),
        *("--teacher-cache", a.cache_dir or f"{work}/cache"),
    ]
    aug = ["--augment-dir", a.augment_dir]
    limit = ["--train-limit", a.train_limit] if a.train_limit else []  # "": the whole set
    evals = ["--eval-limit", a.eval_limit] if a.eval_limit else []  # it chooses the dev rows: part of a cache's key
    trial = ["--epochs", str(a.epochs), *limit, *evals, "--output", f"{work}/out"]
    trees, after = {"before": os.path.abspath(a.before), "after": HERE}, a.after_flags.split()
    print(json.dumps({"machine": machine(), "load": loadavg(), "args": vars(a)}), flush=True)
    # warm: the teacher caches of both trials and the encoded rows (after), as a sweep's first trial leaves them
    for extra in (aug, []):
        child(HERE, "trial", run_args + extra + trial + ["--max-steps", "1"], a.threads)
    child(HERE, "data", run_args + aug + ["--output", f"{work}/out"], a.threads)
    res: dict[str, list] = {}
    for r in range(a.rounds):
        order = list(trees) if r % 2 == 0 else list(trees)[::-1]
        for name in order:
            m = child(trees[name], "data", run_args + aug + ["--output", f"{work}/out"], a.threads)
            res.setdefault(f"data/{name}", []).append(m)
            print(f"data/{name}", json.dumps(m), flush=True)
        for name, extra in [(f"trial-aug/{t}", aug) for t in order] + [("trial-plain/after", [])]:
            side = name.split("/")[1]
            argv = run_args + extra + trial + ["--max-steps", a.max_steps] + (after if side == "after" else [])
            if a.fresh_rows:  # a seed of its own: its epoch draws other rows, which the trials before it did not read
                argv += ["--seed", str(1000 + sum(map(len, res.values())))]  # counts every measurement so far
            m = child(trees[side], "trial", argv, a.threads)
            res.setdefault(name, []).append(m)
            print(name, json.dumps(m), flush=True)
    summary = {
        k: {f: round(statistics.median(x[f] for x in v), 2) for f in v[0] if f != "load"} for k, v in res.items()
    }
    print(json.dumps({"load_end": loadavg(), "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}))
    print("AUGSPEED " + json.dumps(summary), flush=True)


if __name__ == "__main__":
    main()
