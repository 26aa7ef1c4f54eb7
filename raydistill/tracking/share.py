"""A logged model's files on this machine's disk shared with the run's checkpoint: the student stored once, not
twice (issue 48 item 4)."""

from __future__ import annotations

import filecmp
import os
from urllib.parse import urlparse

from raydistill.tracking.track import STUDENT_IN_MODEL, Tracker


def share_files(tracker: Tracker, model_id: str, model_dir: str) -> int:
    """Where MLflow's artifact store is this machine's disk, the logged model's copy of ``model_dir`` (its ``model``
    folder) is made hard links to ``model_dir``'s files, byte-identical ones only: the student on disk once.
    ``model_dir`` must be the product's own (a run's checkpoint, never rewritten in place), not a folder a user
    writes into. Returns the files linked; any failure leaves the copies as they are."""
    try:
        loc = urlparse(tracker.client.get_logged_model(model_id).artifact_location)
        if loc.scheme not in ("", "file"):
            return 0
        logged, linked = os.path.join(loc.path, STUDENT_IN_MODEL), 0
        for name in os.listdir(model_dir):
            src, dst = os.path.join(model_dir, name), os.path.join(logged, name)
            if os.path.isfile(src) and os.path.isfile(dst) and filecmp.cmp(src, dst, shallow=False):
                os.link(src, dst + ".link")
                os.replace(dst + ".link", dst)
                linked += 1
        return linked
    except Exception:  # another file system, a store that moved: two copies, as before
        return 0
