"""What the GPU tests (tests/e2e/test_gpu.py) check about one run, kept device-agnostic so CI runs the same checks on
the CPU (tests/unit/train/test_gpu_helpers.py): a real ``loop.run`` on ``device`` with the student and teacher it built
in hand, its losses finite and falling within each stage, its weights fp32 (the master weights under bf16 autocast),
the dtype its layers actually computed in, and the exported student re-scored on the CPU against the dev score the run
reported."""

from __future__ import annotations

import math
import os
import random
import shutil

import torch

from raydistill.config.schema import DistillConfig, RunConfig, StudentConfig, TrainConfig
from tests.conftest import sentence

METHODS = ("kd", "distilbert", "tinybert", "pkd", "two_stage", "minilm", "finetune")
DISTILL = {
    "kd": {"alpha": 0.5, "temperature": 2.0},
    "distilbert": {"alpha": 0.5, "alpha_cos": 1.0},
    "pkd": {"alpha": 0.5, "beta": 10.0, "mapping": "skip"},
    "tinybert": {"mapping": "uniform"},
    "two_stage": {"mapping": "top"},
    "minilm": {"version": 2, "temperature": 2.0, "alpha": 0.5},
    "finetune": {},
}


def method_cfg(
    method: str,
    teacher: str,
    data_dir: str,
    *,
    epochs: int = 4,
    use_gpu: bool = False,
    cache: str | None = None,
    batch_size: int = 16,
) -> RunConfig:
    """A tiny run of ``method`` on the SST-2 fixture: every epoch sees the whole training set (no step cap) at a
    learning rate a tiny random student learns at, so its loss falls from epoch to epoch."""
    init = "pretrained" if method == "finetune" else ("slice" if method == "minilm" else "random")
    student = StudentConfig(layers=2, hidden=32, intermediate=64, heads=2, init=init)
    return RunConfig(
        task="sst2",
        teacher=teacher,
        data_dir=data_dir,
        student=student,
        distill=DistillConfig(method=method, **DISTILL[method]),
        teacher_cache=cache,
        train=TrainConfig(epochs=epochs, batch_size=batch_size, max_length=64, lr=1e-3, use_gpu=use_gpu),
    ).validate()


class Captured:
    """``loop.run`` with what it built kept: the student and teacher, the dtypes its student's first linear layer
    computed in while training, every report, the log, and a copy of the best student of the last report."""

    def __init__(self, monkeypatch, out_dir: str):
        import raydistill.train.objective as objective

        self.student = self.teacher = None
        self.train_dtypes: set = set()
        self.reports: list[dict] = []
        self.logs: list[str] = []
        self.best_dir = os.path.join(out_dir, "best_student")
        build = objective.build_objective

        def capture(cfg, **kw):
            obj, student, teacher, tok = build(cfg, **kw)
            self.student, self.teacher = student, teacher
            lin = next(m for m in student.modules() if isinstance(m, torch.nn.Linear))
            lin.register_forward_hook(lambda m, i, o: self.train_dtypes.add(o.dtype) if m.training else None)
            return obj, student, teacher, tok

        monkeypatch.setattr(objective, "build_objective", capture)

    def report(self, metrics: dict, ckpt_dir: str | None) -> None:
        self.reports.append(dict(metrics))
        if ckpt_dir:  # the loop deletes its checkpoint after the report: keep the run's result (best student)
            shutil.rmtree(self.best_dir, ignore_errors=True)
            shutil.copytree(os.path.join(ckpt_dir, "best_student"), self.best_dir)

    def run(self, cfg: RunConfig, device) -> dict:
        from raydistill.teacher.cache import open_cache
        from raydistill.train.loop import Context, run

        return run(cfg, Context(device=device, report=self.report, log=self.logs.append, open_cache=open_cache))


def falling_per_stage(reports: list[dict]) -> dict[str, tuple[float, float]]:
    """Each stage's (first, last) epoch mean training loss, for stages of two epochs or more."""
    by_stage: dict[str, list[float]] = {}
    for m in reports:
        by_stage.setdefault(m["stage"], []).append(m["train_loss"])
    return {st: (v[0], v[-1]) for st, v in by_stage.items() if len(v) >= 2}


def check_run(cap: Captured, cfg: RunConfig, device, data_dir: str, want_dtype) -> dict:
    """The checks of one end-to-end run; returns the last report."""
    from raydistill.train.saved import evaluate_dir

    assert len(cap.reports) == cfg.train.epochs
    for m in cap.reports:
        losses = {k: v for k, v in m.items() if k.startswith("train_") and k.endswith("loss")}
        assert losses and all(math.isfinite(v) for v in losses.values()), losses
    stages = falling_per_stage(cap.reports)
    assert stages, "every stage had a single epoch: nothing to compare"
    for st, (first, last) in stages.items():
        assert last < first, f"stage {st}: training loss did not fall ({first:.4g} -> {last:.4g})"
    params = list(cap.student.parameters())
    assert all(p.dtype == torch.float32 for p in params), "the master weights must stay fp32"
    assert all(p.device.type == device.type for p in params)
    assert cap.train_dtypes == {want_dtype}, cap.train_dtypes  # bf16 autocast really ran (or fp32 where not native)
    last = cap.reports[-1]
    # the exported student (the best epoch, chosen on val) re-scored on the CPU: the dev score the run reported
    again = evaluate_dir(cap.best_dir, cfg.task, data_dir, max_length=cfg.train.max_length)
    n_dev = dev_size(data_dir)
    assert abs(again["eval_accuracy"] - last["best_eval_accuracy"]) <= 1 / n_dev + 1e-9, (again, last)
    return last


def dev_size(data_dir: str) -> int:
    with open(os.path.join(data_dir, "SST-2", "dev.tsv")) as f:
        return sum(1 for _ in f) - 1


def write_sst2(root: str, n_train: int, n_dev: int, seed: int = 0) -> str:
    """A learnable SST-2 folder (the label follows a sentiment word) of any size, in the GLUE layout."""
    rng = random.Random(seed)
    d = os.path.join(root, "SST-2")
    os.makedirs(d, exist_ok=True)
    for split, n in (("train", n_train), ("dev", n_dev)):
        rows = ["sentence\tlabel"]
        for _ in range(n):
            y = rng.randint(0, 1)
            rows.append(f"{sentence(rng, y)} \t{y}")
        with open(os.path.join(d, f"{split}.tsv"), "w") as f:
            f.write("\n".join(rows) + "\n")
    return root
