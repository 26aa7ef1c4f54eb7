"""The augment command's typed request: its knobs' flags generated from ``AugmentOptions`` (declared once, with the
same defaults), and the flags turned into one ``AugmentRequest`` for the data stage."""

from __future__ import annotations

import dataclasses

import pytest

from raydistill.commands import augment as cmd
from raydistill.common.errors import UserError
from raydistill.data.augmentation import AugmentOptions, AugmentRequest


def test_the_knob_flags_are_the_options_fields_with_their_defaults():
    ap = cmd.parser()
    by_dest = {a.dest: a for a in ap._actions}
    for f in dataclasses.fields(AugmentOptions):
        assert f.name in by_dest, f"--{f.name} is not a flag"
        assert by_dest[f.name].help.startswith(f.metadata["help"].split(" (default")[0])
    defaults = AugmentOptions()
    for name in cmd.SAMPLING:
        assert by_dest[name].default == getattr(defaults, name), name
    assert by_dest["candidates"].default is None  # the model given chooses


def test_flags_become_one_request(tmp_path):
    teacher = tmp_path / "teacher"
    teacher.mkdir()
    argv = ["--task", "mrpc", "--teacher", str(teacher), "--output", str(tmp_path / "out"), "--n", "3", "--p", "0.2"]
    req = cmd.request(cmd.parser().parse_args([*argv, "--limit", "5", "--batch-size", "8"]))
    assert req == AugmentRequest(
        "mrpc",
        None,
        str(teacher),
        str(tmp_path / "out"),
        AugmentOptions(p=0.2, n=3, limit=5, batch_size=8, candidates="embedding"),
        mlm=None,
        field="augment_teacher",
    )
    mlm = cmd.request(cmd.parser().parse_args([*argv[:2], "--mlm", str(teacher), *argv[4:]]))
    assert (mlm.options.candidates, mlm.model_dir, mlm.mlm, mlm.field) == (
        "mlm",
        str(teacher),
        str(teacher),
        "augment_mlm",
    )


def test_a_bad_knob_is_refused_when_the_request_is_made(tmp_path):
    """Before any row is read (the data folder here does not exist) or model loaded."""
    argv = ["--task", "sst2", "--data-dir", str(tmp_path / "nope"), "--teacher", str(tmp_path)]
    argv += ["--output", str(tmp_path / "out"), "--k", "0"]
    with pytest.raises(UserError) as e:
        cmd.request(cmd.parser().parse_args(argv))
    assert e.value.field == "augment_k"
