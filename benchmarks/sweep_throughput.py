"""Benchmark: trials per hour of the same sweep with the package's defaults vs one trial at a time on one CPU.

Each sweep is its own `python -m raydistill.sweep` command (its own local Ray), side by side in one run, the teacher
cache warm (a first, untimed sweep builds it), ASHA off so every trial runs every epoch, no labels-only control:
  * baseline      --max-concurrent 1 --cpus-per-worker 1 --ray-train-trials   (the old defaults: one trial at a
                  time on one CPU, on Ray Train; one core idle on 2 cores)
  * default       no flags: as many trials at once as the CPUs hold, 1 CPU (and torch thread) each, each trial
                  training in its Tune trial process (no Ray Train start)
  * serial        --max-concurrent 1 --cpus-per-worker 1: the baseline without Ray Train's start (that lever alone)
  * 1x{N}threads  --cpus-per-worker N (N = every CPU): one trial at a time on every thread
12L-768 teacher (random weights) → 4L-312 student, SST-2 train examples at length 64, 2 epochs per trial.

    python benchmarks/sweep_throughput.py --data-dir ../shared/data/glue
    python benchmarks/sweep_throughput.py --smoke            # tiny models and data, baseline and default only
Prints per sweep: wall (command and tuning), trials/hour, mean per-trial fixed cost (trial wall minus its training
steps, from MLflow) with its phases; then `RATIO` lines, `default/baseline` last.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(__file__))
from common import loadavg, machine
from sweep_cache import sweep_setup

PHASES = (
    "time_models_s",
    "time_data_s",
    "time_cache_s",
    "time_eval_s",
    "time_latency_s",
    "time_checkpoint_s",
    "time_between_s",
    "time_train_s",
)


def run_sweep(work: str, common: list[str], label: str, extra: list[str]) -> dict:
    cmd = [sys.executable, "-m", "raydistill.sweep", *common, *extra, "--name", f"tp-{label}"]
    print("$ " + " ".join(cmd[1:]), file=sys.stderr, flush=True)
    t0 = time.perf_counter()
    p = subprocess.run(cmd, cwd=work, capture_output=True, text=True, env={**os.environ, "RAY_ADDRESS": ""})
    wall = time.perf_counter() - t0
    if p.returncode:
        sys.exit(f"sweep {label} failed ({p.returncode}):\n{p.stderr[-4000:]}")
    out = json.loads(p.stdout.strip().splitlines()[-1])
    return {"label": label, "command_s": wall, **out}


def trial_phases(uri: str, parent: str) -> dict:
    """Mean seconds per phase over the sweep's trials (their MLflow child runs' last values)."""
    from raydistill.tracking.track import Tracker

    c = Tracker(uri).client
    run = c.get_run(parent)
    kids = c.search_runs([run.info.experiment_id], f"tags.mlflow.parentRunId = '{parent}'")
    keys = ("trial_wall_s", "fixed_cost_s", *PHASES)
    return {k: sum(r.data.metrics.get(k, 0.0) for r in kids) / max(len(kids), 1) for k in keys}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data-dir", help="GLUE folder with SST-2 (default: synthetic)")
    p.add_argument("--smoke", action="store_true", help="tiny teacher, student and data")
    p.add_argument("--trials", type=int, default=4)
    p.add_argument("--examples", type=int, default=512)
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--json", help="write the results here")
    a = p.parse_args()
    from raydistill.orchestrate.resources import Cluster

    work = tempfile.mkdtemp(prefix="bench-throughput-")
    data, teacher, size, examples, length = sweep_setup(
        a.data_dir and os.path.abspath(a.data_dir), work, a.examples, a.smoke
    )
    os.environ["RAYDISTILL_CACHE_DIR"] = f"{work}/memo"  # latency memo shared by the sweeps, like a user's
    uri = f"sqlite:///{work}/m.db"
    common = [
        "kd_glue",
        "--task",
        "sst2",
        "--data-dir",
        data,
        "--teacher",
        teacher,
        "--set",
        f"student.size={size}",
        "--set",
        "student.init=random",
        "--set",
        "search.asha=false",
        "--set",
        "search.confirm=false",
        "--set",
        "search.control=false",  # trials per hour of the search itself, as before the control (issue 46) existed
        "--epochs",
        str(a.epochs),
        "--train-limit",
        str(examples),
        "--eval-limit",
        "64",
        "--max-length",
        str(length),
        "--batch-size",
        "32",
        "--tracking-uri",
        uri,
        "--teacher-cache",
        f"{work}/cache",
        "--storage-path",
        f"{work}/ray",
    ]
    cpus = int(Cluster.local().cpus)
    serial = ["--max-concurrent", "1", "--cpus-per-worker", "1"]
    sweeps = [("baseline", [*serial, "--ray-train-trials"]), ("default", [])]
    if not a.smoke:  # the smoke run (tests) checks the plumbing with the two sweeps of the last ratio only
        run_sweep(work, common + ["--num-samples", "1"], "warm-up", ["--max-concurrent", "1"])  # cache + memo, untimed
        sweeps += [("serial", serial), (f"1x{cpus}threads", ["--cpus-per-worker", str(cpus)])]
    rows = []
    for label, extra in sweeps:
        r = run_sweep(work, common + ["--num-samples", str(a.trials)], label, extra)
        r.update(trial_phases(uri, r["parent_run_id"]))
        r["trials_per_hour"] = r["trials"] / r["wall_s"] * 3600
        rows.append(r)
        print(
            f"{label}: {r['trials']} trials, {r.get('concurrency')} at once, tuning {r['wall_s']:.1f} s "
            f"(command {r['command_s']:.1f} s), {r['trials_per_hour']:.0f} trials/h, per trial {r['trial_wall_s']:.1f} "
            f"s "
            f"of which training {r['time_train_s']:.1f} s, fixed cost {r['fixed_cost_s']:.1f} s "
            f"({', '.join(f'{k[5:-2]} {r[k]:.2f}' for k in PHASES[:-1])}); load {loadavg()}",
            flush=True,
        )
    by = {r["label"]: r for r in rows}
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"machine": machine(), "rows": rows}, f, indent=1, default=str)
    if f"1x{cpus}threads" in by:
        print(
            f"RATIO default/1x{cpus}threads="
            f"{by['default']['trials_per_hour'] / by[f'1x{cpus}threads']['trials_per_hour']:.2f}"
            "  (trials per hour: N trials x 1 CPU vs 1 trial x N threads)"
        )
    if "serial" in by:
        print(
            f"RATIO serial/baseline={by['serial']['trials_per_hour'] / by['baseline']['trials_per_hour']:.2f}"
            "  (trials per hour: in-process trials vs Ray Train trials, one at a time on one CPU)"
        )
    print(
        f"RATIO default/baseline={by['default']['trials_per_hour'] / by['baseline']['trials_per_hour']:.2f}"
        "  (trials per hour: the default concurrency vs the old defaults)"
    )


if __name__ == "__main__":
    main()
