"""python -m raydistill.best --experiment NAME: the best trial of a sweep, exported as a Hugging Face directory.

Prints the best trial's params and metric (last stdout line: JSON). ``--export DIR`` writes its student
(model + tokenizer) for ``AutoModelFor….from_pretrained`` / ``pipeline()``; ``--onnx`` adds ``model.onnx``;
``--quantize`` (with ``--onnx``) adds ``model.int8.onnx``, re-scores both ONNX files on the run's dev set, times them
at batch 1 against the fp32 teacher in ONNX Runtime (same runtime, the headline) and in PyTorch (cross-runtime) and
logs the numbers to the trial's run (``raydistill.export.quantize``);
``--register NAME`` puts it in the MLflow model registry under the alias ``champion`` (stages are deprecated).
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass, field
from typing import ClassVar

from raydistill.commands.cli import HelpFormatter, Parser, add_overwrite, cli
from raydistill.commands.flags import add_fields, flag, request_from
from raydistill.common.errors import check
from raydistill.common.outputs import adding_to
from raydistill.results.classes import of_runs
from raydistill.selection.runs import Pick, choose
from raydistill.tracking.track import ALIAS, Tracker, download_student, register

MODES = ("max", "min")


@dataclass(frozen=True)
class BestRequest:
    """What one pick of a sweep's best trial is asked to do: the best command's flags as typed values, built from its
    command line (``request_of``) or by ``raydistill.api.best_student`` directly. A field with ``help`` in its
    metadata is a flag of the command, generated from it."""

    experiment: str = field(
        default="",
        metadata=flag(
            "MLflow experiment of the sweep (the sweep's --experiment; by default SPACE-TASK, e.g. pkd_glue-rte, "
            "pkd_glue-reviews for reviews.csv)",
            required=True,
        ),
    )
    tracking_uri: str | None = field(
        default=None, metadata=flag("MLflow URI the sweep logged to (default: sqlite under ./raydistill-results)")
    )
    metric: str | None = field(
        default=None,
        metadata=flag(
            "per-run metric to rank by: best_val_<m> (chosen on the validation split), best_eval_<m> (dev), or "
            "eval_<m>/val_<m> meaning the same (default: the sweep's own, best_val_<m>)"
        ),
    )
    mode: str | None = field(
        default=None,
        metadata=flag(
            "whether higher or lower --metric is better (default: the sweep's own mode, recorded with its parent run; "
            "max for sweeps that did not record one)",
            choices=MODES,
        ),
    )
    sweep: str | None = field(
        default=None,
        metadata=flag(
            "the sweep whose trials to rank (its name, as the sweep's summary prints it), or 'all': every sweep in the "
            "experiment, refused unless they share task, data and metric (default: the latest sweep in the "
            "experiment)"
        ),
    )
    export: str | None = field(
        default=None, metadata=flag("write the best student to this folder (model + tokenizer; default: no export)")
    )
    overwrite: bool = False  # its flag: cli.add_overwrite, every writing command's
    onnx: bool = field(
        default=False, metadata=flag("with --export: also write model.onnx and compare latency", action="store_true")
    )
    quantize: bool = field(
        default=False,
        metadata=flag(
            "with --export --onnx: also write the INT8 model.int8.onnx, re-score it and the fp32 file on the run's "
            "dev set, time both at batch 1 against the fp32 teacher in ONNX Runtime (same runtime) and PyTorch "
            "(cross-runtime), and log the numbers to the trial's run",
            action="store_true",
        ),
    )
    register: str | None = field(
        default=None,
        metadata=flag(
            "register the best student in the MLflow model registry under this name, with the alias "
            f"'{ALIAS}' on the new version (default: not registered)"
        ),
    )
    max_latency_ms: float | None = field(
        default=None,
        metadata=flag("the best trial whose batch-1 latency (latency_ms_b1) is at most this (default: no bound)"),
    )
    max_params: float | None = field(
        default=None,
        metadata=flag("the best trial whose student has at most this many parameters (default: no bound)"),
    )
    result_writer: ClassVar[str] = "raydistill best --export"  # the command its --export folder's marker names


D = BestRequest()  # the flags' defaults: the request's own


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
    add_fields(p, BestRequest, ("experiment", "tracking_uri", "metric", "mode", "sweep"), D)
    _add_output_args(p)
    add_fields(p, BestRequest, ("max_latency_ms", "max_params"), D)
    return p


def _add_output_args(p: Parser) -> None:
    """Where the chosen student goes: a folder (+ ONNX, INT8) and the model registry."""
    add_fields(p, BestRequest, ("export",), D)
    add_overwrite(p, "raydistill best --export", "--export")
    add_fields(p, BestRequest, ("onnx", "quantize", "register"), D)


@cli
def main(argv=None) -> dict:
    out = run(argv)
    print(json.dumps(out, default=str), flush=True)
    return out


def run(argv=None) -> dict:
    """The best trial these flags pick, exported and registered as they ask: what ``main`` prints. Bad input is a
    UserError before MLflow is read."""
    return execute(request_from(BestRequest, parser().parse_args(argv)))


def execute(a: BestRequest) -> dict:
    """The best trial ``a`` picks, exported and registered as it asks (``raydistill.api.best_student`` runs the same
    from the request it builds)."""
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
        _check_not_the_store(tracker, best, a.export)
        out["export"] = download_student(tracker, best.info.run_id, os.path.abspath(a.export))
        with adding_to(out["export"], "raydistill best --export"):
            out.update(_onnx_and_int8(a, tracker, best, out["export"]))
    if a.register:
        version = register(tracker, best.info.run_id, a.register)
        out["registered"] = {"name": a.register, "version": version, "alias": ALIAS}
    return out


def _check_not_the_store(tracker: Tracker, run, export: str) -> None:
    """``--export`` outside the artifact folders of the experiment it reads (a local store's): exporting into them
    would write over the logged models it exports, --overwrite or not."""
    from urllib.parse import urlparse

    from raydistill.common.outputs import lies_under

    loc = tracker.client.get_experiment(run.info.experiment_id).artifact_location or ""
    url = urlparse(loc)
    if url.scheme not in ("", "file"):
        return
    store, out = os.path.realpath(url.path if url.scheme else loc), os.path.realpath(os.path.expanduser(export))
    check(
        not (lies_under(out, store) or lies_under(store, out)),
        "export",
        f"{out} {'lies inside' if lies_under(out, store) else 'holds'} {store}, the artifacts of the MLflow experiment "
        "best reads; write to another folder (no command writes into what it reads, --overwrite or not)",
    )


def _checked(a: BestRequest) -> str:
    """Every flag checked before MLflow is read; the tracking URI to read."""
    check(not a.onnx or bool(a.export), "onnx", "--onnx needs --export DIR")
    check(
        not a.quantize or (a.onnx and bool(a.export)),
        "quantize",
        "--quantize quantises the exported model.onnx; pass it with --export DIR --onnx",
    )
    if a.onnx:  # before any MLflow read or export: a plain install has no ONNX packages
        from raydistill.common.outputs import check_in_place
        from raydistill.export.onnx import check_onnx_installed

        check_onnx_installed()
        written_in_place = ["model.onnx", *(["model.int8.onnx"] if a.quantize else [])]
        check_in_place(a.export or "", written_in_place, "export", a.overwrite)
    if a.quantize:  # before torch loads: OpenMP threads that spin on a busy CPU inflate the teacher's timing many-fold
        os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    for name in ("experiment", "sweep"):  # both end up quoted inside an MLflow search filter
        value = getattr(a, name) or ""
        check(
            "'" not in value and "`" not in value, name, f"{value!r} contains a quote; pass the name as MLflow shows it"
        )
    from raydistill.tracking.uri import resolve_tracking_uri

    uri = resolve_tracking_uri(a.tracking_uri)
    if uri.startswith("sqlite:///"):  # reading must not create an empty store where the sweep's store was meant
        db = uri[len("sqlite:///") :]
        check(
            os.path.isfile(db),
            "tracking_uri",
            f"no MLflow database at {db}; pass the --tracking-uri the sweep "
            "logged to (default: sqlite under ./raydistill-results of the directory it ran in)",
        )
    for name in ("max_latency_ms", "max_params"):
        value = getattr(a, name)
        check(value is None or value > 0, name, f"must be > 0, got {value}")
    return uri


def _result(best, metric: str, mean: float | None, mode: str) -> dict:
    """The chosen run as the command prints it: what chose it, what it reports, its params, size and speed."""
    from raydistill.selection.runs import report_metric

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


def _onnx_and_int8(a: BestRequest, tracker: Tracker, best, folder: str) -> dict:
    """``--onnx``: model.onnx beside the exported student; ``--quantize``: the INT8 file, re-scored, timed and
    logged to the trial's run."""
    out: dict = {}
    if a.onnx:
        from raydistill.config.params import task_of_params
        from raydistill.export.onnx import export_onnx

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
