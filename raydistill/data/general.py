"""General distillation data: unlabelled text (one text per line) as a masked-LM pseudo-task.

Masking follows BERT: round(15%) of an example's word pieces (at least one, never special tokens) are chosen; of
those, 80% become [MASK], 10% a random piece, 10% stay; ``labels`` holds the original piece there and -100 elsewhere.
``encode_mlm`` masks once (static: the dev set must stay the same from epoch to epoch); training masks afresh
every epoch (dynamic masking, as DistilBERT and RoBERTa do) with ``DynamicMasking``.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

MASK_P = 0.15
STATIC = -1  # the "epoch" of encode_mlm's one-off mask


@dataclass
class MlmFeatures:
    """A general-distillation split's tokenised rows, masked (``tasks.encode.Encoded`` is a task's, with its example
    ids)."""

    features: list


def _rng(seed: int, epoch: int, index: int) -> random.Random:
    # keyed by the example alone (not its batch, rank or position in a permutation): DDP- and resume-consistent
    return random.Random(f"mlm:{seed}:{epoch}:{index}")


def mask_ids(ids: list, rng: random.Random, special: set, mask_id: int, vocab: int, p: float = MASK_P):
    """(masked ids, labels) for one example's unmasked ``ids``."""
    ids, labels = list(ids), [-100] * len(ids)
    candidates = [i for i, tok in enumerate(ids) if tok not in special]
    n = max(1, int(len(candidates) * p + 0.5)) if candidates else 0
    for i in sorted(rng.sample(candidates, n)):
        labels[i] = tok = ids[i]
        r = rng.random()
        ids[i] = mask_id if r < 0.8 else rng.randrange(vocab) if r < 0.9 else tok
    return ids, labels


def encode_mlm(examples: list, tokenizer, max_length: int, seed: int, p: float = MASK_P) -> MlmFeatures:
    """Tokenised ``examples`` with a static mask fixed by ``seed`` (see the module docstring)."""
    special, mask_id, vocab = set(tokenizer.all_special_ids), tokenizer.mask_token_id, len(tokenizer)
    feats = []
    for i, ex in enumerate(examples):
        enc = tokenizer(ex["text"], truncation=True, max_length=max_length)
        ids, labels = mask_ids(enc["input_ids"], _rng(seed, STATIC, i), special, mask_id, vocab, p)
        feats.append({**enc, "input_ids": ids, "labels": labels})
    return MlmFeatures(feats)


class DynamicMasking:
    """A fresh mask for every training example in every epoch, drawn from (seed, epoch, example index) alone.

    Takes ``encode_mlm`` features (their labels give back the original pieces) and returns re-masked copies:
    ``masker([train[i] for i in idx], idx, epoch)``. The same example gets the same mask in an epoch whatever
    batch, rank or resumed run draws it, so N DDP workers mask exactly as one worker does.
    """

    def __init__(self, tokenizer, seed: int, p: float = MASK_P):
        self.special, self.mask_id, self.vocab = set(tokenizer.all_special_ids), tokenizer.mask_token_id, len(tokenizer)
        self.seed, self.p = seed, p

    def __call__(self, features: list, idx: list, epoch: int) -> list:
        out = []
        for f, i in zip(features, idx, strict=True):
            orig = [t if lab == -100 else lab for t, lab in zip(f["input_ids"], f["labels"], strict=True)]
            ids, labels = mask_ids(orig, _rng(self.seed, epoch, i), self.special, self.mask_id, self.vocab, self.p)
            out.append({**f, "input_ids": ids, "labels": labels})
        return out
