"""A sweep that searches data augmentation: a space's ``augment`` (augmented copies per training row, 0 = none), fixed
(``augment: 4``) or searched (``augment: {choice: [0, 4]}``). Each augmented set is built once, before the trials, with
the teacher's own word embeddings proposing the replacements (``distill.augment --candidates embedding``: any teacher,
no masked-LM head needed), and every trial that draws that N trains on it (its teacher outputs cached once too).
Rows made from the dev hold-out or the validation split never train (``distill.examples``)."""

from __future__ import annotations

import os

from raydistill.config.copies import counts

# an augmented set past this many rows is a large task's: say what it costs (pkd_aug_glue is for ~10k-row tasks, whose
# x20 set is ~200k rows; SST-2's would be 1.4M, its teacher-cache pass alone hours on a CPU)
LARGE_SET_ROWS = 300_000


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
        if n_out > LARGE_SET_ROWS:
            log(large_set_note(n_in, n_out, n))
        out[n] = folder
    return out


def large_set_note(n_in: int, n_out: int, n: int) -> str:
    """The line a sweep prints before training on a large augmented set: its size, what scales with it, the way out."""
    return (
        f"augmentation: note: {n_out:,} rows ({n_in:,} x {n + 1}) is a large transfer set: the teacher's one pass over "
        "it (the teacher cache) and any epoch of the whole set cost that many rows; copies pay off on small tasks "
        "(docs/search-spaces.md#augment). train.epoch_rows bounds an epoch; --set augment=0 trains without copies"
    )
