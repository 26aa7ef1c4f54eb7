"""A sweep's end marks the runs of trials its scheduler stopped: KILLED, tagged ``stopped_early``, ended when they last
logged an epoch — also a trial on Ray Train whose run ended FAILED because Tune removed its placement group (seen on
an H100: ``ActorDiedError … its placement group was removed`` on a trial the summary calls STOPPED)."""

from __future__ import annotations


def test_stopped_trials_end_killed_at_their_last_epoch_and_errors_stay(tmp_path):
    from raydistill.tracking.track import Tracker

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    tracker = Tracker(uri, "sweep")
    c = tracker.client
    parent = tracker.start_run("parent", {})
    runs = {
        t: tracker.start_run(t, {}, tags={"raydistill.trial_id": t}, parent_run_id=parent)
        for t in ("running", "stopped_failed", "crashed", "done")
    }
    for rid in runs.values():
        for epoch, ts in ((1, 1_700_000_000_000), (2, 1_700_000_060_000)):
            c.log_metric(rid, "epoch", epoch, timestamp=ts, step=epoch)
    for t in ("stopped_failed", "crashed"):
        tracker.set_tags(runs[t], {"error": "ActorDiedError: … its placement group was removed"})
        tracker.end_run(runs[t], "FAILED")
    tracker.end_run(runs["done"])

    tracker.close_children(parent, stopped={"running", "stopped_failed"})

    got = {t: c.get_run(rid) for t, rid in runs.items()}
    for t in ("running", "stopped_failed"):
        assert got[t].info.status == "KILLED", t
        assert got[t].data.tags.get("stopped_early") == "true", t
        assert "error" not in got[t].data.tags, t
        assert got[t].info.end_time == 1_700_000_060_000, t  # when it last reported, not the sweep's end
    assert got["crashed"].info.status == "FAILED" and got["crashed"].data.tags["error"].startswith("ActorDiedError")
    assert "stopped_early" not in got["crashed"].data.tags
    assert got["done"].info.status == "FINISHED" and "stopped_early" not in got["done"].data.tags


def test_an_interrupted_sweep_ends_its_running_trials_now(tmp_path):
    from raydistill.tracking.track import Tracker

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    tracker = Tracker(uri, "sweep")
    c = tracker.client
    parent = tracker.start_run("parent", {})
    rid = tracker.start_run("t", {}, tags={"raydistill.trial_id": "t"}, parent_run_id=parent)
    c.log_metric(rid, "epoch", 1, timestamp=1_700_000_000_000, step=1)
    tracker.close_children(parent, reason="interrupted")
    run = c.get_run(rid)
    assert run.info.status == "KILLED" and run.data.tags.get("interrupted") == "true"
    assert run.info.end_time > 1_700_000_000_000


def test_a_trial_whose_process_died_ends_failed_with_tunes_reason(tmp_path):
    """An in-process trial killed with its process (the OOM killer) leaves its run RUNNING; the sweep's end closed it
    KILLED with ``stopped_early`` as if ASHA had stopped it. It ends FAILED with the reason Tune gave."""
    from raydistill.tracking.track import Tracker

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    tracker = Tracker(uri, "sweep")
    c = tracker.client
    parent = tracker.start_run("parent", {})
    rid = tracker.start_run("t", {}, tags={"raydistill.trial_id": "oom"}, parent_run_id=parent)
    c.log_metric(rid, "epoch", 1, timestamp=1_700_000_000_000, step=1)
    reason = "ActorDiedError: The actor died unexpectedly (the worker was killed: out of memory)"
    tracker.close_children(parent, errors={"oom": reason})
    run = c.get_run(rid)
    assert run.info.status == "FAILED" and run.data.tags["error"] == reason
    assert "stopped_early" not in run.data.tags


def test_a_search_trial_tune_never_saved_ends_killed_and_tagged_lost(tmp_path):
    """A trial started as the sweep's driver died, before Tune saved it (a reused trial actor starts the next trial at
    once): the resumed sweep samples its place again under a new id. Its run, still RUNNING, is no stopped trial:
    KILLED and tagged ``raydistill.lost``, what it logged kept. Confirmation and control runs are not search trials."""
    from raydistill.tracking.track import LOST, Tracker

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    tracker = Tracker(uri, "sweep")
    c = tracker.client
    parent = tracker.start_run("parent", {})
    lost = tracker.start_run("l", {}, tags={"raydistill.trial_id": "lost"}, parent_run_id=parent)
    c.log_metric(lost, "epoch", 1, step=1)
    stopped = tracker.start_run("s", {}, tags={"raydistill.trial_id": "asha"}, parent_run_id=parent)
    confirm = tracker.start_run(
        "c", {}, tags={"raydistill.trial_id": "conf", "raydistill.role": "confirm"}, parent_run_id=parent
    )
    tracker.close_children(parent, stopped={"asha"}, known={"asha", "done"})
    got = {k: c.get_run(r) for k, r in (("lost", lost), ("asha", stopped), ("conf", confirm))}
    assert got["lost"].info.status == "KILLED" and got["lost"].data.tags["raydistill.lost"] == LOST
    assert "stopped_early" not in got["lost"].data.tags and c.get_metric_history(lost, "epoch")
    assert got["asha"].data.tags.get("stopped_early") == "true" and "raydistill.lost" not in got["asha"].data.tags
    assert got["conf"].data.tags.get("stopped_early") == "true" and "raydistill.lost" not in got["conf"].data.tags
