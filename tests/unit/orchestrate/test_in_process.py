"""A sweep's 1-worker trial, CPU or GPU, trains in its Tune trial process (``orchestrate.run.fit_in_process``), without
Ray Train: the same loop, each epoch's checkpoint persisted (the latest kept, never a half-copied one), a restarted
trial resumed from its latest checkpoint and finishing as the uninterrupted run, the best student exported. A GPU
trial's device logic is checked here with CUDA mocked (tests/gpu_checks.py runs it on a real GPU)."""

from __future__ import annotations

import os
from types import SimpleNamespace

import pytest

from tests.unit.train.test_loop import cfg_for


class Crash(Exception):
    pass


def test_checkpoints_persisted_kept_and_resumed_as_the_uninterrupted_run(tiny_teacher, glue_dir, tmp_path):
    from raydistill.export.student import export_student
    from raydistill.orchestrate.run import fit_in_process

    cfg = cfg_for("sst2", tiny_teacher("classification", 2), glue_dir, "kd", epochs=3)
    full = []
    last, ckpt = fit_in_process(cfg, run_dir=str(tmp_path / "a"), threads=1, resume=False, on_epoch=full.append)
    assert [m["epoch"] for m in full] == [1, 2, 3] and last["epoch"] == 3
    assert sorted(os.listdir(tmp_path / "a")) == ["checkpoint_000003"]  # the latest only
    assert ckpt == str(tmp_path / "a" / "checkpoint_000003")
    out = export_student(ckpt, str(tmp_path / "student"))
    assert os.path.isfile(os.path.join(out, "config.json"))

    def crash_after_2(m):  # the trial process dies once epoch 2 is checkpointed (as a killed trial would)
        if m["epoch"] == 2:
            raise Crash

    with pytest.raises(Crash):
        fit_in_process(cfg, run_dir=str(tmp_path / "b"), threads=1, resume=False, on_epoch=crash_after_2)
    (tmp_path / "b" / "checkpoint_000009.tmp").mkdir()  # a half-copied checkpoint is never resumed from
    resumed = []
    last, _ = fit_in_process(cfg, run_dir=str(tmp_path / "b"), threads=1, resume=True, on_epoch=resumed.append)
    assert [m["epoch"] for m in resumed] == [3]
    assert resumed[0]["train_loss"] == pytest.approx(full[2]["train_loss"], rel=1e-5)
    assert resumed[0]["eval_accuracy"] == pytest.approx(full[2]["eval_accuracy"])

    fresh = []  # not a resume: a stale folder of the same name is cleared, the run starts at epoch 1
    fit_in_process(cfg, run_dir=str(tmp_path / "b"), threads=1, resume=False, on_epoch=fresh.append)
    assert [m["epoch"] for m in fresh] == [1, 2, 3]


def test_a_trial_resumed_after_its_end_repeats_its_result_to_on_replay_only(tiny_teacher, glue_dir, tmp_path):
    """Tune restarting a trial whose run had ended (a killed driver): its result goes to ``on_replay`` (Tune), not to
    ``on_epoch`` (MLflow: the epoch is logged already; logging it again gave the metric a second point at its step,
    as the fresh CI's killed-driver test found)."""
    from raydistill.orchestrate.run import fit_in_process

    cfg = cfg_for("sst2", tiny_teacher("classification", 2), glue_dir, "kd", epochs=2)
    logged: list = []
    run = {"run_dir": str(tmp_path / "t"), "threads": 1}
    last, _ = fit_in_process(cfg, **run, resume=False, on_epoch=logged.append)
    assert [m["epoch"] for m in logged] == [1, 2]
    replayed: list = []
    again, _ = fit_in_process(cfg, **run, resume=True, on_epoch=logged.append, on_replay=replayed.append)
    assert [m["epoch"] for m in logged] == [1, 2] and [m["epoch"] for m in replayed] == [2]
    assert again["best_eval_accuracy"] == last["best_eval_accuracy"]


def test_a_trial_the_scheduler_stops_ends_killed_and_tagged_not_failed(tiny_teacher, glue_dir, tmp_path):
    """Tune stops a trial (ASHA) by ``sys.exit(0)`` inside its report: the MLflow run ends KILLED, tagged
    ``raydistill.stopped``, with its epochs kept — not FAILED with ``error: SystemExit: 0``."""
    import dataclasses
    import sys

    from mlflow.tracking import MlflowClient

    from raydistill.orchestrate.run import execute

    uri = f"sqlite:///{tmp_path / 'm.db'}"
    cfg = dataclasses.replace(
        cfg_for("sst2", tiny_teacher("classification", 2), glue_dir, "kd", epochs=3),
        tracking_uri=uri,
        experiment="stop",
        output=str(tmp_path / "student"),
    )

    def asha_stops_after_1(m):
        sys.exit(0)  # what ray.train._internal.session does when the scheduler says stop

    with pytest.raises(SystemExit):
        execute(cfg, storage_path=str(tmp_path / "ray"), name="t", in_process=asha_stops_after_1)
    run = MlflowClient(uri).search_runs([MlflowClient(uri).get_experiment_by_name("stop").experiment_id])[0]
    assert run.info.status == "KILLED" and "error" not in run.data.tags
    assert run.data.tags["raydistill.stopped"].startswith("early") and run.data.metrics["epoch"] == 1


# ------------------------------------------------------------------ a 1-worker GPU trial, in process (CUDA mocked)
def test_cuda_index_is_the_place_of_the_trials_gpu_in_its_visible_set():
    from raydistill.orchestrate.resources import cuda_index

    assert cuda_index(["3"], "3") == 0  # Ray sets CUDA_VISIBLE_DEVICES to the trial's GPU: cuda:0, whatever its id
    assert cuda_index([3], "1,3") == 1  # ids may come back as ints
    assert cuda_index(["GPU-1a2b"], "GPU-0f0f,GPU-1a2b") == 1  # or as UUIDs
    assert cuda_index(["2"], None) == 2  # the variable left unset (RAY_EXPERIMENTAL_NOSET_...): the id is the index
    assert cuda_index([], "0,1") == 0  # no GPU id: outside a Ray worker


@pytest.fixture
def fake_cuda(monkeypatch):
    """torch sees CUDA device 0; ``set`` records what the trial made its current device."""
    import torch

    set_to: list = []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(torch.cuda, "set_device", set_to.append)
    return set_to


def test_trial_device_is_the_gpu_ray_gave_the_trial(fake_cuda, monkeypatch):
    import ray
    import torch

    from raydistill.common.errors import UserError
    from raydistill.config.schema import TrainConfig
    from raydistill.orchestrate.run import trial_device

    monkeypatch.setattr(ray, "is_initialized", lambda: True)
    monkeypatch.setattr(ray, "get_gpu_ids", lambda: ["5"])  # 8 trials at 0.125 GPU each: all on physical GPU 5
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "5")
    assert trial_device(TrainConfig(use_gpu=True)) == torch.device("cuda", 0) and fake_cuda == [torch.device("cuda", 0)]
    monkeypatch.setattr(ray, "is_initialized", lambda: False)  # no Ray worker (a test, a script): the current device
    assert trial_device(TrainConfig(use_gpu=True)) == torch.device("cuda", 0)
    fake_cuda.clear()
    assert trial_device(TrainConfig()) == torch.device("cpu") and not fake_cuda  # a CPU trial touches no CUDA
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(UserError) as e:
        trial_device(TrainConfig(use_gpu=True))
    assert e.value.field == "use_gpu"


def test_in_process_gpu_trial_hands_the_loop_its_gpu_and_reports_its_memory(fake_cuda, monkeypatch, tmp_path):
    """``fit_in_process`` on a GPU trial: the loop gets the trial's CUDA device, torch's CPU threads are left alone
    (the tokenizers' pool is still confined), and every epoch carries the trial's GPU memory, as a Ray Train worker's
    does."""
    import torch

    import raydistill.orchestrate.resources as res
    import raydistill.train.loop as loop
    from raydistill.config.schema import RunConfig, TrainConfig
    from raydistill.orchestrate.run import fit_in_process

    ckpt = tmp_path / "ck" / "checkpoint"
    (ckpt / "best_student").mkdir(parents=True)
    seen: dict = {}

    def fake_run(cfg, ctx):
        seen["device"] = ctx.device
        for epoch in (1, 2):
            ctx.report({"epoch": epoch, "train_loss": 1.0 / epoch}, str(ckpt))

    monkeypatch.setattr(loop, "run", fake_run)
    monkeypatch.setattr(res, "confine_threads", lambda n, torch_threads=True: seen.update(torch_threads=torch_threads))
    monkeypatch.setattr(res, "gpu_memory", lambda device: {"gpu_peak_memory_mb": 12.0, "on": str(device)})
    monkeypatch.setattr(res, "gpu_fresh", lambda device: seen.update(fresh=str(device)))
    cfg = RunConfig(task="sst2", teacher="t", train=TrainConfig(use_gpu=True))
    epochs: list = []
    last, latest = fit_in_process(cfg, run_dir=str(tmp_path / "run"), threads=2, resume=False, on_epoch=epochs.append)
    # the peak reported is this trial's, in an actor that may have trained another before
    assert seen == {"device": torch.device("cuda", 0), "torch_threads": False, "fresh": "cuda:0"}
    assert [m["on"] for m in epochs] == ["cuda:0", "cuda:0"] and last["gpu_peak_memory_mb"] == 12.0
    assert latest == str(tmp_path / "run" / "checkpoint_000002")


@pytest.mark.parametrize(
    "workers, ray_train_trials, in_process",
    [(1, False, True), (2, False, False), (1, True, False)],
)
def test_a_1_worker_gpu_trial_trains_in_process_unless_ray_train_is_asked_for(
    workers, ray_train_trials, in_process, monkeypatch
):
    """1 worker on a GPU share: in its Tune trial process, holding its CPUs and that share; 2 workers (DDP over
    NCCL) or --ray-train-trials: on Ray Train, the trial function holding nothing."""
    from types import SimpleNamespace

    from ray import tune

    from raydistill.orchestrate.driver import Sweep
    from raydistill.orchestrate.request import SweepRequest
    from raydistill.orchestrate.resources import Cluster, TrialDemand
    from raydistill.orchestrate.tuner import trainable_for

    request = SweepRequest(ray_train_trials=ray_train_trials, max_failures=1, placement_strategy="PACK", verbose=False)
    demand = TrialDemand(workers, 1.0, 0.125 if workers == 1 else 1.0)
    sweep = SimpleNamespace(demand=demand, machine=Cluster(16, 1), storage="/s", request=request)
    opts = Sweep._trial_opts(sweep, {})  # type: ignore[arg-type]
    assert opts.in_process is in_process and opts.run.gpus_per_worker == sweep.demand.gpus_per_worker
    monkeypatch.setattr(tune, "with_parameters", lambda f, **kw: f)  # no Ray object store needed for the bundle
    bundle = trainable_for(None, parent="p", storage="/s", name="n", opts=opts)._resources.required_resources
    assert bundle == ({"CPU": 1.0, "GPU": 0.125} if in_process else {"memory": 1.0})


def test_a_1_worker_distill_command_trains_here_without_ray(tiny_teacher, glue_dir, tmp_path, capsys, monkeypatch):
    """``python -m raydistill.distill`` with one worker (issue 47): the loop in this process, no Ray started; the same
    outputs as on Ray Train — the epoch's checkpoint under --storage-path, the student exported, the MLflow run
    FINISHED with one point per epoch, the JSON line — and the caller's torch threads back afterwards (the API)."""
    import json

    import torch
    from mlflow.tracking import MlflowClient

    from raydistill.distill.__main__ import main
    from raydistill.orchestrate import connect
    from raydistill.orchestrate import resources as res
    from tests.e2e.test_distill_ray import TINY_STUDENT

    def no_ray(*a, **kw):
        raise AssertionError("Ray started")

    monkeypatch.setattr(connect, "init_ray", no_ray)
    before = torch.get_num_threads()
    trained_on: list[int] = []
    confine = res.confine_threads
    monkeypatch.setattr(res, "confine_threads", lambda n, **kw: (trained_on.append(n), confine(n, **kw)))
    uri = f"sqlite:///{tmp_path / 'm.db'}"
    main(
        [
            *("--method", "kd", "--task", "sst2", "--teacher", tiny_teacher("classification", 2)),
            *("--data-dir", glue_dir, *TINY_STUDENT, "--epochs", "2", "--max-steps", "4", "--batch-size", "16"),
            *("--max-length", "32", "--eval-limit", "16", "--output", str(tmp_path / "s"), "--tracking-uri", uri),
            *("--storage-path", str(tmp_path / "ray")),
        ]
    )
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert torch.get_num_threads() == before
    # alone in the process, the run takes the process's threads (not a Ray Train worker's 1 CPU), and says so
    assert trained_on == [before]
    assert MlflowClient(uri).get_run(out["run_id"]).data.params["cpu_threads"] == str(before)
    assert out["epoch"] == 2 and out["student_dir"] == str(tmp_path / "s")
    assert (tmp_path / "s" / "config.json").is_file()
    (run_dir,) = os.listdir(tmp_path / "ray")
    assert os.listdir(tmp_path / "ray" / run_dir) == ["checkpoint_000002"]
    c = MlflowClient(uri)
    assert c.get_run(out["run_id"]).info.status == "FINISHED"
    assert sorted(m.step for m in c.get_metric_history(out["run_id"], "eval_accuracy")) == [1, 2]


@pytest.mark.parametrize(
    "flags, env, ray_train",
    [
        ([], {}, False),
        (["--ray-train"], {}, True),
        (["--num-workers", "2"], {}, True),
        (["--max-failures", "1"], {}, True),
        ([], {"RAY_ADDRESS": "auto"}, True),
        (["--storage-path", "s3://bucket/ray"], {}, True),
        (["--inject-fault", "kill:rank=0,epoch=1,step=1,once=/x"], {}, True),
        (["--inject-fault", "nan:epoch=1"], {}, False),
    ],
)
def test_the_distill_command_trains_on_ray_train_only_where_it_must(flags, env, ray_train, monkeypatch, tmp_path):
    """Ray Train where the run needs it (asked for, DDP, restarts, a cluster, remote checkpoints, a worker-killing
    fault); otherwise the one worker trains in the command's process."""
    from raydistill.commands.distill import parser
    from raydistill.orchestrate.run import RunOptions
    from raydistill.orchestrate.single import on_ray_train

    for k, v in env.items():
        monkeypatch.setenv(k, v)
    if not env:
        monkeypatch.delenv("RAY_ADDRESS", raising=False)
    a = parser().parse_args(["--method", "kd", "--teacher", "t", "--output", str(tmp_path / "s"), *flags])
    storage = a.storage_path or str(tmp_path)
    cfg = SimpleNamespace(train=SimpleNamespace(num_workers=a.num_workers), fault=a.inject_fault)
    opts = RunOptions(max_failures=a.max_failures, placement_strategy=a.placement_strategy, verbose=a.verbose)
    assert on_ray_train(cfg, storage, opts, asked=a.ray_train) is ray_train
