"""Where runs are tracked: the default store (SQLite beside the Ray results), a user's URI checked and made
absolute, and a tracking server's reachability checked in seconds, before any training."""

from __future__ import annotations

import os
import urllib.request

from raydistill.common.errors import UserError
from raydistill.common.paths import results_path


def default_tracking_uri() -> str:
    """SQLite beside the Ray results, with an absolute path: Ray changes the working directory of trials."""
    path = results_path("mlflow.db")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    return f"sqlite:///{path}"


def resolve_tracking_uri(uri: str | None) -> str:
    uri = uri or os.environ.get("MLFLOW_TRACKING_URI") or default_tracking_uri()
    if uri.startswith("sqlite:///") and not uri.startswith("sqlite:////"):
        path = os.path.abspath(uri[len("sqlite:///") :])  # relative sqlite paths break once Ray chdirs
        os.makedirs(os.path.dirname(path), exist_ok=True)
        uri = f"sqlite:///{path}"
    elif uri.startswith(("http://", "https://")):
        check_reachable(uri)
    elif not uri.startswith(("sqlite:", "postgresql", "mysql", "databricks")):
        raise UserError(
            "tracking_uri",
            f"{uri!r} is not a database or server URI; use sqlite:////abs/path/mlflow.db "
            "or http://host:5000 (MLflow 3 refuses the old ./mlruns file store)",
        )
    return uri


def check_reachable(uri: str, timeout: float = 5.0) -> None:
    """Fail in seconds, before any training, when the tracking server cannot be reached."""
    try:
        with urllib.request.urlopen(uri.rstrip("/") + "/health", timeout=timeout) as r:
            r.read()
    except Exception as e:  # any failure means unreachable
        raise UserError(
            "tracking_uri",
            f"MLflow server {uri} is unreachable ({type(e).__name__}); start it "
            "(mlflow server --host 127.0.0.1) or pass --tracking-uri sqlite:////abs/path/mlflow.db",
        ) from None
