"""The teacher as the yardstick of a sweep: its score on the very dev set the students are scored on, its size and its
batch-1 latency on the threads each trial's worker has — so "% of the teacher" and "× faster" mean what they say.
Memoised per teacher, dev set, length and machine (the memo folder of ``latency.py``)."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Sequence

from raydistill.config.schema import RunConfig

# what a memoised reference holds; raised when it changes, so an older memo is measured again (2: the majority floor of
# every metric, scored by the task's metric functions; before, the main metric's only, and 0.0 for F1; 3: macro-F1,
# each class's dev recall and support)
VERSION = 3


def teacher_reference(cfg: RunConfig, threads: int, log=lambda m: None) -> dict:
    """``eval_<metric>`` of the teacher on ``cfg``'s dev set and ``val_<metric>`` on its validation split,
    ``student_params`` and ``latency_ms_b1`` (the same names a trial logs), measured with ``threads`` torch threads;
    ``majority_<metric>`` (every metric of the task): what always answering the training rows' most common label (a
    regression: their mean) scores on dev; a task with classes: ``eval_recall_<class>`` and ``support_<class>``, the
    dev rows of each class (the summary's per-class table)."""
    import torch

    from raydistill.config.schema import task_of
    from raydistill.models.latency import busy, memo_dir, quiet, read_memo, write_memo

    task = task_of(cfg)
    before = torch.get_num_threads()
    torch.set_num_threads(max(1, threads))
    try:
        key = _memo_key(cfg)
        path = os.path.join(memo_dir(), "teacher-reference.json")
        memo = read_memo(path)
        if key in memo:
            return memo[key]
        out = _measure(cfg, task, threads, log)
    finally:
        torch.set_num_threads(before)
    if quiet(busy()):  # a timing slowed by other work is this sweep's, not every later one's
        memo[key] = out
        write_memo(path, memo)
    return out


def _memo_key(cfg: RunConfig) -> str:
    """What the reference depends on: the teacher's weights, the data, the length and the machine (``arch_key``)."""
    from transformers import AutoConfig

    from raydistill.data.splits import data_fingerprint
    from raydistill.models.encoder import fingerprint
    from raydistill.models.latency import arch_key

    length = cfg.train.max_length
    key = hashlib.sha256(
        json.dumps(
            [
                VERSION,
                fingerprint(cfg.teacher),
                data_fingerprint(cfg),
                length,
                arch_key(AutoConfig.from_pretrained(cfg.teacher), "cpu", length),
            ]
        ).encode()
    )
    return key.hexdigest()[:16]


def _measure(cfg: RunConfig, task, threads: int, log) -> dict:
    """The teacher scored on the students' dev set and validation split, sized, and timed at batch 1 (on the torch
    threads the caller set)."""
    import torch
    from transformers import AutoTokenizer

    from raydistill.data.splits import train_val_dev
    from raydistill.models.encoder import load_model, quiet_hf
    from raydistill.models.latency import measure_latency
    from raydistill.models.student import count_params
    from raydistill.tasks.encode import encode
    from raydistill.train.loop import RunData
    from raydistill.train.scoring import dev_metrics

    length = cfg.train.max_length
    quiet_hf()
    log(f"teacher reference: scoring {cfg.teacher} on the students' dev set and timing it on {threads} thread(s)")
    tok = AutoTokenizer.from_pretrained(cfg.teacher)
    model = load_model(cfg.teacher, task.kind)
    train, val, dev = train_val_dev(cfg, task)
    data = RunData.dev_only(task, dev, tok, length)
    if val:
        data.val_examples, data.val_encoded = val, encode(task, val, tok, length)
    return {
        **dev_metrics(model, data, 64, torch.device("cpu")),
        **majority(task, train, dev),
        **support(task, dev),
        "student_params": float(count_params(model)),
        # at the length a trial times its student (loop._speed)
        "latency_ms_b1": measure_latency(
            model, batch_sizes=(1,), length=min(128, model.config.max_position_embeddings - 2)
        )["latency_ms_b1"],
    }


def majority(task, train: Sequence[dict], dev: Sequence[dict]) -> dict:
    """``majority_<metric>`` for every metric of the task: what a constant answer scores on dev, scored by the task's
    own metric functions on dev's labels — the floor a teacher must clear. The constant is the training rows' most
    common label (classification) or their mean (regression; a correlation of a constant is 0). Computed, not looked
    up, so F1 of a constant positive answer (MRPC, a file task choosing on f1) and macro-F1 come out right."""
    from raydistill.tasks.metrics import compute, constant_answer

    if task.kind not in ("classification", "regression") or not train or not dev:
        return {}
    constant = constant_answer(task.kind, [e["label"] for e in train])
    gold = [e["label"] for e in dev]
    return {f"majority_{m}": v for m, v in compute(task, [constant] * len(gold), gold).items()}


def support(task, dev: Sequence[dict]) -> dict:
    """``support_<class>``: how many dev rows each class has, for a task with classes."""
    from raydistill.tasks.metrics import class_support, per_class

    return class_support(task, [e["label"] for e in dev]) if per_class(task) else {}


def weak_teacher(ref: dict, task) -> str | None:
    """A warning line when the teacher's dev score is within 2 points of the constant answer's (``majority``)."""
    m = task.main_metric
    floor, score = ref.get(f"majority_{m}"), ref.get(f"eval_{m}")
    if floor is None or score is None or score - floor > 0.02:
        return None
    what = (
        "a correlation near 0" if task.kind == "regression" else f"always answering the most common label ({floor:.4f})"
    )
    return (
        f"warning: the teacher scores dev {m}={score:.4f}, within 2 points of {what}: every student is measured "
        "against a teacher that learned little; fine-tune it longer (--teacher-epochs, --teacher-lr) or pass a "
        "better --teacher"
    )


def side_by_side(cfg: RunConfig, archs: list[tuple[int, int, int, int]], threads: int) -> dict:
    """Batch-1 latency (ms) of the teacher (key ``"teacher"``) and of each student architecture (layers, hidden,
    intermediate, heads), measured one after the other in this process once no trial runs: a trial times its student
    while other trials train on the same cores, which inflates it by as much as the machine is shared."""
    import torch
    from transformers import AutoConfig

    from raydistill.config.schema import StudentConfig, task_of
    from raydistill.models.heads import auto_class
    from raydistill.models.latency import measure_latency
    from raydistill.models.student import student_config

    tcfg = AutoConfig.from_pretrained(cfg.teacher)
    kind = task_of(cfg).kind
    length = min(128, tcfg.max_position_embeddings - 2)
    before = torch.get_num_threads()
    torch.set_num_threads(max(1, threads))
    out = {}
    try:
        for arch in [None, *dict.fromkeys(archs)]:
            c = student_config(tcfg, StudentConfig(*arch)) if arch else tcfg
            model = auto_class(kind).from_config(c)  # weights do not change the time
            out[arch or "teacher"] = measure_latency(model, batch_sizes=(1,), length=length)["latency_ms_b1"]
    finally:
        torch.set_num_threads(before)
    return out


ARCH = ("student_layers", "student_hidden", "student_intermediate", "student_heads")


def remeasure_latency(rows: list[dict], base: RunConfig, ref: dict, n_threads: int, log, run_ids: dict) -> dict:
    """Each trial's ``latency_ms_b1`` and the teacher's, timed again side by side now that no trial trains (a trial
    times its student while others share its cores); logged to the trial runs at the step after their last epoch, so
    the UI, the Pareto front and ``best --max-latency-ms`` read the quiet numbers. Returns the teacher reference."""
    from raydistill.tracking.track import Tracker

    arch = {
        r["trial"]: (int(r[ARCH[0]]), int(r[ARCH[1]]), int(r[ARCH[2]]), int(r[ARCH[3]]))
        for r in rows
        if all(r.get(k) is not None for k in ARCH)
    }
    if not arch:
        return ref
    log(f"timing the teacher and {len(set(arch.values()))} student architecture(s) side by side, no trial running")
    quiet = side_by_side(base, list(arch.values()), n_threads)
    assert base.tracking_uri is not None  # the sweep's base config holds the resolved tracking URI
    tracker = Tracker(base.tracking_uri, base.experiment)
    for r in rows:
        if r["trial"] in arch:
            r["latency_ms_b1_in_trial"], r["latency_ms_b1"] = r.get("latency_ms_b1"), quiet[arch[r["trial"]]]
            if r["trial"] in run_ids:
                tracker.log_metrics(
                    run_ids[r["trial"]],
                    {"latency_ms_b1": r["latency_ms_b1"]},
                    step=base.train.epochs + 1,
                )
    return {**ref, "latency_ms_b1": quiet["teacher"]}
