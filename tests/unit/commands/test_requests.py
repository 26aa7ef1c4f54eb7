"""One typed request per command: ``distill``, ``finetune`` and ``best`` parse their flags into one frozen request
(``DistillRequest``, ``FinetuneRequest``, ``BestRequest``; the sweep's ``SweepRequest``), and ``raydistill.api``
builds the same object from its keyword arguments, with no command line in between; a value the flag's parse would
refuse is refused with the command's own words."""

from __future__ import annotations

import pytest

from raydistill.api import Data, UserError
from raydistill.commands.flags import flag_of, flagged


def test_a_runs_settings_make_the_request_its_command_line_makes(tmp_path, monkeypatch):
    """Every kind of setting (valued, negative, on/off, --no-X, a number as text, a relative size, a choice, the data,
    the teacher cache) gives the request the typed flags give: train and distill sections included."""
    from raydistill.api import distill_request
    from raydistill.commands import distill

    monkeypatch.chdir(tmp_path)
    data = Data(train_file="r.csv", label_column="stars", kind="classification", phrase_rows=True)
    settings = dict(lr=2e-5, seed=-1, use_gpu=True, group_by_length=False, temperature=4, student_layers=0.5)
    settings |= dict(no_teacher_cache=True, run_name="-dash", num_workers=2, select_on="dev", eval_file="d.csv")
    got = distill_request("kd", "t", data, settings)
    typed = ["--method", "kd", "--teacher", "t", "--lr", "2e-05", "--seed", "-1", "--use-gpu", "--no-group-by-length"]
    typed += ["--temperature", "4", "--student-layers", "0.5", "--no-teacher-cache", "--run-name=-dash"]
    typed += ["--num-workers", "2", "--select-on", "dev", "--train-file", "r.csv", "--eval-file", "d.csv"]
    typed += ["--label-column", "stars", "--task-kind", "classification", "--phrase-rows"]
    want = distill.request_of(distill.parser().parse_args(typed))
    assert got == want
    assert dict(got.train)["lr"] == 2e-5 and dict(got.distill)["temperature"] == 4.0  # typed as the flags type them
    plain = distill_request("kd", "t", None, {})
    assert plain == distill.request_of(distill.parser().parse_args(["--method", "kd", "--teacher", "t"]))
    assert plain.teacher_cache and plain.teacher_cache.endswith("teacher-cache")  # the flags' default folder


def test_a_finetunes_settings_make_the_request_its_command_line_makes():
    """A fine-tune's learning rate defaults to its own (2e-5), not a distillation's, from the flags and the API
    alike."""
    from raydistill.api import finetune_request
    from raydistill.commands import finetune

    lead = ["--model", "m", "--output", "o"]
    assert finetune_request("m", "o", None, {}) == finetune.request_of(finetune.parser().parse_args(lead))
    assert dict(finetune_request("m", "o", None, {}).train)["lr"] == 2e-5
    got = finetune_request("m", "o", Data(dataset="imdb"), dict(lr=1e-4, epochs=2, use_gpu=True, overwrite=True))
    typed = [*lead, "--lr", "1e-4", "--epochs", "2", "--use-gpu", "--overwrite", "--dataset", "imdb"]
    assert got == finetune.request_of(finetune.parser().parse_args(typed))


def test_a_picks_settings_make_the_request_its_command_line_makes():
    from raydistill.api import best_request
    from raydistill.commands import best
    from raydistill.commands.flags import request_from

    settings = dict(sweep="s1", mode="min", max_params=5e6, export="out", onnx=True, quantize=False, tracking_uri="u")
    got = best_request("exp", settings)
    typed = ["--experiment", "exp", "--sweep", "s1", "--mode", "min", "--max-params", "5e6", "--export", "out"]
    typed += ["--onnx", "--tracking-uri", "u"]
    assert got == request_from(best.BestRequest, best.parser().parse_args(typed))
    assert got.max_params == 5e6 and isinstance(got.max_params, float)


@pytest.mark.parametrize(
    "call,typed",
    [
        ("distill", ["--epochs", "x"]),  # argparse's int
        ("distill", ["--epochs", "1.0"]),  # argparse's int reads no "1.0"
        ("distill", ["--attention", "packed"]),  # a train field's choices
        ("distill", ["--task-kind", "ranking"]),  # a data field's choices
        ("finetune", ["--lr", "fast"]),  # argparse's float
        ("best", ["--mode", "avg"]),  # the request's own field's choices
        ("best", ["--max-latency-ms", "soon"]),
    ],
)
def test_a_value_the_flag_refuses_is_refused_in_the_commands_words(call, typed):
    """The API checks a value as the flag's parse checks it, and says so as the command says it: the same field, the
    same message."""
    from raydistill.api import best_request, distill_request, finetune_request
    from raydistill.commands import best, distill, finetune

    parser, lead, build = {
        "distill": (
            distill.parser,
            ["--method", "kd", "--teacher", "t"],
            lambda s: distill_request("kd", "t", None, s),
        ),
        "finetune": (finetune.parser, ["--model", "m", "--output", "o"], lambda s: finetune_request("m", "o", None, s)),
        "best": (best.parser, ["--experiment", "e"], lambda s: best_request("e", s)),
    }[call]
    with pytest.raises(UserError) as by_flag:
        parser().parse_args([*lead, *typed])
    key = typed[0][2:].replace("-", "_")
    value = 1.0 if typed[1] == "1.0" else typed[1]
    settings = {"kind": value} if key == "task_kind" else {key: value}
    with pytest.raises(UserError) as by_setting:
        if key == "task_kind":
            distill_request("kd", "t", Data(train_file="r.csv", **settings), {})
        else:
            build(settings)
    assert (by_setting.value.field, by_setting.value.message) == (by_flag.value.field, by_flag.value.message)


def test_settings_the_command_lacks_or_of_the_wrong_shape_are_refused_by_name():
    from raydistill.api import best_request, distill_request, finetune_request

    with pytest.raises(UserError) as e:
        distill_request("kd", "t", None, {"epoch": 1})
    assert e.value.field == "epoch" and "not a flag of python -m raydistill.distill" in e.value.message
    with pytest.raises(UserError) as e:
        finetune_request("m", "o", None, {"teacher_cache": "c"})  # distill's flag, not finetune's
    assert e.value.field == "teacher_cache" and "not a flag of python -m raydistill.finetune" in e.value.message
    with pytest.raises(UserError) as e:
        best_request("e", {"train": {}})
    assert e.value.field == "train" and "not a flag of python -m raydistill.best" in e.value.message
    with pytest.raises(UserError, match="True or False"):
        best_request("e", {"onnx": "yes"})
    with pytest.raises(UserError, match="True or False"):
        distill_request("kd", "t", None, {"group_by_length": 1})
    with pytest.raises(UserError, match="one value"):
        distill_request("kd", "t", None, {"run_name": ["a", "b"]})
    assert distill_request("kd", "t", None, {"epoch": None}) == distill_request("kd", "t", None, {})  # None: unset


def test_every_data_field_is_a_flag_of_the_commands_that_read_data(tmp_path, monkeypatch):
    """``Data`` (the one ``FileData``) names the commands' data flags: each field offered as a flag, datasets and
    entity tags included; the request the API builds from a ``Data`` holds it whole, as the flags typed give it."""
    from raydistill.api import _data, distill_request, finetune_request, sweep_request
    from raydistill.commands import distill, finetune, sweep
    from raydistill.commands.flags import data_of

    monkeypatch.chdir(tmp_path)
    values = {f.name: ("x" if f.type != "bool" else True) for f in flagged(Data)}
    values.update(kind="token", phrase_rows=True)
    assert {"train_file", "dataset", "tokens_column", "label_map", "delimiter"} <= set(values)
    typed = [
        x for f in flagged(Data) for x in ([flag_of(f)] if values[f.name] is True else [flag_of(f), values[f.name]])
    ]
    data = Data(**values)
    built = {
        sweep: (["s"], sweep_request("s", None, _data(data, {}), {}, {}).data),
        distill: (["--method", "kd", "--teacher", "t"], distill_request("kd", "t", data, {}).data),
        finetune: (["--model", "m", "--output", "o"], finetune_request("m", "o", data, {}).data),
    }
    for mod, (lead, got) in built.items():
        assert data_of(mod.parser().parse_args([*lead, *typed])) == data == got, mod.__name__


def test_the_api_refuses_an_output_folder_holding_the_data_it_reads(tmp_path, capsys):
    """The folder rule reads a request's data as it reads the data flags: ``finetune_teacher`` refuses an ``output``
    that holds its training file, with the command's line (the request nests the data in one ``FileData``)."""
    from raydistill.api import finetune_teacher
    from raydistill.commands import finetune

    rows = tmp_path / "r.csv"
    rows.write_text("text,label\na,0\n")
    with pytest.raises(SystemExit):
        finetune.main(["--model", "m", "--output", str(tmp_path), "--train-file", str(rows)])
    line = capsys.readouterr().err.strip()
    with pytest.raises(UserError) as e:
        finetune_teacher("m", output=str(tmp_path), data=Data(train_file=str(rows)))
    assert line == f"error: {e.value}" and "--train-file reads" in line
