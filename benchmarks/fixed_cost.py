"""Benchmark: a trial's fixed cost (its seconds outside training steps) as the trials run at once grow, per
tracking store (issue 49, item 1).

The same tiny sweep (kd_glue, a random-weight 4L-32 teacher, a 2L-32 student, in-process trials, ASHA, confirmation
and the labels-only control off, the teacher cache warm) is run with 1, 2, 4, 8 trials at once, each slot running
two trials (so every level has a cold first wave and a warm second), the machine's CPUs split over the slots
(``--cpus-per-worker CPUS/N``), against each tracking store:
  * sqlite            an SQLite file the trials write directly (the local default)
  * server-sqlite     ``mlflow server`` on 127.0.0.1 over an SQLite file, the trials logging over HTTP
  * server-postgres   ``mlflow server`` over a PostgreSQL database of its own (Debian's package; skipped with one
                      line where it cannot start)
Each sweep is its own ``python -m raydistill.sweep`` (its own local Ray), one after another, nothing else started
by the benchmark beside it. Per sweep it prints the median per trial of ``fixed_cost_s`` (the trial's wall minus its
training steps, as every trial logs it) and of each phase the trials log, and the sweep's overhead per trial (its
tuning wall x slots minus the trials' training seconds, over the trials: what Tune's own start adds). Ends with
``RATIO store=… fixed_cost N/1=…`` lines (the target: <= 1.5 at 8 at once).

    python benchmarks/fixed_cost.py                       # 1,2,4,8 x the three stores
    python benchmarks/fixed_cost.py --smoke               # 1 and 2 at once, SQLite only: the plumbing
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from common import loadavg, machine
from sweep_cache import sweep_setup

PHASES = ("time_trial_start_s", "time_models_s", "time_data_s", "time_cache_s", "time_eval_s", "time_latency_s")
PHASES += ("time_checkpoint_s", "time_between_s", "time_run_start_s", "time_export_s")
STORES = ("sqlite", "server-sqlite", "server-postgres")


@contextlib.contextmanager
def store(kind: str, work: str):
    """The tracking URI of ``kind``, its server (and database) up for the ``with`` block."""
    sys.path.insert(0, os.path.join(HERE, "..", "tests"))
    from servers import mlflow_server, postgres

    if kind == "sqlite":
        yield f"sqlite:///{work}/{kind}.db"
    elif kind == "server-sqlite":
        with mlflow_server(f"sqlite:///{work}/{kind}.db", f"{work}/{kind}") as url:
            yield url
    else:
        with postgres() as pg, mlflow_server(pg, f"{work}/{kind}") as url:
            yield url


def sweep(work: str, common: list[str], uri: str, n: int, trials: int, label: str) -> dict:
    """One sweep of ``trials`` trials, ``n`` at once: its JSON line, with the wall of its command."""
    cpus = max(0.25, (os.cpu_count() or 1) / n)
    cmd = [sys.executable, "-m", "raydistill.sweep", *common, "--tracking-uri", uri, "--name", label]
    cmd += ["--num-samples", str(trials), "--max-concurrent", str(n), "--cpus-per-worker", f"{cpus:g}"]
    print("$ " + " ".join(cmd[1:]), file=sys.stderr, flush=True)
    t0 = time.perf_counter()
    p = subprocess.run(cmd, cwd=work, capture_output=True, text=True, env={**os.environ, "RAY_ADDRESS": ""})
    if p.returncode:
        sys.exit(f"sweep {label} failed ({p.returncode}):\n{p.stderr[-4000:]}")
    return {"command_s": time.perf_counter() - t0, **json.loads(p.stdout.strip().splitlines()[-1])}


def trial_metrics(uri: str, parent: str) -> list[dict]:
    """Each trial's last logged values (its MLflow child runs)."""
    from raydistill.tracking.track import Tracker

    c = Tracker(uri).client
    exp = c.get_run(parent).info.experiment_id
    return [r.data.metrics for r in c.search_runs([exp], f"tags.mlflow.parentRunId = '{parent}'")]


def row(kind: str, n: int, out: dict, trials: list[dict]) -> dict:
    keys = ("fixed_cost_s", "fixed_cpu_s", "trial_wall_s", *PHASES)
    med = {k: statistics.median(t.get(k, 0.0) for t in trials) for k in keys}
    med["reused"] = sum(t.get("worker_trials", 1) > 1 for t in trials)  # trials trained by an actor used before
    train = sum(t.get("time_train_s", 0.0) for t in trials)
    overhead = (out["wall_s"] * n - train) / max(len(trials), 1)  # slots x tuning wall, less the training steps
    return {"store": kind, "at_once": n, "trials": len(trials), "wall_s": out["wall_s"], **med, "overhead_s": overhead}


def show(r: dict) -> None:
    parts = ", ".join(f"{k[5:-2]} {r[k]:.2f}" for k in PHASES)
    print(
        f"{r['store']} x{r['at_once']}: {r['trials']} trials ({r['reused']} in a reused actor), tuning "
        f"{r['wall_s']:.1f} s; per trial (median) fixed cost {r['fixed_cost_s']:.2f} s of {r['trial_wall_s']:.2f} s, "
        f"{r['fixed_cpu_s']:.2f} CPU s ({parts}); sweep overhead per trial "
        f"{r['overhead_s']:.2f} s; load {loadavg()}",
        flush=True,
    )


def common_args(a, work: str) -> list[str]:
    data, teacher, size, examples, length = sweep_setup(None, work, 64, True)
    sets = ["student.init=random", "search.asha=false", "search.confirm=false", "search.control=false"]
    out = ["kd_glue", "--task", "sst2", "--data-dir", data, "--teacher", teacher, "--set", f"student.size={size}"]
    for s in sets:
        out += ["--set", s]
    out += ["--epochs", str(a.epochs), "--train-limit", str(examples), "--eval-limit", "32"]
    out += ["--max-length", str(length), "--batch-size", "16", "--teacher-cache", f"{work}/cache"]
    return out + ["--storage-path", f"{work}/ray"]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--at-once", default="1,2,4,8", help="trials at once, one sweep each")
    p.add_argument("--stores", default=",".join(STORES), help=f"of {', '.join(STORES)}")
    p.add_argument("--per-slot", type=int, default=2, help="trials each slot runs (a sweep: at-once x this)")
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--json", help="write the rows here")
    p.add_argument("--smoke", action="store_true", help="1 and 2 at once, SQLite only, one trial a slot")
    a = p.parse_args()
    if a.smoke:
        a.at_once, a.stores, a.per_slot = "1,2", "sqlite", 1
    work = tempfile.mkdtemp(prefix="bench-fixed-cost-")
    os.environ["RAYDISTILL_CACHE_DIR"] = f"{work}/memo"  # latency memo shared by the sweeps, like a user's
    common = common_args(a, work)
    levels = [int(x) for x in a.at_once.split(",")]
    rows: list[dict] = []
    for kind in a.stores.split(","):
        try:
            with store(kind, work) as uri:
                sweep(work, common, uri, 1, 1, f"{kind}-warm")  # the teacher cache and latency memo: untimed
                for n in levels:
                    out = sweep(work, common, uri, n, n * a.per_slot, f"{kind}-x{n}")
                    rows.append(row(kind, n, out, trial_metrics(uri, out["parent_run_id"])))
                    show(rows[-1])
        except Exception as e:  # a store that cannot start here (servers.Unavailable): said, the others go on
            if type(e).__name__ != "Unavailable":
                raise
            print(f"{kind}: skipped: {e}", flush=True)
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"machine": machine(), "rows": rows}, f, indent=1)
    for kind in a.stores.split(","):
        mine = {r["at_once"]: r for r in rows if r["store"] == kind}
        for n in levels[1:]:
            if 1 in mine and n in mine:
                print(
                    f"RATIO store={kind} fixed_cost {n}/1={mine[n]['fixed_cost_s'] / mine[1]['fixed_cost_s']:.2f} "
                    f"fixed_cpu {n}/1={mine[n]['fixed_cpu_s'] / max(mine[1]['fixed_cpu_s'], 1e-9):.2f} "
                    f"overhead {n}/1={mine[n]['overhead_s'] / mine[1]['overhead_s']:.2f}"
                )


if __name__ == "__main__":
    main()
