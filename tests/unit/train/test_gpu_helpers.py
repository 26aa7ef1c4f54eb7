"""The CPU side of the GPU tests (tests/e2e/test_gpu.py, ``pytest -m gpu``): what they rely on, run in CI without a
GPU — the window arithmetic that says two trials held GPU memory at once, the per-stage loss check, a GPU trial's path
through Ray Train with a fraction of a GPU and NCCL, where the in-sweep teacher trains, and the device refusals."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from raydistill.common.errors import UserError
from raydistill.config.schema import RunConfig, TrainConfig
from raydistill.testing import common_span, held_window
from tests.gpu_checks import Captured, check_run, falling_per_stage, method_cfg


def _hist(*pairs):
    return [SimpleNamespace(value=v, timestamp=t) for t, v in pairs]


def test_held_window_spans_first_to_last_report_only_while_memory_is_held():
    assert held_window(_hist((5_000, 12.0), (1_000, 10.0), (3_000, 11.0))) == (1.0, 5.0)  # ms → s, any order
    assert held_window(_hist((1_000, 10.0), (2_000, 0.0))) is None  # an epoch with nothing on the GPU
    assert held_window([]) is None


def test_common_span_of_windows():
    assert common_span([(0.0, 10.0), (4.0, 20.0)]) == 6.0
    assert common_span([(0.0, 10.0), (4.0, 20.0), (5.0, 7.0)]) == 2.0
    assert common_span([(0.0, 1.0), (2.0, 3.0)]) == 0.0  # one after the other: never at once
    assert common_span([(0.0, 1.0), None]) == 0.0 and common_span([]) == 0.0


def test_falling_per_stage_compares_within_each_stage():
    reports = [
        {"stage": "intermediate", "train_loss": 5.0},
        {"stage": "intermediate", "train_loss": 4.0},
        {"stage": "pred", "train_loss": 0.7},
        {"stage": "pred", "train_loss": 0.6},
        {"stage": "pred", "train_loss": 0.5},
    ]
    assert falling_per_stage(reports) == {"intermediate": (5.0, 4.0), "pred": (0.7, 0.5)}
    assert falling_per_stage([{"stage": "pred", "train_loss": 1.0}]) == {}  # one epoch: nothing to compare


def test_the_gpu_tests_run_checks_hold_on_the_cpu(tiny_teacher, glue_dir, tmp_path, monkeypatch):
    """tests/e2e/test_gpu.py's end-to-end check of one run, here on the CPU: fp32 step, losses finite and falling, fp32
    weights, the exported student re-scored equal to the dev score the run reported."""
    torch.set_num_threads(1)
    from tests.gpu_checks import write_sst2

    data = write_sst2(str(tmp_path / "glue"), n_train=640, n_dev=64)
    cfg = method_cfg("kd", tiny_teacher("classification"), data, epochs=3)
    cap = Captured(monkeypatch, str(tmp_path))
    cap.run(cfg, torch.device("cpu"))
    last = check_run(cap, cfg, torch.device("cpu"), data, torch.float32)
    assert cap.teacher is not None and last["epoch"] == 3


def test_a_gpu_trial_packs_a_fraction_of_a_gpu_and_its_ray_train_path_uses_nccl(tmp_path):
    """A 1-worker GPU trial trains in its Tune trial process on its share of the GPU
    (tests/unit/orchestrate/test_in_process.py); with several workers, or --ray-train-trials, it runs on Ray Train
    over NCCL."""
    from raydistill.orchestrate.resources import Cluster, TrialDemand, concurrency
    from raydistill.orchestrate.run import RunOptions, make_trainer

    demand = TrialDemand(1, 1.0, 0.5)
    assert demand.in_process() and not TrialDemand(2, 1.0, 1.0).in_process()
    assert concurrency(demand, Cluster(16, 1), None, 24) == 2
    assert concurrency(TrialDemand(1, 1.0, 0.125), Cluster(16, 1), None, 24) == 8
    assert concurrency(TrialDemand(1, 1.0, 0.125), Cluster(4, 1), None, 24) == 4  # the CPUs bound it too
    cfg = RunConfig(task="sst2", teacher="t", train=TrainConfig(use_gpu=True))
    t = make_trainer(cfg, name="x", storage_path=str(tmp_path), opts=RunOptions(gpus_per_worker=0.5))
    assert t.backend_config.backend == "nccl"
    assert t.scaling_config.use_gpu and t.scaling_config.resources_per_worker == {"CPU": 1, "GPU": 0.5}
    cpu = make_trainer(RunConfig(task="sst2", teacher="t"), name="x", storage_path=str(tmp_path))
    assert cpu.backend_config.backend == "gloo" and "GPU" not in cpu.scaling_config.resources_per_worker


def test_run_device():
    from raydistill.train.precision import release, run_device

    assert run_device(TrainConfig()) == torch.device("cpu")
    if not torch.cuda.is_available():
        with pytest.raises(UserError) as e:
            run_device(TrainConfig(use_gpu=True))
        assert e.value.field == "use_gpu" and "drop --use-gpu" in str(e.value)
    m = torch.nn.Linear(2, 2)
    release(m, torch.device("cpu"))
    assert m.weight.device.type == "cpu"
