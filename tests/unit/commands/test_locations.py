"""Where a command stores its runs: ``--storage-path`` as a URI stays a URI on every command that takes it (``distill``
wrote into a local folder ``./s3:`` before), a local folder becomes absolute, a remote scheme missing its ``//`` is
one line naming the flag; ``--tracking-uri`` as a server or database URI stays as given."""

from __future__ import annotations

import os

import pytest

from raydistill.common.errors import UserError
from raydistill.common.paths import results_path, storage_location

REMOTE = "s3://bucket/runs"


def test_storage_location_keeps_uris_and_makes_folders_absolute(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for uri in (REMOTE, "gs://b/x", "file:///tmp/ray", "abfss://c@acct.dfs.core.windows.net/x"):
        assert storage_location(uri) == uri
    assert storage_location("runs") == str(tmp_path / "runs")
    assert storage_location("~/runs") == os.path.expanduser("~/runs")
    assert storage_location(None) == storage_location("") == results_path("ray")
    with pytest.raises(UserError) as e:
        storage_location("s3:/bucket/runs")
    assert e.value.field == "storage_path" and "s3://BUCKET/PATH" in e.value.message


def _reviews(tmp_path) -> list[str]:
    path = tmp_path / "reviews.csv"
    rows = [f"a {'great fun' if i % 2 else 'awful'} movie {i},{'pos' if i % 2 else 'neg'}" for i in range(40)]
    path.write_text("text,label\n" + "\n".join(rows) + "\n", encoding="utf-8")
    return ["--train-file", str(path)]


def test_distill_hands_ray_the_storage_uri_as_given(tiny_teacher, tmp_path, monkeypatch):
    from raydistill.commands.distill import run
    from raydistill.orchestrate import connect
    from raydistill.orchestrate import run as orchestrate_run

    seen = {}
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(connect, "init_ray", lambda **k: False)
    monkeypatch.setattr(orchestrate_run, "execute", lambda cfg, **k: seen.update(k) or {})
    argv = ["--method", "kd", "--teacher", tiny_teacher(), *_reviews(tmp_path), "--student-layers", "2"]
    argv += ["--tracking-uri", f"sqlite:///{tmp_path / 'mlflow.db'}", "--output", str(tmp_path / "student")]
    run([*argv, "--storage-path", REMOTE])
    assert seen["storage_path"] == REMOTE and not os.path.exists(tmp_path / "s3:")
    run([*argv, "--storage-path", "runs"])
    assert seen["storage_path"] == str(tmp_path / "runs")


def test_sweep_keeps_the_storage_uri_and_its_state_local(tiny_teacher, tmp_path, monkeypatch):
    from raydistill.commands import sweep as sweep_command
    from raydistill.orchestrate.driver import STATE, Sweep, state_path

    planned = []

    class Planned(Exception):
        pass

    def plan(*a, **k):
        planned.append(original(*a, **k))
        raise Planned

    original = Sweep.plan
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(Sweep, "plan", plan)
    argv = ["kd_glue", "--teacher", tiny_teacher(), *_reviews(tmp_path), "--num-samples", "1", "--name", "s"]
    argv += ["--tracking-uri", f"sqlite:///{tmp_path / 'mlflow.db'}"]
    for storage, want in ((REMOTE, REMOTE), ("runs", str(tmp_path / "runs"))):
        with pytest.raises(Planned):
            sweep_command.run([*argv, "--storage-path", storage])
        assert planned[-1].storage == want
    assert state_path(REMOTE, "s") == results_path("sweeps", "s", STATE)
    assert state_path("runs", "s") == str(tmp_path / "runs" / "s" / STATE)
    assert not os.path.exists(tmp_path / "s3:")


@pytest.mark.parametrize("command", ["distill", "sweep"])
def test_a_remote_scheme_without_slashes_is_one_line_before_any_work(command, capsys):
    from raydistill.commands import sweep
    from raydistill.distill import __main__ as distill

    main = {"distill": distill.main, "sweep": sweep.main}[command]
    head = ["--method", "kd", "--teacher", "t"] if command == "distill" else ["kd_glue"]
    with pytest.raises(SystemExit) as e:
        main([*head, "--task", "sst2", "--storage-path", "s3:/bucket/runs"])
    err = capsys.readouterr().err.strip().splitlines()
    assert e.value.code == 2 and len(err) == 1
    assert err[0].startswith("error: storage_path: 's3:/bucket/runs' is neither a URI nor a local folder")
