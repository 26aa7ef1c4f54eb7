"""tracking/track: which epochs a run has logged — those spooled while the store was down count, so a resume does not
log them again from the checkpoint before ``replay_spool`` sends them."""

from __future__ import annotations

import json


def test_spooled_epochs_count_as_logged(tmp_path, monkeypatch):
    from raydistill.tracking import track

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(track.time, "sleep", lambda s: None)
    good = track.Tracker(f"sqlite:///{tmp_path / 'ok.db'}", "e")
    run_id = good.start_run("r", {})
    good.log_epoch(run_id, {"epoch": 1, "val_accuracy": 0.1})
    down = track.Tracker("http://127.0.0.1:9")
    down.log_epoch(run_id, {"epoch": 2, "val_accuracy": 0.2})  # spooled
    down.log_metrics("another-run", {"epoch": 3}, step=3)
    assert good.logged_epochs(run_id) == {1}  # another store's spool is not this one's
    rows = [json.loads(x) for x in open(track._spool_path())]
    with open(track._spool_path(), "w") as f:  # the server is back (here: the same store under its reachable URI)
        f.writelines(json.dumps({**r, "uri": good.uri}) + "\n" for r in rows)
    assert good.logged_epochs(run_id) == {1, 2}  # not another run's epoch 3
    assert good.log_missing_epochs(run_id, [{"epoch": 1}, {"epoch": 2}, {"epoch": 4}]) == [4]
    assert track.replay_spool() == 2
    assert sorted(m.step for m in good.client.get_metric_history(run_id, "epoch")) == [1, 2, 4]  # each once
