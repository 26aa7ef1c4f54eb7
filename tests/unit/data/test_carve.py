"""The validation split is carved by group (data/carve.py): on every shared GLUE task no text sits on both sides, the
label shares match all training rows, and SST-2's validation rows are whole sentences like dev."""

from __future__ import annotations

import collections
import os
import statistics
from types import SimpleNamespace

import pytest

from raydistill.common.errors import UserError
from raydistill.data import carve as C


def _task(kind="classification", labels=("neg", "pos"), phrase_rows=False, name="t"):
    return SimpleNamespace(name=name, kind=kind, label_names=labels, phrase_rows=phrase_rows)


@pytest.fixture(autouse=True)
def _fresh(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the on-disk carve cache lands in this test's folder
    monkeypatch.setattr(C, "_MEMO", {})


def test_sentences_are_the_rows_inside_no_other_row():
    texts = {0: "a fine film", 1: "fine", 2: "a fine", 3: "the plot drags", 4: "plot", 5: "fine film indeed"}
    assert sorted(C.sentences(texts)) == [0, 3, 5]


def test_phrase_carve_takes_sentences_and_drops_the_phrases_inside_them():
    rows, sents = [], []
    for k in range(40):
        y = k % 2
        words = [f"w{k}a", f"w{k}b", "good" if y else "bad", f"w{k}c", f"w{k}d"]
        sents.append(len(rows))
        rows.append({"text": " ".join(words), "label": y})
        rows += [{"text": " ".join(words[i : i + 2]), "label": y} for i in range(0, 4, 2)]
    rows.append({"text": "GOOD", "label": 1})  # inside every positive sentence, case aside
    cut = C.carve(rows, _task(phrase_rows=True), 0.1)
    assert set(cut.val) <= set(sents) and len(cut.val) == 4  # 10% of the 40 sentences
    val_text = [rows[i]["text"].lower() for i in cut.val]
    train = [i for i in range(len(rows)) if i not in cut.out_of_train]
    assert not any(rows[i]["text"].lower() in v for i in train for v in val_text)
    assert not any(v in rows[i]["text"].lower() for i in train for v in val_text)
    assert len(rows) - 1 in cut.dropped  # "GOOD" sits inside a validation sentence: it leaves training
    assert [rows[i]["label"] for i in cut.val].count(1) == 2  # the label shares of all rows


def test_a_sentence_inside_another_row_by_characters_takes_that_row_out_of_training():
    rows = [{"text": f"sentence number {k} here", "label": k % 2} for k in range(30)]
    rows += [{"text": f"{r['text']}!", "label": r["label"]} for r in rows[:30]]  # no word span, a char superstring
    cut = C.carve(rows, _task(phrase_rows=True), 0.1)
    train = [rows[i]["text"] for i in range(len(rows)) if i not in cut.out_of_train]
    assert cut.val and not any(rows[v]["text"] in t for v in cut.val for t in train)


def test_identical_text_and_pairs_stay_on_one_side():
    rows = [{"text": f"Row {k % 50}", "text_pair": f"other {k % 50}", "label": k % 2} for k in range(200)]
    rows += [{"text": f"other {k}", "text_pair": f"ROW {k}", "label": k % 2} for k in range(50)]  # the pair swapped
    cut = C.carve(rows, _task(), 0.1)
    train = {C.group_key(rows[i], "classification") for i in range(len(rows)) if i not in cut.out_of_train}
    assert cut.val and not train & {C.group_key(rows[i], "classification") for i in cut.val}


def test_qa_rows_group_by_context():
    rows = [
        {"id": str(k), "question": f"q{k}", "context": f"context {k // 5}", "answers": {"text": [], "answer_start": []}}
        for k in range(200)
    ]
    cut = C.carve(rows, _task("qa", ()), 0.1)
    val_ctx = {rows[i]["context"] for i in cut.val}
    assert len(cut.val) == 20 and not any(rows[i]["context"] in val_ctx for i in range(200) if i not in cut.val)


def test_a_label_left_without_validation_rows_once_grouped_is_refused():
    rows = [{"text": "the same", "label": 1} for _ in range(30)] + [{"text": f"r{k}", "label": 0} for k in range(300)]
    with pytest.raises(UserError) as e:  # every positive row is one group: it cannot be split
        C.carve(rows, _task(), 0.1)
    assert e.value.field == "val_fraction" and "'pos'" in str(e.value) and "--val-fraction" in str(e.value)


def test_the_label_check_reads_the_training_rows_once():
    """The rows left to train are checked as they are found (a one-pass iterator, no set of every row: issue 48);
    each label still needs a row on both sides."""
    label, target = {i: i % 2 for i in range(10)}, {0: 1, 1: 1}
    C._check_labels(_task(), 0.1, [0, 1], iter([3, 5, 7, 9, 2, 4]), label, target)  # both labels on both sides
    with pytest.raises(UserError) as e:
        C._check_labels(_task(), 0.1, [0, 1], iter([2, 4, 6]), label, target)
    assert "label 'pos'" in e.value.message and "no training row" in e.value.message
    with pytest.raises(UserError) as e:
        C._check_labels(_task(), 0.1, [0, 2], iter(range(3, 10)), label, target)
    assert "label 'pos'" in e.value.message and "no validation row" in e.value.message


def test_the_carve_is_computed_once_per_data(monkeypatch):
    rows = [{"text": f"row {k}", "label": k % 2} for k in range(100)]
    first = C.carve(rows, _task(), 0.1)
    monkeypatch.setattr(C, "_MEMO", {})  # another process: read from raydistill-results/splits/
    monkeypatch.setattr(C, "_grouped", lambda *a: pytest.fail("carved again"))
    assert C.carve(rows, _task(), 0.1) == first
    rows[0]["text"] = "changed"
    with pytest.raises(pytest.fail.Exception):  # other data: carved anew
        C.carve(rows, _task(), 0.1)


GLUE = ("sst2", "mrpc", "rte", "stsb", "wnli")


@pytest.mark.parametrize("name", GLUE)
def test_shared_glue_tasks_share_no_text_across_the_carve(shared_data, name):
    from raydistill.config.schema import RunConfig
    from raydistill.data.splits import split_train, train_val_dev
    from raydistill.tasks import get_task

    task = get_task(name)
    cfg = RunConfig.from_dict({"task": name, "teacher": "x", "data_dir": f"{shared_data}/glue"})
    train, val, dev = train_val_dev(cfg, task)
    rows, _ = split_train(task, cfg.data_dir)
    assert len(val) == pytest.approx(0.1 * (len(rows) if name != "sst2" else 6885), abs=2)
    if task.kind == "classification":
        every = collections.Counter(r["label"] for r in rows)
        chosen = collections.Counter(r["label"] for r in val)
        for y in every:
            assert abs(chosen[y] / len(val) - every[y] / len(rows)) <= 0.03
    if task.pair:
        assert not {C.group_key(r, task.kind) for r in train} & {C.group_key(r, task.kind) for r in val}
    else:
        train_text = "\x00".join(C.norm(r["text"]) for r in train)
        val_text = "\x00".join(C.norm(r["text"]) for r in val)
        assert not [r for r in val if C.norm(r["text"]) in train_text]
        assert not [r for r in train if len(r["text"].split()) >= 4 and C.norm(r["text"]) in val_text]
        # like dev: whole sentences, not phrases (median words 19 and 19; the row-wise carve's was 7)
        assert abs(_median_words(val) - _median_words(dev)) <= 2


def _median_words(rows: list) -> float:
    return statistics.median(len(r["text"].split()) for r in rows)


def test_data_split_writes_the_rows_a_run_sees_with_label_names(glue_dir, tmp_path, capsys):
    import json

    from raydistill.config.schema import RunConfig
    from raydistill.data.__main__ import main
    from raydistill.data.splits import train_val_dev
    from raydistill.tasks import get_task

    out = tmp_path / "rows"
    assert main(["split", "--task", "sst2", "--data-dir", str(glue_dir), "--output", str(out)]) == 0
    cfg = RunConfig.from_dict({"task": "sst2", "teacher": "-", "data_dir": str(glue_dir)})
    for name, rows in zip(("train", "validation", "dev"), train_val_dev(cfg, get_task("sst2")), strict=True):
        written = [json.loads(line) for line in (out / f"{name}.jsonl").read_text().splitlines()]
        assert written == [{"text": r["text"], "label": ("negative", "positive")[r["label"]]} for r in rows]
    summary = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert summary["validation"] == len(train_val_dev(cfg, get_task("sst2"))[1])
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("the user's")
    with pytest.raises(SystemExit) as e:  # the folder rule: refused, nothing written
        main(["split", "--task", "sst2", "--data-dir", str(glue_dir), "--output", str(tmp_path / "mine")])
    assert e.value.code == 2 and "--overwrite" in capsys.readouterr().err
    assert sorted(p.name for p in (tmp_path / "mine").iterdir()) == ["notes.txt"]


def test_data_summary_reports_the_carve(shared_data, capsys):
    import json

    from raydistill.data.__main__ import main

    assert main(["summary", "--task", "sst2", "--data-dir", f"{shared_data}/glue"]) == 0
    carve = json.loads(capsys.readouterr().out.splitlines()[-1])["carve"]
    # 10% of the 6,885 sentences; the training phrases inside them (or around them) left training
    assert carve["validation"] == pytest.approx(688, abs=2) and carve["validation_inside_train"] == 0
    assert 5000 < carve["dropped_from_train"] < 10000


def test_a_sweep_started_on_other_rows_is_not_resumed(tiny_teacher, glue_dir, tmp_path, capsys, monkeypatch):
    """A sweep recorded before the grouped carve (no data fingerprint in its state) or on other data: refused before
    Ray, never mixed with new trials."""
    import json

    from raydistill.orchestrate import connect
    from raydistill.orchestrate.driver import state_path
    from raydistill.sweep import main
    from raydistill.tracking.track import Tracker

    def started(*a, **k):
        raise AssertionError("Ray or the sweep's MLflow run started: the resume was not refused up front")

    monkeypatch.setattr(connect, "init_ray", started)  # (the tests' shared Ray may already run: trap, not ask)
    monkeypatch.setattr(Tracker, "start_run", started)

    storage = str(tmp_path / "ray")
    argv = ["pkd_glue", "--task", "sst2", "--data-dir", str(glue_dir), "--teacher", tiny_teacher("classification", 2)]
    argv += ["--tracking-uri", f"sqlite:///{tmp_path}/mlflow.db", "--storage-path", storage, "--num-samples", "1"]
    path = state_path(storage, "old")
    os.makedirs(os.path.dirname(path))
    for recorded in ({}, {"data_fingerprint": "0123456789abcdef"}):
        with open(path, "w") as f:
            json.dump({"argv": argv, "name": "old", "parent_run_id": "abc", **recorded}, f)
        with pytest.raises(SystemExit) as e:
            main(["--resume", "--name", "old", "--storage-path", storage])
        err = capsys.readouterr().err.strip().splitlines()[-1]
        assert e.value.code == 2 and err.startswith("error: resume: sweep 'old' was started on other"), err


def test_eval_limit_bounds_the_validation_split_too(glue_dir):
    """A quick run scores at most --eval-limit rows of each split every epoch: dev's first rows, a fixed sample of
    validation (the old code scored all of validation, 10% of the full training set, whatever the limits)."""
    from raydistill.config.schema import RunConfig
    from raydistill.data.splits import train_val_dev
    from raydistill.tasks import get_task

    cfg = RunConfig.from_dict({"task": "sst2", "teacher": "-", "data_dir": str(glue_dir)})
    _, val_all, dev_all = train_val_dev(cfg, get_task("sst2"))
    quick = cfg.replace(train=cfg.train.__class__(eval_limit=8, train_limit=20))
    train, val, dev = train_val_dev(quick, get_task("sst2"))
    assert len(val) == 8 and len(dev) == 8 and dev == dev_all[:8] and len(train) == 20
    assert all(r in val_all for r in val) and val == train_val_dev(quick, get_task("sst2"))[1]  # fixed
    assert not {r["text"] for r in train} & {r["text"] for r in val_all}  # the rows left out go to no side


# ------------------------------------------------------------------ the carve's key; the dev set held out of one file


def _phrase_file(tmp_path, n=80) -> str:
    """Whole sentences and the phrases cut from them (SST-2's layout), some phrases repeated, as one CSV."""
    import csv

    rows = []
    for k in range(n):
        y = k % 2
        words = [f"w{k}a", f"w{k}b", "good" if y else "bad", f"w{k}c", f"w{k}d"]
        rows.append((" ".join(words), y))
        rows += [(" ".join(words[i : i + 2]), y) for i in range(0, 4, 2)]
        rows.append((" ".join(words[:2]), y))  # the same phrase twice: one group
    path = tmp_path / "phrases.csv"
    with open(path, "w", newline="", encoding="utf-8") as f:
        csv.writer(f).writerows([("text", "label"), *rows])
    return str(path)


def _files_cfg(train_file, **data):
    from raydistill.config.schema import RunConfig

    train = {k: data.pop(k) for k in ("val_fraction", "train_limit", "eval_limit") if k in data}
    return RunConfig.from_dict({"teacher": "x", "data": {"train_file": train_file, **data}, "train": train})


def test_phrase_rows_is_part_of_the_carves_key_and_the_data_fingerprint(tmp_path):
    """The same file with and without --phrase-rows: another carve (by sentence), not the one saved for the other
    (key 2 had no phrase_rows: the second run reused the first's split), and another data fingerprint."""
    from raydistill.config.schema import task_of
    from raydistill.data.splits import data_fingerprint, train_val_dev

    path = _phrase_file(tmp_path)
    plain, phrases = _files_cfg(path), _files_cfg(path, phrase_rows=True)
    _, val_plain, _ = train_val_dev(plain, task_of(plain))
    C._MEMO.clear()  # the next run is another process: only the saved carve is shared
    task = task_of(phrases)
    train, val, dev = train_val_dev(phrases, task)
    assert val != val_plain and all(len(r["text"].split()) == 5 for r in val)  # whole sentences only
    assert C.inside_count(task, train, val) == 0
    fingerprints = {data_fingerprint(plain), data_fingerprint(phrases)}
    for changed in ({"val_fraction": 0.2}, {"train_limit": 50}, {"eval_limit": 4}):
        fingerprints.add(data_fingerprint(_files_cfg(path, phrase_rows=True, **changed)))
    assert len(fingerprints) == 5


@pytest.mark.parametrize("phrase_rows", [True, False])
def test_the_dev_set_held_out_of_one_file_is_grouped_as_validation(tmp_path, phrase_rows):
    """No --eval-file: the tenth held out as dev is drawn by validation's rule, so no dev row sits inside a training
    row (phrase rows: dev holds whole sentences and the phrases inside them leave training; else the same text stays
    on one side). Row by row, dev shared text with training."""
    from raydistill.config.schema import task_of
    from raydistill.data.splits import split_train, train_val_dev

    cfg = _files_cfg(_phrase_file(tmp_path), phrase_rows=phrase_rows)
    task = task_of(cfg)
    train, val, dev = train_val_dev(cfg, task)
    rows, held = split_train(task, None)
    assert dev == [rows[i] for i in held.val] and len(dev) == pytest.approx(0.1 * (80 if phrase_rows else 320), abs=2)
    assert C.inside_count(task, train, dev) == 0 and C.inside_count(task, train, val) == 0
    assert not {C.norm(r["text"]) for r in dev} & {C.norm(r["text"]) for r in val}
    if phrase_rows:
        assert all(len(r["text"].split()) == 5 for r in dev) and held.dropped


def test_a_file_too_small_to_hold_out_dev_names_the_flag(tmp_path):
    from raydistill.config.schema import task_of
    from raydistill.data.splits import train_val_dev

    path = tmp_path / "few.csv"
    path.write_text("text,label\n" + "".join(f"row {k},{'ab'[k % 2]}\n" for k in range(8)), encoding="utf-8")
    cfg = _files_cfg(str(path))
    with pytest.raises(UserError) as e:
        train_val_dev(cfg, task_of(cfg))
    assert e.value.field == "data.eval_file" and "too few to carve a 0.1 dev split" in e.value.message
    assert "--eval-file FILE" in e.value.message
