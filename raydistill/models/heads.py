"""Which Hugging Face head fits which task kind: the ``AutoModelFor…`` class to load it with, and the suffix its
``architectures`` entry carries once fine-tuned (how a checkpoint's head is recognised)."""

from __future__ import annotations

_AUTO = {
    "classification": "AutoModelForSequenceClassification",
    "regression": "AutoModelForSequenceClassification",
    "token": "AutoModelForTokenClassification",
    "qa": "AutoModelForQuestionAnswering",
    "mlm": "AutoModelForMaskedLM",
    "base": "AutoModel",
}
KINDS = tuple(_AUTO)  # task kinds, plus ``base`` = the encoder without a head
SUFFIX = {k: v[len("AutoModel") :] for k, v in _AUTO.items() if k != "base"}  # "ForSequenceClassification", …


def auto_class(kind: str):
    """The ``AutoModelFor…`` class for a task kind (``base`` = encoder without a head, ``mlm`` = masked LM)."""
    import transformers

    return getattr(transformers, _AUTO[kind])


def has_task_head(tcfg, task) -> bool:
    """Whether a teacher config is already fine-tuned for ``task`` (right head type and label count)."""
    archs = getattr(tcfg, "architectures", None) or []
    if not any(a.endswith(SUFFIX[task.kind]) for a in archs):
        return False
    return task.kind == "qa" or tcfg.num_labels == task.num_labels
