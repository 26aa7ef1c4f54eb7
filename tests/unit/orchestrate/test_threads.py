"""A trial keeps to its CPU share: torch threads and the HF tokenizers' Rust (rayon) pool, which otherwise starts a
thread per core of the machine, are sized to the trial's CPUs before it first tokenises — in an in-process sweep
trial (``fit_in_process``) and in a Ray Train worker (``_worker``). No Ray is started here."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from raydistill.orchestrate.resources import THREAD_ENV
from tests.paths import ROOT
from tests.unit.train.test_loop import cfg_for

REPO = ROOT

# the tokenizer pool alone: threads of this process after tokenising batches, less those before (the tokenizer
# loaded, torch imported: every other thread is there already)
POOL = """
import json, os, sys
n, parallel = int(sys.argv[2]), sys.argv[3]
if n:
    from raydistill.orchestrate.resources import confine_threads
    confine_threads(n)
if parallel != "-":
    os.environ["TOKENIZERS_PARALLELISM"] = parallel
import torch
from transformers import AutoTokenizer
tok = AutoTokenizer.from_pretrained(sys.argv[1])
before = len(os.listdir("/proc/self/task"))
for _ in range(3):
    tok(["the movie was really good fun and the plot was great"] * 4000, truncation=True, max_length=32)
print(json.dumps({"pool": len(os.listdir("/proc/self/task")) - before, "torch": torch.get_num_threads(),
                  "rayon": os.environ.get("RAYON_NUM_THREADS")}))
"""


def pool_threads(teacher, n: int, parallel: str = "-") -> dict:
    env = {k: v for k, v in os.environ.items() if k not in (*THREAD_ENV, "TOKENIZERS_PARALLELISM")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))
    p = subprocess.run(
        [sys.executable, "-c", POOL, teacher, str(n), parallel], env=env, capture_output=True, text=True, timeout=300
    )
    assert p.returncode == 0, p.stderr[-3000:]
    return json.loads(p.stdout.strip().splitlines()[-1])


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="counts threads in /proc/self/task")
def test_tokenizer_pool_stays_within_the_trial_cpus(tiny_teacher):
    teacher = tiny_teacher("classification", 2)
    cores = len(os.sched_getaffinity(0))
    free = pool_threads(teacher, 0, "true")  # unconfined: a thread per core, whatever the trial's share
    if cores > 1:
        assert free["pool"] > 1, free  # the measurement sees the pool: the bounds below mean something
    one = pool_threads(teacher, 1)  # a 1-CPU trial: no pool at all
    assert one == {"pool": 0, "torch": 1, "rayon": "1"}
    forced = pool_threads(teacher, 1, "true")  # parallelism forced back on: still at most the trial's one CPU
    assert forced["pool"] <= 1 and forced["torch"] == 1
    two = pool_threads(teacher, 2, "true")
    assert two["pool"] <= 2 and two["torch"] == 2


class Recorded(Exception):
    pass


@pytest.fixture
def seen(monkeypatch):
    """What the loop sees when it starts: the thread variables and torch's thread count (restored afterwards)."""
    import torch

    import raydistill.train.loop

    for k in (*THREAD_ENV, "TOKENIZERS_PARALLELISM"):
        monkeypatch.delenv(k, raising=False)  # restored at teardown
    got = {}

    def run(cfg, ctx):
        got.update(
            {k: os.environ.get(k) for k in (*THREAD_ENV, "TOKENIZERS_PARALLELISM")}, torch=torch.get_num_threads()
        )
        raise Recorded

    monkeypatch.setattr(raydistill.train.loop, "run", run)
    n = torch.get_num_threads()
    yield got
    torch.set_num_threads(n)


def test_in_process_trial_sets_its_threads_before_the_loop(seen, tiny_teacher, glue_dir, tmp_path):
    from raydistill.orchestrate.run import fit_in_process

    cfg = cfg_for("sst2", tiny_teacher("classification", 2), glue_dir, "kd")
    with pytest.raises(Recorded):
        fit_in_process(cfg, run_dir=str(tmp_path / "r"), threads=1, resume=False, on_epoch=lambda m: None)
    assert seen == {
        "RAYON_NUM_THREADS": "1",
        "OMP_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
        "TOKENIZERS_PARALLELISM": "false",
        "torch": 1,
    }


def test_ray_train_worker_sets_its_threads_before_the_loop(seen, monkeypatch, tiny_teacher, glue_dir):
    import ray.train
    import ray.train.torch
    import torch

    from raydistill.orchestrate import run

    class Ctx:
        def get_world_rank(self):
            return 0

        def get_world_size(self):
            return 1

    monkeypatch.setattr(ray.train, "get_context", Ctx)
    monkeypatch.setattr(ray.train, "get_checkpoint", lambda: None)
    monkeypatch.setattr(ray.train.torch, "get_device", lambda: torch.device("cpu"))
    cfg = cfg_for("sst2", tiny_teacher("classification", 2), glue_dir, "kd")
    with pytest.raises(Recorded):
        run._worker({"cfg": cfg, "threads": 2})  # the frozen RunConfig itself (no dict round trip)
    assert seen == {
        "RAYON_NUM_THREADS": "2",
        "OMP_NUM_THREADS": "2",
        "MKL_NUM_THREADS": "2",
        "TOKENIZERS_PARALLELISM": None,
        "torch": 2,
    }
