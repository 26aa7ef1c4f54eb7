"""python -m raydistill.sweep SPACE: Ray Tune + Optuna (TPE) + ASHA over distillation runs.

This module is the command: flags, the space and the base config checked before Ray starts, resume state, then
``orchestrate.tuner.run_sweep`` (each trial one distillation run, an MLflow child run under one parent per sweep), the
confirmation of the top trials with more seeds (``orchestrate.confirm``) and ``summary.finish`` (summary table, Pareto
plot, one JSON object — the best trial — as the last line of stdout). Trials are chosen on a validation split carved
from the training rows (``best_val_*``) and reported on dev (``best_eval_*``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

from raydistill.commands.cli import HelpFormatter, cli
from raydistill.common.errors import check
from raydistill.config.schema import RunConfig
from raydistill.config.sizes import Shape
from raydistill.orchestrate.resources import DEFAULT_CPUS_PER_WORKER, Cluster, TrialDemand, concurrency
from raydistill.tracking.track import RESULTS_DIR

STATE = "raydistill_sweep.json"
SECOND_OBJECTIVE = {"params": "student_params", "latency": "latency_ms_b1"}  # --multi-objective: minimised
TEACHER_EPOCHS, TEACHER_LR = 3, 2e-5  # the in-sweep teacher fine-tune: raydistill.finetune's defaults


def parser():
    from raydistill.commands.args import add_teacher_args

    p = argparse.ArgumentParser(
        prog="python -m raydistill.sweep",
        formatter_class=HelpFormatter,
        description=(
            "Search a space of distillation runs (Ray Tune, Optuna TPE, ASHA). Each trial is one distillation run "
            "logged "
            "to MLflow; a one-worker CPU trial trains in its Tune trial process, one with several workers or GPUs, or "
            "on a "
            "cluster, on Ray Train. Trials are chosen on a validation split carved from the training rows and reported "
            "on "
            "dev. Prints a summary table and the best trial as one JSON object on the last line of stdout."
        ),
    )
    p.add_argument(
        "space",
        nargs="?",
        help="a named space shipped with the package (python -m raydistill list "
        "spaces) or a YAML path (default with --resume: the sweep's own)",
    )
    p.add_argument(
        "--task",
        help="labelled task to distil on (default: the space's task; general distillation runs "
        "through python -m raydistill.distill)",
    )
    p.add_argument(
        "--data-dir",
        help="local data folder: the GLUE root or the task's own folder (default: the "
        "space's, else the Hugging Face hub)",
    )
    p.add_argument(
        "--teacher",
        help="fine-tuned teacher folder, or a pretrained encoder to fine-tune first "
        "(default: the space's teacher, else bert-base-uncased)",
    )
    p.add_argument("--num-samples", type=int, help="trials (default: the space's num_samples)")
    p.add_argument("--num-workers", type=int, help="DDP workers per trial (default: the space's num_workers, else 1)")
    p.add_argument(
        "--max-concurrent",
        type=int,
        help="cap on trials running at once (default: as many as the cluster's CPUs and GPUs hold)",
    )
    p.add_argument("--use-gpu", action="store_true", help="give every worker a GPU (--gpus-per-worker)")
    p.add_argument(
        "--gpus-per-worker",
        type=float,
        default=1.0,
        help="GPUs per worker with --use-gpu; a fraction such as 0.5 packs small trials on one GPU",
    )
    p.add_argument(
        "--cpus-per-worker",
        type=float,
        help="CPUs (and torch threads) per worker (default "
        f"{DEFAULT_CPUS_PER_WORKER:g}: on a small CPU machine more trials at once beat more threads each)",
    )
    for flag, kind in (
        ("epochs", int),
        ("max-steps", int),
        ("train-limit", int),
        ("eval-limit", int),
        ("max-length", int),
        ("batch-size", int),
        ("seed", int),
        ("lr", float),
    ):
        p.add_argument(
            f"--{flag}",
            type=kind,
            help=f"as in raydistill.distill (default: the space's train."
            f"{flag.replace('-', '_')}, else raydistill.distill's)",
        )
    from raydistill.commands.args import add_selection_args

    add_selection_args(p, None)
    p.add_argument(
        "--teacher-epochs",
        type=int,
        default=TEACHER_EPOCHS,
        help="epochs of the teacher's fine-tune when "
        "--teacher has no task head (on all training rows, whatever the trials' --max-steps/--train-limit; "
        f"default {TEACHER_EPOCHS})",
    )
    p.add_argument(
        "--teacher-lr",
        type=float,
        default=TEACHER_LR,
        help=f"learning rate of that fine-tune (default {TEACHER_LR:g}, raydistill.finetune's)",
    )
    p.add_argument("--tracking-uri", help="MLflow URI (default: sqlite under ./raydistill-results)")
    p.add_argument("--experiment", help="MLflow experiment (default: the space's name)")
    p.add_argument("--storage-path", help="Ray results folder or s3:// URI (default ./raydistill-results/ray)")
    p.add_argument("--name", help="sweep run name (default: SPACE-TASK-timestamp)")
    p.add_argument("--resume", action="store_true", help="continue the sweep --name in --storage-path")
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a field of the space, "
        "e.g. --set student.layers=4 or --set 'distill.temperature={loguniform: [1, 8]}'; repeatable "
        "(default: none)",
    )
    p.add_argument(
        "--multi-objective",
        nargs="?",
        const="params",
        choices=sorted(SECOND_OBJECTIVE),
        help="optimise the dev score and the student's size (params, the default) or its measured batch-1 "
        "latency on this machine (latency): Optuna's multi-objective TPE, the Pareto front in the summary",
    )
    p.add_argument("--verbose", action="store_true", help="Ray Tune's and Ray Train's own progress lines too")
    p.add_argument("--placement-strategy", default="PACK", help="PACK or SPREAD a trial's workers over nodes")
    p.add_argument(
        "--max-failures",
        type=int,
        default=1,
        help="failures each trial recovers from (a worker lost, a trial process restarted)",
    )
    p.add_argument(
        "--ray-train-trials",
        action="store_true",
        help="run every trial on Ray Train, even a 1-worker "
        "CPU trial on a local Ray (which by default trains in its Tune trial process: ~11 s less per trial)",
    )
    add_teacher_args(p)
    p.add_argument("--inject-fault", default="", help=argparse.SUPPRESS)  # test hook, see RunConfig.fault
    return p


# ------------------------------------------------------------------ main
@cli
def main(argv=None) -> dict:
    argv = list(sys.argv[1:] if argv is None else argv)
    a = parser().parse_args(argv)
    state_path, state = None, {}
    if a.resume:  # the sweep as it was started: same space, flags, resources and concurrency
        check(bool(a.name), "name", "--resume needs the --name of the sweep to continue")
        state_path = _state_path(a.storage_path, a.name)
        check(
            os.path.isfile(state_path),
            "resume",
            f"no sweep {a.name!r} under {os.path.dirname(os.path.dirname(state_path))}; check --name and "
            f"--storage-path",
        )
        with open(state_path) as f:
            state = json.load(f)
        argv = state["argv"]
        a = parser().parse_args(
            argv + ["--resume", "--name", a.name] + (["--storage-path", a.storage_path] if a.storage_path else [])
        )
    check(
        bool(a.space),
        "space",
        "name a search space (python -m raydistill.sweep pkd_glue; a YAML path works too), "
        "or continue a sweep with --resume --name NAME",
    )
    from raydistill.commands.args import teacher_cache_dir
    from raydistill.config import space as sp
    from raydistill.data.splits import data_fingerprint, train_and_eval_examples
    from raydistill.tasks import get_task
    from raydistill.tracking.track import resolve_tracking_uri
    from raydistill.train.preflight import check_ray_options, preflight, teacher_config

    def log(m):
        return print(m, file=sys.stderr, flush=True)

    spec = sp.load(a.space, a.set)
    # the space's own defaults for the two scheduling keys it may carry; flags win
    a.num_workers = a.num_workers if a.num_workers is not None else spec.raw.get("num_workers", 1)
    a.max_concurrent = a.max_concurrent if a.max_concurrent is not None else spec.raw.get("max_concurrent")
    task_name = a.task or spec.task
    check(bool(task_name), "task", "the space names no task; pass --task (e.g. --task rte)")
    task = get_task(task_name)
    teacher = a.teacher or spec.teacher or "bert-base-uncased"
    mode = spec.mode
    fixed_train = {k: v for k, v in spec.train.items() if not isinstance(v, dict)}
    cli_train = {
        k: getattr(a, k)
        for k in (
            "epochs",
            "max_steps",
            "train_limit",
            "eval_limit",
            "max_length",
            "batch_size",
            "seed",
            "lr",
            "val_fraction",
            "select_on",
            "group_by_length",
        )
        if getattr(a, k) is not None
    }
    if a.fp32_teacher:
        cli_train["teacher_bf16"] = False
    train = {**fixed_train, **cli_train, "num_workers": a.num_workers, "use_gpu": a.use_gpu}
    storage_root = os.path.abspath(RESULTS_DIR)
    storage = a.storage_path or os.path.join(storage_root, "ray")
    if "://" not in storage:
        storage = os.path.abspath(storage)
    name = a.name or f"{spec.name}-{task.name}-{time.strftime('%Y%m%d-%H%M%S')}"
    n_samples = a.num_samples if a.num_samples is not None else spec.num_samples
    check(n_samples >= 1, "num_samples", "must be >= 1")
    check(
        a.max_concurrent is None or a.max_concurrent >= 1,
        "max_concurrent",
        f"must be >= 1 (or left out: as many trials as the cluster holds), got {a.max_concurrent}",
    )
    demand = TrialDemand(
        a.num_workers, a.cpus_per_worker or DEFAULT_CPUS_PER_WORKER, a.gpus_per_worker if a.use_gpu else None
    )
    check_ray_options(a.placement_strategy, a.max_failures, demand.cpus_per_worker, demand.gpus_per_worker)
    check(
        not (a.use_gpu and a.num_workers > 1 and a.gpus_per_worker < 1),
        "gpus_per_worker",
        f"{a.num_workers} DDP workers at {a.gpus_per_worker:g} GPU each could share one GPU, which NCCL refuses; pack "
        "1-worker trials with a fraction (--num-workers 1), or give each worker a whole GPU (--gpus-per-worker 1)",
    )
    base = RunConfig.from_dict(
        dict(
            task=task.name,
            teacher=teacher,
            data_dir=os.path.abspath(a.data_dir) if a.data_dir else spec.data_dir,
            train=train,
            tracking_uri=resolve_tracking_uri(a.tracking_uri),
            experiment=a.experiment or spec.name,
            output=os.path.join(storage_root, "students", name, "student"),
            fault=a.inject_fault,
            teacher_cache=teacher_cache_dir(a),
            teacher_cache_gb=a.teacher_cache_gb,
        )
    )
    from raydistill.config.selection import as_final, confirm_of, objective

    # a trial is worth its best epoch (the student it exports), chosen on the validation split
    metric = as_final(spec.metric, "metric") if spec.metric else objective(task.main_metric, base.train.select_on)
    check(a.teacher_epochs >= 1, "teacher_epochs", f"must be >= 1, got {a.teacher_epochs}")
    check(a.teacher_lr > 0, "teacher_lr", f"must be > 0, got {a.teacher_lr}")
    confirm = confirm_of(spec.search) if not a.multi_objective else {"top": 0, "seeds": 0}
    machine = None if os.environ.get("RAY_ADDRESS") else Cluster.local()
    if machine:  # the Ray this command starts has this machine's CPUs and GPUs: a trial that can't fit stops here
        concurrency(demand, machine, a.max_concurrent, n_samples)
    # fail fast, before Ray or any training: teacher readable, data present, first sample buildable
    tshape = Shape.of(teacher_config(teacher))
    train_and_eval_examples(base, task)
    preflight(
        sp.trial_config(base, sp.sample(spec, None, tshape)), load_data=False, require_head=False
    )  # types, bounds, sizes, mapping: before any run is logged

    from raydistill.orchestrate.connect import cluster as joined
    from raydistill.orchestrate.connect import init_ray, mute_workers, shutdown
    from raydistill.orchestrate.tuner import run_sweep, trial_opts
    from raydistill.results.summary import finish
    from raydistill.tracking import track
    from raydistill.train.finetune import prepare_teacher

    state_path = _state_path(a.storage_path, name)
    state = {**state, "argv": argv, "name": name}
    _write_json(state_path, state)  # resumable from here on: Ctrl-C, SIGTERM or a lost driver
    from raydistill.commands.cli import at_signal, on_interrupt, resume_hint

    resume_hint(
        f"python -m raydistill.sweep --resume --name {name}"
        + (f" --storage-path {a.storage_path}" if a.storage_path else "")
    )
    from raydistill.train.loop import Clock

    clock = Clock()  # the work a sweep does around its trials: Ray start, teacher, reference, re-timing
    init_ray(verbose=a.verbose)  # before any MLflow run: a refused cluster connection must not leave a parent run open
    at_signal(mute_workers)  # Ctrl-C: trial actors Ray kills while the sweep unwinds print nothing
    on_interrupt(shutdown)  # runs last: the trials' forwarded output ends before the one line
    cluster = machine or joined()
    n_at_once = concurrency(demand, cluster, a.max_concurrent, n_samples)
    log(
        f"{n_at_once} trial(s) at once: the cluster has {cluster.cpus:g} CPUs and {cluster.gpus:g} GPUs, one trial "
        f"takes {demand.num_workers} worker(s) × {demand.cpus_per_worker:g} CPU"
        + (f" + {demand.gpus_per_worker:g} GPU" if demand.gpus_per_worker else "")
        + (f" (--max-concurrent {a.max_concurrent})" if a.max_concurrent else "")
    )
    parent = state.get("parent_run_id") or track.start_run(
        base.tracking_uri,
        base.experiment,
        name,
        {
            "space": spec.name,
            "task": task.name,
            "teacher": teacher,
            "metric": metric,
            "mode": mode,
            "num_samples": n_samples,
            "data_fingerprint": data_fingerprint(base),
            "search": json.dumps(spec.search),
        },
        tags={"raydistill.role": "sweep"},
    )
    if state.get("parent_run_id"):  # resumed: the parent (and its trials) go on, RUNNING again
        track.reopen_run(base.tracking_uri, parent)
    state["parent_run_id"] = parent
    _write_json(state_path, state)

    def killed():  # Ctrl-C / SIGTERM: the running trials and the parent end KILLED, resumable
        track.close_children(base.tracking_uri, base.experiment, parent, reason="interrupted")
        track.end_run(base.tracking_uri, parent, "KILLED")

    on_interrupt(killed)
    clock.lap("ray_start")
    base = base.replace(
        teacher=state.get("teacher")
        or prepare_teacher(base, storage_root, parent, log, epochs=a.teacher_epochs, lr=a.teacher_lr)
    )
    from raydistill.data.augment_sets import build_sets

    augment_dirs = build_sets(spec.raw.get("augment"), base, storage_root, log)  # once, shared by the trials
    clock.lap("teacher")
    preflight(sp.trial_config(base, sp.sample(spec, None, tshape)), load_data=False)
    state.update(teacher=base.teacher, concurrency=state.get("concurrency") or n_at_once)
    _write_json(state_path, state)
    from raydistill.config.selection import report_metric
    from raydistill.orchestrate.resources import threads
    from raydistill.results.reference import remeasure_latency, teacher_reference, weak_teacher

    ref = teacher_reference(base, threads(demand.cpus_per_worker), log)  # the yardstick of every trial
    shown = [m[len("best_") :] for m in dict.fromkeys((metric, report_metric(metric))) if m.startswith("best_")]
    log(
        "teacher: " + ", ".join(f"{m}={ref.get(m)}" for m in shown) + f", {ref['student_params'] / 1e6:.1f}M "
        f"params, {ref['latency_ms_b1']:.1f} ms at batch 1"
    )
    warning = weak_teacher(ref, task)
    if warning:
        log(warning)
    clock.lap("teacher_reference")
    track.log_metrics(base.tracking_uri, parent, {f"teacher_{k}": v for k, v in ref.items()})
    track.log_artifact(base.tracking_uri, parent, sp.resolve_path(a.space), "space")

    t0 = time.time()
    in_process = demand.in_process() and machine is not None and "://" not in storage and not a.ray_train_trials
    opts = trial_opts(
        demand,
        max_failures=a.max_failures,
        placement=a.placement_strategy,
        verbose=a.verbose,
        in_process=in_process,
        augment_dirs=augment_dirs,
    )  # the trials' and their confirmation's
    results = run_sweep(
        spec,
        base,
        metric=metric,
        mode=mode,
        n_samples=n_samples,
        storage=storage,
        name=name,
        parent=parent,
        teacher=tshape,
        n_at_once=state.get("concurrency") or n_at_once,
        multi_objective=SECOND_OBJECTIVE.get(a.multi_objective),
        resume=a.resume,
        opts=opts,
    )
    clock.lap("trials")
    rows, run_ids = _rows(results, metric, mode, base, parent)
    confirmed = None
    if confirm["top"] and confirm["seeds"]:
        from raydistill.orchestrate.confirm import candidates, confirm_points, confirmed_rows, run_confirm

        top = candidates(rows, metric, confirm["top"])
        log(f"confirming the top {len(top)} trial(s) with {confirm['seeds']} more seed(s) each (search.confirm)")
        c_results = run_confirm(
            confirm_points(top, base.train.seed, confirm["seeds"]),
            base,
            storage=storage,
            name=name,
            parent=parent,
            n_at_once=state.get("concurrency") or n_at_once,
            resume=a.resume,
            opts=opts,
        )
        c_rows, c_ids = _rows(c_results, metric, mode, base, parent)
        confirmed = confirmed_rows(rows, c_rows, metric, report_metric(metric), mode)
        rows, run_ids = rows + c_rows, {**run_ids, **c_ids}
        clock.lap("confirm")
    wall = time.time() - t0
    ref = remeasure_latency(rows, base, ref, threads(demand.cpus_per_worker), log, run_ids)  # reference.py
    track.log_metrics(base.tracking_uri, parent, {"teacher_latency_ms_b1": ref["latency_ms_b1"]}, step=1)
    clock.lap("latency_retime")
    out = finish(
        rows,
        metric,
        mode,
        base,
        parent,
        storage,
        name,
        wall,
        n_samples,
        log,
        state.get("concurrency") or n_at_once,
        teacher=ref,
        front_by=SECOND_OBJECTIVE.get(a.multi_objective) or "latency_ms_b1",
        run_ids=run_ids,
        confirmed=confirmed,
        timings={k: round(v, 2) for k, v in clock.spent.items()},
    )
    return out


def _rows(results, metric: str, mode: str, base: RunConfig, parent: str) -> tuple[list[dict], dict]:
    """Summary rows of Tune results, with what their MLflow runs logged, and each trial's run id."""
    from raydistill.results.summary import summarize
    from raydistill.tracking import track

    children = track.child_runs(base.tracking_uri, base.experiment, parent)
    finished = {t for t, r in children.items() if r.info.status == "FINISHED"}
    rows = summarize(
        results,
        metric,
        mode,
        base.train.epochs,
        {t: dict(r.data.metrics) for t, r in children.items()},
        finished=finished,
    )
    return rows, {t: r.info.run_id for t, r in children.items()}


def _state_path(storage_path: str | None, name: str) -> str:
    """Where a sweep keeps what ``--resume`` needs (beside its Tune experiment, or locally for a remote one)."""
    storage_root = os.path.abspath(RESULTS_DIR)
    storage = storage_path or os.path.join(storage_root, "ray")
    if "://" in storage:
        return os.path.join(storage_root, "sweeps", name, STATE)
    return os.path.join(os.path.abspath(storage), name, STATE)


def _write_json(path: str, obj) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path + ".tmp", "w") as f:
        json.dump(obj, f)
    os.replace(path + ".tmp", path)  # a driver killed mid-write leaves the old state, not half a file


if __name__ == "__main__":
    main()
