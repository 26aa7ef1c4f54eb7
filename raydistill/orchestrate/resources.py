"""How many trials run at once: what one trial's workers ask for, and what the cluster holds. Ray-free.

A trial is ``num_workers`` Ray Train workers of ``cpus_per_worker`` CPUs (and ``gpus_per_worker`` GPUs); the Tune
trial function itself holds nothing (it only waits for its workers), except a 1-worker trial on a local Ray, which
trains in the trial function and holds that worker's CPUs (and its fraction of a GPU) instead: the same demand either
way. So the sweep's concurrency is the number of whole trials the cluster's CPUs and GPUs hold, capped by
``--max-concurrent`` and the number of trials. A trial that can never be placed is refused here, before it would sit
PENDING forever.
"""

from __future__ import annotations

import contextlib
import math
import os
from dataclasses import dataclass

from raydistill.common.errors import UserError, check

# More trials at once beat more threads per trial on a small CPU machine: each trial's fixed cost overlaps the other's
# training, and two threads do not halve a step (docs/benchmarks/2026-11-23-sweep-throughput.md).
DEFAULT_CPUS_PER_WORKER = 1.0


@dataclass(frozen=True)
class Cluster:
    cpus: float
    gpus: float = 0.0

    @classmethod
    def local(cls) -> Cluster:
        """The machine a local Ray would start on (the CPUs this process may use)."""
        cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
        try:
            import torch

            gpus = torch.cuda.device_count()
        except Exception:  # no torch CUDA build: no GPU
            gpus = 0
        return cls(float(cpus), float(gpus))

    @classmethod
    def of(cls, resources: dict) -> Cluster:
        """From ``ray.cluster_resources()``."""
        return cls(float(resources.get("CPU", 0)), float(resources.get("GPU", 0)))


@dataclass(frozen=True)
class TrialDemand:
    num_workers: int
    cpus_per_worker: float
    gpus_per_worker: float | None = None  # None: CPU training

    @property
    def cpus(self) -> float:
        return self.num_workers * self.cpus_per_worker

    @property
    def gpus(self) -> float:
        return self.num_workers * (self.gpus_per_worker or 0)

    def threads(self) -> int:
        return threads(self.cpus_per_worker)

    def in_process(self) -> bool:
        """One worker, on the CPU or on (a fraction of) a GPU: the trial can train in its own Tune process, with no Ray
        Train controller and worker to start. Several workers need Ray Train (DDP over gloo or NCCL)."""
        return self.num_workers == 1

    def trial_resources(self, in_process: bool) -> dict:
        """The Tune trial function's own bundle: a trial that trains in it holds its worker's CPUs and GPU share; one
        on Ray Train only waits for its workers, and holding a CPU would leave one idle on a small machine (Tune needs
        a non-empty bundle)."""
        if not in_process:
            return {"cpu": 0, "memory": 1}
        return {"cpu": self.cpus_per_worker, **({"gpu": self.gpus_per_worker} if self.gpus_per_worker else {})}


def cuda_index(gpu_ids: list, visible: str | None) -> int:
    """The ``cuda:`` index of the first GPU Ray gave this process (``ray.get_gpu_ids()``): its place in
    ``CUDA_VISIBLE_DEVICES``, which Ray sets to the process's GPUs, so ``0`` for a 1-GPU (or a fraction of one)
    trial, whatever its physical id — trials packed on one GPU each see it as ``cuda:0``. Where Ray left the variable
    unset (``RAY_EXPERIMENTAL_NOSET_CUDA_VISIBLE_DEVICES``) the id is the index; no id (outside a Ray worker): 0."""
    if not gpu_ids:
        return 0
    first = str(gpu_ids[0])
    names = [v.strip() for v in (visible or "").split(",") if v.strip()]
    if first in names:
        return names.index(first)
    return int(first) if first.isdigit() and not names else 0


def threads(cpus_per_worker: float | None) -> int:
    """torch threads per worker: the CPUs Ray gave it (a fraction still gets one). ``None`` (a run alone in this
    process, ``raydistill distill`` without ``--cpus-per-worker``): this process's torch threads as they are — torch's
    default of the machine's cores, or what ``OMP_NUM_THREADS`` or the caller (``torch.set_num_threads``) chose."""
    if cpus_per_worker is None:
        import torch

        return torch.get_num_threads()
    return max(1, int(cpus_per_worker))


# thread pools a trial's process starts, sized by these variables when the pool first starts (not after)
THREAD_ENV = ("RAYON_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


def confine_threads(n: int, torch_threads: bool = True) -> None:
    """Keep a trial's process to its ``n`` CPUs: torch's intra-op threads, and the pools sized from the environment
    when they first start — the HF tokenizers' Rust (rayon) pool, which otherwise takes every core of the machine,
    OpenMP and MKL. Call it before the process first tokenises (a pool already started keeps its size). On one CPU
    the tokenizers do not start their pool at all (``TOKENIZERS_PARALLELISM=false``)."""
    os.environ.update({k: str(n) for k in THREAD_ENV})
    if n <= 1:
        os.environ["TOKENIZERS_PARALLELISM"] = "false"
    if torch_threads:
        import torch

        torch.set_num_threads(n)


@contextlib.contextmanager
def threads_kept():
    """Inside, a run may ``confine_threads`` this process (the distill command's in-process worker); afterwards the
    caller's torch thread count and thread variables are back (a notebook calling ``raydistill.api``). A pool that
    already started keeps its size either way."""
    import torch

    names = (*THREAD_ENV, "TOKENIZERS_PARALLELISM")
    env, n = {k: os.environ.get(k) for k in names}, torch.get_num_threads()
    try:
        yield
    finally:
        torch.set_num_threads(n)
        for k, v in env.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def gpu_memory(device) -> dict:
    """This process's memory on a CUDA ``device`` in MiB: held by live tensors now (``gpu_memory_mb``), at its peak
    (``gpu_peak_memory_mb``) and reserved by torch's caching allocator (``gpu_reserved_mb``, what other processes on
    the GPU cannot use). A trial's peak says how many trials one GPU holds (``--gpus-per-worker``)."""
    import torch

    mib = float(1 << 20)
    return {
        "gpu_memory_mb": torch.cuda.memory_allocated(device) / mib,
        "gpu_peak_memory_mb": torch.cuda.max_memory_allocated(device) / mib,
        "gpu_reserved_mb": torch.cuda.memory_reserved(device) / mib,
    }


def gpu_fresh(device) -> None:
    """A trial starting in a process that trained another (Tune reuses in-process trials' actors): the blocks torch
    still caches for the last trial go back to the GPU, and the peak ``gpu_memory`` reports starts from this trial."""
    import torch

    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats(device)


def concurrency(demand: TrialDemand, cluster: Cluster, max_concurrent: int | None, num_samples: int) -> int:
    """Trials at once: as many as the cluster holds, at most ``max_concurrent`` and ``num_samples``. Raises a
    UserError naming the flag when one trial asks for more than the cluster has."""
    check(
        max_concurrent is None or max_concurrent >= 1,
        "max_concurrent",
        f"must be >= 1 (or left out: as many trials as the cluster holds), got {max_concurrent}",
    )
    if demand.cpus > cluster.cpus + 1e-9:
        raise UserError(
            "cpus_per_worker",
            f"one trial asks for {demand.num_workers} worker(s) × "
            f"{demand.cpus_per_worker:g} CPU = {demand.cpus:g} CPUs, but the cluster has {cluster.cpus:g}; "
            "lower --num-workers or --cpus-per-worker",
        )
    if demand.gpus > cluster.gpus + 1e-9:
        fix = (
            "lower --num-workers or --gpus-per-worker (a fraction such as 0.25 packs trials per GPU)"
            if cluster.gpus
            else "drop --use-gpu, or run on a cluster with GPUs"
        )
        raise UserError(
            "gpus_per_worker",
            f"one trial asks for {demand.num_workers} worker(s) × "
            f"{demand.gpus_per_worker:g} GPU = {demand.gpus:g} GPUs, but the cluster has {cluster.gpus:g}; " + fix,
        )
    fits = [math.floor(cluster.cpus / demand.cpus + 1e-9)]
    if demand.gpus:
        fits.append(math.floor(cluster.gpus / demand.gpus + 1e-9))
    n = max(1, min(fits))
    return min(n, max_concurrent or n, max(num_samples, 1))
