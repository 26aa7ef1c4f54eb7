"""The distillation objective: loss functions (``losses``), student↔teacher layer mappings (``mapping.MAPPINGS``),
methods (``methods.METHODS``) that combine them, and ``objective.build_objective`` that puts teacher, student, method
and learned projections together."""
