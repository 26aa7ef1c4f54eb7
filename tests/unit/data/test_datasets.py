"""Datasets by name and token classification on the user's data (issue 38): a local dataset folder gives the rows,
splits and scores the same rows give as files; KLUE-NER rows rewritten as JSON Lines, Parquet or a dataset folder with
other column names give the built-in klue_ner's encoded rows, splits and scores; bad input is refused in one line."""

from __future__ import annotations

import dataclasses
import json
import os
import pickle

import pytest

from raydistill.common.errors import UserError
from raydistill.config.params import data_of, task_of_params
from raydistill.config.schema import RunConfig, task_of
from raydistill.tasks.files import FileData, report, resolve

# built-in task -> (GLUE folder, new column names (text, pair, label), label names written)
GLUE = {
    "mrpc": ("MRPC", ("first", "second", "verdict"), ("different", "paraphrase")),
    "stsb": ("STS-B", ("left", "right", "similarity"), None),
}
KLUE_TAGS = ("O", "B-PS", "I-PS", "B-LC", "I-LC", "B-OG", "I-OG", "B-DT", "I-DT", "B-TI", "I-TI", "B-QT", "I-QT")
TINY = {"layers": 2, "hidden": 32, "intermediate": 64, "heads": 2, "init": "first_k"}
QUICK = {"epochs": 1, "max_steps": 3, "batch_size": 8, "max_length": 32, "eval_limit": 40, "train_limit": 64}


@pytest.fixture(autouse=True)
def _unsaid():
    """What these tests resolve without a command to report it stays here, not on a later command's stderr."""
    from raydistill.tasks import files

    yield
    files._pending.clear()


def _jsonl(path, records) -> str:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.writelines(json.dumps(r, ensure_ascii=False) + "\n" for r in records)
    return str(path)


def _parquet(path, records) -> str:
    import pyarrow as pa
    import pyarrow.parquet as pq

    os.makedirs(os.path.dirname(path), exist_ok=True)
    pq.write_table(pa.Table.from_pylist(records), str(path))
    return str(path)


@pytest.fixture(scope="module")
def glue_rows(shared_data, tmp_path_factory):
    """Per task: the shared GLUE train and dev rows under other column names in a folder ``DIR/train.jsonl``,
    ``DIR/validation.jsonl`` — read as two files, or as one dataset whose splits load_dataset names by the files."""
    from raydistill.tasks import load_split

    root = tmp_path_factory.mktemp("glue-rows")
    made = {}
    for name, (_, (text, pair, label), names) in GLUE.items():
        cols = {"text_column": text, "text_pair_column": pair, "label_column": label}
        for split in ("train", "validation"):
            rows = load_split(name, os.path.join(shared_data, "glue"), split)
            records = [
                {text: r["text"], pair: r["text_pair"], label: names[r["label"]] if names else r["label"]} for r in rows
            ]
            _jsonl(root / name / f"{split}.jsonl", records)
        folder = str(root / name)
        made[name] = {
            "files": {"train_file": f"{folder}/train.jsonl", "eval_file": f"{folder}/validation.jsonl", **cols},
            "dataset": {"dataset": folder, **cols},
        }
    return made


def _teacher(tiny_teacher, name):
    return tiny_teacher("regression", 1) if name == "stsb" else tiny_teacher("classification", 2)


@pytest.mark.parametrize("name", list(GLUE))
def test_a_dataset_folder_gives_the_rows_splits_and_encodings_of_its_files(glue_rows, name, tiny_teacher):
    from transformers import AutoTokenizer

    from raydistill.data.splits import train_val_dev
    from raydistill.train.loop import load_data

    teacher = _teacher(tiny_teacher, name)
    files = RunConfig.from_dict({"teacher": teacher, "data": glue_rows[name]["files"]})
    mine = RunConfig.from_dict({"teacher": teacher, "data": glue_rows[name]["dataset"]})
    assert mine.task == f"dataset-{name}" and (mine.data.train_split, mine.data.eval_split) == ("train", "validation")
    assert (mine.data.kind, mine.data.labels, mine.data.metric) == (
        files.data.kind,
        files.data.labels,
        files.data.metric,
    )
    assert mine.data.dataset_revision == "" and len(mine.data.fingerprint) == 16  # a folder: its rows' fingerprint
    a, b = train_val_dev(files, task_of(files)), train_val_dev(mine, task_of(mine))
    assert [len(s) for s in a] == [len(s) for s in b] and all(len(s) for s in a)
    assert a == b  # train, validation (carved from train) and dev: the same rows in the same order
    tok = AutoTokenizer.from_pretrained(teacher)
    x, y = load_data(files, tok), load_data(mine, tok)
    assert x.train == y.train and x.eval_encoded.features == y.eval_encoded.features  # type: ignore[attr-defined]


def test_a_run_on_a_dataset_folder_scores_as_on_its_files(glue_rows, tiny_teacher):
    from raydistill.train.loop import Context, run

    teacher = _teacher(tiny_teacher, "mrpc")
    want, got = (
        run(
            RunConfig.from_dict({"teacher": teacher, "data": glue_rows["mrpc"][src], "train": QUICK, "student": TINY}),
            Context(),
        )
        for src in ("files", "dataset")
    )
    scores = [k for k in want if k.startswith(("val_", "eval_"))]
    assert scores and {k: got[k] for k in scores} == {k: want[k] for k in scores}


# ------------------------------------------------------------------ splits, the description, MLflow


def _reviews(folder, splits=("train", "validation"), n=40):
    for split in splits:
        rows = [
            {"body": f"{split} {i} a {'great fun' if i % 2 else 'awful bore'} movie", "tag": "xy"[i % 2]}
            for i in range(n)
        ]
        _jsonl(os.path.join(folder, f"{split}.jsonl"), rows)
    return str(folder)


def test_split_names_default_and_chosen(tmp_path, capsys):
    """``load_dataset`` names a folder's splits by its files (``dev.jsonl`` too is ``validation``); without a
    validation split dev is 10% of train held out, said in the one line, unless ``--eval-split`` names one."""
    cols = {"text_column": "body", "label_column": "tag"}
    report()
    capsys.readouterr()
    spec = resolve(FileData(dataset=_reviews(tmp_path / "a", ("train", "test")), **cols))
    report()
    assert spec.eval_split == "" and spec.splits() == ("train",)
    assert task_of(RunConfig.from_dict({"teacher": "t", "data": spec})).eval_split == "test"  # held out of train
    assert "dev: 10% of train held out (--eval-split NAME chooses)" in capsys.readouterr().err
    assert resolve(FileData(dataset=str(tmp_path / "a"), eval_split="test", **cols)).splits() == ("train", "validation")
    dev = resolve(FileData(dataset=_reviews(tmp_path / "b", ("train", "dev")), **cols))
    assert dev.eval_split == "validation"


def test_the_dataset_description_round_trips_and_refuses_changed_rows(tmp_path, tiny_teacher):
    data = {"dataset": _reviews(tmp_path / "r"), "text_column": "body", "label_column": "tag"}
    cfg = RunConfig.from_dict({"teacher": tiny_teacher(), "data": data})
    assert RunConfig.from_dict(cfg.to_dict()) == cfg and pickle.loads(pickle.dumps(cfg)) == cfg
    params = cfg.to_params()
    assert params["dataset"] == str(tmp_path / "r") and params["eval_split"] == "validation"
    assert "train_file" not in params and "tokens_column" not in params  # only what is set
    assert data_of(params) == cfg.data and task_of_params(params).label_names == ("x", "y")
    task = task_of(cfg)
    assert len(task.loader(task, None, "train")) == 40
    _jsonl(tmp_path / "r" / "train.jsonl", [{"body": "another", "tag": "x"}] * 40)  # same size, other rows
    with pytest.raises(UserError) as e:
        task.loader(task, None, "train")
    assert e.value.field == "data.dataset" and "changed since this run was set up" in e.value.message


def test_dataset_inputs_record_the_dataset_config_split_and_revision(tmp_path, tiny_teacher):
    from raydistill.data.splits import datasets
    from raydistill.tracking.track import Tracker

    data = {"dataset": _reviews(tmp_path / "r", ("train",)), "text_column": "body", "label_column": "tag"}
    cfg = RunConfig.from_dict({"teacher": tiny_teacher(), "data": data})
    ds = datasets(cfg)
    assert [d["context"] for d in ds] == ["training", "validation", "eval"]
    assert all(
        d["source"] == {"path": data["dataset"], "config_name": None, "split": "train", "revision": None} for d in ds
    )
    tracker = Tracker(f"sqlite:///{tmp_path / 'mlflow.db'}", "e")
    run_id = tracker.start_run("r", {})
    tracker.log_datasets(run_id, ds)
    got = tracker.client.get_run(run_id).inputs.dataset_inputs
    assert {i.dataset.source_type for i in got} == {"local"}
    assert {json.loads(i.dataset.source)["split"] for i in got} == {"train"}


def test_class_label_features_name_the_labels_in_their_order(tmp_path):
    """A dataset whose label column is a class label (Parquet written by ``datasets`` keeps the feature) names its
    labels in the feature's order, not sorted; so does a list of class labels name the tags."""
    import datasets

    feats = datasets.Features(
        {
            "text": datasets.Value("string"),
            "label": datasets.ClassLabel(names=["pos", "neg"]),
            "tokens": datasets.List(datasets.Value("string")),
            "ner_tags": datasets.List(datasets.ClassLabel(names=["O", "B-X", "I-X", "B-Y", "I-Y"])),
        }
    )
    rows = {"text": ["a b", "c d"] * 10, "label": [0, 1] * 10, "tokens": [["a", "b"], ["c", "d"]] * 10}
    rows["ner_tags"] = [[1, 2], [0, 0]] * 10
    os.makedirs(tmp_path / "cl")
    datasets.Dataset.from_dict(rows, features=feats).to_parquet(str(tmp_path / "cl" / "train.parquet"))
    spec = resolve(FileData(dataset=str(tmp_path / "cl")))
    assert (spec.kind, spec.labels, spec.text_column) == ("classification", ("pos", "neg"), "text")
    tags = resolve(FileData(dataset=str(tmp_path / "cl"), kind="token"))
    assert (tags.tokens_column, tags.tags_column) == ("tokens", "ner_tags")  # guessed
    assert tags.labels == ("O", "B-X", "I-X", "B-Y", "I-Y") and tags.metric == "f1"
    task = task_of(RunConfig.from_dict({"teacher": "t", "data": tags}))
    assert task.loader(task, None, "train")[0] == {"tokens": ["a", "b"], "labels": [1, 2]}


# ------------------------------------------------------------------ KLUE-NER rows as the user's data


@pytest.fixture(scope="module")
def klue(shared_data, tmp_path_factory):
    """A KLUE-NER folder in the published layout (its first 300 sentences of the shared dev set as train, the next
    100 as dev) and the same rows as JSON Lines, Parquet and a dataset folder (columns ``chars``, ``ner``; tags by
    name)."""
    from raydistill.tasks import load_split

    root = tmp_path_factory.mktemp("klue")
    with open(os.path.join(shared_data, "ner", "klue_ner_v1.1", "klue-ner-v1.1_dev.tsv"), encoding="utf-8") as f:
        text = f.read()
    head, *sentences = text.split("\n## klue-ner-v1")
    for split, part in (("train", sentences[:300]), ("dev", sentences[300:400])):
        body = "".join("\n## klue-ner-v1" + s for s in part)
        (root / "builtin").mkdir(exist_ok=True)
        (root / "builtin" / f"klue-ner-v1.1_{split}.tsv").write_text(head + body + "\n", encoding="utf-8")
    made = {"builtin": str(root / "builtin")}
    rows = {s: load_split("klue_ner", made["builtin"], s) for s in ("train", "validation")}
    cols = {"tokens_column": "chars", "tags_column": "ner"}
    for fmt, write in (("jsonl", _jsonl), ("parquet", _parquet)):
        paths = {}
        for split, examples in rows.items():
            records = [
                {"id": i, "chars": r["tokens"], "ner": [KLUE_TAGS[t] for t in r["labels"]]}
                for i, r in enumerate(examples)
            ]
            paths[split] = write(root / fmt / f"{split}.{fmt}", records)
        made[fmt] = {"train_file": paths["train"], "eval_file": paths["validation"], **cols}
    made["dataset"] = {"dataset": str(root / "parquet"), **cols}
    made["texts"] = [" ".join(r["tokens"]) for r in rows["train"][:200]]
    return made


def _klue_teacher(tiny_teacher, klue, names=KLUE_TAGS):
    return tiny_teacher("token", len(KLUE_TAGS), texts=klue["texts"], label_names=names)


@pytest.mark.parametrize("src", ["jsonl", "parquet", "dataset"])
def test_klue_rows_give_the_builtin_rows_splits_and_encodings(klue, src, tiny_teacher):
    from transformers import AutoTokenizer

    from raydistill.data.splits import train_val_dev
    from raydistill.train.loop import load_data

    teacher = _klue_teacher(tiny_teacher, klue)
    builtin = RunConfig.from_dict({"task": "klue_ner", "teacher": teacher, "data_dir": klue["builtin"]})
    mine = RunConfig.from_dict({"teacher": teacher, "data": klue[src]})
    t, u = task_of(builtin), task_of(mine)
    assert (u.kind, u.label_names, u.metrics, u.main_metric) == (t.kind, t.label_names, t.metrics, t.main_metric)
    a, b = train_val_dev(builtin, t), train_val_dev(mine, u)
    assert [len(s) for s in a] == [len(s) for s in b] and all(len(s) for s in a)
    assert a == b
    tok = AutoTokenizer.from_pretrained(teacher)
    x, y = load_data(builtin, tok), load_data(mine, tok)
    assert x.train == y.train and x.eval_encoded.features == y.eval_encoded.features  # type: ignore[attr-defined]
    assert x.val_encoded.features == y.val_encoded.features  # type: ignore[attr-defined]


@pytest.mark.parametrize("method", ["kd", "two_stage", "tinybert"])
def test_a_run_on_klue_rows_scores_as_the_builtin_task(klue, method, tiny_teacher):
    """The same run (the methods of the two-stage and TinyBERT spaces among them) on the JSON Lines and on the built-in
    klue_ner: the same seqeval scores."""
    from raydistill.train.loop import Context, run

    teacher = _klue_teacher(tiny_teacher, klue)
    train = {**QUICK, "epochs": 2, "max_steps": 4} if method != "kd" else QUICK
    common = {"teacher": teacher, "train": train, "student": {**TINY, "init": "random"}, "distill": {"method": method}}
    want = run(RunConfig.from_dict({"task": "klue_ner", "data_dir": klue["builtin"], **common}), Context())
    got = run(RunConfig.from_dict({"data": klue["jsonl"], **common}), Context())
    scores = [k for k in want if k.startswith(("val_", "eval_", "train_")) and k != "train_examples_per_s"]
    assert {"eval_f1", "eval_precision", "eval_recall", "train_loss"} <= set(scores)
    assert {k: got[k] for k in scores} == {k: want[k] for k in scores}


def test_tags_from_the_data_and_an_unnamed_or_wider_teacher(klue, tiny_teacher, tmp_path, capsys):
    """Unnamed teacher labels take the data's tags, O first then by type; a named teacher may know tags the data
    never uses (its order wins); a teacher lacking one of the data's tags is refused."""
    report()
    capsys.readouterr()
    cfg = RunConfig.from_dict({"teacher": _klue_teacher(tiny_teacher, klue, names=None), "data": klue["jsonl"]})
    report()
    assert cfg.data.labels[:3] == ("O", "B-DT", "I-DT") and set(cfg.data.labels) == set(KLUE_TAGS)
    assert "the data's tags take its indices in this order: 0=O, 1=B-DT" in capsys.readouterr().err
    few = [{"chars": ["김", "씨"], "ner": ["B-PS", "I-PS"]}, {"chars": ["오", "늘"], "ner": ["B-DT", "O"]}]
    data = {"train_file": _jsonl(tmp_path / "few.jsonl", few * 10), "tokens_column": "chars", "tags_column": "ner"}
    wide = RunConfig.from_dict({"teacher": _klue_teacher(tiny_teacher, klue), "data": data})
    assert wide.data.labels == KLUE_TAGS
    narrow = tiny_teacher("token", 5, texts=klue["texts"], label_names=("O", "B-PS", "I-PS", "B-LC", "I-LC"))
    with pytest.raises(UserError) as e:
        RunConfig.from_dict({"teacher": narrow, "data": data})
    assert e.value.field == "teacher" and "B-DT" in e.value.message


@pytest.mark.parametrize("names", [("I-PS", "B-DT", "O", "I-DT", "B-PS"), None])
def test_token_tags_take_the_teachers_order_and_the_student_the_runs_names(tmp_path, tiny_teacher, names):
    """A named token teacher whose order is not the data's own (O first, then by type): each row's tag index is the
    teacher's index of that tag. The student built for the run answers with those names, and with the data's where
    the teacher's are placeholders (it kept LABEL_0… before)."""
    from raydistill.train.objective import build_objective

    few = [
        {"chars": ["김", "씨", "는"], "ner": ["B-PS", "I-PS", "O"]},
        {"chars": ["오", "늘"], "ner": ["B-DT", "I-DT"]},
    ]
    data = {"train_file": _jsonl(tmp_path / "few.jsonl", few * 10), "tokens_column": "chars", "tags_column": "ner"}
    student = {"layers": 2, "hidden": 32, "intermediate": 64, "heads": 2, "init": "first_k"}
    teacher = tiny_teacher("token", 5, label_names=names)
    cfg = RunConfig.from_dict({"teacher": teacher, "data": data, "student": student})
    own = ("O", "B-DT", "I-DT", "B-PS", "I-PS")  # the data's order, where nothing names the tags
    assert cfg.data.labels == (names or own)
    task = task_of(cfg)
    got = [[task.label_names[i] for i in r["labels"]] for r in task.loader(task, None, "train")]
    assert got == [r["ner"] for r in few * 10]
    student_model = build_objective(cfg)[1]
    assert student_model.config.id2label == dict(enumerate(names or own))
    assert student_model.config.label2id == {n: i for i, n in enumerate(names or own)}


def test_a_space_carries_a_dataset_and_token_columns(klue, tmp_path, tiny_teacher):
    from raydistill.config import space as sp
    from raydistill.orchestrate.plan import task_and_data
    from raydistill.orchestrate.request import SweepRequest

    yaml = tmp_path / "mine.yaml"
    yaml.write_text(
        f"name: mine\nmethod: two_stage\ntask: klue_ner\ndata: {{dataset: {klue['dataset']['dataset']}, "
        "tokens_column: chars, tags_column: ner}\n"
    )
    spec = sp.load(str(yaml))
    task, data = task_and_data(SweepRequest(), spec, _klue_teacher(tiny_teacher, klue))
    assert task.kind == "token" and task.name == "dataset-parquet" and data.labels == KLUE_TAGS


@pytest.mark.slow
def test_distill_command_on_klue_rows_scores_as_on_the_builtin_task(klue, tiny_teacher, tmp_path):
    """``python -m raydistill.distill`` end to end (its one worker in the command's process, MLflow) on the JSON Lines,
    on the dataset folder and on the built-in klue_ner: the same val_* and eval_* scores with the same seed."""
    from raydistill.distill.__main__ import main

    teacher = _klue_teacher(tiny_teacher, klue)
    common = ["--method", "kd", "--teacher", teacher, "--init", "first_k", "--student-layers", "2"]
    common += ["--epochs", "1", "--max-steps", "3", "--batch-size", "8", "--max-length", "32", "--train-limit", "64"]
    common += ["--eval-limit", "40", "--tracking-uri", f"sqlite:///{tmp_path / 'mlflow.db'}", "--no-teacher-cache"]
    files, cols = klue["jsonl"], ["--tokens-column", "chars", "--tags-column", "ner"]
    want = main([*common, "--task", "klue_ner", "--data-dir", klue["builtin"], "--output", str(tmp_path / "a")])
    scores = [k for k in want if k.startswith(("val_", "eval_", "best_val_", "best_eval_"))]
    assert "best_eval_f1" in scores
    for i, mine in enumerate(
        (
            ["--train-file", files["train_file"], "--eval-file", files["eval_file"]],
            ["--dataset", klue["dataset"]["dataset"]],
        )
    ):
        got = main([*common, *mine, *cols, "--output", str(tmp_path / f"b{i}")])
        assert {k: got[k] for k in scores} == {k: want[k] for k in scores}


@pytest.mark.slow
@pytest.mark.parametrize("space", ["two_stage_ner", "tinybert_glue"])
def test_the_two_stage_and_tinybert_spaces_sweep_a_token_dataset(
    ray_session, klue, space, tiny_teacher, tmp_path, capsys, monkeypatch
):
    from raydistill.commands import sweep

    monkeypatch.chdir(tmp_path)
    tiny = ["--set", "student.hidden=32", "--set", "student.intermediate=64", "--set", "student.heads=2"]
    tiny += ["--set", "student.layers=2", "--set", "search.confirm=false", "--set", "train.lr=0.001"]
    tiny += ["--set", "search.control=false"]
    sweep.main(
        [
            space,
            "--dataset",
            klue["dataset"]["dataset"],
            "--tokens-column",
            "chars",
            "--tags-column",
            "ner",
            "--teacher",
            _klue_teacher(tiny_teacher, klue),
            "--num-samples",
            "1",
            *tiny,
            "--epochs",
            "2",
            "--max-steps",
            "4",
            "--batch-size",
            "8",
            "--max-length",
            "32",
            "--eval-limit",
            "24",
            "--train-limit",
            "64",
            "--tracking-uri",
            f"sqlite:///{tmp_path / 'mlflow.db'}",
        ]
    )
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert out["trials"] == 1 and out["errors"] == 0 and out["metric"] == "best_val_f1"


# ------------------------------------------------------------------ bad input: one line naming the field


def _refused(spec: FileData, teacher=None) -> UserError:
    with pytest.raises(UserError) as e:
        resolve(spec, teacher)
    assert "\n" not in str(e.value)
    return e.value


def test_bad_datasets_are_refused_in_one_line(tmp_path, capsys):
    capsys.readouterr()
    e = _refused(FileData(dataset="someone/no-such-dataset"))  # the tests run with HF_HUB_OFFLINE=1
    assert e.field == "data.dataset" and "cannot be reached (offline)" in e.message and "folder" in e.message
    assert "does not exist" in _refused(FileData(dataset=str(tmp_path / "nope"))).message
    os.makedirs(tmp_path / "empty")
    assert "doesn't contain any data files" in _refused(FileData(dataset=str(tmp_path / "empty"))).message
    folder = _reviews(tmp_path / "r")
    e = _refused(FileData(dataset=folder, eval_split="test"))
    assert e.field == "data.eval_split" and "its splits: train, validation" in e.message
    e = _refused(FileData(dataset=folder, train_file=f"{folder}/train.jsonl"))
    assert e.field == "data.dataset" and "give one of them" in e.message
    assert _refused(FileData(train_file=f"{folder}/train.jsonl", train_split="x")).field == "data.train_split"
    e = _refused(FileData(dataset=f"{folder}/train.jsonl"))
    assert "is a file; pass it as --train-file" in e.message
    multi = tmp_path / "multi"  # two configurations named in its card, none chosen
    for c in ("a", "b"):
        _reviews(multi / c, ("train",), n=4)
    (multi / "README.md").write_text(
        "---\nconfigs:\n"
        + "".join(f"- config_name: {c}\n  data_files:\n  - split: train\n    path: {c}/train.jsonl\n" for c in "ab")
        + "---\n"
    )
    e = _refused(FileData(dataset=str(multi)))
    assert e.field == "data.dataset_config" and "one of ['a', 'b']" in e.message
    assert "Available: ['a', 'b']" in _refused(FileData(dataset=str(multi), dataset_config="c")).message
    assert (
        task_of(
            RunConfig.from_dict(
                {
                    "teacher": "t",
                    "data": {
                        "dataset": str(multi),
                        "dataset_config": "b",
                        "text_column": "body",
                        "label_column": "tag",
                    },
                }
            )
        ).name
        == "dataset-multi-b"
    )
    bad_line = tmp_path / "bad-line"  # a JSON line that is not an object: datasets logs it, then says "An error…"
    _jsonl(bad_line / "train.jsonl", [{"text": "a", "label": "pos"}])
    with open(bad_line / "train.jsonl", "a") as f:
        f.write("[1, 2]\n")
    e = _refused(FileData(dataset=str(bad_line)))
    assert "JSON parse error" in e.message and "An error occurred" not in e.message
    apart = tmp_path / "apart"  # a split whose columns are not the others'
    (apart).mkdir()
    (apart / "train.csv").write_text("text,label\n" + "".join(f"film {i},{'ab'[i % 2]}\n" for i in range(20)))
    (apart / "validation.csv").write_text("sentence,label\nhello,a\n")
    assert "does not exist in schema" in _refused(FileData(dataset=str(apart))).message
    assert capsys.readouterr().err == ""  # datasets' progress bars and log lines stay out
    with pytest.raises(UserError, match="--task sst2 and --dataset both name the data"):
        RunConfig.from_dict({"task": "sst2", "teacher": "x", "data": {"dataset": folder}})


def test_a_broken_link_in_a_dataset_folder_is_refused_in_one_line(tmp_path):
    folder = _reviews(tmp_path / "r")
    os.symlink(tmp_path / "gone.csv", os.path.join(folder, "old.csv"))
    e = _refused(FileData(dataset=folder))
    assert e.field == "data.dataset" and "old.csv: No such file or directory; remove it" in e.message


def test_parquet_decimals_dates_and_bytes_read_as_text(tmp_path):
    """Parquet types JSON has no word for: a decimal score, a date label, a binary text column — each read as the
    text a CSV would hold, from a file and from a dataset folder alike (they once failed with a traceback)."""
    import datetime
    import decimal

    import pyarrow as pa
    import pyarrow.parquet as pq

    n = 20
    table = pa.table(
        {
            "text": pa.array([f"film {i}".encode() for i in range(n)], pa.binary()),
            "score": pa.array([decimal.Decimal(f"{i % 5}.5") for i in range(n)], pa.decimal128(4, 1)),
            "day": pa.array([datetime.date(2020, 1, 1 + i % 2) for i in range(n)], pa.date32()),
        }
    )
    (tmp_path / "ds").mkdir()
    pq.write_table(table, tmp_path / "ds" / "train.parquet")
    for spec in (FileData(train_file=str(tmp_path / "ds" / "train.parquet")), FileData(dataset=str(tmp_path / "ds"))):
        reg = resolve(dataclasses.replace(spec, label_column="score"), None)
        assert reg.kind == "regression"
        cls = resolve(dataclasses.replace(spec, label_column="day"), None)
        assert cls.kind == "classification" and list(cls.labels) == ["2020-01-01", "2020-01-02"]


def test_bad_token_rows_are_refused_in_one_line(tmp_path):
    tok = {"tokens_column": "chars", "tags_column": "ner"}
    good = {"chars": ["a", "b"], "ner": ["B-X", "I-X"]}
    e = _refused(FileData(train_file=_jsonl(tmp_path / "s.jsonl", [good, {"chars": "a b", "ner": ["O", "O"]}]), **tok))
    assert e.field == "data.tokens_column" and "line 2" in e.message and "not a list of tokens" in e.message
    e = _refused(FileData(train_file=_jsonl(tmp_path / "n.jsonl", [good, {"chars": ["a"], "ner": "O"}]), **tok))
    assert e.field == "data.tags_column" and "not a list of tags" in e.message
    e = _refused(
        FileData(train_file=_jsonl(tmp_path / "l.jsonl", [good, good, {"chars": ["a", "b"], "ner": ["O"]}]), **tok)
    )
    assert e.field == "data.tags_column" and "line 3: 2 tokens but 1 tags" in e.message
    (tmp_path / "t.csv").write_text('chars,ner\n"[""a""]","[""O""]"\n')
    e = _refused(FileData(train_file=str(tmp_path / "t.csv"), **tok))
    assert e.field == "data.tokens_column" and "holds no lists" in e.message and "JSON Lines or Parquet" in e.message
    e = _refused(
        FileData(train_file=_jsonl(tmp_path / "p.jsonl", [{"chars": ["a"], "ner": ["PER"]}] * 3 + [good]), **tok)
    )
    assert e.field == "data.tags_column" and "'PER' are not BIO tags" in e.message
    e = _refused(FileData(train_file=str(tmp_path / "p.jsonl"), kind="classification", **tok))
    assert e.field == "data.kind"
