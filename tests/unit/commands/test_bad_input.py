"""Bad input is refused up front: exit status 2, one stderr line ``error: FIELD: fix``, no traceback, before Ray
starts, before any training, and before anything is logged to MLflow or written over.

Every case runs the real entry point: most in-process through ``main(argv)`` (fast; Ray, training and MLflow runs
are booby-trapped so a check that comes too late fails loudly), a selection again in a subprocess through
``python -m`` to prove the end-to-end contract (exit code, a single stderr line, no Ray banner, no MLflow run).
The table of refused inputs in docs/RELIABILITY.md ("Bad input") is rendered from ``CASES`` and the lines they print
(``tests/gen_reliability.py``); a test fails when it is stale.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from types import SimpleNamespace

import pytest

from raydistill.common.outputs import MARKER

MODULES = {
    "data": "raydistill.data",
    "finetune": "raydistill.finetune",
    "distill": "raydistill.distill",
    "sweep": "raydistill.sweep",
    "best": "raydistill.best",
    "evaluate": "raydistill.evaluate",
    "augment": "raydistill.distill.augment",
}
UNWRITABLE = "/proc/raydistill-no-such-dir/out"  # not creatable, even for root
LEAD = "needs commands/sweep.py main() to validate before track.start_run (see docs/RELIABILITY.md, Bad input)"


# ------------------------------------------------------------------ inputs the cases point at
@pytest.fixture(scope="session")
def paths(tiny_teacher, glue_dir, korean_dir, tmp_path_factory):
    """Good and broken inputs, made once: teachers, data folders, space files."""
    root = tmp_path_factory.mktemp("bad-input")
    teacher = tiny_teacher("classification")  # BERT, 4 layers, hidden 32, 2 heads, intermediate 64, 128 positions

    def broken_teacher(name, edit):
        d = root / name
        shutil.copytree(teacher, d)
        cfg = d / "config.json"
        if callable(edit):
            cfg.write_text(json.dumps(edit(json.loads(cfg.read_text()))))
        else:
            cfg.write_text(edit)
        return str(d)

    def glue(name, train_tsv):
        d = root / name / "SST-2"
        d.mkdir(parents=True)
        (d / "train.tsv").write_text(train_tsv)
        shutil.copy(os.path.join(glue_dir, "SST-2", "dev.tsv"), d / "dev.tsv")
        return str(d.parent)

    def space(name, text):
        f = root / f"{name}.yaml"
        f.write_text(text)
        return str(f)

    def own(name, text):  # the user's own files (issue 37)
        f = root / name
        f.write_text(text, encoding="utf-8")
        return str(f)

    def folder(name, **splits):  # a dataset folder that datasets.load_dataset reads (issue 38)
        d = root / name
        d.mkdir()
        for split, text in splits.items():
            (d / f"{split}.csv").write_text(text, encoding="utf-8")
        return str(d)

    a_file = root / "a-file"
    a_file.write_text("not a folder\n")
    (root / "empty").mkdir()
    (root / "users").mkdir()
    (root / "users" / "notes.txt").write_text("the user's own file\n")  # the folder rule: never written into
    (root / "taken.resume").mkdir()  # a user's folder named as a fine-tune's OUTPUT.resume
    (root / "taken.resume" / "notes.txt").write_text("the user's own file\n")
    (root / "a-split").mkdir()  # another command's result (issue 45): a data split
    (root / "a-split" / "train.jsonl").write_text('{"text": "a good movie", "label": "positive"}\n')
    (root / "a-split" / MARKER).write_text(
        json.dumps({"written_by": "raydistill data split", "kind": "data split", "files": ["train.jsonl"]})
    )
    return SimpleNamespace(
        teacher=teacher,
        base=tiny_teacher("base"),
        mlm=tiny_teacher("mlm"),
        glue=glue_dir,
        korean=korean_dir,
        bad_json=broken_teacher("bad-json", '{"model_type": "bert", "hidden_size": 32,'),
        bad_type=broken_teacher("bad-type", lambda c: {**c, "num_hidden_layers": "four"}),
        gpt=broken_teacher("gpt2", lambda c: {"model_type": "gpt2", "n_layer": 2, "n_embd": 32, "n_head": 2}),
        swapped=broken_teacher(
            "swapped", lambda c: {**c, "id2label": {"0": "positive", "1": "negative"}, "label2id": {"positive": 0}}
        ),
        bad_label=glue("bad-label", "sentence\tlabel\na good movie\t1\na bad movie\t7\n"),
        empty_train=glue("empty-train", ""),
        header_only=glue("header-only", "sentence\tlabel\n"),
        no_sst2=str(root / "empty"),
        file=str(a_file),
        empty_dir=str(root / "empty"),
        users=str(root / "users"),
        taken=str(root / "taken"),
        a_split=str(root / "a-split"),
        csv_ok=own("reviews.csv", "body,tag\na good movie,pos\na bad movie,neg\n"),
        csv_no_label=own("no-label.csv", "body,tag\na good movie,pos\na bad movie,\nfine,\n"),
        csv_header_only=own("header-only.csv", "body,tag\n"),
        csv_empty=own("empty.csv", ""),
        csv_score_nan=own("score-nan.csv", "body,score\na good movie,4.5\na bad movie,nan\nso so,2.5\n"),
        csv_new_label=own("new-label.csv", "body,tag\na good movie,pos\nso so,meh\n"),
        jsonl_broken=own("broken.jsonl", '{"body": "a good movie", "tag": "pos"}\n{"body": "a bad movie", "tag"\n'),
        dataset=folder("reviews-dataset", train="body,tag\na good movie,pos\na bad movie,neg\n"),
        tokens_text=own(
            "tokens-text.jsonl", '{"words": ["a", "film"], "tags": ["O", "O"]}\n{"words": "a film", "tags": ["O"]}\n'
        ),
        tags_short=own(
            "tags-short.jsonl",
            '{"words": ["Kim", "said"], "tags": ["B-PS", "O"]}\n{"words": ["Lee", "ran"], "tags": ["B-PS"]}\n',
        ),
        tokens_csv=own("tokens.csv", "words,tags\nKim said,B-PS O\n"),
        data_typo=space("data-typo", "name: x\nmethod: kd\ndata: {train_fil: reviews.csv}\n"),
        bad_yaml=space("bad-yaml", "name: x\nstudent: {layers: [1, 2\n"),
        list_yaml=space("list-yaml", "- method: kd\n"),
        unknown_key=space("unknown-key", "name: x\nmethod: kd\nepochz: 3\n"),
        bad_domain=space("bad-domain", "name: x\nmethod: kd\ndistill: {temperature: {uniform: [5, 1]}}\n"),
        dev_metric=space("dev-metric", "name: x\nmethod: kd\nmetric: eval_accuracy\n"),
    )


@pytest.fixture
def E(paths, tmp_path, mlflow_uri):
    """The session's inputs plus this test's own output folders and MLflow store."""
    return SimpleNamespace(
        **vars(paths), uri=mlflow_uri, out=str(tmp_path / "student"), storage=str(tmp_path / "ray"), tmp=str(tmp_path)
    )


TINY = ["--student-layers", "2", "--student-hidden", "32", "--student-intermediate", "64", "--student-heads", "2"]


def distill(E, *extra, teacher=None, data=None, task="sst2"):
    return [
        "--method",
        "kd",
        "--teacher",
        teacher or E.teacher,
        "--task",
        task,
        "--data-dir",
        data or E.glue,
        "--tracking-uri",
        E.uri,
        "--output",
        E.out,
        "--storage-path",
        E.storage,
        *TINY,
        *extra,
    ]


def finetune(E, *extra, model=None, task="sst2"):
    return [
        "--model",
        model or E.base,
        "--task",
        task,
        "--data-dir",
        E.glue,
        "--tracking-uri",
        E.uri,
        "--output",
        E.out,
        *extra,
    ]


SWEEP_TINY = [
    "--set",
    "student.layers=2",
    "--set",
    "student.hidden=32",
    "--set",
    "student.intermediate=64",
    "--set",
    "student.heads=2",
]


def sweep(E, *extra, space="pkd_glue", tiny=True):
    return [
        space,
        "--task",
        "sst2",
        "--data-dir",
        E.glue,
        "--teacher",
        E.teacher,
        "--tracking-uri",
        E.uri,
        "--storage-path",
        E.storage,
        *(SWEEP_TINY if tiny else []),
        *extra,
    ]


def _dangling(E) -> str:
    """A link to a folder that is not there, as --output: found only at the end once (after the work)."""
    link = os.path.join(E.tmp, "gone-link")
    if not os.path.lexists(link):
        os.symlink(os.path.join(E.tmp, "nowhere"), link)
    return link


def evaluate(E, *extra, model=None):
    return ["--model", model or E.teacher, "--task", "sst2", "--data-dir", E.glue, *extra]


def augment(E, *extra, task="sst2", mlm=None):
    """mlm=False: no --mlm at all (embedding candidates, or a refusal)."""
    model = [] if mlm is False else ["--mlm", mlm or E.mlm]
    return [
        "--task",
        task,
        "--data-dir",
        E.korean if task == "korquad" else E.glue,
        *model,
        "--output",
        E.out,
        "--n",
        "1",
        *extra,
    ]


@dataclasses.dataclass(frozen=True)
class Case:
    id: str
    cmd: str
    args: Callable
    field: str  # the stderr line starts with "error: FIELD:"
    lead: bool = False  # fails cleanly only once sweep.py validates before logging (lead's change)
    what: str = ""  # the bad input in words: the "bad input" column of docs/RELIABILITY.md
    says: str = ""  # a phrase the stderr line must contain (the fix it names)
    varies: bool = False  # the line depends on the machine or library versions (CPU count, a transformers message)
    patch: Callable | None = None  # patch(monkeypatch) before the in-process run (e.g. a package made missing)
    no_cuda: bool = False  # refused only where torch sees no CUDA device (skipped on a GPU machine)


CASES = [
    # ---------------------------------------------------------------- data summary
    Case("data-no-subcommand", "data", lambda E: [], "command", what="`data` without `summary`"),
    Case("data-unknown-task", "data", lambda E: ["summary", "--task", "sst3"], "task", what="`--task sst3`"),
    Case(
        "data-dir-missing",
        "data",
        lambda E: ["summary", "--task", "sst2", "--data-dir", E.tmp + "/nope"],
        "data_dir",
        what="`--data-dir` that does not exist",
    ),
    Case(
        "data-files-missing",
        "data",
        lambda E: ["summary", "--task", "sst2", "--data-dir", E.no_sst2],
        "data_dir",
        what="`--data-dir` without the task's files",
    ),
    Case(
        "data-label-outside-set",
        "data",
        lambda E: ["summary", "--task", "sst2", "--data-dir", E.bad_label],
        "label",
        what="a train label `7` for SST-2",
    ),
    Case(
        "data-empty-file",
        "data",
        lambda E: ["summary", "--task", "sst2", "--data-dir", E.empty_train],
        "split",
        what="an empty `train.tsv`",
    ),
    Case(
        "data-train-file-empty",
        "data",
        lambda E: ["summary", "--train-file", E.csv_empty],
        "data.train_file",
        what='an empty `--train-file` (said: "its columns: ,")',
        says="is empty",
    ),
    Case(
        "data-header-only",
        "data",
        lambda E: ["summary", "--task", "sst2", "--data-dir", E.header_only],
        "split",
        what="a `train.tsv` with only its header",
    ),
    Case(
        "data-split-output-holds-users-files",
        "data",
        lambda E: ["split", "--task", "sst2", "--data-dir", E.glue, "--output", E.users],
        "output",
        what="`data split --output` folder holding files raydistill did not write",
        says="pass --overwrite",
    ),
    Case(
        "data-split-output-is-data-dir",
        "data",
        lambda E: ["split", "--task", "sst2", "--data-dir", E.glue, "--output", E.glue],
        "output",
        what="`data split --output` the `--data-dir` it reads",
        says="the folder --data-dir reads",
    ),
    Case(
        "data-split-val-fraction-too-small",
        "data",
        lambda E: ["split", "--task", "sst2", "--data-dir", E.glue, "--output", E.out, "--val-fraction", "0.001"],
        "val_fraction",
        what="`data split --val-fraction 0.001`",
        says="--val-fraction",
    ),
    # ---------------------------------------------------------------- the user's own files (issue 37)
    Case(
        "data-train-file-missing",
        "data",
        lambda E: ["summary", "--train-file", E.tmp + "/nope.csv"],
        "data.train_file",
        what="`--train-file` that does not exist",
    ),
    Case(
        "data-train-file-not-json",
        "data",
        lambda E: ["summary", "--train-file", E.jsonl_broken, "--text-column", "body", "--label-column", "tag"],
        "data.train_file",
        what="a JSON Lines `--train-file` with a broken row",
        says="line 2",
    ),
    Case(
        "data-text-column-missing",
        "data",
        lambda E: ["summary", "--train-file", E.csv_ok, "--text-column", "review"],
        "data.text_column",
        what="`--text-column` the file does not have",
        says="its columns: body, tag",
    ),
    Case(
        "data-columns-not-guessed",
        "data",
        lambda E: ["summary", "--train-file", E.csv_ok],
        "data.text_column",
        what="a file whose columns have none of the common names, no `--text-column`",
        says="pass --text-column",
    ),
    Case(
        "data-label-map-malformed",
        "data",
        lambda E: (
            ["summary", "--train-file", E.csv_ok, "--text-column", "body", "--label-column", "tag"]
            + ["--label-map", "pos:positive"]
        ),
        "data.label_map",
        what="`--label-map` that is not VALUE=NAME pairs",
    ),
    Case(
        "data-label-map-value-missing",
        "data",
        lambda E: (
            ["summary", "--train-file", E.csv_ok, "--text-column", "body", "--label-column", "tag"]
            + ["--label-map", "pos=positive"]
        ),
        "data.label_map",
        what="a label value the `--label-map` does not map",
        says="'neg' is not in --label-map",
    ),
    Case(
        "data-label-missing-values",
        "data",
        lambda E: ["summary", "--train-file", E.csv_no_label, "--text-column", "body", "--label-column", "tag"],
        "data.label_column",
        what="a label column with empty values",
        says="2 row(s)",
    ),
    Case(
        "data-regression-label-text",
        "data",
        lambda E: [
            "summary",
            "--train-file",
            E.csv_ok,
            "--text-column",
            "body",
            "--label-column",
            "tag",
            "--task-kind",
            "regression",
        ],
        "data.label_column",
        what="`--task-kind regression` on text labels",
        says="not a number",
    ),
    Case(
        "data-regression-label-nan",
        "data",
        lambda E: ["summary", "--train-file", E.csv_score_nan, "--text-column", "body", "--label-column", "score"],
        "data.label_column",
        what="a score of `nan` (accepted as a regression target, NaN losses)",
        says="not a finite number",
    ),
    Case(
        "data-summary-val-fraction-nan",
        "data",
        lambda E: ["summary", "--task", "sst2", "--data-dir", E.glue, "--val-fraction", "nan"],
        "train.val_fraction",
        what="`data summary --val-fraction nan` (a traceback; 1.5 was accepted)",
        says="--val-fraction 0.1",
    ),
    Case(
        "data-train-file-no-rows",
        "data",
        lambda E: ["summary", "--train-file", E.csv_header_only, "--text-column", "body", "--label-column", "tag"],
        "data.train_file",
        what="a `--train-file` with only its header",
    ),
    Case(
        "data-eval-label-not-in-train",
        "data",
        lambda E: [
            "summary",
            "--train-file",
            E.csv_ok,
            "--eval-file",
            E.csv_new_label,
            "--text-column",
            "body",
            "--label-column",
            "tag",
        ],
        "data.eval_file",
        what="an `--eval-file` label the training file lacks",
        says="'meh'",
    ),
    Case(
        "evaluate-metric-of-another-kind",
        "evaluate",
        lambda E: [
            "--model",
            E.teacher,
            "--train-file",
            E.csv_ok,
            "--text-column",
            "body",
            "--label-column",
            "tag",
            "--task-metric",
            "pearson",
        ],
        "data.metric",
        what="`--task-metric pearson` on classification labels",
        says="--task-metric one of",
    ),
    Case(
        "distill-task-and-train-file",
        "distill",
        lambda E: [
            "--method",
            "kd",
            "--teacher",
            E.teacher,
            "--task",
            "sst2",
            "--train-file",
            E.csv_ok,
            "--tracking-uri",
            E.uri,
            "--output",
            E.out,
            "--storage-path",
            E.storage,
            *TINY,
        ],
        "task",
        what="`--task sst2` and `--train-file` together",
        says="give one of them",
    ),
    # ---------------------------------------------------------------- a dataset by name, token rows (issue 38)
    Case(
        "data-dataset-offline",
        "data",
        lambda E: ["summary", "--dataset", "someone/no-such-dataset"],
        "data.dataset",
        what="`--dataset` naming a hub dataset, offline",
        says="pass a local copy",
    ),
    Case(
        "data-dataset-folder-missing",
        "data",
        lambda E: ["summary", "--dataset", E.tmp + "/nope"],
        "data.dataset",
        what="`--dataset` folder that does not exist",
    ),
    Case(
        "data-dataset-folder-empty",
        "data",
        lambda E: ["summary", "--dataset", E.empty_dir],
        "data.dataset",
        what="`--dataset` folder without data files",
        says="doesn't contain any data files",
        varies=True,  # the reason is datasets' own words
    ),
    Case(
        "data-dataset-split-missing",
        "data",
        lambda E: [
            "summary",
            "--dataset",
            E.dataset,
            "--text-column",
            "body",
            "--label-column",
            "tag",
            "--eval-split",
            "dev",
        ],
        "data.eval_split",
        what="`--eval-split` the dataset does not have",
        says="its splits: train",
    ),
    Case(
        "data-tokens-not-a-list",
        "data",
        lambda E: ["summary", "--train-file", E.tokens_text, "--tokens-column", "words", "--tags-column", "tags"],
        "data.tokens_column",
        what="a tokens column holding text, not a list",
        says="line 2",
    ),
    Case(
        "data-tags-length",
        "data",
        lambda E: ["summary", "--train-file", E.tags_short, "--tokens-column", "words", "--tags-column", "tags"],
        "data.tags_column",
        what="tags of another length than the tokens",
        says="line 2: 2 tokens but 1 tags",
    ),
    Case(
        "data-tokens-in-csv",
        "data",
        lambda E: ["summary", "--train-file", E.tokens_csv, "--tokens-column", "words", "--tags-column", "tags"],
        "data.tokens_column",
        what="`--tokens-column` on a CSV file",
        says="JSON Lines or Parquet",
    ),
    Case(
        "distill-dataset-and-train-file",
        "distill",
        lambda E: [
            "--method",
            "kd",
            "--teacher",
            E.teacher,
            "--dataset",
            E.dataset,
            "--train-file",
            E.csv_ok,
            "--tracking-uri",
            E.uri,
            "--output",
            E.out,
            "--storage-path",
            E.storage,
            *TINY,
        ],
        "data.dataset",
        what="`--dataset` and `--train-file` together",
        says="give one of them",
    ),
    Case(
        "distill-task-and-dataset",
        "distill",
        lambda E: [
            "--method",
            "kd",
            "--teacher",
            E.teacher,
            "--task",
            "sst2",
            "--dataset",
            E.dataset,
            "--tracking-uri",
            E.uri,
            "--output",
            E.out,
            "--storage-path",
            E.storage,
            *TINY,
        ],
        "task",
        what="`--task sst2` and `--dataset` together",
        says="give one of them",
    ),
    Case(
        "sweep-data-section-typo",
        "sweep",
        lambda E: [E.data_typo, "--teacher", E.teacher, "--tracking-uri", E.uri, "--storage-path", E.storage],
        "data.train_fil",
        what="a space's `data: {train_fil: …}`",
    ),
    # ---------------------------------------------------------------- finetune
    Case(
        "finetune-model-missing",
        "finetune",
        lambda E: finetune(E, model=E.tmp + "/nope"),
        "model",
        what="`--model` that does not exist",
    ),
    Case(
        "finetune-model-broken-config",
        "finetune",
        lambda E: finetune(E, model=E.bad_json),
        "model",
        what="`--model` whose config.json is not JSON",
        varies=True,
    ),
    Case(
        "finetune-head-of-other-task",
        "finetune",
        lambda E: finetune(E, model=E.teacher, task="mnli"),
        "model",
        what="`--model` fine-tuned with 2 labels, `--task mnli` (3)",
    ),
    Case("finetune-epochs-0", "finetune", lambda E: finetune(E, "--epochs", "0"), "train.epochs", what="`--epochs 0`"),
    Case("finetune-lr-negative", "finetune", lambda E: finetune(E, "--lr", "-1"), "train.lr", what="`--lr -1`"),
    Case(
        "finetune-max-length-too-small",
        "finetune",
        lambda E: finetune(E, "--max-length", "4"),
        "train.max_length",
        what="`--max-length 4`",
    ),
    Case(
        "finetune-max-length-past-positions",
        "finetune",
        lambda E: finetune(E, "--max-length", "512"),
        "train.max_length",
        what="`--max-length 512` for a model with 130 positions",
    ),
    Case(
        "finetune-output-holds-users-files",
        "finetune",
        lambda E: finetune(E, "--output", E.users),
        "output",
        what="`--output` folder holding files raydistill did not write",
        says="pass --overwrite",
    ),
    Case(
        "finetune-output-inside-model",
        "finetune",
        lambda E: finetune(E, "--output", os.path.join(E.base, "teacher"), "--overwrite"),
        "output",
        what="`--output` inside the `--model` folder it reads (`--overwrite` too)",
        says="which --model reads",
    ),
    Case(
        "finetune-users-resume-folder",
        "finetune",
        lambda E: finetune(E, "--output", E.taken, "--overwrite"),
        "output",
        what="a user's folder `OUTPUT.resume` beside `--output` (`--overwrite` too)",
        says="move it away",
    ),
    Case(
        "finetune-output-unwritable",
        "finetune",
        lambda E: finetune(E, "--output", UNWRITABLE),
        "output",
        what="`--output` that cannot be created",
    ),
    Case(
        "finetune-missing-required",
        "finetune",
        lambda E: ["--task", "sst2"],
        "--model",
        what="no `--model` / `--output`",
    ),
    Case(
        "finetune-use-gpu-without-cuda",
        "finetune",
        lambda E: finetune(E, "--use-gpu"),
        "use_gpu",
        no_cuda=True,
        what="`--use-gpu` where torch sees no CUDA device",
    ),
    # ---------------------------------------------------------------- distill
    Case(
        "distill-unknown-method",
        "distill",
        lambda E: distill(E, "--method", "kdd"),
        "distill.method",
        what="`--method kdd`",
    ),
    Case("distill-unknown-task", "distill", lambda E: distill(E, task="sst-3"), "task", what="`--task sst-3`"),
    Case(
        "distill-temperature-0",
        "distill",
        lambda E: distill(E, "--temperature", "0"),
        "distill.temperature",
        what="`--temperature 0` (T ≤ 0)",
    ),
    Case(
        "distill-temperature-not-a-number",
        "distill",
        lambda E: distill(E, "--temperature", "hot"),
        "--temperature",
        what="`--temperature hot`",
    ),
    Case(
        "distill-alpha-above-1",
        "distill",
        lambda E: distill(E, "--alpha", "1.5"),
        "distill.alpha",
        what="`--alpha 1.5`",
    ),
    Case(
        "distill-alpha-negative",
        "distill",
        lambda E: distill(E, "--alpha", "-0.1"),
        "distill.alpha",
        what="`--alpha -0.1`",
    ),
    Case("distill-beta-negative", "distill", lambda E: distill(E, "--beta", "-1"), "distill.beta", what="`--beta -1`"),
    Case(
        "distill-cache-budget-negative",
        "distill",
        lambda E: distill(E, "--teacher-cache-gb", "-1"),
        "teacher_cache_gb",
        what="`--teacher-cache-gb -1`",
    ),
    Case(
        "distill-use-gpu-without-cuda",
        "distill",
        lambda E: distill(E, "--use-gpu"),
        "use_gpu",
        no_cuda=True,
        what="`--use-gpu` where torch sees no CUDA device",
    ),
    Case(
        "distill-workers-0",
        "distill",
        lambda E: distill(E, "--num-workers", "0"),
        "train.num_workers",
        what="`--num-workers 0`",
    ),
    Case(
        "distill-cpus-0",
        "distill",
        lambda E: distill(E, "--cpus-per-worker", "0"),
        "cpus_per_worker",
        what="`--cpus-per-worker 0`",
    ),
    Case(
        "distill-workers-not-an-int",
        "distill",
        lambda E: distill(E, "--num-workers", "two"),
        "--num-workers",
        what="`--num-workers two`",
    ),
    Case(
        "distill-batch-not-divisible",
        "distill",
        lambda E: distill(E, "--batch-size", "10", "--num-workers", "4"),
        "train.batch_size",
        what="`--batch-size 10 --num-workers 4`",
    ),
    Case(
        "distill-max-length-too-small",
        "distill",
        lambda E: distill(E, "--max-length", "4"),
        "train.max_length",
        what="`--max-length 4`",
    ),
    Case(
        "distill-max-length-past-positions",
        "distill",
        lambda E: distill(E, "--max-length", "4096"),
        "train.max_length",
        what="`--max-length 4096` (teacher: 130 positions)",
    ),
    Case(
        "distill-eval-limit-negative",
        "distill",
        lambda E: distill(E, "--eval-limit", "-1"),
        "train.eval_limit",
        what="`--eval-limit -1`",
    ),
    Case(
        "distill-hidden-not-divisible",
        "distill",
        lambda E: distill(E, "--student-hidden", "30", "--student-heads", "4"),
        "student.hidden",
        what="`--student-hidden 30 --student-heads 4`",
    ),
    Case(
        "distill-student-wider-than-teacher",
        "distill",
        lambda E: distill(E, "--student-hidden", "64"),
        "student.hidden",
        what="`--student-hidden 64` (teacher 32)",
    ),
    Case(
        "distill-student-deeper-than-teacher",
        "distill",
        lambda E: distill(E, "--student-layers", "6"),
        "student.layers",
        what="`--student-layers 6` (teacher 4)",
    ),
    Case(
        "distill-layer-copy-deeper-than-teacher",
        "distill",
        lambda E: distill(E, "--init", "first_k", "--student-layers", "6"),
        "student.layers",
        what="`--init first_k --student-layers 6` (teacher 4)",
    ),
    Case(
        "distill-layer-copy-other-width",
        "distill",
        lambda E: distill(E, "--init", "every_other", "--student-hidden", "16"),
        "student.hidden",
        what="`--init every_other --student-hidden 16`",
    ),
    Case(
        "distill-layer-list-past-teacher",
        "distill",
        lambda E: distill(E, "--init", "layers:1,9"),
        "student.init",
        what="`--init layers:1,9` (teacher 4 layers)",
    ),
    Case(
        "distill-unknown-init",
        "distill",
        lambda E: distill(E, "--init", "bogus"),
        "student.init",
        what="`--init bogus`",
    ),
    Case(
        "distill-init-checkpoint-missing",
        "distill",
        lambda E: distill(E, "--init", "checkpoint:" + E.tmp + "/nope"),
        "student.init",
        what="`--init checkpoint:DIR` without config.json",
    ),
    Case(
        "distill-unknown-mapping",
        "distill",
        lambda E: distill(E, "--method", "pkd", "--mapping", "diagonal"),
        "distill.mapping",
        what="`--method pkd --mapping diagonal`",
    ),
    Case(
        "distill-impossible-mapping",
        "distill",
        lambda E: distill(E, "--method", "pkd", "--mapping", "1,9"),
        "distill.mapping",
        what="`--method pkd --mapping 1,9` (teacher 4 layers)",
    ),
    Case(
        "distill-skip-not-a-multiple",
        "distill",
        lambda E: distill(E, "--method", "pkd", "--mapping", "skip", "--student-layers", "3"),
        "distill.mapping",
        what="`--mapping skip`, 3-layer student of a 4-layer teacher",
    ),
    Case(
        "distill-tinybert-other-heads",
        "distill",
        lambda E: distill(E, "--method", "tinybert", "--student-heads", "4"),
        "student.heads",
        what="`--method tinybert --student-heads 4` (teacher 2)",
    ),
    Case(
        "distill-minilm-v1-other-heads",
        "distill",
        lambda E: distill(E, "--method", "minilm", "--version", "1", "--student-heads", "4"),
        "student.heads",
        what="`--method minilm --version 1 --student-heads 4` (teacher 2)",
    ),
    Case(
        "distill-minilm-relation-mean",
        "distill",
        lambda E: distill(E, "--method", "minilm", "--relation-mean", "token"),
        "distill.relation_mean",
        what="`--method minilm --relation-mean token`",
    ),
    Case(
        "distill-minilm-relation-heads",
        "distill",
        lambda E: distill(E, "--method", "minilm", "--relation-heads", "3"),
        "distill.relation_heads",
        what="`--method minilm --relation-heads 3` (student and teacher 32 wide)",
    ),
    Case(
        "distill-minilm-teacher-layer",
        "distill",
        lambda E: distill(E, "--method", "minilm", "--teacher-layer", "9"),
        "distill.teacher_layer",
        what="`--method minilm --teacher-layer 9` (teacher 4 layers)",
    ),
    Case(
        "distill-minilm-version",
        "distill",
        lambda E: distill(E, "--method", "minilm", "--version", "3"),
        "distill.version",
        what="`--method minilm --version 3`",
    ),
    Case(
        "distill-stage-of-another-method",
        "distill",
        lambda E: distill(E, "--stage", "intermediate"),
        "distill.stage",
        what="`--method kd --stage intermediate`",
    ),
    Case(
        "distill-unknown-stage",
        "distill",
        lambda E: distill(E, "--method", "tinybert", "--stage", "final"),
        "distill.stage",
        what="`--stage final`",
    ),
    Case(
        "distill-no-epoch-left-for-stage-2",
        "distill",
        lambda E: distill(E, "--method", "two_stage", "--epochs", "2", "--intermediate-epochs", "2"),
        "distill.intermediate_epochs",
        what="`--method two_stage --epochs 2 --intermediate-epochs 2`",
    ),
    Case(
        "distill-teacher-missing",
        "distill",
        lambda E: distill(E, teacher=E.tmp + "/nope"),
        "teacher",
        what="`--teacher` that does not exist",
    ),
    Case(
        "distill-teacher-broken-json",
        "distill",
        lambda E: distill(E, teacher=E.bad_json),
        "teacher",
        what="teacher config.json that is not JSON",
        varies=True,
    ),
    Case(
        "distill-teacher-config-wrong-type",
        "distill",
        lambda E: distill(E, teacher=E.bad_type),
        "teacher",
        what='teacher config.json with `num_hidden_layers: "four"`',
        varies=True,
    ),
    Case("distill-teacher-not-bert", "distill", lambda E: distill(E, teacher=E.gpt), "teacher", what="a GPT-2 teacher"),
    Case(
        "distill-teacher-labels-swapped",
        "distill",
        lambda E: distill(E, teacher=E.swapped),
        "teacher",
        what="a teacher naming SST-2's labels in another order (`positive, negative`)",
        says="align by name",
    ),
    Case(
        "distill-teacher-hub-offline",
        "distill",
        lambda E: distill(E, teacher="bert-base-uncased"),
        "teacher",
        what="`--teacher bert-base-uncased` with the hub unreachable",
    ),
    Case(
        "distill-teacher-without-task-head",
        "distill",
        lambda E: distill(E, teacher=E.base),
        "teacher",
        what="a teacher without a task head (plain encoder)",
    ),
    Case(
        "distill-own-data-teacher-without-task-head",
        "distill",
        lambda E: [
            *("--method", "kd", "--teacher", E.base, "--train-file", E.csv_ok, "--text-column", "body"),
            *("--label-column", "tag", "--tracking-uri", E.uri, "--output", E.out, "--storage-path", E.storage),
            *TINY,
        ],
        "teacher",
        what="a plain encoder as the teacher of your own file (the fix named a --task the file has none of)",
        says="with this run's data flags",
    ),
    Case(
        "distill-output-dangling-link",
        "distill",
        lambda E: [_dangling(E) if x == E.out else x for x in distill(E)],
        "output",
        what="`--output` a link to a folder that does not exist (failed after the run, a staging folder left)",
        says="which does not exist",
    ),
    Case(
        "distill-data-missing",
        "distill",
        lambda E: distill(E, data=E.no_sst2),
        "data_dir",
        what="`--data-dir` without the task's files",
    ),
    Case(
        "distill-label-outside-set",
        "distill",
        lambda E: distill(E, data=E.bad_label),
        "label",
        what="a train label outside the task's label set",
    ),
    Case(
        "distill-general-without-corpus",
        "distill",
        lambda E: distill(E, "--method", "distilbert", teacher=E.mlm, task="general"),
        "unlabeled_text",
        what="`--task general` without `--unlabeled-text`",
    ),
    Case(
        "distill-augment-dir-empty",
        "distill",
        lambda E: distill(E, "--augment-dir", E.empty_dir),
        "augment_dir",
        what="`--augment-dir` without train.jsonl",
    ),
    Case(
        "distill-output-is-a-file",
        "distill",
        lambda E: distill(E, "--output", E.file),
        "output",
        what="`--output` naming a file",
    ),
    Case(
        "distill-output-holds-users-files",
        "distill",
        lambda E: distill(E, "--output", E.users),
        "output",
        what="`--output` folder holding files raydistill did not write",
        says="pass --overwrite",
    ),
    Case(
        "distill-users-resume-folder",
        "distill",
        lambda E: distill(E, "--output", E.taken, "--overwrite"),
        "output",
        what="a user's folder `OUTPUT.resume` beside `--output` (`--overwrite` too)",
        says="move it away",
    ),
    Case(
        "distill-output-is-teacher",
        "distill",
        lambda E: distill(E, "--output", E.teacher, "--overwrite"),
        "output",
        what="`--output` the `--teacher` it reads (`--overwrite` too)",
        says="the folder --teacher reads",
    ),
    Case(
        "distill-output-unwritable",
        "distill",
        lambda E: distill(E, "--output", UNWRITABLE),
        "output",
        what="`--output` that cannot be created",
    ),
    Case(
        "distill-storage-under-a-file",
        "distill",
        lambda E: distill(E, "--storage-path", E.file + "/ray"),
        "storage_path",
        what="`--storage-path` under a file",
    ),
    Case(
        "distill-tracking-uri-unknown-scheme",
        "distill",
        lambda E: distill(E, "--tracking-uri", "ftp://host/db"),
        "tracking_uri",
        what="`--tracking-uri ftp://host/db`",
    ),
    Case(
        "distill-tracking-uri-unwritable",
        "distill",
        lambda E: distill(E, "--tracking-uri", f"sqlite:///{UNWRITABLE}/mlflow.db"),
        "tracking_uri",
        what="`--tracking-uri sqlite:///` in a folder that cannot be created",
    ),
    Case(
        "distill-placement-strategy",
        "distill",
        lambda E: distill(E, "--placement-strategy", "RANDOM"),
        "placement_strategy",
        what="`--placement-strategy RANDOM`",
    ),
    Case(
        "distill-unknown-flag",
        "distill",
        lambda E: distill(E, "--temprature", "2"),
        "--temprature",
        what="`--temprature 2` (typo)",
    ),
    # ---------------------------------------------------------------- values the chosen method does not read
    Case(
        "distill-teacher-is-a-file",
        "distill",
        lambda E: distill(E, teacher=E.file),
        "teacher",
        what="`--teacher` naming a file, not a model folder",
        says="is a file, not a model folder",
    ),
    Case(
        "distill-kd-unknown-mapping",
        "distill",
        lambda E: distill(E, "--mapping", "nonsense"),
        "distill.mapping",
        what="`--method kd --mapping nonsense` (kd maps no layers)",
        says="unknown mapping 'nonsense'",
    ),
    Case(
        "distill-kd-mapping-past-teacher",
        "distill",
        lambda E: distill(E, "--mapping", "2,9"),
        "distill.mapping",
        what="`--method kd --mapping 2,9` (teacher 4 layers)",
        says="within 1..4",
    ),
    Case(
        "distill-kd-version",
        "distill",
        lambda E: distill(E, "--version", "3"),
        "distill.version",
        what="`--method kd --version 3`",
        says="1 (MiniLM) or 2 (MiniLMv2)",
    ),
    Case(
        "distill-kd-teacher-layer",
        "distill",
        lambda E: distill(E, "--teacher-layer", "9"),
        "distill.teacher_layer",
        what="`--method kd --teacher-layer 9` (teacher 4 layers)",
        says="outside the teacher's 4 layers",
    ),
    Case(
        "distill-kd-relation-heads",
        "distill",
        lambda E: distill(E, "--relation-heads", "3"),
        "distill.relation_heads",
        what="`--method kd --relation-heads 3` (teacher 32 wide)",
        says="divide",
    ),
    Case(
        "distill-kd-intermediate-epochs-negative",
        "distill",
        lambda E: distill(E, "--intermediate-epochs", "-1"),
        "distill.intermediate_epochs",
        what="`--method kd --intermediate-epochs -1`",
        says="must be >= 0",
    ),
    Case(
        "distill-kd-unknown-stage",
        "distill",
        lambda E: distill(E, "--stage", "final"),
        "distill.stage",
        what="`--method kd --stage final`",
        says="all, intermediate, pred",
    ),
    Case(
        "sweep-kd-unknown-mapping",
        "sweep",
        lambda E: sweep(E, "--set", "distill.mapping=nonsense", space="kd_glue"),
        "distill.mapping",
        what="`kd_glue --set distill.mapping=nonsense`",
        says="unknown mapping",
    ),
    # ---------------------------------------------------------------- general distillation runs through distill alone
    Case(
        "finetune-task-general",
        "finetune",
        lambda E: finetune(E, task="general"),
        "task",
        what="`--task general` (no labels to fine-tune on)",
        says="python -m raydistill.distill --task general --unlabeled-text FILE",
    ),
    Case(
        "sweep-task-general",
        "sweep",
        lambda E: sweep(E, "--task", "general"),
        "task",
        what="`--task general` (general distillation is one distill run)",
        says="python -m raydistill.distill --task general --unlabeled-text FILE",
    ),
    Case(
        "sweep-teacher-is-a-file",
        "sweep",
        lambda E: sweep(E, "--teacher", E.file),
        "teacher",
        what="`--teacher` naming a file, not a model folder",
        says="is a file, not a model folder",
    ),
    # ---------------------------------------------------------------- sweep
    Case("sweep-unknown-space", "sweep", lambda E: sweep(E, space="pkd_glu"), "space", what="space `pkd_glu`"),
    Case(
        "sweep-cache-budget-negative",
        "sweep",
        lambda E: sweep(E, "--teacher-cache-gb", "-2"),
        "teacher_cache_gb",
        what="`--teacher-cache-gb -2`",
    ),
    Case(
        "sweep-cpus-0",
        "sweep",
        lambda E: sweep(E, "--cpus-per-worker", "0"),
        "cpus_per_worker",
        what="`--cpus-per-worker 0` (was run silently on 1 CPU a trial)",
    ),
    Case(
        "sweep-malformed-yaml",
        "sweep",
        lambda E: sweep(E, space=E.bad_yaml),
        "space",
        what="a space file that is not valid YAML",
    ),
    Case(
        "sweep-yaml-not-a-mapping",
        "sweep",
        lambda E: sweep(E, space=E.list_yaml),
        "space",
        what="a space file holding a YAML list",
    ),
    Case(
        "sweep-unknown-key",
        "sweep",
        lambda E: sweep(E, space=E.unknown_key),
        "epochz",
        what="a space with key `epochz`",
    ),
    Case(
        "sweep-empty-range",
        "sweep",
        lambda E: sweep(E, space=E.bad_domain),
        "distill.temperature",
        what="`temperature: {uniform: [5, 1]}`",
    ),
    Case(
        "sweep-space-ranks-on-dev",
        "sweep",
        lambda E: sweep(E, space=E.dev_metric),
        "metric",
        what="a space with `metric: eval_accuracy` (trials ranked on dev while epochs are chosen on val)",
        says="ranks trials on dev",
    ),
    Case(
        "sweep-set-not-key-value",
        "sweep",
        lambda E: sweep(E, "--set", "student.layers"),
        "set",
        what="`--set student.layers`",
    ),
    Case(
        "sweep-set-bad-yaml",
        "sweep",
        lambda E: sweep(E, "--set", "student.layers=[2, 4"),
        "set",
        what="`--set student.layers=[2, 4`",
    ),
    Case(
        "sweep-set-wrong-type",
        "sweep",
        lambda E: sweep(E, "--set", "distill.temperature=hot"),
        "distill.temperature",
        what="`--set distill.temperature=hot`",
    ),
    Case(
        "sweep-set-alpha-out-of-range",
        "sweep",
        lambda E: sweep(E, "--set", "distill.alpha=2"),
        "distill.alpha",
        what="`--set distill.alpha=2`",
    ),
    Case(
        "sweep-set-temperature-0",
        "sweep",
        lambda E: sweep(E, "--set", "distill.temperature=0"),
        "distill.temperature",
        what="`--set distill.temperature=0`",
    ),
    Case(
        "sweep-unknown-method",
        "sweep",
        lambda E: sweep(E, "--set", "method=pkdd"),
        "distill.method",
        what="`--set method=pkdd`",
    ),
    Case("sweep-unknown-task", "sweep", lambda E: sweep(E, "--task", "sst3"), "task", what="`--task sst3`"),
    Case(
        "sweep-unknown-fixed-mapping",
        "sweep",
        lambda E: sweep(E, "--set", "distill.mapping=diagonal"),
        "distill.mapping",
        what="`--set distill.mapping=diagonal`",
    ),
    Case(
        "sweep-student-deeper-than-teacher",
        "sweep",
        lambda E: sweep(E, "--set", "student.layers={choice: [3, 6]}"),
        "student.layers",
        what="`--set student.layers={choice: [3, 6]}` for a 4-layer teacher",
    ),
    Case(
        "sweep-relative-layers-zero",
        "sweep",
        lambda E: sweep(E, "--set", "student.layers=0.05"),
        "student.layers",
        what="`--set student.layers=0.05` (a fraction of a 4-layer teacher)",
    ),
    Case(
        "sweep-relative-layers-over-one",
        "sweep",
        lambda E: sweep(E, "--set", "student.layers=1.5"),
        "student.layers",
        what="`--set student.layers=1.5`",
    ),
    Case(
        "sweep-hidden-no-head-count",
        "sweep",
        lambda E: sweep(E, "--set", "student.hidden=31", "--set", "student.heads=auto", "--set", "student.init=random"),
        "student.hidden",
        what="`--set student.hidden=31 --set student.heads=auto` (teacher 32 wide, 2 heads)",
    ),
    Case(
        "sweep-start-from-outside-space",
        "sweep",
        lambda E: sweep(E, "--set", "search.start_from=[{temperature: 50}]"),
        "search.start_from[0].temperature",
        what="`--set search.start_from=[{temperature: 50}]` (space: T in [1, 20])",
    ),
    Case(
        "distill-relative-layers-zero",
        "distill",
        lambda E: distill(E, "--student-layers", "0.05"),
        "student.layers",
        what="`--student-layers 0.05` (teacher 4 layers)",
    ),
    Case(
        "sweep-resume-without-name", "sweep", lambda E: sweep(E, "--resume"), "name", what="`--resume` without `--name`"
    ),
    Case(
        "sweep-resume-unknown-name",
        "sweep",
        lambda E: sweep(E, "--resume", "--name", "never-ran"),
        "resume",
        what="`--resume --name never-ran`",
    ),
    Case(
        "sweep-max-concurrent-0",
        "sweep",
        lambda E: sweep(E, "--max-concurrent", "0"),
        "max_concurrent",
        what="`--max-concurrent 0`",
    ),
    Case(
        "sweep-trial-larger-than-cluster",
        "sweep",
        lambda E: sweep(E, "--cpus-per-worker", "4096"),
        "cpus_per_worker",
        what="`--cpus-per-worker 4096` (one trial asks for more CPUs than the cluster has; checked "
        "before Ray on a local run, against `ray.cluster_resources()` before any trial on a cluster)",
        varies=True,
    ),
    Case(
        "sweep-gpus-more-than-cluster",
        "sweep",
        lambda E: sweep(E, "--use-gpu", "--gpus-per-worker", "64"),
        "gpus_per_worker",
        what="`--use-gpu --gpus-per-worker 64`",
        varies=True,
    ),
    Case(
        "sweep-teacher-missing",
        "sweep",
        lambda E: sweep(E, "--teacher", E.tmp + "/nope"),
        "teacher",
        what="`--teacher` that does not exist",
    ),
    Case(
        "sweep-data-missing",
        "sweep",
        lambda E: sweep(E, "--data-dir", E.no_sst2),
        "data_dir",
        what="`--data-dir` without the task's files",
    ),
    Case(
        "sweep-storage-unwritable",
        "sweep",
        lambda E: sweep(E, "--storage-path", UNWRITABLE),
        "storage_path",
        what="`--storage-path` that cannot be created",
    ),
    Case(
        "sweep-num-samples-not-an-int",
        "sweep",
        lambda E: sweep(E, "--num-samples", "many"),
        "--num-samples",
        what="`--num-samples many`",
    ),
    Case(
        "sweep-workers-0",
        "sweep",
        lambda E: sweep(E, "--num-workers", "0"),
        "train.num_workers",
        what="`--num-workers 0`",
    ),
    Case(
        "sweep-batch-not-divisible",
        "sweep",
        lambda E: sweep(E, "--num-workers", "3", "--batch-size", "16"),
        "train.batch_size",
        what="`--num-workers 3 --batch-size 16`",
    ),
    Case(
        "sweep-student-wider-than-teacher",
        "sweep",
        lambda E: sweep(E, "--set", "student.hidden=64", "--set", "student.init=random"),
        "student.hidden",
        what="`--set student.hidden=64` (teacher 32)",
    ),
    Case(
        "sweep-tinybert-other-heads",
        "sweep",
        lambda E: sweep(E, "--set", "method=tinybert", "--set", "student.heads=4", "--set", "student.init=random"),
        "student.heads",
        what="`--set method=tinybert --set student.heads=4` (teacher 2)",
    ),
    Case(
        "sweep-gpu-fraction-with-ddp",
        "sweep",
        lambda E: sweep(E, "--use-gpu", "--num-workers", "2", "--gpus-per-worker", "0.5"),
        "gpus_per_worker",
        what="`--use-gpu --num-workers 2 --gpus-per-worker 0.5` (two NCCL ranks could share a GPU)",
    ),
    Case(
        "sweep-num-samples-0",
        "sweep",
        lambda E: sweep(E, "--num-samples", "0"),
        "num_samples",
        what="`--num-samples 0`",
    ),
    # ---------------------------------------------------------------- choosing on a split the report never sees
    Case(
        "sweep-val-fraction-above-half",
        "sweep",
        lambda E: sweep(E, "--val-fraction", "0.7"),
        "train.val_fraction",
        what="`--val-fraction 0.7`",
    ),
    Case(
        "sweep-val-fraction-0",
        "sweep",
        lambda E: sweep(E, "--val-fraction", "0"),
        "train.val_fraction",
        what="`--val-fraction 0`",
    ),
    Case(
        "sweep-val-fraction-too-small",
        "sweep",
        lambda E: sweep(E, "--val-fraction", "0.001"),
        "val_fraction",
        what="`--val-fraction 0.001` (fewer than 2 validation rows)",
    ),
    Case(
        "sweep-select-on-test",
        "sweep",
        lambda E: sweep(E, "--select-on", "test"),
        "train.select_on",
        what="`--select-on test`",
    ),
    Case(
        "sweep-select-metric-not-scored",
        "sweep",
        lambda E: sweep(E, "--select-metric", "pearson"),
        "train.select_metric",
        what="`--select-metric pearson` on a classification task",
    ),
    Case(
        "sweep-confirm-top-0",
        "sweep",
        lambda E: sweep(E, "--set", "search.confirm={top: 0, seeds: 2}"),
        "search.confirm.top",
        what="`--set search.confirm={top: 0, seeds: 2}`",
    ),
    Case(
        "sweep-confirm-seeds-negative",
        "sweep",
        lambda E: sweep(E, "--set", "search.confirm.seeds=-1"),
        "search.confirm.seeds",
        what="`--set search.confirm.seeds=-1`",
    ),
    Case(
        "sweep-control-not-bool",
        "sweep",
        lambda E: sweep(E, "--set", "search.control=2"),
        "search.control",
        what="`--set search.control=2`",
    ),
    Case(
        "sweep-algorithm-unknown",
        "sweep",
        lambda E: sweep(E, "--set", "search.algorithm=grid"),
        "search.algorithm",
        what="`--set search.algorithm=grid`",
    ),
    Case(
        "sweep-teacher-epochs-0",
        "sweep",
        lambda E: sweep(E, "--teacher-epochs", "0"),
        "teacher_epochs",
        what="`--teacher-epochs 0`",
    ),
    Case(
        "finetune-val-fraction-negative",
        "finetune",
        lambda E: finetune(E, "--val-fraction", "-0.1"),
        "train.val_fraction",
        what="`--val-fraction -0.1`",
    ),
    Case(
        "distill-select-on-train",
        "distill",
        lambda E: distill(E, "--select-on", "train"),
        "train.select_on",
        what="`--select-on train`",
    ),
    Case("sweep-no-space", "sweep", lambda E: ["--task", "sst2"], "space", what="no search space named"),
    Case(
        "sweep-placement-strategy",
        "sweep",
        lambda E: sweep(E, "--placement-strategy", "RANDOM"),
        "placement_strategy",
        what="`--placement-strategy RANDOM`",
    ),
    # ---------------------------------------------------------------- best
    Case(
        "best-onnx-without-export",
        "best",
        lambda E: ["--experiment", "x", "--tracking-uri", E.uri, "--onnx"],
        "onnx",
        what="`--onnx` without `--export`",
    ),
    Case(
        "best-bad-mode", "best", lambda E: ["--experiment", "x", "--mode", "highest"], "--mode", what="`--mode highest`"
    ),
    Case(
        "best-no-database",
        "best",
        lambda E: ["--experiment", "x", "--tracking-uri", E.uri],
        "tracking_uri",
        what="`--tracking-uri` sqlite file that does not exist",
    ),
    Case(
        "best-export-holds-users-files",
        "best",
        lambda E: ["--experiment", "x", "--tracking-uri", E.uri, "--export", E.users],
        "export",
        what="`--export` folder holding files raydistill did not write",
        says="pass --overwrite",
    ),
    Case(
        "best-export-other-commands-result",
        "best",
        lambda E: ["--experiment", "x", "--tracking-uri", E.uri, "--export", E.a_split],
        "export",
        what="`--export` folder holding another command's result (a data split)",
        says="pass --overwrite",
    ),
    Case(
        "best-export-is-a-file",
        "best",
        lambda E: ["--experiment", "x", "--tracking-uri", E.uri, "--export", E.file],
        "export",
        what="`--export` naming a file",
    ),
    Case(
        "best-quote-in-sweep-name",
        "best",
        lambda E: ["--experiment", "x", "--tracking-uri", E.uri, "--sweep", "a' or '1'='1"],
        "sweep",
        what="`--sweep \"a' or '1'='1\"`",
    ),
    Case(
        "best-onnx-not-installed",
        "best",
        lambda E: ["--experiment", "x", "--tracking-uri", E.uri, "--export", E.out, "--onnx"],
        "onnx",
        what="`--onnx` on an install without the `[onnx]` extra",
        says='pip install -c constraints.txt -e ".[onnx]"',
        patch=lambda mp: mp.setitem(sys.modules, "onnxruntime", None),
    ),
    # ---------------------------------------------------------------- evaluate
    Case(
        "evaluate-model-missing",
        "evaluate",
        lambda E: evaluate(E, model=E.tmp + "/nope"),
        "model",
        what="`--model` that does not exist",
    ),
    Case(
        "evaluate-model-broken-config",
        "evaluate",
        lambda E: evaluate(E, model=E.bad_json),
        "model",
        what="`--model` whose config.json is not JSON",
        varies=True,
    ),
    Case(
        "evaluate-model-without-task-head",
        "evaluate",
        lambda E: evaluate(E, model=E.base),
        "model",
        what="`--model` without a head for the task",
    ),
    Case("evaluate-unknown-task", "evaluate", lambda E: evaluate(E, "--task", "sst3"), "task", what="`--task sst3`"),
    Case(
        "evaluate-max-length-too-small",
        "evaluate",
        lambda E: evaluate(E, "--max-length", "2"),
        "max_length",
        what="`--max-length 2`",
    ),
    Case(
        "evaluate-max-length-past-positions",
        "evaluate",
        lambda E: evaluate(E, "--max-length", "1024"),
        "max_length",
        what="`--max-length 1024` (model: 130 positions)",
    ),
    Case(
        "evaluate-eval-limit-negative",
        "evaluate",
        lambda E: evaluate(E, "--eval-limit", "-5"),
        "eval_limit",
        what="`--eval-limit -5`",
    ),
    Case(
        "evaluate-data-missing",
        "evaluate",
        lambda E: evaluate(E, "--data-dir", E.no_sst2),
        "data_dir",
        what="`--data-dir` without the dev file",
    ),
    # ---------------------------------------------------------------- augment
    Case("augment-unknown-task", "augment", lambda E: augment(E, task="sst3"), "task", what="`--task sst3`"),
    Case("augment-p-above-1", "augment", lambda E: augment(E, "--p", "1.5"), "augment_p", what="`--p 1.5`"),
    Case("augment-k-0", "augment", lambda E: augment(E, "--k", "0"), "augment_k", what="`--k 0`"),
    Case(
        "augment-mlm-missing",
        "augment",
        lambda E: augment(E, mlm=E.tmp + "/nope"),
        "augment_mlm",
        what="`--mlm` that does not exist",
    ),
    Case(
        "augment-mlm-not-a-masked-lm",
        "augment",
        lambda E: augment(E, mlm=E.teacher),
        "augment_mlm",
        what="`--mlm` holding a classifier",
    ),
    Case(
        "augment-qa-task",
        "augment",
        lambda E: augment(E, task="korquad"),
        "augment_task",
        what="`--task korquad` (QA examples)",
    ),
    Case(
        "augment-output-holds-users-files",
        "augment",
        lambda E: augment(E, "--output", E.users),
        "output",
        what="`--output` folder holding files raydistill did not write",
        says="pass --overwrite",
    ),
    Case(
        "augment-output-inside-mlm",
        "augment",
        lambda E: augment(E, "--output", os.path.join(E.mlm, "augmented")),
        "output",
        what="`--output` inside the `--mlm` model folder it reads",
        says="which --mlm reads",
    ),
    Case(
        "augment-output-unwritable",
        "augment",
        lambda E: augment(E, "--output", UNWRITABLE),
        "output",
        what="`--output` that cannot be created",
    ),
    Case(
        "augment-data-missing",
        "augment",
        lambda E: augment(E, "--data-dir", E.no_sst2),
        "data_dir",
        what="`--data-dir` without the task's files",
    ),
    Case(
        "augment-unknown-candidates",
        "augment",
        lambda E: augment(E, "--candidates", "glove"),
        "augment_candidates",
        what="`--candidates glove`",
    ),
    Case(
        "augment-mlm-candidates-without-mlm",
        "augment",
        lambda E: augment(E, "--candidates", "mlm", "--teacher", E.teacher, mlm=False),
        "augment_mlm",
        what="`--candidates mlm --teacher DIR` (no `--mlm`)",
    ),
    Case(
        "augment-embedding-without-model",
        "augment",
        lambda E: augment(E, mlm=False),
        "augment_teacher",
        what="neither `--mlm` nor `--teacher`",
    ),
    Case(
        "augment-teacher-missing",
        "augment",
        lambda E: augment(E, "--teacher", E.tmp + "/nope", mlm=False),
        "augment_teacher",
        what="`--teacher` that does not exist",
    ),
]
BY_ID = {c.id: c for c in CASES}
assert len(BY_ID) == len(CASES), "case ids must be unique"

# the end-to-end selection: every command once or more, argparse errors and path checks included
SUBPROCESS = [
    "data-unknown-task",
    "finetune-model-missing",
    "distill-temperature-0",
    "distill-temperature-not-a-number",
    "distill-tinybert-other-heads",
    "distill-teacher-broken-json",
    "distill-output-unwritable",
    "sweep-malformed-yaml",
    "sweep-set-not-key-value",
    "best-no-database",
    "evaluate-model-without-task-head",
    "augment-p-above-1",
    "sweep-trial-larger-than-cluster",
    "best-export-holds-users-files",
    "data-train-file-not-json",
    "data-dataset-offline",
]


# ------------------------------------------------------------------ helpers
def mlflow_runs(uri: str) -> int:
    """Runs in a sqlite MLflow store, read with sqlite3 itself (MLflow would create the store)."""
    path = uri[len("sqlite:///") :]
    if not os.path.isfile(path):
        return 0
    with sqlite3.connect(path) as con:
        try:
            return con.execute("select count(*) from runs").fetchone()[0]
        except sqlite3.OperationalError:  # no tables: nothing was ever logged
            return 0


def assert_one_line(err: str, field: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, f"expected one stderr line, got {len(lines)}:\n{err}"
    line = lines[0]
    assert "Traceback" not in err
    assert line.startswith(f"error: {field}: "), f"the line should name {field!r}: {line}"
    assert len(line) > len(f"error: {field}: ") + 10, "the message should say how to fix it"
    return line


class WorkStarted(BaseException):
    """Raised by the booby traps: a bad input got past the checks (BaseException: no handler swallows it)."""


@pytest.fixture
def trapped(monkeypatch):
    """Starting Ray, training, fine-tuning or logging an MLflow run fails the test at once."""
    import ray

    from raydistill.commands import finetune
    from raydistill.orchestrate import connect, run
    from raydistill.tracking import track

    def trap(what):
        def fail(*a, **k):
            raise WorkStarted(f"{what} was called: the bad input was not refused up front")

        return fail

    monkeypatch.setattr(ray, "init", trap("ray.init"))
    monkeypatch.setattr(connect, "init_ray", trap("init_ray"))
    monkeypatch.setattr(run, "execute", trap("run.execute"))
    monkeypatch.setattr(finetune, "finetune", trap("finetune"))
    monkeypatch.setattr(track.Tracker, "start_run", trap("Tracker.start_run"))
    was = ray.is_initialized()  # the tests' shared Ray may already run (an earlier slow test started it)
    yield was
    assert ray.is_initialized() == was  # no Ray started (ray.init is trapped too)


def main_of(cmd: str):
    import importlib

    mod = MODULES[cmd] + (".__main__" if cmd in ("distill", "data") else "")
    return importlib.import_module(mod).main


def _params(ids=None):
    out = []
    for c in CASES if ids is None else [BY_ID[i] for i in ids]:
        marks = [pytest.mark.xfail(strict=True, raises=(WorkStarted, AssertionError), reason=LEAD)] if c.lead else []
        if c.no_cuda:
            import torch

            marks.append(pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a CUDA device"))
        out.append(pytest.param(c, id=c.id, marks=marks))
    return out


# ------------------------------------------------------------------ tests
def test_enough_distinct_cases_across_every_command():
    assert len(CASES) >= 30
    assert {c.cmd for c in CASES} == set(MODULES)
    assert len([c for c in CASES if not c.lead]) >= 25
    assert len(SUBPROCESS) >= 8 and {BY_ID[i].cmd for i in SUBPROCESS} == set(MODULES)


REGENERATE = (
    "RAYDISTILL_RECORD_BAD_INPUT=1 python -m pytest -q tests/unit/commands/test_bad_input.py -k refused_in_process, "
    "then "
    "python -m tests.gen_reliability"
)


def test_every_case_is_documented():
    """The Bad input table of docs/RELIABILITY.md is what the cases render (``tests/gen_reliability.py``)."""
    from tests import gen_reliability as gen

    doc = gen.DOC.read_text(encoding="utf-8")
    assert "## Bad input" in doc
    assert gen.section(doc) is not None, "docs/RELIABILITY.md lost its generated-table markers"
    assert all(c.what for c in CASES), "every case says what its bad input is (Case.what)"
    lines = gen.recorded()
    missing = [c.id for c in CASES if c.id not in lines]
    assert not missing, f"no stderr line recorded for {', '.join(missing)}; run {REGENERATE}"
    assert gen.section(doc) == gen.render(CASES, lines), f"docs/RELIABILITY.md's table is stale; run {REGENERATE}"


@pytest.mark.parametrize("case", _params())
def test_refused_in_process(case, E, trapped, capsys, monkeypatch, tmp_path_factory):
    import ray

    from tests import gen_reliability as gen

    monkeypatch.chdir(E.tmp)  # default ./raydistill-results lands in the test's folder
    if case.patch:
        case.patch(monkeypatch)
    with pytest.raises(SystemExit) as e:
        main_of(case.cmd)(case.args(E))
    out, err = capsys.readouterr()
    assert e.value.code == 2, err
    line = assert_one_line(err, case.field)
    assert case.says in line, f"the line should say {case.says!r}: {line}"
    line = gen.shorten(line, tmp_path_factory.getbasetemp())
    if os.environ.get("RAYDISTILL_RECORD_BAD_INPUT"):
        gen.record(case.id, line)
    elif not case.varies:
        assert gen.recorded().get(case.id) == line, f"docs/RELIABILITY.md shows another line; run {REGENERATE}"
    assert ray.is_initialized() == trapped  # no Ray started by the command
    assert mlflow_runs(E.uri) == 0
    assert not os.path.exists(E.out) and not os.path.exists(E.storage), "nothing may be written for a refused run"


@pytest.mark.parametrize("case", _params(SUBPROCESS))
def test_refused_end_to_end(case, E):
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    p = subprocess.run(
        [sys.executable, "-m", MODULES[case.cmd], *case.args(E)],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd=E.tmp,
    )
    assert p.returncode == 2, p.stderr
    assert_one_line(p.stderr, case.field)
    assert "Started a local Ray instance" not in p.stdout + p.stderr
    assert not os.path.exists(os.path.join(E.tmp, "raydistill-results", "ray"))
    assert mlflow_runs(E.uri) == 0


def test_refusal_keeps_what_is_already_there(E, trapped, capsys, monkeypatch):
    """A refused run leaves earlier results alone: the MLflow run, the student folder and Ray results."""
    import mlflow

    monkeypatch.chdir(E.tmp)
    client = mlflow.tracking.MlflowClient(E.uri)
    run = client.create_run(client.create_experiment("earlier"))
    client.log_metric(run.info.run_id, "eval_accuracy", 0.9)
    client.set_terminated(run.info.run_id)
    for folder in (E.out, E.storage):
        os.makedirs(folder)
        with open(os.path.join(folder, "keep.txt"), "w") as f:
            f.write("earlier result\n")
    with open(os.path.join(E.out, MARKER), "w") as f:  # an earlier result of raydistill's: the folder rule lets it by
        json.dump({"written_by": "raydistill distill", "files": ["keep.txt"]}, f)
    capsys.readouterr()
    for case in (
        "distill-temperature-0",
        "distill-tinybert-other-heads",
        "distill-label-outside-set",
        "distill-teacher-broken-json",
    ):
        with pytest.raises(SystemExit) as e:
            main_of("distill")(BY_ID[case].args(E))
        assert e.value.code == 2
        assert_one_line(capsys.readouterr().err, BY_ID[case].field)
    assert mlflow_runs(E.uri) == 1
    assert client.get_run(run.info.run_id).data.metrics == {"eval_accuracy": 0.9}
    assert sorted(os.listdir(E.out)) == sorted(["keep.txt", MARKER]) and os.listdir(E.storage) == ["keep.txt"]


def test_help_still_works(capsys):
    with pytest.raises(SystemExit) as e:
        main_of("distill")(["--help"])
    assert e.value.code == 0 and "--temperature" in capsys.readouterr().out


def test_argparse_is_left_as_it_was(capsys):
    """The one-line argparse errors are the commands' own parser class (commands.cli.Parser): argparse itself is not
    changed, during a command or after it."""
    import argparse

    from raydistill.commands.cli import Parser, cli
    from raydistill.common.errors import UserError

    before = (argparse.ArgumentParser.error, argparse.ArgumentParser.parse_args)

    @cli
    def main(argv=None):
        assert (argparse.ArgumentParser.error, argparse.ArgumentParser.parse_args) == before
        p = Parser(prog="x")
        p.add_argument("--n", type=int)
        return p.parse_args(argv)

    assert main(["--n", "3"]).n == 3
    capsys.readouterr()
    with pytest.raises(SystemExit) as e:
        main(["--n", "x"])
    assert e.value.code == 2
    assert_one_line(capsys.readouterr().err, "--n")
    assert (argparse.ArgumentParser.error, argparse.ArgumentParser.parse_args) == before
    p = argparse.ArgumentParser(prog="y")
    with pytest.raises(SystemExit):  # plain argparse outside an entry point: its own behaviour
        p.parse_args(["--unknown"])
    assert not issubclass(SystemExit, UserError)


def test_only_the_commands_first_parse_checks_paths(tmp_path):
    """The entry point's own parse checks --output; a later parse in the same command (the sweep's re-parse of a
    resumed sweep's flags) and one outside a command do not; sub-command parsers are the commands' class too."""
    from raydistill.commands.cli import Parser, cli
    from raydistill.common.errors import UserError

    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "theirs.txt").write_text("x")
    p = Parser(prog="x")
    p.add_argument("--output")
    sub = p.add_subparsers(dest="command").add_parser("s")
    assert isinstance(sub, Parser)

    @cli
    def main(argv):
        p.parse_args(argv[0])
        return p.parse_args(argv[1])

    assert main((["--output", str(tmp_path / "new")], ["--output", str(foreign)])).output == str(foreign)
    with pytest.raises(SystemExit) as e:
        main((["--output", str(foreign)], []))
    assert e.value.code == 2
    assert p.parse_args(["--output", str(foreign)]).output == str(foreign)
    with pytest.raises(UserError):
        sub.parse_args(["--bogus"])
