"""Which training rows go in which step's batch: plain PyTorch, no Ray.

Batches are *global*: rank r of N takes its slice of each one, and every rank's slice has the same size (drop-last),
so averaging DDP gradients equals the gradient of the global batch (2 workers x 16 reproduce 1 worker x 32).

``group_by_length`` (HF Trainer's ``group_by_length``, its megabatch rule) makes batches of rows of similar length,
so padding to the longest row of a batch costs little: the epoch's seeded permutation (the same rows as without it,
the same number of steps) is cut into megabatches of ``MEGA`` batches, each sorted longest first and cut into
batches, and the order of those batches is then shuffled by the same generator, so no epoch runs long-to-short.

``drawn_batches`` is an epoch of ``train.epoch_rows`` rows: the first batches of the epoch's shuffle, and where the
epoch asks for more rows than the set holds, further passes, each its own fresh shuffle (every row once a pass).
"""

from __future__ import annotations

import itertools

import torch

MEGA = 50  # batches per megabatch, as in transformers' LengthGroupedSampler
# the generator key of an epoch's later passes: far from every other epoch's key (seed * 1000 + epoch)
PASS_STRIDE = 1_000_003


def epoch_batches(
    n: int, batch_size: int, epoch: int, seed: int, rank: int, world: int, lengths: list[int] | None = None
):
    """Yield rank ``rank``'s row indices for each global batch of epoch ``epoch`` (``lengths``: group by length)."""
    g = torch.Generator().manual_seed(seed * 1000 + epoch)
    perm = torch.randperm(n, generator=g).tolist()
    usable = n - n % batch_size  # drop-last
    if lengths is None:
        batches = [perm[s : s + batch_size] for s in range(0, usable, batch_size)]
    else:
        mega = batch_size * MEGA
        grouped = []
        for s in range(0, usable, mega):
            rows = sorted(perm[s : min(s + mega, usable)], key=lambda i: -lengths[i])  # stable: ties keep perm order
            grouped += [rows[k : k + batch_size] for k in range(0, len(rows), batch_size)]
        order = torch.randperm(len(grouped), generator=g).tolist()
        batches = [grouped[i] for i in order]
    per_rank = batch_size // world
    for b in batches:
        yield b[rank * per_rank : (rank + 1) * per_rank]


def padded_tokens(batches, lengths: list[int]) -> int:
    """Token slots a list of batches fills once each is padded to its longest row (what the steps compute on)."""
    return sum(max(lengths[i] for i in b) * len(b) for b in batches if b)


def drawn_batches(
    n: int, batch_size: int, epoch: int, seed: int, rank: int, world: int, lengths: list[int] | None = None
):
    """``epoch_batches``, then pass after pass of fresh shuffles for as long as the caller takes batches: an epoch of
    more rows than the set (a labels-only control trained for an augmented winner's steps) sees each row once a pass.
    The first pass is ``epoch_batches``'s own, so an epoch of fewer rows than the set draws what it always drew."""
    if n < batch_size:  # drop-last leaves no batch: nothing to draw, however many passes
        return
    for k in itertools.count():
        yield from epoch_batches(n, batch_size, epoch + k * PASS_STRIDE, seed, rank, world, lengths)
