"""Check a RunConfig before Ray starts or a GPU is touched: every problem is a one-line UserError."""
from __future__ import annotations

import json
import os

from .config import RunConfig
from .errors import UserError, check
from .hub import hub_reachable, is_local

COPY_INITS = ("first_k", "every_other", "uniform")
HEADS = {"classification": "ForSequenceClassification", "regression": "ForSequenceClassification",
         "token": "ForTokenClassification", "qa": "ForQuestionAnswering"}


def has_task_head(tcfg, task) -> bool:
    """Whether a teacher config is already fine-tuned for ``task`` (right head type and label count)."""
    archs = getattr(tcfg, "architectures", None) or []
    if not any(a.endswith(HEADS[task.kind]) for a in archs):
        return False
    return task.kind == "qa" or tcfg.num_labels == task.num_labels


def teacher_config(name_or_dir: str, field: str = "teacher", trust_remote_code: bool = False):
    """The teacher's config alone (no weights): fast, and enough to check sizes and mappings."""
    from transformers import AutoConfig

    if is_local(name_or_dir):
        check(os.path.isdir(name_or_dir), field, f"{name_or_dir} does not exist; pass a fine-tuned model directory "
              "(python -m raydistill.finetune writes one)")
        check(os.path.isfile(os.path.join(name_or_dir, "config.json")), field,
              f"{name_or_dir} has no config.json; it is not a Hugging Face model directory")
    elif not hub_reachable():
        raise UserError(field, f"{name_or_dir!r} is not a local directory and the Hugging Face hub is unreachable; "
                        "run offline with a local model and data: --teacher DIR --data-dir DIR (see README, Offline)")
    try:
        return AutoConfig.from_pretrained(name_or_dir, trust_remote_code=trust_remote_code)
    except (OSError, ValueError, KeyError, json.JSONDecodeError) as e:
        msg = str(e).splitlines()[0][:200]
        raise UserError(field, f"cannot read the config of {name_or_dir}: {msg}") from None


def check_student(cfg: RunConfig, tcfg) -> None:
    s, init = cfg.student, cfg.student.init
    n = tcfg.num_hidden_layers
    check(s.layers <= n, "student.layers", f"{s.layers} is more than the teacher's {n} layers; a student must be smaller")
    check(s.hidden <= tcfg.hidden_size, "student.hidden",
          f"{s.hidden} is wider than the teacher's {tcfg.hidden_size}; a student must be smaller")
    if init in COPY_INITS or init.startswith("layers:"):
        for name, want in (("hidden", tcfg.hidden_size), ("intermediate", tcfg.intermediate_size),
                           ("heads", tcfg.num_attention_heads)):
            check(getattr(s, name) == want, f"student.{name}",
                  f"init {init} copies teacher layers, so {name} must equal the teacher's {want}, not "
                  f"{getattr(s, name)}; use --init random or set --student-{name} {want}")
    elif init.startswith("checkpoint:"):
        path = init.split(":", 1)[1]
        check(os.path.isfile(os.path.join(path, "config.json")), "init", f"checkpoint {path} has no config.json")
    else:
        check(init in ("random", "pretrained"), "init", f"unknown init {init!r}; use random, first_k, every_other, "
              "uniform, layers:1,3,5 or checkpoint:DIR")


def preflight(cfg: RunConfig, load_data: bool = True) -> RunConfig:
    """Validate everything cheap to validate; returns the config with its tracking URI resolved."""
    from .distill.mapping import layer_pairs
    from .distill.methods import get_method
    from .track import resolve_tracking_uri

    cfg.validate()
    method = get_method(cfg.distill.method)
    if cfg.task != "general":
        from .tasks import get_task

        task = get_task(cfg.task)
    tcfg = teacher_config(cfg.teacher)
    check(getattr(tcfg, "model_type", "") in ("bert", "roberta", "xlm-roberta", "camembert", "electra"), "teacher",
          f"{cfg.teacher} is a {getattr(tcfg, 'model_type', '?')} model; raydistill distils BERT/RoBERTa encoders")
    if cfg.student.init != "pretrained":
        check_student(cfg, tcfg)
        if method.uses_teacher and cfg.task != "general":
            check(has_task_head(tcfg, task), "teacher",
                  f"{cfg.teacher} is not fine-tuned for {task.name} (needs a {HEADS[task.kind]} head with "
                  f"{task.num_labels} labels); fine-tune it first: python -m raydistill.finetune --task {task.name} "
                  f"--model {cfg.teacher} --output DIR")
    if method.intermediate or method.name == "pkd":
        layer_pairs(cfg.distill.mapping, cfg.student.layers, tcfg.num_hidden_layers)
    if method.intermediate:
        check(cfg.student.heads == tcfg.num_attention_heads, "student.heads",
              f"{method.name} matches attention scores head by head: use the teacher's {tcfg.num_attention_heads} heads")
    if load_data and cfg.task != "general":
        from .distill.data import train_and_eval_examples

        train_and_eval_examples(cfg, task)
    if cfg.task == "general":
        from .distill.data import general_examples

        general_examples(cfg)
    return cfg.replace(tracking_uri=resolve_tracking_uri(cfg.tracking_uri))
