"""The flags the training commands share (``distill``, ``finetune``, ``sweep``) and how they become a config's
``train`` section, and the local-path rule every command applies to model and data folders."""

from __future__ import annotations

import argparse
import os
from typing import overload

from raydistill.config.schema import RunConfig, TrainConfig

DEFAULTS = TrainConfig()  # the flags' defaults (frozen: one instance serves every parser)


def add_train_args(p: argparse.ArgumentParser, d: TrainConfig = DEFAULTS, general: bool = True) -> None:
    p.add_argument(
        "--task",
        default=None,
        help="task name (sst2, mrpc, rte, stsb, nsmc, korquad, klue_ner, …; "
        "python -m raydistill list tasks)" + (" or 'general'" if general else "") + "; default: none, --train-file "
        "names your own data",
    )
    p.add_argument(
        "--data-dir",
        default=None,
        help="local data folder: the GLUE root (with RTE/, SST-2/, …) or the "
        "task's own folder (default: the Hugging Face hub)",
    )
    p.add_argument("--epochs", type=int, default=d.epochs, help="passes over the training rows")
    p.add_argument("--max-steps", type=int, default=d.max_steps, help="cap on optimizer steps (0 = none)")
    p.add_argument(
        "--epoch-rows",
        type=int,
        default=d.epoch_rows,
        help="rows per epoch: each epoch trains a fresh random draw of N training rows, then scores val (0 = every "
        "row); on an augmented set, N about the task's own size scores val as often as a plain run",
    )
    p.add_argument("--train-limit", type=int, default=d.train_limit, help="use the first N training examples")
    p.add_argument(
        "--eval-limit",
        type=int,
        default=d.eval_limit,
        help="score at most N rows of each split scored every epoch: the first N of dev and a fixed sample of N of the "
        "validation split (0 = all). A quick run's choice of epoch and trial then rests on fewer rows: noisier",
    )
    p.add_argument("--max-length", type=int, default=d.max_length, help="tokens per example (longer ones are cut)")
    p.add_argument("--batch-size", type=int, default=d.batch_size, help="global batch size, split over the workers")
    p.add_argument("--lr", type=float, default=d.lr, help="peak learning rate (AdamW, linear warm-up and decay)")
    p.add_argument("--seed", type=int, default=d.seed, help="random seed of the run")
    add_selection_args(p, d)
    add_data_args(p)
    p.add_argument("--tracking-uri", default=None, help="MLflow URI (default: sqlite file under ./raydistill-results)")
    p.add_argument("--experiment", default="raydistill", help="MLflow experiment to log the run to")


def add_data_args(p: argparse.ArgumentParser) -> None:
    """Your own data instead of a built-in ``--task``: files with any columns (issue 37), or a dataset by name, and
    token classification on either (issue 38)."""
    g = p.add_argument_group("your own data (instead of --task)")
    g.add_argument(
        "--train-file", help="training rows: a .csv, .tsv, .json, .jsonl or .parquet file (default: none, --task)"
    )
    g.add_argument(
        "--eval-file", help="the dev set that reports eval_* (default: 10%% of the training rows held out as dev)"
    )
    g.add_argument(
        "--test-file",
        help="a labelled test set, scored only by python -m raydistill.evaluate --split test (default: none)",
    )
    g.add_argument(
        "--dataset",
        help="a Hugging Face hub dataset (owner/name) or a local folder of data files that datasets.load_dataset "
        "reads (DIR/train.jsonl, DIR/validation.jsonl; .parquet, .csv), instead of --train-file (default: none)",
    )
    g.add_argument("--dataset-config", help="the dataset's configuration (default: its only or default one)")
    g.add_argument("--train-split", help="the dataset's split to train on (default: train)")
    g.add_argument(
        "--eval-split",
        help="the dataset's split that reports eval_* (default: validation where it has one, else 10%% of the "
        "training rows held out as dev)",
    )
    g.add_argument(
        "--delimiter",
        help="a .csv or .tsv file's field delimiter, one character (\\t or tab: a tab) (default: a tab for .tsv; "
        "for .csv the first of , ; tab | that splits the header and the first rows alike)",
    )
    g.add_argument(
        "--text-column", help="column of the text (default: text, sentence1, sentence or question, in any case)"
    )
    g.add_argument("--text-pair-column", help="second text of a pair task (default: text_pair / sentence2 beside them)")
    g.add_argument(
        "--label-column", help="column of the label (default: label, labels, category, class, target or y, in any case)"
    )
    g.add_argument(
        "--label-map",
        metavar="VALUE=NAME,...",
        help="the file's label values renamed before anything reads them, such as 0=negative,1=positive for a file "
        "of numbers and a teacher whose labels are named; without a named teacher the map's order is the labels' "
        "(default: the values as they are)",
    )
    g.add_argument(
        "--tokens-column",
        help="token classification: the column of each row's list of tokens (JSON Lines, Parquet or a dataset; "
        "default: tokens or words, where --tags-column, --task-kind token or a token teacher asks for it)",
    )
    g.add_argument("--tags-column", help="the column of its list of BIO tags, one per token (default: ner_tags, tags)")
    g.add_argument(
        "--task-kind",
        choices=("classification", "regression", "token"),
        help="default: the teacher's head, else regression when every label is a number and some are not whole, "
        "else classification",
    )
    g.add_argument(
        "--task-metric",
        help="the metric that chooses: accuracy, macro_f1, f1 (positive = the second label), mcc; pearson, "
        "spearman; token: f1, precision, recall (entities, seqeval) (default: accuracy; pearson; f1)",
    )
    g.add_argument(
        "--phrase-rows",
        action="store_true",
        help="training rows are phrases cut from whole sentences (as SST-2's): carve validation by sentence",
    )


def data_section(a) -> dict:
    """The ``data`` section of a config from the flags (empty without --train-file or --dataset; resolved by
    ``from_dict``)."""
    from raydistill.tasks.files import section_of

    return section_of(a)


def add_selection_args(p: argparse.ArgumentParser, d: TrainConfig | None = DEFAULTS) -> None:
    """Which split chooses epochs and trials, and how batches are drawn (every training command and the sweep);
    ``d=None``: no defaults (the sweep's flags only override its space)."""
    p.add_argument(
        "--val-fraction",
        type=float,
        default=d.val_fraction if d else None,
        help="share of the training rows held out (stratified, fixed seed) as the validation split that "
        "chooses the best epoch and trial" + (f" (default {d.val_fraction:g})" if d else " (default 0.1)"),
    )
    p.add_argument(
        "--select-on",
        default=d.select_on if d else None,
        help="val: choose on the validation split, report dev; dev: choose and report on dev"
        + (f" (default: {d.select_on})" if d else " (default: val)"),
    )
    p.add_argument(
        "--select-metric",
        default=d.select_metric if d else None,
        help="the metric that chooses the best epoch and trial on that split, e.g. macro_f1 (every class counts the "
        "same, however rare); what reports stays the task's metric, macro-F1 beside it (default: "
        + ("the task's main metric" if d else "the space's train.select_metric, else the task's main metric")
        + ")",
    )
    _switch(
        p,
        d,
        "group_by_length",
        "draw each batch from rows of similar length (megabatches of 50 batches sorted by length, "
        "then shuffled): less padding, faster epochs; --no-group-by-length: batches drawn at random",
    )
    p.add_argument(
        "--attention",
        choices=("padded", "unpadded"),
        default=d.attention if d else None,
        help="unpadded: forwards that read no attention scores run on the batch's real tokens only (flash "
        "attention's varlen kernel where the model was loaded with it); stages reading scores stay padded "
        "(default: " + (d.attention if d else "the space's train.attention, else padded") + ")",
    )
    _switch(
        p,
        d,
        "cpu_bf16",
        "the student step under bf16 autocast on a CPU with native bf16 (AMX, AVX512-BF16), fp32 master weights: "
        "~1.7x the steps/s on such a CPU, scores move by rounding; elsewhere fp32",
    )
    _switch(
        p,
        d,
        "stop_diverged",
        "stop a distillation run (a sweep's trial) after an epoch whose training loss is NaN/inf or over 10x its "
        "first step's, or whose validation score sits at the majority floor: reported as diverged, its student kept; "
        "a teacher's fine-tune is never stopped",
    )
    _switch(p, d, "compile", "torch.compile the student's forward")


def _switch(p: argparse.ArgumentParser, d: TrainConfig | None, name: str, text: str) -> None:
    """A ``--name/--no-name`` flag for the boolean train field ``name``: its default is the command's config
    (``d``), or, for a sweep (``d`` None), the space's value, else the field's own default."""
    on = getattr(d if d else DEFAULTS, name)
    said = ("on" if on else "off") if d else f"the space's train.{name}, else {'on' if on else 'off'}"
    p.add_argument(
        f"--{name.replace('_', '-')}",
        action=argparse.BooleanOptionalAction,
        default=getattr(d, name) if d else None,
        help=f"{text} (default: {said})",
    )


def train_config(a, **extra) -> dict:
    """The ``train`` section from the flags every training command shares."""
    return dict(
        epochs=a.epochs,
        max_steps=a.max_steps,
        epoch_rows=a.epoch_rows,
        train_limit=a.train_limit,
        eval_limit=a.eval_limit,
        max_length=a.max_length,
        batch_size=a.batch_size,
        lr=a.lr,
        seed=a.seed,
        val_fraction=a.val_fraction,
        select_on=a.select_on,
        select_metric=a.select_metric,
        group_by_length=a.group_by_length,
        attention=a.attention,
        compile=a.compile,
        cpu_bf16=a.cpu_bf16,
        stop_diverged=a.stop_diverged,
        **extra,
    )


@overload
def local_abspath(path: str) -> str: ...
@overload
def local_abspath(path: None) -> None: ...
def local_abspath(path: str | None) -> str | None:
    """Absolute local paths (Ray workers run in another directory); hub names stay as they are."""
    from raydistill.common.hub import is_local

    return os.path.abspath(path) if path and is_local(path) else path


def add_teacher_args(p: argparse.ArgumentParser) -> None:
    """How the teacher's outputs are produced: the shared cache and the teacher's precision (distill and sweep)."""
    p.add_argument(
        "--teacher-cache", default=None, help="teacher-output cache folder (default ./raydistill-results/teacher-cache)"
    )
    p.add_argument("--no-teacher-cache", action="store_true", help="run the live teacher every step (of every trial)")
    p.add_argument(
        "--teacher-cache-gb",
        type=float,
        default=RunConfig.teacher_cache_gb,
        help="size budget in GiB for full-sequence teacher states and attention scores in the cache",
    )
    p.add_argument(
        "--fp32-teacher",
        action="store_true",
        help="run the teacher in fp32 even where the hardware has native bf16 (default: bf16 autocast there)",
    )


def teacher_cache_dir(a) -> str | None:
    from raydistill.common.paths import results_path

    return (
        None
        if a.no_teacher_cache
        else os.path.abspath(a.teacher_cache)
        if a.teacher_cache
        else results_path("teacher-cache")
    )
