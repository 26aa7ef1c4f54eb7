"""MLflow: a ``Tracker`` (one store and experiment) whose runs, metrics and
artifacts are logged with retries, metrics spooled to disk instead of dropped."""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import platform
import shutil
import subprocess
import time
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from raydistill.common.paths import results_path
from raydistill.tracking.uri import resolve_tracking_uri


def _quiet_mlflow() -> None:
    """A command prints its own progress; MLflow's bars for a run's few artifacts would flood stderr. Against a
    tracking server MLflow writes "View run … at: URL" to stdout as each run ends, in whichever process ends it: a
    trial's lines, forwarded by Ray, landed after the command's JSON line (the last stdout line by contract); the
    sweep's summary and `best` print the UI link themselves. Set on import and again with each client: an API call
    gives its caller's environment back (``cli.state_kept``)."""
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
    os.environ.setdefault("MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT", "true")


_quiet_mlflow()

# called as watcher("open", uri, run_id, name, tags, params) / watcher("close", uri, run_id, status=...) when this
# process starts / ends a run (orchestrate/guard.py: the runs to mark FAILED if a joined Ray cluster goes away)
WATCHERS: list = []
# a model-training experiment: MLflow 3's UI then opens it on its runs table, not on the GenAI overview of traces
EXPERIMENT_KIND = ("mlflow.experimentKind", "custom_model_development")


LOST = "started as the sweep's driver died, before Tune saved the trial: the resumed sweep sampled its place again"


@contextlib.contextmanager
def _pipeline_classes():
    """MLflow (3.17) logs a model from a folder by reading its pipeline class's ``__name__`` from
    ``transformers.pipelines.check_task``, which in transformers 5 gives the class's dotted name instead: within this,
    the class itself."""
    from transformers import pipelines

    check_task = pipelines.check_task

    def with_classes(task):
        name, meta, options = check_task(task)
        if isinstance(meta.get("impl"), str):
            module, _, cls = meta["impl"].rpartition(".")
            meta = {**meta, "impl": getattr(importlib.import_module(module), cls)}
        return name, meta, options

    pipelines.check_task = with_classes
    try:
        yield
    finally:
        pipelines.check_task = check_task


# task kind → the transformers pipeline a student is logged as (MLflow's transformers flavour)
PIPELINES = {
    "classification": "text-classification",
    "regression": "text-classification",
    "token": "token-classification",
    "qa": "question-answering",
    "mlm": "fill-mask",
}


def retry(fn, *args, tries: int = 5, delay: float = 1.0, **kw):
    for i in range(tries):
        try:
            return fn(*args, **kw)
        except Exception:  # transient server/db errors
            if i == tries - 1:
                raise
            time.sleep(delay * 2**i)


def provenance() -> dict[str, str]:
    """Library versions and the git commit, recorded with every run."""
    from importlib.metadata import PackageNotFoundError, version

    tags = {"python_version": platform.python_version()}
    for pkg in ("torch", "transformers", "ray"):
        try:
            tags[f"{pkg}_version"] = version(pkg)
        except PackageNotFoundError:
            tags[f"{pkg}_version"] = "absent"
    try:
        here = os.path.dirname(os.path.abspath(__file__))
        tags["git_commit"] = (
            subprocess.run(
                ["git", "rev-parse", "HEAD"], cwd=here, capture_output=True, text=True, timeout=5
            ).stdout.strip()
            or "unknown"
        )
    except (OSError, subprocess.SubprocessError):
        tags["git_commit"] = "unknown"
    return tags


def _spool_path() -> str:
    os.makedirs(results_path(), exist_ok=True)
    return results_path("mlflow-spool.jsonl")


def _spooled() -> list[dict]:
    """The metric batches waiting in this process's spool."""
    path = _spool_path()
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def replay_spool() -> int:
    """Send metrics spooled while the server was down; returns how many batches were sent."""
    if not os.path.exists(_spool_path()):
        return 0
    rows = _spooled()
    os.remove(_spool_path())
    for r in rows:
        Tracker(r["uri"]).log_metrics(r["run_id"], r["metrics"], r["step"])
    return len(rows)


def _spooled_epochs(uri: str | None, run_id: str) -> set[int]:
    """The epochs of run ``run_id`` at ``uri`` waiting in this process's spool."""
    rows = _spooled()
    return {int(r["step"]) for r in rows if r["uri"] == uri and r["run_id"] == run_id and "epoch" in r["metrics"]}


def _source(source: str | dict) -> tuple[str, str]:
    """A dataset input's source type and source JSON."""
    if isinstance(source, dict):  # a dataset by name: a local folder, or a hub dataset at a revision
        return ("local" if os.path.isdir(str(source.get("path"))) else "hugging_face"), json.dumps(source)
    return ("local" if os.path.exists(str(source)) else "hub"), json.dumps({"uri": str(source)})


@dataclass(frozen=True)
class Tracker:
    """One MLflow store (``uri``; None: MLflow's own default, as ``MlflowClient`` takes it) and the experiment its
    runs are made in (by name; its id resolved, and the experiment created, on first use). ``experiment`` may be left
    out where only existing runs are written by id. Every call retries (``retry``); metrics that still cannot be sent
    are spooled (``replay_spool``). Pickled as its two strings (it travels to Ray trials and the Train controller):
    the client is made again on first use there."""

    uri: str | None = None
    experiment: str | None = None

    def __getstate__(self) -> dict[str, Any]:  # not the cached client: an open store connection does not pickle
        return {"uri": self.uri, "experiment": self.experiment}

    @cached_property
    def client(self) -> Any:
        from mlflow.tracking import MlflowClient

        _quiet_mlflow()
        return MlflowClient(tracking_uri=self.uri)

    @cached_property
    def experiment_id(self) -> str:
        """The experiment's id; made where absent, as a model-training experiment with artifacts beside a SQLite
        store."""
        assert self.experiment is not None, "a Tracker without an experiment makes no runs"
        c = self.client
        exp = c.get_experiment_by_name(self.experiment)
        if exp:
            if exp.tags.get(EXPERIMENT_KIND[0]) is None:  # made before this tag: open it on the runs page too
                retry(c.set_experiment_tag, exp.experiment_id, *EXPERIMENT_KIND)
            return exp.experiment_id
        artifacts = None
        if self.uri and self.uri.startswith("sqlite:///"):  # MLflow's ./mlartifacts is relative to a cwd Ray changes
            artifacts = "file://" + os.path.join(os.path.dirname(self.uri[len("sqlite:///") :]), "mlartifacts")
        return c.create_experiment(self.experiment, artifact_location=artifacts, tags=dict([EXPERIMENT_KIND]))

    # ------------------------------------------------------------------ runs
    def start_run(
        self, name: str | None, params: dict, tags: dict | None = None, parent_run_id: str | None = None
    ) -> str:
        tags = {**provenance(), **(tags or {})}
        if parent_run_id:
            tags["mlflow.parentRunId"] = parent_run_id
        run = retry(self.client.create_run, self.experiment_id, run_name=name, tags=tags)
        for watcher in WATCHERS:
            watcher("open", self.uri, run.info.run_id, name, tags, params)
        self.log_params(run.info.run_id, params)
        return run.info.run_id

    def end_run(self, run_id: str, status: str = "FINISHED", end_time: int | None = None) -> None:
        retry(self.client.set_terminated, run_id, status, end_time)
        for watcher in WATCHERS:
            watcher("close", self.uri, run_id, status=status)

    def reopen_run(self, run_id: str) -> None:
        """A run resumed after a failure: status RUNNING again and its ``error`` tag removed."""
        c = self.client
        retry(c.update_run, run_id, status="RUNNING")
        run = retry(c.get_run, run_id)
        for tag in ("error", "interrupted"):
            if tag in run.data.tags:
                retry(c.delete_tag, run_id, tag)
        for watcher in WATCHERS:  # the runs a lost cluster must not leave RUNNING (orchestrate/guard.py)
            watcher("open", self.uri, run_id, run.info.run_name, run.data.tags, run.data.params)

    def find_run(self, tag: str, value: str) -> str | None:
        """The id of a run carrying ``tag=value`` (a trial restarted on --resume keeps its MLflow run)."""
        exp = self.client.get_experiment_by_name(self.experiment)
        if exp is None:
            return None
        runs = retry(
            self.client.search_runs, [exp.experiment_id], filter_string=f"tags.`{tag}` = '{value}'", max_results=1
        )
        return runs[0].info.run_id if runs else None

    def children(self, parent_run_id: str) -> list:
        """Every child run of ``parent_run_id``."""
        exp = self.client.get_experiment_by_name(self.experiment)
        return retry(
            self.client.search_runs,
            [exp.experiment_id],
            filter_string=f"tags.`mlflow.parentRunId` = '{parent_run_id}'",
            max_results=10000,
        )

    def child_runs(self, parent_run_id: str) -> dict:
        """Each trial's child run, keyed by trial id."""
        return {
            r.data.tags["raydistill.trial_id"]: r
            for r in self.children(parent_run_id)
            if "raydistill.trial_id" in r.data.tags
        }

    def close_children(
        self,
        parent_run_id: str,
        reason: str = "stopped_early",
        stopped=(),
        errors: dict | None = None,
        known: set[str] | None = None,
    ) -> None:
        """Child runs still RUNNING when the sweep ends were stopped early (ASHA kills the trial; ended when they last
        logged an epoch), or the sweep was interrupted (``reason="interrupted"``): mark them KILLED with that reason as
        a tag. ``stopped``: the trial ids the scheduler stopped. On Ray Train (GPU, several workers) such a trial can
        see its controller die as Tune removes its placement group and end its run FAILED first: KILLED too, error
        dropped. ``errors`` (trial id → Tune's reason): trials whose process died before their run could be ended (the
        OOM killer ends an in-process trial's actor): FAILED with that reason, not taken for stopped. ``known``: the
        search's trial ids; a search trial's run still RUNNING that is not among them was started just before the
        sweep's driver died, before Tune saved it, so the resumed sweep sampled its place again: KILLED, tagged
        ``raydistill.lost`` (what it logged stays)."""
        c = self.client
        errors = errors or {}
        for r in self.children(parent_run_id):  # every child: the in-sweep teacher's has no trial id
            status, rid = r.info.status, r.info.run_id
            trial = r.data.tags.get("raydistill.trial_id")
            if status == "RUNNING" and trial in errors:
                self.set_tags(rid, {"error": errors[trial][:4000]})
                self.end_run(rid, "FAILED")
                continue
            searched = trial and not r.data.tags.get("raydistill.role")  # not a confirmation's or control's
            if status == "RUNNING" and known is not None and searched and trial not in known:
                self.set_tags(rid, {"raydistill.lost": LOST})
                self.end_run(rid, "KILLED")
                continue
            if status == "RUNNING" or (status == "FAILED" and r.data.tags.get("raydistill.trial_id") in stopped):
                if status == "FAILED" and "error" in r.data.tags:
                    retry(c.delete_tag, rid, "error")
                epochs = retry(c.get_metric_history, rid, "epoch") if reason == "stopped_early" else []
                self.set_tags(rid, {reason: "true"})
                self.end_run(rid, "KILLED", max((m.timestamp for m in epochs), default=None))

    # ------------------------------------------------------------------ what a run logs
    def log_params(self, run_id: str, params: dict) -> None:
        from mlflow.entities import Param

        items = [Param(k, str(v)[:6000]) for k, v in params.items()]
        for i in range(0, len(items), 100):
            retry(self.client.log_batch, run_id, params=items[i : i + 100])

    def log_metrics(self, run_id: str, metrics: dict, step: int | None = None) -> None:
        from mlflow.entities import Metric

        ts = int(time.time() * 1000)
        items = [
            Metric(k, float(v), ts, step or 0)
            for k, v in metrics.items()
            if isinstance(v, (int, float)) and not isinstance(v, bool)
        ]
        try:
            retry(self.client.log_batch, run_id, metrics=items)
        except Exception as e:  # whatever the store's failure, the metrics are kept
            # Never silently dropped: spool to disk and say so; replay_spool() sends them later.
            with open(_spool_path(), "a") as f:
                f.write(json.dumps({"uri": self.uri, "run_id": run_id, "metrics": metrics, "step": step}) + "\n")
            print(f"warning: MLflow unreachable ({e}); metrics spooled to {_spool_path()}", flush=True)

    def log_epoch(self, run_id: str, metrics: dict) -> None:
        self.log_metrics(run_id, metrics, step=int(metrics.get("epoch", 0)))

    def logged_epochs(self, run_id: str) -> set[int]:
        """The epochs the run has logged (the steps of its ``epoch`` metric), those spooled here included (what
        ``replay_spool`` sends later is not logged again from a checkpoint)."""
        logged = {m.step for m in retry(self.client.get_metric_history, run_id, "epoch")}
        return logged | _spooled_epochs(self.uri, run_id)

    def log_missing_epochs(self, run_id: str, history: list[dict]) -> list[int]:
        """The epochs of ``history`` (a checkpoint's records) the run has not logged, logged now; their numbers. A run
        stopped between keeping an epoch's checkpoint and logging it resumes after that epoch, whose metrics only the
        checkpoint holds."""
        if not history:
            return []
        logged = self.logged_epochs(run_id)
        missing = [m for m in history if int(m["epoch"]) not in logged]
        for metrics in missing:
            self.log_epoch(run_id, metrics)
        return [int(m["epoch"]) for m in missing]

    def set_tags(self, run_id: str, tags: dict) -> None:
        for k, v in tags.items():
            retry(self.client.set_tag, run_id, k, str(v)[:5000])

    def log_artifacts(self, run_id: str, local_dir: str, artifact_path: str | None = None) -> None:
        retry(self.client.log_artifacts, run_id, local_dir, artifact_path)

    def log_artifact(self, run_id: str, path: str, artifact_path: str | None = None) -> None:
        retry(self.client.log_artifact, run_id, path, artifact_path)

    def download_artifacts(self, run_id: str, path: str, dst: str) -> str:
        """A run's artifact folder ``path`` copied under ``dst`` (a student a trial on another node exported)."""
        return retry(self.client.download_artifacts, run_id, path, dst)

    def download_student(self, run_id: str, dst: str) -> str:
        """A run's student (the folder it exported: model, tokenizer, card) copied under ``dst``: its logged model's
        ``model`` folder (MLflow's transformers flavour keeps the exported folder there whole), or for a run logged
        before the student was kept once, or whose logged model failed, its ``student`` artifacts."""
        from mlflow.artifacts import download_artifacts

        run = self.client.get_run(run_id)
        logged = retry(
            self.client.search_logged_models,
            [run.info.experiment_id],
            filter_string=f"source_run_id = '{run_id}'",
            max_results=1,
        )
        if not logged:
            return self.download_artifacts(run_id, "student", dst)
        uri = f"{logged[0].artifact_location.rstrip('/')}/{STUDENT_IN_MODEL}"
        return retry(download_artifacts, artifact_uri=uri, dst_path=dst, tracking_uri=self.uri)

    def log_dict(self, run_id: str, data: dict, artifact_file: str) -> None:
        retry(self.client.log_dict, run_id, data, artifact_file)

    def log_datasets(self, run_id: str, datasets: list[dict]) -> None:
        """Dataset inputs of a run (the Dataset column of the MLflow UI): name, digest, source, context, row count. A
        source is a path or hub name, or a dataset's ``{path, config_name, split, revision}`` (Hugging Face's)."""
        from mlflow.entities import Dataset, DatasetInput, InputTag

        inputs = [
            DatasetInput(
                Dataset(
                    d["name"],
                    d["digest"],
                    *_source(d["source"]),
                    profile=json.dumps({"num_rows": d["rows"]}),
                ),
                tags=[InputTag("mlflow.data.context", d["context"])],
            )
            for d in datasets
        ]
        retry(self.client.log_inputs, run_id, datasets=inputs)

    def log_student_model(self, run_id: str, model_dir: str, kind: str, card: str | None = None) -> str | None:
        """The run's student as an MLflow logged model (transformers flavour, with its tokenizer and ``card``, the
        model card's text, see ``card.py``): the Models column of the UI, and what ``raydistill.best --register``
        registers. Returns its model id; a failure is a tag and a warning, never a failed run (the student is already
        logged as files)."""
        import importlib.metadata as md

        import mlflow
        import transformers
        from huggingface_hub import ModelCard

        try:
            if self.uri:  # None: MLflow's own default, already in force
                mlflow.set_tracking_uri(self.uri)
            transformers.logging.set_verbosity_error()
            reqs = [f"{p}=={md.version(p)}" for p in ("transformers", "torch", "tokenizers")]
            # logged from the exported folder, files copied: no model is loaded (nor put on the GPU a trial shares),
            # nor saved a second time. The requirements and the card are given: MLflow would otherwise load a
            # pipeline to infer the one and ask the Hugging Face Hub for the other.
            with mlflow.start_run(run_id=run_id), _pipeline_classes():  # the fluent API is the flavour's only way in
                info = mlflow.transformers.log_model(
                    os.path.abspath(model_dir),
                    name="student",
                    task=PIPELINES[kind],
                    pip_requirements=reqs,
                    model_card=ModelCard(card or "---\nlicense: unknown\n---\n"),
                )
            return info.model_id
        except Exception as e:  # any failure is reported, not raised
            print(f"warning: the student was not logged as an MLflow model ({type(e).__name__}: {e})", flush=True)
            self.set_tags(run_id, {"logged_model_error": f"{type(e).__name__}: {e}"})
            return None

    # ------------------------------------------------------------------ the UI
    def ui_link(
        self, sweep: str, metric: str, mode: str = "max", params=(), metrics=(), local: str = "http://127.0.0.1:5000"
    ) -> dict:
        """How to see a sweep's trials side by side in the MLflow UI: the command that serves a local store (none for
        a tracking server, which is its own UI) and a link to the runs table showing only this sweep's trials, best
        first, with the objective, ``metrics`` and the searched ``params`` as columns. The view is stored as a shared
        view state (an experiment tag the UI reads by ``viewStateShareKey``: the UI keeps chosen columns nowhere
        else)."""
        uri = self.uri or resolve_tracking_uri(None)
        import re

        c = self.client if self.uri else Tracker(uri).client  # the store the command and the link name
        exp = c.get_experiment_by_name(self.experiment)
        key = "raydistill-" + re.sub(r"[^A-Za-z0-9_-]", "-", sweep)

        def col(kind, name):  # the UI's column ids
            return f"{kind}.`{name}`"

        view = {
            "searchFilter": f"tags.`raydistill.sweep` = '{sweep}'",
            "orderByKey": col("metrics", metric),
            "orderByAsc": mode == "min",
            "selectedColumns": [col("metrics", m) for m in (metric, *metrics)]
            + [col("attributes", "Models"), col("attributes", "Dataset")]
            + [col("params", p) for p in params],
        }
        view["columnOrder"] = view["selectedColumns"]  # the objective, yardsticks, model and data, params
        retry(c.set_experiment_tag, exp.experiment_id, f"mlflow.sharedViewState.{key}", json.dumps(view))
        server = uri.startswith(("http://", "https://"))
        base = uri.rstrip("/") if server else local
        command = (
            None
            if server
            else f"mlflow ui --backend-store-uri {uri} --host 127.0.0.1 --port {local.rsplit(':', 1)[-1]}"
        )
        return {"command": command, "url": f"{base}/#/experiments/{exp.experiment_id}/runs?viewStateShareKey={key}"}


def download_student(tracker: Tracker, run_id: str, out_dir: str) -> str:
    """A trial's logged student (its run's ``student`` artifacts) written to ``out_dir`` as ``best --export`` writes
    it: downloaded beside it, then published whole (``common.outputs``)."""
    import mlflow

    from raydistill.common.outputs import publish, staging

    assert tracker.uri is not None  # the command resolved it
    mlflow.set_tracking_uri(tracker.uri)
    tmp = staging(out_dir)
    try:
        src = tracker.download_student(run_id, tmp)
        return publish(src, out_dir, "raydistill best --export")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


ALIAS = "champion"
# where a logged model of the transformers flavour keeps the folder it was logged from (mlflow.transformers.model_io)
STUDENT_IN_MODEL = "model"


def register(tracker: Tracker, run_id: str, name: str, alias: str = ALIAS) -> str:
    """Register the run's logged model (what the UI's Models column links; the run's student files for runs logged
    before there was one) and point ``alias`` at the new version: ``models:/NAME@champion``."""
    import mlflow

    c = tracker.client
    run = c.get_run(run_id)
    logged = c.search_logged_models(
        [run.info.experiment_id], filter_string=f"source_run_id = '{run_id}'", max_results=1
    )
    assert tracker.uri is not None  # the command resolved it
    mlflow.set_tracking_uri(tracker.uri)
    source = f"models:/{logged[0].model_id}" if logged else f"{run.info.artifact_uri}/student"
    mv = mlflow.register_model(source, name)
    c.set_registered_model_alias(name, alias, mv.version)
    return mv.version
