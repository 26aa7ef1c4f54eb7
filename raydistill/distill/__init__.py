"""Distillation objectives: loss functions (``losses.LOSSES``) and student↔teacher layer mappings
(``mapping.MAPPINGS``)."""
