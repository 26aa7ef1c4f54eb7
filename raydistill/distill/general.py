"""General distillation data: unlabelled text (one text per line) as a masked-LM pseudo-task."""
from __future__ import annotations

import random
from dataclasses import dataclass

from ..tasks.base import Task

GENERAL = Task(name="general", kind="mlm", label_names=(), metrics=("mlm_accuracy", "mlm_loss"),
               main_metric="mlm_accuracy", eval_split="validation", language="any", loader=None)


@dataclass
class Encoded:
    features: list


def encode_mlm(examples: list, tokenizer, max_length: int, seed: int, p: float = 0.15) -> Encoded:
    """BERT masking, fixed per example by ``seed`` (static masking): of the chosen 15% of word pieces,
    80% become [MASK], 10% a random piece, 10% stay; ``labels`` is -100 elsewhere."""
    rng = random.Random(seed)
    special = set(tokenizer.all_special_ids)
    feats = []
    for ex in examples:
        enc = tokenizer(ex["text"], truncation=True, max_length=max_length)
        ids, labels = list(enc["input_ids"]), [-100] * len(enc["input_ids"])
        for i, tok in enumerate(ids):
            if tok in special or rng.random() >= p:
                continue
            labels[i] = tok
            r = rng.random()
            ids[i] = tokenizer.mask_token_id if r < 0.8 else rng.randrange(len(tokenizer)) if r < 0.9 else tok
        feats.append({**enc, "input_ids": ids, "labels": labels})
    return Encoded(feats)
