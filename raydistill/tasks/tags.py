"""Token classification on the user's data (issue 38): per row a list of tokens and a list of tags, one per token.

The rows checked here come from JSON Lines, JSON, Parquet or a dataset (a CSV holds no lists); tags are BIO names
(``O``, ``B-PER``, ``I-PER``, …: seqeval's entity F1 reads the entity type after the prefix).
"""

from __future__ import annotations

import re

from raydistill.common.errors import UserError

TOKENS_GUESS = ("tokens", "words")
TAGS_GUESS = ("ner_tags", "tags", "labels")
METRICS = ("f1", "precision", "recall")  # seqeval's entity scores, as the built-in NER tasks report
BIO = re.compile(r"O|[BIESLU]-.+")


def _what(v) -> str:
    return f"a {type(v).__name__} ({str(v)[:40]!r})"


def pairs(rows, where: str, unit: str, columns: tuple[str, str]) -> tuple[list[tuple[int, list, list]], int]:
    """``(row, tokens, tags)`` of rows that have tokens, and how many had none (left out); a tokens or tags value
    that is no list, a row without tags and tags of another length than the tokens are refused, naming the row."""
    tok_col, tag_col = columns
    out, empty = [], 0
    for n, (toks, tags) in rows:
        if toks is None or toks == []:
            empty += 1
            continue
        if not isinstance(toks, list):
            raise UserError(
                "data.tokens_column",
                f"{where} {unit} {n}: {tok_col!r} holds {_what(toks)}, not a list of tokens; "
                "give a column of lists (JSON Lines, Parquet or a dataset)",
            )
        if tags is None or tags == []:
            raise UserError("data.tags_column", f"{where} {unit} {n} has tokens but no {tag_col!r}; give one tag each")
        if not isinstance(tags, list):
            raise UserError(
                "data.tags_column",
                f"{where} {unit} {n}: {tag_col!r} holds {_what(tags)}, not a list of tags (one per token)",
            )
        if len(tags) != len(toks):
            raise UserError(
                "data.tags_column",
                f"{where} {unit} {n}: {len(toks)} tokens but {len(tags)} tags; give one tag per token",
            )
        out.append((n, toks, tags))
    return out, empty


def tag_order(values: set[str]) -> tuple[str, ...]:
    """Tags in index order where nothing names them: ``O`` first, then by entity type, ``B-`` before ``I-``."""

    def key(tag: str):
        prefix, _, kind = tag.partition("-")
        return (tag != "O", kind, "BIESLU".find(prefix) if kind else 9, tag)

    return tuple(sorted(values, key=key))


def check_bio(labels: tuple[str, ...], where: str) -> None:
    """seqeval scores entities by their BIO prefix and type: a tag of another form would score as nonsense."""
    bad = [t for t in labels if not BIO.fullmatch(t)]
    if bad:
        raise UserError(
            "data.tags_column",
            f"{where}: tag(s) {', '.join(map(repr, bad[:5]))} are not BIO tags (O, B-TYPE, I-TYPE), which the entity "
            "F1 needs; write the tags by name (a dataset: a column of class labels names them)",
        )
