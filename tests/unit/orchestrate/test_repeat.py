"""orchestrate/repeat: a sweep run from a source checkout (no package metadata) still fingerprints its inputs."""

from __future__ import annotations

import importlib.metadata

import pytest

from raydistill.orchestrate import repeat


def test_version_is_the_installed_one():
    assert repeat._version() == importlib.metadata.version("raydistill")


def test_version_from_a_checkout_without_metadata(monkeypatch):
    # a GPU machine's carried copy or a ray job's working_dir: raydistill on PYTHONPATH, never pip-installed. The
    # sweep died there with PackageNotFoundError before Ray started (a GPU lease's quality part, 2026-11-28)
    def absent(name: str) -> str:
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "version", absent)
    with pytest.raises(importlib.metadata.PackageNotFoundError):
        importlib.metadata.version("raydistill")
    assert repeat._version() == "source"
