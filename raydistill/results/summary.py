"""A sweep's end: one row per trial (DONE, STOPPED by ASHA or as diverged, ERROR with its reason), the summary
table, JSON and Pareto plot logged to the parent MLflow run, and the one-line JSON result. Each row shows the score
that chose it (``best_val_*``) beside the dev score it reports (``best_eval_*``); only trials that exported a student
can be the best or on the front."""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass, field
from typing import Any

from raydistill.common.errors import failure_reason
from raydistill.common.paths import results_path
from raydistill.config.schema import RunConfig
from raydistill.results.report import PARAMS, SHOW, disk_size, pareto_plot, table
from raydistill.selection.runs import rank_trials, report_metric, winner
from raydistill.tracking.track import Tracker


def summarize(
    results, metric: str, mode: str, epochs: int, logged: dict | None = None, finished: set | None = None
) -> list[dict]:
    """One row per trial: DONE (all epochs), STOPPED (by ASHA; or as diverged, ``stopped: diverged: …`` in its
    ``error`` column) or ERROR (with the reason), ``exported`` when its run ended FINISHED with its student
    (``finished``: trial ids; None = every DONE or diverged trial). ``logged`` (trial id → the
    MLflow child run's metrics) wins over Tune's last result, which is stale for a trial resumed after its end. Rows
    come exported first, then best ``metric`` first."""

    report = report_metric(metric)
    rows = []
    for r in results:
        cfg, m = dict(r.config or {}), dict(r.metrics or {})
        cfg = dict(cfg.get("point") or cfg)  # a confirmation trial's config is one grid point
        m.update((logged or {}).get(m.get("trial_id"), {}))
        diverged = "" if r.error else m.get("diverged") or ""  # stopped by the loop (train.stop_diverged), the reason
        status = "ERROR" if r.error else "DONE" if (m.get("epoch") or 0) >= epochs and not diverged else "STOPPED"
        trial = m.get("trial_id") or os.path.basename(r.path or "")[-8:]
        # a diverged run ends FINISHED with its best epoch's student, like a finished one
        exported = (status == "DONE" or bool(diverged)) and (finished is None or trial in finished)
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
                "epoch_examples": m.get("epoch_examples"),
                **{k: v for k, v in m.items() if k.startswith(CLASS_KEYS)},  # macro-F1, each class's dev recall
                **{k: v for k, v in cfg.items() if k not in ("confirm_of", "control_of")},
                "error": failure_reason(r.error)[:160]
                if r.error
                else f"stopped: {diverged}"
                if diverged
                else ("no exported student" if status == "DONE" and not exported else ""),
            }
        )
    rank_trials(rows, metric, mode)  # ties to the lowest trial id, as raydistill.best (selection.pick_confirmed)
    return rows


CLASS_KEYS = ("best_eval_macro_f1", "best_val_macro_f1", "best_eval_recall_")  # issue 48: every class visible


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


@dataclass(frozen=True)
class SweepOutcome:
    """What a finished sweep hands its summary: who it was, how it chose, and what it measured around its trials."""

    name: str
    base: RunConfig
    tracker: Tracker  # the base config's MLflow store and experiment
    parent: str  # the sweep's MLflow run
    metric: str  # what chose (``best_val_*``)
    mode: str
    concurrency: int
    wall_s: float
    teacher: dict[str, Any] | None = None  # the yardstick (teacher.reference)
    front_by: str = "latency_ms_b1"
    run_ids: dict[str, str] = field(default_factory=dict)  # trial id → its MLflow run
    confirmed: list[dict[str, Any]] | None = None
    timings: dict[str, float] | None = None
    control: dict[str, Any] | None = None  # the winner against its labels-only control (results.verdict)


def finish(sweep: SweepOutcome, rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The sweep's summary files logged to its parent run, its children closed, the parent ended, the table and the
    MLflow UI link printed, and the result (the best trial) returned: the sweep command prints it as one JSON line."""
    against_teacher(rows, sweep.metric, sweep.teacher)
    front = mark_front(rows, sweep.metric, sweep.mode, sweep.front_by)
    best = _best(sweep, rows)
    classes = _classes(sweep, best)
    text, files, front_cols = _write_summary(sweep, rows, front, _class_text(best, classes))
    for path in files:
        sweep.tracker.log_artifact(sweep.parent, path, "summary")
    sweep.tracker.close_children(
        sweep.parent,
        stopped={r["trial"] for r in rows if r["status"] == "STOPPED"},
        errors={
            **{r["trial"]: r["error"] for r in rows if r["status"] == "ERROR"},
            **(sweep.control or {}).get("errors", {}),
        },
        known={r["trial"] for r in rows},
    )
    summary = _summary(sweep, rows, best, front, front_cols, png=files[-1] if files[-1].endswith(".png") else None)
    summary.update(_class_summary(sweep, best, classes))
    _log_best(sweep, rows, best)
    summary["mlflow_ui"] = ui = _ui_link(sweep, rows)
    summary["results_disk"] = disk = _results_disk()
    print("\n" + text, file=sys.stderr, flush=True)
    print(
        "\npick a student in the MLflow UI: "
        + (f"run  {ui['command']}  then open" if ui["command"] else "open")
        + f"  {ui['url']}\n(or: python -m raydistill.best --experiment {sweep.base.experiment} --sweep {sweep.name} "
        "--export DIR)",
        file=sys.stderr,
        flush=True,
    )
    print(f"results folder: {disk['path']} holds {disk_size(disk['bytes'])}", file=sys.stderr, flush=True)
    return summary


def _results_disk() -> dict[str, Any]:
    """What the results folder (every sweep's checkpoints, MLflow's local store, caches) takes on disk, as ``du``
    counts it: the user's to keep or clean."""
    from raydistill.train.checkpoint import disk_bytes

    root = results_path()
    return {"path": root, "bytes": disk_bytes(root)}


def _scores(metric: str) -> list[str]:
    report = report_metric(metric)
    return [metric] + ([report] if report != metric else [])


def _with_macro(metric: str, rows: list[dict[str, Any]]) -> list[str]:
    """The scores a row shows: what chose, what reports, and dev macro-F1 beside them for a task with classes."""
    scores = _scores(metric)
    macro = "best_eval_macro_f1"
    return scores + ([macro] if macro not in scores and any(r.get(macro) is not None for r in rows) else [])


def _classes(sweep: SweepOutcome, best: dict[str, Any] | None) -> list[dict[str, Any]]:
    """The best trial's per-class table (results.classes); empty for a task without classes."""
    from raydistill.config.schema import task_of
    from raydistill.results.classes import class_rows

    return class_rows(task_of(sweep.base).label_names, best, sweep.teacher) if best else []


def _class_text(best: dict[str, Any] | None, classes: list[dict[str, Any]]) -> str:
    from raydistill.results.classes import text

    return text(classes, f"the best trial, {best['trial']}") if best else ""


def _class_summary(sweep: SweepOutcome, best: dict[str, Any] | None, classes: list[dict[str, Any]]) -> dict[str, Any]:
    """The JSON line's ``macro_f1`` (the best student's and the teacher's on dev), ``classes`` and
    ``class_warnings``, for a task with classes."""
    from raydistill.results.classes import as_json, warnings

    if not best or best.get("best_eval_macro_f1") is None:
        return {}
    return {
        "macro_f1": {"student": best["best_eval_macro_f1"], "teacher": (sweep.teacher or {}).get("eval_macro_f1")},
        "classes": as_json(classes),
        "class_warnings": warnings(classes),
    }


def _write_summary(
    sweep: SweepOutcome, rows: list[dict[str, Any]], front: list[dict[str, Any]], classes: str = ""
) -> tuple[str, list[str], list[str]]:
    """summary.txt, summary.json, pareto_front.txt and pareto.png under the results folder: (table text, the best
    trial's per-class table and its warnings under it, the files, the front's columns)."""
    metric, teacher, report = sweep.metric, sweep.teacher, report_metric(sweep.metric)
    out_dir = results_path("sweeps", sweep.name)
    os.makedirs(out_dir, exist_ok=True)
    scores = _with_macro(metric, rows)
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
    if sweep.confirmed:
        text += (
            f"\n\nconfirmed: the top {len(sweep.confirmed)} configuration(s) re-trained with fresh seeds; the best "
            f"mean {metric} over the fresh seeds wins (the search's own score, search_{metric}, is shown, not averaged "
            "in), its best fresh run is exported\n" + table(sweep.confirmed, list(sweep.confirmed[0]))
        )
    if sweep.control:
        from raydistill.results.verdict import line

        text += "\n\n" + line(sweep.control)
    if classes:
        text += "\n\n" + classes
    with open(os.path.join(out_dir, "summary.txt"), "w") as f:
        f.write(text + "\n")
    with open(os.path.join(out_dir, "summary.json"), "w") as f:
        json.dump(rows, f, indent=1, default=str)
    front_by = sweep.front_by
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
    # on the score that chose, like the table's front and pareto_front.txt: a front drawn on dev would crown trials
    # the sweep could not have picked
    png = pareto_plot(
        [r for r in rows if r["exported"]],
        metric,
        os.path.join(out_dir, "pareto.png"),
        maximize=sweep.mode == "max",
        teacher={**teacher, metric: teacher_score(teacher, metric)} if teacher else None,
    )
    files = [os.path.join(out_dir, f) for f in ("summary.txt", "summary.json", "pareto_front.txt")]
    return text, files + ([png] if png else []), front_cols


def _best(sweep: SweepOutcome, rows: list[dict[str, Any]]) -> dict[str, Any] | None:
    return winner(rows, sweep.metric, sweep.confirmed)


def _summary(
    sweep: SweepOutcome,
    rows: list[dict[str, Any]],
    best: dict[str, Any] | None,
    front: list[dict[str, Any]],
    front_cols: list[str],
    png: str | None,
) -> dict[str, Any]:
    keys = ["trial", *_scores(sweep.metric), "pct_of_teacher", "best_epoch", "student_params", "latency_ms_b1"]
    summary = {
        "sweep": sweep.name,
        "experiment": sweep.base.experiment,  # what `best --experiment` and `best_student` take (SPACE-TASK)
        "trials": len(rows),
        "errors": sum(r["status"] == "ERROR" for r in rows),
        "diverged": sum(r["error"].startswith("stopped: diverged") for r in rows),
        "wall_s": round(sweep.wall_s, 1),
        # the control's runs took part of the wall time too
        "per_trial_s": round(sweep.wall_s / max(len(rows) + (sweep.control or {}).get("seeds", 0), 1), 1),
        "metric": sweep.metric,
        "report_metric": report_metric(sweep.metric),
        "select_on": sweep.base.train.select_on,
        "fixed_cost_s": _mean(r.get("fixed_cost_s") for r in rows),
        "concurrency": sweep.concurrency,
        "best": {k: best.get(k) for k in [*keys, "speedup_b1", *SHOW] if k in best} if best else None,
        "pareto_front": [{k: r.get(k) for k in front_cols} for r in front],
        "confirmed": sweep.confirmed or None,
        "control": sweep.control,
        "timings": sweep.timings,
        "teacher": sweep.teacher,
        "parent_run_id": sweep.parent,
        "tracking_uri": sweep.base.tracking_uri,
        "pareto_png": png,
    }
    if best and sweep.confirmed:
        summary["best"].update(
            {k: v for k, v in sweep.confirmed[0].items() if k.startswith(("mean_", "range_", "seeds"))}
        )
    return summary


def _log_best(sweep: SweepOutcome, rows: list[dict[str, Any]], best: dict[str, Any] | None) -> None:
    """The parent run's final numbers and winner, then the parent ended; the yardstick columns on each trial's run."""
    tracker, parent, run_ids = sweep.tracker, sweep.parent, sweep.run_ids
    tracker.log_metrics(
        parent,
        {
            "wall_s": sweep.wall_s,
            "trials": len(rows),
            **({f"best_{k}": best[k] for k in _scores(sweep.metric) if best.get(k) is not None} if best else {}),
            **{f"time_{k}_s": v for k, v in (sweep.timings or {}).items()},
        },
    )
    if best and best["trial"] in run_ids:
        tracker.set_tags(parent, {"raydistill.winner_run_id": run_ids[best["trial"]]})
    if sweep.control:
        from raydistill.results.verdict import log_control

        log_control(tracker, parent, sweep.control)
    tracker.end_run(parent)
    for r in rows:  # the yardstick columns on each trial's own run too (the UI compares runs, not summary files)
        if r.get("pct_of_teacher") is not None and r["trial"] in run_ids:
            tracker.log_metrics(run_ids[r["trial"]], {k: r[k] for k in ("pct_of_teacher", "speedup_b1") if k in r})


def _ui_link(sweep: SweepOutcome, rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The MLflow UI view of this sweep's trials: best first, the searched params and the yardstick as columns."""
    searched = [k for k in ("method", *PARAMS) if len({str(r.get(k)) for r in rows}) > 1 or k in SHOW]
    return sweep.tracker.ui_link(
        sweep.name,
        sweep.metric,
        sweep.mode,
        params=searched,
        metrics=(
            *_with_macro(sweep.metric, rows)[1:],
            "pct_of_teacher",
            "student_params",
            "latency_ms_b1",
            "speedup_b1",
            "best_epoch",
        ),
    )
