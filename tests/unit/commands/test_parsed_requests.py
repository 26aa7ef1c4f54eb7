"""The request each command builds from its command line, pinned as the objects themselves: the flags generated from
the requests' fields (``commands/flags.py``) parse to the values the hand-written ones parsed to, defaults, types,
on/off flags, choices and ``nargs`` included."""

from __future__ import annotations

import dataclasses
import os

from raydistill.commands import best, data, distill, evaluate, finetune, sweep
from raydistill.commands.flags import request_from
from raydistill.orchestrate.request import SweepRequest
from raydistill.tasks.files import FileData


def _sweep(argv):
    return sweep.request_of(sweep.parser().parse_args(argv))


def test_the_sweeps_request(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    cache = os.path.abspath("raydistill-results/teacher-cache")
    assert _sweep([]) == SweepRequest(space=None, teacher_cache=cache)  # type: ignore[arg-type]  # as parsed
    argv = ["pkd_glue", "--task", "rte", "--num-samples", "4", "--use-gpu", "--gpus-per-worker", "0.5"]
    argv += ["--cpus-per-worker", "2", "--epochs", "2", "--lr", "1e-4", "--no-group-by-length", "--teacher-epochs", "1"]
    argv += ["--set", "student.layers=4", "--set", "distill.temperature=2", "--multi-objective", "--resume"]
    argv += ["--name", "n", "--max-failures", "3", "--no-teacher-cache", "--teacher-cache-gb", "2", "--fp32-teacher"]
    argv += ["--placement-strategy", "SPREAD", "--ray-train-trials", "--verbose", "--rerun", "--teacher-lr", "3e-5"]
    want = SweepRequest(
        space="pkd_glue",
        overrides=(("student.layers", 4), ("distill.temperature", 2)),
        task="rte",
        num_samples=4,
        use_gpu=True,
        gpus_per_worker=0.5,
        cpus_per_worker=2.0,
        train=(("epochs", 2), ("lr", 1e-4), ("group_by_length", False)),
        teacher_epochs=1,
        teacher_lr=3e-5,
        name="n",
        resume=True,
        rerun=True,
        multi_objective="params",
        verbose=True,
        placement_strategy="SPREAD",
        max_failures=3,
        ray_train_trials=True,
        teacher_cache=None,
        teacher_cache_gb=2.0,
        fp32_teacher=True,
    )
    assert _sweep(argv) == want
    got = _sweep(
        ["s", "--multi-objective", "latency", "--teacher-cache", "c", "--experiment", "e", "--max-concurrent", "2"]
    )
    assert (got.multi_objective, got.teacher_cache, got.experiment, got.max_concurrent) == (
        "latency",
        os.path.abspath("c"),
        "e",
        2,
    )
    assert isinstance(got.gpus_per_worker, float) and got.inject_fault == "" and got.overrides == ()


def _distill(argv):
    return distill.request_of(distill.parser().parse_args(["--method", "kd", "--teacher", "t", *argv]))


def test_the_distill_request(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    plain = _distill([])
    own = {f.name: getattr(plain, f.name) for f in dataclasses.fields(plain) if f.name not in ("train", "distill")}
    assert own == {
        **{f.name: f.default for f in dataclasses.fields(distill.DistillRequest) if f.name not in ("train", "distill")},
        "method": "kd",
        "teacher": "t",
        "data": FileData(),
        "teacher_cache": os.path.abspath("raydistill-results/teacher-cache"),
    }
    argv = ["--student-layers", "0.5", "--student-heads", "auto", "--init", "first_k", "--num-workers", "2"]
    argv += ["--use-gpu", "--max-failures", "1", "--ray-train", "--augment-dir", "a", "--output", "o", "--overwrite"]
    argv += ["--storage-path", "s", "--run-name", "r", "--teacher-cache-gb", "3", "--fp32-teacher", "--verbose"]
    argv += ["--placement-strategy", "SPREAD", "--tracking-uri", "u", "--experiment", "x", "--task", "rte"]
    argv += ["--data-dir", "d", "--unlabeled-text", "c.txt", "--teacher-cache", "tc", "--inject-fault", "f"]
    argv += ["--student-hidden", "teacher", "--student-intermediate", "auto", "--epochs", "2", "--alpha", "0.3"]
    got = _distill(argv)
    assert got == dataclasses.replace(
        plain,
        task="rte",
        data_dir="d",
        train=tuple((k, 2 if k == "epochs" else v) for k, v in plain.train),
        distill=tuple((k, 0.3 if k == "alpha" else v) for k, v in plain.distill),
        tracking_uri="u",
        experiment="x",
        student_layers="0.5",
        student_hidden="teacher",
        student_intermediate="auto",
        student_heads="auto",
        init="first_k",
        num_workers=2,
        use_gpu=True,
        max_failures=1,
        ray_train=True,
        augment_dir="a",
        unlabeled_text="c.txt",
        output="o",
        overwrite=True,
        storage_path="s",
        run_name="r",
        teacher_cache=os.path.abspath("tc"),
        teacher_cache_gb=3.0,
        fp32_teacher=True,
        placement_strategy="SPREAD",
        verbose=True,
        inject_fault="f",
    )
    assert _distill(["--no-teacher-cache"]).teacher_cache is None


def test_the_finetune_request():
    def parsed(argv):
        return finetune.request_of(finetune.parser().parse_args(["--model", "m", "--output", "o", *argv]))

    plain = parsed([])
    assert (plain.model, plain.output, plain.overwrite, plain.use_gpu, plain.experiment) == (
        "m",
        "o",
        False,
        False,
        "raydistill",
    )
    assert (plain.task, plain.data_dir, plain.tracking_uri, plain.data) == (None, None, None, FileData())
    assert dict(plain.train)["lr"] == 2e-5
    got = parsed(
        ["--use-gpu", "--overwrite", "--task", "rte", "--data-dir", "d", "--tracking-uri", "u", "--lr", "1e-3"]
    )
    assert got == dataclasses.replace(
        plain,
        use_gpu=True,
        overwrite=True,
        task="rte",
        data_dir="d",
        tracking_uri="u",
        train=tuple((k, 1e-3 if k == "lr" else v) for k, v in plain.train),
    )


def test_the_best_request():
    def parsed(argv):
        return request_from(best.BestRequest, best.parser().parse_args(["--experiment", "e", *argv]))

    assert parsed([]) == best.BestRequest(experiment="e")
    argv = ["--tracking-uri", "u", "--metric", "best_val_acc", "--mode", "min", "--sweep", "all", "--export", "x"]
    argv += ["--overwrite", "--onnx", "--quantize", "--register", "r", "--max-latency-ms", "5", "--max-params", "1e6"]
    assert parsed(argv) == best.BestRequest(
        experiment="e",
        tracking_uri="u",
        metric="best_val_acc",
        mode="min",
        sweep="all",
        export="x",
        overwrite=True,
        onnx=True,
        quantize=True,
        register="r",
        max_latency_ms=5.0,
        max_params=1e6,
    )


def test_the_evaluate_request():
    def parsed(argv):
        a = evaluate.parser().parse_args(["--model", "m", *argv])
        return request_from(evaluate.EvaluateRequest, a, data=evaluate.data_of(a))

    assert parsed([]) == evaluate.EvaluateRequest(model="m")
    argv = ["--task", "rte", "--data-dir", "d", "--max-length", "64", "--eval-limit", "9", "--split", "test"]
    want = evaluate.EvaluateRequest("m", "rte", "d", 64, 9, "test", FileData())
    assert parsed(argv) == want
    files = parsed(["--train-file", "t.csv", "--test-file", "x.csv"])
    assert files.data == FileData(train_file="t.csv", test_file="x.csv")


def test_the_data_request(monkeypatch):
    seen = []
    monkeypatch.setattr(data, "execute", lambda r: seen.append(r) or {})
    data.main(["summary", "--task", "rte"])
    data.main(["split", "--task", "rte", "--data-dir", "d", "--val-fraction", "0.2", "--output", "o", "--overwrite"])
    assert seen == [
        data.DataRequest(task="rte"),
        data.DataRequest("split", "rte", "d", 0.2, FileData(), "o", True),
    ]


def test_the_list_request():
    from raydistill.commands import list as listing

    def parsed(argv):
        return request_from(listing.ListRequest, listing.parser().parse_args(argv))

    assert parsed([]) == listing.ListRequest(group=None, json=False)
    assert parsed(["tasks", "--json"]) == listing.ListRequest(group="tasks", json=True)


def test_a_request_fields_metadata_says_how_its_flag_parses():
    """``flags.flag``'s keys reach argparse: a positional, a required flag, an on/off switch, a repeated flag with a
    parse default of its own, an optional value with its const and choices, a hidden test hook."""

    import pytest

    from raydistill.commands.cli import Parser
    from raydistill.commands.flags import add_fields, flag
    from raydistill.common.errors import UserError

    @dataclasses.dataclass(frozen=True)
    class Toy:
        where: str = dataclasses.field(default="", metadata=flag("where", positional=True, nargs="?", parsed=None))
        name: str = dataclasses.field(default="", metadata=flag("a name", required=True))
        loud: bool = dataclasses.field(default=False, metadata=flag("louder", action="store_true"))
        sets: tuple = dataclasses.field(default=(), metadata=flag("k=v", flag="set", action="append", parsed=[]))
        mode: str | None = dataclasses.field(
            default=None, metadata=flag("a mode", nargs="?", const="a", choices=("a", "b"))
        )
        hook: str = dataclasses.field(default="", metadata=flag("test hook", hidden=True))
        size: float = dataclasses.field(default=1.0, metadata=flag("a size"))

    p = Parser(prog="toy")
    add_fields(p, Toy, ("where", "name", "loud", "sets", "mode", "hook", "size"), Toy())
    a = p.parse_args(["--name", "n"])
    assert vars(a) == {"where": None, "name": "n", "loud": False, "set": [], "mode": None, "hook": "", "size": 1.0}
    a = p.parse_args(["w", "--name", "n", "--loud", "--set", "x=1", "--set", "y=2", "--mode", "--size", "2"])
    assert (a.where, a.loud, a.set, a.mode, a.size) == ("w", True, ["x=1", "y=2"], "a", 2.0)
    assert p.parse_args(["--name", "n", "--mode", "b", "--hook", "h"]).hook == "h"
    with pytest.raises(UserError):
        p.parse_args([])  # --name is required
    with pytest.raises(UserError):
        p.parse_args(["--name", "n", "--mode", "c"])
    text = p.format_help()
    assert "--hook" not in text and "louder" in text and "(default: off)" not in text  # hidden; a switch: off unless
    assert next(x for x in p._actions if x.dest == "loud").nargs == 0
