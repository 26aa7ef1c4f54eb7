"""Check a RunConfig before Ray starts or a GPU is touched: every problem is a one-line UserError."""

from __future__ import annotations

import json
import os

from raydistill.common.errors import UserError, check
from raydistill.common.hub import hub_reachable, is_local
from raydistill.common.paths import check_tracking_uri_path, check_writable
from raydistill.config.schema import RunConfig, split_init
from raydistill.config.sizes import Shape, check_fits
from raydistill.models.heads import SUFFIX as HEADS
from raydistill.models.heads import has_task_head

COPY_INITS = ("first_k", "every_other", "uniform")
ROBERTA_TYPES = ("roberta", "xlm-roberta", "camembert")  # position ids start after the padding index
SIZE_FIELDS = ("num_hidden_layers", "hidden_size", "num_attention_heads", "intermediate_size")


PLACEMENT_STRATEGIES = ("PACK", "SPREAD", "STRICT_PACK", "STRICT_SPREAD")


def check_ray_options(
    placement_strategy: str = "PACK",
    max_failures: int = 0,
    cpus_per_worker: float | None = None,
    gpus_per_worker: float | None = None,
) -> None:
    """Ray scheduling flags, which Ray itself would only reject once the cluster is up (a None: the default)."""
    check(
        placement_strategy in PLACEMENT_STRATEGIES,
        "placement_strategy",
        f"unknown placement strategy {placement_strategy!r}; use one of {', '.join(PLACEMENT_STRATEGIES)}",
    )
    check(max_failures >= -1, "max_failures", f"must be >= 0 (or -1 = retry forever), got {max_failures}")
    check(cpus_per_worker is None or cpus_per_worker > 0, "cpus_per_worker", f"must be > 0, got {cpus_per_worker}")
    check(
        gpus_per_worker is None or gpus_per_worker > 0,
        "gpus_per_worker",
        f"must be > 0 (a fraction such as 0.5 packs trials per GPU), got {gpus_per_worker}",
    )


def teacher_config(name_or_dir: str, field: str = "teacher", trust_remote_code: bool = False):
    """The teacher's config alone (no weights): fast, and enough to check sizes and mappings."""
    from transformers import AutoConfig

    if is_local(name_or_dir):
        hint = (
            "a fine-tuned model directory (python -m raydistill.finetune writes one)"
            if field == "teacher"
            else "a Hugging Face model directory (config.json + weights) or a hub name"
        )
        check(
            not os.path.isfile(name_or_dir),
            field,
            f"{name_or_dir} is a file, not a model folder; pass the folder "
            f"that holds config.json and the weights: {hint}",
        )
        check(os.path.isdir(name_or_dir), field, f"{name_or_dir} does not exist; pass {hint}")
        check(
            os.path.isfile(os.path.join(name_or_dir, "config.json")),
            field,
            f"{name_or_dir} has no config.json; it is not a Hugging Face model directory",
        )
    elif not hub_reachable():
        raise UserError(
            field,
            f"{name_or_dir!r} is not a local directory and the Hugging Face hub is unreachable; "
            f"run offline with a local model and data: --{field} DIR --data-dir DIR "
            "(see README.md#quickstart-minutes-on-a-laptop-cpu-offline)",
        )
    unreadable: tuple[type[Exception], ...] = (OSError, ValueError, KeyError, TypeError, json.JSONDecodeError)
    try:
        from huggingface_hub.errors import StrictDataclassError  # transformers 5: typed config fields

        unreadable += (StrictDataclassError,)
    except ImportError:  # pragma: no cover - older huggingface_hub
        pass
    try:
        cfg = AutoConfig.from_pretrained(name_or_dir, trust_remote_code=trust_remote_code)
    except unreadable as e:
        msg = " ".join(str(e).split())[:240] or type(e).__name__
        raise UserError(field, f"cannot read the config of {name_or_dir}: {msg}") from None
    for name in SIZE_FIELDS:  # a hand-edited config.json with a wrong type would crash later, inside a worker
        v = getattr(cfg, name, None)
        if v is not None:
            check(
                isinstance(v, int) and not isinstance(v, bool) and v > 0,
                field,
                f"{name_or_dir}/config.json has {name}={v!r}; it must be a positive integer (re-save the model "
                "with save_pretrained)",
            )
    return cfg


def max_positions(tcfg) -> int | None:
    """The longest input the teacher's position embeddings allow (RoBERTa reserves padding_idx + 1 of them)."""
    n = getattr(tcfg, "max_position_embeddings", None)
    if not isinstance(n, int) or isinstance(n, bool):
        return None
    if getattr(tcfg, "model_type", "") in ROBERTA_TYPES:
        n -= (getattr(tcfg, "pad_token_id", None) or 1) + 1
    return n


def check_student(cfg: RunConfig, tcfg) -> None:
    s, init = cfg.student, cfg.student.init
    n = tcfg.num_hidden_layers
    check_fits({"layers": s.layers, "hidden": s.hidden}, Shape.of(tcfg))
    if init in COPY_INITS or init.startswith("layers:"):
        if init.startswith("layers:"):
            from raydistill.models.student import init_layers

            init_layers(init, s.layers, n)  # explicit list: one strictly increasing teacher layer per student layer
        for name, want in (
            ("hidden", tcfg.hidden_size),
            ("intermediate", tcfg.intermediate_size),
            ("heads", tcfg.num_attention_heads),
        ):
            check(
                getattr(s, name) == want,
                f"student.{name}",
                f"init {init} copies teacher layers, so {name} must equal the teacher's {want}, not "
                f"{getattr(s, name)}; use --init random or set --student-{name} {want}",
            )
    elif init.startswith("checkpoint:"):
        path = init.split(":", 1)[1]
        check(
            os.path.isfile(os.path.join(path, "config.json")), "student.init", f"checkpoint {path} has no config.json"
        )
        from raydistill.models.encoder import KNOWN_FAMILIES

        ccfg = teacher_config(path, field="init")

        def fam(c):
            return KNOWN_FAMILIES.get(getattr(c, "model_type", ""), getattr(c, "model_type", ""))

        check(
            fam(ccfg) == fam(tcfg) and getattr(ccfg, "vocab_size", None) == getattr(tcfg, "vocab_size", None),
            "init",
            f"checkpoint {path} is a {ccfg.model_type} model with vocab {getattr(ccfg, 'vocab_size', '?')} "
            f"but the teacher is {tcfg.model_type} with vocab {getattr(tcfg, 'vocab_size', '?')}; distil from a "
            "checkpoint of the teacher's family and tokenizer",
        )
    elif split_init(init)[0] == "prune":
        from raydistill.config.sizes import check_shape
        from raydistill.models.prune import parse_arg

        parse_arg(split_init(init)[1])
        check_shape({k: getattr(s, k) for k in ("layers", "hidden", "intermediate", "heads")}, Shape.of(tcfg))
    else:
        check(
            init in ("random", "slice", "pretrained"),
            "student.init",
            f"unknown init {init!r}; use random, slice, "
            "prune, first_k, every_other, uniform, layers:1,3,5 or checkpoint:DIR",
        )
        check(
            init != "slice" or s.intermediate <= tcfg.intermediate_size,
            "student.intermediate",
            f"init slice cuts teacher tensors, so the student's FFN cannot be wider ({s.intermediate}) than the "
            f"teacher's {tcfg.intermediate_size}; lower student.intermediate or use --init random",
        )


def check_unread_flags(cfg: RunConfig, tcfg) -> None:
    """The distill values that need the teacher's shape, checked whatever the method (one that does not read them
    would otherwise ignore a mistyped value): mapping layers within the teacher's, ``teacher_layer`` within its depth,
    ``relation_heads`` dividing its width. The methods that read them check the student's side too."""
    from raydistill.distill.mapping import check_spec
    from raydistill.distill.methods import teacher_layer

    d = cfg.distill
    check_spec(d.mapping, tcfg.num_hidden_layers)
    teacher_layer(d, tcfg.num_hidden_layers)
    check(
        d.relation_heads == 0 or tcfg.hidden_size % d.relation_heads == 0,
        "distill.relation_heads",
        f"{d.relation_heads} relation heads do not divide the teacher's width {tcfg.hidden_size}; pick one that does "
        "(0 = the default: 4x the teacher's attention heads, or the largest count below it that divides both widths)",
    )


def preflight(
    cfg: RunConfig, load_data: bool = True, require_head: bool = True, teacher_field: str = "teacher"
) -> RunConfig:
    """Validate everything cheap to validate; returns the config with its tracking URI resolved.

    ``require_head=False`` skips the check that the teacher is fine-tuned for the task (a sweep fine-tunes a
    plain encoder first); ``teacher_field`` is the name the messages use for ``cfg.teacher`` (``model`` for
    ``raydistill.finetune``)."""
    from raydistill.config.schema import task_of
    from raydistill.distill.methods import get_method
    from raydistill.tracking.uri import resolve_tracking_uri

    cfg.validate()
    method = get_method(cfg.distill.method)
    method.check(cfg)
    task = task_of(cfg)
    check_writable(cfg.output, "output")
    check_tracking_uri_path(cfg.tracking_uri)
    tcfg = teacher_config(cfg.teacher, field=teacher_field)
    _check_teacher(cfg, tcfg, teacher_field)
    _check_init(cfg, tcfg, task, method, require_head, teacher_field)
    _check_method_shapes(cfg, tcfg, method)
    check_unread_flags(cfg, tcfg)
    if load_data or not task.labelled:
        _check_data(cfg, task)
    return cfg.replace(tracking_uri=resolve_tracking_uri(cfg.tracking_uri))


def _check_teacher(cfg: RunConfig, tcfg, teacher_field: str) -> None:
    """An encoder raydistill distils, with position embeddings for ``train.max_length``."""
    check(
        getattr(tcfg, "model_type", "") in ("bert", "roberta", "xlm-roberta", "camembert", "electra"),
        teacher_field,
        f"{cfg.teacher} is a {getattr(tcfg, 'model_type', '?')} model; raydistill distils BERT/RoBERTa encoders",
    )
    limit = max_positions(tcfg)
    check(
        limit is None or cfg.train.max_length <= limit,
        "train.max_length",
        f"{cfg.train.max_length} is longer than the teacher's {limit} position embeddings; pass --max-length {limit} "
        "or less",
    )


def _check_init(cfg: RunConfig, tcfg, task, method, require_head: bool, teacher_field: str) -> None:
    """The student's start against the teacher: a pretrained one (fine-tuning) must not carry another task's head; a
    built one must fit the teacher, whose task head a method that uses the teacher needs."""
    if cfg.student.init == "pretrained" and task.labelled:  # fine-tuning: a head of another task is wrong
        archs = " ".join(getattr(tcfg, "architectures", None) or [])
        check(
            task.kind == "qa" or HEADS[task.kind] not in archs or tcfg.num_labels == task.num_labels,
            teacher_field,
            f"{cfg.teacher} has a {tcfg.num_labels}-label head but {task.name} has {task.num_labels} label(s); "
            "pass a plain pretrained encoder or a model fine-tuned on this task",
        )
    if cfg.student.init != "pretrained":
        check_student(cfg, tcfg)
        if method.uses_teacher and task.labelled and require_head:
            check(
                has_task_head(tcfg, task),
                "teacher",
                f"{cfg.teacher} is not fine-tuned for {task.name} (needs a {HEADS[task.kind]} head with "
                f"{task.num_labels} labels); fine-tune it first: python -m raydistill.finetune --model {cfg.teacher} "
                + (
                    "--output DIR with this run's data flags (--train-file or --dataset, and its columns)"
                    if cfg.data.given
                    else f"--task {task.name} --output DIR"
                ),
            )
        if method.uses_teacher and not cfg.data.given:
            check_label_order(tcfg, task, cfg.teacher)


def check_label_order(tcfg, task, teacher: str) -> None:
    """A built-in task keeps its own label order; a teacher that names the same labels in another order would teach
    swapped soft targets, so it is refused (the user's files are aligned by name instead: ``tasks.files.align``)."""
    names = [str(v) for _, v in sorted((getattr(tcfg, "id2label", None) or {}).items(), key=lambda kv: int(kv[0]))]
    ours = [n.lower() for n in task.label_names]
    theirs = [n.lower() for n in names]
    if ours and sorted(theirs) == sorted(ours) and theirs != ours:
        raise UserError(
            "teacher",
            f"{teacher} names its labels in another order ({', '.join(names)}) than {task.name} "
            f"({', '.join(task.label_names)}); pass the rows as your own files, which align by name (python -m "
            f"raydistill.data split --task {task.name} --output DIR writes them with label names)",
        )


def _check_method_shapes(cfg: RunConfig, tcfg, method) -> None:
    """The method's layer mapping and the shapes it matches between student and teacher."""
    from raydistill.distill.mapping import layer_pairs

    if method.maps_layers:
        layer_pairs(cfg.distill.mapping, cfg.student.layers, tcfg.num_hidden_layers)
    if method.uses_teacher and cfg.student.init != "pretrained" and not cfg.student.init.startswith("checkpoint:"):
        method.check_shapes(
            cfg,
            cfg.student.heads,
            cfg.student.hidden,
            tcfg.num_attention_heads,
            tcfg.hidden_size,
            tcfg.num_hidden_layers,
        )


def _check_data(cfg: RunConfig, task) -> None:
    """The training rows load, and a pruned init scores on no more rows than the run trains on."""
    from raydistill.data.splits import general_examples, prune_sample_size, train_and_eval_examples

    train = train_and_eval_examples(cfg, task)[0] if task.labelled else general_examples(cfg)[0]
    rule, arg = split_init(cfg.student.init)
    if rule == "prune" and arg:  # the sample init prune scores on: no more than the run trains on
        from raydistill.models.prune import parse_arg

        prune_sample_size(parse_arg(arg)[1], len(train))
