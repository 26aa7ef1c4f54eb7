"""A sweep's end: one row per trial (DONE, STOPPED by ASHA, ERROR with its reason), the summary table, JSON and Pareto
plot logged to the parent MLflow run, and the one-line JSON result."""
from __future__ import annotations

import json
import os
import sys

from .errors import failure_reason
from .track import RESULTS_DIR


def summarize(results, metric: str, mode: str, epochs: int, logged: dict | None = None) -> list[dict]:
    """One row per trial: DONE (all epochs), STOPPED (by ASHA) or ERROR (with the reason). ``logged`` (trial id →
    the MLflow child run's metrics) wins over Tune's last result, which is stale for a trial resumed after its end."""
    rows = []
    for r in results:
        cfg, m = r.config or {}, dict(r.metrics or {})
        m.update((logged or {}).get(m.get("trial_id"), {}))
        status = "ERROR" if r.error else "DONE" if (m.get("epoch") or 0) >= epochs else "STOPPED"
        rows.append({"trial": m.get("trial_id") or os.path.basename(r.path or "")[-8:], "status": status,
                     metric: m.get(metric), "epoch": m.get("epoch"), "student_params": m.get("student_params"),
                     "latency_ms_b1": m.get("latency_ms_b1"), "latency_ms_b32": m.get("latency_ms_b32"),
                     "trial_wall_s": m.get("trial_wall_s"), "fixed_cost_s": m.get("fixed_cost_s"),
                     **{k: v for k, v in cfg.items()},
                     "error": failure_reason(r.error)[:160] if r.error else ""})
    sign = -1 if mode == "max" else 1
    rows.sort(key=lambda r: (r[metric] is None, sign * (r[metric] or 0)))
    return rows


def _mean(values) -> float | None:
    vs = [v for v in values if v is not None]
    return round(sum(vs) / len(vs), 2) if vs else None


def teacher_score(teacher: dict | None, metric: str) -> float | None:
    """The teacher's value of a trial objective (``best_eval_x`` is scored as ``eval_x``)."""
    if not teacher:
        return None
    return teacher.get(metric[len("best_"):] if metric.startswith("best_") else metric)


def against_teacher(rows: list[dict], metric: str, teacher: dict | None) -> None:
    """Each row's ``pct_of_teacher`` (objective ÷ the teacher's, in %) and ``speedup_b1`` (teacher latency ÷ its own)."""
    score = teacher_score(teacher, metric)
    for r in rows:
        if score and r.get(metric) is not None:
            r["pct_of_teacher"] = round(100.0 * r[metric] / score, 1)
        if teacher and r.get("latency_ms_b1"):
            r["speedup_b1"] = round(teacher["latency_ms_b1"] / r["latency_ms_b1"], 2)


def mark_front(rows: list[dict], metric: str, mode: str, cost: str) -> list[dict]:
    """Set ``pareto`` on every row (True: no other trial is at least as good and at most as costly in ``cost``); returns
    the front, cheapest first."""
    from .report import pareto_front

    done = [r for r in rows if r.get(metric) is not None and r.get(cost) is not None]
    front = {id(done[i]) for i in pareto_front([(r[cost], r[metric]) for r in done], maximize_y=mode == "max")}
    for r in rows:
        r["pareto"] = id(r) in front
    return sorted((r for r in done if r["pareto"]), key=lambda r: r[cost])


def finish(rows, metric, mode, base, parent, storage, name, wall, n_samples, log, n_at_once=1,
           teacher: dict | None = None, front_by: str = "latency_ms_b1", run_ids: dict | None = None) -> dict:
    from . import track
    from .report import PARAMS, SHOW, pareto_plot, table

    out_dir = os.path.join(os.path.abspath(RESULTS_DIR), "sweeps", name)
    os.makedirs(out_dir, exist_ok=True)
    against_teacher(rows, metric, teacher)
    front = mark_front(rows, metric, mode, front_by)
    cols = ["trial", "status", metric] + (["pct_of_teacher"] if teacher_score(teacher, metric) else []) + \
        ["epoch", "student_params", "latency_ms_b1"] + (["speedup_b1"] if teacher else []) + ["pareto"] + \
        [k for k in SHOW if any(r.get(k) is not None for r in rows)] + ["error"]
    text = table(rows, cols)
    with open(os.path.join(out_dir, "summary.txt"), "w") as f:
        f.write(text + "\n")
    with open(os.path.join(out_dir, "summary.json"), "w") as f:
        json.dump(rows, f, indent=1, default=str)
    front_cols = ["trial", metric, "pct_of_teacher", front_by, "student_params" if front_by != "student_params"
                  else "latency_ms_b1", "speedup_b1"] + [k for k in SHOW if any(r.get(k) is not None for r in front)]
    with open(os.path.join(out_dir, "pareto_front.txt"), "w") as f:
        f.write(f"Pareto front: {metric} vs {front_by}, cheapest first\n" + table(front, front_cols) + "\n")
    png = pareto_plot(rows, metric, os.path.join(out_dir, "pareto.png"), maximize=mode == "max",
                      teacher={**teacher, metric: teacher_score(teacher, metric)} if teacher else None)
    for p in (os.path.join(out_dir, "summary.txt"), os.path.join(out_dir, "summary.json"),
              os.path.join(out_dir, "pareto_front.txt"), png):
        if p:
            track.log_artifact(base.tracking_uri, parent, p, "summary")
    track.close_children(base.tracking_uri, base.experiment, parent)
    done = [r for r in rows if r.get(metric) is not None]
    best = done[0] if done else None
    summary = {"sweep": name, "trials": len(rows), "errors": sum(r["status"] == "ERROR" for r in rows),
               "wall_s": round(wall, 1), "per_trial_s": round(wall / max(len(rows), 1), 1), "metric": metric,
               "fixed_cost_s": _mean(r.get("fixed_cost_s") for r in rows), "concurrency": n_at_once,
               "best": {k: best.get(k) for k in ["trial", metric, "pct_of_teacher", "student_params", "latency_ms_b1",
                                                 "speedup_b1", *SHOW] if k in best}
               if best else None, "pareto_front": [{k: r.get(k) for k in front_cols} for r in front],
               "teacher": teacher, "parent_run_id": parent, "tracking_uri": base.tracking_uri, "pareto_png": png}
    track.log_metrics(base.tracking_uri, parent, {"wall_s": wall, "trials": len(rows), f"best_{metric}": best[metric]}
                      if best else {"wall_s": wall, "trials": len(rows)})
    track.end_run(base.tracking_uri, parent)
    for r in rows:  # the yardstick columns on each trial's own run too (the UI compares runs, not summary files)
        if r.get("pct_of_teacher") is not None and r["trial"] in (run_ids or {}):
            track.log_metrics(base.tracking_uri, run_ids[r["trial"]],
                              {k: r[k] for k in ("pct_of_teacher", "speedup_b1") if k in r})
    searched = [k for k in ("method", *PARAMS) if len({str(r.get(k)) for r in rows}) > 1 or k in SHOW]
    ui = track.ui_link(base.tracking_uri, base.experiment, name, metric, mode, params=searched,
                       metrics=("pct_of_teacher", "student_params", "latency_ms_b1", "speedup_b1", "best_epoch"))
    summary["mlflow_ui"] = ui
    print("\n" + text, file=sys.stderr, flush=True)
    print("\npick a student in the MLflow UI: " + (f"run  {ui['command']}  then open" if ui["command"] else "open")
          + f"  {ui['url']}\n(or: python -m raydistill.best --experiment {base.experiment} --sweep {name} --export DIR)",
          file=sys.stderr, flush=True)
    print(json.dumps(summary, default=str), flush=True)
    return summary
