"""Replay a finished sweep's trials under other ASHA settings: what each would have trained, what it would cost in
trials per hour, and which trial it would have exported — from the per-epoch validation scores and epoch times the
sweep logged to MLflow (no training).

    python benchmarks/asha_replay.py --tracking-uri sqlite:///WORK/mlflow.db --experiment quality-mrpc-pkd_glue-search \
        --sweep mrpc-search-42 --metric val_accuracy --settings 2:2,1:2,1:3,off

Trials are replayed in the order they started, ASHA's asynchronous rule as Ray Tune 2.60 applies it (at each rung
grace·rf^k < max_t, stop a trial whose best score so far is below the (1 − 1/rf) quantile of the scores recorded at that
rung before it; never at the last epoch). A trial the real sweep stopped has no scores past that epoch: where a
setting would have kept it going, the replay says so ("unknown") instead of guessing. Trials per hour assumes the
sweep's concurrency and the measured mean seconds per epoch and fixed seconds per trial.
"""

from __future__ import annotations

import argparse
import json
from itertools import pairwise

import numpy as np


def histories(uri: str, experiment: str, sweep: str, metric: str) -> list[dict]:
    from mlflow.tracking import MlflowClient

    c = MlflowClient(uri)
    exp = c.get_experiment_by_name(experiment)
    runs = c.search_runs([exp.experiment_id], f"tags.`raydistill.sweep` = '{sweep}'", max_results=1000)
    out = []
    for r in runs:
        if "raydistill.trial_id" not in r.data.tags or r.data.tags.get("raydistill.confirm_of"):
            continue  # the parent, and confirmation runs (not part of the search ASHA judged)
        vals = {int(m.step): m.value for m in c.get_metric_history(r.info.run_id, metric)}
        ends = sorted((int(m.step), m.timestamp) for m in c.get_metric_history(r.info.run_id, "epoch"))
        stamps = [r.info.start_time] + [t for _, t in ends]
        out.append(
            {
                "trial": r.data.tags["raydistill.trial_id"],
                "start": r.info.start_time,
                "scores": vals,
                "epoch_s": [(b - a) / 1000 for a, b in pairwise(stamps[1:])],
                "first_s": (stamps[1] - stamps[0]) / 1000 if len(stamps) > 1 else None,
            }
        )
    return sorted(out, key=lambda t: t["start"])


def replay(trials: list[dict], grace: int | None, rf: int, max_t: int) -> dict:
    rungs = [] if grace is None else sorted({grace * rf**k for k in range(10) if grace * rf**k < max_t})
    recorded = {m: [] for m in rungs}
    spent, unknown, reached = 0, [], []
    for t in trials:
        best, epoch = -np.inf, 0
        for e in range(1, max_t + 1):
            if e not in t["scores"]:
                unknown.append(t["trial"])
                epoch = max_t if not rungs else epoch  # no ASHA: it would have trained every epoch
                break
            epoch, best = e, max(best, t["scores"][e])
            if e in recorded:
                rec = recorded[e]
                stop = len(rec) > 0 and best < np.nanpercentile(rec, (1 - 1 / rf) * 100)
                rec.append(best)
                if stop:
                    break
        else:
            reached.append((best, t["trial"]))
        spent += epoch
    return {
        "epochs": spent,
        "epochs_per_trial": spent / len(trials),
        "unknown": unknown,
        "finished": len(reached),
        "winner": max(reached)[1] if reached else None,
        "winner_val": max(reached)[0] if reached else None,
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tracking-uri", required=True)
    p.add_argument("--experiment", required=True)
    p.add_argument("--sweep", required=True)
    p.add_argument("--metric", default="val_accuracy")
    p.add_argument("--max-t", type=int, default=4, help="epochs per trial")
    p.add_argument("--concurrency", type=int, default=2)
    p.add_argument("--settings", default="2:2,1:2,1:3,off", help="grace:reduction_factor pairs, or off")
    a = p.parse_args()
    trials = histories(a.tracking_uri, a.experiment, a.sweep, a.metric)
    epoch_s = float(np.mean([s for t in trials for s in t["epoch_s"]]))
    first_s = float(np.mean([t["first_s"] for t in trials if t["first_s"]]))
    fixed_s = max(first_s - epoch_s, 0.0)  # start, data, model, first eval: what the first epoch costs beyond the rest
    at1 = [t["scores"].get(1) for t in trials]
    print(
        f"{len(trials)} trials; mean epoch {epoch_s:.0f} s, fixed {fixed_s:.0f} s per trial; epoch-1 {a.metric}: "
        f"{sorted(round(v, 4) for v in at1 if v is not None)}"
    )
    rows = []
    for s in a.settings.split(","):
        grace, rf = (None, 2) if s == "off" else map(int, s.split(":"))
        r = replay(trials, grace, rf, a.max_t)
        r["setting"], r["trials_per_hour"] = s, a.concurrency * 3600 / (r["epochs_per_trial"] * epoch_s + fixed_s)
        rows.append(r)
        print(
            f"asha {s:>5}: {r['epochs_per_trial']:.2f} epochs per trial -> {r['trials_per_hour']:.1f} trials/h; "
            f"{r['finished']} known to reach epoch {a.max_t}, best of them {r['winner']} (val {r['winner_val']}); "
            f"{len(r['unknown'])} unknown (the real sweep stopped them sooner)",
            flush=True,
        )
    print(json.dumps({"trials": len(trials), "epoch_s": epoch_s, "fixed_s": fixed_s, "rows": rows}))


if __name__ == "__main__":
    main()
