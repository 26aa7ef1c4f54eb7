"""The flags the training commands share (``distill``, ``finetune``, ``sweep``; their values become a request's
``train`` section: ``flags.section``), and the local-path rule every command applies to model and data folders."""

from __future__ import annotations

import argparse
import os
from typing import overload

from raydistill.commands.flags import (
    DEFAULTS,
    SELECTION_FLAGS,
    TRAIN_FLAGS,
    add_fields,
    add_overrides,
)
from raydistill.config.schema import RunConfig, TrainConfig
from raydistill.tasks.files import FileData


def add_train_args(p: argparse.ArgumentParser, d: TrainConfig = DEFAULTS, general: bool = True) -> None:
    p.add_argument(
        "--task",
        default=None,
        help="task name (sst2, mrpc, rte, stsb, nsmc, korquad, klue_ner, …; "
        "python -m raydistill list tasks)" + (" or 'general'" if general else "") + "; default: none, --train-file "
        "names your own data",
    )
    p.add_argument(
        "--data-dir",
        default=None,
        help="local data folder: the GLUE root (with RTE/, SST-2/, …) or the "
        "task's own folder (default: the Hugging Face hub)",
    )
    add_fields(p, TrainConfig, TRAIN_FLAGS, d)
    add_selection_args(p, d)
    add_data_args(p)
    p.add_argument("--tracking-uri", default=None, help="MLflow URI (default: sqlite file under ./raydistill-results)")
    p.add_argument("--experiment", default="raydistill", help="MLflow experiment to log the run to")


def add_data_args(p: argparse.ArgumentParser) -> None:
    """Your own data instead of a built-in ``--task``: files with any columns (issue 37), or a dataset by name, and
    token classification on either (issue 38): ``FileData``'s flags."""
    add_fields(p.add_argument_group("your own data (instead of --task)"), FileData)


def add_selection_args(p: argparse.ArgumentParser, d: TrainConfig | None = DEFAULTS) -> None:
    """Which split chooses epochs and trials, and how batches are drawn (every training command and the sweep);
    ``d=None``: no defaults (the sweep's flags only override its space)."""
    if d is None:
        add_overrides(p, SELECTION_FLAGS)
    else:
        add_fields(p, TrainConfig, SELECTION_FLAGS, d)


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


def teacher_cache_dir(folder: str | None, off: bool = False) -> str | None:
    """The teacher-output cache folder of ``--teacher-cache`` (absolute), else the default under the results folder;
    None with ``--no-teacher-cache``."""
    from raydistill.common.paths import results_path

    if off:
        return None
    return os.path.abspath(folder) if folder else results_path("teacher-cache")
