"""Checkpoints of a run: the latest student (for resume), the best epoch's student, the objective, optimizer and
scheduler state, written to a temporary folder and renamed so a half-written one is never taken as valid."""

from __future__ import annotations

import json
import os
import shutil
import tempfile

import torch

from raydistill.models.prune import PLAN_FILE


def _link(src: str, dst: str) -> None:
    """Hard-link rather than copy (saved files are never rewritten in place); copy across file systems."""
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


def copy_dir(src: str, dst: str) -> None:
    shutil.rmtree(dst, ignore_errors=True)
    shutil.copytree(src, dst, copy_function=_link)


def save_checkpoint(path: str, student, tokenizer, objective, opt, sched, state: dict, best: str | None = None) -> None:
    """Write to a temporary folder, then rename: a half-written checkpoint is never taken as valid.

    ``student`` is the latest student (what a resumed run continues); ``best_student`` a copy of the folder
    ``best``, or of this student when ``best`` is None (it is the best so far)."""
    tmp = tempfile.mkdtemp(prefix=".tmp-", dir=os.path.dirname(os.path.abspath(path)) or ".")
    try:
        student.save_pretrained(os.path.join(tmp, "student"))
        tokenizer.save_pretrained(os.path.join(tmp, "student"))
        if getattr(student, "prune_plan", None):  # init prune: what it kept, beside the weights (models/prune.py)
            with open(os.path.join(tmp, "student", PLAN_FILE), "w", encoding="utf-8") as f:
                json.dump(student.prune_plan, f)
        copy_dir(best or os.path.join(tmp, "student"), os.path.join(tmp, "best_student"))
        torch.save(
            {"objective": objective.state_dict(), "optimizer": opt.state_dict(), "scheduler": sched.state_dict()},
            os.path.join(tmp, "train_state.pt"),
        )
        with open(os.path.join(tmp, "state.json"), "w") as f:
            json.dump(state, f)
        if os.path.exists(path):
            shutil.rmtree(path)
        os.replace(tmp, path)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def load_state(resume_dir: str):
    with open(os.path.join(resume_dir, "state.json")) as f:
        state = json.load(f)
    blobs = torch.load(os.path.join(resume_dir, "train_state.pt"), map_location="cpu", weights_only=True)
    return state, blobs


def resume_student(resume_dir: str | None) -> str | None:
    return os.path.join(resume_dir, "student") if resume_dir else None
