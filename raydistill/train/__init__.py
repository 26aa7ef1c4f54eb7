"""One distillation or fine-tune run as plain PyTorch, no Ray: the per-worker loop, the step, the objective (teacher,
student, method, projections), checkpoints, scoring on val and dev, precision, the teacher-output cache, and the
checks before a run (``preflight``). Fine-tuning a teacher is ``raydistill.teacher``'s."""
