"""TinyBERT data augmentation (Jiao et al. 2020, Algorithm 1), seeded and cached.

For every example we make ``n`` augmented copies. Each copy walks the words of the sentence and, with
probability ``p``, replaces a word by one of its ``k`` candidates. Where candidates come from (``candidates``):

* ``mlm`` (the paper's, needs a masked-LM head, ``--mlm DIR``): a word that is a single word piece is masked and its
  candidates are the masked LM's top-``k`` predictions; a word of several pieces gets the ``k`` nearest whole words
  in the MLM's input embeddings (cosine similarity of the mean of its pieces' embeddings);
* ``embedding`` (any encoder, e.g. the teacher itself, ``--teacher DIR``): every word gets the ``k`` nearest whole
  words in the model's input word-embedding matrix, less the word itself: the paper's GloVe path applied to every
  word, so a teacher without an MLM head (BERT, RoBERTa, ELECTRA, a sentence-embedding MiniLM) can augment.

Departure from the paper: it used GloVe vectors for the multi-piece case. GloVe cannot be downloaded here, so
we use the model's own *input embeddings* instead. Candidates are restricted to whole-word vocabulary entries
(``raydistill.data.candidates``): not ``##`` continuations (WordPiece) / ``Ġ``-less pieces (byte-level BPE),
not special tokens, and containing a letter or digit. Words without a letter or digit (punctuation), single-piece
words cut off by ``max_length`` (mlm) and words the tokenizer cannot spell (embedding: [UNK]) are never replaced.

As in the paper, candidates are computed once per word on the original sentence (mlm: one masked forward per
single-piece word, batched across sentences; embedding: once per distinct word); the ``n`` copies then only
sample. A pair's copy changes one side and keeps the other, as TinyBERT's code does (it writes N copies of the first
sentence beside the second, then N of the second): copy ``i`` changes ``text`` when ``i`` is even and ``text_pair``
when it is odd, so a pair keeps what ties its two sides together (a paraphrase stays comparable to its original
half). Departures: that code kept a pair's last first-sentence copy beside the second sentence's copies (an
accident of reusing its row), and dropped a copy identical to an earlier one; here the kept side is the original,
and every row has exactly ``n`` copies (a row with nothing to swap is repeated: its teacher outputs, not new
text). Every other field is copied unchanged except
the gold label: a copy carries ``label: null``, since swapping 40% of the words can change what the original's label
says (a paraphrase pair that no longer is one). As in TinyBERT, the teacher labels the copies: a run trains on the set
through ``--augment-dir``, the teacher (live or through its cache, whose key covers the exact rows) gives every copy
its own soft targets, and the gold-label loss counts only the originals (``tasks.encode``: no label = ignored).

The command line augments only the rows a run trains on: a task whose dev set is held out of train (NSMC, see
``raydistill.data.splits.split_train``) has those rows left out, and every row written carries ``source_index``
(its original's index in the train split), by which runs drop anything made from a held-out row.

Paper defaults: ``p=0.4, k=15, n=20``.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import random
import re
import shutil
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from raydistill.common.errors import UserError, check
from raydistill.data.candidates import embedding_candidates, mlm_candidates
from raydistill.models.encoder import quiet_hf

if TYPE_CHECKING:
    from raydistill.tasks.base import Task

# v2: copies carry label None (the teacher labels them); v3: TinyBERT's replaceable words (letters only, no stop
# words) and one side of a pair per copy
CACHE_VERSION = "augment-v3"
CANDIDATES = ("mlm", "embedding")
MLM_HINT = (
    "pass a masked-LM checkpoint such as bert-base-uncased or roberta-base "
    "(a directory with a *ForMaskedLM model and its tokenizer), or use --candidates embedding --teacher DIR "
    "(any encoder's word embeddings)"
)


def _load_mlm(mlm_dir):
    """(tokenizer, masked-LM in eval mode) from ``mlm_dir``; UserError if it is not a masked LM."""
    import transformers as tf

    if not mlm_dir or not Path(mlm_dir).is_dir():
        raise UserError("augment_mlm", f"{str(mlm_dir)!r} is not a directory; {MLM_HINT}")
    try:
        archs = tf.AutoConfig.from_pretrained(mlm_dir).architectures or []
        if not any(a.endswith(("ForMaskedLM", "ForPreTraining")) for a in archs):
            raise UserError(
                "augment_mlm", f"{str(mlm_dir)!r} holds {archs or 'no architecture'}, not a masked LM; " + MLM_HINT
            )
        tok = tf.AutoTokenizer.from_pretrained(mlm_dir)
        model = tf.AutoModelForMaskedLM.from_pretrained(mlm_dir)
    except UserError:
        raise
    except (OSError, ValueError, KeyError) as e:
        raise UserError("augment_mlm", f"cannot load {str(mlm_dir)!r} as a masked LM ({e}); {MLM_HINT}") from None
    check(
        tok.is_fast and tok.mask_token_id is not None,
        "augment_mlm",
        f"{str(mlm_dir)!r} needs a fast tokenizer with a mask token; {MLM_HINT}",
    )
    return tok, model.eval()


def _load_embeddings(model_dir, field):
    """(tokenizer, input word-embedding matrix) of any BERT/RoBERTa-like encoder in ``model_dir``."""
    import transformers as tf

    from raydistill.models.encoder import load_model

    model = load_model(str(model_dir), "base", field=field)
    try:
        tok = tf.AutoTokenizer.from_pretrained(str(model_dir))
    except (OSError, ValueError, KeyError) as e:
        raise UserError(field, f"cannot load the tokenizer of {str(model_dir)!r} ({e})") from None
    check(
        tok.is_fast,
        field,
        f"{str(model_dir)!r} needs a fast tokenizer (word offsets); save it with "
        "AutoTokenizer.from_pretrained(..., use_fast=True)",
    )
    return tok, model.get_input_embeddings().weight.detach()


def check_candidates(candidates) -> None:
    check(
        candidates in CANDIDATES,
        "augment_candidates",
        f"must be one of {', '.join(CANDIDATES)}, got "
        f"{candidates!r}: mlm for a masked LM's predictions (--mlm DIR), embedding for the nearest words in any "
        "encoder's word embeddings (--teacher DIR)",
    )


def _flag(help: str, default: Any, **more: Any) -> Any:
    """A knob the augment command offers as a flag (``commands/flags.py`` generates it from ``help`` and ``more``)."""
    return dataclasses.field(default=default, metadata={"help": help, **more})


@dataclass(frozen=True)
class AugmentOptions:
    """How an augmented set is made: TinyBERT's knobs, declared once. The augment command's flags are generated from
    these fields; a sweep's augmented sets (``data.augment_sets``) and ``augment``/``augment_cached``/``build`` take
    the same object. Checked when made, so a bad value is refused before any model or data is loaded."""

    p: float = _flag("probability that a word is replaced", 0.4)
    k: int = _flag("candidates per word to draw a replacement from", 15)
    n: int = _flag("augmented copies per training row", 20)
    seed: int = _flag("random seed of the sampling", 0)
    # the rows, not the copies: applied by ``rows`` wherever rows are taken, so the cache key (of the rows) covers it
    limit: int | None = _flag("augment only the first LIMIT training examples (default: all)", None)
    batch_size: int = _flag("sentences per model forward pass", 64)  # not in the cache key: the output is the same
    max_length: int = _flag("tokens per sentence (longer ones are cut)", 128)
    # the command's flag has no default of its own: the model given chooses (``commands/augment.model_source``)
    candidates: str = _flag(
        "mlm: a masked LM's top-k predictions (the paper's; needs --mlm) | embedding: the nearest whole words in a "
        "model's word embeddings (any encoder, e.g. --teacher) (default: mlm when --mlm is given, else embedding)",
        "mlm",
    )

    def __post_init__(self) -> None:
        p, k, n = self.p, self.k, self.n
        check(0.0 <= p <= 1.0, "augment_p", f"must be a probability in [0, 1], got {p}")
        check(isinstance(k, int) and k >= 1, "augment_k", f"must be an integer >= 1, got {k!r}")
        check(isinstance(n, int) and n >= 0, "augment_n", f"must be an integer >= 0, got {n!r}")
        check(
            self.batch_size >= 1 and self.max_length >= 3,
            "augment_batch",
            "batch_size must be >= 1 and max_length >= 3",
        )
        limit = self.limit
        check(
            limit is None or (isinstance(limit, int) and limit >= 1),
            "augment_limit",
            f"must be an integer >= 1 (or none: every row), got {limit!r}",
        )
        check_candidates(self.candidates)

    def rows(self, examples: Iterable[dict]) -> list[dict]:
        """The examples augmented: the first ``limit`` (all without one)."""
        return list(examples)[: self.limit]

    def key(self) -> dict[str, Any]:
        """The knobs that change the copies, as the cache key has always named them (``batch_size`` does not)."""
        names = ("p", "k", "n", "seed", "max_length", "candidates")
        return {name: getattr(self, name) for name in names}


@dataclass(frozen=True)
class AugmentRequest:
    """One augmented set to write: what the augment command builds from its flags and a sweep from its space, for
    ``build``. ``task``: a built-in task's name or a ``Task`` (the user's files); ``model_dir`` proposes the
    candidates (a masked LM, or any encoder's word embeddings); ``field`` names its flag in errors; ``mlm``: the
    ``--mlm`` given, recorded in ``augment.json``. The augment command's flags of ``task``, ``data_dir``, ``output``
    and ``mlm`` are generated from their fields' ``help`` (``commands/flags.add_fields``)."""

    task: str | Task = dataclasses.field(
        metadata={
            "help": "task name (classification or regression; python -m raydistill list tasks); default: none, "
            "--train-file names your own data"
        }
    )
    data_dir: str | None = dataclasses.field(
        metadata={"help": "local data folder: the GLUE root or the task's own folder (default: the Hugging Face hub)"}
    )
    model_dir: str  # --mlm's or --teacher's model, as ``candidates`` chooses (the command's ``model_source``)
    output: str = dataclasses.field(
        metadata={"help": "writes OUTPUT/train.jsonl (cache under OUTPUT/cache)", "required": True}
    )
    options: AugmentOptions
    mlm: str | None = dataclasses.field(
        default=None,
        metadata={
            "help": "masked-LM checkpoint directory, e.g. bert-base-uncased (default: none; needed by --candidates mlm)"
        },
    )
    field: str = "augment_teacher"


def _sample(text, slots, p, rng):
    """One augmented copy of ``text``: each replaceable word swapped with probability ``p``."""
    parts, last = [], 0
    for start, end, cands in slots:
        if cands and rng.random() < p:
            parts += [text[last:start], rng.choice(cands)]
            last = end
    return "".join(parts) + text[last:]


def augment(examples, model_dir, options: AugmentOptions, field: str | None = None) -> list[dict]:
    """Originals first, then ``options.n`` augmented copies per example (example by example, same dict format).
    ``options.candidates``: ``mlm`` (``model_dir`` a masked LM) or ``embedding`` (any encoder); ``field`` names the
    model's flag in errors (default ``augment_mlm`` / ``augment_teacher``)."""
    o = options
    examples = o.rows(examples)
    for ex in examples:
        check(
            isinstance(ex, dict) and isinstance(ex.get("text"), str),
            "augment_task",
            "data augmentation needs classification/regression examples {'text', 'text_pair', 'label'}",
        )
    texts = list(dict.fromkeys(s for ex in examples for s in (ex["text"], ex.get("text_pair")) if s is not None))
    if o.candidates == "mlm":
        tok, model = _load_mlm(model_dir)
        found = mlm_candidates(texts, tok, model, o.k, o.batch_size, o.max_length, field or "augment_mlm")
    else:
        field = field or "augment_teacher"
        tok, emb = _load_embeddings(model_dir, field)
        found = embedding_candidates(texts, tok, emb, o.k, field)
    slots = dict(zip(texts, found, strict=True))

    rng = random.Random(o.seed)
    copies = []
    for ex in examples:
        sides = [f for f in ("text", "text_pair") if ex.get(f) is not None]
        for i in range(o.n):
            new = {**ex, "label": None} if "label" in ex else dict(ex)  # the teacher labels a copy, not the gold
            f = sides[i % len(sides)]  # a pair: one side per copy, the other kept
            new[f] = _sample(ex[f], slots[ex[f]], o.p, rng)
            copies.append(new)
    return [dict(ex) for ex in examples] + copies


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def mlm_fingerprint(mlm_dir) -> str:
    """Content hash of a checkpoint directory (big files: size plus first and last MiB)."""
    h = hashlib.sha256()
    for f in sorted(Path(mlm_dir).iterdir()) if Path(mlm_dir).is_dir() else ():
        if not f.is_file():
            continue
        size = f.stat().st_size
        with f.open("rb") as fh:
            if size <= 64 << 20:
                data = fh.read()
            else:
                data = fh.read(1 << 20)
                fh.seek(-(1 << 20), os.SEEK_END)
                data += fh.read()
        h.update(f"{f.name}\0{size}\0{_sha(data)}\n".encode())
    return h.hexdigest()


def cache_path(examples, model_dir, cache_dir, options: AugmentOptions) -> Path:
    """Where ``augment_cached`` keeps this result: keyed by the rows augmented, the model's files and the knobs that
    change the copies (``AugmentOptions.key``). The key is what existing caches were written under: keep it so."""
    ex_fp = _sha(json.dumps(options.rows(examples), sort_keys=True, ensure_ascii=False, default=str).encode())
    key = json.dumps([CACHE_VERSION, ex_fp, mlm_fingerprint(model_dir), options.key()], sort_keys=True)
    return Path(cache_dir) / f"{_sha(key.encode())}.jsonl"


def augment_cached(examples, model_dir, cache_dir, options: AugmentOptions, field: str | None = None) -> list[dict]:
    """``augment`` with the result stored as JSONL under ``cache_dir`` and re-used on the next identical call."""
    examples = options.rows(examples)
    path = cache_path(examples, model_dir, cache_dir, options)
    if path.is_file():
        with path.open(encoding="utf-8") as f:
            return [json.loads(line) for line in f]
    result = augment(examples, model_dir, options, field)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".jsonl")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.writelines(json.dumps(ex, ensure_ascii=False) + "\n" for ex in result)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return result


def build(request: AugmentRequest) -> tuple[int, int, str]:
    """Write OUTPUT/train.jsonl (the training rows after the dev hold-out, each tagged with its source row, and ``n``
    augmented copies of each) and OUTPUT/augment.json (the knobs); cached under OUTPUT/cache. What the command and a
    sweep searching ``augment`` call. Returns (rows in, rows out, the train.jsonl path)."""
    from raydistill.tasks import get_task  # lazy: task loading lives elsewhere

    r, o = request, request.options
    task = get_task(r.task) if isinstance(r.task, str) else r.task
    examples, held = _source_rows(task, r.data_dir, o)
    out = Path(r.output)
    quiet_hf()  # an encoder loaded without its task head: no load report, no progress bars
    result = augment_cached(examples, r.model_dir, out / "cache", o, r.field)
    knobs = {
        "version": CACHE_VERSION,
        "task": task.name,
        "candidates": o.candidates,
        "model": r.model_dir,
        "mlm": r.mlm,
        "p": o.p,
        "k": o.k,
        "n": o.n,
        "seed": o.seed,
        "limit": o.limit,
        "max_length": o.max_length,
        "held_out_rows": len(held),
    }
    _publish(out, result, knobs)
    return len(examples), len(result), str(out / "train.jsonl")


def _source_rows(task, data_dir, options: AugmentOptions) -> tuple[list[dict], set[int]]:
    """The task's training rows after the dev hold-out, each tagged with its row number (the first ``limit``), and
    the held-out row numbers."""
    from raydistill.data.splits import SOURCE, split_train

    rows, cut = split_train(task, data_dir)  # augment after the hold-out: dev rows never get copies
    held = cut.out_of_train
    return options.rows({**ex, SOURCE: i} for i, ex in enumerate(rows) if i not in held), held


def _publish(out: Path, result: list[dict], knobs: dict) -> None:
    """OUTPUT/train.jsonl and OUTPUT/augment.json, moved in whole beside the cache they were built from."""
    from raydistill.common.outputs import publish, staging

    staged = Path(staging(str(out)))
    try:
        with (staged / "train.jsonl").open("w", encoding="utf-8") as f:
            f.writelines(json.dumps(ex, ensure_ascii=False) + "\n" for ex in result)
        (staged / "augment.json").write_text(json.dumps(knobs, indent=1))  # recorded with every run that trains on it
        # the cache files augment writes (cache_path: a SHA-256 .jsonl each), not a file of the user's put there
        cache = [
            f"cache/{f.name}" for f in (out / "cache").glob("*.jsonl") if re.fullmatch(r"[0-9a-f]{64}\.jsonl", f.name)
        ]
        publish(str(staged), str(out), "raydistill augment", keep=tuple(cache))
    finally:
        shutil.rmtree(staged, ignore_errors=True)  # ours
