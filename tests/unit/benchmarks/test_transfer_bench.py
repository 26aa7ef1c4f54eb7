"""benchmarks/transfer.py: its records are what goes on across sessions, so what it keeps and how it reads them back
are tested here; one smoke run checks the plumbing of the real commands and that a second call runs nothing."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

import pytest

from tests.paths import ROOT

sys.path.insert(0, str(ROOT / "benchmarks"))
import transfer  # noqa: E402


def _run(preds: list, val: float, dev: float) -> dict:
    return {"preds": preds, "val": val, "dev": dev, "wall_s": 60.0, "student": "3L-192"}


def _records(gold: list, teacher: list, labels: list[list], recipe: list[list]) -> dict:
    done: dict = {"mrpc/gold": {"gold": gold}, "mrpc/teacher": {"builds": [{"dev": 0.9, "preds": teacher}]}}
    for row, runs in (("labels", labels), ("recipe", recipe)):
        for i, p in enumerate(runs):
            acc = sum(a == b for a, b in zip(p, gold, strict=True)) / len(gold)
            done[f"mrpc/fast/{row}/{42 + i}"] = _run(p, val=acc + 0.01 * i, dev=acc)
    return done


def test_summarise_reads_every_row_from_the_records_alone():
    """Each row's median and range over its seeds, its median seed on val standing for it; a row clearly better than
    labels-only on 400 dev rows 'beats' it, the same predictions 'tie'."""
    gold = [i % 2 for i in range(400)]
    wrong = [1 - g for g in gold]
    labels = [gold[:200] + wrong[200:]] * 3  # 0.5
    recipe = [gold[:360] + wrong[360:], gold[:364] + wrong[364:], gold[:368] + wrong[368:]]  # 0.90, 0.91, 0.92
    res = transfer.summarise(_records(gold, gold, labels, recipe), "mrpc", "fast", [42, 43, 44])
    assert res is not None
    assert res["labels"]["median"] == 0.5 and res["recipe"]["median"] == pytest.approx(0.91)
    assert res["recipe"]["rep"]["dev"] == pytest.approx(0.91)  # the median seed on val
    assert res["recipe"]["vs_labels"]["verdict"] == "beats"
    assert res["teacher"]["headroom"] == pytest.approx(0.4)
    same = transfer.summarise(_records(gold, gold, labels, labels), "mrpc", "fast", [42, 43, 44])
    assert same is not None and same["recipe"]["vs_labels"]["verdict"] == "ties"


def test_records_keep_what_another_process_wrote(tmp_path):
    """Two calls writing one records file (a report beside a run, two machines' files merged): neither loses the
    other's runs."""
    path = str(tmp_path / "r.json")
    a, b = transfer.Records(path), transfer.Records(path)
    a.put("mrpc/fast/labels/42", {"dev": 0.7})
    b.put("mrpc/fast/labels/43", {"dev": 0.8})
    assert set(json.load(open(path))) == {"mrpc/fast/labels/42", "mrpc/fast/labels/43"}


def _put_many(path: str, seed: int) -> None:
    rec = transfer.Records(path)
    for i in range(40):
        rec.put(f"mrpc/fast/labels/{seed}-{i}", {"dev": i})


def test_records_of_two_runs_finishing_at_once_are_both_kept(tmp_path):
    """Two benchmark processes side by side (one thread each) write the file at any moment: every record stays."""
    import multiprocessing

    path = str(tmp_path / "r.json")
    procs = [multiprocessing.get_context("fork").Process(target=_put_many, args=(path, s)) for s in (42, 43)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    assert all(p.exitcode == 0 for p in procs)
    assert len(json.load(open(path))) == 80


def test_tinybert_keeps_the_teachers_heads():
    """TinyBERT matches attention scores head by head: its fast student keeps the teacher's 12 heads, sliced (prune
    keeps the teacher's head size); every other row trains the shape as declared."""
    assert transfer.student_of("fast", "tinybert+aug20", 12) == ("3", "192", "768", "12", "slice")
    assert transfer.student_of("fast", "recipe+aug20", 12) == transfer.STUDENTS["fast"]
    assert transfer.student_of("half", "tinybert+aug20", 12) == transfer.STUDENTS["half"]


def test_an_augmented_pass_is_split_into_epochs_of_fresh_draws(tmp_path):
    """``--aug-evals N``: N epochs of ``epoch_rows`` rows draw about one pass over the rows a run keeps (90%: the
    val share and its copies leave)."""
    (tmp_path / "train.jsonl").write_text("{}\n" * 2100)
    assert transfer.epoch_rows(str(tmp_path), 10) == 189
    assert transfer.epoch_rows(str(tmp_path), 10_000) == 1


@pytest.mark.slow
def test_transfer_smoke_records_and_goes_on(tmp_path):
    """The real commands on a tiny teacher: the teacher, the augmented set and the runs recorded with their dev
    predictions; the same command again runs nothing and reports the same table."""
    cmd = [sys.executable, str(ROOT / "benchmarks" / "transfer.py"), "--smoke", "--work", str(tmp_path)]
    cmd += ["--rows", "recipe+aug20"]
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    first = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert first.returncode == 0, first.stderr[-3000:]
    done = json.load(open(tmp_path / "records.json"))
    runs = [k for k in done if k.startswith("mrpc/fast/recipe+aug20/")]
    assert len(runs) == 2 and len(done["mrpc/gold"]["gold"]) == 40
    for k in runs:
        assert len(done[k]["preds"]) == 40 and done[k]["teacher_build"] == done["mrpc/teacher"]["builds"][0]["digest"]
        assert "--augment-dir" in done[k]["command"]
        assert "--cpus-per-worker 1" in done[k]["command"]  # every run on one thread, as before a978fe1
        # one pass as --aug-evals (2 in the smoke) epochs of fresh draws, val scored after each
        assert done[k]["epochs"] == 2 and "--epoch-rows" in done[k]["command"]
    again = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "raydistill.distill" not in again.stderr  # nothing ran again
    assert again.stdout.count("recorded") == 2
    assert first.stdout.splitlines()[-1] == again.stdout.splitlines()[-1]  # the TRANSFER line, from the records


def test_a_steps_row_trains_as_many_examples_as_the_augmented_row(tmp_path):
    """``labels@steps`` / ``recipe@steps`` (is a ×20 win the copies' or the extra steps'?): as many epochs of the task's
    rows as one pass over its ×20 set holds, so both see the same examples (to 1%) and take the same steps."""
    a = argparse.Namespace(epochs=4, aug_epochs=1, aug_evals=10)
    rows = 5749  # STS-B's training rows; the ×20 set holds each and 20 copies
    (tmp_path / "train.jsonl").write_text("{}\n" * (rows * 21))
    augmented = transfer.epochs_of("recipe+aug20", a) * transfer.epoch_rows(str(tmp_path), a.aug_evals)
    for row in ("labels@steps", "recipe@steps"):
        assert transfer.epochs_of(row, a) == 21
        assert transfer.epochs_of(row, a) * int(rows * 0.9) == pytest.approx(augmented, rel=0.01)
    assert transfer.epochs_of("labels", a) == 4 and transfer.epochs_of("recipe+aug20", a) == 10
    assert transfer.epochs_of("tinybert+aug20", a) == 20  # each stage one pass


def _bench(tmp_path, monkeypatch, **over) -> tuple[transfer.Bench, list]:
    """A Bench whose teacher, set and commands are stand-ins: what each step would run is collected, nothing trains."""
    a = argparse.Namespace(
        work=str(tmp_path),
        data="glue",
        use_gpu=False,
        extra=[],
        deadline=None,
        epochs=4,
        aug_epochs=1,
        aug_evals=10,
        max_length=128,
        tinybert_cache_gb=32.0,
    )
    vars(a).update(over)
    teacher = tmp_path / "teacher"
    teacher.mkdir()
    (teacher / "config.json").write_text(json.dumps({"num_attention_heads": 12}))
    (tmp_path / "set").mkdir()
    (tmp_path / "set" / "train.jsonl").write_text("{}\n" * 210)
    rec = transfer.Records(str(tmp_path / "records.json"))
    rec.put("mrpc/gold", {"gold": [0, 1]})
    bench = transfer.Bench(a, rec)
    ran: list = []
    monkeypatch.setattr(bench, "teacher", lambda task: (ran.append("teacher") or str(teacher), "build"))
    monkeypatch.setattr(bench, "augmented", lambda task, t: ran.append("set") or str(tmp_path / "set"))
    monkeypatch.setattr(bench, "metric", lambda task: "accuracy")
    result = {"best_eval_accuracy": 0.5, "best_val_accuracy": 0.5}
    monkeypatch.setattr(transfer, "run", lambda cmd, log: ran.append(cmd) or result)
    monkeypatch.setattr(transfer.qs, "dev_predictions", lambda *x: ([0, 0], [0, 1]))
    return bench, ran


def test_tinybert_rows_cache_the_teachers_full_states(tmp_path, monkeypatch):
    """TinyBERT's intermediate stage reads the teacher's full states and scores: its rows raise the cache's budget so
    every seed reads them from disk (the ×20 set's need over the product's 4 GiB default); other rows keep the
    product's budget, and 0 keeps it for TinyBERT too."""
    bench, ran = _bench(tmp_path, monkeypatch)
    bench.step("mrpc", "fast", "tinybert+aug20", 42)
    bench.step("mrpc", "fast", "recipe+aug20", 42)
    tiny, recipe = (" ".join(c) for c in ran if isinstance(c, list))
    assert "--teacher-cache-gb 32.0" in tiny and "--intermediate-epochs 10" in tiny
    assert "--teacher-cache-gb" not in recipe
    (tmp_path / "b").mkdir()
    bench, ran = _bench(tmp_path / "b", monkeypatch, tinybert_cache_gb=0.0)
    bench.step("mrpc", "fast", "tinybert+aug20", 42)
    assert "--teacher-cache-gb" not in " ".join(next(c for c in ran if isinstance(c, list)))


def test_prepare_builds_the_teacher_and_the_set_and_trains_nothing(tmp_path, monkeypatch):
    """``--prepare``: what a task's runs share, built ahead (the set only where an augmented row is asked for)."""
    bench, ran = _bench(tmp_path, monkeypatch)
    assert bench.prepare("mrpc", ["labels", "recipe+aug20"]).startswith("teacher build, x20 set ")
    assert ran == ["teacher", "set"]
    ran.clear()
    assert bench.prepare("mrpc", ["labels"]) == "teacher build" and ran == ["teacher"]


def test_a_run_an_earlier_session_cut_short_is_recorded_as_resumed(tmp_path, monkeypatch):
    """A run whose distill left OUTPUT.resume goes on (the same command); its record says so, its wall (the last part
    only) is marked in the table and left out of the deadline's estimate."""
    bench, ran = _bench(tmp_path, monkeypatch)
    bench.step("mrpc", "fast", "recipe", 42)
    record = tmp_path / "students" / "mrpc" / "fast" / "recipe" / "43.resume"
    record.mkdir(parents=True)
    (record / "resume.json").write_text("{}")
    assert "(resumed)" in bench.step("mrpc", "fast", "recipe", 43)
    done = bench.rec.done
    assert done["mrpc/fast/recipe/43"]["resumed"] and not done["mrpc/fast/recipe/42"]["resumed"]
    done["mrpc/fast/recipe/42"]["wall_s"], done["mrpc/fast/recipe/43"]["wall_s"] = 600.0, 60.0
    assert bench.estimate("mrpc", "fast", "recipe") == pytest.approx(600.0 * 1.15)
    walls = transfer.summarise(
        {**done, "mrpc/teacher": {"builds": [{"dev": 0.9, "preds": [0, 1]}]}}, "mrpc", "fast", [42, 43]
    )["recipe"]["wall_min"]
    assert walls == ["10.0", "1.0+"]


def test_a_signal_to_the_script_is_forwarded_to_the_running_command(monkeypatch):
    """transfer.py forwards SIGINT/SIGTERM as quality.py does (test_quality_bench checks the forwarding): a SIGTERM to
    the script alone once ended it and left its distill run going on."""
    calls = []

    def forward():
        calls.append(1)
        raise SystemExit(0)  # nothing else of main runs

    monkeypatch.setattr(transfer, "forward_signals", forward)
    monkeypatch.setattr(sys, "argv", ["transfer.py", "--report"])
    with pytest.raises(SystemExit):
        transfer.main()
    assert calls == [1]
