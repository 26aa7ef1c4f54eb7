"""The teacher's fine-tune (``teacher/fit.py``): its budget in a sweep, its device, what its run logs."""

from __future__ import annotations

import threading
import time

import pytest
import torch

from raydistill.config.schema import RunConfig, TrainConfig


def test_in_sweep_teacher_has_its_own_budget(monkeypatch, tmp_path):
    from raydistill.config.schema import RunConfig
    from raydistill.teacher import fit

    seen = {}
    monkeypatch.setattr(fit, "finetune", lambda cfg, out, **kw: seen.setdefault("cfg", cfg) and {})
    # preflight imported (by the first patch) before has_task_head is patched: a module that imports it by name at
    # load must not keep the stand-in after this test
    monkeypatch.setattr("raydistill.train.preflight.teacher_config", lambda t: None)
    monkeypatch.setattr("raydistill.models.heads.has_task_head", lambda *a: False)
    base = RunConfig.from_dict(
        {"task": "sst2", "teacher": "enc", "train": {"max_steps": 60, "train_limit": 1000, "epochs": 4, "lr": 1e-4}}
    )
    fit.prepare_teacher(base, str(tmp_path), None, lambda m: None, epochs=3, lr=2e-5)
    t = seen["cfg"].train
    assert (t.max_steps, t.train_limit, t.epochs, t.lr) == (0, 0, 3, 2e-5)


@pytest.mark.parametrize("has_cuda", [False, True])
def test_in_sweep_teacher_trains_on_the_gpu_only_where_this_process_has_one(
    has_cuda, tiny_teacher, glue_dir, tmp_path, monkeypatch
):
    """A --use-gpu sweep fine-tunes its teacher on the driver's GPU; a driver without one (a joined cluster's head)
    fine-tunes on its CPU rather than refusing mid-sweep."""
    import raydistill.teacher.fit as ft

    seen = {}
    monkeypatch.setattr(ft, "finetune", lambda cfg, out, **kw: seen.setdefault("cfg", cfg) and {})
    monkeypatch.setattr(torch.cuda, "is_available", lambda: has_cuda)
    base = RunConfig(
        task="sst2",
        teacher=tiny_teacher("base"),
        data_dir=glue_dir,
        train=TrainConfig(use_gpu=True, max_steps=6, train_limit=50),
    )
    ft.prepare_teacher(base, str(tmp_path), None, lambda m: None, epochs=1)
    t = seen["cfg"].train
    assert t.use_gpu is has_cuda and (t.max_steps, t.train_limit, t.num_workers) == (0, 0, 1)


def test_a_finetune_run_logs_the_precision_that_ran(tmp_path, tiny_teacher, glue_dir):
    """The teacher's fine-tune run said ``bf16: True`` and nothing of what ran: on a CPU without native bf16 it ran
    fp32 (issue 48 item 6). Its params now carry the effective precisions, as a distillation run's do."""
    from raydistill.teacher.fit import ResumeRecord
    from raydistill.train.precision import effective
    from tests.unit.train.test_loop import cfg_for

    class Recorder:
        def start_run(self, name, params, tags=None, parent_run_id=None):
            self.params = params
            return "run"

    cfg = cfg_for("sst2", tiny_teacher("classification", 2), glue_dir, "finetune", epochs=1)
    tracker = Recorder()
    ResumeRecord(str(tmp_path / "out"), "fp").open_run(tracker, cfg, None, print)  # type: ignore[arg-type]
    assert str(tracker.params["bf16"]) == "True"  # what was asked, still logged
    assert {k: tracker.params[k] for k in ("student_step_precision", "teacher_precision")} == effective(cfg.train)


def test_a_second_fine_tune_into_the_same_folder_waits_for_the_first(tmp_path):
    """Two sweeps whose teachers share a folder: each once removed the other's live OUTPUT.resume as stale and
    published its weights under its own fingerprint. One fine-tune at a time into a folder on a machine."""
    from raydistill.teacher import fit

    out = str(tmp_path / "teacher")
    said, order = [], []
    with fit._alone(out, said.append):

        def later():
            with fit._alone(out, said.append):
                order.append("second")

        second = threading.Thread(target=later)
        second.start()
        deadline = time.monotonic() + 30
        while not said and time.monotonic() < deadline:  # until the second has found the folder taken
            time.sleep(0.05)
        order.append("first")  # the second is still waiting
    second.join(timeout=10)
    assert order == ["first", "second"]
    assert said == [f"another fine-tune is writing {out}: waiting for it to end"]
    with fit._alone(str(tmp_path / "other"), said.append):  # another folder: not waited for
        pass
    assert len(said) == 1
