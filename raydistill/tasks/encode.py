"""Examples -> model features, batches with dynamic padding, and model outputs -> task metrics.

``score`` expects ``outputs`` as numpy arrays indexed by FEATURE index (row ``i`` belongs to ``encoded.features[i]``;
pass ``outputs["feature_index"]`` as well if rows come in another order, e.g. gathered from several workers):

  classification  outputs["logits"]: [n_features, num_labels]
  regression      outputs["logits"]: [n_features] or [n_features, 1]
  token           outputs["logits"]: list of [len_i, num_labels] arrays, UNPADDED (len_i = len(input_ids) of feature i;
                  a padded [n, L, C] array also works, padding is ignored)
  qa              outputs["start_logits"], outputs["end_logits"]: lists of [len_i] arrays, UNPADDED (padded 2-D is fine)

Token metrics compare against the FULL gold sentence: words cut off by ``max_length`` count as predicted "O".
QA picks, per example, the best span over all its windows (start <= end, <= 30 tokens, inside the context, n-best 20).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from raydistill.common.errors import UserError
from raydistill.tasks import metrics
from raydistill.tasks.examples import row_index

MODEL_INPUTS = ("input_ids", "attention_mask", "token_type_ids")
IGNORE = -100  # label of pieces the loss and the metrics skip
MAX_ANSWER_TOKENS = 30
N_BEST = 20
# text rows tokenised at a time: the tokenizer's Python lists and Encoding objects of one chunk, never of the whole
# set. They cost ~8 kB a row at their peak: 512 rows left ~11 MB of growth encoding 40k SST-2 rows, 4096 ~36 MB
CHUNK = 512
# the flat arrays' types (what the encoded-rows cache stores too): ids fit int32, masks and segment ids int8
DTYPES = {"input_ids": np.int32, "attention_mask": np.int8, "token_type_ids": np.int8}


def label_keys(kind: str) -> tuple[str, ...]:
    return ("start_positions", "end_positions") if kind == "qa" else ("labels",)


class FlatFeatures(Sequence):
    """Text classification and regression features held flat (issue 48: a list of Python ints per row took ~12× the
    arrays): every row's token ids in one int32 array, masks and segment ids in int8 ones, ``offsets`` where each
    row starts (n + 1), the labels in one array (int64, or float64 for regression). Row ``i`` reads as the dict it
    always was, built when asked for: the model inputs as Python lists (``MODEL_INPUTS`` order), ``labels`` a
    Python int or float, ``feature_index`` ``i``; ``collate`` and every reader see no difference."""

    def __init__(self, columns: dict[str, np.ndarray], offsets: np.ndarray, labels: np.ndarray):
        self.columns, self.offsets, self.labels = columns, offsets, labels

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, i):  # an int: that row; a slice: a list of rows, as a list gives
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        i = row_index(i, len(self), "feature")
        a, b = int(self.offsets[i]), int(self.offsets[i + 1])
        row: dict = {k: col[a:b].tolist() for k, col in self.columns.items()}
        row["labels"], row["feature_index"] = self.labels[i].item(), i
        return row

    def __eq__(self, other) -> bool:  # equal to any sequence of the same rows (the list encode once returned)
        if not isinstance(other, Sequence) or isinstance(other, str | bytes):
            return NotImplemented
        return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))

    __hash__ = None  # type: ignore[assignment]  # mutable arrays, compared by value

    def lengths(self) -> np.ndarray:
        """Each row's number of pieces, from the offsets (no row built)."""
        return np.diff(self.offsets)


def lengths(features) -> list[int]:
    """Each feature's number of pieces (``len(f["input_ids"])``): flat features' from their offsets."""
    if isinstance(features, FlatFeatures):
        return features.lengths().tolist()
    return [len(f["input_ids"]) for f in features]


@dataclass
class Encoded:
    features: Sequence[dict]  # model inputs + label fields + "feature_index" (FlatFeatures for text tasks)
    example_index: Sequence[int]  # feature -> example it came from (QA: several features per example)
    word_ids: list[list] | None = None  # token: per piece, the word it starts, or None (specials, later pieces)
    offsets: list[list] | None = field(default=None, repr=False)  # qa: per piece, (start, end) in context or None

    def __len__(self) -> int:
        return len(self.features)


def _inputs(enc, i: int) -> dict:
    return {k: enc[k][i] for k in MODEL_INPUTS if k in enc}


def encode(task, examples: Sequence[dict], tokenizer, max_length: int) -> Encoded:
    """Tokenise ``examples`` (see base.py) for ``task``; every feature carries its ``feature_index``.

    Token and QA tasks need a fast (Rust) tokenizer for word ids and character offsets.
    """
    if task.kind in ("token", "qa") and not getattr(tokenizer, "is_fast", True):
        raise UserError(
            "tokenizer",
            f"task {task.name} needs a fast tokenizer (word ids / offsets); "
            "load it with AutoTokenizer.from_pretrained(..., use_fast=True)",
        )
    if task.kind == "qa":
        return _encode_qa(examples, tokenizer, max_length)
    if task.kind == "token":
        enc = tokenizer(
            [e["tokens"] for e in examples], is_split_into_words=True, truncation=True, max_length=max_length
        )
        feats, word_ids = [], []
        for i, ex in enumerate(examples):
            first, prev = [], None
            for w in enc.word_ids(i):
                first.append(w if w is not None and w != prev else None)
                prev = w
            labels = [ex["labels"][w] if w is not None else IGNORE for w in first]
            feats.append({**_inputs(enc, i), "labels": labels, "feature_index": i})
            word_ids.append(first)
        return Encoded(feats, list(range(len(examples))), word_ids=word_ids)
    return _encode_text(task, examples, tokenizer, max_length)


def _encode_text(task, examples: Sequence[dict], tokenizer, max_length: int) -> Encoded:
    """Text classification and regression: ``CHUNK`` rows tokenised at a time (the fast tokenizer's batch call)
    straight into flat arrays (``FlatFeatures``); one feature per example, no padding, truncated to ``max_length``."""
    pairs = any(e.get("text_pair") is not None for e in examples)  # over all rows, as one call once decided it
    parts: dict[str, list[np.ndarray]] = {}
    counts: list[np.ndarray] = []
    for s in range(0, len(examples), CHUNK):
        chunk = examples[s : s + CHUNK]
        texts = [e["text"] for e in chunk]
        enc = tokenizer(
            texts, [e.get("text_pair") for e in chunk] if pairs else None, truncation=True, max_length=max_length
        )
        counts.append(np.fromiter(map(len, enc["input_ids"]), np.int64, len(chunk)))
        total = int(counts[-1].sum())
        for k in (k for k in MODEL_INPUTS if k in enc):
            flat = itertools.chain.from_iterable(enc[k])
            parts.setdefault(k, []).append(np.fromiter(flat, DTYPES[k], total))
    offsets = np.concatenate([[0], np.cumsum(np.concatenate(counts))]) if counts else np.zeros(1, np.int64)
    columns = {k: np.concatenate(v) for k, v in parts.items()}
    return Encoded(FlatFeatures(columns, offsets, _labels(task, examples)), range(len(examples)))


def _labels(task, examples: Sequence[dict]) -> np.ndarray:
    """The examples' labels as one array: int64 class ids (``IGNORE`` for an augmented copy, which has no gold
    label), or float64 scores (NaN for such a copy) for regression."""
    if task.kind == "regression":
        return np.array([float("nan") if e["label"] is None else float(e["label"]) for e in examples], np.float64)
    return np.array([IGNORE if e["label"] is None else int(e["label"]) for e in examples], np.int64)


def _clip_questions(questions: list[str], tokenizer, limit: int) -> list[str]:
    """Cut over-long questions at a token boundary so the context window stays wider than the stride."""
    enc = tokenizer(questions, add_special_tokens=False, return_offsets_mapping=True)
    return [
        q if len(ids) <= limit else q[: off[limit - 1][1]]
        for q, ids, off in zip(questions, enc["input_ids"], enc["offset_mapping"], strict=True)
    ]


def _encode_qa(examples, tokenizer, max_length) -> Encoded:
    """Question first, context second, truncating only the context into overlapping windows (stride max_length//4)."""
    stride = max_length // 4
    questions = _clip_questions([e["question"].lstrip() for e in examples], tokenizer, max(1, max_length // 2 - 2))
    enc = tokenizer(
        questions,
        [e["context"] for e in examples],
        truncation="only_second",
        max_length=max_length,
        stride=stride,
        return_overflowing_tokens=True,
        return_offsets_mapping=True,
    )
    feats, ex_index, offsets = [], [], []
    for i, ex_i in enumerate(enc["overflow_to_sample_mapping"]):
        seq = enc.sequence_ids(i)
        offs = [tuple(o) if s == 1 else None for o, s in zip(enc["offset_mapping"][i], seq, strict=True)]
        start = end = 0  # position 0 ([CLS]) when the answer is not inside this window
        ans = examples[ex_i]["answers"]
        if ans["text"]:
            a0 = ans["answer_start"][0]
            a1 = a0 + len(ans["text"][0])
            ctx = [(j, o) for j, o in enumerate(offs) if o is not None]  # the context's pieces and their offsets
            if ctx and ctx[0][1][0] <= a0 and ctx[-1][1][1] >= a1:
                start = next(j for j, o in ctx if o[1] > a0)
                end = next(j for j, o in reversed(ctx) if o[0] < a1)
        feats.append({**_inputs(enc, i), "start_positions": start, "end_positions": end, "feature_index": i})
        ex_index.append(int(ex_i))
        offsets.append(offs)
    return Encoded(feats, ex_index, offsets=offsets)


def collate(features: list[dict], pad_token_id: int) -> dict:
    """Stack features into tensors, padding lists to the longest in THIS batch (labels with -100, masks with 0)."""
    import torch

    out = {}
    for key in features[0]:
        vals = [f[key] for f in features]
        if isinstance(vals[0], list):
            pad = pad_token_id if key == "input_ids" else IGNORE if key == "labels" else 0
            width = max(len(v) for v in vals)
            out[key] = torch.tensor([v + [pad] * (width - len(v)) for v in vals], dtype=torch.long)
        else:
            out[key] = torch.tensor(vals, dtype=torch.float if isinstance(vals[0], float) else torch.long)
    return out


# --------------------------------------------------------------------------- scoring


def _rows(outputs: dict, key: str, n: int) -> list:
    """Rows of ``outputs[key]`` in feature order (re-ordered by ``outputs["feature_index"]`` if given)."""
    rows = outputs[key]
    if "feature_index" in outputs:
        order = np.asarray(outputs["feature_index"]).reshape(-1)
        placed = [None] * n
        for r, i in zip(rows, order, strict=True):
            placed[int(i)] = r
        rows = placed
    if len(rows) != n or any(r is None for r in rows):
        raise ValueError(f"outputs[{key!r}] covers {len(rows)} rows; expected one per feature ({n})")
    return list(rows)


def qa_predictions(examples, encoded: Encoded, outputs: dict) -> list[str]:
    """Best answer text per example: highest start+end logit over valid spans of all its features."""
    n = len(encoded)
    starts, ends = _rows(outputs, "start_logits", n), _rows(outputs, "end_logits", n)
    best = [(-np.inf, "") for _ in examples]
    assert encoded.offsets is not None  # a QA encoding carries the pieces' offsets
    for i, (s_log, e_log) in enumerate(zip(starts, ends, strict=True)):
        offs, ex = encoded.offsets[i], encoded.example_index[i]
        s_log, e_log = np.asarray(s_log)[: len(offs)], np.asarray(e_log)[: len(offs)]
        for s in np.argsort(s_log)[::-1][:N_BEST]:
            for e in np.argsort(e_log)[::-1][:N_BEST]:
                if offs[s] is None or offs[e] is None or e < s or e - s + 1 > MAX_ANSWER_TOKENS:
                    continue
                value = float(s_log[s] + e_log[e])
                if value > best[ex][0]:
                    best[ex] = (value, examples[ex]["context"][offs[s][0] : offs[e][1]])
    return [text for _, text in best]


def example_predictions(task, examples: Sequence[dict], encoded: Encoded, outputs: dict) -> tuple[list, list]:
    """(predictions, references), one per example, in the form ``metrics.compute`` scores: a class id or a score
    (classification, regression), a tag list (token classification), an answer string (QA). One per example, so a
    metric can be resampled over examples (``results.significance``)."""
    n = len(encoded)
    if task.kind == "qa":
        return qa_predictions(examples, encoded, outputs), [e["answers"]["text"] for e in examples]
    logits = _rows(outputs, "logits", n)
    if task.kind == "token":
        names = task.label_names
        tags = [["O"] * len(e["tokens"]) for e in examples]  # words cut off by truncation count as "O"
        assert encoded.word_ids is not None  # a token encoding carries the pieces' word ids
        for i, row in enumerate(logits):
            ex = encoded.example_index[i]
            for pos, w in enumerate(encoded.word_ids[i]):
                if w is not None:
                    tags[ex][w] = names[int(np.argmax(row[pos]))]
        return tags, [[names[j] for j in e["labels"]] for e in examples]
    refs = [examples[encoded.example_index[i]]["label"] for i in range(n)]
    arr = np.asarray(logits, dtype=float)
    preds = arr.reshape(n) if task.kind == "regression" else arr.argmax(-1)
    return preds.tolist(), refs


def score(task, examples: Sequence[dict], encoded: Encoded, outputs: dict, by_class: bool = False) -> dict[str, float]:
    """``task.metrics`` (0-1 scale) from model outputs, macro-F1 beside them for a task with classes; ``by_class``:
    each class's recall too (``recall_<key>``, dev only: a split that chooses needs no table). See the module
    docstring for the ``outputs`` layout."""
    return score_predictions(task, *example_predictions(task, examples, encoded, outputs), by_class=by_class)


def score_predictions(task, preds: list, refs: list, by_class: bool = False) -> dict[str, float]:
    """``score`` of predictions already taken from the outputs (``example_predictions``)."""
    out = metrics.compute(task, preds, refs)
    if by_class and metrics.per_class(task):
        out.update(metrics.class_recall(task, preds, refs))
    return out
