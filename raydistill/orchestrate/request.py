"""What one sweep is asked to do, as one typed frozen object: the request the sweep command builds from its flags
and the API from its keyword arguments, recorded for ``--resume``."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from raydistill.config.schema import RunConfig
from raydistill.orchestrate.resources import DEFAULT_CPUS_PER_WORKER
from raydistill.tasks.files import FileData

SECOND_OBJECTIVE = {"params": "student_params", "latency": "latency_ms_b1"}  # --multi-objective: minimised
TEACHER_EPOCHS = 3  # the in-sweep teacher fine-tune: raydistill.finetune's defaults
TEACHER_LR = 2e-5


def _flag(help: str, **how: Any) -> dict[str, Any]:
    """A field's flag (``commands/flags.add_fields`` generates it): its help, and how it parses where its type does
    not say (``action``, ``nargs``, ``parsed``: the parse's default where the request's is no flag's, …)."""
    return {"help": help, **how}


# the teacher's flags the sweep and distill share: the request's fields of both are declared with these
TEACHER_CACHE = _flag("teacher-output cache folder (default ./raydistill-results/teacher-cache)")
TEACHER_CACHE_GB = _flag("size budget in GiB for full-sequence teacher states and attention scores in the cache")
FP32_TEACHER = _flag(
    "run the teacher in fp32 even where the hardware has native bf16 (default: bf16 autocast there)",
    action="store_true",
)
INJECT_FAULT = _flag("test hook, see RunConfig.fault", hidden=True)
SWITCH = {"action": "store_true"}  # a request's on/off flag: off unless given


@dataclass(frozen=True)
class SweepRequest:
    """What one sweep is asked to do: the sweep command's flags as typed values (``commands/sweep.py`` builds it from
    its command line, ``raydistill.api.run_sweep`` directly). None: not given (the space's value, else the default).
    A field with ``help`` in its metadata is a flag of the sweep, generated from it (``commands/flags.add_fields``)."""

    space: str = field(
        default="",
        metadata=_flag(
            "a named space shipped with the package (python -m raydistill list spaces) or a YAML path (default with "
            "--resume: the sweep's own)",
            positional=True,
            nargs="?",
            parsed=None,
        ),
    )
    overrides: tuple[tuple[str, Any], ...] = field(  # the space's fields set (--set KEY=VALUE): (dotted key, value)
        default=(),
        metadata=_flag(
            "override a field of the space, e.g. --set student.layers=4 or --set "
            "'distill.temperature={loguniform: [1, 8]}'; repeatable (default: none)",
            flag="set",
            action="append",
            parsed=[],  # the texts typed, read into (key, value) by the command (sweep.request_of)
            metavar="KEY=VALUE",
        ),
    )
    task: str | None = field(
        default=None,
        metadata=_flag(
            "labelled task to distil on (default: the space's task; general distillation runs through python -m "
            "raydistill.distill)"
        ),
    )
    data_dir: str | None = field(
        default=None,
        metadata=_flag(
            "local data folder: the GLUE root or the task's own folder (default: the space's, else the Hugging Face "
            "hub)"
        ),
    )
    teacher: str | None = field(
        default=None,
        metadata=_flag(
            "fine-tuned teacher folder, or a pretrained encoder to fine-tune first (default: the space's teacher, "
            "else bert-base-uncased)"
        ),
    )
    data: FileData = field(default_factory=FileData)  # the user's files or dataset (empty: a built-in task)
    num_samples: int | None = field(default=None, metadata=_flag("trials (default: the space's num_samples)"))
    num_workers: int | None = field(
        default=None, metadata=_flag("DDP workers per trial (default: the space's num_workers, else 1)")
    )
    max_concurrent: int | None = field(
        default=None,
        metadata=_flag("cap on trials running at once (default: as many as the cluster's CPUs and GPUs hold)"),
    )
    use_gpu: bool = field(default=False, metadata=_flag("give every worker a GPU (--gpus-per-worker)", **SWITCH))
    gpus_per_worker: float = field(
        default=1.0,
        metadata=_flag("GPUs per worker with --use-gpu; a fraction such as 0.5 packs small trials on one GPU"),
    )
    cpus_per_worker: float | None = field(
        default=None,
        metadata=_flag(
            f"CPUs (and torch threads) per worker (default {DEFAULT_CPUS_PER_WORKER:g}: on a small CPU machine more "
            "trials at once beat more threads each)"
        ),
    )
    train: tuple[tuple[str, Any], ...] = ()  # train fields given (the train flags): over the space's values
    teacher_epochs: int = field(
        default=TEACHER_EPOCHS,
        metadata=_flag(
            "epochs of the teacher's fine-tune when --teacher has no task head (on all training rows, whatever the "
            f"trials' --max-steps/--train-limit; default {TEACHER_EPOCHS})"
        ),
    )
    teacher_lr: float = field(
        default=TEACHER_LR,
        metadata=_flag(f"learning rate of that fine-tune (default {TEACHER_LR:g}, raydistill.finetune's)"),
    )
    tracking_uri: str | None = field(
        default=None, metadata=_flag("MLflow URI (default: sqlite under ./raydistill-results)")
    )
    experiment: str | None = field(
        default=None,
        metadata=_flag(
            "MLflow experiment (default: SPACE-TASK, e.g. pkd_glue-rte; your own data: the file's name, "
            "pkd_glue-reviews for reviews.csv)"
        ),
    )
    storage_path: str | None = field(
        default=None, metadata=_flag("Ray results folder or s3:// URI (default ./raydistill-results/ray)")
    )
    name: str | None = field(default=None, metadata=_flag("sweep run name (default: SPACE-TASK-timestamp)"))
    resume: bool = field(default=False, metadata=_flag("continue the sweep --name in --storage-path", **SWITCH))
    rerun: bool = field(  # a sweep with a finished twin (identical inputs) trains anew (orchestrate/repeat.py)
        default=False,
        metadata=_flag(
            "train a new sweep even where a finished sweep of the experiment had identical inputs (space, flags, "
            "teacher, data), whose result is otherwise printed again, nothing trained",
            **SWITCH,
        ),
    )
    multi_objective: str | None = field(
        default=None,
        metadata=_flag(
            "optimise the score that chooses trials (val's, unless --select-on dev) and the student's size (params, "
            "the default) or its measured batch-1 latency on this machine (latency): Optuna's multi-objective TPE, "
            "the Pareto front in the summary; no confirmation runs",
            nargs="?",
            const="params",
            choices=sorted(SECOND_OBJECTIVE),
        ),
    )
    verbose: bool = field(default=False, metadata=_flag("Ray Tune's and Ray Train's own progress lines too", **SWITCH))
    placement_strategy: str = field(default="PACK", metadata=_flag("PACK or SPREAD a trial's workers over nodes"))
    max_failures: int = field(
        default=1, metadata=_flag("failures each trial recovers from (a worker lost, a trial process restarted)")
    )
    ray_train_trials: bool = field(
        default=False,
        metadata=_flag(
            "run every trial on Ray Train, even a 1-worker trial (CPU or GPU) on a local Ray, which by default trains "
            "in its Tune trial process, skipping Ray Train's start-up",
            **SWITCH,
        ),
    )
    teacher_cache: str | None = field(default=None, metadata=TEACHER_CACHE)  # the folder (None: no cache)
    teacher_cache_gb: float = field(default=RunConfig.teacher_cache_gb, metadata=TEACHER_CACHE_GB)
    fp32_teacher: bool = field(default=False, metadata=FP32_TEACHER)
    inject_fault: str = field(default="", metadata=INJECT_FAULT)  # test hook, see RunConfig.fault

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
