"""The teacher-output cache (``teacher/cache.py``) as the loop reads it: the same losses as the live teacher, its size
budget, layers added later."""

from __future__ import annotations

import dataclasses
import fcntl
import json
import os
import shutil

import pytest

from raydistill.teacher.cache import open_cache
from raydistill.train.loop import Context, run
from tests.unit.train.test_loop import KO_LABELS, cfg_for, run_local


@pytest.mark.parametrize(
    "task,kind,method,extra",
    [
        ("sst2", "classification", "pkd", {"alpha": 0.5, "beta": 100.0, "mapping": "skip"}),
        ("stsb", "regression", "kd", {"alpha": 0.5}),
        ("klue_ner", "token", "kd", {"alpha": 0.7, "temperature": 2.0}),
        ("korquad", "qa", "two_stage", {"stage": "pred"}),
        ("sst2", "classification", "tinybert", {"mapping": "uniform"}),  # full hidden states + attention scores
        ("klue_ner", "token", "two_stage", {"mapping": "skip"}),
        ("korquad", "qa", "two_stage", {"mapping": "last", "stage": "intermediate"}),
        ("mrpc", "classification", "distilbert", {"alpha": 0.5, "alpha_cos": 1.0}),  # full last hidden state
    ],
)
def test_teacher_cache_gives_the_same_losses(task, kind, method, extra, tiny_teacher, glue_dir, korean_dir, tmp_path):
    """A run served from the teacher cache matches the live-teacher run within fp16 rounding."""

    n = {"classification": 2, "regression": 1, "token": len(KO_LABELS), "qa": 2}[kind]
    teacher = tiny_teacher(kind, n, dropout=0.0, **({"label_names": KO_LABELS} if kind == "token" else {}))
    cfg = cfg_for(task, teacher, korean_dir if kind in ("token", "qa") else glue_dir, method, epochs=2, **extra)
    live, _ = run_local(cfg)
    cached_cfg = cfg.replace(teacher_cache=str(tmp_path / "cache"))
    cached, _ = run_local(cached_cfg)
    again, _ = run_local(cached_cfg)  # second run reads the cache built by the first
    assert len(os.listdir(tmp_path / "cache")) == 2  # one cache folder + its lock file
    for k in live:
        if k.startswith("train_") and k != "train_examples_per_s":
            assert cached[k] == pytest.approx(live[k], rel=2e-3, abs=1e-4), k
            assert again[k] == pytest.approx(cached[k], rel=1e-6, abs=1e-7), k


def test_full_sequence_cache_budget(tiny_teacher, glue_dir, tmp_path):
    """Within budget one teacher pass caches every layer, so other mappings reuse it; over budget the stage falls
    back to the live teacher (same losses either way) and only logits + [CLS] are stored."""

    teacher = tiny_teacher("classification", 2, dropout=0.0)
    cfg = cfg_for("sst2", teacher, glue_dir, "tinybert", epochs=1, mapping="uniform", stage="intermediate")
    logs = []

    def run_logged(c):
        logs.clear()
        return run(c, Context(log=logs.append, open_cache=open_cache))

    live = run_logged(cfg)
    cached = run_logged(cfg.replace(teacher_cache=str(tmp_path / "big")))
    assert any("full states of" in m for m in logs)
    (key,) = [d for d in os.listdir(tmp_path / "big") if not d.endswith(".lock")]
    meta = json.load(open(tmp_path / "big" / key / "meta.json"))
    assert meta["hidden"] == list(range(5)) and meta["att"] == list(range(4))  # tiny teacher: 4 layers, all cached
    other = cfg.replace(teacher_cache=str(tmp_path / "big"), distill=dataclasses.replace(cfg.distill, mapping="last"))
    run_logged(other)
    assert not any("computing" in m for m in logs)  # a different mapping is served by the same pass
    for k in ("train_emb", "train_att", "train_hidden", "train_loss"):
        assert cached[k] == pytest.approx(live[k], rel=2e-3, abs=1e-4), k

    assert any("the teacher stays off the device" in m for m in logs)
    small = run_logged(cfg.replace(teacher_cache=str(tmp_path / "small"), teacher_cache_gb=1e-9))
    assert any("over the 1e-09 GiB budget: the live teacher serves that stage" in m for m in logs)
    assert not any("the teacher stays off the device" in m for m in logs)
    (key,) = [d for d in os.listdir(tmp_path / "small") if not d.endswith(".lock")]
    meta = json.load(open(tmp_path / "small" / key / "meta.json"))
    assert meta["hidden"] == [] and meta["att"] == [] and set(meta["arrays"]) == {"cls", "pred", "offsets"}
    for k in ("train_emb", "train_att", "train_hidden", "train_loss"):
        assert small[k] == pytest.approx(live[k], rel=1e-5), k


def test_a_disk_without_room_gets_no_full_sequence_states(tiny_teacher, glue_dir, tmp_path, monkeypatch):
    """A budget that holds every layer on a disk that does not (``DISK_RESERVE`` kept free): nothing full-sequence is
    written, one line says the disk refused and how to fix it, and the live teacher serves that stage with its own
    losses; with room on the disk the same budget caches every layer."""
    from raydistill.teacher import cache

    teacher = tiny_teacher("classification", 2, dropout=0.0)
    cfg = cfg_for("sst2", teacher, glue_dir, "tinybert", epochs=1, mapping="uniform", stage="intermediate")
    logs: list[str] = []
    live = run(cfg, Context(log=logs.append, open_cache=open_cache))
    run_local(cfg.replace(teacher_cache=str(tmp_path / "all")))  # every layer: measures the array sizes
    (key,) = [d for d in os.listdir(tmp_path / "all") if not d.endswith(".lock")]
    size = {f.split(".")[0]: os.path.getsize(tmp_path / "all" / key / f) for f in os.listdir(tmp_path / "all" / key)}
    # the base arrays fit; a single hidden-state array does not
    free = {"bytes": cache.DISK_RESERVE + size["cls"] + size["hidden_0"] // 2}
    monkeypatch.setattr(cache, "free_bytes", lambda folder: free["bytes"])
    logs.clear()
    full = cfg.replace(teacher_cache=str(tmp_path / "c"), teacher_cache_gb=32.0)
    tight = run(full, Context(log=logs.append, open_cache=open_cache))
    (line,) = [m for m in logs if "the live teacher serves that stage" in m]
    said = "GiB free beside the cache's other arrays, and a build leaves at least 2 GiB free"
    assert f"but {tmp_path / 'c'} has 2.00 {said}" in line
    assert line.endswith("(free space there, or put the cache on a larger disk with --teacher-cache)")
    (key,) = [d for d in os.listdir(tmp_path / "c") if not d.endswith(".lock")]
    meta = json.load(open(tmp_path / "c" / key / "meta.json"))
    assert meta["hidden"] == [] and meta["att"] == [] and set(meta["arrays"]) == {"cls", "pred", "offsets"}
    for k in ("train_emb", "train_att", "train_hidden", "train_loss"):
        assert tight[k] == pytest.approx(live[k], rel=1e-5), k
    free["bytes"] = 64 * 2**30  # room made: the next run adds every layer beside the base arrays
    run(full, Context(log=logs.append, open_cache=open_cache))
    meta = json.load(open(tmp_path / "c" / key / "meta.json"))
    assert meta["hidden"] == list(range(5)) and meta["att"] == list(range(4))


def test_a_disk_without_room_for_the_logits_gets_no_cache(tiny_teacher, glue_dir, tmp_path, monkeypatch):
    """A disk that cannot take even the logits and [CLS] states of a new cache with ``DISK_RESERVE`` left free: no
    cache is written, one line says so and how to fix it, and the run trains on the live teacher's outputs."""
    from raydistill.teacher import cache

    teacher = tiny_teacher("classification", 2, dropout=0.0)
    cfg = cfg_for("sst2", teacher, glue_dir, "pkd", epochs=1, alpha=0.5, beta=100.0, mapping="skip")
    live, _ = run_local(cfg)
    monkeypatch.setattr(cache, "free_bytes", lambda folder: cache.DISK_RESERVE + 1)
    logs: list[str] = []
    tight = run(cfg.replace(teacher_cache=str(tmp_path / "c")), Context(log=logs.append, open_cache=open_cache))
    (line,) = [m for m in logs if m.startswith("teacher cache:")]
    said = "GiB free, and a build leaves at least 2 GiB free: no cache, the live teacher runs every step"
    assert f"but {tmp_path / 'c'} has 2.00 {said}" in line
    assert line.endswith("(free space there, or put the cache on a larger disk with --teacher-cache)")
    assert [f for f in os.listdir(tmp_path / "c") if not f.endswith(".lock")] == []
    for k in live:
        if k.startswith("train_") and k != "train_examples_per_s":
            assert tight[k] == pytest.approx(live[k], rel=1e-5), k


def test_cache_adds_missing_layers_later(tiny_teacher, glue_dir, tmp_path):
    """A budget that fits this run's layers but not all of them caches just those; a later run with another mapping
    adds its missing layers beside them (nothing rewritten) and gets the live teacher's losses."""

    teacher = tiny_teacher("classification", 2, dropout=0.0)
    cfg = cfg_for("sst2", teacher, glue_dir, "tinybert", epochs=1, mapping="uniform", stage="intermediate")
    run_local(cfg.replace(teacher_cache=str(tmp_path / "all")))  # every layer: measures the array sizes
    (key,) = [d for d in os.listdir(tmp_path / "all") if not d.endswith(".lock")]
    size = {f.split(".")[0]: os.path.getsize(tmp_path / "all" / key / f) for f in os.listdir(tmp_path / "all" / key)}
    base = size["cls"] + size["pred"] + size["offsets"] + size["meta"]
    h, a = size["hidden_0"], size["att_0"]
    # 2-layer student on the 4-layer teacher: uniform needs hidden 0,2,4 + scores of layers 2,4 (0-based 1,3);
    # bottom needs hidden 0,1,2 + scores 0,1, i.e. one more hidden and one more score array
    budget = base + 3 * h + 2 * a + size["att_offsets"] + (h + a) + 4096
    assert 5 * h + 4 * a + size["att_offsets"] + base > budget  # not everything fits
    c = cfg.replace(teacher_cache=str(tmp_path / "part"), teacher_cache_gb=budget / 2**30)
    run_local(c)
    meta = json.load(open(tmp_path / "part" / key / "meta.json"))
    assert meta["hidden"] == [0, 2, 4] and meta["att"] == [1, 3]
    first = os.stat(tmp_path / "part" / key / "hidden_2.npy").st_ino
    bottom = dataclasses.replace(cfg.distill, mapping="bottom")
    live, _ = run_local(cfg.replace(distill=bottom))
    cached, _ = run_local(c.replace(distill=bottom))
    meta = json.load(open(tmp_path / "part" / key / "meta.json"))
    assert meta["hidden"] == [0, 1, 2, 4] and meta["att"] == [0, 1, 3]
    assert os.stat(tmp_path / "part" / key / "hidden_2.npy").st_ino == first  # not rewritten
    for k in ("train_emb", "train_att", "train_hidden", "train_loss"):
        assert cached[k] == pytest.approx(live[k], rel=2e-3, abs=1e-4), k


def test_a_build_killed_mid_way_leaves_nothing_behind_the_next_build(tiny_teacher, glue_dir, tmp_path):
    """A build killed with no cleanup (SIGKILL, a machine's end) leaves its temporary folder and half-written arrays,
    gigabytes on a large set: the next build of that key removes them (under its lock), and another key's when no one
    builds that key now (its lock free); a key being built keeps its folder, and what is not a cache's stays."""
    teacher = tiny_teacher("classification", 2, dropout=0.0)
    cfg = cfg_for("sst2", teacher, glue_dir, "kd", epochs=1).replace(teacher_cache=str(tmp_path / "c"))
    run_local(cfg)
    (key,) = [d for d in os.listdir(tmp_path / "c") if not d.endswith(".lock")]
    shutil.rmtree(tmp_path / "c" / key)  # as if the first build had been killed
    killed = tmp_path / "c" / f".tmp-{key}-x1"
    killed.mkdir()
    (killed / "cls.tmp.npy").write_bytes(b"0" * 1024)
    building, abandoned = "0" * 20, "1" * 20  # other keys: one being built now, one a set never built again
    for k in (building, abandoned):
        (tmp_path / "c" / f".tmp-{k}-x2").mkdir()
        (tmp_path / "c" / f"{k}.lock").touch()
        (tmp_path / "c" / k).mkdir()
        (tmp_path / "c" / k / "hidden_3.tmp.npy").write_bytes(b"0")  # layers being added
    users = [tmp_path / "c" / ".tmp-notakey-x3", tmp_path / "c" / f".tmp-{'2' * 20}-x4"]  # no lock file beside
    for u in users:
        u.mkdir()
    with open(tmp_path / "c" / f"{building}.lock") as held:
        fcntl.flock(held, fcntl.LOCK_EX)  # as the building process holds it
        run_local(cfg)
    assert not killed.exists() and not (tmp_path / "c" / f".tmp-{abandoned}-x2").exists()
    assert not (tmp_path / "c" / abandoned / "hidden_3.tmp.npy").exists()
    assert (tmp_path / "c" / f".tmp-{building}-x2").is_dir() and (
        tmp_path / "c" / building / "hidden_3.tmp.npy"
    ).exists()
    assert all(u.is_dir() for u in users)
    for k in (building, abandoned):
        shutil.rmtree(tmp_path / "c" / k)
        os.remove(tmp_path / "c" / f"{k}.lock")
    shutil.rmtree(tmp_path / "c" / f".tmp-{building}-x2")
    for u in users:
        u.rmdir()
    assert sorted(os.listdir(tmp_path / "c")) == sorted([key, f"{key}.lock"])

    # layers being added when it was killed: their half-written arrays inside the cache folder, at their full size
    # (a memory map's file is made whole, then filled): removed before the budget is reckoned, or the layers would
    # never fit again and the arrays never go
    with open(tmp_path / "c" / key / "hidden_9.tmp.npy", "wb") as f:
        f.truncate(64 * 2**30)  # sparse: 64 GiB said, nothing written
    other = "3" * 20  # another key's killed addition, with no temporary folder beside its lock
    (tmp_path / "c" / other).mkdir()
    (tmp_path / "c" / other / "att_2.tmp.npy").write_bytes(b"0")
    (tmp_path / "c" / f"{other}.lock").touch()
    tiny = cfg.replace(distill=dataclasses.replace(cfg.distill, method="tinybert", mapping="uniform"))
    run_local(tiny)  # adds the full states and scores TinyBERT reads
    assert not [f for f in os.listdir(tmp_path / "c" / key) if f.endswith(".tmp.npy")]
    assert json.load(open(tmp_path / "c" / key / "meta.json"))["hidden"]  # they fit the budget
    assert not os.listdir(tmp_path / "c" / other)


@pytest.mark.parametrize("version", [(1, 0), (2, 0)])
def test_row_file_reads_the_rows_the_memory_map_holds(version, tmp_path):
    """The token-level arrays are read by row ranges with pread (RowFile), not through the map: the same bytes."""
    import numpy as np

    from raydistill.teacher.cache import RowFile

    arr = np.random.default_rng(0).standard_normal((50, 3, 4)).astype(np.float16)
    path = str(tmp_path / "a.npy")
    with open(path, "wb") as f:
        np.lib.format.write_array(f, arr, version=version)
    rows = RowFile(path)
    assert rows.shape == arr.shape and rows.dtype == arr.dtype
    ranges = [(7, 9), (0, 1), (40, 50), (3, 3)]
    assert np.array_equal(rows.take(ranges), np.concatenate([arr[a:b] for a, b in ranges]))
    assert rows.take([]).shape == (0, 3, 4)
    with pytest.raises(OSError, match="ended early"):
        rows.take([(49, 51)])  # past the end: refused, not padded
