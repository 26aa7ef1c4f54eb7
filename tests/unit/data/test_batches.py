"""Which rows make each step's batch (raydistill/data/batches.py): the plain order is the one runs have always used, and
--group-by-length keeps the same rows and steps with far less padding, seeded, and with no long-to-short curriculum."""

from __future__ import annotations

import random

import torch

from raydistill.data.batches import MEGA, drawn_batches, epoch_batches, padded_tokens


def _old_rule(n, batch_size, epoch, seed, rank, world):
    """The loop's batch rule before batches.py (kept here verbatim): runs already logged must replay unchanged."""
    g = torch.Generator().manual_seed(seed * 1000 + epoch)
    perm = torch.randperm(n, generator=g).tolist()
    per_rank = batch_size // world
    for start in range(0, n - batch_size + 1, batch_size):
        yield perm[start + rank * per_rank : start + (rank + 1) * per_rank]


def _lengths(n, seed=0):
    r = random.Random(seed)
    return [r.randint(12, 110) for _ in range(n)]  # MRPC-like: 53 tokens on average, up to ~100


def test_plain_batches_are_the_old_rule():
    for n, bs, world in ((100, 8, 1), (3301, 32, 2), (33, 32, 1), (31, 32, 1)):
        for rank in range(world):
            assert list(epoch_batches(n, bs, 3, 42, rank, world)) == list(_old_rule(n, bs, 3, 42, rank, world))


def test_grouped_batches_keep_rows_and_steps_and_cut_padding():
    n, bs = 3301, 32
    lengths = _lengths(n)
    plain, grouped = list(epoch_batches(n, bs, 1, 42, 0, 1)), list(epoch_batches(n, bs, 1, 42, 0, 1, lengths))
    assert len(grouped) == len(plain) == n // bs and all(len(b) == bs for b in grouped)
    assert sorted(i for b in grouped for i in b) == sorted(i for b in plain for i in b)  # same rows, same drop-last
    assert padded_tokens(grouped, lengths) < 0.8 * padded_tokens(plain, lengths)
    spans = [max(lengths[i] for i in b) - min(lengths[i] for i in b) for b in grouped]
    assert sum(spans) / len(spans) < 10  # rows of a batch have similar lengths
    tops = [max(lengths[i] for i in b) for b in grouped]
    assert tops != sorted(tops, reverse=True) and tops != sorted(tops)  # batch order shuffled, not long-to-short


def test_grouped_batches_are_seeded_per_epoch_and_stay_in_their_megabatch():
    n, bs = 2000, 8
    lengths = _lengths(n, 1)
    a = list(epoch_batches(n, bs, 0, 7, 0, 1, lengths))
    assert a == list(epoch_batches(n, bs, 0, 7, 0, 1, lengths))  # deterministic (resume replays the epoch)
    assert a != list(epoch_batches(n, bs, 1, 7, 0, 1, lengths)) != list(epoch_batches(n, bs, 0, 8, 0, 1, lengths))
    perm = torch.randperm(n, generator=torch.Generator().manual_seed(7 * 1000)).tolist()
    mega_of = {row: pos // (bs * MEGA) for pos, row in enumerate(perm)}
    assert all(len({mega_of[i] for i in b}) == 1 for b in a)  # a batch never mixes megabatches


def test_grouped_ranks_split_each_global_batch():
    n, bs, world = 500, 8, 2
    lengths = _lengths(n, 2)
    whole = list(epoch_batches(n, bs, 2, 5, 0, 1, lengths))
    parts = [list(epoch_batches(n, bs, 2, 5, r, world, lengths)) for r in range(world)]
    assert [p0 + p1 for p0, p1 in zip(*parts, strict=True)] == whole


def test_an_epoch_of_more_rows_than_the_set_draws_pass_after_pass():
    """``drawn_batches`` (``train.epoch_rows`` over the set's size): its first pass is ``epoch_batches``'s own, then
    each further pass is a fresh shuffle holding every usable row once; a set smaller than a batch draws nothing."""
    lengths = [random.Random(i).randint(3, 60) for i in range(40)]
    for lens in (None, lengths):
        draw = drawn_batches(40, 8, 2, 7, 0, 1, lens)
        passes = [[next(draw) for _ in range(5)] for _ in range(3)]  # 40 rows, batch 8: 5 batches a pass
        assert passes[0] == list(epoch_batches(40, 8, 2, 7, 0, 1, lens))  # what an epoch of <= 40 rows drew
        for p in passes:
            assert sorted(i for b in p for i in b) == list(range(40))  # every row once a pass
        assert passes[0] != passes[1] != passes[2]  # each pass its own shuffle
    assert list(drawn_batches(5, 8, 0, 0, 0, 1)) == []
