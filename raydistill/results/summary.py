"""A sweep's end: one row per trial (DONE, STOPPED by ASHA, ERROR with its reason), the summary table, JSON and Pareto
plot logged to the parent MLflow run, and the one-line JSON result. Each row shows the score that chose it
(``best_val_*``)
beside the dev score it reports (``best_eval_*``); only trials that exported a student can be the best or on the
front."""

from __future__ import annotations

import json
import os
import sys

from raydistill.common.errors import failure_reason
from raydistill.tracking.track import RESULTS_DIR


def summarize(
    results, metric: str, mode: str, epochs: int, logged: dict | None = None, finished: set | None = None
) -> list[dict]:
    """One row per trial: DONE (all epochs), STOPPED (by ASHA) or ERROR (with the reason), ``exported`` when its run
    ended FINISHED with its student (``finished``: trial ids; None = every DONE trial). ``logged`` (trial id → the
    MLflow
    child run's metrics) wins over Tune's last result, which is stale for a trial resumed after its end. Rows come
    exported first, then best ``metric`` first."""
    from raydistill.config.selection import report_metric

    report = report_metric(metric)
    rows = []
    for r in results:
        cfg, m = dict(r.config or {}), dict(r.metrics or {})
        cfg = dict(cfg.get("point") or cfg)  # a confirmation trial's config is one grid point
        m.update((logged or {}).get(m.get("trial_id"), {}))
        status = "ERROR" if r.error else "DONE" if (m.get("epoch") or 0) >= epochs else "STOPPED"
        trial = m.get("trial_id") or os.path.basename(r.path or "")[-8:]
        exported = status == "DONE" and (finished is None or trial in finished)
        rows.append(
            {
                "trial": trial,
                "status": status,
                "exported": exported,
                "config": cfg,
                metric: m.get(metric),
                **({report: m.get(report)} if report != metric else {}),
                "epoch": m.get("epoch"),
                "best_epoch": m.get("best_epoch"),
                "student_params": m.get("student_params"),
                "latency_ms_b1": m.get("latency_ms_b1"),
                "latency_ms_b32": m.get("latency_ms_b32"),
                "trial_wall_s": m.get("trial_wall_s"),
                "fixed_cost_s": m.get("fixed_cost_s"),
                **{k: v for k, v in cfg.items() if k != "confirm_of"},
                "error": failure_reason(r.error)[:160]
                if r.error
                else ("no exported student" if status == "DONE" and not exported else ""),
            }
        )
    sign = -1 if mode == "max" else 1
    # ties go to the lowest trial id, the rule raydistill.best applies too (selection.pick_confirmed)
    rows.sort(key=lambda r: (not r["exported"], r[metric] is None, sign * (r[metric] or 0), r["trial"]))
    return rows


def _mean(values) -> float | None:
    vs = [v for v in values if v is not None]
    return round(sum(vs) / len(vs), 2) if vs else None


def teacher_score(teacher: dict | None, metric: str) -> float | None:
    """The teacher's value of a trial metric (``best_eval_x`` is scored as ``eval_x``, ``best_val_x`` as ``val_x``)."""
    if not teacher:
        return None
    return teacher.get(metric[len("best_") :] if metric.startswith("best_") else metric)


def against_teacher(rows: list[dict], metric: str, teacher: dict | None) -> None:
    """Each row's ``pct_of_teacher`` (its reported dev score ÷ the teacher's on dev, in %: the dev number of what val
    chose) and ``speedup_b1`` (teacher latency ÷ its own)."""
    from raydistill.config.selection import report_metric

    report = report_metric(metric)
    score = teacher_score(teacher, report)
    for r in rows:
        if score and r.get(report) is not None:
            r["pct_of_teacher"] = round(100.0 * r[report] / score, 1)
        if teacher and r.get("latency_ms_b1"):
            r["speedup_b1"] = round(teacher["latency_ms_b1"] / r["latency_ms_b1"], 2)


def mark_front(rows: list[dict], metric: str, mode: str, cost: str) -> list[dict]:
    """Set ``pareto`` on every row (True: no other trial is at least as good and at most as costly in ``cost``); returns
    the front, cheapest first."""
    from raydistill.results.report import pareto_front

    done = [r for r in rows if r.get("exported", True) and r.get(metric) is not None and r.get(cost) is not None]
    front = {id(done[i]) for i in pareto_front([(r[cost], r[metric]) for r in done], maximize_y=mode == "max")}
    for r in rows:
        r["pareto"] = id(r) in front
    return sorted((r for r in done if r["pareto"]), key=lambda r: r[cost])


def finish(
    rows,
    metric,
    mode,
    base,
    parent,
    storage,
    name,
    wall,
    n_samples,
    log,
    n_at_once=1,
    teacher: dict | None = None,
    front_by: str = "latency_ms_b1",
    run_ids: dict | None = None,
    confirmed: list[dict] | None = None,
    timings: dict | None = None,
) -> dict:
    from raydistill.config.selection import report_metric
    from raydistill.results.report import PARAMS, SHOW, pareto_plot, table
    from raydistill.tracking import track

    report = report_metric(metric)
    out_dir = os.path.join(os.path.abspath(RESULTS_DIR), "sweeps", name)
    os.makedirs(out_dir, exist_ok=True)
    against_teacher(rows, metric, teacher)
    front = mark_front(rows, metric, mode, front_by)
    scores = [metric] + ([report] if report != metric else [])
    cols = (
        ["trial", "status", *scores]
        + (["pct_of_teacher"] if teacher_score(teacher, report) else [])
        + ["epoch", "best_epoch", "student_params", "latency_ms_b1"]
        + (["speedup_b1"] if teacher else [])
        + ["pareto"]
        + [k for k in SHOW if any(r.get(k) is not None for r in rows)]
        + ["error"]
    )
    text = table(rows, cols)
    if confirmed:
        text += (
            f"\n\nconfirmed: the top {len(confirmed)} configuration(s) re-trained with more seeds; the best mean "
            f"{metric} wins, its best seed is exported\n" + table(confirmed, list(confirmed[0]))
        )
    with open(os.path.join(out_dir, "summary.txt"), "w") as f:
        f.write(text + "\n")
    with open(os.path.join(out_dir, "summary.json"), "w") as f:
        json.dump(rows, f, indent=1, default=str)
    front_cols = [
        "trial",
        *scores,
        "pct_of_teacher",
        front_by,
        "student_params" if front_by != "student_params" else "latency_ms_b1",
        "speedup_b1",
    ] + [k for k in SHOW if any(r.get(k) is not None for r in front)]
    with open(os.path.join(out_dir, "pareto_front.txt"), "w") as f:
        f.write(f"Pareto front: {metric} vs {front_by}, cheapest first\n" + table(front, front_cols) + "\n")
    png = pareto_plot(
        [r for r in rows if r["exported"]],
        report,
        os.path.join(out_dir, "pareto.png"),
        maximize=mode == "max",
        teacher={**teacher, report: teacher_score(teacher, report)} if teacher else None,
    )
    for p in (
        os.path.join(out_dir, "summary.txt"),
        os.path.join(out_dir, "summary.json"),
        os.path.join(out_dir, "pareto_front.txt"),
        png,
    ):
        if p:
            track.log_artifact(base.tracking_uri, parent, p, "summary")
    track.close_children(
        base.tracking_uri,
        base.experiment,
        parent,
        stopped={r["trial"] for r in rows if r["status"] == "STOPPED"},
        errors={r["trial"]: r["error"] for r in rows if r["status"] == "ERROR"},
    )
    done = [r for r in rows if r["exported"] and r.get(metric) is not None]
    best = done[0] if done else None
    if confirmed:  # the confirmed winner: best mean over seeds; its best seed's student is the one exported
        best = next((r for r in rows if r["trial"] == confirmed[0]["exported_trial"]), best)
    summary = {
        "sweep": name,
        "trials": len(rows),
        "errors": sum(r["status"] == "ERROR" for r in rows),
        "wall_s": round(wall, 1),
        "per_trial_s": round(wall / max(len(rows), 1), 1),
        "metric": metric,
        "report_metric": report,
        "select_on": base.train.select_on,
        "fixed_cost_s": _mean(r.get("fixed_cost_s") for r in rows),
        "concurrency": n_at_once,
        "best": {
            k: best.get(k)
            for k in [
                "trial",
                *scores,
                "pct_of_teacher",
                "best_epoch",
                "student_params",
                "latency_ms_b1",
                "speedup_b1",
                *SHOW,
            ]
            if k in best
        }
        if best
        else None,
        "pareto_front": [{k: r.get(k) for k in front_cols} for r in front],
        "confirmed": confirmed or None,
        "timings": timings,
        "teacher": teacher,
        "parent_run_id": parent,
        "tracking_uri": base.tracking_uri,
        "pareto_png": png,
    }
    if best and confirmed:
        summary["best"].update({k: v for k, v in confirmed[0].items() if k.startswith(("mean_", "range_", "seeds"))})
    track.log_metrics(
        base.tracking_uri,
        parent,
        {
            "wall_s": wall,
            "trials": len(rows),
            **({f"best_{k}": best[k] for k in scores if best.get(k) is not None} if best else {}),
            **{f"time_{k}_s": v for k, v in (timings or {}).items()},
        },
    )
    if best and best["trial"] in (run_ids or {}):
        track.set_tags(base.tracking_uri, parent, {"raydistill.winner_run_id": run_ids[best["trial"]]})
    track.end_run(base.tracking_uri, parent)
    for r in rows:  # the yardstick columns on each trial's own run too (the UI compares runs, not summary files)
        if r.get("pct_of_teacher") is not None and r["trial"] in (run_ids or {}):
            track.log_metrics(
                base.tracking_uri, run_ids[r["trial"]], {k: r[k] for k in ("pct_of_teacher", "speedup_b1") if k in r}
            )
    searched = [k for k in ("method", *PARAMS) if len({str(r.get(k)) for r in rows}) > 1 or k in SHOW]
    ui = track.ui_link(
        base.tracking_uri,
        base.experiment,
        name,
        metric,
        mode,
        params=searched,
        metrics=(*scores[1:], "pct_of_teacher", "student_params", "latency_ms_b1", "speedup_b1", "best_epoch"),
    )
    summary["mlflow_ui"] = ui
    print("\n" + text, file=sys.stderr, flush=True)
    print(
        "\npick a student in the MLflow UI: "
        + (f"run  {ui['command']}  then open" if ui["command"] else "open")
        + f"  {ui['url']}\n(or: python -m raydistill.best --experiment {base.experiment} --sweep {name} --export DIR)",
        file=sys.stderr,
        flush=True,
    )
    print(json.dumps(summary, default=str), flush=True)
    return summary
