"""``python -m raydistill.distill.augment``: TinyBERT data augmentation as a command (its documented name): the flags
parsed (the knobs' generated from ``AugmentOptions``), one ``AugmentRequest`` built, and the data stage builds the set
(``raydistill.data.augmentation.build``)."""

from __future__ import annotations

import json
from pathlib import Path

from raydistill.commands.args import add_data_args
from raydistill.commands.cli import HelpFormatter, Parser, add_overwrite, cli
from raydistill.commands.flags import add_fields, dest, flagged
from raydistill.common.errors import check
from raydistill.data.augmentation import MLM_HINT, AugmentOptions, AugmentRequest, build, check_candidates

# the knobs' flags, in --help's order, after the data's (--candidates stands beside the models it chooses between)
SAMPLING = ("p", "k", "n", "seed", "limit", "batch_size", "max_length")


def model_source(args) -> tuple[str, str, str]:
    """(candidates, model directory, the flag's error field) from the command's flags; refuses what cannot work."""
    candidates = args.candidates or ("mlm" if args.mlm else "embedding")
    check_candidates(candidates)
    if candidates == "mlm":
        check(bool(args.mlm), "augment_mlm", "--candidates mlm needs a model with a masked-LM head; " + MLM_HINT)
        return candidates, args.mlm, "augment_mlm"
    check(
        bool(args.teacher or args.mlm),
        "augment_teacher",
        "--candidates embedding needs a model whose word "
        "embeddings propose the candidates: pass --teacher DIR (the teacher you distil from)",
    )
    model_dir, field = (args.teacher, "augment_teacher") if args.teacher else (args.mlm, "augment_mlm")
    check(
        Path(model_dir).is_dir(),
        field,
        f"{model_dir} does not exist or is not a folder; pass a saved model "
        "folder (config.json + weights), e.g. the teacher you distil from",
    )
    return candidates, model_dir, field


def parser() -> Parser:
    ap = Parser(
        prog="python -m raydistill.distill.augment",
        formatter_class=HelpFormatter,
        description="TinyBERT data augmentation: write N copies of every training row of a "
        "task with words swapped for candidates from a masked language model's guesses or "
        "from the nearest whole words in any encoder's word embeddings, for distill "
        "--augment-dir (seeded; cached under OUTPUT/cache).",
    )
    add_fields(ap, AugmentRequest, ("task", "data_dir"))
    add_fields(ap, AugmentOptions, ("candidates",))  # no default of its own: the model given chooses (model_source)
    add_fields(ap, AugmentRequest, ("mlm",))
    # no field of its own: the request holds the model --candidates chooses of --teacher and --mlm (``model_dir``)
    ap.add_argument(
        "--teacher",
        default=None,
        help="any BERT/RoBERTa/ELECTRA encoder directory (e.g. the teacher) "
        "whose input word embeddings propose the candidates (--candidates embedding; default: none)",
    )
    add_fields(ap, AugmentRequest, ("output",))
    add_overwrite(ap, "raydistill augment")
    add_data_args(ap)
    _add_sampling_args(ap)
    return ap


def _add_sampling_args(ap: Parser) -> None:
    """How words are replaced and copies drawn, and the model's batches: ``AugmentOptions``' fields."""
    add_fields(ap, AugmentOptions, SAMPLING, AugmentOptions())


def request(args) -> AugmentRequest:
    """The set the flags ask for: its model (refused where it cannot work), knobs and task."""
    candidates, model_dir, field = model_source(args)
    knobs = {f.name: getattr(args, dest(f)) for f in flagged(AugmentOptions, SAMPLING)}
    options = AugmentOptions(**knobs, candidates=candidates)
    return AugmentRequest(_task(args), args.data_dir, model_dir, args.output, options, mlm=args.mlm, field=field)


def _task(args):
    """The built-in ``--task`` by name, or the user's files as a run reads them (same rows, same dev hold-out)."""
    from raydistill.commands.flags import data_of
    from raydistill.config.schema import RunConfig, task_of

    data = data_of(args)
    if not data.given:
        check(
            bool(args.task), "task", "is required: --task NAME, or --train-file FILE / --dataset NAME for your own data"
        )
        return args.task
    return task_of(RunConfig.from_dict({"task": args.task, "teacher": "-", "data": data}))


@cli
def main(argv=None):
    req = request(parser().parse_args(argv))
    from raydistill.tasks.files import report

    report()  # the columns guessed in the user's files
    n_in, n_out, out = build(req)
    n = req.options.n
    print(f"{n_in} examples -> {n_out} (with {n} augmented copies each): {out}")
    print(json.dumps({"examples": n_in, "rows": n_out, "copies": n, "train": out}))  # last line JSON, as elsewhere


if __name__ == "__main__":
    main()
