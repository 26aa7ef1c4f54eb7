"""The benchmark scripts run end to end on tiny models (``--smoke``) and print their ratio line.

The numbers of a smoke run mean nothing (tiny models, one step); docs/benchmarks/ has the full-size runs.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.paths import ROOT

NUM = r"([0-9.]+(?:e[-+][0-9]+)?|nan|inf)"


def run_script(name: str, tmp_path, *args) -> tuple[str, dict]:
    out_json = tmp_path / f"{name}.json"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    proc = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / f"{name}.py"), "--smoke", "--json", str(out_json), *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    lines = [ln for ln in proc.stdout.splitlines() if ln.strip()]
    return lines[-1], json.loads(out_json.read_text())


# The two slowest smokes (whole sweeps and the GPU suite's parts, one command after another, each mostly keeping one
# core busy) start together when the module starts, each a process group of its own with its own folders and Ray,
# its output in files; their tests wait for them and check what they left. On 2 cores the module then takes about
# the longest smoke's time plus the rest, not their sum. Only the selected tests' smokes start.
def _sweep_throughput_argv(out: Path) -> list[str]:
    script = str(ROOT / "benchmarks" / "sweep_throughput.py")
    return [sys.executable, script, "--smoke", "--trials", "1", "--epochs", "1", "--json", str(out / "tp.json")]


def _gpu_suite_argv(out: Path) -> list[str]:
    script = str(ROOT / "benchmarks" / "gpu_suite.py")
    # --before-limit-s 0: no second sweep on Ray Train (what the suite does with it is test_gpu_suite.py's, a sweep
    # with --ray-train-trials test_sweep_throughput_smoke's baseline)
    argv = [sys.executable, script, "--smoke", "--num-samples", "1", "--before-limit-s", "0"]
    return [*argv, "--out", str(out / "gpu-suite")]


BACKGROUND = {"test_sweep_throughput_smoke": _sweep_throughput_argv, "test_gpu_suite_smoke": _gpu_suite_argv}


@pytest.fixture(scope="module", autouse=True)
def background(request, tmp_path_factory):
    """Test name → (its folder, its process) for each selected test of ``BACKGROUND``, started at once."""
    selected = {item.originalname for item in request.session.items if item.module is request.module}
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    started = {}
    for name in sorted(selected & set(BACKGROUND)):
        out = tmp_path_factory.mktemp(name.removeprefix("test_"))
        with open(out / "stdout.txt", "w") as so, open(out / "stderr.txt", "w") as se:
            p = subprocess.Popen(BACKGROUND[name](out), cwd=ROOT, env=env, stdout=so, stderr=se, start_new_session=True)
            started[name] = (out, p)
    yield started
    for _, p in started.values():  # a test that failed before waiting: nothing of its smoke outlives the module
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()


def finished(background: dict, name: str, timeout: float) -> tuple[Path, subprocess.CompletedProcess]:
    """The background smoke of test ``name`` once it ended: its folder, and its process as ``subprocess.run`` gives
    it."""
    out, p = background[name]
    rc = p.wait(timeout=timeout)
    done = subprocess.CompletedProcess(p.args, rc, (out / "stdout.txt").read_text(), (out / "stderr.txt").read_text())
    return out, done


def test_step_speed_smoke(tmp_path):
    has_tb = True
    try:
        import textbrewer  # noqa: F401
    except ImportError:
        has_tb = False
    last, res = run_script("step_speed", tmp_path)
    m = re.fullmatch(rf"RATIO ours/naive={NUM} ours/textbrewer={NUM} loss_rel_diff={NUM}", last)
    assert m, last
    assert float(m[1]) > 0 and float(m[3]) < 0.01
    assert (float(m[2]) > 0) == has_tb
    # the three implementations compute the same embedding and hidden losses from the same starting weights
    assert all(v < 1e-4 for v in res["summary"]["emb_hidden_rel_diff_vs_ours_fp32"].values())
    assert set(res["results"]) == {"ours", "ours_fp32", "naive"} | ({"textbrewer"} if has_tb else set())


def test_latency_smoke(tmp_path):
    pytest.importorskip("onnxruntime")
    last, res = run_script("latency", tmp_path)
    # the last line compares like with like: PyTorch teacher / PyTorch student, ORT teacher / ORT student
    m = re.fullmatch(
        rf"RATIO b1 teacher/student={NUM} teacher_ort/student_ort={NUM} "
        rf"b4 teacher/student={NUM} teacher_ort/student_ort={NUM}",
        last,
    )
    assert m, last
    assert all(float(x) > 0 for x in m.groups())
    assert res["onnx_max_abs_diff"] < 1e-4
    b1, ms = res["summary"]["b1"], res["latency_ms"]["b1"]
    assert b1["same_runtime"]["teacher_ort/student_ort_int8"] == ms["teacher_ort"] / ms["student_ort_int8"]
    assert b1["same_runtime"]["teacher_ort_int8/student_ort_int8"] == ms["teacher_ort_int8"] / ms["student_ort_int8"]
    assert b1["cross_runtime"]["teacher/student_ort_int8"] == ms["teacher"] / ms["student_ort_int8"]
    # nothing that mixes the PyTorch teacher with an ORT student is filed as same-runtime
    assert not any(k.startswith("teacher/student_ort") for k in b1["same_runtime"])


# benchmark (d), benchmarks/gpu.py, runs every code path on CPU with tiny models: the MFU step for both TinyBERT stages
# and a PKD student at the teacher's width, the teacher's cache pass, and packed trials whose teacher logits come from
# one shared cache (their aggregate MFU). The GPU suite's smoke runs it once per layout and checks this of each run
# (test_gpu_suite_smoke): the suite's run is the one the tests make, not a third of their own
GPU_RESULT = (
    rf"RESULT mfu_intermediate={NUM} mfu_pred={NUM} mfu_pkd={NUM} mfu_cache_pass={NUM} "
    rf"pack_1={NUM} mfu_pack_1={NUM} pack_2={NUM} mfu_pack_2={NUM}"
)


def check_gpu_benchmark(log: Path, results: dict[str, Path]) -> None:
    """gpu.py's smoke, once per layout: its last stdout line (in the suite's log, one per run) and its JSON."""
    lines = [ln for ln in log.read_text().splitlines() if ln.startswith("RESULT ")]
    assert len(lines) == len(results), lines
    for last in lines:
        m = re.fullmatch(GPU_RESULT, last)
        assert m, last
        assert all(float(x) > 0 for x in m.groups())
    for path in results.values():
        res = json.loads(path.read_text())
        assert res["packing"]["2"]["trials"] == 2 and res["mfu_pred"]["step_dtype"] == "fp32"  # bf16 on GPU only
        assert res["mfu_pkd"]["student"] == "2L-64-128" and res["cache_pass"]["rows"] == 32


def test_group_by_length_smoke(tmp_path):
    """benchmarks/group_by_length.py: four real one-epoch runs (ABBA) and the padding each batch order costs."""
    last, res = run_script("group_by_length", tmp_path)
    m = re.fullmatch(rf"RATIO plain/grouped train_s={NUM} tokens={NUM}", last)
    assert m, last
    assert float(m[1]) > 0 and float(m[2]) > 1.2  # the synthetic pairs vary in length: grouping must cut padding
    assert [r["grouped"] for r in res["runs"]] == [False, True, True, False]
    plain, grouped = res["token_slots"]["False"], res["token_slots"]["True"]
    assert plain[1] == grouped[1] and grouped[0] < plain[0]  # the same real tokens in fewer padded slots
    assert [b for b, sec in res["scoring"]] == [False, True, True, False] and all(s > 0 for _, s in res["scoring"])


def test_flop_count_matches_hand_count():
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from gpu import encoder_flops_per_token, step_flops_per_token

    # BERT-base at length 128: 12 · (2 · (4·768² + 2·768·3072) + 4·128·768) = 174,587,904 FLOPs per token
    assert encoder_flops_per_token(12, 768, 3072, 128) == 12 * (2 * (4 * 768**2 + 2 * 768 * 3072) + 4 * 128 * 768)
    assert encoder_flops_per_token(12, 768, 3072, 128) == 174_587_904
    sz = dict(t_layers=12, t_hidden=768, t_inter=3072, s_layers=4, s_hidden=312, s_inter=1200, length=128)
    student = 4 * (2 * (4 * 312**2 + 2 * 312 * 1200) + 4 * 128 * 312)
    assert step_flops_per_token(sz, "pred", 5) == 174_587_904 + 3 * student
    assert step_flops_per_token(sz, "intermediate", 5) == 174_587_904 + 3 * (student + 5 * 2 * 312 * 768)


@pytest.mark.slow
def test_sweep_throughput_smoke(background):
    """Two real sweep commands (the old defaults, the new ones) on tiny models, at the tiniest (1 trial of 1 epoch
    each, no labels-only control: the script sets search.control=false): the script's plumbing (its two commands, the
    phases it reads back from MLflow, its JSON and ratio line). That the default runs as many trials at once as the
    CPUs hold is test_concurrency.py's. Started with the module (``background``)."""
    out, proc = finished(background, "test_sweep_throughput_smoke", timeout=1500)
    out_json = out / "tp.json"
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    last = [ln for ln in proc.stdout.splitlines() if ln.strip()][-1]
    m = re.match(rf"RATIO default/baseline={NUM}", last)
    assert m and float(m[1]) > 0, last
    rows = {r["label"]: r for r in json.loads(out_json.read_text())["rows"]}
    assert rows["baseline"]["concurrency"] == 1 and rows["baseline"]["trials"] == rows["default"]["trials"] == 1
    assert all(r["fixed_cost_s"] > 0 and r["time_train_s"] > 0 for r in rows.values())


@pytest.mark.slow
def test_gpu_suite_smoke(background):
    """The GPU suite's four parts on the CPU (issues 25, 40): the GPU tests (skipped here), the quality run — a tiny
    encoder fine-tuned as the teacher, a 1-trial pkd_glue sweep, best --export --onnx; not the sweep again with
    --ray-train-trials, a step test_gpu_suite.py checks with the suite's commands faked —, gpu.py's smoke per layout
    (benchmark (d) itself checked: ``check_gpu_benchmark``), and the augment run (recipe + 2 copies vs recipe vs
    labels only, 1 seed) — results in --out. One trial per sweep is the suite's plumbing at its tiniest, without the
    labels-only control (--smoke sets search.control=false): several trials at once, choosing among them and the
    control are test_concurrency.py's, test_sweep.py's and test_verdict.py's. Started with the module
    (``background``)."""
    folder, proc = finished(background, "test_gpu_suite_smoke", timeout=1200)
    out = folder / "gpu-suite"
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    last = [ln for ln in proc.stdout.splitlines() if ln.strip()][-1]
    assert last.startswith("GPU_SUITE ") and last.endswith("ok=True"), last
    res = json.loads((out / "results.json").read_text())
    t = res["tests"]
    assert t["ok"] and t["tests"] >= 10 and (out / "tests" / "junit.xml").is_file()
    if not res["machine"]["gpu"]:
        assert t["skipped"] == t["tests"]  # no CUDA: every GPU test skips, and CI stays green
    m = res["mfu"]
    assert m["ok"] and m["mfu_intermediate"] > 0 and m["mfu_pred"] > 0 and set(m["packing"]) == {"1", "2"}
    assert set(m["layouts"]) == {"padded", "unpadded"} and all(v["mfu_pkd"] > 0 for v in m["layouts"].values())
    check_gpu_benchmark(out / "mfu" / "gpu.log", {k: out / "mfu" / f"gpu-{k}.json" for k in m["layouts"]})
    q = res["quality"]
    assert q["ok"] and q["teacher"]["best_eval_accuracy"] >= 0 and (out / "quality" / "teacher").is_dir()
    assert q["sweep"]["trials"] == 1 and q["sweep"]["errors"] == 0 and q["sweep"]["trials_per_hour"] > 0
    assert q["sweep"]["fixed_cost_s"] > 0 and "before" not in q
    # the augment part is benchmarks/inits.py --augment (the smoke of inits.py's augmentation, too): the augmented set
    # built once by the product's augment command, the same student trained on it, on the task's rows alone and on
    # labels only, each compared on the same dev rows
    a = res["augment"]["tasks"]["sst2"]
    assert res["augment"]["ok"] and set(a["variants"]) == {"first_k+aug2", "first_k", "labels"}
    assert a["variants"]["first_k+aug2"]["vs_labels"]["verdict"] in ("beats", "ties", "loses to")
    assert a["variants"]["first_k+aug2"]["vs_first_k"]["verdict"] in ("beats", "ties", "loses to")
    steps = json.loads((out / "augment" / "work" / "steps.json").read_text())
    assert sorted(steps) == ["sst2/2L-32/first_k+aug2/42", "sst2/2L-32/first_k/42", "sst2/2L-32/labels/42"] + [
        "sst2/augment/2"
    ]
    aug = steps["sst2/augment/2"]
    assert aug["copies"] == 2 and aug["rows"] == 3 * aug["examples"] > 0  # every kept row and two copies of it
    knobs = json.loads((out / "augment" / "work" / "augmented" / "sst2" / "2" / "augment.json").read_text())
    assert knobs["candidates"] == "embedding" and knobs["model"] == str(out / "augment" / "teachers" / "sst2")
    b = q["best"]
    assert b["metric"] == "best_val_accuracy" and 0 <= b["val"] <= 1 and 0 <= b["dev"] <= 1
    assert b["onnx_max_abs_diff"] < 1e-4 and (out / "quality" / "best" / "model.onnx").is_file()


def _inits(teacher, glue_dir, work, *args, rc=0):
    """One call of benchmarks/inits.py on the tiny SST-2 folder (1 seed, 1 epoch): the process and its last line."""
    cmd = [
        sys.executable,
        str(ROOT / "benchmarks" / "inits.py"),
        "--teacher",
        teacher,
        "--data-dir",
        str(glue_dir),
        "--task",
        "sst2",
        "--seeds",
        "1",
        "--epochs",
        "1",
        "--max-length",
        "32",
        "--batch-size",
        "16",
        "--work",
        str(work),
        *args,
    ]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == rc, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc, (proc.stdout.strip().splitlines() or [""])[-1]


@pytest.mark.slow
def test_inits_benchmark_smoke(tiny_teacher, glue_dir, tmp_path):
    """benchmarks/inits.py: the same narrow student under prune and slice, each run through the product's distill
    command, re-scored on dev, prune compared to slice on the same rows; a second call reruns nothing."""
    teacher = tiny_teacher("classification", 2)
    for _ in range(2):
        proc, last = _inits(teacher, glue_dir, tmp_path / "w", "--shape", "2,16,32,1")
        m = re.fullmatch(rf"INITS task=sst2 shape=2L-16 prune={NUM} slice={NUM} verdicts=(\{{.*\}})", last)
        assert m and json.loads(m[3])["slice"] in ("beats", "ties", "loses to"), last
    steps = json.loads((tmp_path / "w" / "steps.json").read_text())
    assert sorted(steps) == ["sst2/2L-16/prune/42", "sst2/2L-16/slice/42"]
    assert proc.stderr.count("$ raydistill.distill") == 0  # the second call ran nothing again
    res = [json.loads(ln) for ln in (tmp_path / "w" / "inits.jsonl").read_text().splitlines()]
    assert len(res) == 2 and res[0]["prune"]["vs_slice"]["same_seed_diffs"] == [
        res[0]["prune"]["seeds"][0] - res[0]["slice"]["seeds"][0]
    ]
    # the finished runs are found by task, shape, init and seed: another recipe in the same WORK is refused
    proc, _ = _inits(teacher, glue_dir, tmp_path / "w", "--shape", "2,16,32,1", "--temperature", "4", rc=2)
    assert proc.stderr.strip().splitlines() == [
        f"error: --work {tmp_path / 'w'} holds sst2 runs of another recipe (temperature 2 → 4): pass another --work"
    ]


def test_shape_latency_smoke(tiny_teacher):
    """benchmarks/shape_latency.py: the teacher and each student shape timed in one process, ratios to the teacher,
    every shape asked for built and named in the report."""
    teacher = tiny_teacher("classification")
    cmd = [
        sys.executable,
        str(ROOT / "benchmarks" / "shape_latency.py"),
        "--teacher",
        teacher,
        "--shapes",
        "4,32,64,2",
        "2,16,32,2",
        "--rounds",
        "3",
        "--warmup",
        "1",
        "--length",
        "16",
    ]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    last = proc.stdout.strip().splitlines()[-1]
    m = re.fullmatch(rf"SHAPES teacher_ms={NUM} (\{{.*\}})", last)
    assert m, last
    ratios = json.loads(m[2])
    assert set(ratios) == {"4L-32", "2L-16"} and all(r > 0 for r in ratios.values())
    assert re.search(r"4L-32 +0\.\d+M params", proc.stdout) and re.search(r"2L-16 +0\.\d+M params", proc.stdout)


def test_streaming_read_smoke(tiny_teacher, glue_dir, tmp_path):
    """benchmarks/streaming_read.py: a small JSON Lines file made from SST-2 rows, this tree as before and after, each
    phase's seconds, peak growth, opens and bytes read; the file opened twice (head, one pass) and read once."""
    argv = [sys.executable, str(ROOT / "benchmarks" / "streaming_read.py"), "--before", str(ROOT), "--rounds", "1"]
    argv += ["--tokenizer", tiny_teacher("classification", 2), "--glue", str(glue_dir), "--rows", "500"]
    argv += ["--file", str(tmp_path / "f.jsonl")]
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    proc = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    last = proc.stdout.strip().splitlines()[-1]
    assert last.startswith("STREAMREAD ")
    got = json.loads(last.split(" ", 1)[1])
    for tree in ("before", "after"):
        assert got[tree]["rows"]["opens"] == 2 and got[tree]["encoded"]["read_mb"] < 1, got[tree]
        assert list(got[tree])[2:] == ["columns", "resolve", "params", "rows", "encoded"]
        # the bytes the flat features hold (this tree encodes into them), beside what int64 arrays would take
        assert got[tree]["encoded_held_mb"] is not None, got[tree]  # rounded to 0.1 MB: 0.0 for 500 rows
        assert got[tree]["encoded_held_mb"] <= got[tree]["encoded_arrays_mb"], got[tree]
