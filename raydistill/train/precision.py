"""Numeric precision of the frozen teacher and of the training step.

The teacher is frozen, so its forward pass is pure inference: under bf16 autocast it runs faster on CPUs with native
bf16 matmul (AVX512-BF16 or AMX) and on GPUs, and moves the distillation losses only slightly
(docs/benchmarks/2026-11-23-step-speed.md). ``TrainConfig.teacher_bf16`` (on by default) asks for it; it is used only
where the hardware has native bf16, so older CPUs keep the exact fp32 teacher. ``TrainConfig.bf16`` autocasts the
whole step on GPU.
"""

from __future__ import annotations

import contextlib

import torch

from raydistill.common.errors import check


def cpu_bf16() -> bool:
    """True when the CPU has native bf16 matmul (AVX512-BF16 or AMX)."""
    try:
        return bool(torch.cpu._is_avx512_bf16_supported() or torch.cpu._is_amx_tile_supported())
    except AttributeError:  # private helpers moved: fall back to the kernel's CPU flags
        try:
            with open("/proc/cpuinfo") as f:
                flags = f.read()
        except OSError:
            return False
        return " avx512_bf16" in flags or " amx_bf16" in flags


def teacher_dtype(train, device) -> str:
    """'bf16' or 'fp32': what the teacher forward runs in for this config on this device."""
    if device.type == "cuda":
        return "bf16" if (train.bf16 or train.teacher_bf16) and torch.cuda.is_bf16_supported() else "fp32"
    return "bf16" if train.teacher_bf16 and cpu_bf16() else "fp32"


def autocast(device, dtype: str):
    """The autocast context for ``dtype`` on ``device`` (a no-op for fp32)."""
    if dtype != "bf16":
        return contextlib.nullcontext()
    return torch.autocast(device.type, dtype=torch.bfloat16)


def step_dtype(train, device) -> str:
    """What the student step (forward + losses) runs in: bf16 autocast on GPU when ``train.bf16``, on a CPU with native
    bf16 when ``train.cpu_bf16``; else fp32."""
    if device.type == "cuda":
        return "bf16" if train.bf16 else "fp32"
    return "bf16" if train.cpu_bf16 and cpu_bf16() else "fp32"


def effective(train) -> dict[str, str]:
    """What the student step and the teacher forward run in, as the run's params say it: what ran, not what was asked
    (``bf16: True`` on a CPU trains fp32). A GPU run started where no GPU is visible (a cluster's driver) says what
    its workers use where their GPU has bf16."""
    if train.use_gpu and not torch.cuda.is_available():
        step = "bf16 where the GPU has it" if train.bf16 else "fp32"
        teacher = "bf16 where the GPU has it" if train.bf16 or train.teacher_bf16 else "fp32"
        return {"student_step_precision": step, "teacher_precision": teacher}
    device = torch.device("cuda" if train.use_gpu else "cpu")
    return {"student_step_precision": step_dtype(train, device), "teacher_precision": teacher_dtype(train, device)}


def run_device(train) -> torch.device:
    """The device a run in this process trains on (``raydistill.finetune``, a sweep's in-sweep teacher): the current
    CUDA device with ``train.use_gpu``, else the CPU. Refuses ``use_gpu`` where torch sees no CUDA device."""
    if not train.use_gpu:
        return torch.device("cpu")
    build = f"torch {torch.__version__}" + ("" if torch.version.cuda else ", a CPU-only build")
    check(
        torch.cuda.is_available(),
        "use_gpu",
        f"torch sees no CUDA device ({build}); drop --use-gpu, or install "
        "torch's CUDA build on a GPU machine (benchmarks/README.md, GPU machines)",
    )
    return torch.device("cuda", torch.cuda.current_device())


def release(module, device) -> None:
    """Move ``module`` to the CPU and, when it was on a GPU, hand its memory back to the device (the caching allocator
    would keep it from the other trials packed on that GPU)."""
    module.to("cpu")
    if device.type == "cuda":
        torch.cuda.empty_cache()
