"""A sweep's labels-only control (issue 46): how many seeds it trains, what it trains (the winner's student on gold
labels alone), that it never competes for the winner, and the verdict of the winner against it — hand-made
predictions where the answer is known. The end-to-end check is in tests/e2e/test_sweep.py
(test_tiny_sweep_end_to_end)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from raydistill.common.errors import UserError


def _answers(n: int, wrong_every: int) -> tuple[list[int], list[int]]:
    """(gold, predictions) with every ``wrong_every``-th row wrong (0: all right)."""
    gold = [i % 2 for i in range(n)]
    preds = [1 - g if wrong_every and i % wrong_every == 0 else g for i, g in enumerate(gold)]
    return gold, preds


def test_control_seeds_follow_the_confirmation_and_can_be_turned_off():
    from raydistill.config import space as sp
    from raydistill.selection.settings import check_search, control_seeds

    assert control_seeds({}) == 2  # on by default; no confirmation: DEFAULT_CONFIRM's seeds
    assert control_seeds({"confirm": {"top": 1, "seeds": 4}}) == 4  # as many draws as the confirmation's
    assert control_seeds({"confirm": False, "control": True}) == 2 and control_seeds({"control": False}) == 0
    for name in ("pkd_glue", "kd_glue", "minilm_glue", "tinybert_glue", "distilbert_glue"):
        assert control_seeds(sp.load(name).search) == 2  # the shipped spaces run it
        assert control_seeds(sp.load(name, ["search.control=false"]).search) == 0
    for bad in ("yes", 1, {"seeds": 2}):
        with pytest.raises(UserError) as e:
            check_search({"control": bad})
        assert e.value.field == "search.control"


def test_the_plan_knows_whether_a_sweep_runs_its_control(tiny_teacher, glue_dir, tmp_path, monkeypatch):
    """`--set search.control=false` skips the control: settled when the sweep plans, before Ray."""
    from raydistill.commands import sweep
    from raydistill.orchestrate.driver import Sweep

    monkeypatch.chdir(tmp_path)
    argv = ["pkd_glue", "--task", "sst2", "--data-dir", glue_dir, "--teacher", tiny_teacher("classification", 2)]
    argv += ["--set", "student.hidden=32", "--set", "student.intermediate=64", "--set", "student.heads=2"]
    argv += ["--set", "student.layers=2", "--tracking-uri", f"sqlite:///{tmp_path / 'm.db'}", "--eval-limit", "8"]
    for extra, seeds in (([], 2), (["--set", "search.control=false"], 0), (["--set", "search.confirm=false"], 2)):
        assert Sweep.plan(*sweep._arguments(argv + extra)).control_seeds == seeds
    with pytest.raises(UserError) as e:
        Sweep.plan(*sweep._arguments(argv + ["--set", "search.control=maybe"]))
    assert e.value.field == "search.control"


def test_control_points_train_the_winners_student_on_labels_alone(tiny_teacher):
    from raydistill.config.schema import RunConfig
    from raydistill.config.space import trial_config
    from raydistill.orchestrate.control import control_points

    base = RunConfig.from_dict({"task": "sst2", "teacher": tiny_teacher("classification", 2)})
    won = {
        "trial": "t1",
        "config": {
            "method": "pkd",
            "student_layers": 2,
            "student_hidden": 32,
            "student_intermediate": 64,
            "student_heads": 2,
            "temperature": 7.0,
            "alpha": 0.3,
            "beta": 100.0,
            "mapping": "skip",
            "lr": 3e-4,
            "augment": 4,
            "confirm_of": "t0",
        },
    }
    pts = control_points(won, base, 42, 2)
    assert [p["seed"] for p in pts] == [43, 44] and all(p["control_of"] == "t1" for p in pts)
    p = {k: v for k, v in pts[0].items() if k not in ("seed", "control_of")}
    # pkd's own default init (first_k) named: finetune's default would be a random student
    assert p == {
        "method": "finetune",
        "student_layers": 2,
        "student_hidden": 32,
        "student_intermediate": 64,
        "student_heads": 2,
        "init": "first_k",
        "lr": 3e-4,
    }
    cfg = trial_config(base, p)
    assert (cfg.distill.method, cfg.student.init, cfg.train.lr, cfg.augment_dir) == ("finetune", "first_k", 3e-4, None)
    # an augmented winner whose epochs ran over its copies (no train.epoch_rows): the control trains as many examples
    # an epoch, pass after pass over the task's rows, not (N+1)x fewer steps
    (p,) = control_points({**won, "epoch_examples": 3200}, base, 42, 1)
    assert p["epoch_rows"] == 3200 and trial_config(base, p).train.epoch_rows == 3200
    bounded = {**won, "config": {**won["config"], "epoch_rows": 1000}, "epoch_examples": 992}
    assert control_points(bounded, base, 42, 1)[0]["epoch_rows"] == 1000  # the winner's own bound, kept
    plain = {**won, "config": {k: v for k, v in won["config"].items() if k != "augment"}, "epoch_examples": 640}
    assert "epoch_rows" not in control_points(plain, base, 42, 1)[0]  # the same rows: the same epochs


def test_control_runs_never_compete_for_the_winner():
    from raydistill.selection.runs import pick_confirmed

    def run(trial, val, control_of=None):
        tags = {"raydistill.trial_id": trial, **({"raydistill.control_of": control_of} if control_of else {})}
        return SimpleNamespace(data=SimpleNamespace(tags=tags, metrics={"best_val_accuracy": val}), info=None)

    best, mean = pick_confirmed([run("a", 0.8), run("b", 0.7), run("c1", 0.95, "a")], "best_val_accuracy")
    assert best.data.tags["raydistill.trial_id"] == "a" and mean == 0.8


@pytest.mark.parametrize(
    "winner_wrong, control_wrong, verdict",
    [
        (10, 2, "beats"),  # 90% against 50%: far beyond the noise
        (10, 11, "ties"),  # 90% against 90.9%: within it
        (2, 10, "loses to"),
    ],
)
def test_the_verdict_on_hand_made_predictions(monkeypatch, winner_wrong, control_wrong, verdict):
    """results.verdict.compare: the winner and each control seed re-scored on the same dev rows; the paired interval
    of (winner − control) and the control seeds' range decide."""
    from raydistill.config.schema import RunConfig
    from raydistill.data import splits
    from raydistill.results import verdict as judged

    gold, winner = _answers(200, winner_wrong)
    _, seed_a = _answers(200, control_wrong)
    seed_b = list(seed_a)
    seed_b[1] = 1 - seed_b[1]  # a second seed one row worse: the seeds' range is 0.005
    by_trial = {"w": winner, "c1": seed_a, "c2": seed_b}
    monkeypatch.setattr(splits, "train_val_dev", lambda cfg, task: ([], [], [{}] * len(gold)))
    monkeypatch.setattr(judged, "predictions", lambda base, tracker, s, task, dev: (by_trial[s.trial], gold))
    base = RunConfig.from_dict({"task": "sst2", "teacher": "t"})
    stud = [judged.Student(t, "", "", 32, val) for t, val in (("w", 0.9), ("c1", 0.6), ("c2", 0.5))]
    c = judged.compare(base, None, "best_val_accuracy", judged.Winner(stud[0]), stud[1:])
    assert c["verdict"] == verdict and c["metric"] == "accuracy" and c["dev_rows"] == 200
    assert c["winner_dev"] == pytest.approx(1 - 1 / winner_wrong if winner_wrong == 10 else 0.5)
    assert c["control_range"] == pytest.approx(0.005) and c["ci"][0] <= c["diff"] <= c["ci"][1]
    assert c["noise_range"] == c["control_range"]  # the winner trained no fresh seeds here
    # the difference is of the same pair as the interval: the control's seed chosen as the winner's was (its best on
    # val: c1), not its seeds' median of dev (between two) nor its worse seed
    assert c["control_rep_trial"] == "c1" and c["control_rep_dev"] == c["control_dev"][0]
    assert c["diff"] == pytest.approx(c["winner_dev"] - c["control_dev"][0])
    assert c["control_median"] != c["control_dev"][0]
    assert f"the distilled winner {verdict} it" in judged.line(c)


def test_the_control_seed_is_chosen_as_the_winners_and_the_noise_is_either_sides(monkeypatch):
    """Like with like: the winner's exported seed is its best fresh seed on val, so the control's stand-in is its best
    on val too (the metric's mode: lowest where lower is better), never a seed with no val score (dev would choose);
    the range to exceed is the larger of the two sides' seeds'; one seed on each side has no verdict."""
    from raydistill.config.schema import RunConfig
    from raydistill.data import splits
    from raydistill.results import verdict as judged

    gold, winner = _answers(400, 20)  # 95%
    by_trial = {"w": winner, "c1": _answers(400, 4)[1], "c2": _answers(400, 5)[1], "c3": _answers(400, 8)[1]}
    monkeypatch.setattr(splits, "train_val_dev", lambda cfg, task: ([], [], [{}] * len(gold)))
    monkeypatch.setattr(judged, "predictions", lambda base, tracker, s, task, dev: (by_trial[s.trial], gold))
    base = RunConfig.from_dict({"task": "sst2", "teacher": "t"})
    w = judged.Student("w", "", "", 32, 0.9)
    c1, c2, c3 = (judged.Student(t, "", "", 32, v) for t, v in (("c1", 0.7), ("c2", 0.8), ("c3", None)))

    c = judged.compare(base, None, "best_val_accuracy", judged.Winner(w), [c1, c2, c3])
    assert c["control_trials"] == ["c1", "c2"] and c["control_rep_trial"] == "c2"  # c3: no val score
    c = judged.compare(base, None, "best_val_loss", judged.Winner(w, mode="min"), [c1, c2])
    assert c["control_rep_trial"] == "c1"  # lower is better
    # the winner's fresh seeds spread wider than the control's: their range is what the gap must exceed
    c = judged.compare(base, None, "best_val_accuracy", judged.Winner(w, seeds_range=0.2), [c1, c2])
    assert c["noise_range"] == 0.2 and c["ci"][0] > 0 and c["verdict"] == "ties"
    # one control seed: the winner's fresh seeds give the range; with none either, no verdict
    c = judged.compare(base, None, "best_val_accuracy", judged.Winner(w, seeds_range=0.01), [c1])
    assert c["noise_range"] == 0.01 and c["verdict"] == "beats"
    c = judged.compare(base, None, "best_val_accuracy", judged.Winner(w), [c1, c3])
    assert c["verdict"] is None and "one seed on each side" in c["reason"]
    assert "no verdict" in judged.line(c)


def test_beyond_the_interval_but_within_the_seeds_range_ties(monkeypatch):
    """The paired interval excludes 0, yet the control's own seeds spread wider than the gap: no claim."""
    from raydistill.results.significance import interval, verdict

    gold, good = _answers(400, 20)  # 95%
    _, ok = _answers(400, 8)  # 87.5%
    ci = interval("sst2", good, gold, other=ok, n=300)
    assert ci[0] > 0 and verdict(ci, 0.075) == "beats" and verdict(ci, 0.075, seeds_range=0.08) == "ties"


def test_a_control_without_a_verdict_says_why():
    from raydistill.results.verdict import line

    assert line({"verdict": None, "reason": "no control run exported a student"}) == (
        "labels-only control: no verdict (no control run exported a student)"
    )


@pytest.mark.parametrize("task", ["sst2", "mrpc", "kmou_ner", "korquad"])
def test_resampled_scores_are_the_task_metrics(task):
    """The bootstrap's fast per-example terms (accuracy, QA EM/F1, per-sentence entity counts) give exactly what the
    task's metrics give on the same rows, whole or resampled with repeats."""
    import random

    from raydistill.results.significance import scorer
    from raydistill.tasks import get_task
    from raydistill.tasks.metrics import compute

    t, rng = get_task(task), random.Random(0)
    if t.kind == "token":
        tags = ["O", "O", "B-PER", "I-PER", "I-LOC", "B-LOC"]  # an I- tag without its B- opens an entity too
        gold = [[rng.choice(tags) for _ in range(rng.randint(1, 9))] for _ in range(60)]
        preds = [[g if rng.random() < 0.7 else rng.choice(tags) for g in s] for s in gold]
    elif t.kind == "qa":
        words = ["서울", "부산", "the cat", "1990년", ""]
        gold = [[rng.choice(words[:4]), rng.choice(words[:4])] for _ in range(60)]
        preds = [rng.choice(words) for _ in range(60)]
    else:
        gold = [rng.randint(0, 1) for _ in range(60)]
        preds = [g if rng.random() < 0.8 else 1 - g for g in gold]
    for idx in (list(range(60)), [rng.randrange(60) for _ in range(60)]):
        want = compute(t, [preds[i] for i in idx], [gold[i] for i in idx])
        for m in t.metrics:
            assert scorer(t, preds, gold, m)(idx) == pytest.approx(want[m], abs=1e-12), m
