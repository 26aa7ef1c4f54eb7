#!/usr/bin/env python
"""Reading a teacher cache that outgrows the page cache: the memory map before vs ``RowFile``'s reads now.

TinyBERT's intermediate stage reads every example's full-sequence hidden states and attention scores from the cache
(``TeacherCache.outputs``). Before 5c47f85 those rows were slices of a memory map; now ``RowFile`` reads each example's
rows with one ``pread``, the file's readahead off. This script reads batches of random examples from one built cache
both ways, alternating (round 1: map first; round 2: pread first), each on examples of its own (no batch is read
twice), through the same ``outputs`` call the loop makes, and prints per way: seconds per batch, the bytes the batches
hold, and the bytes this process made the disk read (``/proc/self/io`` read_bytes: page-cache misses, readahead
included; other processes' reads are not in it). Ends with ``CACHEREADS {…}``.

    python benchmarks/cache_reads.py --cache CACHE_DIR/KEY --batches 20 --batch-size 32 --rounds 2

What is resident in the page cache when it starts (other runs reading the same cache) changes both ways' misses: say
what ran beside it.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from types import SimpleNamespace

import numpy as np
import torch

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, HERE)

from benchmarks.common import machine  # noqa: E402
from raydistill.teacher.cache import TeacherCache  # noqa: E402


class MapRows:
    """The read before 5c47f85: the rows as slices of the array's memory map."""

    def __init__(self, path: str):
        self.map = np.load(path, mmap_mode="r")
        self.shape = self.map.shape

    def take(self, ranges) -> np.ndarray:
        return np.concatenate([np.array(self.map[int(a) : int(b)]) for a, b in ranges])


def read_bytes() -> int:
    with open("/proc/self/io") as f:
        return int(next(line for line in f if line.startswith("read_bytes:")).split()[1])


def open_cache(path: str) -> TeacherCache:
    root, key = os.path.split(os.path.abspath(path))
    with open(os.path.join(path, "meta.json")) as f:
        meta = json.load(f)
    cache = TeacherCache(root, key, meta["kind"])
    cache.layers = meta["layers"]
    return cache._map()


def measure(cache: TeacherCache, way: str, batches: list, needs) -> dict:
    rows = cache.rows
    if way == "map":
        cache.rows = {k: MapRows(r.path) for k, r in rows.items()}  # [CLS] states and logits too, as before
    off, hidden = cache.arrays["offsets"], cache.arrays["cls"].shape[-1]
    try:
        held, b0, t0 = 0, read_bytes(), time.perf_counter()
        for idx in batches:
            L = int(max(off[i + 1] - off[i] for i in idx))
            out = cache.outputs(list(idx), {"input_ids": torch.zeros(len(idx), L, dtype=torch.long)}, needs)
            n = np.array([off[i + 1] - off[i] for i in idx], dtype=np.int64)  # real tokens: what the rows hold
            full = sum(h.shape[1] > 1 for h in out.hidden)
            held += 2 * (full * int(n.sum()) * hidden + len(out.scores) * cache.heads * int((n * n).sum()))  # fp16
        seconds, disk = time.perf_counter() - t0, read_bytes() - b0
    finally:
        cache.rows = rows
    return {"way": way, "s_per_batch": seconds / len(batches), "rows_mb": held / 1e6, "disk_mb": disk / 1e6}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    ap.add_argument("--cache", required=True, help="a built teacher cache's folder (CACHE_DIR/KEY)")
    ap.add_argument("--batches", type=int, default=20)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args(argv)
    cache = open_cache(a.cache)
    needs = SimpleNamespace(
        teacher_full=True, teacher_hidden=frozenset(cache.hidden_layers), teacher_att=frozenset(cache.att_layers)
    )
    n = len(cache.arrays["offsets"]) - 1
    draw = np.random.default_rng(a.seed).permutation(n)  # every batch its own examples
    need = 2 * a.rounds * a.batches * a.batch_size
    assert need <= n, f"{need} examples asked of a cache of {n}"
    batches = draw[:need].reshape(2 * a.rounds, a.batches, a.batch_size)
    print(
        json.dumps(
            {
                "machine": machine(),
                "cache": a.cache,
                "examples": n,
                "hidden": sorted(cache.hidden_layers),
                "att": sorted(cache.att_layers),
            }
        )
    )
    results: dict[str, list] = {"map": [], "pread": []}
    for r in range(a.rounds):
        order = ("map", "pread") if r % 2 == 0 else ("pread", "map")
        for j, way in enumerate(order):
            res = measure(cache, way, list(batches[2 * r + j]), needs)
            res["round"] = r + 1
            print(json.dumps(res))
            results[way].append(res)
    summary = {
        w: {k: statistics.median(x[k] for x in v) for k in ("s_per_batch", "rows_mb", "disk_mb")}
        for w, v in results.items()
    }
    summary["speedup"] = summary["map"]["s_per_batch"] / summary["pread"]["s_per_batch"]
    print("CACHEREADS " + json.dumps(summary))


if __name__ == "__main__":
    main()
