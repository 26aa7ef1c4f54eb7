"""A dataset by name (issue 38): a Hugging Face hub dataset or a local folder of data files (``DIR/train.jsonl``,
``DIR/validation.parquet``, …), both read by ``datasets.load_dataset`` — one code path, offline the folder, online
the hub; remote code never runs (``trust_remote_code=False``).

This module only opens a dataset and hands back its splits' rows as Python values (a class-label column's indices as
their names); ``files.py`` makes them a task exactly as it does the user's files. A load is one stderr line at most:
``datasets``' and the hub's progress bars and log lines are kept off while it runs, and every failure is a
``UserError`` naming the flag and the fix.
"""

from __future__ import annotations

import contextlib
import csv
import functools
import inspect
import os
import re
from collections.abc import Iterator

from raydistill.common.errors import UserError
from raydistill.common.hub import hub_reachable, is_local

FIX_FOLDER = (
    "a folder of data files that datasets.load_dataset reads (DIR/train.jsonl, DIR/validation.jsonl; or .parquet)"
)
SHA = re.compile(r"[0-9a-f]{40}")


def located(name: str) -> str:
    """A local folder as an absolute path (Ray workers run elsewhere), a hub name as it is."""
    return os.path.abspath(os.path.expanduser(name)) if is_local(name) else name


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """``datasets``' and the hub's progress bars and log lines off for one load, as they were after it."""
    import datasets
    import huggingface_hub.utils as hub_utils
    from datasets.utils import logging as ds_logging
    from huggingface_hub.utils import logging as hub_logging

    bars = (datasets.utils.are_progress_bars_disabled(), hub_utils.are_progress_bars_disabled())
    levels = (ds_logging.get_verbosity(), hub_logging.get_verbosity())
    datasets.disable_progress_bars()
    hub_utils.disable_progress_bars()
    ds_logging.set_verbosity(ds_logging.CRITICAL)  # its ERROR lines too ("Failed to load JSON …"): the one line says it
    hub_logging.set_verbosity_error()
    try:
        yield
    finally:
        ds_logging.set_verbosity(levels[0])
        hub_logging.set_verbosity(levels[1])
        if not bars[0]:
            datasets.enable_progress_bars()
        if not bars[1]:
            hub_utils.enable_progress_bars()


def _offline_env() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "0") not in ("0", "", "false", "False")


def _check_name(name: str) -> None:
    """What can be told before ``datasets`` is asked: a folder that is not there or is a file; the hub out of reach
    (where ``HF_HUB_OFFLINE`` is set ``datasets`` answers from its cache, or says it cannot, at once)."""
    if is_local(name):
        if os.path.isfile(name):
            raise UserError("data.dataset", f"{name} is a file; pass it as --train-file, or pass {FIX_FOLDER}")
        if not os.path.isdir(name):
            raise UserError("data.dataset", f"{name} does not exist; pass a hub dataset name or {FIX_FOLDER}")
    elif not _offline_env() and not hub_reachable():
        raise UserError("data.dataset", _offline(name))


def _offline(name: str) -> str:
    return f"{name}: the Hugging Face hub cannot be reached (offline); pass a local copy instead: {FIX_FOLDER}"


def _reason(e: BaseException) -> str:
    """What went wrong: ``datasets``' own words, or beneath its generic "An error occurred while generating the
    dataset" the error that raised it (a JSON line not an object, a split's columns not the others')."""
    text = str(e).strip() or type(e).__name__
    while text.startswith("An error occurred while generating") and (e.__cause__ or e.__context__):
        e = e.__cause__ or e.__context__  # type: ignore[assignment]
        text = str(e).strip() or type(e).__name__
    return text


def _failure(name: str, config: str, e: Exception) -> UserError:
    lines = _reason(e).splitlines() or [type(e).__name__]
    first = lines[0][:300]
    if config and first.startswith("BuilderConfig"):
        return UserError("data.dataset_config", f"{name}: {first}; pass one of them as --dataset-config")
    if first.startswith("Config name is missing") and len(lines) > 1:  # several configurations, none chosen
        names = lines[1].partition(": ")[2][:300]
        return UserError(
            "data.dataset_config", f"{name} has several configurations; pass --dataset-config, one of {names}"
        )
    if "save_to_disk" in first:
        return UserError(
            "data.dataset",
            f"{name} was written by save_to_disk, which load_dataset does not read; write its splits as files "
            "(ds['train'].to_parquet('DIR/train.parquet'), …) and pass DIR",
        )
    if not is_local(name) and (isinstance(e, ConnectionError) or not hub_reachable()):
        return UserError("data.dataset", _offline(name))
    fix = FIX_FOLDER if is_local(name) else "a hub dataset name (owner/name) or " + FIX_FOLDER
    return UserError("data.dataset", f"{name} cannot be loaded: {first}; pass {fix}")


def stamp(name: str) -> tuple:
    """What changes when a local folder's files change (each file's size and modification time); () for a hub name,
    whose rows its revision pins."""
    if not is_local(name):
        return ()
    out = []
    for root, dirs, files in os.walk(name):
        dirs.sort()
        for f in sorted(files):
            path = os.path.join(root, f)
            try:
                st = os.stat(path)
            except OSError as e:  # a link whose target is gone, a file unreadable here
                raise UserError("data.dataset", f"{path}: {e.strerror}; remove it or make it readable") from None
            out.append((os.path.relpath(path, name), st.st_mtime_ns, st.st_size))
    return tuple(out)


def revision(name: str, config: str) -> str:
    """The hub commit a hub dataset is read at now (pinned in the task's description, so every worker and a later
    ``--resume`` read the same rows); "" for a local folder, or where the hub does not say (a cached copy offline)."""
    if is_local(name):
        return ""
    import datasets

    _check_name(name)
    try:
        with _quiet():
            builder = datasets.load_dataset_builder(
                name, config or None, **_remote_code_off(datasets.load_dataset_builder)
            )
            commit = str(builder.hash)
    except Exception as e:  # datasets and the hub raise a dozen unrelated types
        raise _failure(name, config, e) from None
    return commit if SHA.fullmatch(commit) else ""


def _remote_code_off(fn) -> dict:
    """``trust_remote_code=False`` where ``fn`` takes it (datasets 3; later versions run no dataset scripts at all,
    and their ``load_dataset_builder`` would take the keyword for a config field)."""
    return {"trust_remote_code": False} if "trust_remote_code" in inspect.signature(fn).parameters else {}


def load(name: str, config: str = "", revision: str = ""):
    """Every split of the dataset (a ``DatasetDict``); a local folder is read again only when its files changed."""
    _check_name(name)
    return _load(name, config, revision, stamp(name))


@functools.lru_cache(maxsize=8)
def _load(name: str, config: str, revision: str, stamp: tuple):
    import datasets

    try:
        with _quiet():
            dd = datasets.load_dataset(
                name, config or None, revision=revision or None, trust_remote_code=False, **_as_text(name)
            )
    except Exception as e:  # datasets and the hub raise a dozen unrelated types
        raise _failure(name, config, e) from None
    if not isinstance(dd, datasets.DatasetDict):
        raise UserError("data.dataset", f"{name} loads as one split, not named splits; pass {FIX_FOLDER}")
    return dd


def _as_text(name: str) -> dict:
    """For a local folder of CSV or TSV files, ``load_dataset``'s options that read every value as text, as
    ``--train-file`` does (``datasets`` reads CSV with pandas, which turns "NA", "null" or "None" into missing, so
    those rows were dropped, and "007" into 7): the first file's columns declared as strings, no NA guessing, its
    delimiter (sniffed as ``--train-file``'s) and, for TSV, no quoting; {} for anything else."""
    if not is_local(name):
        return {}
    found = sorted(os.path.join(root, f) for root, _, files in os.walk(name) for f in files)
    exts = {os.path.splitext(f)[1].lower() for f in found}
    tables = [f for f in found if os.path.splitext(f)[1].lower() in (".csv", ".tsv")]
    if not tables or exts & {".json", ".jsonl", ".parquet", ".arrow"}:
        return {}
    import datasets

    from raydistill.tasks.readers import columns_of, delimiter_of, file_format

    fmt = file_format(tables[0], "data.dataset")
    strings = datasets.Features({c: datasets.Value("string") for c in columns_of(tables[0], "data.dataset")})
    return {"features": strings, "na_filter": False, "sep": delimiter_of(tables[0], fmt)} | (
        {"quoting": csv.QUOTE_NONE} if fmt == "tsv" else {}
    )


def split_of(dd, name: str, split: str, field: str):
    """One split of a loaded dataset; a name it lacks is refused with the ones it has."""
    if split not in dd:
        flag = "--" + field.split(".")[-1].replace("_", "-")
        raise UserError(field, f"{name} has no split {split!r}; its splits: {', '.join(dd)} (pass {flag})")
    return dd[split]


def columns(ds) -> list[str]:
    return list(ds.column_names)


def class_names(ds, column: str) -> tuple[str, ...]:
    """The class names a column's feature gives in index order (a ``ClassLabel``, or a list of them), else ()."""
    import datasets

    feature = ds.features.get(column)
    feature = getattr(feature, "feature", feature)  # a list of class labels: its element
    return tuple(feature.names) if isinstance(feature, datasets.ClassLabel) else ()


def read(ds, wanted: list[str]) -> list[tuple[int, list]]:
    """``(row index, values of the wanted columns)`` for every row, a class label as its name (-1, none: None)."""
    data = ds.select_columns(wanted).to_dict()
    names = {c: class_names(ds, c) for c in wanted}

    def name(c: str, v):
        if not names[c] or v is None or isinstance(v, str):
            return v
        if isinstance(v, list):
            return [name(c, x) for x in v]
        return names[c][v] if 0 <= v < len(names[c]) else None

    cols = [[name(c, v) for v in data[c]] for c in wanted]
    return [(i, list(vals)) for i, vals in enumerate(zip(*cols, strict=True))]
