"""Tiny real Hugging Face models and tokenizers, built offline, for tests and smoke runs.

They are genuine ``BertFor…``/``RobertaFor…`` checkpoints that ``from_pretrained`` loads; only the sizes and
the vocabulary are small, so tests exercise the same code paths as a 12-layer teacher.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

_BASE_WORDS = (
    "the a an is was it this that and or not no yes good bad great movie film story plot acting "
    "he she they we you i of to in on for with by at from as be are were have has had do does did "
    "what who where when why how which man woman company said year new one two three first last "
    "very really so too more most best worst love hate like boring fun funny sad happy nice terrible"
).split()

SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def _words(texts) -> list[str]:
    seen = dict.fromkeys(_BASE_WORDS)
    for t in texts or ():
        for w in re.findall(r"\w+|[^\w\s]", t.lower()):
            seen.setdefault(w, None)
            for ch in w:  # single characters so unseen words split into pieces, never all [UNK]
                seen.setdefault(ch, None)
                seen.setdefault("##" + ch, None)
    return list(seen)


def make_tokenizer(out_dir: str | os.PathLike, family: str = "bert", texts=None, max_vocab: int = 4000):
    """Write a small tokenizer to ``out_dir`` and return it (WordPiece for BERT, byte-level BPE for RoBERTa)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    if family == "bert":
        from transformers import BertTokenizerFast  # type: ignore[attr-defined]  # a lazy alias in transformers 5

        vocab = SPECIAL + [w for w in _words(texts) if w not in SPECIAL][: max_vocab - len(SPECIAL)]
        (out / "vocab.txt").write_text("\n".join(vocab) + "\n", encoding="utf-8")
        tok = BertTokenizerFast(vocab={w: i for i, w in enumerate(vocab)}, do_lower_case=True, model_max_length=512)
    elif family == "roberta":
        from tokenizers import ByteLevelBPETokenizer
        from transformers import RobertaTokenizerFast

        corpus = list(texts or []) + [" ".join(_BASE_WORDS)]
        bpe = ByteLevelBPETokenizer()
        bpe.train_from_iterator(
            corpus,
            vocab_size=min(max_vocab, 1000),
            min_frequency=1,
            special_tokens=["<s>", "<pad>", "</s>", "<unk>", "<mask>"],
        )
        bpe.save_model(str(out))
        tok = RobertaTokenizerFast(vocab=str(out / "vocab.json"), merges=str(out / "merges.txt"), model_max_length=512)
    else:
        raise ValueError(f"unknown family {family!r}")
    tok.save_pretrained(out)
    return tok


@dataclass(frozen=True)
class TinyShape:
    """A tiny model's architecture: its ``family`` (bert | roberta), depth, width, heads, feed-forward width and
    dropout (0.0: a deterministic forward, for tests that compare runs)."""

    family: str = "bert"
    layers: int = 4
    hidden: int = 32
    heads: int = 2
    intermediate: int = 64
    dropout: float = 0.1


def make_tiny_model(
    out_dir: str | os.PathLike,
    kind: str = "classification",
    num_labels: int = 2,
    shape: TinyShape = TinyShape(),
    texts=None,
    seed: int = 0,
    label_names=None,
    with_head: bool = True,
):
    """Save a tiny randomly initialised model + tokenizer of ``shape`` to ``out_dir``; returns the path.

    kind: classification | regression | token | qa | mlm | base (encoder only, no task head).
    """
    import torch
    from transformers import AutoConfig

    from raydistill.models.heads import auto_class

    torch.manual_seed(seed)
    out = Path(out_dir)
    tok = make_tokenizer(out, shape.family, texts)
    cfg = AutoConfig.for_model(
        shape.family,
        vocab_size=len(tok),
        hidden_size=shape.hidden,
        num_hidden_layers=shape.layers,
        num_attention_heads=shape.heads,
        intermediate_size=shape.intermediate,
        max_position_embeddings=130,
        type_vocab_size=2 if shape.family == "bert" else 1,
        pad_token_id=tok.pad_token_id,
        bos_token_id=tok.bos_token_id or tok.cls_token_id,
        eos_token_id=tok.eos_token_id or tok.sep_token_id,
        hidden_dropout_prob=shape.dropout,
        attention_probs_dropout_prob=shape.dropout,
    )
    if kind in ("classification", "token"):
        cfg.num_labels = num_labels
        if label_names:
            cfg.id2label = dict(enumerate(label_names))
            cfg.label2id = {v: k for k, v in cfg.id2label.items()}
    elif kind == "regression":
        cfg.num_labels, cfg.problem_type = 1, "regression"
    model = auto_class(kind if with_head else "base").from_config(cfg)
    model.save_pretrained(out)
    return str(out)


def held_window(history) -> tuple[float, float] | None:
    """The span (seconds since the epoch) over which a run held GPU memory, from the history of its per-epoch
    ``gpu_memory_mb`` metric (MLflow ``Metric`` entries: ``value``, ``timestamp`` in ms). Every entry must be > 0 (the
    student stays on the GPU from before the first epoch's report to after the last one), else None."""
    if not history or any(m.value <= 0 for m in history):
        return None
    ts = sorted(m.timestamp / 1000 for m in history)
    return ts[0], ts[-1]


def common_span(windows) -> float:
    """Seconds during which every (start, end) window of ``windows`` is open at once (0 when they do not all overlap,
    or when one is missing)."""
    if not windows or any(w is None for w in windows):
        return 0.0
    return max(0.0, min(e for _, e in windows) - max(s for s, _ in windows))
