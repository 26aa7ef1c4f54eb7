"""The flags the training commands share (``distill``, ``finetune``, ``sweep``; their values become a request's
``train`` section: ``flags.section``), and the local-path rule every command applies to model and data folders."""

from __future__ import annotations

import argparse
import os
from typing import Any, overload

from raydistill.commands.flags import (
    DEFAULTS,
    SELECTION_FLAGS,
    TRAIN_FLAGS,
    add_fields,
    add_overrides,
    flag,
)
from raydistill.config.schema import TrainConfig
from raydistill.tasks.files import FileData


def add_train_args(p: argparse.ArgumentParser, request: Any, d: TrainConfig = DEFAULTS) -> None:
    """The flags of a training command's run (``request``: its request's defaults, whose fields' metadata declare the
    command's own flags): the task, the train and selection fields, the data, where the run logs."""
    add_fields(p, type(request), ("task", "data_dir"), request)
    add_fields(p, TrainConfig, TRAIN_FLAGS, d)
    add_selection_args(p, d)
    add_data_args(p)
    add_fields(p, type(request), ("tracking_uri", "experiment"), request)


# the fields both training commands' requests declare their flags of (the help of --task: ``task_flag``)
DATA_DIR = {
    "help": "local data folder: the GLUE root (with RTE/, SST-2/, …) or the task's own folder (default: the Hugging "
    "Face hub)"
}
TRACKING_URI = {"help": "MLflow URI (default: sqlite file under ./raydistill-results)"}
EXPERIMENT = {"help": "MLflow experiment to log the run to"}


# the --task of the commands that read a task's data without training on it (evaluate, data)
TASK_OR_FILES = flag("task name (python -m raydistill list tasks); default: none, --train-file names your own data")


def task_flag(general: bool) -> dict[str, Any]:
    """The ``--task`` of a training command: ``general`` where general distillation runs (distill alone)."""
    tasks = "task name (sst2, mrpc, rte, stsb, nsmc, korquad, klue_ner, …; python -m raydistill list tasks)"
    return {"help": tasks + (" or 'general'" if general else "") + "; default: none, --train-file names your own data"}


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


def add_teacher_args(p: argparse.ArgumentParser, request: Any) -> None:
    """How the teacher's outputs are produced: the shared cache and the teacher's precision (distill and sweep; their
    requests' fields, declared with ``orchestrate.request.TEACHER_CACHE`` …)."""
    add_fields(p, type(request), ("teacher_cache",), request)
    # no field of its own: the request's teacher_cache is None with it (``teacher_cache_dir``)
    p.add_argument("--no-teacher-cache", action="store_true", help="run the live teacher every step (of every trial)")
    add_fields(p, type(request), ("teacher_cache_gb", "fp32_teacher"), request)


def teacher_cache_dir(folder: str | None, off: bool = False) -> str | None:
    """The teacher-output cache folder of ``--teacher-cache`` (absolute), else the default under the results folder;
    None with ``--no-teacher-cache``."""
    from raydistill.common.paths import results_path

    if off:
        return None
    return os.path.abspath(folder) if folder else results_path("teacher-cache")
