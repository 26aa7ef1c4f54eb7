"""python -m raydistill.evaluate --model DIR --task TASK: dev metrics of a saved model directory alone.

Used to check that an exported student scores what its MLflow run logged. Last stdout line: JSON metrics.
"""
from __future__ import annotations

import argparse
import json

from .errors import cli


def evaluate_dir(model_dir: str, task_name: str, data_dir: str | None = None, max_length: int = 128,
                 eval_limit: int = 0, batch_size: int = 64) -> dict:
    import torch
    from transformers import AutoTokenizer

    from .loop import Data, evaluate
    from .models.teacher import load_model
    from .tasks import get_task
    from .tasks.encode import encode

    task = get_task(task_name)
    tok = AutoTokenizer.from_pretrained(model_dir)
    model = load_model(model_dir, task.kind)
    examples = task.loader(task, data_dir, task.eval_split)
    if eval_limit:
        examples = examples[:eval_limit]
    data = Data(task, [], examples, encode(task, examples, tok, max_length), tok.pad_token_id or 0)
    return evaluate(model, data, batch_size, torch.device("cpu"))


@cli
def main(argv=None) -> dict:
    p = argparse.ArgumentParser(prog="python -m raydistill.evaluate", description=__doc__)
    p.add_argument("--model", required=True)
    p.add_argument("--task", required=True)
    p.add_argument("--data-dir")
    p.add_argument("--max-length", type=int, default=128)
    p.add_argument("--eval-limit", type=int, default=0)
    a = p.parse_args(argv)
    from .preflight import teacher_config

    teacher_config(a.model, field="model")
    out = evaluate_dir(a.model, a.task, a.data_dir, a.max_length, a.eval_limit)
    print(json.dumps(out), flush=True)
    return out


if __name__ == "__main__":
    main()
