"""A run's data section as MLflow params and back: what a logged run needs to rebuild the user's data (files or a
dataset), and the data folder a param names."""

from __future__ import annotations

import json
from typing import Any

from raydistill.tasks.base import Task
from raydistill.tasks.files import FileData

HUB = "hub"  # a run's data_dir param when its data came from the Hugging Face hub (read back as None: ``data_dir_of``)
FILE_PARAMS = ("train_file", "eval_file", "test_file", "text_column", "text_pair_column", "label_column")
# a dataset's name, config, revision and splits, a token task's columns (logged where set, as are files' params)
DATA_PARAMS = FILE_PARAMS + (
    "dataset",
    "dataset_config",
    "dataset_revision",
    "train_split",
    "eval_split",
    "tokens_column",
    "tags_column",
    "label_map",
    "delimiter",
)


def data_params(data: FileData) -> dict[str, str]:
    """The MLflow params of a task on the user's data: enough to rebuild it (``data_of``); long label lists are left
    to be read back from the data (params cap at 6,000 characters)."""
    if not data.given:
        return {}
    p = {k: getattr(data, k) for k in DATA_PARAMS if getattr(data, k) or (data.train_file and k in FILE_PARAMS)}
    p.update(task_kind=data.kind, task_metric=data.metric, phrase_rows=str(data.phrase_rows))
    p["files_fingerprint"] = data.fingerprint  # the files' bytes, a dataset's rows (a sweep's data_fingerprint: rows)
    labels = json.dumps(list(data.labels), ensure_ascii=False)
    if len(labels) <= 5000:
        p["task_labels"] = labels
    return p


def data_of(params: dict[str, str]) -> FileData:
    """The data section of a logged run (``data_params`` read back; an empty one for a built-in task)."""
    if not params.get("train_file") and not params.get("dataset"):
        return FileData()
    kw: dict[str, Any] = {k: params.get(k, "") for k in DATA_PARAMS}
    kw.update(kind=params.get("task_kind", ""), metric=params.get("task_metric", ""))
    labels = tuple(json.loads(params.get("task_labels", "[]")))
    kw.update(phrase_rows=params.get("phrase_rows") == "True", labels=labels)
    return FileData(**kw, fingerprint=params.get("files_fingerprint", "") if "task_labels" in params else "")


def data_dir_of(params: dict[str, str]) -> str | None:
    """The data folder of a logged run's params: None (the Hugging Face hub) for the ``"hub"`` placeholder."""
    v = params.get("data_dir")
    return None if v in (None, "", "None", HUB) else v


def task_of_params(params: dict[str, str]) -> Task:
    """The ``Task`` of a logged run (its params: ``to_params``), for re-scoring it later (``best``, ``evaluate``)."""
    from raydistill.tasks import make_task
    from raydistill.tasks.files import resolve

    data = data_of(params)
    if data.given and not data.fingerprint:  # labels too long for a param: read again, aligned as the run was
        data = resolve(data, params.get("teacher"))
    return make_task(params["task"], data)
