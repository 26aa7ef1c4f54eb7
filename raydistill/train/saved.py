"""A saved model folder scored on a task's split, alone (``raydistill evaluate``, and the tests that check an
exported student scores what its run logged): the same ``RunData`` and ``dev_metrics`` a run's epochs score with."""

from __future__ import annotations

from raydistill.common.errors import UserError


def evaluate_dir(
    model_dir: str,
    task_name,
    data_dir: str | None = None,
    max_length: int = 128,
    eval_limit: int = 0,
    batch_size: int = 64,
    split: str | None = None,
) -> dict:
    """``task_name``: a built-in task's name or a ``Task`` (the user's files); ``split`` None = the task's dev set."""
    import torch
    from transformers import AutoTokenizer

    from raydistill.models.encoder import load_model
    from raydistill.tasks import get_task
    from raydistill.train.loop import RunData
    from raydistill.train.scoring import dev_metrics

    task = get_task(task_name) if isinstance(task_name, str) else task_name
    examples = _examples(task, data_dir, split)  # data errors before the model is loaded
    try:
        tok = AutoTokenizer.from_pretrained(model_dir)
    except (OSError, ValueError, TypeError) as e:
        msg = (str(e).strip().splitlines() or [type(e).__name__])[0][:200]
        raise UserError(
            "model",
            f"{model_dir} has no usable tokenizer ({msg}); pass the folder raydistill.best "
            "--export wrote (model + tokenizer)",
        ) from None
    model = load_model(model_dir, task.kind, field="model")
    if eval_limit:
        examples = examples[:eval_limit]
    data = RunData.dev_only(task, examples, tok, max_length)
    return dev_metrics(model, data, batch_size, torch.device("cpu"))


def _examples(task, data_dir, split: str | None) -> list:
    """``split`` None: the task's eval split; ``"holdout"``: the tenth of train a run holds out as dev (the user's
    files without --eval-file), the rows its ``eval_*`` scores; ``"test"``: the --test-file."""
    if split == "holdout":
        from raydistill.data.splits import split_train

        rows, held = split_train(task, data_dir)
        return [rows[i] for i in held.val]
    return task.loader(task, data_dir, split or task.eval_split)
