"""An interrupted ``distill`` run goes on: the same command, given again, continues it from its last epoch's checkpoint
(kept under the run's storage, as every run's are) into the same MLflow run, as a stopped fine-tune does. What ties
the command to that run — the run's name under the storage, its MLflow run, the fingerprint of what decides its
result — is recorded in ``OUTPUT.resume/resume.json`` (the product's own folder, like a fine-tune's) from the moment
the run exists; the run's end removes it. Other flags (another fingerprint) start a new run, the stale record goes."""

from __future__ import annotations

import hashlib
import json
import os

from raydistill.config.schema import RunConfig

COMMAND = "raydistill distill"
KIND = "distill run record"  # OUTPUT.resume's marker: the product's own folder, removed whole
FILES = {"resume.json", "resume.json.tmp"}  # all a distill's OUTPUT.resume ever holds


def record_folder(output: str) -> str:
    return os.path.abspath(output).rstrip("/") + ".resume"


def check_record_folder(output: str) -> None:
    """``OUTPUT.resume`` is the product's alone: a folder of that name it did not make (or holding a user's file) is
    refused before any work, ``--overwrite`` or not."""
    from raydistill.common.outputs import is_working, refuse_foreign_working

    folder = record_folder(output)
    ours = is_working(folder, KIND, FILES)
    refuse_foreign_working(folder, KIND, "distill", "what continues an interrupted run", ours)


def fingerprint(cfg: RunConfig, storage: str) -> str:
    """Hash of what decides the run's result and where its checkpoints are: the config, the teacher's weights, the
    data, the augmented set's knobs, the storage."""
    from raydistill.data.splits import data_fingerprint
    from raydistill.models.encoder import fingerprint as model_fp
    from raydistill.orchestrate.run import augment_params

    h = hashlib.sha256(json.dumps({**cfg.to_params(), **augment_params(cfg)}, sort_keys=True, default=str).encode())
    h.update(model_fp(cfg.teacher).encode() if os.path.isdir(cfg.teacher) else cfg.teacher.encode())
    h.update(data_fingerprint(cfg).encode())
    h.update(storage.encode())
    return h.hexdigest()[:24]


class RunRecord:
    """The record of the run ``cfg`` describes: ``name`` and ``run_id`` of an interrupted one with the same
    fingerprint (else empty: a new run)."""

    def __init__(self, cfg: RunConfig, storage: str):
        self.folder = record_folder(cfg.output)
        self.path = os.path.join(self.folder, "resume.json")
        self.fp = fingerprint(cfg, storage)
        kept: dict = {}
        if os.path.isfile(self.path):
            try:
                with open(self.path, encoding="utf-8") as f:
                    kept = json.load(f)
            except (OSError, ValueError):  # a record cut short: the run starts anew
                kept = {}
        self.kept = kept if isinstance(kept, dict) and kept.get("fingerprint") == self.fp else {}
        self.name: str = self.kept.get("name", "")
        self.run_id: str | None = self.kept.get("run_id")

    def start(self, name: str, run_id: str) -> None:
        """Recorded once the run's MLflow run exists (a stale record of other flags replaced)."""
        from raydistill.common.outputs import mark_working
        from raydistill.common.paths import write_json_atomic

        mark_working(self.folder, COMMAND, KIND)
        write_json_atomic(self.path, {"fingerprint": self.fp, "name": name, "run_id": run_id})

    def done(self) -> None:
        """The run ended: nothing left to go on from."""
        from raydistill.common.outputs import remove_if_ours

        remove_if_ours(self.folder, KIND, FILES)
