"""A file's label values renamed before anything reads them (``--label-map 0=negative,1=positive``)."""

from __future__ import annotations

import functools
from collections.abc import Iterable, Iterator

from raydistill.common.errors import UserError
from raydistill.tasks.filedata import FileData

MAP_FIX = "write it as VALUE=NAME pairs, such as --label-map 0=negative,1=positive"


@functools.lru_cache(maxsize=16)
def parse_label_map(text: str) -> tuple[tuple[str, str], ...]:
    """``0=neg,1=pos`` as ``(("0", "neg"), ("1", "pos"))`` in the order given; a malformed map is refused."""
    pairs: list[tuple[str, str]] = []
    for item in text.split(","):
        value, eq, name = (part.strip() for part in item.partition("="))
        if not eq or not value or not name:
            raise UserError("data.label_map", f"{item.strip()!r} is not VALUE=NAME; {MAP_FIX}")
        if value in dict(pairs):
            raise UserError("data.label_map", f"value {value!r} is mapped twice; map each value once")
        pairs.append((value, name))
    return tuple(pairs)


def _map_names(spec: FileData) -> tuple[str, ...]:
    """The names a label map gives, in its order (index 0 is the first value's name): its order is the labels'
    where no teacher names them."""
    return tuple(dict.fromkeys(name for _, name in parse_label_map(spec.label_map))) if spec.label_map else ()


def _renamed(spec: FileData, where: str, rows: Iterable) -> Iterator[tuple]:
    """Rows whose label is the map's name for the file's value, as they are read; a value the map lacks is refused
    when its row is reached (every reader reads every row: the first, ``resolve``, refuses it)."""
    table = dict(parse_label_map(spec.label_map))
    for n, text, pair, raw in rows:
        name = table.get(raw, table.get(raw.strip()))
        if name is None:
            raise UserError(
                "data.label_map",
                f"{where} {spec.unit} {n}: label {raw!r} is not in --label-map {spec.label_map}; map every value "
                "the file holds",
            )
        yield n, text, pair, name
