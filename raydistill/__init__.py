"""raydistill: knowledge distillation of BERT-like encoders on Ray Train and Ray Tune. The Python API
(``raydistill.api``) is named here too, and loaded only when one of its names is asked for: ``python -m
raydistill.sweep`` must not import its own module a second time through the package."""

from __future__ import annotations

API = ("Data", "RunFailed", "UserError", "best_student", "finetune_teacher", "run_distill", "run_sweep")


def __getattr__(name: str):
    if name in API:
        from raydistill import api

        return getattr(api, name)
    raise AttributeError(f"module 'raydistill' has no attribute {name!r}")
