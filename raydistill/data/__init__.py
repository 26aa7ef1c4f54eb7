"""Training data: a task's splits (train, validation carved from train, dev), general distillation's raw text, batches,
and data augmentation. ``python -m raydistill.data summary`` is this stage's command."""
