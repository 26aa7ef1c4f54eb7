"""A sweep that searches data augmentation: a space's ``augment`` (augmented copies per training row, 0 = none), fixed
(``augment: 4``) or searched (``augment: {choice: [0, 4]}``). Each augmented set is built once, before the trials, with
the teacher's own word embeddings proposing the replacements (``distill.augment --candidates embedding``: any teacher,
no masked-LM head needed), and every trial that draws that N trains on it (its teacher outputs cached once too).
Rows made from the dev hold-out or the validation split never train (``distill.examples``)."""

from __future__ import annotations

import os

from raydistill.config.copies import counts


def build_sets(raw, base, root: str, log) -> dict[int, str]:
    """One augmented training set per N > 0 the space can draw, under ``root/augment``, from the task's training rows
    and the teacher's word embeddings; returns N → the folder a trial passes as ``augment_dir``."""
    from raydistill.config.schema import task_of
    from raydistill.data.augmentation import AugmentOptions, AugmentRequest, build
    from raydistill.models.encoder import fingerprint

    out = {}
    for n in sorted(set(counts(raw)) - {0}):
        folder = os.path.join(root, "augment", f"{base.task}-{fingerprint(base.teacher)[:12]}-n{n}")
        log(
            f"augmentation: {n} copies of every training row, replacements from the teacher's word embeddings "
            f"-> {folder}"
        )
        # the command's knobs but N and the trials' length; the teacher proposes (the augment command's --teacher)
        options = AugmentOptions(n=n, max_length=base.train.max_length, candidates="embedding")
        n_in, n_out, _ = build(AugmentRequest(task_of(base), base.data_dir, base.teacher, folder, options))
        log(f"augmentation: {n_in} rows -> {n_out}")
        out[n] = folder
    return out
