"""Fault injection for the fault-tolerance tests (``RunConfig.fault``; empty in normal use): kill a worker at a step,
or make an epoch's loss NaN."""

from __future__ import annotations

import os


class Fault:
    """Parses RunConfig.fault (a test hook; empty in normal use) and injects the fault it names."""

    def __init__(self, spec: str):
        kind, _, args = (spec or "").partition(":")
        kv = dict(a.split("=", 1) for a in args.split(",") if "=" in a)
        self.kind, self.kv = kind, kv
        self.nan_epoch = int(kv.get("epoch", 0)) if kind == "nan" else 0

    def at(self, rank: int, epoch: int, step: int):
        """Called before each step (1-based epoch and step): hard-kills this worker where the spec says so, and
        returns what to do to this step's losses (None: nothing)."""
        kv = self.kv
        if (
            self.kind == "kill"
            and (rank, epoch, step) == (int(kv["rank"]), int(kv["epoch"]), int(kv["step"]))
            and not os.path.exists(kv["once"])
        ):
            open(kv["once"], "w").close()
            os._exit(1)  # a hard crash: no exception handling, no cleanup, like an OOM kill
        return _nan if epoch == self.nan_epoch else None


def _nan(losses: dict) -> dict:
    return {**losses, "loss": losses["loss"] * float("nan")}
