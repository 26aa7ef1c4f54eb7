"""Which Hugging Face head class fits which task kind."""
from __future__ import annotations

KINDS = ("classification", "regression", "token", "qa")


def auto_class(kind: str):
    """The ``AutoModelFor…`` class for a task kind (``base`` = encoder without a head, ``mlm`` = masked LM)."""
    import transformers as tf

    return {
        "classification": tf.AutoModelForSequenceClassification,
        "regression": tf.AutoModelForSequenceClassification,
        "token": tf.AutoModelForTokenClassification,
        "qa": tf.AutoModelForQuestionAnswering,
        "mlm": tf.AutoModelForMaskedLM,
        "base": tf.AutoModel,
    }[kind]
