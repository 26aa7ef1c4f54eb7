"""The user's files read streaming, once per process (issue 48 item 1): rows across read-block boundaries, quoted line
breaks, a BOM, a sniffed delimiter, blank lines in JSON Lines, long first lines; the fingerprint and the data's digests
the same bytes as before (caches and sweeps keyed by them stay valid); one full read of a file for a whole run's
set-up; a ``--dataset`` folder of CSV files read with every value as text."""

from __future__ import annotations

import builtins
import csv
import io
import json
import os

import pytest

from raydistill.common.errors import UserError
from raydistill.tasks import readers
from raydistill.tasks.readers import columns_of, fingerprint, read_columns, read_files

# texts a reader could break on: a quote, a line break inside quotes (CSV), a multibyte character, a tab
TEXTS = ("plain", 'a "quoted" word', "two\nlines", "é ü 한국어 ✓", "semi;colon, comma", "")


@pytest.fixture(autouse=True)
def _unsaid():
    from raydistill.tasks import files

    yield
    files._pending.clear()


def _rows(n: int) -> list[tuple[str, str]]:
    return [(f"{TEXTS[i % len(TEXTS)]} {i}" + "x" * (i % 97), "ab"[i % 2]) for i in range(n)]


def _csv(path, rows, delimiter=",", bom=False) -> str:
    with open(path, "w", encoding="utf-8-sig" if bom else "utf-8", newline="") as f:
        w = csv.writer(f, delimiter=delimiter)
        w.writerow(["text", "label"])
        w.writerows(rows)
    return str(path)


def _jsonl(path, rows, blank_every=0, bom=False) -> str:
    with open(path, "w", encoding="utf-8-sig" if bom else "utf-8") as f:
        for i, (t, lab) in enumerate(rows):
            f.write(json.dumps({"text": t, "label": lab, "n": i}, ensure_ascii=False) + "\n")
            if blank_every and i % blank_every == 0:
                f.write("\n  \n")
    return str(path)


def test_rows_across_read_blocks_are_the_files_rows(tmp_path, monkeypatch):
    """Files of several read blocks (a quoted line break, a multibyte character straddling a block's end) give the
    rows the csv module and json give reading the whole text; the fingerprint is the bytes' hash."""
    monkeypatch.setattr(readers, "BLOCK", 4099)  # an odd size: boundaries fall inside rows and characters
    rows = _rows(3000)
    c = _csv(tmp_path / "t.csv", rows)
    j = _jsonl(tmp_path / "t.jsonl", rows, blank_every=7)
    assert os.path.getsize(c) > 50 * readers.BLOCK
    with open(c, encoding="utf-8", newline="") as f:
        want = list(csv.reader(f))[1:]
    got = read_columns(c, "data.train_file", ["text", "label"])
    assert [v for _, v in got] == [list(r) for r in want] == [list(r) for r in rows]
    assert got[2][0] == 5 and got[3][0] == 6  # line numbers: the csv module's, a quoted line break counted
    got = read_columns(j, "data.train_file", ["label", "text", "n"])
    assert [v for _, v in got] == [[lab, t, str(i)] for i, (t, lab) in enumerate(rows)]
    assert got[1][0] == 4  # line numbers count the blank lines
    (_, fp_c), (_, fp_j) = read_files([(c, "f")], ["text"]), read_files([(j, "f")], ["text"])
    assert fp_c == fingerprint([c]) and fp_j == fingerprint([j])


def test_a_bom_a_sniffed_delimiter_and_a_tsv(tmp_path):
    """A BOM is no part of the first column's name (its bytes are part of the fingerprint); a semicolon file is
    sniffed and read as such, a delimiter given wins; TSV keeps stray quotes."""
    rows = _rows(50)
    c = _csv(tmp_path / "semi.csv", rows, delimiter=";", bom=True)
    assert columns_of(c, "f") == ["text", "label"]
    assert [v for _, v in read_columns(c, "f", ["text", "label"])] == [list(r) for r in rows]
    assert read_files([(c, "f")], ["text"])[1] == fingerprint([c])
    assert columns_of(c, "f", ",") == ["text;label"]  # --delimiter ',' chosen: one column, as asked
    j = _jsonl(tmp_path / "bom.jsonl", rows[:3], bom=True)
    assert columns_of(j, "f") == ["text", "label", "n"]
    t = tmp_path / "t.tsv"
    t.write_text("sentence\tlabel\nit's \"fine\t1\n", encoding="utf-8")
    assert read_columns(str(t), "f", ["sentence", "label"]) == [(2, ["it's \"fine", "1"])]


def test_first_lines_longer_than_the_head(tmp_path):
    """Columns come from the first 64 KiB; a first line longer than that is read to its end."""
    long = "y" * (readers.SNIFF_CHARS + 10)
    j = _jsonl(tmp_path / "long.jsonl", [(long, "a"), ("b", "b")])
    assert columns_of(j, "f") == ["text", "label", "n"]
    c = tmp_path / "long.csv"
    c.write_text(f"text,{long}\nx,y\n", encoding="utf-8")
    assert columns_of(str(c), "f") == ["text", long]


def test_errors_name_the_line_and_the_fingerprint_still_covers_the_file(tmp_path):
    """A bad line stops the rows (raised when they are asked for, naming the line) but not the hash."""
    j = tmp_path / "bad.jsonl"
    j.write_text('{"text": "a", "label": "x"}\n\n{"text": oops}\n{"text": "c", "label": "y"}\n', encoding="utf-8")
    (got,), fp = read_files([(str(j), "data.eval_file")], ["text", "label"])
    assert fp == fingerprint([str(j)])
    with pytest.raises(UserError) as e:
        got.get()
    assert e.value.field == "data.eval_file" and "line 3 is not JSON" in e.value.message


def test_fingerprints_and_digests_are_the_bytes_they_were(tmp_path):
    """The same files give the fingerprint and the data digests commit c0877e1 (before streaming) gave: the values
    below were computed there on these very files (teacher caches, fine-tunes and sweeps keyed by them stay valid)."""
    from raydistill.config.schema import RunConfig
    from raydistill.data.splits import data_fingerprint, datasets

    train = _csv(tmp_path / "train.csv", _rows(400), bom=True)
    dev = _jsonl(tmp_path / "dev.jsonl", _rows(60), blank_every=9)
    cfg = RunConfig.from_dict({"teacher": "-", "data": {"train_file": train, "eval_file": dev}})
    assert cfg.data.fingerprint == fingerprint([train, dev]) == FILES_FP
    assert data_fingerprint(cfg) == DATA_FP
    assert [(d["name"], d["digest"], d["rows"]) for d in datasets(cfg)] == DIGESTS


FILES_FP = "fd6170a96cdb1f1a"
DATA_FP = "6c218c3f5188c412"
DIGESTS = [("file-train-train", "8d87f2a8475eda0c", 360), ("file-train-val", "f0a72a3ec2ea520e", 40)]
DIGESTS += [("file-train-dev", "a427c0e8d3704a71", 60)]


def test_one_read_of_each_file_for_a_runs_set_up(tmp_path, monkeypatch):
    """Resolving the data, the run's data fingerprint, its MLflow dataset inputs, the training and dev rows: each file
    read whole once (and its first 64 KiB once, for the columns); they were read whole five to seven times."""
    from raydistill.config.schema import RunConfig, task_of
    from raydistill.data.splits import data_fingerprint, datasets, train_val_dev

    train = _jsonl(tmp_path / "train.jsonl", _rows(300))
    dev = _csv(tmp_path / "dev.csv", _rows(40))
    opened: list[tuple[str, str]] = []
    real = builtins.open

    def counting(file, mode="r", *args, **kwargs):
        if str(file) in (train, dev):
            opened.append((os.path.basename(str(file)), mode))
        return real(file, mode, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", counting)
    monkeypatch.setattr(io, "open", counting)
    cfg = RunConfig.from_dict({"teacher": "-", "data": {"train_file": train, "eval_file": dev}})
    data_fingerprint(cfg), datasets(cfg), train_val_dev(cfg, task_of(cfg))
    whole = [name for name, mode in opened if "b" in mode]
    assert sorted(whole) == ["dev.csv", "train.jsonl"], opened
    assert len(opened) <= 4, opened  # and each head once


def test_a_dataset_folder_of_csv_reads_na_null_none_as_text(tmp_path):
    """``--dataset DIR`` with CSV (or TSV) files reads "NA", "null", "None", "007" as the text they are, as
    ``--train-file`` does; pandas' NA guessing made them missing and their rows were dropped."""
    from raydistill.config.schema import RunConfig, task_of

    words = ["NA", "null", "None", "N/A", "nan", "007", "True", "good"]
    rows = [(w, "pos" if i % 2 else "neg") for i, w in enumerate(words * 5)]
    for folder, ext, delimiter in (("csv", "csv", ","), ("tsv", "tsv", "\t"), ("semi", "csv", ";")):
        (tmp_path / folder).mkdir()
        for split in ("train", "validation"):
            with open(tmp_path / folder / f"{split}.{ext}", "w", encoding="utf-8", newline="") as f:
                f.write(f"text{delimiter}label\n" + "".join(f"{t}{delimiter}{lab}\n" for t, lab in rows))
        cfg = RunConfig.from_dict({"teacher": "-", "data": {"dataset": str(tmp_path / folder)}})
        task = task_of(cfg)
        got = task.loader(task, None, "train")
        assert [r["text"] for r in got] == [t for t, _ in rows], folder
        assert task.label_names == ("neg", "pos")


def test_rows_are_kept_by_column(tmp_path):
    """The rows a process keeps are held by column (a number array and one list per column, no tuple and list per
    row) and read as the ``(number, [values])`` pairs they always were; a label's values held once each."""
    rows = _rows(500)
    j = _jsonl(tmp_path / "cols.jsonl", rows, blank_every=5)
    ((got,), _) = read_files([(j, "f")], ["text", "label"], shared=("label",))
    table = got.get()
    assert isinstance(table, readers.Table) and table.numbers.typecode == "q" and len(table.columns) == 2
    assert table.columns[0] == [t for t, _ in rows] and len({id(v) for v in table.columns[1]}) == 2
    pairs = [(n, [t, lab]) for n, (t, lab) in zip(table.numbers, rows, strict=True)]
    assert table == pairs and pairs == table and list(table) == pairs and table != pairs[:-1]
    assert table[0] == (1, [rows[0][0], "a"]) and table[-1] == pairs[-1] and table[3:5] == pairs[3:5]
    assert table[1][0] == 4 and table[2][0] == 5  # record numbers count the blank lines


def test_a_file_not_utf8_says_so_and_how_to_fix_it(tmp_path):
    f = tmp_path / "latin.csv"
    f.write_bytes("text,label\ncafé crème,pos\nbof,neg\n".encode("latin-1"))
    with pytest.raises(UserError) as e:
        read_columns(str(f), "data.train_file", ["text", "label"])
    assert "is not UTF-8 text" in e.value.message and "save it as UTF-8" in e.value.message


def test_json_rows_beside_other_keys_are_refused_a_lone_object_is_a_row(tmp_path):
    wrapped = tmp_path / "w.json"
    wrapped.write_text(json.dumps({"version": 1, "data": [{"text": "a", "label": "x"}]}, indent=1))
    with pytest.raises(UserError) as e:
        read_columns(str(wrapped), "data.train_file", ["text", "label"])
    assert "its rows are under 'data' beside other keys (version, data)" in e.value.message
    lone = tmp_path / "one.json"
    lone.write_text('{"text": "a", "label": "x"}\n')
    assert [vals for _, vals in read_columns(str(lone), "data.train_file", ["text", "label"])] == [["a", "x"]]
