"""A sweep's labels-only control (``search.control``, on by default): the winner's student — its shape, its init, its
training budget (epochs, steps, batch, the learning rate it trained with) — trained again on the gold labels alone
(``method: finetune``) with fresh seeds, as a Tune experiment ``NAME-control`` beside the sweep's. Its runs are child
runs of the sweep tagged ``raydistill.control_of`` (the winner's trial) and never compete for the winner
(``selection.pick_confirmed``). Only the distillation goes: the teacher's temperature, α/β, layer mapping and
augmented rows (whose labels are the teacher's) are left out; ``results/verdict.py`` judges the comparison."""

from __future__ import annotations

from raydistill.config.schema import FIELD_OF, RunConfig, StudentConfig
from raydistill.config.space import trial_config

# the winner's sampled values a labels-only run keeps: its student's shape and init, and its train values
_KEEP = {"student_size", *(name for name, (sec, _) in FIELD_OF.items() if sec in ("student", "train"))}


def control_points(winner: dict, base: RunConfig, seed: int, seeds: int) -> list[dict]:
    """The winner's sampled configuration (a summary row's ``config``) as a labels-only run, once per seed ``seed + 1 …
    seed + seeds`` (the confirmation's fresh seeds): method ``finetune``, the winner's resolved init named (finetune's
    own default would be a random student), every distillation value dropped."""
    won = trial_config(base, {k: v for k, v in winner["config"].items() if k not in ("confirm_of", "augment")})
    kept = {k: v for k, v in winner["config"].items() if k in _KEEP}
    point = {**kept, "method": "finetune", "init": won.student.init, "control_of": winner["trial"]}
    augmented = bool(winner["config"].get("augment") or base.augment_dir)
    if augmented and not won.train.epoch_rows and winner.get("epoch_examples"):
        # the winner's epochs went over its copies too: the control's as many examples, pass after pass over the
        # task's rows, or it would train several times fewer steps
        point["epoch_rows"] = int(winner["epoch_examples"])
    return [{**point, "seed": seed + j} for j in range(1, seeds + 1)]


def shape(cfg: RunConfig) -> str:
    """A student's shape in the size notation (``4L-312-1200-12``), for the summary."""
    s: StudentConfig = cfg.student
    return f"{s.layers}L-{s.hidden}-{s.intermediate}-{s.heads}"
