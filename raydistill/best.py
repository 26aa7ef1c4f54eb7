"""python -m raydistill.best --experiment NAME: the best trial of a sweep, exported as a Hugging Face directory.

Prints the best trial's params and metric (last stdout line: JSON). ``--export DIR`` writes its student
(model + tokenizer) for ``AutoModelFor….from_pretrained`` / ``pipeline()``; ``--onnx`` adds ``model.onnx``;
``--quantize`` (with ``--onnx``) adds ``model.int8.onnx``, re-scores both ONNX files on the run's dev set, times them
at batch 1 against the fp32 teacher in ONNX Runtime (same runtime, the headline) and in PyTorch (cross-runtime) and
logs the numbers to the trial's run (``raydistill.export.quantize``);
``--register NAME`` puts it in the MLflow model registry under the alias ``champion`` (stages are deprecated).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shutil
import sys
import time
from typing import Any

from raydistill.commands.cli import HelpFormatter, Parser, add_overwrite, cli
from raydistill.common.errors import UserError, check
from raydistill.common.outputs import adding_to
from raydistill.results.classes import of_runs
from raydistill.tracking.track import Tracker

ALL = "all"  # --sweep all: every sweep of the experiment, where they agree on what a score means
SAME = ("task", "data_fingerprint", "metric", "mode")  # what sweeps ranked together must share (their parent runs)


@dataclasses.dataclass(frozen=True)
class Scope:
    """The trials a pick ranks: those of ``sweeps`` (empty: every trial of an experiment that recorded no sweep),
    ``parent`` the sweep run holding the objective and mode (None: none recorded), ``said`` the words naming them,
    ``hint`` how to rank others where the experiment holds more, ``known`` the experiment's sweeps, newest first."""

    sweeps: tuple[str, ...]
    parent: Any
    said: str
    hint: str = ""
    known: tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True)
class Pick:
    run: Any
    metric: str
    mean: float | None  # None where no score is finite (pick_confirmed)
    mode: str
    scope: Scope


def find_best(
    tracker: Tracker,
    metric: str | None,
    mode: str | None,
    sweep: str | None = None,
    max_latency_ms: float | None = None,
    max_params: float | None = None,
):
    """``choose`` as (run, metric, mean, mode)."""
    p = choose(tracker, metric, mode, sweep, max_latency_ms, max_params)
    return p.run, p.metric, p.mean, p.mode


def choose(
    tracker: Tracker,
    metric: str | None,
    mode: str | None,
    sweep: str | None = None,
    max_latency_ms: float | None = None,
    max_params: float | None = None,
) -> Pick:
    """The best finished trial run of one sweep of ``tracker``'s experiment: ``sweep`` by name, the latest without
    one, or every sweep (``all``) where they share task, data and metric. Ranked by a per-run final ``metric``
    (default: the sweep's own, ``best_val_*``: chosen on the validation split) in ``mode`` (default: the sweep's own,
    recorded with its parent run; else max). A sweep that confirmed its top configurations with more seeds is decided
    by their mean, and the winner's best seed is returned, as the sweep's summary names it."""
    from raydistill.config.selection import pick_confirmed

    experiment_id = _experiment_id(tracker)
    scope = _scope(tracker, experiment_id, sweep)
    runs = _finished_trials(tracker, experiment_id, scope)
    parent = scope.parent
    mode = mode or (parent.data.params.get("mode") if parent else None) or "max"
    if metric is None:
        metric = _sweep_metric(runs, parent)
    metric, scored = _scored(runs, metric)
    best, mean = pick_confirmed(_within_bounds(scored, max_latency_ms, max_params), metric, mode)
    return Pick(best, metric, mean, mode, scope)


def _experiment_id(tracker: Tracker) -> str:
    """The experiment's id; a name it does not know is the user's error, naming the experiments that start so (the
    sweep's default experiment is SPACE-TASK)."""
    c, experiment = tracker.client, tracker.experiment
    exp = c.get_experiment_by_name(experiment)
    if exp is None:
        near = sorted(e.name for e in c.search_experiments(max_results=1000) if e.name.startswith(experiment))
        raise UserError(
            "experiment",
            f"no MLflow experiment {experiment!r} at {tracker.uri}; "
            + (f"the store has {', '.join(near[:6])}; " if near else "")
            + "check --experiment (a sweep's default: SPACE-TASK, e.g. pkd_glue-rte) and --tracking-uri",
        )
    return exp.experiment_id


def _scope(tracker: Tracker, experiment_id: str, sweep: str | None) -> Scope:
    """Which sweep(s) to rank, from the experiment's sweep runs (newest first)."""
    parents = tracker.client.search_runs(
        [experiment_id],
        filter_string="tags.`raydistill.role` = 'sweep'",
        max_results=1000,
        order_by=["attributes.start_time DESC"],
    )
    exp, known = repr(tracker.experiment), tuple(p.info.run_name for p in parents)
    if sweep and sweep != ALL:
        named = [p for p in parents if p.info.run_name == sweep]
        return Scope((sweep,), named[0] if named else None, f"sweep {sweep!r}", known=known)
    if not parents:  # trials an older raydistill (or a hand-made store) logged without a sweep run: all of them
        return Scope((), None, f"every trial of experiment {exp} (it records no sweep)")
    if sweep == ALL:
        _check_comparable(parents)
        return Scope(known, parents[0], f"all {len(known)} sweeps of experiment {exp}", known=known)
    name, n = parents[0].info.run_name, len(parents)
    if n == 1:
        return Scope((name,), parents[0], f"sweep {name!r}", known=known)
    hint = " (--sweep NAME picks another, --sweep all ranks those of one task, data and metric together)"
    return Scope((name,), parents[0], f"sweep {name!r}, the latest of {n} in experiment {exp}", hint, known)


def _check_comparable(parents: list) -> None:
    """``--sweep all`` ranks scores that mean the same: every sweep of one task, data and metric; else one line
    naming the sweeps that differ."""
    first = parents[-1]  # the oldest: what the others are compared with

    def differs(p) -> list[str]:
        return [k for k in SAME if p.data.params.get(k) != first.data.params.get(k)]

    odd = [f"{p.info.run_name} ({', '.join(differs(p))})" for p in parents if differs(p)]
    check(
        not odd,
        "sweep",
        f"--sweep all ranks sweeps of one task, data and metric; these differ from {first.info.run_name!r}: "
        f"{'; '.join(odd)}; pass --sweep NAME for one of them",
    )


def _finished_trials(tracker: Tracker, experiment_id: str, scope: Scope) -> list:
    """The finished trial runs of ``scope``; none is the user's error."""
    filt = "attributes.status = 'FINISHED' and tags.`raydistill.trial_id` != ''"
    if len(scope.sweeps) == 1:
        filt += f" and tags.`raydistill.sweep` = '{scope.sweeps[0]}'"
    runs = tracker.client.search_runs([experiment_id], filter_string=filt, max_results=5000)
    if len(scope.sweeps) > 1:
        runs = [r for r in runs if r.data.tags.get("raydistill.sweep") in scope.sweeps]
    others = [k for k in scope.known if k not in scope.sweeps]
    check(
        bool(runs),
        "experiment" if not scope.sweeps else "sweep",
        f"{scope.said} has no finished trials yet"
        + (f"; pass --sweep NAME for another of the experiment's sweeps: {', '.join(others[:6])}" if others else ""),
    )
    return runs


def _sweep_metric(runs: list, parent) -> str | None:
    """No --metric: the sweep's own; without a recorded sweep, the first ``best_val_*`` (else ``best_eval_*``) the
    runs logged."""
    finals = sorted(
        {k for r in runs for k in r.data.metrics if k.startswith("best_val_")}
        or {k for r in runs for k in r.data.metrics if k.startswith("best_eval_")}
    )
    return parent.data.params.get("metric") if parent else (finals[0] if finals else None)


def _scored(runs: list, metric: str | None) -> tuple[str, list]:
    """The final form of ``metric`` and the runs that logged it; none is the user's error, naming what was logged."""
    from raydistill.config.selection import as_final

    check(bool(metric), "metric", "no trial logged a best_val_* or best_eval_* metric; pass --metric")
    assert metric is not None  # (check refused it otherwise)
    metric = as_final(metric)
    scored = [r for r in runs if metric in r.data.metrics]
    finals = sorted({k for r in runs for k in r.data.metrics if k.startswith(("best_val_", "best_eval_"))})
    check(
        bool(scored), "metric", f"no finished trial logged {metric!r}; pass --metric with one of: {', '.join(finals)}"
    )
    return metric, scored


def _within_bounds(scored: list, max_latency_ms: float | None, max_params: float | None) -> list:
    """The scored runs within ``--max-latency-ms`` and ``--max-params``; none left is the user's error, naming the
    smallest there is."""
    for flag, key, bound in (
        ("max_latency_ms", "latency_ms_b1", max_latency_ms),
        ("max_params", "student_params", max_params),
    ):
        if bound is None:
            continue
        within = [r for r in scored if r.data.metrics.get(key, float("inf")) <= bound]
        least = min((r.data.metrics[key] for r in scored if key in r.data.metrics), default=None)
        check(
            bool(within),
            flag,
            f"no finished trial has {key} <= {bound:g} (the smallest is {least}); raise "
            f"--{flag.replace('_', '-')} or search smaller students",
        )
        scored = within
    return scored


def export(tracker: Tracker, run_id: str, out_dir: str) -> str:
    import mlflow

    from raydistill.common.outputs import publish, staging

    assert tracker.uri is not None  # main resolved it (_checked)
    mlflow.set_tracking_uri(tracker.uri)
    tmp = staging(out_dir)
    try:
        src = mlflow.artifacts.download_artifacts(run_id=run_id, artifact_path="student", dst_path=tmp)
        return publish(src, out_dir, "raydistill best --export")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def check_onnx_installed() -> None:
    """``--onnx`` needs the ``[onnx]`` extra (onnx, onnxruntime), which a plain install leaves out."""
    missing = []
    for name in ("onnx", "onnxruntime"):
        try:
            __import__(name)
        except ImportError:
            missing.append(name)
    check(
        not missing,
        "onnx",
        f"--onnx needs {' and '.join(missing)}, which a plain install leaves out; install the "
        '[onnx] extra: pip install -c constraints.txt -e ".[onnx]" (or pip install onnx onnxruntime)',
    )


def export_onnx(model_dir: str, kind: str, length: int = 128, segments: bool = False) -> dict:
    """ONNX export of the student plus a check that ONNX Runtime matches PyTorch within 1e-4. ``segments``
    (sentence-pair and QA tasks): the file also takes ``token_type_ids``, which BERT's second segment needs."""
    from raydistill.export.onnx import OPSET, to_onnx
    from raydistill.models.latency import measure_latency
    from raydistill.models.teacher import load_model

    model = load_model(model_dir, kind, attn_implementation="eager").eval()
    path = os.path.join(model_dir, "model.onnx")
    print(f"ONNX export of {model_dir} (opset {OPSET}) …", file=sys.stderr, flush=True)
    t0 = time.perf_counter()
    diff, sess, one = to_onnx(model, kind, path, length, segments)
    print(
        f"ONNX export done in {time.perf_counter() - t0:.1f} s; ONNX Runtime matches PyTorch within {diff:.1e}",
        file=sys.stderr,
        flush=True,
    )
    torch_ms = measure_latency(model, batch_sizes=(1,), length=length)["latency_ms_b1"]

    times = []
    for i in range(12):
        t0 = time.perf_counter()
        sess.run(None, one)
        if i >= 2:
            times.append((time.perf_counter() - t0) * 1000)
    return {
        "onnx_path": path,
        "onnx_max_abs_diff": diff,
        "torch_latency_ms_b1": torch_ms,
        "onnx_latency_ms_b1": sorted(times)[len(times) // 2],
    }


ALIAS = "champion"


def register(tracker: Tracker, run_id: str, name: str, alias: str = ALIAS) -> str:
    """Register the run's logged model (what the UI's Models column links; the run's student files for runs logged
    before there was one) and point ``alias`` at the new version: ``models:/NAME@champion``."""
    import mlflow

    c = tracker.client
    run = c.get_run(run_id)
    logged = c.search_logged_models(
        [run.info.experiment_id], filter_string=f"source_run_id = '{run_id}'", max_results=1
    )
    assert tracker.uri is not None  # main resolved it (_checked)
    mlflow.set_tracking_uri(tracker.uri)
    source = f"models:/{logged[0].model_id}" if logged else f"{run.info.artifact_uri}/student"
    mv = mlflow.register_model(source, name)
    c.set_registered_model_alias(name, alias, mv.version)
    return mv.version


def parser() -> Parser:
    p = Parser(
        prog="python -m raydistill.best",
        formatter_class=HelpFormatter,
        description=(
            "Pick the best trial of a sweep from MLflow and print its params and scores (one JSON object, the last "
            "line of stdout). --export DIR writes its student (model + tokenizer) as a folder that transformers and "
            "pipeline() load; --onnx adds model.onnx; --quantize adds an INT8 model.int8.onnx, re-scored on the run's "
            "dev set and timed against the teacher; --register NAME registers it in the MLflow model registry and "
            f"points the alias '{ALIAS}' at the new version (models:/NAME@{ALIAS})."
        ),
    )
    p.add_argument(
        "--experiment",
        required=True,
        help="MLflow experiment of the sweep (the sweep's --experiment; by default SPACE-TASK, e.g. pkd_glue-rte, "
        "pkd_glue-reviews for reviews.csv)",
    )
    p.add_argument("--tracking-uri", help="MLflow URI the sweep logged to (default: sqlite under ./raydistill-results)")
    p.add_argument(
        "--metric",
        help="per-run metric to rank by: best_val_<m> (chosen on the validation split), "
        "best_eval_<m> (dev), or eval_<m>/val_<m> meaning the same (default: the sweep's own, best_val_<m>)",
    )
    p.add_argument(
        "--mode",
        default=None,
        choices=["max", "min"],
        help="whether higher or lower --metric is better "
        "(default: the sweep's own mode, recorded with its parent run; max for sweeps that did not record one)",
    )
    p.add_argument(
        "--sweep",
        help="the sweep whose trials to rank (its name, as the sweep's summary prints it), or 'all': every sweep in "
        "the experiment, refused unless they share task, data and metric (default: the latest sweep in the experiment)",
    )
    _add_output_args(p)
    p.add_argument(
        "--max-latency-ms",
        type=float,
        help="the best trial whose batch-1 latency (latency_ms_b1) is at most this (default: no bound)",
    )
    p.add_argument(
        "--max-params",
        type=float,
        help="the best trial whose student has at most this many parameters (default: no bound)",
    )
    return p


def _add_output_args(p: Parser) -> None:
    """Where the chosen student goes: a folder (+ ONNX, INT8) and the model registry."""
    p.add_argument("--export", help="write the best student to this folder (model + tokenizer; default: no export)")
    add_overwrite(p, "raydistill best --export", "--export")
    p.add_argument("--onnx", action="store_true", help="with --export: also write model.onnx and compare latency")
    p.add_argument(
        "--quantize",
        action="store_true",
        help="with --export --onnx: also write the INT8 model.int8.onnx, "
        "re-score it and the fp32 file on the run's dev set, time both at batch 1 against the fp32 teacher "
        "in ONNX Runtime (same runtime) and PyTorch (cross-runtime), and log the numbers to the trial's run",
    )
    p.add_argument(
        "--register",
        help="register the best student in the MLflow model registry under this name, "
        f"with the alias '{ALIAS}' on the new version (default: not registered)",
    )


@cli
def main(argv=None) -> dict:
    out = run(argv)
    print(json.dumps(out, default=str), flush=True)
    return out


def run(argv=None) -> dict:
    """The best trial these flags pick, exported and registered as they ask: what ``main`` prints
    (``raydistill.api``'s ``best_student`` runs the same). Bad input is a UserError before MLflow is read."""
    a = parser().parse_args(argv)
    tracker = Tracker(_checked(a), a.experiment)
    pick = choose(tracker, a.metric, a.mode, a.sweep, a.max_latency_ms, a.max_params)
    best = pick.run
    out = _result(best, pick.metric, pick.mean, pick.mode)
    print(_summary(pick, out), file=sys.stderr, flush=True)
    classes, table = of_runs(best, pick.scope.parent)  # macro-F1 and each class's recall, the teacher's beside
    out.update(classes)
    if table:
        print(table, file=sys.stderr, flush=True)
    if a.export:
        out["export"] = export(tracker, best.info.run_id, os.path.abspath(a.export))
        with adding_to(out["export"], "raydistill best --export"):
            out.update(_onnx_and_int8(a, tracker, best, out["export"]))
    if a.register:
        version = register(tracker, best.info.run_id, a.register)
        out["registered"] = {"name": a.register, "version": version, "alias": ALIAS}
    return out


def _checked(a: argparse.Namespace) -> str:
    """Every flag checked before MLflow is read; the tracking URI to read."""
    check(not a.onnx or bool(a.export), "onnx", "--onnx needs --export DIR")
    check(
        not a.quantize or (a.onnx and bool(a.export)),
        "quantize",
        "--quantize quantises the exported model.onnx; pass it with --export DIR --onnx",
    )
    if a.onnx:  # before any MLflow read or export: a plain install has no ONNX packages
        check_onnx_installed()
    if a.quantize:  # before torch loads: OpenMP threads that spin on a busy CPU inflate the teacher's timing many-fold
        os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    for flag in ("experiment", "sweep"):  # both end up quoted inside an MLflow search filter
        value = getattr(a, flag) or ""
        check(
            "'" not in value and "`" not in value, flag, f"{value!r} contains a quote; pass the name as MLflow shows it"
        )
    from raydistill.tracking.track import resolve_tracking_uri

    uri = resolve_tracking_uri(a.tracking_uri)
    if uri.startswith("sqlite:///"):  # reading must not create an empty store where the sweep's store was meant
        db = uri[len("sqlite:///") :]
        check(
            os.path.isfile(db),
            "tracking_uri",
            f"no MLflow database at {db}; pass the --tracking-uri the sweep "
            "logged to (default: sqlite under ./raydistill-results of the directory it ran in)",
        )
    for flag in ("max_latency_ms", "max_params"):
        value = getattr(a, flag)
        check(value is None or value > 0, flag, f"must be > 0, got {value}")
    return uri


def _result(best, metric: str, mean: float | None, mode: str) -> dict:
    """The chosen run as the command prints it: what chose it, what it reports, its params, size and speed."""
    from raydistill.config.selection import report_metric

    report = report_metric(metric)
    m = best.data.metrics
    return {
        "sweep": best.data.tags.get("raydistill.sweep"),
        "run_id": best.info.run_id,
        "run_name": best.info.run_name,
        "metric": metric,
        "mode": mode,
        "value": m[metric],
        "report_metric": report,
        "report": m.get(report),
        **({"mean_over_seeds": mean} if mean != m[metric] else {}),
        "params": dict(best.data.params),
        **{k: m[k] for k in ("student_params", "latency_ms_b1", "latency_ms_b32") if k in m},
    }


def _summary(pick: Pick, out: dict) -> str:
    """The one stderr line saying which sweep the pick ranked, what won, and how to rank others."""
    trial = pick.run.data.tags.get("raydistill.trial_id") or out["run_name"]
    if len(pick.scope.sweeps) > 1:
        trial += f" of sweep {out['sweep']!r}"
    return f"best of {pick.scope.said}: trial {trial}, {pick.metric} {out['value']:.4g}{pick.scope.hint}"


def _onnx_and_int8(a: argparse.Namespace, tracker: Tracker, best, folder: str) -> dict:
    """``--onnx``: model.onnx beside the exported student; ``--quantize``: the INT8 file, re-scored, timed and
    logged to the trial's run."""
    out: dict = {}
    if a.onnx:
        from raydistill.config.schema import task_of_params

        task = task_of_params(best.data.params)
        out.update(export_onnx(folder, task.kind, segments=task.pair or task.kind == "qa"))
    if a.quantize:
        from raydistill.export.quantize import log_report, quantize_report, summary_line

        q = quantize_report(folder, out["onnx_path"], best.data.params)
        log_report(tracker, best.info.run_id, q)
        print(summary_line(q), file=sys.stderr, flush=True)
        out.update(q)
    return out


if __name__ == "__main__":
    main()
