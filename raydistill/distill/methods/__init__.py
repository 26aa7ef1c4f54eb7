"""Distillation methods: which features each needs and how its losses combine. One module per method (``finetune``,
``kd``, ``distilbert``, ``pkd``, ``tinybert``, ``two_stage``, ``minilm``) beside ``registry`` (``METHODS``,
``register``, ``get_method``) and ``base`` (``Outputs``, ``Needs``, the prediction losses, ``Method``). Importing this
package imports every method module, so ``METHODS`` is complete; callers import from here.

Weights follow the loss convention (docs/methods.md, "The loss convention"). Components are returned unweighted
(logged as ``train_<name>``) next to the weighted ``loss`` that is optimised.
"""

from __future__ import annotations

from raydistill.distill.methods.base import Method, Needs, Outputs, gold_loss, logit_mse, soft_loss
from raydistill.distill.methods.distilbert import DistilBERT
from raydistill.distill.methods.finetune import FineTune
from raydistill.distill.methods.kd import HintonKD, kd_losses
from raydistill.distill.methods.minilm import MiniLM, relation_heads, teacher_layer
from raydistill.distill.methods.pkd import PatientKD
from raydistill.distill.methods.registry import METHODS, get_method, register
from raydistill.distill.methods.tinybert import TinyBERT
from raydistill.distill.methods.two_stage import TwoStage

# every method and what callers need of them, from one package (importing each module registers its method)
__all__ = [
    "METHODS",
    "DistilBERT",
    "FineTune",
    "HintonKD",
    "Method",
    "MiniLM",
    "Needs",
    "Outputs",
    "PatientKD",
    "TinyBERT",
    "TwoStage",
    "get_method",
    "gold_loss",
    "kd_losses",
    "logit_mse",
    "register",
    "relation_heads",
    "soft_loss",
    "teacher_layer",
]
