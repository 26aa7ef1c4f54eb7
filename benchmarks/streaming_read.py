#!/usr/bin/env python
"""A large JSON Lines file read before and after a change (issue 48, item 1): peak memory, seconds and how often the
file is opened and read, from the command's first look at the columns to the training rows encoded.

Each measurement runs in a fresh subprocess on one code tree (``--before DIR``: a checkout of the code before; this
checkout after), alternating before / after so both see the same load. In each, after the imports and the tokenizer
(the baseline; the peak-RSS counter is reset there, ``/proc/self/clear_refs``):

  columns    ``readers.columns_of`` (what ``data summary`` and column guessing read first)
  resolve    ``RunConfig.from_dict`` with ``--train-file``: columns guessed, labels, kind, the files' fingerprint
  params     ``data_fingerprint`` (a run's params) and ``datasets`` (its MLflow dataset inputs)
  rows       ``train_val_dev`` (the training, validation and dev rows its training reads)
  encoded    ``tasks.encode.encode`` of the training rows (max length 128): the arrays a first step needs

and per phase its seconds, the peak RSS growth over the baseline so far, the RSS growth held at its end, and the file's
opens and bytes read (``/proc/self/io`` rchar: every read, the file's being nearly all of them). The encoded arrays'
size (the target's yardstick) is their token ids, masks and segment ids as int64; where the features are flat
(``tasks.encode.FlatFeatures``) the bytes they hold are given too. Ends with ``STREAMREAD {…}`` (medians per tree).
The machine's load is printed beside the seconds: on a shared machine they are no clean speed measurement; the memory
and the reads are.

    python benchmarks/streaming_read.py --before /tmp/before --tokenizer MODEL_DIR --glue GLUE --rows 400000
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PHASES = ("columns", "resolve", "params", "rows", "encoded")


def make_file(glue: str, rows: int, path: str) -> None:
    """``rows`` JSON Lines records (sentence, label named) repeating SST-2's training rows in order."""
    with open(os.path.join(glue, "SST-2", "train.tsv"), encoding="utf-8") as f:
        src = [line.rstrip("\n").split("\t") for line in f][1:]
    with open(path, "w", encoding="utf-8") as f:
        for i in range(rows):
            text, label = src[i % len(src)]
            f.write(json.dumps({"id": i, "sentence": text.strip(), "label": ("negative", "positive")[int(label)]}))
            f.write("\n")


def _status(key: str) -> int:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith(key))


def _rchar() -> int:
    with open("/proc/self/io") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("rchar"))


def child(path: str, tokenizer_dir: str, workdir: str) -> dict:
    """One measurement in this process (the code tree is whichever ``raydistill`` PYTHONPATH gives)."""
    import builtins
    import io

    from transformers import AutoTokenizer

    import raydistill
    from raydistill.config.schema import RunConfig, task_of
    from raydistill.data.splits import data_fingerprint, datasets, train_val_dev
    from raydistill.tasks.encode import encode
    from raydistill.tasks.readers import columns_of

    tok = AutoTokenizer.from_pretrained(tokenizer_dir)
    os.chdir(workdir)  # the carve's cache (raydistill-results/splits) written here, fresh per measurement
    opens: list[str] = []
    real = builtins.open

    def counting(file, mode="r", *args, **kwargs):
        if str(file) == path:
            opens.append(mode)
        return real(file, mode, *args, **kwargs)

    builtins.open = io.open = counting
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # the peak RSS from here
    base, t0, r0 = _status("VmRSS"), time.perf_counter(), _rchar()
    out: dict = {"tree": os.path.dirname(os.path.dirname(raydistill.__file__)), "phases": {}}

    def mark(name: str) -> None:
        out["phases"][name] = {
            "s": round(time.perf_counter() - t0, 2),
            "peak_growth_mb": round((_status("VmHWM") - base) / 2**20, 1),
            "held_growth_mb": round((_status("VmRSS") - base) / 2**20, 1),
            "opens": len(opens),
            "read_mb": round((_rchar() - r0) / 2**20, 1),
        }

    columns_of(path, "data.train_file")
    mark("columns")
    cfg = RunConfig.from_dict({"teacher": "-", "data": {"train_file": path}})
    mark("resolve")
    data_fingerprint(cfg), datasets(cfg)
    mark("params")
    task = task_of(cfg)
    train, _, _ = train_val_dev(cfg, task)
    mark("rows")
    enc = encode(task, train, tok, 128)
    mark("encoded")
    tokens = sum(len(f["input_ids"]) for f in enc.features)
    out["encoded_arrays_mb"] = round(tokens * 3 * 8 / 2**20, 1)
    flat = getattr(enc.features, "columns", None)  # flat features (FlatFeatures): the bytes they hold
    if flat is not None:
        held = sum(c.nbytes for c in flat.values()) + enc.features.offsets.nbytes + enc.features.labels.nbytes
        out["encoded_held_mb"] = round(held / 2**20, 1)
    out["train_rows"], out["opens"] = len(train), opens
    return out


def measure(tree: str, path: str, tokenizer_dir: str) -> dict:
    env = {**os.environ, "PYTHONPATH": tree, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    with tempfile.TemporaryDirectory() as work:
        argv = [sys.executable, os.path.abspath(__file__), "--child", path, "--tokenizer", tokenizer_dir]
        argv += ["--work", work]
        p = subprocess.run(argv, env=env, capture_output=True, text=True)
    if p.returncode:
        raise SystemExit(f"child failed ({tree}):\n{p.stderr[-3000:]}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def _load() -> str:
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--before", help="the code before: a folder holding the raydistill package")
    p.add_argument("--tokenizer", required=True, help="a local model folder whose tokenizer encodes the rows")
    p.add_argument("--glue", help="a GLUE folder (SST-2/train.tsv): the file is made from its rows")
    p.add_argument("--rows", type=int, default=400_000)
    p.add_argument("--file", default="", help="the JSON Lines file (made here from --glue when absent)")
    p.add_argument("--rounds", type=int, default=2, help="before/after pairs, alternating")
    p.add_argument("--child", help=argparse.SUPPRESS)
    p.add_argument("--work", help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.child:
        print(json.dumps(child(a.child, a.tokenizer, a.work)))
        return
    path = os.path.abspath(a.file or os.path.join(tempfile.gettempdir(), f"stream-{a.rows}.jsonl"))
    if not os.path.isfile(path):
        make_file(a.glue, a.rows, path)
    print(f"file {path}: {a.rows} rows, {os.path.getsize(path) / 2**20:.1f} MB")
    trees = {"before": os.path.abspath(a.before), "after": HERE} if a.before else {"after": HERE}
    got: dict[str, list] = {k: [] for k in trees}
    for r in range(a.rounds):
        for name, tree in trees.items() if r % 2 == 0 else reversed(trees.items()):
            load = _load()
            m = measure(tree, path, a.tokenizer)
            m["loadavg"] = load
            got[name].append(m)
            print(name, json.dumps(m), flush=True)
    summary = {
        name: {
            "encoded_arrays_mb": runs[0]["encoded_arrays_mb"],
            "encoded_held_mb": runs[0].get("encoded_held_mb"),
            **{
                ph: {k: statistics.median(m["phases"][ph][k] for m in runs) for k in runs[0]["phases"][ph]}
                for ph in PHASES
            },
        }
        for name, runs in got.items()
    }
    print("STREAMREAD " + json.dumps(summary))


if __name__ == "__main__":
    main()
