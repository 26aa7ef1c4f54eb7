"""The flags the training commands share (``distill``, ``finetune``, ``sweep``) and how they become a config's
``train`` section, and the local-path rule every command applies to model and data folders."""

from __future__ import annotations

import argparse
import os
from typing import overload

from raydistill.config.schema import RunConfig, TrainConfig

DEFAULTS = TrainConfig()  # the flags' defaults (frozen: one instance serves every parser)


def add_train_args(p: argparse.ArgumentParser, d: TrainConfig = DEFAULTS, general: bool = True) -> None:
    p.add_argument(
        "--task",
        required=True,
        help="task name (sst2, mrpc, rte, stsb, nsmc, korquad, klue_ner, …; "
        "python -m raydistill list tasks)" + (" or 'general'" if general else ""),
    )
    p.add_argument(
        "--data-dir",
        default=None,
        help="local data folder: the GLUE root (with RTE/, SST-2/, …) or the "
        "task's own folder (default: the Hugging Face hub)",
    )
    p.add_argument("--epochs", type=int, default=d.epochs, help="passes over the training rows")
    p.add_argument("--max-steps", type=int, default=d.max_steps, help="cap on optimizer steps (0 = none)")
    p.add_argument("--train-limit", type=int, default=d.train_limit, help="use the first N training examples")
    p.add_argument(
        "--eval-limit",
        type=int,
        default=d.eval_limit,
        help="score at most N rows of each split scored every epoch: the first N of dev and a fixed sample of N of the "
        "validation split (0 = all). A quick run's choice of epoch and trial then rests on fewer rows: noisier",
    )
    p.add_argument("--max-length", type=int, default=d.max_length, help="tokens per example (longer ones are cut)")
    p.add_argument("--batch-size", type=int, default=d.batch_size, help="global batch size, split over the workers")
    p.add_argument("--lr", type=float, default=d.lr, help="peak learning rate (AdamW, linear warm-up and decay)")
    p.add_argument("--seed", type=int, default=d.seed, help="random seed of the run")
    add_selection_args(p, d)
    p.add_argument("--tracking-uri", default=None, help="MLflow URI (default: sqlite file under ./raydistill-results)")
    p.add_argument("--experiment", default="raydistill", help="MLflow experiment to log the run to")


def add_selection_args(p: argparse.ArgumentParser, d: TrainConfig | None = DEFAULTS) -> None:
    """Which split chooses epochs and trials, and how batches are drawn (every training command and the sweep);
    ``d=None``: no defaults (the sweep's flags only override its space)."""
    p.add_argument(
        "--val-fraction",
        type=float,
        default=d.val_fraction if d else None,
        help="share of the training rows held out (stratified, fixed seed) as the validation split that "
        "chooses the best epoch and trial" + (f" (default {d.val_fraction:g})" if d else " (default 0.1)"),
    )
    p.add_argument(
        "--select-on",
        default=d.select_on if d else None,
        help="val: choose on the validation split, report dev; dev: choose and report on dev"
        + (f" (default: {d.select_on})" if d else " (default: val)"),
    )
    p.add_argument(
        "--group-by-length",
        action=argparse.BooleanOptionalAction,
        default=d.group_by_length if d else None,
        help="draw each batch from rows of similar length (megabatches of 50 batches sorted by length, "
        "then shuffled): less padding, faster epochs; --no-group-by-length: batches drawn at random (default: "
        + ("on" if d and d.group_by_length else "off" if d else "the space's train.group_by_length, else on")
        + ")",
    )


def train_config(a, **extra) -> dict:
    """The ``train`` section from the flags every training command shares."""
    return dict(
        epochs=a.epochs,
        max_steps=a.max_steps,
        train_limit=a.train_limit,
        eval_limit=a.eval_limit,
        max_length=a.max_length,
        batch_size=a.batch_size,
        lr=a.lr,
        seed=a.seed,
        val_fraction=a.val_fraction,
        select_on=a.select_on,
        group_by_length=a.group_by_length,
        **extra,
    )


@overload
def local_abspath(path: str) -> str: ...
@overload
def local_abspath(path: None) -> None: ...
def local_abspath(path: str | None) -> str | None:
    """Absolute local paths (Ray workers run in another directory); hub names stay as they are."""
    from raydistill.common.hub import is_local

    return os.path.abspath(path) if path and is_local(path) else path


def add_teacher_args(p: argparse.ArgumentParser) -> None:
    """How the teacher's outputs are produced: the shared cache and the teacher's precision (distill and sweep)."""
    p.add_argument(
        "--teacher-cache", default=None, help="teacher-output cache folder (default ./raydistill-results/teacher-cache)"
    )
    p.add_argument("--no-teacher-cache", action="store_true", help="run the live teacher every step (of every trial)")
    p.add_argument(
        "--teacher-cache-gb",
        type=float,
        default=RunConfig.teacher_cache_gb,
        help="size budget in GiB for full-sequence teacher states and attention scores in the cache",
    )
    p.add_argument(
        "--fp32-teacher",
        action="store_true",
        help="run the teacher in fp32 even where the hardware has native bf16 (default: bf16 autocast there)",
    )


def teacher_cache_dir(a) -> str | None:
    from raydistill.common.paths import results_path

    return (
        None
        if a.no_teacher_cache
        else os.path.abspath(a.teacher_cache)
        if a.teacher_cache
        else results_path("teacher-cache")
    )
