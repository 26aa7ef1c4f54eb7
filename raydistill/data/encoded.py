"""A large training set tokenised once: an augmented set's encoded rows cached on disk, reused by every trial and seed.

An augmented transfer set (``distill.augment``, ×20: ~70k MRPC rows) was tokenised again by every trial and seed,
tens of seconds of a trial's fixed cost on 2 CPU cores, minutes under load (docs/benchmarks/2026-11-27-augmented-
speed.md). The encoded rows are stored beside the teacher-output cache (``ROOT/encoded/KEY.npz``: token ids, masks
and segment ids flat with offsets, labels), keyed by the exact rows, the tokenizer's full definition, the length and
the task kind, and read back as the very features ``tasks.encode.encode`` returns (tested equal). Text classification
and regression with a fast tokenizer only; anything else is encoded as before.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from raydistill.tasks.encode import DTYPES, Encoded, FlatFeatures, encode

VERSION = "1"
KINDS = ("classification", "regression")


def encode_cached(task, examples: Sequence[dict], tokenizer, max_length: int, root: str | None) -> Encoded:
    """``encode(task, examples, tokenizer, max_length)``, read from ``root/encoded`` when this exact encoding was
    written there before, else encoded and written (``root`` None, another task kind or a slow tokenizer: encoded)."""
    key = _key(task, examples, tokenizer, max_length) if root else None
    if key is None:
        return encode(task, examples, tokenizer, max_length)
    assert root is not None
    path = os.path.join(root, "encoded", f"{key}.npz")
    if os.path.isfile(path):
        with contextlib.suppress(OSError, ValueError, KeyError):  # unreadable (a full disk once): encode again
            return _load(path, task.kind)
    enc = encode(task, examples, tokenizer, max_length)
    with contextlib.suppress(OSError):  # a cache that cannot be written costs this run nothing but the saving
        _save(path, enc)
    return enc


def _key(task, examples: Sequence[dict], tokenizer, max_length: int) -> str | None:
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if task.kind not in KINDS or not getattr(tokenizer, "is_fast", False) or backend is None:
        return None
    h = hashlib.sha256()
    # the tokenizer's whole definition (vocabulary, normaliser, post-processor), not its folder: a hub name or an
    # edited vocabulary gets its own entry
    h.update(json.dumps([VERSION, task.kind, max_length, type(tokenizer).__name__]).encode())
    spec = json.loads(backend.to_str())
    for state in ("truncation", "padding"):  # set by the last call, not part of the definition: left out
        spec.pop(state, None)
    h.update(json.dumps(spec, sort_keys=True).encode())
    for piece in _rows_text(examples):
        h.update(piece)
    return h.hexdigest()[:24]


def _rows_text(examples: Sequence[dict], batch: int = 1024) -> Iterator[bytes]:
    """``json.dumps([(text, pair, label), ...])`` of the rows, ``batch`` rows at a time: the same bytes (the key of
    every entry written before), never the whole text at once."""
    yield b"["
    for s in range(0, len(examples), batch):
        rows = ((e["text"], e.get("text_pair"), e["label"]) for e in examples[s : s + batch])
        text = ", ".join(json.dumps(r, ensure_ascii=False, default=str) for r in rows)
        yield ((", " if s else "") + text).encode()
    yield b"]"


def _save(path: str, enc: Encoded) -> None:
    """One .npz written beside ``path`` and renamed: concurrent trials never read half a file (two may both write)."""
    feats = enc.features
    assert isinstance(feats, FlatFeatures)  # what encode gives the kinds cached
    arrays: dict[str, Any] = {"keys": np.array(list(feats.columns)), "offsets": feats.offsets, "labels": feats.labels}
    arrays.update(feats.columns)  # ids int32, masks and segment ids int8 (encode's DTYPES)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".npz", dir=os.path.dirname(path))
    try:
        with os.fdopen(fd, "wb") as f:
            np.savez(f, **arrays)
        os.chmod(tmp, 0o644)  # readable by the other users of a shared cache, as the teacher's arrays (mkstemp: 0600)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.remove(tmp)
        raise


def _load(path: str, kind: str) -> Encoded:
    """The features as ``encode`` makes them (flat: rows read as the same dicts, keys in the same order)."""
    with np.load(path) as z:
        columns = {str(k): z[str(k)].astype(DTYPES[str(k)], copy=False) for k in z["keys"]}
        offsets, labels = z["offsets"].astype(np.int64), z["labels"]
    labels = labels.astype(np.float64 if kind == "regression" else np.int64, copy=False)
    if len(offsets) != len(labels) + 1 or any(len(c) != offsets[-1] for c in columns.values()):
        raise ValueError(f"{path}: its arrays disagree in length")  # a damaged entry: encoded again
    return Encoded(FlatFeatures(columns, offsets, labels), range(len(labels)))
