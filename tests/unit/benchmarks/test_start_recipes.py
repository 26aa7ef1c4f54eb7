"""benchmarks/start_recipes.py: which shipped spaces' start recipes it runs, and how it counts a collapse (the sweeps
themselves run only in the benchmark)."""

from __future__ import annotations

import sys

from tests.paths import ROOT

sys.path.insert(0, str(ROOT / "benchmarks"))
import start_recipes  # noqa: E402


def test_every_space_it_runs_has_start_recipes_and_the_pkd_space_two():
    # a space without start recipes would be swept with --num-samples 0
    assert all(start_recipes.starts(s) >= 1 for s in start_recipes.SPACES)
    assert start_recipes.starts("pkd_glue") == 2  # PKD's reported best, then T 2


def test_a_trial_answering_one_class_for_99_percent_of_val_is_counted_collapsed(capsys):
    records = {
        "kd_glue/sst2": {
            "space": "kd_glue",
            "majority": 0.51,
            "trials": [
                {"run": "a", "stopped": None, "top_share": 0.62, "val": 0.8, "dev": 0.79},
                {
                    "run": "b",
                    "stopped": "diverged",
                    "top_share": 0.995,
                    "val": 0.5,
                    "dev": 0.5,
                },
            ],
        },
        "kd_glue/rte": {
            "space": "kd_glue",
            "majority": 0.5,
            "trials": [{"run": "c", "top_share": 1.0, "stopped": None}],
        },
    }
    start_recipes.report(records, "sst2")
    out = capsys.readouterr().out
    assert out.strip().splitlines()[-1] == "START_RECIPES task=sst2 trials=2 collapsed=1 stopped=1"
    assert "0.995 **collapsed**" in out and "| kd_glue | a | no | 0.620 | 0.8000 | 0.7900 | 0.5100 |" in out
