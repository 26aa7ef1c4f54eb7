"""raydistill.common.paths: resume records written whole and on disk before their name points at them."""

import json
import os

from raydistill.common import paths


def test_a_record_is_on_disk_before_it_is_renamed_into_place(tmp_path, monkeypatch):
    order: list[str] = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd):
        order.append("fsync")
        real_fsync(fd)

    def replace(src, dst):
        order.append("replace")
        real_replace(src, dst)

    monkeypatch.setattr(paths.os, "fsync", fsync)
    monkeypatch.setattr(paths.os, "replace", replace)
    target = tmp_path / "run" / "resume.json"
    paths.write_json_atomic(str(target), {"epoch": 3}, unique=True)
    assert order == ["fsync", "replace"]
    assert json.loads(target.read_text()) == {"epoch": 3}
    assert os.listdir(target.parent) == ["resume.json"]  # no temporary file left beside it
