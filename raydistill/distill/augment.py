"""TinyBERT data augmentation (Jiao et al. 2020, Algorithm 1), seeded and cached.

For every example we make ``n`` augmented copies. Each copy walks the words of the sentence and, with
probability ``p``, replaces a word by one of its ``k`` candidates:

* a word that is a single word piece is masked and its candidates are the masked LM's top-``k`` predictions;
* a word of several word pieces gets the ``k`` nearest whole words in embedding space (cosine similarity of
  the mean of its pieces' embeddings against every whole-word vocabulary entry).

Departure from the paper: it used GloVe vectors for the multi-piece case. GloVe cannot be downloaded here, so
we use the masked LM's own *input embeddings* instead. Candidates (MLM predictions and neighbours alike) are
restricted to whole-word vocabulary entries: not ``##`` continuations (WordPiece) / ``Ġ``-less pieces
(byte-level BPE), not special tokens, and containing a letter or digit. Words without a letter or digit
(punctuation) and single-piece words cut off by ``max_length`` are never replaced.

As in the paper, candidates are computed once per word on the original sentence (one masked forward per
single-piece word, batched across sentences); the ``n`` copies then only sample. Pair tasks augment
``text`` and ``text_pair`` independently and copy ``i`` of an example always pairs copy ``i`` of its own
``text`` with copy ``i`` of its own ``text_pair``; every other field (the label) is copied unchanged.

The command line augments only the rows a run trains on: a task whose dev set is held out of train (NSMC, see
``raydistill.distill.examples.split_train``) has those rows left out, and every row written carries ``source_index``
(its original's index in the train split), by which runs drop anything made from a held-out row.

Paper defaults: ``p=0.4, k=15, n=20``.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import tempfile
from pathlib import Path

from ..cli import HelpFormatter, cli
from ..errors import UserError, check
from ..progress import Progress

CACHE_VERSION = "augment-v1"
_MLM_HINT = ("pass a masked-LM checkpoint such as bert-base-uncased or roberta-base "
             "(a directory with a *ForMaskedLM model and its tokenizer)")


def _load_mlm(mlm_dir):
    """(tokenizer, masked-LM in eval mode) from ``mlm_dir``; UserError if it is not a masked LM."""
    import transformers as tf

    if not mlm_dir or not Path(mlm_dir).is_dir():
        raise UserError("augment_mlm", f"{str(mlm_dir)!r} is not a directory; {_MLM_HINT}")
    try:
        archs = tf.AutoConfig.from_pretrained(mlm_dir).architectures or []
        if not any(a.endswith(("ForMaskedLM", "ForPreTraining")) for a in archs):
            raise UserError("augment_mlm", f"{str(mlm_dir)!r} holds {archs or 'no architecture'}, not a masked LM; "
                            + _MLM_HINT)
        tok = tf.AutoTokenizer.from_pretrained(mlm_dir)
        model = tf.AutoModelForMaskedLM.from_pretrained(mlm_dir)
    except UserError:
        raise
    except (OSError, ValueError, KeyError) as e:
        raise UserError("augment_mlm", f"cannot load {str(mlm_dir)!r} as a masked LM ({e}); {_MLM_HINT}") from None
    check(tok.is_fast and tok.mask_token_id is not None, "augment_mlm",
          f"{str(mlm_dir)!r} needs a fast tokenizer with a mask token; {_MLM_HINT}")
    return tok, model.eval()


def _whole_word_ids(tok, vocab_size):
    """Token ids that stand for a whole word, and the word each one spells."""
    wordpiece = type(tok.backend_tokenizer.model).__name__ == "WordPiece"
    special = set(tok.all_special_tokens)
    ids, words = [], []
    for t, i in sorted(tok.get_vocab().items(), key=lambda kv: kv[1]):
        if i >= vocab_size or t in special or (t.startswith("##") if wordpiece else not t.startswith("Ġ")):
            continue
        w = tok.convert_tokens_to_string([t]).strip()
        if any(c.isalnum() for c in w):
            ids.append(i)
            words.append(w)
    return ids, words


def _mlm_logits(model, input_ids, attention_mask, pos):
    """Vocabulary logits at one position per row, applying the LM head only there."""
    head = getattr(model, "cls", None)
    if head is None:
        head = getattr(model, "lm_head", None)
    rows = range(len(pos))
    if head is None:
        return model(input_ids=input_ids, attention_mask=attention_mask).logits[rows, pos]
    hidden = model.base_model(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
    return head(hidden[rows, pos])


def _candidates(texts, tok, model, k, batch_size, max_length):
    """For each text: [(start, end, [candidate words])] for its replaceable words, in order."""
    import torch

    emb = model.get_input_embeddings().weight.detach()
    ww_ids, ww_words = _whole_word_ids(tok, emb.shape[0])
    check(len(ww_ids) > 0, "augment_mlm", f"the tokenizer has no whole-word vocabulary entries; {_MLM_HINT}")
    k = min(k, len(ww_ids))
    ww_index = torch.tensor(ww_ids)
    ww_emb = torch.nn.functional.normalize(emb[ww_index], dim=-1)
    bias = torch.full((emb.shape[0],), float("-inf"))
    bias[ww_index] = 0.0

    enc = tok(list(texts), add_special_tokens=True, return_offsets_mapping=True, verbose=False)
    out = [[] for _ in texts]
    mlm_jobs, emb_jobs = [], []  # (text index, slot index, ...)
    for t, text in enumerate(texts):
        ids, offsets, pieces = enc["input_ids"][t], enc["offset_mapping"][t], {}
        for pos, wid in enumerate(enc.word_ids(t)):
            if wid is not None:
                pieces.setdefault(wid, []).append(pos)
        for wid in sorted(pieces):
            ps = pieces[wid]
            start, end = offsets[ps[0]][0], offsets[ps[-1]][1]
            if not any(c.isalnum() for c in text[start:end]):
                continue
            if len(ps) == 1 and ps[0] >= max_length - 1:
                continue  # outside the window the MLM sees
            out[t].append((start, end, []))
            if len(ps) == 1:
                mlm_jobs.append((t, len(out[t]) - 1, ps[0]))
            else:
                emb_jobs.append((t, len(out[t]) - 1, [ids[p] for p in ps]))

    def window(t):
        ids = enc["input_ids"][t]
        return ids if len(ids) <= max_length else ids[: max_length - 1] + ids[-1:]

    with torch.no_grad():
        mlm_jobs.sort(key=lambda j: len(window(j[0])))  # similar lengths share a batch: less padding
        progress = Progress("augment: masked-LM candidates", -(-len(mlm_jobs) // batch_size), unit="words")
        for b in range(0, len(mlm_jobs), batch_size):
            batch = mlm_jobs[b : b + batch_size]
            seqs = [window(t) for t, _, _ in batch]
            width = max(map(len, seqs))
            input_ids = torch.full((len(seqs), width), tok.pad_token_id or 0)
            attention = torch.zeros((len(seqs), width), dtype=torch.long)
            for r, s in enumerate(seqs):
                input_ids[r, : len(s)] = torch.tensor(s)
                attention[r, : len(s)] = 1
            pos = [p for _, _, p in batch]
            input_ids[range(len(pos)), pos] = tok.mask_token_id
            top = (_mlm_logits(model, input_ids, attention, pos).float() + bias).topk(k, dim=-1).indices
            for (t, slot, _), row in zip(batch, top.tolist()):
                out[t][slot][2].extend(tok.convert_tokens_to_string([tok.convert_ids_to_tokens(i)]).strip()
                                       for i in row)
            progress.update(items=len(batch))
        for b in range(0, len(emb_jobs), batch_size):
            batch = emb_jobs[b : b + batch_size]
            q = torch.stack([emb[torch.tensor(p)].mean(0) for _, _, p in batch])
            top = (torch.nn.functional.normalize(q, dim=-1) @ ww_emb.T).topk(k, dim=-1).indices
            for (t, slot, _), row in zip(batch, top.tolist()):
                out[t][slot][2].extend(ww_words[i] for i in row)
    return out


def _sample(text, slots, p, rng):
    """One augmented copy of ``text``: each replaceable word swapped with probability ``p``."""
    parts, last = [], 0
    for start, end, cands in slots:
        if cands and rng.random() < p:
            parts += [text[last:start], rng.choice(cands)]
            last = end
    return "".join(parts) + text[last:]


def augment(examples, mlm_dir, p=0.4, k=15, n=20, seed=0, batch_size=64, max_length=128) -> list[dict]:
    """Originals first, then ``n`` augmented copies per example (example by example, same dict format)."""
    check(0.0 <= p <= 1.0, "augment_p", f"must be a probability in [0, 1], got {p}")
    check(isinstance(k, int) and k >= 1, "augment_k", f"must be an integer >= 1, got {k!r}")
    check(isinstance(n, int) and n >= 0, "augment_n", f"must be an integer >= 0, got {n!r}")
    check(batch_size >= 1 and max_length >= 3, "augment_batch", "batch_size must be >= 1 and max_length >= 3")
    examples = list(examples)
    for ex in examples:
        check(isinstance(ex, dict) and isinstance(ex.get("text"), str), "augment_task",
              "data augmentation needs classification/regression examples {'text', 'text_pair', 'label'}")
    texts = list(dict.fromkeys(s for ex in examples for s in (ex["text"], ex.get("text_pair")) if s is not None))
    tok, model = _load_mlm(mlm_dir)
    slots = dict(zip(texts, _candidates(texts, tok, model, k, batch_size, max_length)))

    rng = random.Random(seed)
    copies = []
    for ex in examples:
        for _ in range(n):
            new = dict(ex)
            for field in ("text", "text_pair"):
                if ex.get(field) is not None:
                    new[field] = _sample(ex[field], slots[ex[field]], p, rng)
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


def cache_path(examples, mlm_dir, cache_dir, p=0.4, k=15, n=20, seed=0, max_length=128) -> Path:
    """Where ``augment_cached`` keeps this result (batch_size does not change the output, so it is not keyed)."""
    ex_fp = _sha(json.dumps(list(examples), sort_keys=True, ensure_ascii=False, default=str).encode())
    knobs = {"p": p, "k": k, "n": n, "seed": seed, "max_length": max_length}
    key = json.dumps([CACHE_VERSION, ex_fp, mlm_fingerprint(mlm_dir), knobs], sort_keys=True)
    return Path(cache_dir) / f"{_sha(key.encode())}.jsonl"


def augment_cached(examples, mlm_dir, cache_dir, p=0.4, k=15, n=20, seed=0, batch_size=64,
                   max_length=128) -> list[dict]:
    """``augment`` with the result stored as JSONL under ``cache_dir`` and re-used on the next identical call."""
    examples = list(examples)
    path = cache_path(examples, mlm_dir, cache_dir, p=p, k=k, n=n, seed=seed, max_length=max_length)
    if path.is_file():
        with path.open(encoding="utf-8") as f:
            return [json.loads(line) for line in f]
    result = augment(examples, mlm_dir, p=p, k=k, n=n, seed=seed, batch_size=batch_size, max_length=max_length)
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


@cli
def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m raydistill.distill.augment", formatter_class=HelpFormatter,
                                 description="TinyBERT data augmentation: write N copies of every training row of a "
                                 "task with words swapped for a masked language model's guesses, for distill "
                                 "--augment-dir (seeded; cached under OUTPUT/cache).")
    ap.add_argument("--task", required=True, help="task name (classification or regression; python -m raydistill "
                    "list tasks)")
    ap.add_argument("--data-dir", default=None, help="local data folder: the GLUE root or the task's own folder "
                    "(default: the Hugging Face hub)")
    ap.add_argument("--mlm", required=True, help="masked-LM checkpoint directory, e.g. bert-base-uncased")
    ap.add_argument("--output", required=True, help="writes OUTPUT/train.jsonl (cache under OUTPUT/cache)")
    ap.add_argument("--p", type=float, default=0.4, help="probability that a word is replaced")
    ap.add_argument("--k", type=int, default=15, help="candidates per word to draw a replacement from")
    ap.add_argument("--n", type=int, default=20, help="augmented copies per training row")
    ap.add_argument("--seed", type=int, default=0, help="random seed of the sampling")
    ap.add_argument("--limit", type=int, default=None, help="augment only the first LIMIT training examples "
                    "(default: all)")
    ap.add_argument("--batch-size", type=int, default=64, help="sentences per masked-LM forward pass")
    ap.add_argument("--max-length", type=int, default=128, help="tokens per sentence (longer ones are cut)")
    args = ap.parse_args(argv)

    from ..tasks import get_task  # lazy: task loading lives elsewhere

    from .examples import SOURCE, split_train

    task = get_task(args.task)
    rows, held = split_train(task, args.data_dir)  # augment after the hold-out: dev rows never get copies
    examples = [{**ex, SOURCE: i} for i, ex in enumerate(rows) if i not in held]
    if args.limit is not None:
        examples = examples[: args.limit]
    out = Path(args.output)
    result = augment_cached(examples, args.mlm, out / "cache", p=args.p, k=args.k, n=args.n, seed=args.seed,
                            batch_size=args.batch_size, max_length=args.max_length)
    out.mkdir(parents=True, exist_ok=True)
    with (out / "train.jsonl").open("w", encoding="utf-8") as f:
        f.writelines(json.dumps(ex, ensure_ascii=False) + "\n" for ex in result)
    knobs = {"task": args.task, "mlm": args.mlm, "p": args.p, "k": args.k, "n": args.n, "seed": args.seed,
             "limit": args.limit, "max_length": args.max_length, "held_out_rows": len(held)}
    (out / "augment.json").write_text(json.dumps(knobs, indent=1))  # recorded with every run that trains on it
    print(f"{len(examples)} examples -> {len(result)} (with {args.n} augmented copies each): {out / 'train.jsonl'}")


if __name__ == "__main__":
    main()
