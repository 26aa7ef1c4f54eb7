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

import json
import os
import shlex
import sys

from raydistill.commands.cli import HelpFormatter, Parser, add_overwrite, cli
from raydistill.common.interrupts import resume_hint
from raydistill.config.schema import RunConfig
from raydistill.teacher.fit import finetune


def parser():
    from raydistill.commands.args import add_train_args

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
    p.add_argument(
        "--model", required=True, help="pretrained encoder: a hub name (bert-base-uncased) or a local model folder"
    )
    p.add_argument("--output", required=True, help="folder to write the fine-tuned teacher to")
    add_overwrite(p, "raydistill finetune")
    add_train_args(p, general=False)
    p.add_argument(
        "--use-gpu",
        action="store_true",
        help="train on this machine's (current) CUDA GPU, the whole step under bf16 autocast, fp32 master weights",
    )
    p.set_defaults(lr=2e-5)
    return p


def config(a) -> RunConfig:
    from raydistill.commands.args import local_abspath, train_config
    from raydistill.commands.flags import data_of

    return RunConfig.from_dict(
        dict(
            task=a.task,
            teacher=local_abspath(a.model),
            data_dir=local_abspath(a.data_dir),
            data=data_of(a),
            output=os.path.abspath(a.output),
            student={"init": "pretrained"},
            distill={"method": "finetune"},
            train=train_config(a, use_gpu=a.use_gpu),
            tracking_uri=a.tracking_uri,
            experiment=a.experiment,
        )
    )


@cli
def main(argv=None) -> dict:
    metrics = run(argv)
    print(json.dumps(metrics), flush=True)
    return metrics


def run(argv=None) -> dict:
    """The fine-tune these flags describe (or the finished one they match): its dev scores as ``main`` prints them
    (``raydistill.api``'s ``finetune_teacher`` runs the same). Bad input is a UserError before anything loads."""
    a = parser().parse_args(argv)
    from raydistill.config.schema import task_of
    from raydistill.teacher.fit import check_resume_folder

    check_resume_folder(a.output)  # a user's OUTPUT.resume: refused before anything loads, --overwrite or not
    from raydistill.tasks import check_labelled
    from raydistill.train.precision import run_device
    from raydistill.train.preflight import preflight

    cfg = config(a)
    check_labelled(task_of(cfg), "finetune")
    resume_hint(
        shlex.join(["python", "-m", "raydistill.finetune", *(sys.argv[1:] if argv is None else argv)])
    )  # it goes on from its last finished epoch
    run_device(cfg.train)  # --use-gpu on a machine torch sees no GPU on: refused before anything loads
    cfg = preflight(cfg, teacher_field="model")
    from raydistill.tasks.files import report

    report()  # the columns guessed in the user's files, once the checks passed

    def log(m):
        return print(m, file=sys.stderr, flush=True)

    return finetune(cfg, cfg.output, log=log)


if __name__ == "__main__":
    main()
