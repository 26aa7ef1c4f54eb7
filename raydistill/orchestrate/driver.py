"""A sweep as the driver runs it: one object owns its state (the space, the base config, the parent MLflow run, the
resume record, the teacher's yardstick, the clock) and the command calls its steps in order — ``plan`` (everything
checked before Ray starts), ``start`` (Ray, the parent run, the resume record), ``prepare`` (the teacher, augmented
sets, the yardstick), ``search`` (the trials), ``confirm`` (the top trials with more seeds), ``control`` (the winner's
student on gold labels alone) and ``finish`` (the summary). Ctrl-C between any two steps leaves a sweep that
``--resume`` continues."""

from __future__ import annotations

import dataclasses
import json
import os
import sys
import time
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from raydistill.common.errors import UserError, check
from raydistill.common.hub import is_local
from raydistill.common.paths import is_uri, results_path, storage_location, write_json_atomic
from raydistill.config.schema import RunConfig
from raydistill.config.sizes import Shape
from raydistill.orchestrate.plan import base_config, default_experiment, objective_of, task_and_data, trial_demand
from raydistill.orchestrate.request import SECOND_OBJECTIVE, SweepRequest
from raydistill.orchestrate.resources import Cluster, TrialDemand, concurrency
from raydistill.tracking.track import Tracker

STATE = "raydistill_sweep.json"


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def state_path(storage_path: str | None, name: str) -> str:
    """Where a sweep keeps what ``--resume`` needs (beside its Tune experiment, or locally for a remote one)."""
    storage = storage_location(storage_path)
    if is_uri(storage):
        return results_path("sweeps", name, STATE)
    return os.path.join(storage, name, STATE)


@dataclass
class Sweep:
    """The driver's state of one sweep (see the module's docstring for its steps)."""

    request: SweepRequest
    spec: Any  # config.space.SweepSpec
    base: RunConfig
    name: str
    storage: str
    metric: str
    mode: str
    n_samples: int
    demand: TrialDemand
    machine: Cluster | None  # this machine, when the sweep starts its own Ray
    teacher_shape: Shape
    confirm_plan: dict[str, int]
    control_seeds: int  # the labels-only control's seeds (search.control; 0: none)
    state: dict[str, Any] = field(default_factory=dict)
    parent: str = ""
    n_at_once: int = 1
    reference: dict[str, Any] = field(default_factory=dict)
    opts: Any = None  # orchestrate.tuner.TrialOpts
    clock: Any = None  # train.loop.Clock: the work around the trials
    started: float = 0.0

    @cached_property
    def tracker(self) -> Tracker:
        """The sweep's MLflow store and experiment: the base config's, which ``plan`` settles."""
        return Tracker(self.base.tracking_uri, self.base.experiment)

    # ------------------------------------------------------------------ before Ray
    @classmethod
    def plan(cls, request: SweepRequest, state: dict[str, Any]) -> Sweep:
        """The space, the base config and every check that needs no Ray: a sweep that cannot run stops here, before
        anything is logged. ``state``: what a resumed sweep recorded (empty for a new one)."""
        from raydistill.config import space as sp
        from raydistill.selection.settings import confirm_of, control_seeds
        from raydistill.train.preflight import teacher_config

        a = request
        spec = sp.load(a.space, a.overrides)
        # the space's own defaults for the two scheduling keys it may carry; flags win
        a = dataclasses.replace(
            a,
            num_workers=a.num_workers if a.num_workers is not None else spec.raw.get("num_workers", 1),
            max_concurrent=a.max_concurrent if a.max_concurrent is not None else spec.raw.get("max_concurrent"),
        )
        teacher = a.teacher or spec.teacher or "bert-base-uncased"
        teacher = os.path.abspath(os.path.expanduser(teacher)) if is_local(teacher) else teacher  # trials run elsewhere
        task, data = task_and_data(a, spec, teacher)
        a = dataclasses.replace(a, experiment=a.experiment or default_experiment(spec.name, task.name, state))
        name = a.name or f"{spec.name}-{task.name}-{time.strftime('%Y%m%d-%H%M%S')}"
        n_samples = a.num_samples if a.num_samples is not None else spec.num_samples
        demand = trial_demand(a, n_samples)
        storage_root = results_path()
        output = os.path.join(storage_root, "students", name, "student")
        base = base_config(a, spec, task.name, teacher, output, data)
        metric = objective_of(spec, task, base)
        check(a.teacher_epochs >= 1, "teacher_epochs", f"must be >= 1, got {a.teacher_epochs}")
        check(a.teacher_lr > 0, "teacher_lr", f"must be > 0, got {a.teacher_lr}")
        machine = None if os.environ.get("RAY_ADDRESS") else Cluster.local()
        if machine:  # the Ray this command starts has this machine's CPUs and GPUs: a trial that can't fit stops here
            concurrency(demand, machine, a.max_concurrent, n_samples)
        sweep = cls(
            request=a,
            spec=spec,
            base=base,
            name=name,
            storage=storage_location(a.storage_path),
            metric=metric,
            mode=spec.mode,
            n_samples=n_samples,
            demand=demand,
            machine=machine,
            teacher_shape=Shape.of(teacher_config(teacher)),
            confirm_plan=confirm_of(spec.search) if not a.multi_objective else {"top": 0, "seeds": 0},
            control_seeds=control_seeds(spec.search),
            state=state,
        )
        sweep._preflight()
        return sweep

    def _preflight(self) -> None:
        """Fail fast, before Ray or any training: the data is there, the first sample builds (the teacher was read
        for its shape)."""
        from raydistill.config import space as sp
        from raydistill.config.schema import task_of
        from raydistill.data.splits import train_and_eval_examples
        from raydistill.train.preflight import preflight

        train_and_eval_examples(self.base, task_of(self.base))
        first = sp.trial_config(self.base, sp.sample(self.spec, None, self.teacher_shape))
        preflight(first, load_data=False, require_head=False)  # types, bounds, sizes, mapping: before any run
        self._same_data()

    def _same_data(self) -> None:
        """A resumed sweep's trials and the new ones must have trained and chosen on the same rows: a sweep started
        on other data (other files, or the validation split of an older version) is refused, never mixed."""
        from raydistill.data.splits import data_fingerprint

        now = data_fingerprint(self.base)
        if self.state.get("parent_run_id") and self.state.get("data_fingerprint") != now:
            raise UserError(
                "resume",
                f"sweep {self.name!r} was started on other training or validation rows (other data files, or the "
                "validation split of an older raydistill); start a new sweep (another --name, or no --resume)",
            )
        self.state["data_fingerprint"] = now

    # ------------------------------------------------------------------ Ray and the parent run
    def start(self) -> None:
        """The resume record, Ray, and the parent MLflow run (resumed: the same one, RUNNING again)."""
        from raydistill.common.interrupts import at_signal, on_interrupt, resume_hint
        from raydistill.orchestrate.connect import cluster as joined
        from raydistill.orchestrate.connect import init_ray, mute_workers, shutdown
        from raydistill.train.loop import Clock

        a = self.request
        if not a.resume:
            from raydistill.orchestrate.repeat import check_new_name

            check_new_name(self, state_path(a.storage_path, self.name))
        self.state = {**self.state, "request": a.record(), "name": self.name, "experiment": self.base.experiment}
        self._save()  # resumable from here on: Ctrl-C, SIGTERM or a lost driver
        resume_hint(
            f"python -m raydistill.sweep --resume --name {self.name}"
            + (f" --storage-path {a.storage_path}" if a.storage_path else "")
        )
        self.clock = Clock()  # the work a sweep does around its trials: Ray start, teacher, reference, re-timing
        # before any MLflow run: a refused connection must not leave a parent run open
        started = init_ray(verbose=a.verbose)
        at_signal(mute_workers)  # Ctrl-C: trial actors Ray kills while the sweep unwinds print nothing
        on_interrupt(self._close_late_trials)  # after Ray is stopped: cleanups run last registered first
        if started:  # a Ray the caller started (raydistill.api) is theirs to stop
            on_interrupt(shutdown)  # the trials' forwarded output ends before the one line
        cluster = self.machine or joined()
        self.n_at_once = concurrency(self.demand, cluster, a.max_concurrent, self.n_samples)
        log(
            f"{self.n_at_once} trial(s) at once: the cluster has {cluster.cpus:g} CPUs and {cluster.gpus:g} GPUs, one "
            f"trial takes {self.demand.num_workers} worker(s) × {self.demand.cpus_per_worker:g} CPU"
            + (f" + {self.demand.gpus_per_worker:g} GPU" if self.demand.gpus_per_worker else "")
            + (f" (--max-concurrent {a.max_concurrent})" if a.max_concurrent else "")
        )
        on_interrupt(self._killed)  # before the parent opens: a Ctrl-C while it opens still ends it
        self._open_parent()
        self.clock.lap("ray_start")

    def _open_parent(self) -> None:
        """The parent run opened (or reopened) and recorded with Ctrl-C held: one arriving as it opens lands once its
        id is known, so the interrupt's cleanup ends it KILLED rather than leaving it RUNNING."""
        from raydistill.common.outputs import signals_held

        with signals_held():
            self._open_parent_run()

    def _open_parent_run(self) -> None:
        from raydistill.data.splits import data_fingerprint

        b = self.base
        self.parent = self.state.get("parent_run_id") or self.tracker.start_run(
            self.name,
            {
                "space": self.spec.name,
                "task": b.task,
                "teacher": b.teacher,
                "metric": self.metric,
                "mode": self.mode,
                "num_samples": self.n_samples,
                "data_fingerprint": data_fingerprint(b),
                "search": json.dumps(self.spec.search),
                **({"storage_path": self.request.storage_path} if self.request.storage_path else {}),
            },
            tags={"raydistill.role": "sweep"},
        )
        if self.state.get("parent_run_id"):  # resumed: the parent (and its trials) go on, RUNNING again
            self.tracker.reopen_run(self.parent)
        self.state["parent_run_id"] = self.parent
        self._save()

    def _killed(self) -> None:
        """Ctrl-C / SIGTERM: the running trials and the parent end KILLED, resumable."""
        self._end(reason="interrupted", status="KILLED")

    def failed(self, e: BaseException) -> None:
        """Any other error once the parent is open (a teacher's fine-tune, Tune, MLflow): the running trials and the
        parent end FAILED with why, never left RUNNING; the error itself goes on to the command."""
        from raydistill.common.errors import failure_reason

        try:
            if self.parent:
                self.tracker.set_tags(self.parent, {"error": failure_reason(e)[:5000]})
        finally:
            self._end(reason="failed", status="FAILED")

    def _end(self, reason: str, status: str) -> None:
        if not self.parent:  # stopped before the parent opened
            return
        try:
            self.tracker.close_children(self.parent, reason=reason)
        finally:  # the parent ends even where its trials could not be closed
            self.tracker.end_run(self.parent, status)

    def _close_late_trials(self) -> None:
        """Ctrl-C / SIGTERM, once Ray is stopped: a trial that opened its MLflow run after ``_killed`` closed the
        others (its actor was starting as the sweep unwound) ends KILLED too, never left RUNNING."""
        if self.parent:  # opened: an interrupt before it has no trials
            self.tracker.close_children(self.parent, reason="interrupted")

    def _save(self) -> None:
        write_json_atomic(state_path(self.request.storage_path, self.name), self.state)  # a killed driver: old or new

    # ------------------------------------------------------------------ the teacher and its yardstick
    def prepare(self) -> None:
        """The teacher fine-tuned where it has no task head, the augmented sets built once, the teacher measured as
        every trial's yardstick; the parent run records the space and the yardstick."""
        from raydistill.config import space as sp
        from raydistill.data.augment_sets import build_sets
        from raydistill.teacher.fit import prepare_teacher
        from raydistill.train.preflight import preflight

        a = self.request
        root = results_path()
        teacher = self.state.get("teacher") or prepare_teacher(
            self.base, root, self.parent, log, epochs=a.teacher_epochs, lr=a.teacher_lr
        )
        self.base = self.base.replace(teacher=teacher)
        augment_dirs = build_sets(self.spec.raw.get("augment"), self.base, root, log)  # once, shared by the trials
        self.clock.lap("teacher")
        preflight(sp.trial_config(self.base, sp.sample(self.spec, None, self.teacher_shape)), load_data=False)
        self.state.update(teacher=self.base.teacher, concurrency=self.state.get("concurrency") or self.n_at_once)
        self._save()
        self.n_at_once = self.state["concurrency"]  # a resumed sweep keeps the concurrency it started with
        self._measure_teacher()
        self.tracker.log_artifact(self.parent, sp.resolve_path(a.space), "space")
        self.opts = self._trial_opts(augment_dirs)

    def _measure_teacher(self) -> None:
        from raydistill.config.schema import task_of
        from raydistill.orchestrate.resources import threads
        from raydistill.results.report import size
        from raydistill.selection.runs import report_metric
        from raydistill.teacher.reference import teacher_reference, weak_teacher

        ref = teacher_reference(self.base, threads(self.demand.cpus_per_worker), log)  # every trial's yardstick
        metrics = dict.fromkeys((self.metric, report_metric(self.metric)))
        shown = [m[len("best_") :] for m in metrics if m.startswith("best_")]
        shown += [m for m in ("eval_macro_f1",) if m in ref and m not in shown]  # beside a task's metric (issue 48)
        log(
            "teacher: " + ", ".join(f"{m}={ref.get(m)}" for m in shown) + f", {size(ref['student_params'])} "
            f"params, {ref['latency_ms_b1']:.1f} ms at batch 1"
        )
        warning = weak_teacher(ref, task_of(self.base))
        if warning:
            log(warning)
        self.clock.lap("teacher_reference")
        self.tracker.log_metrics(self.parent, {f"teacher_{k}": v for k, v in ref.items()})
        self.reference = ref

    def _trial_opts(self, augment_dirs: dict[int, str]) -> Any:
        """The options every trial (and its confirmation) runs with."""
        from raydistill.orchestrate.tuner import trial_opts

        a = self.request
        in_process = (
            self.demand.in_process()
            and self.machine is not None
            and not is_uri(self.storage)
            and not a.ray_train_trials
        )
        return trial_opts(
            self.demand,
            max_failures=a.max_failures,
            placement=a.placement_strategy,
            verbose=a.verbose,
            in_process=in_process,
            augment_dirs=augment_dirs,
        )

    # ------------------------------------------------------------------ the trials
    def search(self) -> tuple[list[dict[str, Any]], dict[str, str]]:
        """Every trial of the space (Tune + Optuna + ASHA): the summary rows and each trial's MLflow run id."""
        from raydistill.orchestrate.tuner import run_trials

        self.started = time.time()
        results = run_trials(
            self.spec,
            self.trials(),
            metric=self.metric,
            mode=self.mode,
            n_samples=self.n_samples,
            teacher=self.teacher_shape,
            multi_objective=SECOND_OBJECTIVE.get(self.request.multi_objective or ""),
        )
        self.clock.lap("trials")
        return self.rows(results)

    def confirm(
        self, rows: list[dict[str, Any]], run_ids: dict[str, str]
    ) -> tuple[list[dict[str, Any]], dict[str, str], list[dict[str, Any]] | None]:
        """``search.confirm``: the top trials re-trained with more seeds; (all rows, run ids, one row per confirmed
        configuration) — or the rows unchanged and None where the space confirms nothing."""
        plan = self.confirm_plan
        if not (plan["top"] and plan["seeds"]):
            return rows, run_ids, None
        from raydistill.orchestrate.confirm import confirm_points
        from raydistill.selection.runs import candidates, confirmed_rows, report_metric

        top = candidates(rows, self.metric, plan["top"])
        log(f"confirming the top {len(top)} trial(s) with {plan['seeds']} more seed(s) each (search.confirm)")
        results = self.retrain(confirm_points(top, self.base.train.seed, plan["seeds"]), "confirm")
        c_rows, c_ids = self.rows(results)
        confirmed = confirmed_rows(rows, c_rows, self.metric, report_metric(self.metric), self.mode)
        self.clock.lap("confirm")
        return rows + c_rows, {**run_ids, **c_ids}, confirmed

    def retrain(self, points: list[dict[str, Any]], suffix: str) -> list:
        """Trials trained again outside the search (the confirmation's fresh seeds, the labels-only control), as the
        Tune experiment ``NAME-suffix`` beside the sweep's."""
        from raydistill.orchestrate.confirm import run_confirm

        return run_confirm(points, self.trials(), suffix)

    def trials(self) -> Any:
        """How the sweep's trials run (``tuner.SweepTrials``), once ``prepare`` has settled the teacher, the trial
        options and the concurrency."""
        from raydistill.orchestrate.tuner import SweepTrials

        return SweepTrials(
            self.base, self.storage, self.name, self.parent, self.opts, self.n_at_once, self.request.resume
        )

    def control(
        self, rows: list[dict[str, Any]], run_ids: dict[str, str], confirmed: list[dict[str, Any]] | None
    ) -> dict[str, Any] | None:
        """``search.control``: the winner's student trained on gold labels alone with fresh seeds, and the verdict of
        the winner against it on dev (``results.verdict``); None where the space asks for no control. A control that
        cannot be judged says why and never costs the sweep its summary."""
        if not self.control_seeds:
            return None
        from raydistill.orchestrate.control import control_points
        from raydistill.selection.runs import winner

        best = winner(rows, self.metric, confirmed)
        if best is None:
            return {"verdict": None, "reason": "no trial exported a student"}
        points = control_points(best, self.base, self.base.train.seed, self.control_seeds)
        log(f"labels-only control: the winner's student ({best['trial']}) on gold labels alone, {len(points)} seed(s)")
        results = self.retrain(points, "control")
        c_rows, c_ids = self.rows(results)
        won = self._winner(best, {**run_ids, **c_ids}, confirmed)
        out = self._judge(won, c_rows, {**run_ids, **c_ids}, points[0])
        self.clock.lap("control")
        return out

    def _winner(self, best: dict[str, Any], run_ids: dict[str, str], confirmed: list[dict[str, Any]] | None) -> Any:
        """The winner as the verdict judges it: its student, its metric's mode, its fresh seeds' dev range (where a
        confirmation trained two or more)."""
        from raydistill.results.verdict import Winner
        from raydistill.selection.runs import report_metric

        top = (confirmed or [{}])[0]
        spread = top.get(f"range_{report_metric(self.metric)}") if top.get("seeds", 0) > 1 else None
        return Winner(self._student(best, run_ids), self.mode, spread)

    def _judge(
        self, won: Any, c_rows: list[dict[str, Any]], run_ids: dict[str, str], point: dict[str, Any]
    ) -> dict[str, Any]:
        """The winner against the control's exported students, with what the control trained."""
        from raydistill.results.verdict import compare

        done = [r for r in c_rows if r["exported"]]
        errors = {r["trial"]: r["error"] for r in c_rows if r["status"] == "ERROR"}
        about = {"method": "finetune", "init": point["init"], "seeds": len(c_rows), "errors": errors}
        if not done:
            return {"verdict": None, "reason": "no control run exported a student", **about}
        try:
            return {
                **compare(
                    self.base,
                    self.tracker,
                    self.metric,
                    won,
                    [self._student(r, run_ids) for r in done],
                ),
                **about,
            }
        except Exception as e:  # the sweep's own results stand; the control says why it has no verdict
            from raydistill.common.errors import failure_reason

            return {"verdict": None, "reason": f"the comparison failed: {failure_reason(e)[:200]}", **about}

    def _student(self, row: dict[str, Any], run_ids: dict[str, str]) -> Any:
        from raydistill.results.verdict import Student

        return Student(
            trial=row["trial"],
            run_id=run_ids.get(row["trial"], ""),
            folder=os.path.join(os.path.dirname(self.base.output), row["trial"]),
            max_length=int(row["config"].get("max_length", self.base.train.max_length)),
            val=row.get(self.metric),
        )

    def rows(self, results: Any) -> tuple[list[dict[str, Any]], dict[str, str]]:
        """Summary rows of Tune results, with what their MLflow runs logged, and each trial's run id."""
        from raydistill.results.summary import summarize

        b = self.base
        children = self.tracker.child_runs(self.parent)
        finished = {t for t, r in children.items() if r.info.status == "FINISHED"}
        logged = {t: dict(r.data.metrics) for t, r in children.items()}
        rows = summarize(results, self.metric, self.mode, b.train.epochs, logged, finished=finished)
        return rows, {t: r.info.run_id for t, r in children.items()}

    # ------------------------------------------------------------------ the end
    def finish(
        self,
        rows: list[dict[str, Any]],
        run_ids: dict[str, str],
        confirmed: list[dict[str, Any]] | None,
        control: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """The teacher re-timed beside the students, then the summary (results.summary)."""
        from raydistill.orchestrate.resources import threads
        from raydistill.results.summary import SweepOutcome, finish
        from raydistill.teacher.reference import remeasure_latency

        wall = time.time() - self.started
        ref = remeasure_latency(rows, self.base, self.reference, threads(self.demand.cpus_per_worker), log, run_ids)
        self.tracker.log_metrics(self.parent, {"teacher_latency_ms_b1": ref["latency_ms_b1"]}, step=1)
        self.clock.lap("latency_retime")
        outcome = SweepOutcome(
            name=self.name,
            base=self.base,
            tracker=self.tracker,
            parent=self.parent,
            metric=self.metric,
            mode=self.mode,
            concurrency=self.n_at_once,
            wall_s=wall,
            teacher=ref,
            front_by=SECOND_OBJECTIVE.get(self.request.multi_objective or "") or "latency_ms_b1",
            run_ids=run_ids,
            confirmed=confirmed,
            control=control,
            timings={k: round(v, 2) for k, v in self.clock.spent.items()},
        )
        return finish(outcome, rows)
