"""Every class visible (issue 48): a student that keeps "91% of the teacher" on accuracy while it never predicts a rare
class right must say so. For a task with classes, the best trial's dev recall of each class beside the teacher's and
the class's dev rows, as a table (the sweep's summary, ``best``), as data (the JSON line) and as one warning line per
class the student gets no row of right."""

from __future__ import annotations

from typing import Any

from raydistill.common.errors import UserError
from raydistill.results.report import table


def class_rows(names: tuple[str, ...], student: dict[str, Any], teacher: dict[str, Any] | None) -> list[dict[str, Any]]:
    """One row per class: ``class``, ``support`` (dev rows), ``teacher_recall``, ``student_recall``. ``student``
    holds a run's final metrics (``best_eval_recall_<key>``), ``teacher`` the yardstick's (``eval_recall_<key>``,
    ``support_<key>``; ``teacher.reference``). Empty where the student's run logged no class (a task without classes,
    or a run older than these metrics)."""
    from raydistill.tasks.metrics import class_keys

    keys = class_keys(names)
    if not any(f"best_eval_recall_{k}" in student for k in keys):
        return []
    t = teacher or {}
    return [
        {
            "class": name,
            "support": None if t.get(f"support_{k}") is None else int(t[f"support_{k}"]),
            "teacher_recall": t.get(f"eval_recall_{k}"),
            "student_recall": student.get(f"best_eval_recall_{k}"),
        }
        for name, k in zip(names, keys, strict=True)
    ]


def warnings(rows: list[dict[str, Any]]) -> list[str]:
    """One line per class the student gets no dev row of right (recall 0; a class without dev rows has no recall
    and is not flagged)."""
    out = []
    for r in rows:
        if r["student_recall"] is None or r["student_recall"] > 0:
            continue
        rows_said = f"its {r['support']} dev rows" if r["support"] is not None else "its dev rows"
        teacher = "" if r["teacher_recall"] is None else f" (the teacher recalls {r['teacher_recall']:.2f} of them)"
        out.append(f"warning: the student never predicts {r['class']} right: recall 0 on {rows_said}{teacher}")
    return out


def text(rows: list[dict[str, Any]], who: str) -> str:
    """The per-class table under a heading naming whose student it is, then the warning lines."""
    if not rows:
        return ""
    lines = [f"per class on dev ({who}): recall = the share of a class's dev rows predicted as it"]
    lines.append(table(rows, ["class", "support", "teacher_recall", "student_recall"]))
    return "\n".join(lines + warnings(rows))


def as_json(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The table's rows with the flag each carries: ``never_right`` where the student's recall is 0."""
    return [{**r, "never_right": r["student_recall"] == 0} for r in rows]


def of_runs(run: Any, parent: Any) -> tuple[dict[str, Any], str]:
    """``raydistill best``'s view of a chosen MLflow run: (``macro_f1`` and ``classes`` for its JSON, the table and
    warnings for its stderr), the teacher's side read from the sweep's parent run (``teacher_*``); ({}, "") for a run
    of a task without classes."""
    m = run.data.metrics
    if m.get("best_eval_macro_f1") is None:
        return {}, ""
    p = parent.data.metrics if parent is not None else {}
    teacher = {k[len("teacher_") :]: v for k, v in p.items() if k.startswith("teacher_")}
    rows = class_rows(_names(run, m), m, teacher)
    out = {
        "macro_f1": {"student": m["best_eval_macro_f1"], "teacher": teacher.get("eval_macro_f1")},
        "classes": as_json(rows),
        "class_warnings": warnings(rows),
    }
    return out, text(rows, f"run {run.info.run_name}")


def _names(run: Any, metrics: dict[str, float]) -> tuple[str, ...]:
    """The run's class names, from its task (params); where the task cannot be rebuilt (its files moved), the keys
    its metrics carry stand for them."""
    from raydistill.config.params import task_of_params

    try:
        return task_of_params(run.data.params).label_names
    except (UserError, OSError, KeyError):  # files moved: a table of keys beats none, the recalls are logged
        prefix = "best_eval_recall_"
        return tuple(k[len(prefix) :] for k in metrics if k.startswith(prefix))
