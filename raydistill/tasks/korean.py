"""Korean loaders: NSMC, KorQuAD 1.0, KMOU NER (2016klp) and KLUE NER v1.1, from local copies or the hub."""

from __future__ import annotations

import json

from raydistill.common.errors import UserError
from raydistill.tasks.glue import bad_label, check_nonempty, find_file, hub_dataset, norm_split, read_lines

NER_TYPES = {"kmou_ner": ("PS", "LC", "OG", "DT", "TI"), "klue_ner": ("PS", "LC", "OG", "DT", "TI", "QT")}


def ner_labels(types) -> tuple[str, ...]:
    return ("O",) + tuple(f"{p}-{t}" for t in types for p in "BI")


# --------------------------------------------------------------------------- NSMC

NSMC_FILES = {"train": "ratings_train.txt", "test": "ratings_test.txt"}


def load_nsmc(task, data_dir, split: str) -> list[dict]:
    """NSMC has no dev set; its labelled test set is the eval split. Empty documents stay ``""``."""
    split = norm_split(task, split, tuple(NSMC_FILES))
    if data_dir is None:
        return [
            {"text": r["document"] or "", "text_pair": None, "label": int(r["label"])} for r in hub_dataset(task, split)
        ]
    layout = "DIR/ratings_train.txt and DIR/ratings_test.txt (or DIR/nsmc/...), columns id<TAB>document<TAB>label"
    path = find_file(data_dir, ("", "nsmc"), NSMC_FILES[split], layout)
    out, lines = [], read_lines(path)
    next(lines, None)  # header: id document label
    for n, line in lines:
        if not line:
            continue
        row = line.split("\t")
        if len(row) != 3:
            raise UserError(
                "data", f"{path} line {n}: expected 3 tab-separated fields (id, document, label), got {len(row)}"
            )
        if row[2] not in ("0", "1"):
            raise bad_label(path, n, row[2], (0, 1))
        out.append({"text": row[1], "text_pair": None, "label": int(row[2])})
    return check_nonempty(out, path, split)


# --------------------------------------------------------------------------- KorQuAD 1.0

KORQUAD_FILES = {"train": "KorQuAD_v1.0_train.json", "validation": "KorQuAD_v1.0_dev.json"}


def load_korquad(task, data_dir, split: str) -> list[dict]:
    split = norm_split(task, split, tuple(KORQUAD_FILES))
    if data_dir is None:
        return [
            {
                "id": r["id"],
                "question": r["question"],
                "context": r["context"],
                "answers": {"text": list(r["answers"]["text"]), "answer_start": list(r["answers"]["answer_start"])},
            }
            for r in hub_dataset(task, split)
        ]
    path = find_file(
        data_dir,
        ("", "korquad", "KorQuAD"),
        KORQUAD_FILES[split],
        "DIR/KorQuAD_v1.0_train.json and DIR/KorQuAD_v1.0_dev.json (or DIR/korquad/...), SQuAD v1.1 JSON",
    )
    try:
        data = json.loads(path.read_text(encoding="utf-8-sig"))["data"]
    except (ValueError, KeyError, TypeError) as e:
        raise UserError("data", f"{path}: not a SQuAD-style JSON file with a 'data' list ({e})") from None
    out = []
    try:
        for article in data:
            for para in article["paragraphs"]:
                for qa in para["qas"]:
                    answers = qa["answers"]
                    out.append(
                        {
                            "id": str(qa["id"]),
                            "question": qa["question"],
                            "context": para["context"],
                            "answers": {
                                "text": [a["text"] for a in answers],
                                "answer_start": [int(a["answer_start"]) for a in answers],
                            },
                        }
                    )
    except (KeyError, TypeError, ValueError) as e:
        raise UserError(
            "data", f"{path}: malformed SQuAD entry near question #{len(out) + 1} (missing or bad field {e})"
        ) from None
    return check_nonempty(out, path, split)


# --------------------------------------------------------------------------- NER


def _ner_tag(task, tag: str, prev: str, path, n) -> str:
    """KMOU tags (``B_PS``, a typeless ``I`` that continues the previous entity, ``O``) -> BIO names."""
    labels = task.label_names
    if tag == "I" and prev != "O":
        return "I-" + prev[2:]
    bio = tag.replace("_", "-", 1)
    if bio not in labels:
        raise bad_label(path, n, tag, ["O", "I", *(lab.replace("-", "_") for lab in labels if lab.startswith("B-"))])
    return bio


KMOU_FILES = {"train": "ner.train", "validation": "ner.dev", "test": "ner.test"}


def load_kmou(task, data_dir, split: str) -> list[dict]:
    """KMOU 2016klp: ``; raw`` and ``$marked`` lines, then ``word_idx<TAB>morpheme<TAB>POS<TAB>tag`` (CRLF).

    Tokens are the morphemes, so the model sees the same units the tags were annotated on.
    """
    split = norm_split(task, split, tuple(KMOU_FILES))
    if data_dir is None:
        raise UserError(
            "data_dir",
            "KMOU NER has no Hugging Face hub copy; pass --data-dir DIR with "
            "ner.train/ner.dev/ner.test from github.com/kmounlp/NER (2016klp)",
        )
    path = find_file(
        data_dir,
        ("", "kmou_2016klp", "ner/kmou_2016klp", "2016klp", "ner/2016klp"),
        KMOU_FILES[split],
        "DIR/ner.train, DIR/ner.dev, DIR/ner.test (or DIR/kmou_2016klp/..., DIR/ner/kmou_2016klp/...)",
    )
    tokens: list[str]
    labels: list[str]
    out, tokens, labels = [], [], []

    def flush():
        if tokens:
            out.append({"tokens": list(tokens), "labels": [task.label_names.index(t) for t in labels]})
        tokens.clear()
        labels.clear()

    for n, line in read_lines(path):
        if not line.strip() or line.startswith(";"):  # blank line or the next sentence's raw text
            flush()
            continue
        if line.startswith("$"):
            continue
        row = line.split("\t")
        if len(row) != 4:
            raise UserError(
                "data", f"{path} line {n}: expected word_idx<TAB>morpheme<TAB>POS<TAB>tag, got {len(row)} fields"
            )
        if row[3] == "I" and (not labels or labels[-1] == "O"):
            raise UserError("label", f"{path} line {n}: tag 'I' continues no entity (previous tag is O)")
        labels.append(_ner_tag(task, row[3], labels[-1] if labels else "O", path, n))
        tokens.append(row[1])
    flush()
    return check_nonempty(out, path, split)


def drop_spaces(chars: list[str], tags: list[str]) -> tuple[list[str], list[str]]:
    """Remove whitespace characters (tokenizers cannot represent them as words), keeping tags aligned.

    A ``B-`` on a dropped space moves to the following ``I-`` of the same type so the entity still starts with B.
    """
    toks, out, pending = [], [], None
    for ch, tag in zip(chars, tags, strict=True):
        if not ch.strip():
            pending = tag[2:] if tag.startswith("B-") else pending
            continue
        if pending and tag == "I-" + pending:
            tag = "B-" + pending
        pending = None
        toks.append(ch)
        out.append(tag)
    return toks, out


KLUE_FILES = {"train": "klue-ner-v1.1_train.tsv", "validation": "klue-ner-v1.1_dev.tsv"}


def load_klue(task, data_dir, split: str) -> list[dict]:
    """KLUE NER v1.1: ``## id<TAB>marked sentence`` then one ``char<TAB>tag`` line per character; tokens = chars."""
    split = norm_split(task, split, tuple(KLUE_FILES))
    names = task.label_names
    if data_dir is None:
        ds = hub_dataset(task, split)
        hub_names = ds.features["ner_tags"].feature.names
        out = []
        for r in ds:
            toks, tags = drop_spaces(list(r["tokens"]), [hub_names[i] for i in r["ner_tags"]])
            out.append({"tokens": toks, "labels": [names.index(t) for t in tags]})
        return out
    path = find_file(
        data_dir,
        ("", "klue_ner_v1.1", "ner/klue_ner_v1.1", "klue-ner-v1.1", "ner/klue-ner-v1.1"),
        KLUE_FILES[split],
        "DIR/klue-ner-v1.1_train.tsv and DIR/klue-ner-v1.1_dev.tsv "
        "(or DIR/klue_ner_v1.1/..., DIR/ner/klue_ner_v1.1/...)",
    )
    chars: list[str]
    out, chars, tags = [], [], []

    def flush():
        toks, bio = drop_spaces(chars, tags)
        if toks:
            out.append({"tokens": toks, "labels": [names.index(t) for t in bio]})
        chars.clear()
        tags.clear()

    for n, line in read_lines(path):
        if not line or line.startswith("##"):  # blank line, file comment, or the next sentence's id line
            flush()
            continue
        if "\t" not in line:
            raise UserError("data", f"{path} line {n}: expected char<TAB>tag, got {line[:40]!r}")
        ch, tag = line.rsplit("\t", 1)
        if tag not in names:
            raise bad_label(path, n, tag, names)
        chars.append(ch)
        tags.append(tag)
    flush()
    return check_nonempty(out, path, split)
