"""Helpers shared by the benchmark scripts: sample texts, CPU bf16 detection, machine description."""

from __future__ import annotations

import os
import platform
import subprocess

import torch

from raydistill.train.precision import cpu_bf16  # noqa: F401  (re-exported for the scripts)

TEXTS = [
    "the movie was good and the acting was great",
    "a boring film with a terrible plot",
    "what a fun story , i love it",
    "the company said it had a bad year",
]


def loadavg() -> str:
    try:
        return " ".join(open("/proc/loadavg").read().split()[:3])
    except OSError:
        return "?"


def machine() -> dict:
    model = platform.processor() or "?"
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, timeout=10).stdout
        model = next((ln.split(":", 1)[1].strip() for ln in out.splitlines() if ln.startswith("Model name")), model)
    except (OSError, subprocess.SubprocessError):
        pass
    return {
        "cpu": model,
        "cores": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "capability": torch.backends.cpu.get_cpu_capability(),
        "bf16_native": cpu_bf16(),
        "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY", "(default)"),
        "loadavg": loadavg(),
    }
