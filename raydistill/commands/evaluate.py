"""python -m raydistill.evaluate --model DIR --task TASK: dev metrics of a saved model directory alone.

Used to check that an exported student scores what its MLflow run logged. Last stdout line: JSON metrics.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from raydistill.commands.args import TASK_OR_FILES, add_data_args
from raydistill.commands.cli import HelpFormatter, Parser, cli
from raydistill.commands.flags import add_fields, data_of, flag, request_from
from raydistill.common.errors import check
from raydistill.tasks.filedata import FileData
from raydistill.train.saved import evaluate_dir


@dataclass(frozen=True)
class EvaluateRequest:
    """What one scoring of a saved model is asked to do: the evaluate command's flags as typed values (a field with
    ``help`` in its metadata is a flag of the command, generated from it)."""

    model: str = field(
        default="",
        metadata=flag("model folder with a head for the task (config.json, weights, tokenizer)", required=True),
    )
    task: str | None = field(default=None, metadata=TASK_OR_FILES)
    data_dir: str | None = field(
        default=None,
        metadata=flag("local data folder: the GLUE root or the task's own folder (default: the Hugging Face hub)"),
    )
    max_length: int = field(default=128, metadata=flag("tokens per example (longer ones are cut)"))
    eval_limit: int = field(default=0, metadata=flag("score only the first N dev examples (0 = all)"))
    split: str = field(
        default="dev", metadata=flag("your own data: the --eval-file (dev) or --test-file", choices=("dev", "test"))
    )
    data: FileData = field(default_factory=FileData)  # the user's files or dataset (empty: a built-in task)


D = EvaluateRequest()  # the flags' defaults: the request's own


def _task(r: EvaluateRequest):
    """The built-in ``--task``, or the user's files described as a run describes them (``--train-file`` gives the
    labels and their order)."""
    from raydistill.config.schema import RunConfig, task_of
    from raydistill.tasks import get_task

    if not r.data.given:
        check(bool(r.task), "task", "is required: --task NAME, or --train-file FILE / --dataset NAME for your own data")
        assert r.task is not None  # (check refused it otherwise)
        return get_task(r.task)
    return task_of(RunConfig.from_dict({"task": r.task, "teacher": r.model, "data": r.data}))


def parser() -> Parser:
    p = Parser(
        prog="python -m raydistill.evaluate",
        formatter_class=HelpFormatter,
        description=(
            "Score a saved model folder (a teacher, or a student written by python -m raydistill.best --export) on a "
            "task's dev set, e.g. to check that an exported student scores what its MLflow run logged. Prints the "
            "metrics as one JSON object on the last line of stdout."
        ),
    )
    add_fields(p, EvaluateRequest, ("model", "task", "data_dir", "max_length", "eval_limit", "split"), D)
    add_data_args(p)
    return p


@cli
def main(argv=None) -> dict:
    a = parser().parse_args(argv)
    out = execute(request_from(EvaluateRequest, a, data=data_of(a)))
    print(json.dumps(out), flush=True)
    return out


def execute(r: EvaluateRequest) -> dict:
    """The dev (or test) scores of the model ``r`` names, every flag checked before the model is scored."""
    from raydistill.models.heads import SUFFIX as HEADS
    from raydistill.models.heads import has_task_head
    from raydistill.train.preflight import max_positions, teacher_config

    task = _task(r)
    check(r.max_length >= 8, "max_length", f"must be >= 8, got {r.max_length}")
    check(r.eval_limit >= 0, "eval_limit", f"must be >= 0 (0 = all), got {r.eval_limit}")
    tcfg = teacher_config(r.model, field="model")
    check(
        has_task_head(tcfg, task),
        "model",
        f"{r.model} has no {task.name} head (needs {HEADS[task.kind]} with {task.num_labels} labels), so its "
        "predictions would be random; pass a model fine-tuned or distilled on this task",
    )
    limit = max_positions(tcfg)
    check(
        limit is None or r.max_length <= limit,
        "max_length",
        f"{r.max_length} is longer than the model's {limit} position embeddings; pass --max-length {limit} or less",
    )
    split = "test" if r.split == "test" else ("holdout" if r.data.train_file and not r.data.eval_file else None)
    out = evaluate_dir(r.model, task, r.data_dir, r.max_length, r.eval_limit, split=split)
    if split == "test":  # eval_* names the dev set everywhere else; the test file's scores must not pass for it
        out = {"test_" + k.removeprefix("eval_"): v for k, v in out.items()}
    from raydistill.tasks.files import report

    report()  # the columns guessed in the user's files
    return out


if __name__ == "__main__":
    main()
