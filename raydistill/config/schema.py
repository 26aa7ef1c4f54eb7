"""Typed, frozen run configuration. One RunConfig = one distillation run = one MLflow run.

Loss weights (α, β, T) follow the loss convention written in docs/methods.md ("The loss convention") and nowhere
else; ``LOSS_CONVENTION`` is its short form, logged with every run as ``loss_convention``.

Unset fields (``StudentConfig.init`` "", ``DistillConfig`` temperature / alpha / alpha_mlm None) mean "the method's
default" (``Method.default_init``, ``Method.defaults``); ``RunConfig`` fills them in when it is made, so a run's
params, checkpoints and losses always hold the values it used.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any

from raydistill.common.errors import UserError, check
from raydistill.config.coerce import _coerce, build, field_type_of
from raydistill.config.params import HUB, data_params
from raydistill.tasks.base import Task
from raydistill.tasks.files import FileData

if TYPE_CHECKING:
    pass

LOSS_CONVENTION = "soft=T^2*KL(p_t^T||p_s^T); total=alpha*soft+(1-alpha)*hard+beta*intermediate"


def split_init(init: str | None) -> tuple[str, str]:
    """``student.init`` as (rule, argument): ``prune:block,512`` → ("prune", "block,512"), ``first_k`` → ("first_k",
    "")."""
    name, _, arg = (init or "random").partition(":")
    return name, arg


@dataclass(frozen=True)
class StudentConfig:
    layers: int = 4
    hidden: int = 312
    intermediate: int = 1200
    heads: int = 12
    # random | first_k | every_other | uniform | layers:1,3,5 | slice | prune[:…] | checkpoint:DIR | pretrained; "" =
    # the method's default
    init: str = ""

    def validate(self) -> None:
        for name in ("layers", "hidden", "intermediate", "heads"):
            v = getattr(self, name)
            check(isinstance(v, int) and v > 0, f"student.{name}", f"must be a positive integer, got {v!r}")
        check(
            self.hidden % self.heads == 0,
            "student.hidden",
            f"{self.hidden} is not divisible by student.heads={self.heads}; pick hidden = k·heads",
        )


MINILM_VERSIONS = (1, 2)  # distill.version: 1 = MiniLM, 2 = MiniLMv2
MINILM = {"logged": "minilm"}  # a field's metadata: an MLflow param only for that method (RunConfig.to_params)


@dataclass(frozen=True)
class DistillConfig:
    method: str = "kd"
    temperature: float | None = field(  # None = the method's default (see Method.defaults)
        default=None,
        metadata={
            "help": "softmax temperature of the soft loss (default: the method's: tinybert 1; distilbert on --task "
            "general 2; others 4)"
        },
    )
    alpha: float | None = field(
        default=None,
        metadata={
            "help": "weight of the soft loss; 1-alpha weighs the hard loss (default: the method's: tinybert 1, others "
            "0.5; distilbert on --task general 5, no hard loss)"
        },
    )
    beta: float = field(default=0.0, metadata={"help": "weight of the intermediate (patient) loss (pkd)"})
    mapping: str = field(  # uniform | skip | last | top | bottom | explicit list "2,4,6"
        default="uniform",
        metadata={
            "help": "which teacher layer each student layer learns from (pkd, tinybert, two_stage): uniform | skip | "
            "last | top | bottom | a list of teacher layers such as 3,6,9,12"
        },
    )
    stage: str = field(  # tinybert / two_stage / minilm: all | intermediate | pred
        default="all",
        metadata={
            "help": "all | intermediate | pred: both stages or one of them (tinybert, two_stage, minilm; minilm on "
            "--task general runs intermediate)"
        },
    )
    alpha_cos: float = field(  # DistilBERT cosine weight
        default=1.0, metadata={"help": "weight of distilbert's cosine loss on the last hidden states"}
    )
    alpha_mlm: float | None = field(  # DistilBERT MLM weight (general distillation; default 2 there)
        default=None,
        metadata={
            "help": "MLM weight of distilbert general distillation (default 2, the paper's 5/2/1 with --alpha 5)"
        },
    )
    # tinybert/two_stage/minilm with stage=all: epochs of stage 1 (0 = half). Never an MLflow param: adding one now
    # would change every fine-tuned teacher's fingerprint (teacher/fit.py hashes to_params) and retrain it
    intermediate_epochs: int = field(
        default=0,
        metadata={"logged": False, "help": "epochs of the intermediate stage with --stage all (0 = half of --epochs)"},
    )
    # the MiniLM knobs below are MLflow params (to_params) only for minilm, where they mean something
    # minilm: 1 = MiniLM (attention + value relation), 2 = MiniLMv2 (Q-Q, K-K, V-V relations)
    version: int = field(default=2, metadata={**MINILM, "help": "minilm: 1 = MiniLM, 2 = MiniLMv2 relations"})
    # minilm v2: relation heads (0 = 4 x the teacher's heads, the paper's 48 / 64; see MiniLM)
    relation_heads: int = field(
        default=0,
        metadata={
            **MINILM,
            "help": "minilm v2: relation heads (0 = 4x the teacher's attention heads, MiniLMv2's 48 for a 12-head "
            "base teacher and 64 for a 16-head large one, or the largest count below that dividing both widths)",
        },
    )
    # minilm: relation KL per sequence then batch (the papers') | query (all alike)
    relation_mean: str = field(
        default="sequence",
        metadata={
            **MINILM,
            "help": "minilm: average the relation KL per sequence, then over the batch (sequence, the papers'), or "
            "over every real query of the batch alike (query)",
        },
    )
    # minilm: the teacher layer its relations come from (0 = last, -k = k-th from the top)
    teacher_layer: int = field(
        default=0,
        metadata={**MINILM, "help": "minilm: teacher layer to distil from (0 = last, -k = k-th from the top)"},
    )

    def validate(self, labelled: bool = True) -> None:
        """None fields are unset (the method's default) and pass; a task without labels lets α exceed 1."""
        check(
            self.temperature is None or self.temperature > 0,
            "distill.temperature",
            f"must be > 0, got {self.temperature}",
        )
        if not labelled:  # no hard loss: α is the soft loss's weight beside α_mlm and α_cos
            check(self.alpha is None or self.alpha >= 0, "distill.alpha", f"must be >= 0, got {self.alpha}")
        else:
            check(
                self.alpha is None or 0.0 <= self.alpha <= 1.0, "distill.alpha", f"must be in [0, 1], got {self.alpha}"
            )
        check(self.beta >= 0, "distill.beta", f"must be >= 0, got {self.beta}")
        check(self.alpha_cos >= 0, "distill.alpha_cos", f"must be >= 0, got {self.alpha_cos}")
        check(self.alpha_mlm is None or self.alpha_mlm >= 0, "distill.alpha_mlm", f"must be >= 0, got {self.alpha_mlm}")
        check(
            self.relation_heads >= 0,
            "distill.relation_heads",
            f"must be >= 0 (0 = the method's default), got {self.relation_heads}",
        )
        check(
            self.relation_mean in ("sequence", "query"),
            "distill.relation_mean",
            "must be sequence (each "
            "sequence's mean over its real queries, then the batch mean: the papers') or query, got "
            f"{self.relation_mean!r}",
        )
        check(
            self.stage in ("all", "intermediate", "pred"),
            "distill.stage",
            f"must be one of all, intermediate, pred; got {self.stage!r}",
        )
        # checked for every method, also one that does not read them: a mistyped value is never silently ignored
        check(
            self.version in MINILM_VERSIONS,
            "distill.version",
            f"must be 1 (MiniLM) or 2 (MiniLMv2), got {self.version}",
        )
        check(
            self.intermediate_epochs >= 0,
            "distill.intermediate_epochs",
            f"must be >= 0 (0 = half the epochs), got {self.intermediate_epochs}",
        )
        from raydistill.distill.mapping import check_spec

        check_spec(self.mapping)


@dataclass(frozen=True)
class TrainConfig:
    epochs: int = field(default=3, metadata={"help": "passes over the training rows"})
    max_steps: int = field(default=0, metadata={"help": "cap on optimizer steps (0 = none)"})  # per run
    # rows per epoch (0 = every training row): each epoch then trains a fresh random draw of that many rows and val
    # scores after it. An augmented set is ~21x its task: one pass as one epoch scores val once, at its end, and a
    # student that overfits the near-copies halfway is not the one kept (docs/benchmarks/2026-11-27-transfer.md)
    epoch_rows: int = field(
        default=0,
        metadata={
            "help": "rows per epoch: each epoch trains a fresh random draw of N training rows, then scores val (0 = "
            "every row; N over the set's size: pass after pass of fresh shuffles); on an augmented set, N about the "
            "task's own size scores val as often as a plain run"
        },
    )
    batch_size: int = field(default=32, metadata={"help": "global batch size, split over the workers"})
    lr: float = field(default=5e-5, metadata={"help": "peak learning rate (AdamW, linear warm-up and decay)"})
    weight_decay: float = 0.01
    warmup_ratio: float = 0.1
    max_length: int = field(default=128, metadata={"help": "tokens per example (longer ones are cut)"})
    train_limit: int = field(default=0, metadata={"help": "use the first N training examples"})  # 0 = all
    eval_limit: int = field(
        default=0,
        metadata={
            "help": "score at most N rows of each split scored every epoch: the first N of dev and a fixed sample of "
            "N of the validation split (0 = all). A quick run's choice of epoch and trial then rests on fewer rows: "
            "noisier"
        },
    )
    seed: int = field(default=42, metadata={"help": "random seed of the run"})
    num_workers: int = 1
    use_gpu: bool = False
    bf16: bool = True  # bf16 autocast of the whole step, on GPU
    # the same on a CPU with native bf16 matmul (AMX, AVX512-BF16): faster steps, rounding moves the scores, so opt-in
    # (docs/benchmarks/2026-11-27-augmented-speed.md); a CPU without it trains fp32, and the run's params say so
    cpu_bf16: bool = field(
        default=False,
        metadata={
            "help": "the student step under bf16 autocast on a CPU with native bf16 (AMX, AVX512-BF16), fp32 master "
            "weights: ~1.7x the steps/s on such a CPU, scores move by rounding; elsewhere fp32"
        },
    )
    teacher_bf16: bool = True  # frozen teacher forward under bf16 autocast where native (GPU; CPU AVX512-BF16/AMX)
    # What chooses (best epoch, trial, recipe) never sees what reports: a stratified share of the training rows is the
    # validation split everything chooses on ("val"); the dev set only reports. "dev": choose on dev (the old way).
    val_fraction: float = field(
        default=0.1,
        metadata={
            "help": "share of the training rows held out (stratified, fixed seed) as the validation split that "
            "chooses the best epoch and trial",
            "said": " (default {value:g})",
            "sweep": "plain",
        },
    )
    select_on: str = field(
        default="val",
        metadata={
            "help": "val: choose on the validation split, report dev; dev: choose and report on dev",
            "sweep": "plain",
        },
    )
    # the metric that chooses epochs and trials on that split: "" = the task's main metric; e.g. "macro_f1" where a rare
    # class matters as much as a common one (issue 48). What reports stays the task's metric beside it.
    select_metric: str = field(
        default="",
        metadata={
            "help": "the metric that chooses the best epoch and trial on that split, e.g. macro_f1 (every class counts "
            "the same, however rare); what reports stays the task's metric, macro-F1 beside it",
            "unset": "the task's main metric",
        },
    )
    # batches of similar-length rows (raydistill/data/batches.py): the same rows and steps with fewer padded token
    # slots, so faster epochs (docs/benchmarks/2026-11-24-epoch-speed-mrpc.md)
    group_by_length: bool = field(
        default=True,
        metadata={
            "help": "draw each batch from rows of similar length (megabatches of 50 batches sorted by length, then "
            "shuffled): less padding, faster epochs; --no-group-by-length: batches drawn at random"
        },
    )
    # "unpadded": the forwards that read no attention scores run on the batch's real tokens only
    # (models/packing.py); stages that read scores (TinyBERT's attention loss, MiniLM) stay padded
    attention: str = field(
        default="padded",
        metadata={
            "help": "unpadded: forwards that read no attention scores run on the batch's real tokens only (flash "
            "attention's varlen kernel where the model was loaded with it); stages reading scores stay padded",
            "choices": ("padded", "unpadded"),
        },
    )
    # the loss and optimizer stay eager
    compile: bool = field(default=False, metadata={"help": "torch.compile the student's forward"})
    # a run whose loss goes NaN/inf or explodes, or whose val score sits at the majority floor, stops after that
    # epoch, reported as diverged (train/diverge.py); a teacher's fine-tune never does (teacher/fit.py)
    stop_diverged: bool = field(
        default=True,
        metadata={
            "help": "stop a distillation run (a sweep's trial) after an epoch whose training loss is NaN/inf or over "
            "10x its first step's, or whose validation answers collapsed to one at the majority floor from half its "
            "prediction steps on: reported as "
            "diverged, its student kept; a teacher's fine-tune is never stopped"
        },
    )

    def validate(self) -> None:
        check(self.epochs >= 1, "train.epochs", f"must be >= 1, got {self.epochs}")
        check(self.max_steps >= 0, "train.max_steps", f"must be >= 0, got {self.max_steps}")
        check(self.epoch_rows >= 0, "train.epoch_rows", f"must be >= 0 (0 = every training row), got {self.epoch_rows}")
        check(self.batch_size >= 1, "train.batch_size", f"must be >= 1, got {self.batch_size}")
        check(self.lr > 0, "train.lr", f"must be > 0, got {self.lr}")
        check(self.max_length >= 8, "train.max_length", f"must be >= 8, got {self.max_length}")
        check(self.num_workers >= 1, "train.num_workers", f"must be >= 1, got {self.num_workers}")
        check(
            self.batch_size % self.num_workers == 0,
            "train.batch_size",
            f"the global batch {self.batch_size} does not split evenly over num_workers={self.num_workers}; pass "
            f"--batch-size {max(self.num_workers, self.batch_size // self.num_workers * self.num_workers)}",
        )
        check(self.train_limit >= 0, "train.train_limit", f"must be >= 0 (0 = all), got {self.train_limit}")
        check(self.eval_limit >= 0, "train.eval_limit", f"must be >= 0 (0 = all), got {self.eval_limit}")
        check(
            0 < self.val_fraction <= 0.5,
            "train.val_fraction",
            f"must be in (0, 0.5] (the share of the training "
            f"rows held out to choose epochs and trials on), got {self.val_fraction}; pass --val-fraction 0.1",
        )
        check(
            self.attention in ATTENTION_LAYOUTS,
            "train.attention",
            f"must be one of {', '.join(ATTENTION_LAYOUTS)}, got {self.attention!r}; pass --attention unpadded "
            "(real tokens only) or padded",
        )
        check(
            self.select_on in SELECT_ON,
            "train.select_on",
            f"must be one of {', '.join(SELECT_ON)}, got "
            f"{self.select_on!r}; pass --select-on val (choose on a split carved from train) or dev",
        )


@dataclass(frozen=True)
class RunConfig:
    task: str
    teacher: str
    data_dir: str | None = None
    student: StudentConfig = field(default_factory=StudentConfig)
    distill: DistillConfig = field(default_factory=DistillConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    # the user's own files (issue 37) or a dataset by name (issue 38): the whole task as data, so it reaches every
    # worker as the config does; neither means the built-in ``task``
    data: FileData = field(default_factory=FileData)
    output: str = "outputs/run"
    tracking_uri: str | None = None
    experiment: str = "raydistill"
    run_name: str | None = None
    parent_run_id: str | None = None
    augment_dir: str | None = None  # folder of augmented training data (TinyBERT)
    unlabeled_text: str | None = None  # general distillation corpus (one text per line)
    teacher_cache: str | None = None  # folder of cached teacher outputs
    teacher_cache_gb: float = 4.0  # size budget for full-sequence teacher states/scores in that folder
    # Test hook for fault-injection tests, never set in normal use: "nan:epoch=1" makes that epoch's loss NaN;
    # "kill:rank=1,epoch=2,step=1,once=PATH" hard-kills that worker once (PATH marks that it happened).
    fault: str = ""

    def __post_init__(self) -> None:
        # The unset fields filled from the method, once (its registry's ``with_defaults``): every reader then sees
        # numbers and a concrete init. ``dataclasses.replace`` comes through here too: a trial's config gets its own
        # method's defaults.
        from raydistill.distill.methods.registry import with_defaults

        distill, student = with_defaults(self.distill, self.student, labelled=_labelled(self.task))
        object.__setattr__(self, "distill", distill)
        object.__setattr__(self, "student", student)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> RunConfig:
        """The one way from a dict (CLI flags, a space's data section) to a config: unknown keys are refused and values
        coerced to their field's type, errors naming the field as ``section.field``; a section may be a dict or a
        section object; the method's defaults fill unset fields; validated. A sampled trial needs no dict: it is the
        sweep's base config with its sections replaced (``space.trial_config``)."""
        known = {f.name for f in fields(cls)}
        for k in d:
            check(k in known, k, f"unknown key; known keys: {', '.join(sorted(known))}")
        kw = dict(d)
        for sec, sec_cls in SECTIONS.items():
            v = kw.get(sec) or {}
            if isinstance(v, sec_cls):
                v = dataclasses.asdict(v)
            check(isinstance(v, dict), sec, f"must be a mapping of {sec} fields, got {v!r}")
            kw[sec] = build(sec_cls, v, f"{sec}.")
        kw["data"], kw["task"] = _data_task(kw["data"], kw.get("task"), kw.get("teacher"))
        check(
            bool(kw.get("task")),
            "task",
            "is required: --task NAME, or --train-file FILE / --dataset NAME for your own data",
        )
        check(bool(kw.get("teacher")), "teacher", "is required (--teacher)")
        if "teacher_cache_gb" in kw:
            kw["teacher_cache_gb"] = _coerce(kw["teacher_cache_gb"], float, "teacher_cache_gb")
        return cls(**kw).validate()

    def to_dict(self) -> dict[str, Any]:
        """Plain values, nested by section: what ``from_dict`` reads back (Tune configs, checkpoints)."""
        return dataclasses.asdict(self)

    def validate(self) -> RunConfig:
        from raydistill.distill.methods import get_method

        get_method(self.distill.method)
        self.student.validate()
        self.distill.validate(_labelled(self.task))
        self.train.validate()
        self._check_select_metric()
        check(self.teacher_cache_gb >= 0, "teacher_cache_gb", f"must be >= 0 GiB, got {self.teacher_cache_gb}")
        return self

    def _check_select_metric(self) -> None:
        """``train.select_metric`` is one the task's runs score (``tasks.metrics.reported``: its metrics, and macro-F1
        for a task with classes)."""
        if not self.train.select_metric:
            return
        from raydistill.tasks.metrics import reported

        allowed = reported(task_of(self))
        check(
            self.train.select_metric in allowed,
            "train.select_metric",
            f"{self.train.select_metric!r} is not scored for task {self.task}; pass --select-metric one of "
            f"{', '.join(allowed)} (or leave it out: the task's main metric)",
        )

    def replace(self, **kw: Any) -> RunConfig:
        return dataclasses.replace(self, **kw)

    def to_params(self) -> dict[str, str]:
        """Flat MLflow params, one per field of the student, distill and train sections under its ``param_name``
        (see DESIGN conventions), less the fields marked ``logged`` False or logged only for another method."""
        p: dict[str, Any] = {
            "task": self.task,
            "teacher": self.teacher,
            "data_dir": self.data_dir or ("" if self.data.train_file else HUB),  # the user's files: data params
        }
        for sec in ("distill", "student", "train"):
            section = getattr(self, sec)
            for f in fields(section):
                only = f.metadata.get("logged", True)
                if only is True or only == self.distill.method:
                    p[param_name(sec, f.name)] = getattr(section, f.name)
        p["loss_convention"] = LOSS_CONVENTION
        p["augment_dir"] = self.augment_dir or ""
        p.update(data_params(self.data))
        return {k: str(v) for k, v in p.items()}


def param_name(section: str, name: str) -> str:
    """A section field's flat name: Optuna's parameter, the Tune config's key and the MLflow param alike
    (``student.layers`` → ``student_layers``; ``student.init`` → ``init``; a distill or train field its own name)."""
    return f"student_{name}" if section == "student" and name != "init" else name


# flat name → (section, field), for every field a trial's sampled values can set; the sections' names never collide
FIELD_OF: dict[str, tuple[str, str]] = {
    param_name(sec, f.name): (sec, f.name)
    for sec, cls in (("student", StudentConfig), ("distill", DistillConfig), ("train", TrainConfig))
    for f in fields(cls)
}
assert len(FIELD_OF) == sum(len(fields(c)) for c in (StudentConfig, DistillConfig, TrainConfig))


def _data_task(data: FileData, task: str | None, teacher: str | None) -> tuple[FileData, str | None]:
    """The user's data completed once (read, columns guessed, labels found and aligned with the teacher's:
    ``tasks.files.resolve``) and the task name it stands for; a built-in task named beside it is refused."""
    if not data.given:
        return data, task
    from raydistill.tasks.files import resolve, task_name

    if task and task != task_name(data):
        raise UserError("task", f"--task {task} and {data.flag} both name the data; give one of them")
    data = data if data.fingerprint else resolve(data, teacher)
    return data, task_name(data)


def task_of(cfg: RunConfig) -> Task:
    """The ``Task`` record of a config: the user's data (``cfg.data``) or the built-in task ``cfg.task``."""
    from raydistill.tasks import make_task

    return make_task(cfg.task, cfg.data)


def _labelled(task: str) -> bool:
    """Whether ``task`` has gold labels (an unknown name counts as labelled; preflight names it)."""
    from raydistill.tasks import TASKS

    t = TASKS.get(task)
    return t is None or t.labelled


SELECT_ON = ("val", "dev")  # the split that chooses epochs, trials and recipes
ATTENTION_LAYOUTS = ("padded", "unpadded")  # train.attention: what the forwards without attention scores see
SECTIONS: dict[str, type[StudentConfig | DistillConfig | TrainConfig | FileData]] = {
    "student": StudentConfig,
    "distill": DistillConfig,
    "train": TrainConfig,
    "data": FileData,
}


def field_type(section: str, name: str) -> type[Any] | None:
    """The type a value of ``section.name`` is coerced to (``float`` for ``distill.temperature``)."""
    cls = SECTIONS[section]
    return field_type_of(cls, next(f for f in fields(cls) if f.name == name))
