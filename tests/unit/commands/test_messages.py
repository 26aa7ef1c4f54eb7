"""Messages a newcomer meets that the bad-input table (tests/unit/commands/test_bad_input.py) does not cover by
itself."""

from __future__ import annotations

import pytest


class _Stop(Exception):
    pass


def test_quantize_reads_a_hub_runs_data_dir_as_the_hub(monkeypatch):
    """A run whose data came from the hub logs data_dir "hub"; best --quantize reads it back as no folder (the hub),
    not as a path ("data_dir: hub is not a directory")."""
    from raydistill.config.params import data_dir_of
    from raydistill.config.schema import RunConfig
    from raydistill.export import quantize

    params = RunConfig.from_dict({"task": "sst2", "teacher": "t"}).to_params()
    assert params["data_dir"] == "hub"
    assert data_dir_of(params) is None
    assert data_dir_of({"data_dir": "/data/glue"}) == "/data/glue" and data_dir_of({}) is None
    seen = {}

    def dev_data(task, tok, data_dir, *a):
        seen["data_dir"] = data_dir
        raise _Stop

    monkeypatch.setattr(quantize, "dev_data", dev_data)
    with pytest.raises(_Stop):
        quantize.quantize_report("student", "student/model.onnx", params)
    assert seen["data_dir"] is None


def test_onnx_check_names_the_missing_package(monkeypatch):
    import sys

    from raydistill.common.errors import UserError
    from raydistill.export.onnx import check_onnx_installed

    check_onnx_installed()  # installed here
    monkeypatch.setitem(sys.modules, "onnx", None)
    with pytest.raises(UserError) as e:
        check_onnx_installed()
    assert e.value.field == "onnx" and "--onnx needs onnx," in str(e.value) and '-e ".[onnx]"' in str(e.value)


def test_onnx_missing_is_refused_before_any_export(monkeypatch, tmp_path, capsys):
    """The refusal comes before MLflow is read or a student exported (best-onnx-not-installed in the table)."""
    import sys

    from raydistill.commands import best

    def trap(*a, **k):
        raise AssertionError("export work started before the missing onnxruntime was reported")

    monkeypatch.setattr(best, "choose", trap)
    monkeypatch.setattr(best, "download_student", trap)
    monkeypatch.setitem(sys.modules, "onnxruntime", None)
    with pytest.raises(SystemExit) as e:
        best.main(["--experiment", "x", "--export", str(tmp_path / "out"), "--onnx"])
    err = capsys.readouterr().err
    assert e.value.code == 2 and err.startswith("error: onnx: --onnx needs onnxruntime") and len(err.splitlines()) == 1


def test_mapping_spec_is_checked_for_every_method():
    from raydistill.common.errors import UserError
    from raydistill.config.schema import DistillConfig
    from raydistill.distill.mapping import MAPPINGS, check_spec

    for name in MAPPINGS:
        check_spec(name, 4)
    check_spec("1,3", 4)
    check_spec([2, 4], 4)
    for bad, n in (("nonsense", None), ("3,1", 4), ("0,2", 4), ("2,9", 4), ("", None), ("a,b", 12)):
        with pytest.raises(UserError) as e:
            check_spec(bad, n)
        assert e.value.field == "distill.mapping"
    for kw, field in (
        ({"mapping": "diagonal"}, "distill.mapping"),
        ({"version": 3}, "distill.version"),
        ({"intermediate_epochs": -1}, "distill.intermediate_epochs"),
        ({"stage": "x"}, "distill.stage"),
    ):
        with pytest.raises(UserError) as e:
            DistillConfig(method="kd", **kw).validate()
        assert e.value.field == field
    DistillConfig(method="kd", mapping="3,6,9,12", version=1).validate()


def test_general_task_is_refused_by_training_commands_that_need_labels():
    from raydistill.common.errors import UserError
    from raydistill.tasks import check_labelled, get_task

    check_labelled(get_task("rte"), "finetune")
    with pytest.raises(UserError) as e:
        check_labelled(get_task("general"), "finetune")
    assert e.value.field == "task" and "python -m raydistill.distill --task general --unlabeled-text FILE" in str(
        e.value
    )
