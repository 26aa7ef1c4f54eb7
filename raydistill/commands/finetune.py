"""python -m raydistill.finetune: fine-tune a BERT/RoBERTa checkpoint on a task to serve as a teacher.

The teacher written is the best epoch by the task's main metric on the validation split carved from the training rows
(``best_epoch``, ``best_val_*`` in the JSON), and ``best_eval_*`` is that epoch's dev score (``--select-on dev``:
chosen on dev, the old way).

Runs in this process (the same plain-PyTorch loop the distillation workers use), writes a directory that
``AutoModelFor….from_pretrained`` and ``AutoTokenizer.from_pretrained`` load, and prints the dev metrics as
one JSON object on the last line. A finished result with identical inputs is reused, not trained again; one stopped
after a finished epoch (Ctrl-C, a failure) goes on from that epoch's checkpoint, kept in ``OUTPUT.resume`` until the
fine-tune ends, into the same MLflow run.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
from dataclasses import dataclass, field
from typing import Any, ClassVar

from raydistill.commands.args import DATA_DIR, EXPERIMENT, TRACKING_URI, task_flag
from raydistill.commands.cli import HelpFormatter, Parser, add_overwrite, cli
from raydistill.commands.flags import flag
from raydistill.common.interrupts import resume_hint
from raydistill.config.schema import RunConfig
from raydistill.tasks.filedata import FileData
from raydistill.teacher.fit import finetune

FINETUNE_LR = 2e-5  # a fine-tune's learning rate, not a distillation's (TrainConfig's): BERT's own recipe


@dataclass(frozen=True)
class FinetuneRequest:
    """What one teacher fine-tune is asked to do: the finetune command's flags as typed values, built from its command
    line (``request_of``) or by ``raydistill.api.finetune_teacher`` directly. ``train``: the values of the train
    fields set (the command sets every one; a field left out takes TrainConfig's default, the flag's own, but the
    learning rate: ``FINETUNE_LR``). A field with ``help`` in its metadata is a flag of the command, generated from
    it."""

    model: str = field(
        default="",
        metadata=flag("pretrained encoder: a hub name (bert-base-uncased) or a local model folder", required=True),
    )
    output: str = field(default="", metadata=flag("folder to write the fine-tuned teacher to", required=True))
    overwrite: bool = False  # its flag: cli.add_overwrite, every writing command's
    task: str | None = field(default=None, metadata=task_flag(general=False))  # general distillation: distill's
    data_dir: str | None = field(default=None, metadata=DATA_DIR)
    data: FileData = field(default_factory=FileData)  # the user's files or dataset (empty: a built-in task)
    train: tuple[tuple[str, Any], ...] = (("lr", FINETUNE_LR),)
    tracking_uri: str | None = field(default=None, metadata=TRACKING_URI)
    experiment: str = field(default="raydistill", metadata=EXPERIMENT)
    use_gpu: bool = field(
        default=False,
        metadata=flag(
            "train on this machine's (current) CUDA GPU, the whole step under bf16 autocast, fp32 master weights",
            action="store_true",
        ),
    )
    result_writer: ClassVar[str] = "raydistill finetune"  # the command its result folder's marker names


D = FinetuneRequest()  # the flags' defaults: the request's own


def parser():
    from raydistill.commands.args import add_train_args
    from raydistill.commands.flags import add_fields

    p = Parser(
        prog="python -m raydistill.finetune",
        formatter_class=HelpFormatter,
        description=(
            "Fine-tune a pretrained BERT/RoBERTa encoder on a labelled task, to serve as a teacher. It trains in this "
            "process, keeps the epoch that scores best on a validation split carved from the training rows "
            "(--select-on "
            "dev: on dev), writes a model folder that transformers loads, and prints the dev scores as one JSON object "
            "on "
            "the last line of stdout. A finished fine-tune with identical inputs is reused, not trained again; a "
            "stopped one "
            "goes on from its last finished epoch (kept in OUTPUT.resume)."
        ),
    )
    add_fields(p, FinetuneRequest, ("model", "output"), D)
    add_overwrite(p, "raydistill finetune")
    add_train_args(p, D)
    add_fields(p, FinetuneRequest, ("use_gpu",), D)
    p.set_defaults(lr=FINETUNE_LR)
    return p


def request_of(a: argparse.Namespace) -> FinetuneRequest:
    """The request the parsed flags make: the data (``FileData``'s flags) and every train field's flag."""
    from raydistill.commands.flags import SELECTION_FLAGS, TRAIN_FLAGS, data_of, request_from, section

    made = {"data": data_of(a), "train": tuple(section(a, TRAIN_FLAGS + SELECTION_FLAGS).items())}
    return request_from(FinetuneRequest, a, **made)


def config_of(r: FinetuneRequest) -> RunConfig:
    """The fine-tune's config: a pretrained student (the model itself) trained by the ``finetune`` method."""
    from raydistill.commands.args import local_abspath

    return RunConfig.from_dict(
        dict(
            task=r.task,
            teacher=local_abspath(r.model),
            data_dir=local_abspath(r.data_dir),
            data=r.data,
            output=os.path.abspath(r.output),
            student={"init": "pretrained"},
            distill={"method": "finetune"},
            train={**dict(r.train), "use_gpu": r.use_gpu},
            tracking_uri=r.tracking_uri,
            experiment=r.experiment,
        )
    )


def config(a: argparse.Namespace) -> RunConfig:
    """The fine-tune's config of parsed flags (``config_of`` their request)."""
    return config_of(request_of(a))


@cli
def main(argv=None) -> dict:
    metrics = run(argv)
    print(json.dumps(metrics), flush=True)
    return metrics


def run(argv=None) -> dict:
    """The fine-tune these flags describe (or the finished one they match): its dev scores as ``main`` prints them.
    Bad input is a UserError before anything loads."""
    request = request_of(parser().parse_args(argv))
    # Ctrl-C: it goes on from its last finished epoch
    resume_hint(shlex.join(["python", "-m", "raydistill.finetune", *(sys.argv[1:] if argv is None else argv)]))
    return execute(request)


def execute(r: FinetuneRequest) -> dict:
    """The fine-tune ``r`` asks for (``raydistill.api.finetune_teacher`` runs the same from the request it builds):
    every check before anything loads, then ``teacher.fit.finetune``."""
    from raydistill.config.schema import task_of
    from raydistill.teacher.fit import check_resume_folder

    check_resume_folder(r.output)  # a user's OUTPUT.resume: refused before anything loads, --overwrite or not
    from raydistill.tasks import check_labelled
    from raydistill.train.precision import run_device
    from raydistill.train.preflight import preflight

    cfg = config_of(r)
    check_labelled(task_of(cfg), "finetune")
    run_device(cfg.train)  # --use-gpu on a machine torch sees no GPU on: refused before anything loads
    cfg = preflight(cfg, teacher_field="model")
    from raydistill.tasks.files import report

    report()  # the columns guessed in the user's files, once the checks passed

    def log(m):
        return print(m, file=sys.stderr, flush=True)

    return finetune(cfg, cfg.output, log=log)


if __name__ == "__main__":
    main()
