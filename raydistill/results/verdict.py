"""Did distillation earn its keep? A sweep's winner against its labels-only control (the same student shape and init
trained on gold labels alone, ``orchestrate/control.py``), judged on the sweep's dev set: every student re-scored here
on the same dev rows, one prediction per example, then the rule of ``results/significance.py`` — the distilled winner
"beats" the control only where the paired 95% interval of (winner − control) over dev examples lies above 0 and the
difference exceeds the control seeds' range; "loses to" the mirror image; otherwise it "ties", an answer in itself.

The control's seed that stands for it is chosen as the winner's exported seed was (its best by validation score, the
lowest trial id on ties; dev chooses nothing): the difference and its paired interval both come from that one pair of
runs (``significance.compare``, the quality benchmark's rule); the median of the control seeds' dev scores is shown
beside them, not subtracted (it may be another seed's). The seeds' range the difference must exceed is the larger of
the control's and the winner's fresh seeds' (a confirmed sweep's), and a comparison with no side of two seeds or more
has no verdict: one seed says nothing of a seed's noise."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from raydistill.config.schema import RunConfig, task_of
from raydistill.results import significance as sig
from raydistill.selection.runs import report_metric
from raydistill.tracking.track import Tracker


@dataclass(frozen=True)
class Student:
    """One exported student of the sweep: its trial, its MLflow run, the folder its trial exported to (this host),
    the max length it was trained at, and its validation score (what picks the control's representative seed)."""

    trial: str
    run_id: str
    folder: str
    max_length: int
    val: float | None = None


def dev_metric(metric: str, task: Any) -> str:
    """The task metric the comparison is on: the one the sweep reports (``best_val_f1`` → ``f1``), else the task's
    main one (a sweep ranked by size or latency)."""
    name = report_metric(metric)
    name = name[len("best_eval_") :] if name.startswith("best_eval_") else name
    from raydistill.tasks.metrics import reported

    return name if name in reported(task) else task.main_metric


@dataclass(frozen=True)
class Winner:
    """The sweep's winner as the verdict needs it: its exported student, how its seed was chosen (``mode`` of the
    sweep's metric), and the dev range of its fresh seeds where a confirmation trained two or more (else None)."""

    student: Student
    mode: str = "max"
    seeds_range: float | None = None


def compare(base: RunConfig, tracker: Tracker, metric: str, winner: Winner, controls: list[Student]) -> dict:
    """The winner against its control seeds on the sweep's dev rows: each side's dev scores, the difference, its
    paired 95% interval and the verdict."""
    from raydistill.data.splits import train_val_dev

    scored = [c for c in controls if c.val is not None]  # a seed with no val score cannot be chosen without dev
    if not scored:
        return {"verdict": None, "reason": "no control seed scored on the validation split"}
    if len(scored) < 2 and winner.seeds_range is None:
        return {"verdict": None, "reason": "one seed on each side: the seeds' range the noise rule needs is unknown"}
    task = task_of(base)
    m = dev_metric(metric, task)
    dev = train_val_dev(base, task)[2]  # the rows every run's eval_* scored (eval_limit applied)
    wp, gold = predictions(base, tracker, winner.student, task, dev)
    preds = [predictions(base, tracker, c, task, dev)[0] for c in scored]
    devs = [sig.score(task, p, gold, metric=m) for p in preds]
    seeds = sig.seeds_summary(devs)
    noise = max(seeds["range"] if len(scored) > 1 else 0.0, winner.seeds_range or 0.0)
    sign = 1 if winner.mode == "max" else -1
    rep = min(range(len(scored)), key=lambda i: (-sign * scored[i].val, scored[i].trial))  # type: ignore[operator]
    pair = sig.compare(task, wp, preds[rep], gold, noise, metric=m)
    return {
        "metric": m,
        "dev_rows": len(gold),
        "winner_trial": winner.student.trial,
        "winner_dev": sig.score(task, wp, gold, metric=m),
        "winner_seeds_range": winner.seeds_range,
        "control_trials": [c.trial for c in scored],
        "control_dev": devs,
        "control_median": seeds["median"],
        "control_range": seeds["range"],
        "noise_range": noise,
        "control_rep_trial": scored[rep].trial,
        "control_rep_dev": devs[rep],
        "diff": pair["diff"],
        "ci": list(pair["ci"]),
        "verdict": pair["verdict"],
    }


def predictions(base: RunConfig, tracker: Tracker, s: Student, task: Any, dev: Sequence[dict]) -> tuple[list, list]:
    """(predictions, references) of one exported student on ``dev``, one per example."""
    import torch
    from transformers import AutoTokenizer

    from raydistill.models.encoder import load_model, quiet_hf
    from raydistill.tasks.encode import encode, example_predictions
    from raydistill.train.precision import release
    from raydistill.train.scoring import model_outputs

    quiet_hf()
    device = torch.device("cuda" if base.train.use_gpu and torch.cuda.is_available() else "cpu")
    with tempfile.TemporaryDirectory() as tmp:
        folder = _folder(tracker, s, tmp)
        tok = AutoTokenizer.from_pretrained(folder)
        model = load_model(folder, task.kind, field="student").to(device)
        enc = encode(task, dev, tok, s.max_length)
        outs = model_outputs(model, task, enc, tok.pad_token_id or 0, 64, device)
    release(model, device)  # the driver's GPU memory back before the teacher is re-timed
    return example_predictions(task, dev, enc, outs)


def _folder(tracker: Tracker, s: Student, tmp: str) -> str:
    """The student's folder: where its trial exported it when this host sees it, else the student its run logged
    (a trial that ran on another node)."""
    if os.path.isfile(os.path.join(s.folder, "config.json")):
        return s.folder
    return tracker.download_student(s.run_id, tmp)


def line(c: dict) -> str:
    """The control's verdict in one sentence, for the summary table and the command's stderr."""
    if c.get("verdict") is None:
        return f"labels-only control: no verdict ({c.get('reason', 'no control student')})"
    lo, hi = c["ci"]
    return (
        f"labels-only control ({len(c['control_dev'])} seed(s) of the winner's shape and init on gold labels alone): "
        f"the distilled winner {c['verdict']} it — dev {c['metric']} {c['winner_dev']:.4f} vs "
        f"{c.get('control_rep_dev', c['control_median']):.4f} (its best seed on val, as the winner's; seeds' median "
        f"{c['control_median']:.4f}, range {c['control_range']:.4f}), difference {c['diff']:+.4f} "
        f"(to exceed the seeds' range {c.get('noise_range', c['control_range']):.4f}), "
        f"paired 95% CI {lo:+.4f}…{hi:+.4f} over {c['dev_rows']} dev examples"
    )


def log_control(tracker: Tracker, parent: str, c: dict) -> None:
    """The verdict on the sweep's parent run: a tag (``raydistill.control_verdict``: beats, ties, loses to, or none
    with its reason) and the numbers behind it as metrics, so the MLflow UI shows whether distillation helped."""
    tracker.set_tags(parent, {"raydistill.control_verdict": c.get("verdict") or f"none: {c.get('reason')}"})
    if c.get("verdict") is None:
        return
    tracker.log_metrics(
        parent,
        {
            "control_winner_dev": c["winner_dev"],
            "control_dev_median": c["control_median"],
            "control_dev_range": c["control_range"],
            "control_diff": c["diff"],
            "control_diff_ci_lo": c["ci"][0],
            "control_diff_ci_hi": c["ci"][1],
            "control_seeds": len(c["control_dev"]),
        },
    )
