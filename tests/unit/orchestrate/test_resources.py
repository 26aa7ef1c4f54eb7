"""Concurrency from resources: trials at once = whole trials the cluster's CPUs and GPUs hold, capped."""

import pytest

from raydistill.common.errors import UserError
from raydistill.orchestrate.resources import Cluster, TrialDemand, concurrency


@pytest.mark.parametrize(
    "cluster, demand, cap, n, want",
    [
        (Cluster(2), TrialDemand(1, 1), None, 8, 2),  # 2-core machine: two 1-CPU trials
        (Cluster(2), TrialDemand(1, 2), None, 8, 1),  # one trial on both threads
        (Cluster(2), TrialDemand(1, 1), 1, 8, 1),  # --max-concurrent caps
        (Cluster(2), TrialDemand(1, 1), None, 1, 1),  # never more than the trials
        (Cluster(16), TrialDemand(2, 3), None, 8, 2),  # 2 workers × 3 CPUs: 16 // 6
        (Cluster(64, 8), TrialDemand(1, 1, 1), None, 32, 8),  # 8-GPU node: one trial per GPU, not one in all
        (Cluster(64, 8), TrialDemand(1, 2, 0.25), None, 64, 32),  # fractional GPUs pack 4 trials per GPU
        (Cluster(16, 8), TrialDemand(1, 4, 0.5), None, 64, 4),  # CPUs are the tighter limit
        (Cluster(1.5), TrialDemand(1, 0.5), None, 8, 3),  # fractional CPUs
    ],
)
def test_trials_at_once(cluster, demand, cap, n, want):
    assert concurrency(demand, cluster, cap, n) == want


def test_a_trial_larger_than_the_cluster_is_refused_naming_the_flag():
    with pytest.raises(UserError) as e:
        concurrency(TrialDemand(4, 1), Cluster(2), None, 4)
    assert e.value.field == "cpus_per_worker" and "4 CPUs, but the cluster has 2" in str(e.value)
    with pytest.raises(UserError) as e:
        concurrency(TrialDemand(1, 1, 2), Cluster(8, 1), None, 4)
    assert e.value.field == "gpus_per_worker" and "--gpus-per-worker" in str(e.value)
    with pytest.raises(UserError) as e:
        concurrency(TrialDemand(1, 1, 1), Cluster(8, 0), None, 4)
    assert "drop --use-gpu" in str(e.value)
    with pytest.raises(UserError) as e:
        concurrency(TrialDemand(1, 1), Cluster(2), 0, 4)
    assert e.value.field == "max_concurrent"


def test_threads_follow_the_cpus_a_worker_was_given():
    assert TrialDemand(1, 2).threads() == 2 and TrialDemand(1, 0.5).threads() == 1


def test_a_run_alone_in_this_process_trains_on_the_process_threads(monkeypatch):
    """``raydistill distill`` with one worker and no ``--cpus-per-worker``: torch's threads as they are (the machine's
    cores, or what OMP_NUM_THREADS / the caller set), not the 1 CPU a Ray Train worker gets; given, the flag's value."""
    import torch

    from raydistill.orchestrate.run import RunOptions

    monkeypatch.setattr(torch, "get_num_threads", lambda: 6)
    assert RunOptions().threads(here=True) == 6
    assert RunOptions().threads(here=False) == 1 and RunOptions().cpus() == 1.0
    assert RunOptions(cpus_per_worker=2).threads(here=True) == 2 == RunOptions(cpus_per_worker=2).threads(here=False)
    assert RunOptions(cpus_per_worker=0.5).threads(here=True) == 1
