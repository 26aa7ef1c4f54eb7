"""raydistill.api: keyword arguments build the requests the commands build."""

from __future__ import annotations


def test_the_api_takes_multi_objective_false_as_off():
    from raydistill.api import sweep_request
    from raydistill.tasks.files import FileData

    assert sweep_request("pkd_glue", "t", FileData(), {}, {"multi_objective": False}).multi_objective is None
