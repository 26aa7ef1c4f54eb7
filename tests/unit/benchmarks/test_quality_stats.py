"""benchmarks/quality_stats.py: a dev score's bootstrap interval, the paired interval of two systems on the same rows,
and the verdict rule ("beats" only beyond the noise)."""

from __future__ import annotations

import sys

import pytest

from tests.paths import ROOT

sys.path.insert(0, str(ROOT / "benchmarks"))


def test_scores_intervals_and_verdicts():
    import quality_stats as qs

    gold = [i % 2 for i in range(200)]
    good = list(gold)
    for i in range(0, 200, 10):  # 90% right
        good[i] = 1 - good[i]
    near = list(good)
    near[1] = 1 - near[1]  # one row worse: a tie
    bad = [0] * 200  # the majority answer: 50%
    assert qs.score("sst2", good, gold) == pytest.approx(0.9)
    lo, hi = qs.interval("sst2", good, gold, n=300)
    assert lo < 0.9 < hi and hi - lo < 0.12
    d_near = qs.interval("sst2", good, gold, other=near, n=300)
    assert qs.verdict(d_near, 0.005) == "ties"
    d_bad = qs.interval("sst2", good, gold, other=bad, n=300)
    assert d_bad[0] > 0 and qs.verdict(d_bad, 0.4) == "beats"
    assert qs.verdict(d_bad, 0.4, seeds_range=0.5) == "ties"  # within the other row's seeds' range: no claim
    assert qs.verdict((-0.3, -0.1), -0.2) == "loses to"
    s = qs.seeds_summary([0.7, 0.75, 0.72])
    assert s["median"] == 0.72 and s["range"] == pytest.approx(0.05)
    assert qs.median_index([0.7, 0.75, 0.72]) == 2 and qs.median_index([0.7, 0.6]) == 1


def test_regression_rows_score_pearson():
    import quality_stats as qs

    gold = [i / 10 for i in range(50)]
    assert qs.score("stsb", [g * 2 + 1 for g in gold], gold) == pytest.approx(1.0)


def test_asha_replay_applies_the_asynchronous_rule_and_marks_what_it_cannot_know():
    from asha_replay import replay

    def t(name, *vals):
        return {"trial": name, "scores": dict(enumerate(vals, 1))}

    trials = [t("a", 0.6, 0.7, 0.72, 0.75), t("b", 0.5, 0.6), t("c", 0.65, 0.71, 0.8, 0.79), t("d", 0.4, 0.5, 0.6)]
    # grace 2, rf 2, 4 epochs: one rung at epoch 2. a: first at the rung, goes on. b: 0.6 < median{0.7} stops.
    # c: 0.71 >= the median of {0.7, 0.6} goes on. d: best 0.5 < the median of {0.7, 0.6, 0.71} stops at 2.
    r = replay(trials, 2, 2, 4)
    assert (r["epochs"], r["finished"], r["winner"], r["unknown"]) == (4 + 2 + 4 + 2, 2, "c", [])
    # grace 1: rungs 1 and 2. b stops at 1 (0.5 < 0.6); c goes on at 1 (0.65 >= median{0.6, 0.5}) and at 2;
    # d stops at 1 (0.4 below the median of {0.6, 0.5, 0.65}).
    r = replay(trials, 1, 2, 4)
    assert (r["epochs"], r["winner"]) == (4 + 1 + 4 + 1, "c")
    r = replay(trials, None, 2, 4)  # off: every trial trains every epoch; b and d's later epochs were never run
    assert r["epochs"] == 16 and sorted(r["unknown"]) == ["b", "d"] and r["winner"] == "c"


def test_spearman_against_hand_computed_ranks():
    import quality_stats as qs

    # y's ranks with a tie: 1, 2, 3.5, 5, 3.5 -> Pearson of ranks = 8 / sqrt(10 * 9.5)
    assert qs.spearman([1, 2, 3, 4, 5], [5, 6, 7, 8, 7]) == pytest.approx(8 / (95**0.5))
    assert qs.spearman([1, 2, 3], [3, 2, 1]) == pytest.approx(-1.0)
    assert qs.spearman([1, 2], [1, 2]) is None and qs.spearman([1, 2, 3], [4, 4, 4]) is None


def test_val_dev_agreement_reads_every_run_of_one_sweep(tmp_path):
    import mlflow
    import quality_stats as qs

    uri = f"sqlite:///{tmp_path}/mlflow.db"
    c = mlflow.MlflowClient(uri)
    exp = c.create_experiment("q")
    # an ASHA-stopped trial (KILLED) counts; a run with no dev score yet, another sweep's run and the sweep's
    # labels-only control (no run the search chose among) do not
    rows = [
        ("s", "FINISHED", 0.6, 0.5),
        ("s", "FINISHED", 0.7, 0.6),
        ("s", "KILLED", 0.8, 0.55),
        ("s", "FAILED", 0.9, None),
        ("other", "FINISHED", 0.5, 0.9),
        ("s control", "FINISHED", 0.1, 0.9),
    ]
    for sweep, status, val, dev in rows:
        tags = {"raydistill.sweep": sweep.split()[0]}
        r = c.create_run(exp, tags={**tags, **({"raydistill.control_of": "t"} if "control" in sweep else {})})
        c.log_metric(r.info.run_id, "best_val_accuracy", val)
        if dev is not None:
            c.log_metric(r.info.run_id, "best_eval_accuracy", dev)
        c.set_terminated(r.info.run_id, status)
    got = qs.val_dev_agreement(uri, "q", "s", "accuracy")
    assert got["runs"] == 3 and got["rho"] == pytest.approx(0.5)  # ranks (1,2,3) vs (1,3,2)
    assert qs.val_dev_agreement(uri, "missing", "s", "accuracy") == {"runs": 0, "rho": None}
