"""Replacement candidates for TinyBERT augmentation (``augmentation.py``): which vocabulary entries are whole words, a
masked LM's top-k predictions, and the nearest whole words in a model's input word-embedding matrix.

Whole words: not ``##`` continuations (WordPiece: BERT, ELECTRA), only ``Ġ``-prefixed entries (byte-level BPE:
RoBERTa) or ``▁``-prefixed ones (SentencePiece), never special tokens, and spelled with letters and digits only
(so never punctuation, nor BERT's never-split ``[unused0]`` entries). A word of the text is replaceable, as in
TinyBERT's own augmentation code, when it is spelled with letters only (numbers, punctuation and words such as
"$2.11" or "don't"'s pieces never are) and is not an English stop word (``STOP_WORDS``: the list that code
carries): swapping "the", "his" or "not" breaks a sentence's grammar or flips its meaning, where TinyBERT meant to
vary its content words. Letters of any script count (Hangul too), so Korean text is augmented on the same rule.

``embedding_candidates`` is the paper's GloVe path applied to every word, with the model's own input embeddings in
place of GloVe: a word's query is the mean of its pieces' embeddings, its candidates the ``k`` whole words of highest
cosine similarity, less the word itself (any case). Context-free, so computed once per distinct word.
"""

from __future__ import annotations

from raydistill.common.errors import check
from raydistill.common.progress import Progress

# the English stop words TinyBERT's data_augmentation.py never replaces (its StopWordsList: NLTK's, less the
# question words)
STOP_WORDS = frozenset(
    """i me my myself we our ours ourselves you you're you've you'll you'd your yours yourself yourselves he him his
    himself she she's her hers herself it it's its itself they them their theirs themselves this that that'll these
    those am is are was were be been being have has had having do does did doing a an the and but if or because as
    until while of at by for with about against between into through during before after above below to from up down
    in out on off over under again further then once here there all any both each few more most other some such no
    nor not only own same so than too very s t can will just don don't should should've now d ll m o re ve y ain
    aren aren't couldn couldn't didn didn't doesn doesn't hadn hadn't hasn hasn't haven haven't isn isn't ma mightn
    mightn't mustn mustn't needn needn't shan shan't shouldn shouldn't wasn wasn't weren weren't won won't wouldn
    wouldn't 's 're""".split()
)
WORD_STARTS = ("Ġ", "▁")  # byte-level BPE (RoBERTa), SentencePiece (XLM-R): the prefix of a word-initial piece


def whole_word_ids(tok, vocab_size):
    """Token ids that stand for a whole word, and the word each one spells."""
    vocab = sorted(tok.get_vocab().items(), key=lambda kv: kv[1])
    wordpiece = type(tok.backend_tokenizer.model).__name__ == "WordPiece"
    start = None if wordpiece else next((p for p in WORD_STARTS if any(t.startswith(p) for t, _ in vocab)), None)
    special = set(tok.all_special_tokens)
    ids, words = [], []
    for t, i in vocab:
        piece = t.startswith("##") if wordpiece else not start or not t.startswith(start)  # not word-initial
        if i >= vocab_size or t in special or piece:
            continue
        w = tok.convert_tokens_to_string([t]).strip()
        if w.isalnum():  # letters and digits only: no punctuation, no never-split "[unused0]"
            ids.append(i)
            words.append(w)
    return ids, words


def word_slots(texts, tok):
    """The tokenised texts and, per text, its replaceable words as (start, end, piece positions)."""
    enc = tok(list(texts), add_special_tokens=True, return_offsets_mapping=True, verbose=False)
    out = []
    for t, text in enumerate(texts):
        pieces: dict[int, list[int]]  # word id -> its pieces' positions
        offsets, pieces, words = enc["offset_mapping"][t], {}, []
        for pos, wid in enumerate(enc.word_ids(t)):
            if wid is not None:
                pieces.setdefault(wid, []).append(pos)
        for wid in sorted(pieces):
            ps = pieces[wid]
            start, end = offsets[ps[0]][0], offsets[ps[-1]][1]
            if replaceable(text[start:end]):
                words.append((start, end, ps))
        out.append(words)
    return enc, out


def replaceable(word: str) -> bool:
    """TinyBERT's rule for a word augmentation may swap: letters only, not a stop word."""
    return word.isalpha() and word.lower() not in STOP_WORDS


def nearest_words(queries, ww_emb, ww_words, k, exclude=None):
    """For each query vector, the ``k`` whole words (``ww_words``; ``ww_emb`` their embeddings, L2-normalised) of
    highest cosine similarity, best first; ``exclude[i]`` is a set of lower-case spellings never proposed to query i."""
    import torch

    sims = torch.nn.functional.normalize(queries.float(), dim=-1) @ ww_emb.T
    if exclude:
        by_word: dict[str, list[int]] = {}
        for i, w in enumerate(ww_words):
            by_word.setdefault(w.lower(), []).append(i)
        for r, spellings in enumerate(exclude):
            for w in spellings:
                if w in by_word:
                    sims[r, by_word[w]] = float("-inf")
    top = sims.topk(min(k, len(ww_words)), dim=-1)
    return [
        [ww_words[i] for i, v in zip(idx, val, strict=True) if v != float("-inf")]
        for idx, val in zip(top.indices.tolist(), top.values.tolist(), strict=True)
    ]


def embedding_candidates(texts, tok, emb, k, field, batch_size=512):
    """For each text: [(start, end, [candidate words])] for its replaceable words, in order, from the input
    word-embedding matrix ``emb`` [vocab, dim] (module docstring). Words the tokenizer maps to its unknown token
    carry no meaning in ``emb`` and get no candidates."""
    import torch

    emb = emb.detach().float()
    ww_ids, ww_words = whole_word_ids(tok, emb.shape[0])
    check(
        len(ww_ids) > 0,
        field,
        "the tokenizer has no whole-word vocabulary entries (every entry is a ## piece, a "
        "special token or punctuation); pass a model with a WordPiece, byte-level BPE or SentencePiece vocabulary",
    )
    ww_emb = torch.nn.functional.normalize(emb[torch.tensor(ww_ids)], dim=-1)
    enc, slots = word_slots(texts, tok)
    unk = tok.unk_token_id
    queries: dict[tuple, set] = {}  # piece ids -> lower-case spellings of the word (never its own candidate)
    for t, words in enumerate(slots):
        ids = enc["input_ids"][t]
        for start, end, ps in words:
            key = tuple(ids[p] for p in ps)
            if unk not in key:
                spelling = {texts[t][start:end].lower(), tok.decode(list(key)).strip().lower()}
                queries.setdefault(key, set()).update(spelling)
    found: dict[tuple, list[str]]  # piece ids -> candidate words
    keys, found = list(queries), {}
    progress = Progress("augment: embedding candidates", -(-len(keys) // batch_size), unit="words")
    with torch.no_grad():
        for b in range(0, len(keys), batch_size):
            batch = keys[b : b + batch_size]
            q = torch.stack([emb[torch.tensor(key)].mean(0) for key in batch])
            found.update(
                zip(batch, nearest_words(q, ww_emb, ww_words, k, [queries[key] for key in batch]), strict=True)
            )
            progress.update(items=len(batch))
    out = []
    for t, words in enumerate(slots):
        ids = enc["input_ids"][t]
        out.append([(start, end, list(found.get(tuple(ids[p] for p in ps), []))) for start, end, ps in words])
    return out


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


def mlm_candidates(texts, tok, model, k, batch_size, max_length, field):
    """For each text: [(start, end, [candidate words])] for its replaceable words, in order. A single-piece word gets
    the masked LM's top-``k`` whole words (one masked forward per word, batched across sentences; words past the
    ``max_length`` window are left alone); a word of several pieces its nearest whole words in the MLM's input
    embeddings (``nearest_words``, the word itself not excluded, as before)."""
    import torch

    emb = model.get_input_embeddings().weight.detach()
    ww_ids, ww_words = whole_word_ids(tok, emb.shape[0])
    check(
        len(ww_ids) > 0,
        field,
        "the tokenizer has no whole-word vocabulary entries; pass a masked-LM checkpoint "
        "such as bert-base-uncased or roberta-base",
    )
    k = min(k, len(ww_ids))
    ww_index = torch.tensor(ww_ids)
    ww_emb = torch.nn.functional.normalize(emb[ww_index], dim=-1)
    bias = torch.full((emb.shape[0],), float("-inf"))  # the MLM's guesses restricted to whole words
    bias[ww_index] = 0.0
    enc, slots = word_slots(texts, tok)
    out, mlm_jobs, emb_jobs = _mlm_jobs(enc, slots, max_length)
    windows = [_window(ids, max_length) for ids in enc["input_ids"]]
    with torch.no_grad():
        _fill_from_mlm(out, mlm_jobs, windows, tok, model, bias, k, batch_size)
        for b in range(0, len(emb_jobs), batch_size):  # words of several pieces
            batch = emb_jobs[b : b + batch_size]
            q = torch.stack([emb[torch.tensor(p)].mean(0) for _, _, p in batch])
            for (t, slot, _), words in zip(batch, nearest_words(q, ww_emb, ww_words, k), strict=True):
                out[t][slot][2].extend(words)
    return out


def _window(ids: list[int], max_length: int) -> list[int]:
    """A text's piece ids as the MLM sees them: cut to ``max_length``, keeping the closing special token."""
    return ids if len(ids) <= max_length else ids[: max_length - 1] + ids[-1:]


def _mlm_jobs(enc, slots, max_length: int):
    """Each text's replaceable words with empty candidate lists, and the jobs that fill them: (text, slot, masked
    position) for a single-piece word inside the window, (text, slot, piece ids) for a word of several pieces."""
    out: list[list[tuple[int, int, list[str]]]] = [[] for _ in slots]
    mlm_jobs, emb_jobs = [], []
    for t, words in enumerate(slots):
        ids = enc["input_ids"][t]
        for start, end, ps in words:
            if len(ps) == 1 and ps[0] >= max_length - 1:
                continue  # outside the window the MLM sees
            out[t].append((start, end, []))
            if len(ps) == 1:
                mlm_jobs.append((t, len(out[t]) - 1, ps[0]))
            else:
                emb_jobs.append((t, len(out[t]) - 1, [ids[p] for p in ps]))
    return out, mlm_jobs, emb_jobs


def _fill_from_mlm(out, jobs, windows, tok, model, bias, k: int, batch_size: int) -> None:
    """One masked forward per single-piece word, batched across sentences; its top-``k`` whole words go to its slot."""
    import torch

    jobs.sort(key=lambda j: len(windows[j[0]]))  # similar lengths share a batch: less padding
    progress = Progress("augment: masked-LM candidates", -(-len(jobs) // batch_size), unit="words")
    for b in range(0, len(jobs), batch_size):
        batch = jobs[b : b + batch_size]
        seqs = [windows[t] for t, _, _ in batch]
        width = max(map(len, seqs))
        input_ids = torch.full((len(seqs), width), tok.pad_token_id or 0)
        attention = torch.zeros((len(seqs), width), dtype=torch.long)
        for r, s in enumerate(seqs):
            input_ids[r, : len(s)] = torch.tensor(s)
            attention[r, : len(s)] = 1
        pos = [p for _, _, p in batch]
        input_ids[range(len(pos)), pos] = tok.mask_token_id
        top = (_mlm_logits(model, input_ids, attention, pos).float() + bias).topk(k, dim=-1).indices
        for (t, slot, _), row in zip(batch, top.tolist(), strict=True):
            out[t][slot][2].extend(tok.convert_tokens_to_string([tok.convert_ids_to_tokens(i)]).strip() for i in row)
        progress.update(items=len(batch))
