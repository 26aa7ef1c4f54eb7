"""A sweep started again with identical inputs is recognised (issue 48 item 5), as ``finetune`` reuses a finished
fine-tune: the same space (after ``--set``), flags, teacher weights, data rows and raydistill version hash to the
same fingerprint, recorded on the sweep's parent run (tag ``raydistill.sweep_fingerprint``) with its result (the
JSON line, ``summary/result.json``). A new sweep whose fingerprint matches a finished sweep of its experiment says so
and prints that sweep's result again, training nothing and writing nothing; ``--rerun`` trains it again as a new
sweep. One that matches a sweep stopped before its end is told how to continue it (``--resume --name``) and runs.
What only says where things go or how loudly (``--name``, ``--experiment``, ``--tracking-uri``, ``--storage-path``,
``--verbose``) is not an input."""

from __future__ import annotations

import hashlib
import json
import os
from typing import Any

from raydistill.common.errors import check

TAG = "raydistill.sweep_fingerprint"
RESULT = "summary/result.json"
NOT_INPUTS = {"name", "experiment", "tracking_uri", "storage_path", "resume", "rerun", "verbose", "teacher"}


def _version() -> str:
    """raydistill's installed version; run from a source checkout on PYTHONPATH (a ray job's working_dir, a GPU
    machine's carried copy) it has no package metadata, and the sweep must still run."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("raydistill")
    except PackageNotFoundError:
        return "source"


def fingerprint(sweep: Any) -> str:
    """What decides a sweep's result, hashed: its flags (``NOT_INPUTS`` aside), the resolved space, the teacher's
    weights (a hub name: the name), the data's rows and the raydistill version."""
    from raydistill.data.splits import data_fingerprint
    from raydistill.models.encoder import fingerprint as model_fp

    flags = {k: v for k, v in sorted(sweep.request.record().items()) if k not in NOT_INPUTS}
    teacher = sweep.request.teacher or sweep.base.teacher
    inputs = {
        "flags": flags,
        "space": sweep.spec.raw,
        "teacher": model_fp(teacher) if os.path.isdir(str(teacher)) else str(teacher),
        "data": data_fingerprint(sweep.base),
        "version": _version(),
    }
    return hashlib.sha256(json.dumps(inputs, sort_keys=True, default=str).encode()).hexdigest()[:24]


def earlier(tracker: Any, fp: str) -> Any:
    """The latest sweep of the experiment with fingerprint ``fp`` (an MLflow run), or None."""
    exp = tracker.client.get_experiment_by_name(tracker.experiment)
    if exp is None:
        return None
    runs = tracker.client.search_runs(
        [exp.experiment_id], filter_string=f"tags.`{TAG}` = '{fp}'", order_by=["attributes.start_time DESC"]
    )
    return runs[0] if runs else None


def reuse(sweep: Any, log) -> dict[str, Any] | None:
    """The result of a finished sweep with the same inputs as ``sweep`` (told in one line), or None: a new sweep
    (``--resume``, ``--rerun``, no such sweep, or one stopped before its end: told how to continue it)."""
    a = sweep.request
    fp = fingerprint(sweep)
    sweep.state["fingerprint"] = fp
    if a.resume:
        return None
    prev = earlier(sweep.tracker, fp)
    if prev is None:
        return None
    name = prev.info.run_name
    if prev.info.status != "FINISHED" or a.rerun:
        how = (
            "--rerun given: training it again as a new sweep" if a.rerun else f"continue it with --resume --name {name}"
        )
        log(f"sweep {name} had identical inputs (fingerprint {fp}) and {_ended(prev)}; {how}")
        return None
    import tempfile

    from raydistill.tracking.track import retry

    try:
        with tempfile.TemporaryDirectory(prefix="raydistill-repeat-") as tmp:
            with open(retry(sweep.tracker.client.download_artifacts, prev.info.run_id, RESULT, tmp)) as f:
                result = json.load(f)
    except Exception:  # a sweep of an older raydistill kept no result: run anew
        log(f"sweep {name} had identical inputs (fingerprint {fp}) but kept no result to reuse; running it again")
        return None
    log(
        f"sweep {name} finished with identical inputs (space, flags, teacher, data; fingerprint {fp}): its result "
        f"again below, nothing trained; --rerun trains a new sweep "
        f"(python -m raydistill.best --experiment {sweep.base.experiment} --sweep {name} exports its student)"
    )
    return {**result, "reused": name}


def record(sweep: Any) -> None:
    """The parent run carries the fingerprint (``start`` opened it)."""
    sweep.tracker.set_tags(sweep.parent, {TAG: sweep.state["fingerprint"]})


def keep(sweep: Any, result: dict[str, Any]) -> None:
    """The sweep's result (its JSON line) kept on its parent run: what a repeat prints again."""
    sweep.tracker.log_dict(sweep.parent, json.loads(json.dumps(result, default=str)), RESULT)


def _ended(run: Any) -> str:
    return {"RUNNING": "did not end (stopped or still running)", "KILLED": "was stopped before its end"}.get(
        run.info.status, "failed"
    )


def check_new_name(sweep: Any, path: str) -> None:
    """A new sweep's name is its own: one named as an earlier sweep (its resume record, a sweep run of the experiment,
    its Tune folder: also another sweep's NAME-confirm / NAME-control) would share its Tune folder, its students'
    folder and its Optuna study, and ``best --sweep`` would rank both sweeps' trials as one. Refused before Ray
    starts, saying how to continue the earlier one. A record without a parent run was stopped before anything was
    shared (Ray refused, a Ctrl-C): started anew. ``path``: where its resume record would be."""
    from raydistill.common.paths import is_uri

    tune_dir = os.path.join(sweep.storage, sweep.name)
    tune_used = os.path.isdir(tune_dir) and set(os.listdir(tune_dir)) - {os.path.basename(path)}
    exp = sweep.tracker.client.get_experiment_by_name(sweep.base.experiment)
    sweeps = (
        sweep.tracker.client.search_runs([exp.experiment_id], "tags.`raydistill.role` = 'sweep'", max_results=5000)
        if exp is not None
        else []
    )
    earlier = [r for r in sweeps if r.info.run_name == sweep.name]
    where = (
        path
        if _read_json(path).get("parent_run_id")
        else f"experiment {sweep.base.experiment!r}"
        if earlier
        else tune_dir
        if not is_uri(sweep.storage) and tune_used
        else ""
    )
    finished = any(r.info.status == "FINISHED" for r in earlier)
    check(
        not where,
        "name",
        f"a sweep named {sweep.name!r} was started before ({where}): "
        + ("" if finished else f"--resume --name {sweep.name} continues it; ")
        + "another --name (or none: SPACE-TASK-time) starts a new sweep",
    )


def _read_json(path: str) -> dict:
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return {}
