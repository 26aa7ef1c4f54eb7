"""Student levers, one at a time: does a student cut from the teacher by importance (``--init prune``) start better
than its leading block (``slice``)? Does TinyBERT augmentation without a masked LM (``--augment N``: N copies of every
training row, words swapped for their nearest whole words in the teacher's own word embeddings, the product's
``python -m raydistill.distill.augment``) help? The same student, recipe and seeds under each variant (an init, with
and without augmented rows), trained by the product (``python -m raydistill.distill``), each run's epoch chosen on the
validation split carved from train (never augmented) and reported on dev.

Per variant, --seeds runs (median and range); the median seed of each re-scored on the whole dev set with a
bootstrap 95% interval, and the first variant against every other on the same dev rows (paired interval). "beats"
only where that interval excludes 0 and the difference exceeds the other variant's seeds' range
(benchmarks/quality_stats.py); otherwise "ties". Each finished run is recorded in WORK/steps.json, so a cut-off
benchmark resumes where it stopped.

    python benchmarks/inits.py --teacher W/teachers/mrpc --data-dir ../shared/data/glue --task mrpc \\
        --shape 3,192,768,6 --inits prune,slice --work W/inits
    python benchmarks/inits.py ... --shape 3,384,1536,12 --inits first_k --augment 2,0 --method pkd \\
        --temperature 20 --alpha 0.7 --beta 100 --mapping skip        # pkd_glue's first recipe, with and without
    python benchmarks/inits.py ... --augment 20,0 --labels-only --use-gpu   # + the student on gold labels alone, GPU
Ends with one `INITS task=… shape=… prune=… slice=… verdicts=…` line (variants named INIT, INIT+augN or labels).
"""

from __future__ import annotations

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import quality_stats as qs
from quality import Steps, run


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--teacher", required=True, help="the fine-tuned teacher (e.g. quality.py's WORK/teachers/TASK)")
    p.add_argument("--data-dir", required=True, help="GLUE folder")
    p.add_argument("--task", default="mrpc")
    p.add_argument("--shape", default="3,192,768,6", help="student layers,hidden,intermediate,heads")
    p.add_argument("--inits", default="prune,slice", help="the inits compared; the first is compared to the rest")
    p.add_argument("--method", default="kd", help="the recipe: kd_glue's published start (T 2, alpha 0.5)")
    p.add_argument("--temperature", default="2")
    p.add_argument("--alpha", default="0.5")
    p.add_argument("--beta", default=None, help="pkd's intermediate-loss weight (default: the method's)")
    p.add_argument("--mapping", default=None, help="pkd's layer mapping (default: the method's)")
    p.add_argument(
        "--augment",
        default="0",
        help="augmented copies per training row, e.g. 2,0: each init with each "
        "(0 = the task's rows only); the first variant is compared to the rest",
    )
    p.add_argument(
        "--labels-only",
        action="store_true",
        help="one more variant, 'labels': the same student, init and seeds trained on the gold labels alone "
        "(--method finetune, no teacher, no augmented rows)",
    )
    p.add_argument("--use-gpu", action="store_true", help="every run on the GPU (distill --use-gpu)")
    p.add_argument("--lr", default="1e-4")
    p.add_argument("--epochs", type=int, default=4)
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--train-limit", type=int, default=0)
    p.add_argument("--max-length", default="128")
    p.add_argument("--batch-size", default="32")
    p.add_argument("--work", default="raydistill-results/inits")
    a = p.parse_args()
    work = os.path.abspath(a.work)
    os.makedirs(work, exist_ok=True)
    layers, hidden, inter, heads = a.shape.split(",")
    shape = f"{layers}L-{hidden}"
    step, log = Steps(os.path.join(work, "steps.json")), os.path.join(work, "inits.log")
    uri = f"sqlite:///{work}/mlflow.db"
    same_recipe(a, work)
    seeds = [a.seed + i for i in range(a.seeds)]
    variants = {
        (i if n == "0" else f"{i}+aug{n}"): (i, n, a.method) for i in a.inits.split(",") for n in a.augment.split(",")
    }
    if a.labels_only:
        variants["labels"] = (a.inits.split(",")[0], "0", "finetune")
    names = list(variants)  # the init, INIT+augN, or labels
    aug_dirs = {n: augmented(a, n, step, work, log) for n in a.augment.split(",") if n != "0"}
    extra = [x for k, v in (("--beta", a.beta), ("--mapping", a.mapping)) if v is not None for x in (k, v)]
    recipe = ["--temperature", a.temperature, "--alpha", a.alpha, *extra]
    gpu = ["--use-gpu"] if a.use_gpu else []
    from raydistill.tasks import get_task

    report = f"best_eval_{get_task(a.task).main_metric}"  # as quality.py: the task's main metric, not the first key
    res: dict = {"task": a.task, "shape": shape, "method": a.method}
    for name, (init, n, method) in variants.items():
        runs = []
        aug = ["--augment-dir", aug_dirs[n]] if n != "0" else []
        loss = recipe if method != "finetune" else []  # labels only: no teacher, no temperature
        for s in seeds:
            out = os.path.join(work, a.task, shape, name.replace(":", "_"), str(s))
            r = step(
                f"{a.task}/{shape}/{name}/{s}",
                lambda init=init, s=s, out=out, aug=aug, method=method, loss=loss: run(
                    [
                        "raydistill.distill",
                        "--method",
                        method,
                        "--teacher",
                        a.teacher,
                        "--task",
                        a.task,
                        "--data-dir",
                        a.data_dir,
                        "--student-layers",
                        layers,
                        "--student-hidden",
                        hidden,
                        "--student-intermediate",
                        inter,
                        "--student-heads",
                        heads,
                        "--init",
                        init,
                        *loss,
                        "--lr",
                        a.lr,
                        "--epochs",
                        str(a.epochs),
                        "--seed",
                        str(s),
                        "--train-limit",
                        str(a.train_limit),
                        "--max-length",
                        a.max_length,
                        "--batch-size",
                        a.batch_size,
                        *aug,
                        *gpu,
                        "--output",
                        out,
                        "--tracking-uri",
                        uri,
                        "--experiment",
                        f"inits-{a.task}-{shape}",
                    ],
                    log,
                ),
            )
            runs.append({"dev": r[report], "val": r[report.replace("eval", "val")], "dir": out, "wall_s": r["wall_s"]})
        res[name] = {"runs": runs, **qs.seeds_summary([x["dev"] for x in runs])}
    preds = {}
    for init in names:
        # the median seed on val stands for the variant: dev chooses nothing
        d = res[init]["runs"][qs.median_index([x["val"] for x in res[init]["runs"]])]["dir"]
        preds[init], gold = qs.dev_predictions(d, a.task, a.data_dir, int(a.max_length))
        res[init]["ci"] = qs.interval(a.task, preds[init], gold)
    first, verdicts = names[0], {}
    for other in names[1:]:
        res[first][f"vs_{other}"] = {  # the difference and its interval from the two median-on-val runs
            **qs.compare(a.task, preds[first], preds[other], gold, res[other]["range"]),
            "same_seed_diffs": [
                x["dev"] - y["dev"] for x, y in zip(res[first]["runs"], res[other]["runs"], strict=True)
            ],
        }
        verdicts[other] = res[first][f"vs_{other}"]["verdict"]
    with open(os.path.join(work, "inits.jsonl"), "a") as f:
        f.write(json.dumps(res, default=str) + "\n")
    for init in names:
        r = res[init]
        vs = [(o, r[f"vs_{o}"]) for o in verdicts] if init == first else []  # the first init against each other
        cmp = "".join(
            f" vs {o} {v['diff']:+.4f} (CI {v['ci'][0]:+.4f}…{v['ci'][1]:+.4f}): {v['verdict']}" for o, v in vs
        )
        print(
            f"{init}: seeds {', '.join(f'{v:.4f}' for v in r['seeds'])}; median {r['median']:.4f} (range "
            f"{r['range']:.4f}; CI {r['ci'][0]:.4f}–{r['ci'][1]:.4f}){cmp}"
        )
    if verdicts:
        print(f"vs: {qs.PAIR_NOTE}")
    print(
        f"INITS task={a.task} shape={shape} "
        + " ".join(f"{i}={res[i]['median']:.4f}" for i in names)
        + f" verdicts={json.dumps(verdicts)}",
        flush=True,
    )


def same_recipe(a, work: str) -> None:
    """Finished runs are found again by task, shape, variant and seed: one WORK holds one recipe per task, so a call
    with another recipe stops here instead of reporting the old recipe's runs as its own."""
    keys = (
        "teacher",
        "method",
        "temperature",
        "alpha",
        "beta",
        "mapping",
        "lr",
        "epochs",
        "train_limit",
        "max_length",
        "batch_size",
    )
    recipe, path = {k: str(getattr(a, k)) for k in keys}, os.path.join(work, "recipes.json")
    if a.use_gpu:  # GPU runs are not the CPU's to the last digit (the key only where set: older WORKs stay valid)
        recipe["use_gpu"] = "True"
    known = json.load(open(path)) if os.path.isfile(path) else {}
    old = known.setdefault(a.task, recipe)
    if old != recipe:
        diff = ", ".join(f"{k} {old.get(k)} → {v}" for k, v in recipe.items() if old.get(k) != v)
        print(
            f"error: --work {work} holds {a.task} runs of another recipe ({diff}): pass another --work", file=sys.stderr
        )
        sys.exit(2)
    with open(path, "w") as f:
        json.dump(known, f, indent=1)


def augmented(a, n: str, step, work: str, log: str) -> str:
    """The task's training rows with n augmented copies each (the product's augment command, seed 0), built once."""
    out = os.path.join(work, "augmented", a.task, n)
    step(
        f"{a.task}/augment/{n}",
        lambda: run(
            [
                "raydistill.distill.augment",
                "--task",
                a.task,
                "--data-dir",
                a.data_dir,
                "--teacher",
                a.teacher,
                "--candidates",
                "embedding",
                "--n",
                n,
                "--seed",
                "0",
                "--max-length",
                a.max_length,
                "--output",
                out,
            ],
            log,
        ),
    )
    return out


if __name__ == "__main__":
    main()
