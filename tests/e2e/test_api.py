"""The Python API (``raydistill.api``) and the ``raydistill`` console command: each API function returns the dict its
command prints, raises the UserError whose field and message the command prints as its one line, and leaves a Ray the
caller started running; ``raydistill COMMAND`` runs each command under that name, ``python -m raydistill.X`` still."""

from __future__ import annotations

import argparse
import csv
import dataclasses
import json
import os
import random
import signal
import subprocess
import sys

import pytest

from raydistill.api import Data, UserError

SCORES = ("val_", "eval_", "best_val_", "best_eval_")


def _reviews(tmp_path) -> Data:
    """A small learnable CSV pair (the label follows a sentiment word) under column names the guess does not know."""
    rng = random.Random(0)
    words = {"pos": "good great fun love".split(), "neg": "bad boring awful sad".split()}
    paths = {}
    for split, n in (("train", 96), ("dev", 32)):
        paths[split] = str(tmp_path / f"reviews-{split}.csv")
        with open(paths[split], "w", newline="", encoding="utf-8") as f:
            w = csv.writer(f)
            w.writerow(["opinion", "verdict"])
            for i in range(n):
                label = ("neg", "pos")[rng.randint(0, 1)]
                w.writerow([f"the film {i} was {rng.choice(words[label])} really", label])
    return Data(train_file=paths["train"], eval_file=paths["dev"], text_column="opinion", label_column="verdict")


def _flags(data: Data) -> list[str]:
    return [
        "--train-file",
        data.train_file or "",
        "--eval-file",
        data.eval_file or "",
        "--text-column",
        "opinion",
        "--label-column",
        "verdict",
    ]


def _printed(capsys) -> dict:
    return json.loads(capsys.readouterr().out.strip().splitlines()[-1])


def _same(got: dict, want: dict) -> None:
    """The same keys, and the same scores (same rows, same seed)."""
    assert set(got) == set(want)
    scores = [k for k in want if k.startswith(SCORES)]
    assert scores and {k: got[k] for k in scores} == {k: want[k] for k in scores}


# ------------------------------------------------------------------ end to end, beside the command, in one process


@pytest.mark.slow
def test_run_distill_returns_what_the_command_prints_and_leaves_the_callers_ray(
    ray_session, tiny_teacher, tmp_path, capsys, monkeypatch
):
    from raydistill.api import run_distill
    from raydistill.distill.__main__ import main

    monkeypatch.chdir(tmp_path)
    data, teacher, uri = _reviews(tmp_path), tiny_teacher(), f"sqlite:///{tmp_path / 'mlflow.db'}"
    address = ray_session.get_runtime_context().gcs_address
    small = dict(student_layers=2, epochs=1, max_steps=3, batch_size=8, max_length=32, eval_limit=16)
    argv = ["--method", "kd", "--teacher", teacher, *_flags(data), "--no-teacher-cache", "--tracking-uri", uri]
    argv += [x for k, v in small.items() for x in (f"--{k.replace('_', '-')}", str(v))]
    want = main([*argv, "--output", str(tmp_path / "cmd")])
    assert _printed(capsys) == want
    handlers = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
    state = _state()
    got = run_distill(
        "kd", teacher=teacher, data=data, no_teacher_cache=True, tracking_uri=uri, output=str(tmp_path / "api"), **small
    )
    _same(got, want)
    # the caller's signal handlers are theirs again (Ray Train's driver leaves a SIGINT handler of its own), and its
    # environment and log levels
    assert (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)) == handlers
    assert _state() == state
    assert capsys.readouterr().out == ""  # the dict is returned, not printed
    assert os.path.isfile(tmp_path / "api" / "config.json")
    # the caller's Ray is left running, and is the one the run used
    assert ray_session.is_initialized() and ray_session.get_runtime_context().gcs_address == address


@pytest.mark.slow
def test_run_sweep_returns_what_the_command_prints(ray_session, tiny_teacher, tmp_path, capsys, monkeypatch):
    from raydistill.api import run_sweep
    from raydistill.commands import sweep

    monkeypatch.chdir(tmp_path)  # ./raydistill-results lands here
    data, teacher, uri = _reviews(tmp_path), tiny_teacher(), f"sqlite:///{tmp_path / 'mlflow.db'}"
    overrides = {"student.hidden": 32, "student.intermediate": 64, "student.heads": 2, "train.lr": 1e-3}
    overrides |= {"student.layers": {"choice": [2, 4]}, "search.confirm": False, "search.control": False}
    typed = ["student.hidden=32", "student.intermediate=64", "student.heads=2", "train.lr=0.001"]
    typed += ["student.layers={choice: [2, 4]}", "search.confirm=false", "search.control=false"]
    small = dict(num_samples=1, epochs=1, max_steps=3, batch_size=8, max_length=32, eval_limit=16)
    argv = ["pkd_glue", "--teacher", teacher, *_flags(data), "--no-teacher-cache", "--tracking-uri", uri]
    argv += [x for k, v in small.items() for x in (f"--{k.replace('_', '-')}", str(v))]
    argv += [x for t in typed for x in ("--set", t)]
    want = sweep.main([*argv, "--name", "by-command"])
    assert _printed(capsys) == json.loads(json.dumps(want, default=str))
    got = run_sweep(
        "pkd_glue",
        teacher=teacher,
        data=data,
        overrides=overrides,
        no_teacher_cache=True,
        tracking_uri=uri,
        name="by-api",
        rerun=True,  # inputs identical to the command's sweep: without it, that sweep's result again (repeat.py)
        **small,
    )
    assert capsys.readouterr().out == ""
    assert set(got) == set(want) and (got["sweep"], want["sweep"]) == ("by-api", "by-command")
    assert got["experiment"] == want["experiment"] == "pkd_glue-reviews-train"  # SPACE-DATA: what best_student names
    again = run_sweep(
        "pkd_glue", teacher=teacher, data=data, overrides=overrides, no_teacher_cache=True, tracking_uri=uri, **small
    )  # nothing trained: the latest twin's result, as JSON kept it
    assert again == {**json.loads(json.dumps(got, default=str)), "reused": "by-api"}
    assert got["trials"] == want["trials"] == 1 and got["errors"] == want["errors"] == 0
    _same(got["best"], want["best"])  # the same first trial (the space's first recipe), the same scores
    assert {k: v for k, v in got["teacher"].items() if k.startswith(SCORES)} == {
        k: v for k, v in want["teacher"].items() if k.startswith(SCORES)
    }
    assert ray_session.is_initialized()
    # the best student of the API's sweep, picked and exported by the command and by the API: the same run
    from raydistill.api import best_student
    from raydistill.commands import best

    pick = ["--experiment", "pkd_glue-reviews-train", "--sweep", "by-api", "--tracking-uri", uri]  # SPACE-DATA
    want = best.main([*pick, "--export", str(tmp_path / "cmd-student")])
    assert _printed(capsys) == json.loads(json.dumps(want, default=str))
    sweep_result = got
    got = best_student(
        sweep_result["experiment"], sweep=sweep_result["sweep"], tracking_uri=uri, export=str(tmp_path / "api-student")
    )
    assert {**got, "export": None} == {**want, "export": None}
    assert os.path.isfile(os.path.join(got["export"], "config.json"))


@pytest.mark.slow
def test_finetune_teacher_returns_what_the_command_prints(tiny_teacher, tmp_path, capsys, monkeypatch):
    from raydistill.api import finetune_teacher
    from raydistill.commands import finetune

    monkeypatch.chdir(tmp_path)
    data, encoder, uri = _reviews(tmp_path), tiny_teacher("base"), f"sqlite:///{tmp_path / 'mlflow.db'}"
    small = ["--epochs", "1", "--max-steps", "3", "--batch-size", "8", "--max-length", "32", "--tracking-uri", uri]
    want = finetune.main(["--model", encoder, "--output", str(tmp_path / "cmd"), *_flags(data), *small])
    assert _printed(capsys) == want
    got = finetune_teacher(
        encoder,
        output=str(tmp_path / "api"),
        data=data,
        epochs=1,
        max_steps=3,
        batch_size=8,
        max_length=32,
        tracking_uri=uri,
    )
    _same(got, want)
    assert os.path.isfile(tmp_path / "api" / "config.json")


# ------------------------------------------------------------------ bad input: the command's field and message


def _command_line(main, argv, capsys) -> str:
    capsys.readouterr()  # what came before (a tiny teacher written)
    with pytest.raises(SystemExit) as e:
        main(argv)
    assert e.value.code == 2
    return capsys.readouterr().err.strip()


def test_bad_input_raises_what_the_command_prints(tiny_teacher, tmp_path, capsys, monkeypatch):
    from raydistill.api import best_student, finetune_teacher, run_distill, run_sweep
    from raydistill.commands import best, finetune, sweep
    from raydistill.distill import __main__ as distill

    monkeypatch.chdir(tmp_path)
    data, teacher = _reviews(tmp_path), tiny_teacher()
    base = ["--method", "kd", "--teacher", teacher, *_flags(data)]
    cases = [
        (distill.main, [*base, "--epochs", "0"], lambda: run_distill("kd", teacher=teacher, data=data, epochs=0)),
        (
            distill.main,
            [*base, "--task-kind", "ranking"],  # argparse's own check
            lambda: run_distill("kd", teacher=teacher, data=dataclasses.replace(data, kind="ranking")),
        ),
        (
            distill.main,
            ["--method", "kd", "--teacher", teacher, "--train-file", data.train_file],  # columns it cannot guess
            lambda: run_distill("kd", teacher=teacher, data=Data(train_file=data.train_file)),
        ),
        (sweep.main, ["no_such_space"], lambda: run_sweep("no_such_space")),
        (
            finetune.main,
            ["--model", teacher, "--output", str(tmp_path / "t"), *_flags(data), "--lr", "-1"],
            lambda: finetune_teacher(teacher, output=str(tmp_path / "t"), data=data, lr=-1),
        ),
        (
            best.main,
            ["--experiment", "x", "--tracking-uri", f"sqlite:///{tmp_path / 'none.db'}"],
            lambda: best_student("x", tracking_uri=f"sqlite:///{tmp_path / 'none.db'}"),
        ),
    ]
    for main, argv, call in cases:
        line = _command_line(main, argv, capsys)
        with pytest.raises(UserError) as e:
            call()
        assert line == f"error: {e.value.field}: {e.value.message}", argv
        assert len(line.splitlines()) == 1


def test_a_refused_call_leaves_no_line_for_the_next_command(tiny_teacher, tmp_path, capsys, monkeypatch):
    """A call refused after its data resolved (epochs=0) kept its 'data: …' line pending, and the next command in the
    process printed it as its own (a one-line refusal became two)."""
    from raydistill.api import run_distill
    from raydistill.tasks import files

    monkeypatch.chdir(tmp_path)
    data, teacher = _reviews(tmp_path), tiny_teacher()
    with pytest.raises(UserError):
        run_distill("kd", teacher=teacher, data=data, epochs=0)
    capsys.readouterr()
    files.report()  # what the next command prints of its data
    assert capsys.readouterr().err == ""


def test_settings_the_command_lacks_are_refused_by_name(tiny_teacher, tmp_path):
    from raydistill.api import run_distill, run_sweep

    teacher = tiny_teacher()
    with pytest.raises(UserError) as e:
        run_distill("kd", teacher=teacher, epoch=1)
    assert e.value.field == "epoch" and "not a flag of python -m raydistill.distill" in e.value.message
    with pytest.raises(UserError, match="given twice"):
        run_distill("kd", teacher=teacher, data=Data(train_file="a.csv"), train_file="b.csv")
    with pytest.raises(UserError) as e:
        run_sweep("pkd_glue", epoch=1)
    assert e.value.field == "epoch" and "not a flag of python -m raydistill.sweep" in e.value.message
    with pytest.raises(UserError, match="True or False"):
        run_sweep("pkd_glue", use_gpu="yes")
    with pytest.raises(UserError, match="no field 'train'"):
        run_distill("kd", teacher=teacher, data={"train": "x.csv"})
    with pytest.raises(UserError, match="True or False"):
        run_distill("kd", teacher=teacher, use_gpu="yes")
    with pytest.raises(UserError, match="as overrides, not as set"):
        run_sweep("pkd_glue", overrides={"train.lr": 1e-3}, set=["train.epochs=1"])


# ------------------------------------------------------------------ keyword arguments as the command line


def test_a_sweeps_settings_make_the_request_its_command_line_makes(tmp_path, monkeypatch):
    """``run_sweep``'s keyword arguments build the same ``SweepRequest`` the command builds from the flags a user
    types: no command line in between, every kind of setting (valued, on/off, --no-X, optional value, data,
    overrides, the teacher cache)."""
    from raydistill.api import Data, _data, sweep_request
    from raydistill.commands import sweep

    monkeypatch.chdir(tmp_path)
    data = Data(train_file="r.csv", label_column="stars", kind="classification", phrase_rows=True)
    settings = dict(num_samples=2, lr=2e-5, seed=-1, use_gpu=True, ray_train_trials=False, group_by_length=False)
    settings |= dict(multi_objective=True, name="-dash", teacher_epochs=2, no_teacher_cache=True, eval_file="d.csv")
    overrides = {"student.layers": 2, "distill.temperature": {"loguniform": [1, 8]}, "train.lr": 1e-5}
    got = sweep_request("pkd_glue", "t", _data(data, settings), overrides, settings)
    typed = ["pkd_glue", "--teacher", "t", "--num-samples", "2", "--lr", "2e-05", "--seed", "-1", "--use-gpu"]
    typed += ["--no-group-by-length", "--multi-objective", "--name=-dash", "--teacher-epochs", "2"]
    typed += ["--no-teacher-cache", "--train-file", "r.csv", "--eval-file", "d.csv", "--label-column", "stars"]
    typed += ["--task-kind", "classification", "--phrase-rows", "--set", "student.layers=2"]
    typed += ["--set", "distill.temperature={loguniform: [1, 8]}", "--set", "train.lr=0.00001"]
    want = sweep.request_of(sweep.parser().parse_args(typed))
    assert got == want
    assert dict(got.overrides)["train.lr"] == 1e-5 and dict(got.train)["lr"] == 2e-5  # a float stays a float


def test_a_resumed_sweep_runs_the_request_it_recorded(tmp_path):
    """A sweep records its request (JSON, beside its Tune experiment); ``--resume --name`` (or ``run_sweep(resume=True,
    name=…)``) reads it back as the same request, resumed, whoever started it."""
    from raydistill.api import Data
    from raydistill.commands import sweep
    from raydistill.orchestrate.driver import state_path
    from raydistill.orchestrate.request import SweepRequest

    started = SweepRequest(
        space="pkd_glue",
        overrides=(("student.layers", {"choice": [2, 4]}), ("train.lr", 1e-5)),
        data=Data(train_file="/d/r.csv", label_column="stars", labels=("neg", "pos"), phrase_rows=True),
        train=(("epochs", 2), ("group_by_length", False)),
        num_samples=3,
        name="s1",
        storage_path=str(tmp_path),
    )
    assert SweepRequest.of_record(json.loads(json.dumps(started.record()))) == started
    path = state_path(str(tmp_path), "s1")
    os.makedirs(os.path.dirname(path))
    with open(path, "w") as f:
        json.dump({"request": started.record(), "name": "s1", "parent_run_id": "abc"}, f)
    again, state = sweep.settled(SweepRequest(resume=True, name="s1", storage_path=str(tmp_path)))
    assert again == dataclasses.replace(started, resume=True) and state["parent_run_id"] == "abc"


def test_overrides_reach_the_space_as_the_values_given():
    from raydistill.config import space as sp

    for value in (4, 1e-5, 0.001, "yes", "first_k", False, {"loguniform": [1e-5, 3e-4]}, {"choice": [2, 4]}):
        assert sp.load("kd_glue", [("description", value)]).raw["description"] == value
    given = {"choice": [2, 4]}
    sp.load("kd_glue", [("student.layers", given)])
    assert given == {"choice": [2, 4]}  # the caller's value is the caller's: the space never changes it


def test_ray_is_stopped_only_where_the_call_started_it(monkeypatch):
    from raydistill.orchestrate import connect

    class FakeRay:
        def __init__(self, up):
            self.up, self.stopped = up, 0

        def is_initialized(self):
            return self.up

        def shutdown(self):
            self.up, self.stopped = False, self.stopped + 1

    for up_before in (True, False):
        fake = FakeRay(up_before)
        monkeypatch.setattr(connect, "ray", fake)
        with pytest.raises(KeyboardInterrupt), connect.owned_ray():
            fake.up = True  # what ran inside started (or used) Ray, then was interrupted
            raise KeyboardInterrupt
        assert (fake.up, fake.stopped) == ((True, 0) if up_before else (False, 1))


CHANGED = ("RAY_TRAIN_V2_ENABLED", "TUNE_DISABLE_SIGINT_HANDLER", "RAY_AIR_NEW_OUTPUT", "OMP_NUM_THREADS")


def _state() -> dict:
    """What a command changes process-wide: every environment variable, the library loggers' levels, transformers'
    verbosity and progress bars."""
    import logging

    from transformers.utils import logging as hf_logging

    from raydistill.commands.cli import LIBRARY_LOGGERS

    levels = {n: logging.getLogger(n).level for n in LIBRARY_LOGGERS}
    return {
        "env": dict(os.environ),
        "levels": levels,
        "hf": (hf_logging.get_verbosity(), hf_logging.is_progress_bar_enabled()),
    }


@pytest.mark.parametrize("ends", ["returns", "raises"])
def test_a_call_leaves_the_callers_environment_and_log_levels(monkeypatch, ends):
    """What the commands set for their own Ray, Tune and logs (``RAY_TRAIN_V2_ENABLED``,
    ``TUNE_DISABLE_SIGINT_HANDLER``, ``RAY_AIR_NEW_OUTPUT``, the thread pools' sizes, transformers' verbosity and
    bars) is the caller's again after the call, whether it returns or raises; a variable the caller had set and the
    command changed or removed too."""
    import logging

    from transformers.utils import logging as hf_logging

    from raydistill import api
    from raydistill.models.encoder import quiet_hf
    from raydistill.orchestrate import connect
    from raydistill.orchestrate.resources import confine_threads

    class Up:  # the caller's Ray: used, left running
        is_initialized = staticmethod(lambda: True)

    monkeypatch.setattr(connect, "ray", Up)
    for key in CHANGED:
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("MKL_NUM_THREADS", "7")  # the caller's own, which the command overwrites
    monkeypatch.setenv("RAYDISTILL_CALLER", "kept")
    before_ray = logging.getLogger("ray").level
    hf_logging.set_verbosity_info()
    hf_logging.enable_progress_bar()
    logging.getLogger("ray").setLevel(logging.DEBUG)
    before = _state()

    def command(argv):  # what the commands do to the process (connect.init_ray, tuner.run_tune, loop, trials)
        os.environ.setdefault("RAY_TRAIN_V2_ENABLED", "1")
        os.environ["TUNE_DISABLE_SIGINT_HANDLER"] = "1"
        os.environ.setdefault("RAY_AIR_NEW_OUTPUT", "0")
        del os.environ["RAYDISTILL_CALLER"]
        confine_threads(1, torch_threads=False)
        quiet_hf()
        logging.getLogger("ray").setLevel(logging.INFO)
        if ends == "raises":
            raise UserError("teacher", "refused")
        return {"done": True}

    try:
        api._call(lambda: command([]))
    except UserError:
        assert ends == "raises"
    after = _state()
    hf_logging.set_verbosity_warning()  # the suite's own levels again, whatever the assertion finds
    logging.getLogger("ray").setLevel(before_ray)
    assert after == before


def test_the_package_names_the_api_lazily():
    code = "import sys, raydistill; assert 'raydistill.api' not in sys.modules; from raydistill import run_sweep"
    code += "; assert 'raydistill.api' in sys.modules and 'raydistill.sweep' not in sys.modules"
    code += "; assert 'raydistill.commands.sweep' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


# ------------------------------------------------------------------ raydistill COMMAND


def test_every_subcommand_takes_help_under_its_raydistill_name(capsys):
    from raydistill.commands import sweep
    from raydistill.commands.dispatch import COMMANDS, main

    assert set(COMMANDS) == {"sweep", "distill", "finetune", "best", "evaluate", "data", "augment", "list"}
    for name in COMMANDS:
        with pytest.raises(SystemExit) as e:
            main([name, "--help"])
        out = capsys.readouterr().out
        assert e.value.code == 0 and out.startswith(f"usage: raydistill {name} "), out[:200]
    with pytest.raises(SystemExit):
        main(["data", "summary", "--help"])
    assert capsys.readouterr().out.startswith("usage: raydistill data summary ")
    line = _command_line(main, ["best", "--experiment"], capsys)  # errors name it too
    assert line == "error: --experiment: expected one argument (see raydistill best --help)"
    assert sweep.parser().prog == "python -m raydistill.sweep"  # outside raydistill COMMAND: its module name
    assert main([]) == 0
    out = capsys.readouterr().out
    assert all(f"raydistill {name}" in out for name in COMMANDS)
    assert main(["swep"]) == 2 and "unknown command 'swep'" in capsys.readouterr().err


def test_the_installed_console_command_and_python_m_still_work():
    script = os.path.join(os.path.dirname(sys.executable), "raydistill")
    if not os.path.isfile(script):
        pytest.skip("the raydistill script is installed by pip install -e . (not done for this Python)")
    r = subprocess.run([script, "--help"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and "raydistill sweep SPACE" in r.stdout and "python -m raydistill.sweep" in r.stdout
    for name in ("sweep", "distill", "finetune", "best", "evaluate", "data", "augment", "list"):
        r = subprocess.run([script, name, "--help"], capture_output=True, text=True, timeout=300)
        assert r.returncode == 0 and r.stdout.startswith(f"usage: raydistill {name} "), (name, r.stderr[-500:])
    assert "--num-samples" in subprocess.run([script, "sweep", "-h"], capture_output=True, text=True).stdout
    r = subprocess.run([script, "list", "spaces"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and "pkd_glue" in r.stdout
    r = subprocess.run([script, "distill", "--teacher", "x"], capture_output=True, text=True, timeout=300)
    assert (r.returncode, r.stderr.strip()) == (
        2,
        "error: --method: the following arguments are required: --method (see raydistill distill --help)",
    )
    # python -m raydistill.sweep runs the module once: the package does not import it (runpy would warn)
    r = subprocess.run(
        [sys.executable, "-W", "error::RuntimeWarning", "-m", "raydistill.sweep", "--help"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0 and r.stdout.startswith("usage: python -m raydistill.sweep "), r.stderr


def test_help_parsers_are_the_commands_own():
    """``raydistill sweep --help`` is the sweep's own parser under another name: the same options."""
    from raydistill.commands import sweep
    from raydistill.commands.cli import named

    with named("raydistill sweep"):
        renamed = sweep.parser()
    plain = sweep.parser()
    assert renamed.prog == "raydistill sweep"
    strings = [a.option_strings for a in plain._actions if not isinstance(a, argparse._HelpAction)]
    assert [a.option_strings for a in renamed._actions if not isinstance(a, argparse._HelpAction)] == strings
