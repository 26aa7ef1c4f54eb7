"""Ray glue for one distillation run: TorchTrainer with N DDP workers, per-epoch report + checkpoint,
MLflow logging from the Train controller. The only module (with sweep.py) that imports Ray."""
from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import shutil
import sys
import tempfile

import ray
import ray.train
import ray.train.torch
from ray.train.v2.api.callback import UserCallback

from .config import DistillConfig, RunConfig, StudentConfig, TrainConfig
from .track import log_epoch

log = logging.getLogger("raydistill")


def cfg_to_dict(cfg: RunConfig) -> dict:
    return dataclasses.asdict(cfg)


def cfg_from_dict(d: dict) -> RunConfig:
    d = dict(d)
    d["student"] = StudentConfig(**d["student"])
    d["distill"] = DistillConfig(**d["distill"])
    d["train"] = TrainConfig(**d["train"])
    return RunConfig(**d)


def init_ray(num_cpus: int | None = None, log_to_driver: bool = True) -> None:
    """Join the cluster in RAY_ADDRESS (no resource arguments allowed then), else start a local Ray
    with its dashboard bound to 127.0.0.1.

    A cluster with token authentication admits this driver only with ``RAY_AUTH_MODE=token`` and the
    cluster's token (``RAY_AUTH_TOKEN``, ``RAY_AUTH_TOKEN_PATH`` or ``~/.ray/auth_token``) in its
    environment; a job started by ``ray job submit`` inherits both from the cluster. A refused token, or
    a dashboard URL in RAY_ADDRESS, is a one-line UserError saying what to set instead of a Ray traceback.
    """
    if ray.is_initialized():
        return
    os.environ.setdefault("RAY_TRAIN_V2_ENABLED", "1")
    address = os.environ.get("RAY_ADDRESS")
    if address:
        from .errors import UserError

        if address.startswith(("http://", "https://")):
            raise UserError("RAY_ADDRESS", f"{address} is a dashboard / job API address: submit the command with "
                            f"`ray job submit --address {address} -- python -m ...`, or set RAY_ADDRESS to the "
                            "cluster's GCS address (HOST:6379)")
        try:
            ray.init(address=address, log_to_driver=True)
        except Exception as e:
            chain, c = [], e
            while c is not None and len(chain) < 10:
                chain.append(f"{type(c).__name__}: {c}")
                c = c.__cause__ or c.__context__
            if any("InvalidAuthToken" in t or "AuthenticationError" in t for t in chain):
                mode = os.environ.get("RAY_AUTH_MODE", "unset")
                raise UserError("RAY_ADDRESS", f"the cluster at {address} refused this client's token "
                                f"(RAY_AUTH_MODE is {mode}): export RAY_AUTH_MODE=token and the cluster's token "
                                "as RAY_AUTH_TOKEN, RAY_AUTH_TOKEN_PATH or ~/.ray/auth_token "
                                "(docs/CLUSTER.md, section 2)") from None
            raise
    else:
        # the dashboard (bound to loopback) hosts the state API Ray Train uses to clean up placement groups.
        # Its actors find that API by RAY_API_SERVER_ADDRESS, inherited from this process by the raylet and every
        # worker it starts; unset, they look for "the" local Ray and fail when a second command runs its own.
        # Set only while Ray starts: this process's children (a `ray job submit` to a cluster) must not inherit it.
        port = free_port()
        env = {k: os.environ.get(k, v) for k, v in LOCAL_TRAIN_ENV.items()}
        with _environ({**env, "RAY_API_SERVER_ADDRESS": f"http://127.0.0.1:{port}"}):
            ray.init(num_cpus=num_cpus, include_dashboard=True, dashboard_host="127.0.0.1", dashboard_port=port,
                     log_to_driver=log_to_driver, configure_logging=False)


@contextlib.contextmanager
def _environ(values: dict):
    old = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


# A trial's fixed cost on one machine (benchmarks/sweep_throughput.py, BENCHMARKS.md): Ray Train's controller polls its
# workers every 2 s by default and starts a preemption-watcher actor (a process) per run, for spot nodes a local machine
# does not have. Set in the environment to override.
LOCAL_TRAIN_ENV = {"RAY_TRAIN_HEALTH_CHECK_INTERVAL_S": "0.5", "RAY_TRAIN_ENABLE_PREEMPTION_WATCHER": "0"}


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _worker(config: dict) -> None:
    """Runs on every Ray Train worker: Ray context in, plain-PyTorch loop out."""
    from .loop import Context, run

    cfg = cfg_from_dict(config["cfg"])
    if not cfg.train.use_gpu:  # as many torch threads as CPUs Ray gave this worker, no more (trials share cores)
        import torch

        torch.set_num_threads(config.get("threads", 1))
    tctx = ray.train.get_context()
    ckpt = ray.train.get_checkpoint()
    resume_dir = None
    if ckpt is not None:
        resume_dir = os.path.join(ckpt.to_directory(tempfile.mkdtemp(prefix="raydistill-resume-")), "checkpoint")
    rank = tctx.get_world_rank()

    def report(metrics: dict, ckpt_dir: str | None) -> None:
        c = ray.train.Checkpoint.from_directory(os.path.dirname(ckpt_dir)) if ckpt_dir else None
        ray.train.report(metrics, checkpoint=c)

    # to the process's real stderr: Ray forwards it to the driver's stderr (stdout's last line is the command's
    # JSON), and Ray Train's print patch would log a sys.stderr print twice
    ctx = Context(rank=rank, world_size=tctx.get_world_size(), device=ray.train.torch.get_device(),
                  resume_dir=resume_dir, report=report, log=(lambda m: print(f"[rank0] {m}", file=sys.__stderr__, flush=True))
                  if rank == 0 else (lambda m: None))
    try:
        run(cfg, ctx)
    finally:
        if resume_dir:
            shutil.rmtree(os.path.dirname(resume_dir), ignore_errors=True)


class MlflowEpochCallback(UserCallback):
    """Logs every epoch's rank-0 metrics to the run's MLflow run as they are reported (controller side)."""

    def __init__(self, tracking_uri: str, run_id: str):
        self.tracking_uri, self.run_id = tracking_uri, run_id

    def after_report(self, run_context, metrics, checkpoint):
        log_epoch(self.tracking_uri, self.run_id, metrics[0])



def make_trainer(cfg: RunConfig, *, name: str, storage_path: str, callbacks=(), max_failures: int = 0,
                 placement_strategy: str = "PACK", cpus_per_worker: float = 1, gpus_per_worker: float | None = None):
    from ray.train import CheckpointConfig, FailureConfig, RunConfig as TrainRunConfig, ScalingConfig
    from ray.train.torch import TorchConfig, TorchTrainer

    from .resources import threads

    resources = {"CPU": cpus_per_worker}
    if cfg.train.use_gpu:
        resources["GPU"] = gpus_per_worker or 1
    return TorchTrainer(
        _worker,
        train_loop_config={"cfg": cfg_to_dict(cfg), "threads": threads(cpus_per_worker)},
        torch_config=TorchConfig(backend="nccl" if cfg.train.use_gpu else "gloo"),
        scaling_config=ScalingConfig(num_workers=cfg.train.num_workers, use_gpu=cfg.train.use_gpu,
                                     resources_per_worker=resources, placement_strategy=placement_strategy),
        run_config=TrainRunConfig(name=name, storage_path=storage_path, callbacks=list(callbacks),
                                  failure_config=FailureConfig(max_failures=max_failures),
                                  checkpoint_config=CheckpointConfig(num_to_keep=2)),
    )


def export_student(checkpoint, output: str) -> str:
    """Copy the run's best student (HF directory + tokenizer) out of a Ray checkpoint to ``output``."""
    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(checkpoint.to_directory(tmp), "checkpoint", "best_student")
        tmp_out = output.rstrip("/") + ".tmp"
        shutil.rmtree(tmp_out, ignore_errors=True)
        shutil.copytree(src, tmp_out)
        if os.path.exists(output):
            shutil.rmtree(output)
        os.replace(tmp_out, output)
    return output


def failure_reason(e: BaseException) -> str:
    """The root cause of a failed Ray Train run in one line (e.g. the NonFiniteLoss raised by a worker)."""
    import re

    lines = str(e).splitlines()
    causes = [ln.strip() for ln in lines if re.match(r"\s*[\w.]+(Error|Exception|Loss|Interrupt): ", ln)]
    return (causes[-1] if causes else lines[0] if lines else type(e).__name__)[:300]  # the innermost cause


def final_metrics(last: dict) -> dict:
    """A run's result from its last report: numbers only, with ``eval_*`` those of the best epoch (the student it
    exports) rather than of the last; ``epoch`` stays the last epoch and ``best_epoch`` names the best."""
    out = {k: v for k, v in last.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
    return {**out, **{k[len("best_"):]: v for k, v in out.items() if k.startswith("best_eval_")}}


def augment_params(cfg: RunConfig) -> dict:
    """The knobs (seed included) of the augmented training set, when the run uses one."""
    import json

    path = os.path.join(cfg.augment_dir or "", "augment.json")
    if not cfg.augment_dir or not os.path.isfile(path):
        return {}
    return {f"augment_{k}": v for k, v in json.load(open(path)).items()}


def execute(cfg: RunConfig, *, storage_path: str, name: str, parent_run_id: str | None = None,
            callbacks=(), max_failures: int = 0, placement_strategy: str = "PACK", tags: dict | None = None,
            resume_run_id: str | None = None, cpus_per_worker: float = 1, gpus_per_worker: float | None = None) -> dict:
    """One distillation run end to end: MLflow run, TorchTrainer.fit, student export, size and latency.

    Returns the final metrics (``eval_*`` of the best epoch, ``best_epoch``, ``student_params``, ``latency_ms_b*``)
    plus ``run_id`` and ``student_dir`` (the best epoch's student). MLflow keeps the per-epoch curves, ``best_eval_*``
    and ``best_epoch`` among them. A failed fit marks the MLflow run FAILED with the reason, then re-raises.
    """
    from . import track

    from .distill.data import data_fingerprint
    from .models.teacher import fingerprint

    import time

    t0 = time.perf_counter()
    uri = cfg.tracking_uri
    params = {**cfg.to_params(), "world_size": cfg.train.num_workers, "data_fingerprint": data_fingerprint(cfg),
              "teacher_fingerprint": fingerprint(cfg.teacher), **augment_params(cfg)}
    run_id = resume_run_id or track.start_run(uri, cfg.experiment, cfg.run_name or name, params, tags=tags,
                                              parent_run_id=parent_run_id)
    try:
        trainer = make_trainer(cfg, name=name, storage_path=storage_path, max_failures=max_failures,
                               placement_strategy=placement_strategy, cpus_per_worker=cpus_per_worker,
                               gpus_per_worker=gpus_per_worker,
                               callbacks=[MlflowEpochCallback(uri, run_id), *callbacks])
        t1 = time.perf_counter()
        result = trainer.fit()
        if result.error:
            raise result.error
        t2 = time.perf_counter()
        student_dir = export_student(result.checkpoint, cfg.output)
        final = final_metrics(result.metrics)
        track.log_artifacts(uri, run_id, student_dir, "student")
        t3 = time.perf_counter()
        # where the run's seconds went outside the workers' loop (Ray Train start and stop, MLflow, export)
        timing = {"time_run_start_s": t1 - t0, "time_fit_s": t2 - t1, "time_export_s": t3 - t2}
        track.log_metrics(uri, run_id, timing)
        final.update(timing)
        track.end_run(uri, run_id)
    except BaseException as e:
        track.set_tags(uri, run_id, {"error": f"{type(e).__name__}: {e}"[:4000]})
        track.end_run(uri, run_id, "FAILED")
        raise
    return {**final, "run_id": run_id, "student_dir": student_dir}
