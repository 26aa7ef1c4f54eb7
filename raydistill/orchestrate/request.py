"""What one sweep is asked to do, as one typed frozen object: the request the sweep command builds from its flags
and the API from its keyword arguments, recorded for ``--resume``."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from raydistill.config.schema import RunConfig
from raydistill.tasks.files import FileData


@dataclass(frozen=True)
class SweepRequest:
    """What one sweep is asked to do: the sweep command's flags as typed values (``commands/sweep.py`` builds it from
    its command line, ``raydistill.api.run_sweep`` directly). None: not given (the space's value, else the default)."""

    space: str = ""
    overrides: tuple[tuple[str, Any], ...] = ()  # the space's fields set (--set KEY=VALUE): (dotted key, value)
    task: str | None = None
    data_dir: str | None = None
    teacher: str | None = None
    data: FileData = field(default_factory=FileData)  # the user's files or dataset (empty: a built-in task)
    num_samples: int | None = None
    num_workers: int | None = None
    max_concurrent: int | None = None
    use_gpu: bool = False
    gpus_per_worker: float = 1.0
    cpus_per_worker: float | None = None
    train: tuple[tuple[str, Any], ...] = ()  # train fields given (the train flags): over the space's values
    teacher_epochs: int = 3  # the in-sweep teacher fine-tune: raydistill.finetune's defaults
    teacher_lr: float = 2e-5
    tracking_uri: str | None = None
    experiment: str | None = None
    storage_path: str | None = None
    name: str | None = None
    resume: bool = False
    rerun: bool = False  # a sweep with a finished twin (identical inputs) trains anew (orchestrate/repeat.py)
    multi_objective: str | None = None
    verbose: bool = False
    placement_strategy: str = "PACK"
    max_failures: int = 1
    ray_train_trials: bool = False
    teacher_cache: str | None = None  # the teacher-output cache folder (None: no cache)
    teacher_cache_gb: float = RunConfig.teacher_cache_gb
    fp32_teacher: bool = False
    inject_fault: str = ""  # test hook, see RunConfig.fault

    def record(self) -> dict[str, Any]:
        """The request as JSON values: what ``--resume`` reads back (``of_record``)."""
        return dataclasses.asdict(self)

    @classmethod
    def of_record(cls, record: dict[str, Any]) -> SweepRequest:
        """A request ``record`` wrote (JSON turned its tuples into lists)."""
        kw = dict(record)
        kw["overrides"] = tuple((k, v) for k, v in kw.get("overrides", ()))
        kw["train"] = tuple((k, v) for k, v in kw.get("train", ()))
        data = dict(kw.get("data") or {})
        kw["data"] = FileData(**{**data, "labels": tuple(data.get("labels", ()))})
        return cls(**kw)
