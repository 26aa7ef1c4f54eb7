"""The user's own data (issue 37): CSV, JSON Lines and Parquet files with any columns give the rows, splits and scores
the built-in task gives on the same rows; bad files are refused in one line before anything starts."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys

import pytest

from raydistill.common.errors import UserError
from raydistill.config.params import data_of, task_of_params
from raydistill.config.schema import RunConfig, task_of
from raydistill.tasks.files import FileData, report, resolve

# built-in task -> (GLUE folder, rows of train.tsv kept, new column names (text, pair, label), label names written)
SHARED = {
    "sst2": ("SST-2", 4000, ("review", None, "sentiment"), ("negative", "positive")),
    "mrpc": ("MRPC", None, ("first", "second", "verdict"), ("different", "paraphrase")),
    "stsb": ("STS-B", None, ("left", "right", "similarity"), None),
}
FORMATS = ("csv", "jsonl", "parquet")


@pytest.fixture(autouse=True)
def _unsaid():
    """What these tests resolve without a command to report it stays here, not on a later command's stderr."""
    from raydistill.tasks import files

    yield
    files._pending.clear()


@pytest.fixture(scope="module")
def same_rows(shared_data, tmp_path_factory):
    """Per task: a GLUE folder holding the shared rows (SST-2: its first 4,000 training rows) and those rows
    written as CSV, JSON Lines and Parquet under other column names, classification labels as names."""
    from raydistill.tasks import load_split

    root = tmp_path_factory.mktemp("same-rows")
    made = {}
    for name, (folder, keep, cols, names) in SHARED.items():
        (root / "glue" / folder).mkdir(parents=True)
        for f in ("train.tsv", "dev.tsv"):
            with open(os.path.join(shared_data, "glue", folder, f), encoding="utf-8") as src:
                lines = src.readlines()
            n = keep + 1 if keep and f == "train.tsv" else len(lines)
            (root / "glue" / folder / f).write_text("".join(lines[:n]), encoding="utf-8")
        glue = str(root / "glue")
        splits = {s: load_split(name, glue, s) for s in ("train", "validation")}
        made[name] = {"glue": glue, **{fmt: _write(root, name, fmt, splits, cols, names) for fmt in FORMATS}}
    return made


def _record(r: dict, cols, names, fmt: str) -> dict:
    text, pair, label = cols
    out = {text: r["text"], **({pair: r["text_pair"]} if pair else {})}
    out[label] = names[r["label"]] if names else (r["label"] if fmt != "csv" else f"{r['label']}")
    return out


def _write(root, name, fmt, splits, cols, names) -> dict:
    files = {}
    for split, rows in splits.items():
        path = str(root / f"{name}-{split}.{fmt}")
        records = [_record(r, cols, names, fmt) for r in rows]
        if fmt == "csv":
            with open(path, "w", newline="", encoding="utf-8") as f:
                w = csv.DictWriter(f, fieldnames=list(records[0]))
                w.writeheader()
                w.writerows(records)
        elif fmt == "jsonl":
            with open(path, "w", encoding="utf-8") as f:
                f.writelines(json.dumps(r, ensure_ascii=False) + "\n" for r in records)
        else:
            import pyarrow as pa
            import pyarrow.parquet as pq

            pq.write_table(pa.Table.from_pylist(records), path)
        files[split] = path
    text, pair, label = cols
    return {
        "train_file": files["train"],
        "eval_file": files["validation"],
        "text_column": text,
        "text_pair_column": pair or "",
        "label_column": label,
        "phrase_rows": name == "sst2",  # SST-2's training rows are phrases of its sentences: carved by sentence
    }


def _configs(same_rows, name, fmt, teacher, **sections):
    builtin = RunConfig.from_dict({"task": name, "teacher": teacher, "data_dir": same_rows[name]["glue"], **sections})
    mine = RunConfig.from_dict({"teacher": teacher, "data": same_rows[name][fmt], **sections})
    return builtin, mine


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("name", list(SHARED))
def test_files_give_the_builtin_rows_splits_and_encodings(same_rows, name, fmt, tiny_teacher):
    from transformers import AutoTokenizer

    from raydistill.data.splits import train_val_dev
    from raydistill.train.loop import load_data

    teacher = tiny_teacher("regression" if name == "stsb" else "classification", 1 if name == "stsb" else 2)
    builtin, mine = _configs(same_rows, name, fmt, teacher)
    assert mine.task.startswith("file-") and task_of(mine).kind == task_of(builtin).kind
    a, b = train_val_dev(builtin, task_of(builtin)), train_val_dev(mine, task_of(mine))
    assert [len(s) for s in a] == [len(s) for s in b] and all(len(s) for s in a)
    assert a == b  # train, validation (carved from train) and dev: the same rows in the same order
    tok = AutoTokenizer.from_pretrained(teacher)
    x, y = load_data(builtin, tok), load_data(mine, tok)
    assert x.train == y.train and x.eval_encoded.features == y.eval_encoded.features  # type: ignore[attr-defined]
    assert x.val_encoded.features == y.val_encoded.features  # type: ignore[attr-defined]


@pytest.mark.parametrize("name", list(SHARED))
def test_a_run_on_files_scores_as_the_builtin_task(same_rows, name, tiny_teacher):
    """The same run (tiny teacher and student, few steps, same seed) on the files and on the built-in task reaches the
    same validation and dev scores; the files' metrics include the built-in's."""
    from raydistill.train.loop import Context, run

    teacher = tiny_teacher("regression" if name == "stsb" else "classification", 1 if name == "stsb" else 2)
    train = {"epochs": 1, "max_steps": 3, "batch_size": 8, "max_length": 32, "eval_limit": 40, "train_limit": 64}
    student = {"layers": 2, "hidden": 32, "intermediate": 64, "heads": 2, "init": "first_k"}
    builtin, mine = _configs(same_rows, name, "jsonl", teacher, train=train, student=student)
    want, got = run(builtin, Context()), run(mine, Context())
    scores = [k for k in want if k.startswith(("val_", "eval_")) and "_recall_" not in k]
    assert scores and {k: got[k] for k in scores} == {k: want[k] for k in scores}
    # each class's dev recall, keyed by its name (the file's names are not the built-in task's): the same in order
    recalls = [[v for k, v in out.items() if k.startswith("eval_recall_")] for out in (want, got)]
    assert recalls[0] == recalls[1] and len(recalls[0]) == (0 if name == "stsb" else 2)


# ------------------------------------------------------------------ the description travels and reads back


def test_the_description_round_trips_through_params_and_dicts(same_rows, tiny_teacher):
    import pickle

    _, mine = _configs(same_rows, "mrpc", "csv", tiny_teacher())
    assert RunConfig.from_dict(mine.to_dict()) == mine  # a Ray worker's copy: no second resolve
    assert pickle.loads(pickle.dumps(mine)) == mine
    params = mine.to_params()
    assert data_of(params) == mine.data and params["train_file"] == mine.data.train_file
    assert task_of_params(params).label_names == ("different", "paraphrase")
    params.pop("task_labels")  # a label list too long for an MLflow param: read from the file again
    assert data_of(params).fingerprint == "" and task_of_params(params).label_names == ("different", "paraphrase")


def test_datasets_name_the_files_as_their_source(same_rows, tiny_teacher):
    from raydistill.data.splits import datasets

    _, mine = _configs(same_rows, "stsb", "parquet", tiny_teacher("regression", 1))
    sources = {d["context"]: d["source"] for d in datasets(mine)}
    assert sources["training"] == mine.data.train_file and sources["eval"] == mine.data.eval_file


# ------------------------------------------------------------------ guessing, kinds, metrics


def _csv(tmp_path, name, rows, header=("text", "label")):
    path = tmp_path / name
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(header)
        w.writerows(rows)
    return str(path)


def test_columns_kind_and_labels_are_guessed_and_said(tmp_path, capsys):
    rows = [("good film", "yes"), ("NA", "no"), ("null", "yes"), ("True", "no")]  # NA/null/True stay text
    report()
    capsys.readouterr()  # what earlier tests left unsaid
    spec = resolve(FileData(train_file=_csv(tmp_path, "t.csv", rows)))
    report()
    assert (spec.text_column, spec.label_column, spec.kind, spec.labels) == (
        "text",
        "label",
        "classification",
        ("no", "yes"),
    )
    assert spec.metric == "accuracy" and len(spec.fingerprint) == 16
    line = capsys.readouterr().err.strip()
    assert "guessed text column 'text', label column 'label'" in line and len(line.splitlines()) == 1
    task = task_of(RunConfig.from_dict({"teacher": "x", "data": spec}))
    assert [r["text"] for r in task.loader(task, None, "train")] == ["good film", "NA", "null", "True"]
    nums = resolve(FileData(train_file=_csv(tmp_path, "n.csv", [("a", "10"), ("b", "2"), ("c", "1")])))
    assert nums.kind == "classification" and nums.labels == ("1", "2", "10")  # whole numbers: classes, numerically
    score = resolve(FileData(train_file=_csv(tmp_path, "s.csv", [("a", "0.5"), ("b", "2")])))
    assert score.kind == "regression" and score.metric == "pearson" and score.labels == ()
    forced = resolve(FileData(train_file=_csv(tmp_path, "s.csv", [("a", "0.5"), ("b", "2")]), kind="classification"))
    assert forced.kind == "classification" and forced.labels == ("0.5", "2")


def test_a_label_column_is_guessed_from_common_names_in_any_case(tmp_path, capsys):
    """A six-class file of questions with a ``category`` column needs no --label-column; ``Target`` and ``Y`` are
    found in another case; the guess is said in the one line, and a file with none names every name it tried."""
    classes = ("billing", "account", "shipping", "returns", "technical", "other")
    rows = [(f"question {i} about {c}", c) for i in range(5) for c in classes]
    report()
    capsys.readouterr()
    spec = resolve(FileData(train_file=_csv(tmp_path, "q.csv", rows, header=("question", "category"))))
    report()
    assert (spec.text_column, spec.label_column, spec.kind) == ("question", "category", "classification")
    assert spec.labels == tuple(sorted(classes))
    line = capsys.readouterr().err.strip()
    assert "guessed text column 'question', label column 'category'" in line and len(line.splitlines()) == 1
    for name in ("class", "Target", "Y", "LABELS", "Sentiment"):
        assert resolve(FileData(train_file=_csv(tmp_path, "c.csv", rows, header=("Text", name)))).label_column == name
    for text in ("Review", "document", "content", "comment"):  # a movie-review CSV's, NSMC's, ...
        reviews = _csv(tmp_path, "r.csv", rows, header=(text, "sentiment"))
        assert resolve(FileData(train_file=reviews)).text_column == text
    paired = resolve(
        FileData(
            train_file=_csv(tmp_path, "p.csv", [("a", "b", "x"), ("c", "d", "y")], ("Sentence1", "SENTENCE2", "Label"))
        )
    )
    assert (paired.text_column, paired.text_pair_column, paired.label_column) == ("Sentence1", "SENTENCE2", "Label")
    e = _refused(FileData(train_file=_csv(tmp_path, "n.csv", rows, header=("text", "topic"))))
    assert e.field == "data.label_column"
    assert "no column named label, labels, category, class, target, sentiment or y; pass --label-column" in e.message


def _delimited(tmp_path, name, rows, delimiter, header=("question", "category")):
    path = tmp_path / name
    with open(path, "w", newline="", encoding="utf-8") as f:
        csv.writer(f, delimiter=delimiter).writerows([header, *rows])
    return str(path)


@pytest.mark.parametrize("delimiter,named", [(";", "semicolon"), ("|", "pipe"), ("\t", "tab")])
def test_a_csv_files_delimiter_is_sniffed_and_said(tmp_path, capsys, delimiter, named):
    """``question;category`` is read as two columns (its texts hold commas), the delimiter said in the data line;
    a comma file whose texts hold semicolons stays a comma file."""
    rows = [(f"is {i}, or {i + 1}, right?", ("math", "fact")[i % 2]) for i in range(30)]
    report()
    capsys.readouterr()
    spec = resolve(FileData(train_file=_delimited(tmp_path, "q.csv", rows, delimiter)))
    report()
    assert (spec.text_column, spec.label_column, spec.labels) == ("question", "category", ("fact", "math"))
    assert f"data: q.csv ({named}-separated): text 'question'" in capsys.readouterr().err
    task = task_of(RunConfig.from_dict({"teacher": "x", "data": spec}))
    assert [r["text"] for r in task.loader(task, None, "train")] == [t for t, _ in rows]
    commas = [(f"a; b; {i}", "xy"[i % 2]) for i in range(30)]
    assert resolve(FileData(train_file=_delimited(tmp_path, "c.csv", commas, ","))).text_column == "question"


def test_a_given_delimiter_is_used_and_named_in_column_errors(tmp_path):
    rows = [(f"q {i}", "xy"[i % 2]) for i in range(10)]
    path = _delimited(tmp_path, "q.csv", rows, ";")
    spec = resolve(FileData(train_file=path, delimiter=";"))
    assert spec.delimiter == ";" and RunConfig.from_dict({"teacher": "x", "data": spec}).to_params()["delimiter"] == ";"
    e = _refused(FileData(train_file=path, delimiter=","))
    assert e.field == "data.text_column"
    assert "; its columns: question;category, read as comma-separated (--delimiter chooses)" in e.message
    e = _refused(FileData(train_file=path, label_column="label"))
    assert "its columns: question, category, read as semicolon-separated (--delimiter chooses)" in e.message
    assert resolve(FileData(train_file=_delimited(tmp_path, "t.csv", rows, "\t"), delimiter="\\t")).delimiter == "\t"
    ragged = tmp_path / "r.csv"
    ragged.write_text("question;category\na;x\nb;y;z\n", encoding="utf-8")
    e = _refused(FileData(train_file=str(ragged), delimiter=";"))
    assert "line 3: expected 2 semicolon-separated fields, got 3 (--delimiter chooses)" in e.message
    for bad, says in ((";;", "is not one character"), ('"', "is not one character")):
        e = _refused(FileData(train_file=path, delimiter=bad))
        assert e.field == "data.delimiter" and says in e.message
    (tmp_path / "j.jsonl").write_text('{"text": "a", "label": "x"}\n{"text": "b", "label": "y"}\n')
    e = _refused(FileData(train_file=str(tmp_path / "j.jsonl"), delimiter=";"))
    assert e.field == "data.delimiter" and "not a CSV or TSV file" in e.message


def test_empty_texts_are_dropped_with_a_count(tmp_path, capsys):
    report()
    spec = resolve(FileData(train_file=_csv(tmp_path, "t.csv", [("a", "x"), ("", "y"), ("b", "y")])))
    task = task_of(RunConfig.from_dict({"teacher": "x", "data": spec}))
    assert len(task.loader(task, None, "train")) == 2
    report()
    assert "1 of 3 rows have an empty text and are left out" in capsys.readouterr().err


def test_rows_are_made_as_they_are_read(tmp_path):
    """A split's checked rows come one at a time (no list of them beside the examples made of them, issue 48), the
    same rows in order, renamed by a label map; a value the map lacks is refused when its row is reached."""
    import dataclasses
    from collections.abc import Iterator

    from raydistill.tasks import columns

    path = _csv(tmp_path, "m.csv", [("a", "0"), ("", "1"), ("b", "1"), ("c", "0")])
    spec = resolve(FileData(train_file=path, label_map="0=neg,1=pos"))
    rows = columns._rows(spec, "train")
    assert isinstance(rows, Iterator) and not isinstance(rows, list)
    assert list(rows) == [(2, "a", None, "neg"), (4, "b", None, "pos"), (5, "c", None, "neg")]
    short = dataclasses.replace(spec, label_map="0=neg")
    with pytest.raises(UserError) as e:
        list(columns._rows(short, "train"))
    assert "line 4: label '1' is not in --label-map 0=neg" in e.value.message


# ------------------------------------------------------------------ bad input: one line naming the field


def _refused(spec: FileData) -> UserError:
    with pytest.raises(UserError) as e:
        resolve(spec)
    assert "\n" not in str(e.value)
    return e.value


def test_bad_files_are_refused_in_one_line(tmp_path):
    ok = _csv(tmp_path, "ok.csv", [("a", "x"), ("b", "y")])
    assert "does not exist" in _refused(FileData(train_file=str(tmp_path / "nope.csv"))).message
    assert "unknown file type" in _refused(FileData(train_file=ok + ".xlsx")).message
    e = _refused(FileData(train_file=ok, text_column="body"))
    assert e.field == "data.text_column" and "its columns: text, label" in e.message
    (tmp_path / "bad.jsonl").write_text('{"text": "a", "label": "x"}\n{"text": "b", "label"\n')
    assert "line 2 is not JSON" in _refused(FileData(train_file=str(tmp_path / "bad.jsonl"))).message
    (tmp_path / "bad.parquet").write_text("not parquet")
    assert "not a Parquet file" in _refused(FileData(train_file=str(tmp_path / "bad.parquet"))).message
    e = _refused(FileData(train_file=_csv(tmp_path, "m.csv", [("a", "x"), ("b", ""), ("c", "")])))
    assert e.field == "data.label_column" and "2 row(s) lack 'label' (first: line 3)" in e.message
    e = _refused(FileData(train_file=_csv(tmp_path, "r.csv", [("a", "0.5"), ("b", "high")]), kind="regression"))
    assert "'high' is not a number" in e.message
    assert "no rows with a text" in _refused(FileData(train_file=_csv(tmp_path, "e.csv", []))).message
    e = _refused(FileData(train_file=ok, eval_file=_csv(tmp_path, "d.csv", [("a", "x"), ("b", "z")])))
    assert e.field == "data.eval_file" and "'z' the training file lacks" in e.message
    e = _refused(FileData(train_file=ok, metric="pearson"))
    assert e.field == "data.metric" and "accuracy, macro_f1, f1, mcc" in e.message


def test_task_and_train_file_together_are_refused(tmp_path):
    ok = _csv(tmp_path, "ok.csv", [("a", "x"), ("b", "y")])
    with pytest.raises(UserError, match="give one of them"):
        RunConfig.from_dict({"task": "sst2", "teacher": "x", "data": {"train_file": ok}})


def test_data_summary_on_files_and_its_bad_input_exit_2(tmp_path):
    ok = _csv(tmp_path, "ok.csv", [(f"t{i}", "xy"[i % 3 == 2]) for i in range(30)], header=("body", "tag"))
    cmd = [sys.executable, "-m", "raydistill.data", "summary", "--train-file", ok]
    r = subprocess.run([*cmd, "--text-column", "body", "--label-column", "tag"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["splits"] == {"train": 30} and out["labels"]["train"] == {"x": 20, "y": 10}
    for extra in ([], ["--task", "sst2"], ["--text-column", "body", "--label-column", "nope"]):
        r = subprocess.run([*cmd, *extra], capture_output=True, text=True)
        assert r.returncode == 2 and r.stdout == "" and r.stderr.startswith("error: ")
        assert len(r.stderr.strip().splitlines()) == 1, r.stderr


# ------------------------------------------------------------------ labels aligned with the teacher by name


def _reviews(tmp_path, labels=("positive", "NEGATIVE")):
    """Labels whose sorted order (NEGATIVE, positive: upper case first) is not a named teacher's (positive,
    negative), so a run that ignored the teacher's order would show."""
    rng = __import__("random").Random(3)
    words = {"positive": "great fun", "negative": "awful bore"}
    rows = [(f"a {words[lab.lower()]} movie {i}", lab) for i in range(40) for lab in [labels[rng.randint(0, 1)]]]
    return _csv(tmp_path, "reviews.csv", rows, header=("review", "sentiment"))


def test_a_logged_runs_labels_are_read_again_in_the_teachers_order(tmp_path, tiny_teacher):
    teacher = tiny_teacher("classification", 2, label_names=("positive", "negative"))
    data = {"train_file": _reviews(tmp_path), "text_column": "review", "label_column": "sentiment"}
    params = RunConfig.from_dict({"teacher": teacher, "data": data}).to_params()
    params.pop("task_labels")
    assert task_of_params(params).label_names == ("positive", "negative")


def test_labels_take_a_named_teachers_order(tmp_path, tiny_teacher):
    """A teacher naming its labels in the reverse of the file's sorted order: each row's label index is the
    teacher's index of the same name (case ignored), so its soft targets mean what the gold label means."""
    teacher = tiny_teacher("classification", 2, label_names=("positive", "negative"))
    data = {"train_file": _reviews(tmp_path), "text_column": "review", "label_column": "sentiment"}
    cfg = RunConfig.from_dict({"teacher": teacher, "data": data})
    assert cfg.data.labels == ("positive", "negative")  # sorted, they would be ("NEGATIVE", "positive")
    task = task_of(cfg)
    rows = task.loader(task, None, "train")
    raw = [lab for _, lab in csv.reader(open(data["train_file"], encoding="utf-8"))][1:]
    assert [task.label_names[r["label"]] for r in rows] == [lab.lower() for lab in raw]


def test_placeholder_and_mismatched_teacher_labels(tmp_path, tiny_teacher, capsys):
    data = {"train_file": _reviews(tmp_path), "text_column": "review", "label_column": "sentiment"}
    report()
    capsys.readouterr()
    cfg = RunConfig.from_dict({"teacher": tiny_teacher("classification", 2), "data": data})  # LABEL_0, LABEL_1
    report()
    assert cfg.data.labels == ("NEGATIVE", "positive")
    assert "unnamed (LABEL_0…); the file's take its indices in sorted order: 0=NEGATIVE, 1=positive" in (
        capsys.readouterr().err
    )
    other = tiny_teacher("classification", 2, label_names=("pos", "neg"))
    with pytest.raises(UserError) as e:
        RunConfig.from_dict({"teacher": other, "data": data})
    assert e.value.field == "teacher" and "(pos, neg)" in e.value.message and "(NEGATIVE, positive)" in e.value.message
    nums = _csv(tmp_path, "scores.csv", [("a", "1"), ("b", "2"), ("c", "3")])
    regression = RunConfig.from_dict({"teacher": tiny_teacher("regression", 1), "data": {"train_file": nums}})
    assert regression.data.kind == "regression"  # whole numbers, but the teacher's head is a regression head


def _numbered_reviews(tmp_path):
    """The reviews of ``_reviews`` with their labels written as numbers: 1 positive, 0 negative."""
    path = _reviews(tmp_path, labels=("positive", "negative"))
    rows = list(csv.reader(open(path, encoding="utf-8")))
    numbered = [(text, {"negative": "0", "positive": "1"}[lab]) for text, lab in rows[1:]]
    return _csv(tmp_path, "numbered.csv", numbered, header=("review", "sentiment")), [lab for _, lab in rows[1:]]


def test_a_label_map_names_a_files_numbers_as_the_teacher_does(tmp_path, tiny_teacher, capsys):
    """0/1 in the file, positive/negative in the teacher: refused with the map as the fix; with ``label_map`` each
    row's label index is the teacher's index of its value's name, and a logged run is read again with the map."""
    teacher = tiny_teacher("classification", 2, label_names=("positive", "negative"))
    path, names = _numbered_reviews(tmp_path)
    data = {"train_file": path, "text_column": "review", "label_column": "sentiment"}
    with pytest.raises(UserError) as e:
        RunConfig.from_dict({"teacher": teacher, "data": data})
    assert e.value.field == "teacher" and "--label-map VALUE=NAME" in e.value.message
    # no pairing guessed (here the teacher's order, 0=positive, would have been the wrong one)
    assert (
        "0=positive" not in e.value.message
        and "numbers 0, 1 is which of the teacher's names positive, negative" in (e.value.message)
    )
    report()
    capsys.readouterr()
    cfg = RunConfig.from_dict({"teacher": teacher, "data": {**data, "label_map": "0=negative, 1=positive"}})
    report()
    assert cfg.data.labels == ("positive", "negative") and "(--label-map 0=negative, 1=positive)" in (
        capsys.readouterr().err
    )
    task = task_of(cfg)
    assert [task.label_names[r["label"]] for r in task.loader(task, None, "train")] == names
    params = cfg.to_params()
    assert params["label_map"] == "0=negative, 1=positive"
    params.pop("task_labels")  # read again from the file, with the map
    assert task_of_params(params).label_names == ("positive", "negative")


def test_without_a_named_teacher_the_maps_order_is_the_labels(tmp_path, tiny_teacher):
    path, _ = _numbered_reviews(tmp_path)
    data = {"train_file": path, "text_column": "review", "label_column": "sentiment", "label_map": "1=pos,0=neg"}
    assert resolve(FileData(**data)).labels == ("pos", "neg")
    placeholder = RunConfig.from_dict({"teacher": tiny_teacher("classification", 2), "data": data})
    assert placeholder.data.labels == ("pos", "neg")


@pytest.mark.parametrize(
    "label_map,says",
    [
        ("0=negative", "label '1' is not in --label-map 0=negative"),  # a value the map lacks
        ("0=negative,1=good", "'good' is not a label of the teacher (its labels: positive, negative)"),
        ("0:negative,1:positive", "'0:negative' is not VALUE=NAME"),  # malformed
        ("0=negative,0=positive", "value '0' is mapped twice"),
        ("0=negative,", "'' is not VALUE=NAME"),
    ],
)
def test_a_bad_label_map_is_refused_in_one_line(tmp_path, tiny_teacher, label_map, says):
    teacher = tiny_teacher("classification", 2, label_names=("positive", "negative"))
    path, _ = _numbered_reviews(tmp_path)
    data = {"train_file": path, "text_column": "review", "label_column": "sentiment", "label_map": label_map}
    with pytest.raises(UserError) as e:
        RunConfig.from_dict({"teacher": teacher, "data": data})
    assert e.value.field == "data.label_map" and says in e.value.message and "\n" not in e.value.message
    with pytest.raises(UserError) as e:
        resolve(FileData(**{**data, "label_map": "1=pos,0=neg"}, kind="regression"))
    assert e.value.field == "data.label_map"


def test_the_api_takes_a_label_map_as_text_or_a_dict():
    from raydistill.api import Data, _data

    assert _data(Data(train_file="f.csv", label_map={0: "neg", 1: "pos"})).label_map == "0=neg,1=pos"  # type: ignore[arg-type]
    assert _data({"train_file": "f.csv", "label_map": "0=neg,1=pos"}).label_map == "0=neg,1=pos"


@pytest.mark.parametrize(
    "names,want",
    [
        (("positive", "negative"), ("positive", "negative")),  # a named teacher: its names, in its order
        (None, ("positive", "NEGATIVE")),  # LABEL_0/1: the file's names, in the order the run printed (sorted)
    ],
)
def test_an_exported_student_answers_with_the_run_s_label_names(tmp_path, tiny_teacher, names, want):
    """The student, trained until it tells the two kinds of review apart, answers through ``pipeline()`` with the
    exact label of each review: the named teacher's name, or the file's where the teacher's are placeholders (it
    answered LABEL_1 before); its config maps each index to the name the run printed for it."""
    from transformers import AutoConfig, pipeline

    from raydistill.export.student import export_student
    from raydistill.orchestrate.run import fit_in_process

    teacher = tiny_teacher("classification", 2, label_names=names)
    data = {"train_file": _reviews(tmp_path), "text_column": "review", "label_column": "sentiment"}
    student = {"layers": 2, "hidden": 32, "intermediate": 64, "heads": 2, "init": "random"}
    train = {"epochs": 6, "batch_size": 4, "max_length": 16, "select_on": "dev", "lr": 1e-2}
    cfg = RunConfig.from_dict(
        {
            "teacher": teacher,
            "data": data,
            "student": student,
            "train": train,
            "distill": {
                "method": "kd",
                "alpha": 0.0,
            },  # the gold labels only: what a random tiny teacher knows is noise
            "output": str(tmp_path / "out"),
        }
    )
    _, ckpt = fit_in_process(cfg, run_dir=str(tmp_path / "run"), threads=1, resume=False, on_epoch=lambda m: None)
    out = export_student(ckpt, str(tmp_path / "student"))
    assert AutoConfig.from_pretrained(out).id2label == dict(enumerate(cfg.data.labels))
    answer = pipeline("text-classification", model=out, tokenizer=out)
    assert [answer(t)[0]["label"] for t in ("a great fun movie", "an awful bore movie")] == list(want)


# ------------------------------------------------------------------ a space's data section, the sweep's task


def test_a_space_carries_the_data_section(tmp_path, tiny_teacher):
    from raydistill.config import space as sp
    from raydistill.orchestrate.plan import task_and_data
    from raydistill.orchestrate.request import SweepRequest

    ok = _csv(tmp_path, "ok.csv", [(f"t{i}", "xy"[i % 2]) for i in range(20)], header=("body", "tag"))
    yaml = tmp_path / "mine.yaml"
    yaml.write_text(
        f"name: mine\nmethod: kd\ntask: rte\ndata: {{train_file: {ok}, text_column: body, label_column: tag}}\n"
    )
    spec = sp.load(str(yaml))
    assert spec.data == {"train_file": ok, "text_column": "body", "label_column": "tag"}
    flags = SweepRequest()
    task, data = task_and_data(flags, spec, tiny_teacher())  # the space's task is a default the files replace
    assert task.name == "file-ok" and data.labels == ("x", "y") and data.fingerprint
    with pytest.raises(UserError, match="give one of them"):
        task_and_data(SweepRequest(task="sst2"), spec, tiny_teacher())


@pytest.mark.slow
@pytest.mark.parametrize("name", list(SHARED))
def test_distill_command_on_files_scores_as_on_the_builtin_task(same_rows, name, tiny_teacher, tmp_path):
    """``python -m raydistill.distill`` end to end (its one worker in the command's process, MLflow) on the files and
    on the built-in task: the same val_* and eval_* scores with the same seed."""
    from raydistill.distill.__main__ import main

    teacher = tiny_teacher("regression" if name == "stsb" else "classification", 1 if name == "stsb" else 2)
    common = ["--method", "kd", "--teacher", teacher, "--init", "first_k", "--student-layers", "2"]
    common += ["--epochs", "1", "--max-steps", "3", "--batch-size", "8", "--max-length", "32", "--train-limit", "64"]
    common += ["--eval-limit", "40", "--tracking-uri", f"sqlite:///{tmp_path / 'mlflow.db'}", "--no-teacher-cache"]
    files = same_rows[name]["csv"]
    mine = ["--train-file", files["train_file"], "--eval-file", files["eval_file"]]
    mine += ["--text-column", files["text_column"], "--label-column", files["label_column"]]
    mine += ["--text-pair-column", files["text_pair_column"]] if files["text_pair_column"] else []
    mine += ["--phrase-rows"] if files["phrase_rows"] else []
    want = main([*common, "--task", name, "--data-dir", same_rows[name]["glue"], "--output", str(tmp_path / "a")])
    got = main([*common, *mine, "--output", str(tmp_path / "b")])
    scores = [k for k in want if k.startswith(("val_", "eval_", "best_val_", "best_eval_")) and "_recall_" not in k]
    assert scores and {k: got[k] for k in scores} == {k: want[k] for k in scores}
    # each class's dev recall, keyed by its name (the file's names are not the built-in task's): the same in order
    recalls = [[v for k, v in out.items() if k.startswith("eval_recall_")] for out in (want, got)]
    assert recalls[0] == recalls[1] and len(recalls[0]) == (0 if name == "stsb" else 2)
    if name != "stsb":  # the label names in index order, an artifact beside the params (long lists fit there)
        import mlflow

        client = mlflow.MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
        path = client.download_artifacts(got["run_id"], "task/labels.json", str(tmp_path))
        assert json.load(open(path)) == {"labels": sorted(SHARED[name][3])}


def test_labels_given_in_order_must_cover_the_file(tmp_path):
    path = _csv(tmp_path, "t.csv", [("a", "low"), ("b", "high"), ("c", "mid")])
    assert resolve(FileData(train_file=path, labels=("low", "mid", "high"))).labels == ("low", "mid", "high")
    e = _refused(FileData(train_file=path, labels=("low", "high")))
    assert e.field == "data.labels" and "'mid' not in data.labels" in e.message


def test_files_changed_after_setup_are_refused_where_read(tmp_path):
    """A worker, a ``--resume`` or ``best`` reads the files the run was set up on, or refuses in one line."""
    path = _csv(tmp_path, "t.csv", [(f"t{i}", "xy"[i % 2]) for i in range(20)])
    task = task_of(RunConfig.from_dict({"teacher": "t", "data": {"train_file": path}}))
    assert len(task.loader(task, None, "train")) == 20
    with open(path, "a", encoding="utf-8") as f:
        f.write("t20,x\n")
    with pytest.raises(UserError) as e:
        task.loader(task, None, "train")
    assert e.value.field == "data.train_file" and "changed since this run was set up" in e.value.message


def test_a_builtin_task_refuses_a_teacher_naming_its_labels_in_another_order(tiny_teacher):
    """SST-2's labels are (negative, positive); a teacher saying (positive, negative) would teach swapped targets."""
    from transformers import AutoConfig

    from raydistill.tasks import get_task
    from raydistill.train.preflight import check_label_order

    sst2 = get_task("sst2")
    for names in (None, ("negative", "positive"), ("NEGATIVE", "POSITIVE"), ("neg", "pos")):
        check_label_order(AutoConfig.from_pretrained(tiny_teacher("classification", 2, label_names=names)), sst2, "t")
    swapped = AutoConfig.from_pretrained(tiny_teacher("classification", 2, label_names=("Positive", "Negative")))
    with pytest.raises(UserError) as e:
        check_label_order(swapped, sst2, "T")
    assert (
        e.value.field == "teacher"
        and "(Positive, Negative)" in e.value.message
        and "(negative, positive)" in (e.value.message)
    )


def test_evaluate_scores_the_test_file_as_test(tmp_path, tiny_teacher):
    """``evaluate --split test`` scores the --test-file and names the scores test_*: eval_* is the dev set's."""
    from raydistill.evaluate import main

    teacher = tiny_teacher("classification", 2, label_names=("negative", "positive"))
    train = _csv(tmp_path, "train.csv", [(f"movie {i}", ("negative", "positive")[i % 2]) for i in range(20)])
    test = _csv(tmp_path, "test.csv", [(f"film {i}", ("negative", "positive")[i % 3 == 0]) for i in range(9)])
    common = ["--model", teacher, "--train-file", train, "--max-length", "16"]
    out = main([*common, "--test-file", test, "--split", "test"])
    recalls = {"recall_negative", "recall_positive"}  # each class's recall on the split scored (issue 48)
    assert set(out) == {f"test_{m}" for m in ("accuracy", "macro_f1", "f1", "mcc", *recalls)}
    dev = main(common)  # no --eval-file: the held-out tenth of train
    assert set(dev) == {f"eval_{m}" for m in ("accuracy", "macro_f1", "f1", "mcc", *recalls)}
