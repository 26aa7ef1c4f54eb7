"""A sweep's plan from its request, all of it settled before Ray starts: the task and the data it runs on, the base
config every trial shares before the space's draws, the objective a trial is chosen on, and what one trial asks of
the cluster (its counts and Ray options checked). ``orchestrate.driver.Sweep.plan`` puts them together."""

from __future__ import annotations

import os
from typing import Any

from raydistill.common.errors import check
from raydistill.config.schema import RunConfig
from raydistill.orchestrate.request import SweepRequest
from raydistill.orchestrate.resources import DEFAULT_CPUS_PER_WORKER, TrialDemand
from raydistill.tasks.files import FileData
from raydistill.tracking.uri import resolve_tracking_uri


def task_and_data(a: SweepRequest, spec: Any, teacher: str) -> tuple[Any, FileData]:
    """The task of the sweep and its data section: the user's data (the flags', else the space's ``data``: files or a
    dataset, read and checked here, once), else the flag's task, else the space's; none of them is the user's
    error."""
    from raydistill.config.coerce import build
    from raydistill.tasks import get_task
    from raydistill.tasks.files import file_task, resolve

    if a.data.given or spec.data:  # the space's task is a default the files replace; a --task beside them is refused
        files = a.data if a.data.given else build(FileData, spec.data, "data.")
        check(not a.task, "task", f"--task {a.task} and {files.flag} both name the data; give one of them")
        files = resolve(files, teacher)
        return file_task(files), files
    task_name = a.task or spec.task
    check(bool(task_name), "task", "the space names no task; pass --task (e.g. --task rte)")
    assert task_name is not None  # (check refused it otherwise)
    return get_task(task_name), FileData()


def default_experiment(space: str, task: str, state: dict[str, Any]) -> str:
    """A sweep's MLflow experiment without ``--experiment``: the space and what it ran on (``pkd_glue-rte``,
    ``pkd_glue-reviews`` for reviews.csv), so sweeps of other tasks or data are not ranked together by ``best``. A
    resumed sweep keeps its own: the one its record names, or the space's name for one an older raydistill started."""
    if state.get("parent_run_id"):
        return str(state.get("experiment") or space)
    return f"{space}-{task.removeprefix('file-')}"


def trial_demand(a: SweepRequest, n_samples: int) -> TrialDemand:
    """What one trial asks of the cluster, its counts and Ray options checked."""
    from raydistill.train.preflight import check_ray_options

    _check_counts(a, n_samples)
    cpus = DEFAULT_CPUS_PER_WORKER if a.cpus_per_worker is None else a.cpus_per_worker  # 0 is refused, not 1
    demand = TrialDemand(_workers(a), cpus, a.gpus_per_worker if a.use_gpu else None)
    check_ray_options(a.placement_strategy, a.max_failures, demand.cpus_per_worker, demand.gpus_per_worker)
    _check_gpu_share(a)
    return demand


def base_config(a: SweepRequest, spec: Any, task: str, teacher: str, output: str, data: FileData) -> RunConfig:
    """What every trial shares before the space's draws: task, teacher, data, the train flags, MLflow, output."""
    return RunConfig.from_dict(
        dict(
            task=task,
            teacher=teacher,
            data_dir=os.path.abspath(a.data_dir) if a.data_dir else spec.data_dir,
            data=data,
            train=_train_section(a, spec),
            tracking_uri=resolve_tracking_uri(a.tracking_uri),
            experiment=a.experiment,
            output=output,
            fault=a.inject_fault,
            teacher_cache=a.teacher_cache,
            teacher_cache_gb=a.teacher_cache_gb,
        )
    )


def objective_of(spec: Any, task: Any, base: RunConfig) -> str:
    """A trial is worth its best epoch (the student it exports), chosen on the validation split: the space's metric,
    else the task's main one."""
    from raydistill.selection.runs import as_final, objective

    chosen = base.train.select_metric or task.main_metric  # --select-metric / the space's train.select_metric
    if not spec.metric:
        return objective(chosen, base.train.select_on)
    metric = as_final(spec.metric, "metric")
    # a space ranking its trials on dev would choose on the split that reports while every epoch is chosen on val
    check(
        not metric.startswith("best_eval_") or base.train.select_on == "dev",
        "metric",
        f"{spec.metric!r} ranks trials on dev, the split that reports; use {metric.replace('best_eval_', 'best_val_')} "
        "(the validation split), or pass --select-on dev to choose on dev knowingly",
    )
    return metric


def _train_section(a: SweepRequest, spec: Any) -> dict[str, Any]:
    """The base config's ``train``: the space's fixed values, then the train fields given."""
    fixed = spec.fixed("train")
    flags = {k: v for k, v in a.train if v is not None}
    if a.fp32_teacher:
        flags["teacher_bf16"] = False
    return {**fixed, **flags, "num_workers": a.num_workers, "use_gpu": a.use_gpu}


def _check_counts(a: SweepRequest, n_samples: int) -> None:
    check(n_samples >= 1, "num_samples", "must be >= 1")
    check(
        a.max_concurrent is None or a.max_concurrent >= 1,
        "max_concurrent",
        f"must be >= 1 (or left out: as many trials as the cluster holds), got {a.max_concurrent}",
    )


def _workers(a: SweepRequest) -> int:
    """The workers per trial, settled by ``plan`` (the flag, else the space's, else 1)."""
    assert a.num_workers is not None
    return a.num_workers


def _check_gpu_share(a: SweepRequest) -> None:
    check(
        not (a.use_gpu and _workers(a) > 1 and a.gpus_per_worker < 1),
        "gpus_per_worker",
        f"{a.num_workers} DDP workers at {a.gpus_per_worker:g} GPU each could share one GPU, which NCCL refuses; pack "
        "1-worker trials with a fraction (--num-workers 1), or give each worker a whole GPU (--gpus-per-worker 1)",
    )
