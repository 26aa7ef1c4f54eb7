"""Task registry and loaders: every format quirk on tiny hand-written fixtures, errors, and (optionally) real data."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from raydistill.common.errors import UserError
from raydistill.data.__main__ import main as data_main
from raydistill.data.overview import summary
from raydistill.tasks import SPLITS, TASKS, get_task, load_split
from tests.paths import FIXTURES

FIX = FIXTURES
GLUE = FIX / "glue"


def load(name, split, data_dir=GLUE):
    return load_split(name, str(data_dir), split)


# --------------------------------------------------------------------------- registry


def test_registry_covers_all_tasks():
    assert set(TASKS) == {
        "cola",
        "sst2",
        "mrpc",
        "stsb",
        "qqp",
        "mnli",
        "qnli",
        "rte",
        "wnli",
        "nsmc",
        "korquad",
        "kmou_ner",
        "klue_ner",
        "general",
    }
    assert [t.name for t in TASKS.values() if not t.labelled] == ["general"]
    assert get_task("SST-2").name == "sst2" and get_task("kmou-ner").name == "kmou_ner"
    for t in TASKS.values():
        assert t.main_metric in t.metrics and t.eval_split in SPLITS[t.name]
    assert TASKS["stsb"].kind == "regression" and TASKS["stsb"].num_labels == 1
    assert TASKS["mnli"].eval_split == "validation_matched"
    assert TASKS["nsmc"].eval_split == "test" and TASKS["korquad"].kind == "qa"
    assert TASKS["klue_ner"].label_names[0] == "O" and "B-QT" in TASKS["klue_ner"].label_names
    assert "B-QT" not in TASKS["kmou_ner"].label_names and len(TASKS["kmou_ner"].label_names) == 11


def test_unknown_task():
    with pytest.raises(UserError) as e:
        get_task("squad")
    assert e.value.field == "task" and "sst2" in str(e.value)


# --------------------------------------------------------------------------- GLUE quirks


def test_mrpc_bom_header_and_stray_quote():
    ex = load("mrpc", "train")
    assert len(ex) == 3 and [e["label"] for e in ex] == [1, 0, 1]
    assert ex[0]["text_pair"] == '"The cat was sitting on the mat.'  # stray quote kept, row not merged
    assert ex[1]["text"] == 'He said "no" twice.'
    assert load("mrpc", "validation")[0]["text"] == '"Quoted start without end'


def test_cola_headerless_four_columns():
    ex = load("cola", "train")
    assert [(e["text"], e["label"]) for e in ex] == [
        ("The dog barked loudly.", 1),
        ("Dog the loudly barked.", 0),
        ("She reads books.", 1),
    ]
    assert ex[0]["text_pair"] is None


def test_stsb_ten_columns_float_score():
    ex = load("stsb", "dev")  # "dev" is an alias of validation
    assert [e["label"] for e in ex] == [4.8, 1.25, 0.0]
    assert ex[1]["text"] == '"Stocks fall in early trade' and ex[1]["text_pair"] == "Markets open lower."


def test_string_labels_qnli_rte():
    q = load("qnli", "validation")
    assert [e["label"] for e in q] == [0, 1] and q[1]["text"].startswith('"What')
    assert [e["label"] for e in load("rte", "validation")] == [0, 1]  # entailment, not_entailment


def test_sst2_wnli_qqp_mnli():
    s = load("sst2", "validation")
    assert s[0] == {"text": "it 's a charming little film . ", "text_pair": None, "label": 1}
    assert [e["label"] for e in load("wnli", "validation")] == [1, 0]
    assert [e["label"] for e in load("qqp", "validation")] == [1, 0]  # the broken row is skipped
    m = load("mnli", "validation_matched")
    assert [e["label"] for e in m] == [0, 2, 1] and m[0]["text_pair"] == "A person eats."
    assert load("mnli", "validation") == m  # "validation" means matched
    assert load("mnli", "validation_mismatched")[0]["label"] == 2


def test_glue_lenient_layouts():
    assert load("cola", "train", GLUE / "CoLA") == load("cola", "train")  # the task folder itself
    assert load("cola", "train", FIX) == load("cola", "train")  # parent of glue/


def test_glue_test_split_is_unlabelled():
    with pytest.raises(UserError) as e:
        load("sst2", "test")
    assert e.value.field == "split"


# --------------------------------------------------------------------------- Korean quirks


def test_nsmc_empty_and_nan_documents():
    ex = load("nsmc", "test", FIX)
    assert [e["text"] for e in ex] == ["정말 재밌어요", "", "NaN", '"""최고의 영화"" 입니다"""']
    assert [e["label"] for e in ex] == [1, 0, 0, 1]
    assert load("nsmc", "test", FIX / "nsmc") == ex


def test_korquad_dev_only():
    ex = load("korquad", "validation", FIX)
    assert [e["id"] for e in ex] == ["q1", "q2", "q3"]
    for e in ex:
        a, s = e["answers"]["text"][0], e["answers"]["answer_start"][0]
        assert e["context"][s : s + len(a)] == a
    with pytest.raises(UserError) as err:
        load("korquad", "train", FIX)
    assert err.value.field == "data_dir" and "KorQuAD_v1.0_train.json" in str(err.value)


def test_kmou_crlf_and_typeless_i():
    assert b"\r\n" in (FIX / "ner/kmou_2016klp/ner.dev").read_bytes()
    task = get_task("kmou_ner")
    ex = load("kmou_ner", "validation", FIX)
    tags = [[task.label_names[i] for i in e["labels"]] for e in ex]
    assert ex[0]["tokens"] == ["김", "철수", "가", "서울", "에", "가", "았다", "."]
    assert tags[0] == ["B-PS", "I-PS", "O", "B-LC", "O", "O", "O", "O"]
    assert tags[1] == ["B-DT", "I-DT", "I-DT", "I-DT", "O"]
    for d in (FIX / "ner", FIX / "ner/kmou_2016klp"):
        assert load("kmou_ner", "validation", d) == ex


def test_klue_char_lines_drop_spaces():
    task = get_task("klue_ner")
    ex = load("klue_ner", "validation", FIX)
    assert len(ex) == 2  # the five '##' comment lines are not a sentence
    assert ex[0]["tokens"] == list("서울에3명왔다")
    assert [task.label_names[i] for i in ex[0]["labels"]] == ["B-LC", "I-LC", "O", "B-QT", "I-QT", "O", "O"]
    assert ex[1]["tokens"] == ["#", "1", "뉴", "욕"]  # a '#' character line is data, not a comment
    assert [task.label_names[i] for i in ex[1]["labels"]] == ["O", "O", "B-LC", "I-LC"]  # B moved off the space


# --------------------------------------------------------------------------- errors


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def test_missing_file_names_path_and_layout(tmp_path):
    with pytest.raises(UserError) as e:
        load("rte", "train", tmp_path)
    assert e.value.field == "data_dir" and "train.tsv" in str(e.value) and "DIR/RTE/train.tsv" in str(e.value)
    with pytest.raises(UserError) as e:
        load("rte", "train", tmp_path / "nope")
    assert e.value.field == "data_dir"


def test_empty_split(tmp_path):
    _write(tmp_path / "SST-2/dev.tsv", "sentence\tlabel\n")
    with pytest.raises(UserError) as e:
        load("sst2", "validation", tmp_path)
    assert e.value.field == "split" and "dev.tsv" in str(e.value)


def test_bad_label_names_file_line_value(tmp_path):
    f = _write(tmp_path / "RTE/dev.tsv", "index\tsentence1\tsentence2\tlabel\n0\ta\tb\tentailment\n1\ta\tb\tmaybe\n")
    with pytest.raises(UserError) as e:
        load("rte", "validation", tmp_path)
    assert e.value.field == "label" and str(f) in str(e.value) and "line 3" in str(e.value) and "maybe" in str(e.value)
    _write(tmp_path / "SST-2/dev.tsv", "sentence\tlabel\ngood\t2\n")
    with pytest.raises(UserError, match="line 2"):
        load("sst2", "validation", tmp_path)
    _write(
        tmp_path / "STS-B/dev.tsv",
        "\t".join(["c"] * 7 + ["sentence1", "sentence2", "score"]) + "\n" + "\t".join(["x"] * 9 + ["high"]) + "\n",
    )
    with pytest.raises(UserError, match="score 'high'"):
        load("stsb", "validation", tmp_path)


def test_malformed_rows(tmp_path):
    _write(tmp_path / "MRPC/dev.tsv", "Quality\t#1 ID\t#2 ID\t#1 String\t#2 String\n1\t1\tonly three\n")
    with pytest.raises(UserError) as e:
        load("mrpc", "validation", tmp_path)
    assert e.value.field == "data" and "line 2" in str(e.value)
    _write(tmp_path / "ner.dev", "; x\n$x\n1\t김\tNNP\tI\n")
    with pytest.raises(UserError, match="continues no entity"):
        load("kmou_ner", "validation", tmp_path)
    _write(tmp_path / "ner.test", "; x\n$x\n1\t김\tNNP\tB_QT\n")
    with pytest.raises(UserError, match="line 3: label 'B_QT'"):
        load("kmou_ner", "test", tmp_path)
    _write(tmp_path / "klue-ner-v1.1_dev.tsv", "## id\tx\n가\tB-XX\n")
    with pytest.raises(UserError, match="label 'B-XX'"):
        load("klue_ner", "validation", tmp_path)
    no_question = {"data": [{"paragraphs": [{"context": "c", "qas": [{"id": "1"}]}]}]}
    _write(tmp_path / "KorQuAD_v1.0_dev.json", json.dumps(no_question))
    with pytest.raises(UserError) as e:
        load("korquad", "validation", tmp_path)
    assert e.value.field == "data"


def test_hub_offline_fails_fast(monkeypatch):
    import raydistill.tasks.glue as glue

    monkeypatch.setattr(glue, "hub_reachable", lambda: False)
    for name, split in [("sst2", "train"), ("nsmc", "test"), ("korquad", "validation"), ("klue_ner", "validation")]:
        with pytest.raises(UserError, match="unreachable; pass --data-dir") as e:
            load_split(name, None, split)
        assert e.value.field == "data_dir"
    with pytest.raises(UserError, match="no Hugging Face hub copy"):
        load_split("kmou_ner", None, "train")


# --------------------------------------------------------------------------- CLI


def test_summary_json(capsys):
    assert data_main(["summary", "--task", "mrpc", "--data-dir", str(GLUE)]) == 0
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert out["splits"] == {"train": 3, "validation": 1} and out["main_metric"] == "accuracy"
    assert out["labels"]["train"] == {"not_equivalent": 1, "equivalent": 2}
    s = summary("stsb", GLUE)
    assert s["splits"] == {"validation": 3} and s["labels"]["validation"]["max"] == 4.8
    assert summary("kmou_ner", FIX)["labels"]["validation"] == {"DT": 1, "LC": 1, "PS": 1}
    assert summary("korquad", FIX)["labels"]["validation"] == {"questions": 3, "paragraphs": 2}


def test_cli_bad_input_exit_2_one_line(tmp_path):
    for args in (["--task", "nope"], ["--task", "sst2", "--data-dir", str(tmp_path)]):
        r = subprocess.run([sys.executable, "-m", "raydistill.data", "summary", *args], capture_output=True, text=True)
        assert r.returncode == 2 and r.stdout == ""
        assert len(r.stderr.strip().splitlines()) == 1 and r.stderr.startswith("error: ")


# --------------------------------------------------------------------------- real data (CI: RAYDISTILL_SHARED_DATA)

SHARED = os.environ.get("RAYDISTILL_SHARED_DATA")
OFFICIAL = [
    ("sst2", "glue", {"train": 67349, "validation": 872}),
    ("mrpc", "glue", {"train": 3668, "validation": 408}),
    ("rte", "glue", {"train": 2490, "validation": 277}),
    ("stsb", "glue", {"train": 5749, "validation": 1500}),
    ("wnli", "glue", {"train": 635, "validation": 71}),
    ("qnli", "glue", {"validation": 5463}),
    ("nsmc", "nsmc", {"train": 150000, "test": 50000}),
    ("nsmc", "", {"train": 150000, "test": 50000}),
    ("korquad", "", {"validation": 5774}),
    ("kmou_ner", "", {"train": 2928, "validation": 366, "test": 366}),
    ("klue_ner", "", {"validation": 5000}),
]


@pytest.mark.skipif(not SHARED, reason="set RAYDISTILL_SHARED_DATA to the shared data folder")
@pytest.mark.parametrize("name,sub,counts", OFFICIAL)
def test_real_data_official_counts(name, sub, counts):
    s = summary(name, Path(SHARED) / sub if sub else Path(SHARED))
    assert s["splits"] == counts
    if name == "nsmc":
        assert s["labels"]["train"] == {"negative": 75173, "positive": 74827}
        assert all(isinstance(e["text"], str) for e in load_split("nsmc", Path(SHARED) / sub, "train"))
