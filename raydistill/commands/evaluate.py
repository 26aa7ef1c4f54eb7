"""python -m raydistill.evaluate --model DIR --task TASK: dev metrics of a saved model directory alone.

Used to check that an exported student scores what its MLflow run logged. Last stdout line: JSON metrics.
"""

from __future__ import annotations

import json

from raydistill.commands.args import add_data_args
from raydistill.commands.cli import HelpFormatter, Parser, cli
from raydistill.common.errors import check
from raydistill.train.saved import evaluate_dir


def _task(a):
    """The built-in ``--task``, or the user's files described as a run describes them (``--train-file`` gives the
    labels and their order)."""
    from raydistill.commands.flags import data_of
    from raydistill.config.schema import RunConfig, task_of
    from raydistill.tasks import get_task

    data = data_of(a)
    if not data.given:
        check(bool(a.task), "task", "is required: --task NAME, or --train-file FILE / --dataset NAME for your own data")
        return get_task(a.task)
    return task_of(RunConfig.from_dict({"task": a.task, "teacher": a.model, "data": data}))


@cli
def main(argv=None) -> dict:
    p = Parser(
        prog="python -m raydistill.evaluate",
        formatter_class=HelpFormatter,
        description=(
            "Score a saved model folder (a teacher, or a student written by python -m raydistill.best --export) on a "
            "task's dev set, e.g. to check that an exported student scores what its MLflow run logged. Prints the "
            "metrics as one JSON object on the last line of stdout."
        ),
    )
    p.add_argument(
        "--model", required=True, help="model folder with a head for the task (config.json, weights, tokenizer)"
    )
    p.add_argument(
        "--task", help="task name (python -m raydistill list tasks); default: none, --train-file names your own data"
    )
    p.add_argument(
        "--data-dir", help="local data folder: the GLUE root or the task's own folder (default: the Hugging Face hub)"
    )
    p.add_argument("--max-length", type=int, default=128, help="tokens per example (longer ones are cut)")
    p.add_argument("--eval-limit", type=int, default=0, help="score only the first N dev examples (0 = all)")
    p.add_argument(
        "--split", choices=("dev", "test"), default="dev", help="your own data: the --eval-file (dev) or --test-file"
    )
    add_data_args(p)
    a = p.parse_args(argv)
    from raydistill.models.heads import SUFFIX as HEADS
    from raydistill.models.heads import has_task_head
    from raydistill.train.preflight import max_positions, teacher_config

    task = _task(a)
    check(a.max_length >= 8, "max_length", f"must be >= 8, got {a.max_length}")
    check(a.eval_limit >= 0, "eval_limit", f"must be >= 0 (0 = all), got {a.eval_limit}")
    tcfg = teacher_config(a.model, field="model")
    check(
        has_task_head(tcfg, task),
        "model",
        f"{a.model} has no {task.name} head (needs {HEADS[task.kind]} with {task.num_labels} labels), so its "
        "predictions would be random; pass a model fine-tuned or distilled on this task",
    )
    limit = max_positions(tcfg)
    check(
        limit is None or a.max_length <= limit,
        "max_length",
        f"{a.max_length} is longer than the model's {limit} position embeddings; pass --max-length {limit} or less",
    )
    split = "test" if a.split == "test" else ("holdout" if a.train_file and not a.eval_file else None)
    out = evaluate_dir(a.model, task, a.data_dir, a.max_length, a.eval_limit, split=split)
    if split == "test":  # eval_* names the dev set everywhere else; the test file's scores must not pass for it
        out = {"test_" + k.removeprefix("eval_"): v for k, v in out.items()}
    from raydistill.tasks.files import report

    report()  # the columns guessed in the user's files
    print(json.dumps(out), flush=True)
    return out


if __name__ == "__main__":
    main()
