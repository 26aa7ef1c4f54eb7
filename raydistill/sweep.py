"""python -m raydistill.sweep SPACE: Ray Tune + Optuna (TPE) + ASHA over distillation runs.

Each trial is a Tune function that builds and fits a Ray Train TorchTrainer (Train V2) and logs an MLflow
child run under one parent run per sweep. Prints a live trial table while running, a summary table at the
end, saves a Pareto plot, and prints one JSON object (the best trial) as the last line of stdout.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import time

from optuna.exceptions import UpdateFinishedTrialError
from ray.tune.schedulers import ASHAScheduler
from ray.tune.search.optuna import OptunaSearch

from .config import RunConfig, StudentConfig, TrainConfig, build
from .errors import check, cli
from .resources import DEFAULT_CPUS_PER_WORKER, Cluster, TrialDemand, concurrency
from .sizes import Shape
from .track import RESULTS_DIR

STATE = "raydistill_sweep.json"


def parser():
    from .distill.__main__ import add_teacher_args

    p = argparse.ArgumentParser(prog="python -m raydistill.sweep", description=__doc__)
    p.add_argument("space", help="name of a file in search_spaces/ (pkd_glue, kd_glue, …) or a YAML path")
    p.add_argument("--task", help="task to distil on (default: the space's task)")
    p.add_argument("--data-dir", help="local data folder (default: the Hugging Face hub)")
    p.add_argument("--teacher", help="fine-tuned teacher dir, or a pretrained encoder to fine-tune first "
                   "(default: the space's teacher, else bert-base-uncased)")
    p.add_argument("--num-samples", type=int, help="trials (default: the space's num_samples)")
    p.add_argument("--num-workers", type=int, help="DDP workers per trial (default: the space's num_workers, else 1)")
    p.add_argument("--max-concurrent", type=int, help="cap on trials running at once (default: as many as the "
                   "cluster's CPUs and GPUs hold)")
    p.add_argument("--use-gpu", action="store_true")
    p.add_argument("--gpus-per-worker", type=float, default=1.0, help="fractional GPUs pack small trials per GPU")
    p.add_argument("--cpus-per-worker", type=float, help="CPUs (and torch threads) per worker (default "
                   f"{DEFAULT_CPUS_PER_WORKER:g}: on a small CPU machine more trials at once beat more threads each)")
    for flag in ("epochs", "max-steps", "train-limit", "eval-limit", "max-length", "batch-size", "seed"):
        p.add_argument(f"--{flag}", type=int)
    p.add_argument("--lr", type=float)
    p.add_argument("--tracking-uri", help="MLflow URI (default: sqlite under ./raydistill-results)")
    p.add_argument("--experiment", help="MLflow experiment (default: the space's name)")
    p.add_argument("--storage-path", help="Ray results folder or s3:// URI (default ./raydistill-results/ray)")
    p.add_argument("--name", help="sweep run name (default: SPACE-TASK-timestamp)")
    p.add_argument("--resume", action="store_true", help="continue the sweep --name in --storage-path")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override a field of the space")
    p.add_argument("--multi-objective", action="store_true", help="optimise dev score and student parameters")
    p.add_argument("--placement-strategy", default="PACK", help="PACK or SPREAD DDP workers over nodes")
    p.add_argument("--max-failures", type=int, default=1, help="worker failures each trial recovers from")
    add_teacher_args(p)
    p.add_argument("--inject-fault", default="", help=argparse.SUPPRESS)  # test hook, see RunConfig.fault
    return p


# ------------------------------------------------------------------ trial
def trial_config(base: dict, sampled: dict) -> RunConfig:
    """The RunConfig of one trial: the sweep's base config with the sampled values applied."""
    from .run import cfg_from_dict
    from .space import parse_size

    cfg = cfg_from_dict(base)
    s = dict(sampled)
    # the base config was filled with its own method's defaults; a trial's method fills in its own
    student = dataclasses.asdict(cfg.student) | {"init": ""}
    if "student_size" in s:
        student.update(parse_size(s.pop("student_size")))
    for k in ("layers", "hidden", "intermediate", "heads"):
        if f"student_{k}" in s:
            student[k] = s.pop(f"student_{k}")
    if "init" in s:
        student["init"] = s.pop("init")
    distill = dataclasses.asdict(cfg.distill) | {"temperature": None, "alpha": None, "alpha_mlm": None} | \
        {k: s.pop(k) for k in list(s) if k in dataclasses.asdict(cfg.distill)}
    train = dataclasses.asdict(cfg.train) | {k: s.pop(k) for k in list(s) if k in dataclasses.asdict(cfg.train)}
    from .config import DistillConfig

    return cfg.replace(student=build(StudentConfig, student, "student."), distill=build(DistillConfig, distill, "distill."),
                       train=build(TrainConfig, train, "train."))


def run_name(cfg: RunConfig, trial_id: str) -> str:
    from .distill.methods import get_method

    s, d = cfg.student, cfg.distill
    name = f"{trial_id} {d.method} {s.layers}L-{s.hidden} T={d.temperature:g} a={d.alpha:g}"
    m = get_method(d.method)
    if m.uses_beta:
        name += f" b={d.beta:g}"
    if m.maps_layers:
        name += f" {d.mapping}"
    return name


def _trial(config: dict, base: dict, parent_run_id: str, storage: str, sweep_name: str, opts: dict) -> None:
    """A Tune trial: fit one distillation run; Tune sees its per-epoch metrics through TuneReportCallback."""
    import ray.tune
    from ray.tune.integration.ray_train import TuneReportCallback

    from . import track
    from .run import execute

    t_start = time.perf_counter()
    trial_id = ray.tune.get_context().get_trial_id()
    cfg = trial_config(base, config).validate()
    cfg = cfg.replace(output=os.path.join(os.path.dirname(base["output"]), trial_id), run_name=run_name(cfg, trial_id))
    existing = track.find_run(cfg.tracking_uri, cfg.experiment, "raydistill.trial_id", trial_id)
    if existing and track.client(cfg.tracking_uri).get_run(existing).info.status == "FINISHED":
        # finished before the sweep driver died: report what it logged instead of training again
        ray.tune.report(dict(track.client(cfg.tracking_uri).get_run(existing).data.metrics))
        return
    t_run = time.perf_counter()
    out = execute(cfg, storage_path=storage, name=f"{sweep_name}-{trial_id}", parent_run_id=parent_run_id,
                  callbacks=[TuneReportCallback()], max_failures=opts["max_failures"],
                  placement_strategy=opts["placement"], resume_run_id=existing,
                  tags={"raydistill.trial_id": trial_id, "raydistill.sweep": sweep_name},
                  cpus_per_worker=opts["cpus"], gpus_per_worker=opts["gpus"])
    wall = time.perf_counter() - t_start  # the trial's fixed cost: its seconds outside training steps
    track.log_metrics(cfg.tracking_uri, out["run_id"], {"trial_wall_s": wall, "time_trial_start_s": t_run - t_start,
                                                        "fixed_cost_s": wall - out.get("time_train_s", 0.0)})


# ------------------------------------------------------------------ preparation
def prepare_teacher(cfg: RunConfig, storage_root: str, parent_run_id: str | None, log) -> str:
    """A teacher already fine-tuned for the task is used as is; a pretrained encoder is fine-tuned first
    (cached by fingerprint, its own MLflow run), as the Patient-KD recipe does."""
    from .finetune import finetune
    from .preflight import has_task_head, teacher_config
    from .tasks import get_task

    task = get_task(cfg.task)
    if has_task_head(teacher_config(cfg.teacher), task):
        return cfg.teacher
    slug = cfg.teacher.rstrip("/").replace("/", "_").replace(".", "_")
    out = os.path.join(storage_root, "teachers", f"{slug}-{task.name}")
    log(f"teacher {cfg.teacher} has no {task.name} head: fine-tuning it first into {out}")
    ft = cfg.replace(student=StudentConfig(init="pretrained"), distill=dataclasses.replace(cfg.distill, method="finetune"),
                     train=dataclasses.replace(cfg.train, lr=2e-5, num_workers=1))
    metrics = finetune(ft, out, log=log, parent_run_id=parent_run_id)
    log(f"teacher dev metrics: {json.dumps(metrics)}")
    return out


def summarize(results, metric: str, mode: str, epochs: int, logged: dict | None = None) -> list[dict]:
    """One row per trial: DONE (all epochs), STOPPED (by ASHA) or ERROR (with the reason). ``logged`` (trial id →
    the MLflow child run's metrics) wins over Tune's last result, which is stale for a trial resumed after its end."""
    from .run import failure_reason

    rows = []
    for r in results:
        cfg, m = r.config or {}, dict(r.metrics or {})
        m.update((logged or {}).get(m.get("trial_id"), {}))
        status = "ERROR" if r.error else "DONE" if (m.get("epoch") or 0) >= epochs else "STOPPED"
        rows.append({"trial": m.get("trial_id") or os.path.basename(r.path or "")[-8:], "status": status,
                     metric: m.get(metric), "epoch": m.get("epoch"), "student_params": m.get("student_params"),
                     "latency_ms_b1": m.get("latency_ms_b1"), "latency_ms_b32": m.get("latency_ms_b32"),
                     "trial_wall_s": m.get("trial_wall_s"), "fixed_cost_s": m.get("fixed_cost_s"),
                     **{k: v for k, v in cfg.items()},
                     "error": failure_reason(r.error)[:160] if r.error else ""})
    sign = -1 if mode == "max" else 1
    rows.sort(key=lambda r: (r[metric] is None, sign * (r[metric] or 0)))
    return rows


# ------------------------------------------------------------------ main
@cli
def main(argv=None) -> dict:
    argv = list(sys.argv[1:] if argv is None else argv)
    a = parser().parse_args(argv)
    state_path, state = None, {}
    if a.resume:  # the sweep as it was started: same space, flags, resources and concurrency
        check(bool(a.name), "name", "--resume needs the --name of the sweep to continue")
        state_path = _state_path(a.storage_path, a.name)
        check(os.path.isfile(state_path), "resume",
              f"no sweep {a.name!r} under {os.path.dirname(os.path.dirname(state_path))}; check --name and --storage-path")
        with open(state_path) as f:
            state = json.load(f)
        argv = state["argv"]
        a = parser().parse_args(argv + ["--resume", "--name", a.name] +
                                (["--storage-path", a.storage_path] if a.storage_path else []))
    from . import space as sp
    from .distill.__main__ import teacher_cache_dir
    from .distill.data import data_fingerprint, train_and_eval_examples
    from .preflight import check_ray_options, preflight, teacher_config
    from .tasks import get_task
    from .track import resolve_tracking_uri

    log = lambda m: print(m, file=sys.stderr, flush=True)  # noqa: E731
    spec = sp.load(a.space, a.set)
    # the space's own defaults for the two scheduling keys it may carry; flags win
    a.num_workers = a.num_workers if a.num_workers is not None else spec.raw.get("num_workers", 1)
    a.max_concurrent = a.max_concurrent if a.max_concurrent is not None else spec.raw.get("max_concurrent")
    task_name = a.task or spec.task
    check(bool(task_name), "task", "the space names no task; pass --task (e.g. --task rte)")
    task = get_task(task_name)
    teacher = a.teacher or spec.teacher or "bert-base-uncased"
    metric = spec.metric or f"best_eval_{task.main_metric}"  # a trial is worth its best epoch (exported)
    mode = spec.mode
    fixed_train = {k: v for k, v in spec.train.items() if not isinstance(v, dict)}
    cli_train = {k: getattr(a, k) for k in ("epochs", "max_steps", "train_limit", "eval_limit", "max_length",
                                            "batch_size", "seed", "lr") if getattr(a, k) is not None}
    if a.fp32_teacher:
        cli_train["teacher_bf16"] = False
    train = build(TrainConfig, {**fixed_train, **cli_train, "num_workers": a.num_workers, "use_gpu": a.use_gpu}, "train.")
    storage_root = os.path.abspath(RESULTS_DIR)
    storage = a.storage_path or os.path.join(storage_root, "ray")
    if "://" not in storage:
        storage = os.path.abspath(storage)
    name = a.name or f"{spec.name}-{task.name}-{time.strftime('%Y%m%d-%H%M%S')}"
    n_samples = a.num_samples if a.num_samples is not None else spec.num_samples
    check(n_samples >= 1, "num_samples", "must be >= 1")
    check(a.max_concurrent is None or a.max_concurrent >= 1, "max_concurrent",
          f"must be >= 1 (or left out: as many trials as the cluster holds), got {a.max_concurrent}")
    demand = TrialDemand(a.num_workers, a.cpus_per_worker or DEFAULT_CPUS_PER_WORKER,
                         a.gpus_per_worker if a.use_gpu else None)
    check_ray_options(a.placement_strategy, a.max_failures, demand.cpus_per_worker, demand.gpus_per_worker)
    base = RunConfig(task=task.name, teacher=teacher, data_dir=os.path.abspath(a.data_dir) if a.data_dir else spec.data_dir,
                     train=train, tracking_uri=resolve_tracking_uri(a.tracking_uri), experiment=a.experiment or spec.name,
                     output=os.path.join(storage_root, "students", name, "student"), fault=a.inject_fault,
                     teacher_cache=teacher_cache_dir(a), teacher_cache_gb=a.teacher_cache_gb).validate()
    machine = None if os.environ.get("RAY_ADDRESS") else Cluster.local()
    if machine:  # the Ray this command starts has this machine's CPUs and GPUs: a trial that can't fit stops here
        concurrency(demand, machine, a.max_concurrent, n_samples)
    # fail fast, before Ray or any training: teacher readable, data present, first sample buildable
    tshape = Shape.of(teacher_config(teacher))
    train_and_eval_examples(base, task)
    preflight(trial_config(dataclasses.asdict(base), sp.sample(spec, None, tshape)),
              load_data=False, require_head=False)  # types, bounds, sizes, mapping: before any run is logged

    import ray

    from . import track
    from .run import init_ray

    state_path = _state_path(a.storage_path, name)
    init_ray()  # before any MLflow run: a refused cluster connection must not leave a parent run open
    cluster = machine or Cluster.of(ray.cluster_resources())
    n_at_once = concurrency(demand, cluster, a.max_concurrent, n_samples)
    log(f"{n_at_once} trial(s) at once: the cluster has {cluster.cpus:g} CPUs and {cluster.gpus:g} GPUs, one trial "
        f"takes {demand.num_workers} worker(s) × {demand.cpus_per_worker:g} CPU"
        + (f" + {demand.gpus_per_worker:g} GPU" if demand.gpus_per_worker else "")
        + (f" (--max-concurrent {a.max_concurrent})" if a.max_concurrent else ""))
    parent = state.get("parent_run_id") or track.start_run(
        base.tracking_uri, base.experiment, name,
        {"space": spec.name, "task": task.name, "teacher": teacher, "metric": metric, "num_samples": n_samples,
         "data_fingerprint": data_fingerprint(base), "search": json.dumps(spec.search)},
        tags={"raydistill.role": "sweep"})
    base = base.replace(teacher=state.get("teacher") or prepare_teacher(base, storage_root, parent, log))
    preflight(trial_config(dataclasses.asdict(base), sp.sample(spec, None, tshape)), load_data=False)
    _write_json(state_path, {"parent_run_id": parent, "teacher": base.teacher, "argv": argv,
                             "concurrency": n_at_once})
    track.log_artifact(base.tracking_uri, parent, sp.resolve_path(a.space), "space")

    t0 = time.time()
    results = _tune(a, spec, base, metric, mode, n_samples, storage, name, parent, teacher=tshape,
                    demand=demand, n_at_once=state.get("concurrency") or n_at_once)
    wall = time.time() - t0
    rows = summarize(results, metric, mode, base.train.epochs, track.child_metrics(base.tracking_uri, base.experiment, parent))
    return finish(rows, metric, mode, base, parent, storage, name, wall, n_samples, log,
                  state.get("concurrency") or n_at_once)


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


def _tune(a, spec, base, metric, mode, n_samples, storage, name, parent, teacher, demand, n_at_once):
    import optuna
    from ray import tune
    from ray.tune.search import ConcurrencyLimiter

    from . import space as sp
    from .report import live_callback

    metrics = [metric, "student_params"] if a.multi_objective else metric
    modes = [mode, "min"] if a.multi_objective else mode
    seed = spec.search.get("seed", base.train.seed)
    db = base.tracking_uri[len("sqlite:///"):] if base.tracking_uri.startswith("sqlite:///") else os.path.join(
        os.path.abspath(RESULTS_DIR), "mlflow.db")
    storage_url = "sqlite:///" + os.path.join(os.path.dirname(db), "optuna.db")
    searcher = PrunedAwareOptunaSearch(
        space=SpaceFn(spec, teacher), metric=metrics, mode=modes,
        # constant liar: trials running at once count as bad guesses, so concurrent proposals spread out
        sampler=optuna.samplers.TPESampler(seed=seed, constant_liar=True), study_name=name,
        points_to_evaluate=sp.start_points(spec, teacher) or None,
        storage=optuna.storages.RDBStorage(storage_url), max_epochs=base.train.epochs)
    searcher = ConcurrencyLimiter(searcher, max_concurrent=n_at_once)
    scheduler = None
    if not a.multi_objective and spec.search.get("asha", True) is not False and base.train.epochs > 1:
        asha = spec.search.get("asha") if isinstance(spec.search.get("asha"), dict) else {}
        scheduler = FinishingASHA(time_attr="training_iteration", max_t=base.train.epochs,
                                  grace_period=min(asha.get("grace_period", max(1, base.train.epochs // 2)),
                                                   base.train.epochs),
                                  reduction_factor=asha.get("reduction_factor", 2))
    opts = {"max_failures": a.max_failures, "placement": a.placement_strategy, "cpus": demand.cpus_per_worker,
            "gpus": demand.gpus_per_worker}
    trainable = tune.with_parameters(_trial, base=dataclasses.asdict(base), parent_run_id=parent,
                                     storage=storage, sweep_name=name, opts=opts)
    # the trial function only waits for its Ray Train workers: holding a CPU would leave one idle on a small machine
    trainable = tune.with_resources(trainable, {"cpu": 0, "memory": 1})  # Tune needs a non-empty bundle
    run_cfg = tune.RunConfig(name=name, storage_path=storage, callbacks=[live_callback(metric)], verbose=1,
                             failure_config=tune.FailureConfig(max_failures=0))
    exp_dir = os.path.join(storage, name)
    if a.resume and tune.Tuner.can_restore(exp_dir):
        tuner = tune.Tuner.restore(exp_dir, trainable=trainable, resume_unfinished=True, resume_errored=False)
    else:
        tuner = tune.Tuner(trainable, run_config=run_cfg,
                           tune_config=tune.TuneConfig(search_alg=searcher, scheduler=scheduler, num_samples=n_samples,
                                                       metric=None if a.multi_objective else metric,
                                                       mode=None if a.multi_objective else mode))
    return list(tuner.fit())


class PrunedAwareOptunaSearch(OptunaSearch):
    """Trials ASHA stopped before the last epoch are told to Optuna as PRUNED, not as finished. A proposal identical
    to a finished trial (TPE repeats itself in small categorical spaces) is not trained again: Optuna is told that
    trial's value and asked for another, up to ``max_resample`` times (a small space can be exhausted)."""

    max_resample = 20

    def __init__(self, *args, max_epochs: int = 1, **kw):
        super().__init__(*args, **kw)
        self.max_epochs = max_epochs

    def suggest(self, trial_id):
        from optuna.trial import TrialState

        for _ in range(self.max_resample):
            config = super().suggest(trial_id)
            ot = self._ot_trials.get(trial_id)
            same = ot is not None and next((t for t in self._ot_study.get_trials(deepcopy=False, states=(
                TrialState.COMPLETE,)) if t.params == ot.params), None)
            if not same:
                return config
            self._ot_study.tell(ot, same.values)  # what TPE would learn from training it again, for free
            del self._ot_trials[trial_id]
        return config

    def on_trial_result(self, trial_id, result):
        try:
            return super().on_trial_result(trial_id, result)
        except UpdateFinishedTrialError:
            pass  # resumed sweep: the RDB study already holds this trial's final value

    def on_trial_complete(self, trial_id, result=None, error=False):
        if result and not error and result.get("training_iteration", self.max_epochs) < self.max_epochs:
            result = None  # no value and no error → Optuna records the trial as PRUNED
        try:
            return super().on_trial_complete(trial_id, result, error)
        except UpdateFinishedTrialError:
            self._completed_trials.add(trial_id)


class FinishingASHA(ASHAScheduler):
    """ASHA that never stops a trial at its last epoch: Tune would kill it before its student is exported."""

    def on_trial_result(self, tune_controller, trial, result):
        action = super().on_trial_result(tune_controller, trial, result)
        if result.get(self._time_attr, 0) >= self._max_t:
            return self.CONTINUE
        return action


class SpaceFn:
    """Optuna define-by-run space (a picklable callable: Tune checkpoints the searcher)."""

    def __init__(self, spec, teacher):
        self.spec, self.teacher = spec, teacher

    def __call__(self, trial):
        from . import space as sp

        return sp.sample(self.spec, trial, self.teacher)


def _mean(values) -> float | None:
    vs = [v for v in values if v is not None]
    return round(sum(vs) / len(vs), 2) if vs else None


def finish(rows, metric, mode, base, parent, storage, name, wall, n_samples, log, n_at_once=1) -> dict:
    from . import track
    from .report import SHOW, pareto_plot, table

    out_dir = os.path.join(os.path.abspath(RESULTS_DIR), "sweeps", name)
    os.makedirs(out_dir, exist_ok=True)
    cols = ["trial", "status", metric, "epoch", "student_params", "latency_ms_b1"] + \
        [k for k in SHOW if any(r.get(k) is not None for r in rows)] + ["error"]
    text = table(rows, cols)
    with open(os.path.join(out_dir, "summary.txt"), "w") as f:
        f.write(text + "\n")
    with open(os.path.join(out_dir, "summary.json"), "w") as f:
        json.dump(rows, f, indent=1, default=str)
    png = pareto_plot(rows, metric, os.path.join(out_dir, "pareto.png"), maximize=mode == "max")
    for p in (os.path.join(out_dir, "summary.txt"), os.path.join(out_dir, "summary.json"), png):
        if p:
            track.log_artifact(base.tracking_uri, parent, p, "summary")
    track.close_children(base.tracking_uri, base.experiment, parent)
    done = [r for r in rows if r.get(metric) is not None]
    best = done[0] if done else None
    summary = {"sweep": name, "trials": len(rows), "errors": sum(r["status"] == "ERROR" for r in rows),
               "wall_s": round(wall, 1), "per_trial_s": round(wall / max(len(rows), 1), 1), "metric": metric,
               "fixed_cost_s": _mean(r.get("fixed_cost_s") for r in rows), "concurrency": n_at_once,
               "best": {k: best.get(k) for k in ["trial", metric, "student_params", "latency_ms_b1", *SHOW] if k in best}
               if best else None, "parent_run_id": parent, "tracking_uri": base.tracking_uri, "pareto_png": png}
    track.log_metrics(base.tracking_uri, parent, {"wall_s": wall, "trials": len(rows), f"best_{metric}": best[metric]}
                      if best else {"wall_s": wall, "trials": len(rows)})
    track.end_run(base.tracking_uri, parent)
    print("\n" + text, file=sys.stderr, flush=True)
    print(json.dumps(summary, default=str), flush=True)
    return summary


if __name__ == "__main__":
    main()
