"""A run's student out of its checkpoint: the best epoch's student (its Hugging Face folder and tokenizer) copied to the
run's ``--output``, the one copy of the student a run writes. Ray-free: a Ray Train ``Checkpoint`` is used through
its ``as_directory`` alone."""

from __future__ import annotations

import os
import shutil


def export_student(checkpoint, output: str) -> str:
    """Copy the run's best student (HF directory + tokenizer) out of a Ray checkpoint (or a checkpoint folder the
    in-process runner persisted) to ``output``: the one copy of the student the run writes. A checkpoint on the local
    disk is read in place (``as_directory``), not first copied whole (its AdamW state and last student are most of it);
    one in remote storage is downloaded to a temporary folder first."""
    if isinstance(checkpoint, str):
        return _copy_best(checkpoint, output)
    with checkpoint.as_directory() as root:
        return _copy_best(root, output)


def _copy_best(root: str, output: str) -> str:
    from raydistill.common.outputs import publish, staging

    tmp_out = staging(output)
    try:
        shutil.copytree(os.path.join(root, "checkpoint", "best_student"), tmp_out, dirs_exist_ok=True)
        return publish(tmp_out, output, "raydistill distill")
    finally:
        shutil.rmtree(tmp_out, ignore_errors=True)  # ours: emptied once published, left whole where it failed
