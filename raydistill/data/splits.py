"""Which examples a run trains and evaluates on: limits, held-out validation, augmented training data."""

from __future__ import annotations

import hashlib
import json
import os
import random
from collections.abc import Iterator, Sequence
from collections.abc import Set as AbstractSet

from raydistill.common.errors import UserError
from raydistill.data.carve import CARVE_VERSION, VAL_SEED, Carve, Side, carve
from raydistill.tasks.examples import take

HOLDOUT = 0.1  # share of train held out as dev when a task has no separate dev split
# The task hold-out is a property of the data, not of the run: a fixed seed gives every run, whatever its --seed,
# the same dev set, and lets an augmented set (built before any run) leave out exactly the rows runs hold out.
HOLDOUT_SEED = 42
# the dev set held out of a task's only training rows: drawn by validation's rule (whole groups, by sentence for
# phrase rows), so it shares no text with training either
DEV = Side(
    "dev",
    HOLDOUT_SEED,
    "data.eval_file",
    "pass a dev set of your own: --eval-file FILE (a --dataset's: --eval-split)",
    False,
)
SOURCE = "source_index"  # on augmented rows: index, in the task's train split, of the row they were made from


def holdout_indices(n: int, seed: int, frac: float = HOLDOUT) -> set[int]:
    idx = list(range(n))
    random.Random(seed).shuffle(idx)
    return set(idx[: max(1, int(n * frac))])


def holdout_split(examples: list, seed: int, frac: float = HOLDOUT) -> tuple[list, list]:
    val = holdout_indices(len(examples), seed, frac)
    return [e for i, e in enumerate(examples) if i not in val], [examples[i] for i in sorted(val)]


def split_train(task, data_dir) -> tuple[Sequence, Carve]:
    """Every row of the task's train split, and what is held out of it as the dev set: ``held.val`` the dev rows,
    ``held.out_of_train`` those and the training phrases inside (or around) a dev sentence (phrase rows).

    One rule for every method: a task whose dev set would be its labelled test split (NSMC; your file without
    --eval-file) holds out 10% of train as dev, by validation's grouped rule with its own seed (``DEV``), so no run
    picks epochs or hyper-parameters on the test set, which stays for a final number (``raydistill.evaluate``), and
    dev shares no text with training. Other tasks hold out nothing.
    """
    rows = task.loader(task, data_dir, "train")
    return rows, carve(rows, task, HOLDOUT, side=DEV) if task.eval_split == "test" else Carve(())


def val_indices(rows: list, task, frac: float, exclude: AbstractSet[int] = frozenset()) -> list[int]:
    """Indices of the validation split carved from ``rows`` (less ``exclude``): ``data.carve``'s grouped rule."""
    return list(carve(rows, task, frac, exclude).val)


def train_val_dev(cfg, task) -> tuple[Sequence, Sequence, Sequence]:
    """Train, validation and dev examples for one run (see ``split_train``).

    The validation split (``cfg.train.val_fraction`` of the training rows, by group and stratified: ``data.carve``)
    is what everything chooses on: a run's best epoch, a sweep's trials; training rows that share text with it leave
    training. It is carved before ``train_limit`` takes the first
    rows of what is left, so every run of a task, whatever its train limit, chooses on the same rows; ``eval_limit``
    caps the rows scored on both dev (its first rows) and validation (a fixed sample: ``val_sample``). With
    ``select_on == "dev"`` nothing is carved (val is empty) and the dev set chooses, as before there was a val split.
    ``augment_dir`` swaps the training examples for the augmented set written by ``raydistill.distill.augment``
    (originals included), less every row made from a held-out or validation row.
    """
    train: Sequence[dict]
    dev: Sequence[dict]
    if task.kind == "mlm":
        train, dev = general_examples(cfg)
        return train, [], dev
    rows, held = split_train(task, cfg.data_dir)
    frac = cfg.train.val_fraction
    cut = carve(rows, task, frac, held.out_of_train) if cfg.train.select_on == "val" else Carve(())
    val_idx, out_of_train = list(cut.val), held.out_of_train | cut.out_of_train
    # the splits as views of the rows where they are held by column (``Examples``: no dict per row), else lists
    train = take(rows, (i for i in range(len(rows)) if i not in out_of_train))
    dev = take(rows, held.val) if held.val else task.loader(task, cfg.data_dir, task.eval_split)
    if cfg.augment_dir:
        aug = augmented_train(os.path.join(cfg.augment_dir, "train.jsonl"), out_of_train)
        if cfg.train.train_limit and all(SOURCE in r for r in aug):  # the limit counts source rows, copies follow
            kept = set([i for i in range(len(rows)) if i not in out_of_train][: cfg.train.train_limit])
            train = [r for r in aug if r[SOURCE] in kept]
        else:
            train = aug[: cfg.train.train_limit] if cfg.train.train_limit else aug
    elif cfg.train.train_limit:
        train = take(train, range(min(cfg.train.train_limit, len(train))))
    if cfg.train.eval_limit:
        dev = take(dev, range(min(cfg.train.eval_limit, len(dev))))
        val_idx = val_sample(val_idx, cfg.train.eval_limit)
    for name, split in (("train", train), ("validation", dev)):
        if not split:
            raise UserError("data_dir", f"the {name} split of task {task.name} is empty; check the data files")
    return train, take(rows, val_idx), dev


def val_sample(val_idx, limit: int) -> list[int]:
    """``limit`` rows of the validation split for a quick run (``--eval-limit``): a fixed sample, the same for every
    run of the task; the rows it leaves out go to no side (training never sees them)."""
    if limit >= len(val_idx):
        return list(val_idx)
    return sorted(random.Random(VAL_SEED).sample(sorted(val_idx), limit))


def train_and_eval_examples(cfg, task) -> tuple[Sequence, Sequence]:
    """Train and dev examples of one run on a labelled task (``train_val_dev`` without the validation split); the
    sweep's data check before Ray, so a sweep refuses ``--task general`` there."""
    from raydistill.tasks import check_labelled

    check_labelled(task, "a sweep")
    train, _, dev = train_val_dev(cfg, task)
    return train, dev


def prune_rows(cfg, task, n: int | None) -> list:
    """The training rows init ``prune`` scores the teacher on: ``n`` of the rows this run trains on (never a dev
    row), drawn with the run's seed; ``n`` None = ``min(256, all of them)``."""
    train = train_and_eval_examples(cfg, task)[0] if task.labelled else general_examples(cfg)[0]
    k = prune_sample_size(n, len(train))
    return [train[i] for i in sorted(random.Random(cfg.train.seed).sample(range(len(train)), k))]


def prune_sample_size(n: int | None, n_train: int) -> int:
    """How many training rows init ``prune`` scores on: ``n`` (refused past the ``n_train`` rows a run trains on)
    or, unset, min(256, n_train)."""
    if n is None:
        return min(256, n_train)
    if n > n_train:
        raise UserError(
            "student.init",
            f"prune:{n} asks for {n} scoring examples but the run trains on {n_train}; "
            f"give at most {n_train} (prune:{n_train}) or write prune for min(256, all)",
        )
    return n


def general_examples(cfg) -> tuple[list, list]:
    """Unlabelled text (one text per line) for general distillation; 10% held out to report MLM loss, the same rows
    whatever the run's seed (``HOLDOUT_SEED``), so runs with different seeds are scored on the same text."""
    path = cfg.unlabeled_text
    if not path:
        raise UserError(
            "unlabeled_text", "general distillation reads raw text: pass --unlabeled-text FILE (one text per line)"
        )
    if not os.path.isfile(path):
        raise UserError("unlabeled_text", f"{path!r} is not a file; pass --unlabeled-text FILE (one text per line)")
    with open(path, encoding="utf-8") as f:
        texts = [{"text": line.strip()} for line in f if line.strip()]
    if len(texts) < 2:
        raise UserError("unlabeled_text", f"{path} has fewer than 2 non-empty lines")
    train, dev = holdout_split(texts, HOLDOUT_SEED)
    if cfg.train.train_limit:
        train = train[: cfg.train.train_limit]
    if cfg.train.eval_limit:
        dev = dev[: cfg.train.eval_limit]
    return train, dev


def augmented_train(path: str, held: set[int]) -> list:
    """The augmented training rows at ``path``, less the originals and augmentations of held-out (dev or
    validation) rows."""
    rows = read_jsonl(path, "augment_dir")
    if not held:
        return rows
    if not all(SOURCE in r for r in rows):
        raise UserError(
            "augment_dir",
            f"{path} does not say which training row each example was made from, so the "
            "rows held out as dev or validation could leak into training; rebuild it with python -m "
            "raydistill.distill.augment",
        )
    return [r for r in rows if r[SOURCE] not in held]


def read_jsonl(path: str, field: str) -> list:
    if not os.path.isfile(path):
        raise UserError(field, f"{path} does not exist; write it with python -m raydistill.distill.augment")
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def _dumps(obj) -> str:
    return json.dumps(obj, sort_keys=True, ensure_ascii=False, default=str)


def _digest(obj) -> str:
    return hashlib.sha256(_dumps(obj).encode()).hexdigest()[:16]


def _list_text(rows: Sequence, batch: int = 1024) -> Iterator[bytes]:
    """``_dumps(rows)`` (a list) in pieces of ``batch`` rows: the same bytes, never the whole text at once (hundreds
    of MB for a large file). A list's JSON is its items' JSON between ``[`` and ``]``, joined by ``", "``."""
    yield b"["
    for start in range(0, len(rows), batch):
        yield ((", " if start else "") + ", ".join(_dumps(r) for r in rows[start : start + batch])).encode()
    yield b"]"


def _splits(cfg) -> tuple[Sequence, Sequence, Sequence]:
    from raydistill.config.schema import task_of

    task = task_of(cfg)
    if task.labelled:
        return train_val_dev(cfg, task)
    train, dev = general_examples(cfg)
    return train, [], dev


def data_fingerprint(cfg) -> str:
    """Short hash of the exact train, validation and dev examples a run sees (after limits, hold-out, augmentation):
    ``_digest([train, dev, val, CARVE_VERSION])``, without a validation split ``_digest([train, dev])``, as before
    there was one."""
    return _digests(cfg)[0]


def datasets(cfg) -> list[dict]:
    """What a run trains and is scored on, as MLflow dataset inputs: name, digest of the exact rows, source, size."""
    digests = _digests(cfg)[1]
    contexts = {"train": "training", "val": "validation", "dev": "eval"}
    return [
        {
            "name": f"{cfg.task}-{split}",
            "digest": digests[split][0],
            "context": context,
            "source": _source(cfg, split),
            "rows": digests[split][1],
        }
        for split, context in contexts.items()
        if split in digests
    ]


def _digests(cfg) -> tuple[str, dict[str, tuple[str, int]]]:
    """``data_fingerprint`` and each split's ``(digest, rows)``, worked out together, once per process for the same
    data (the fields that choose the rows, ``_data_key``) while its files stay the same: every trial of a sweep asks
    for both, and on SST-2 they cost ~2.5 s of a trial's fixed cost, re-reading and hashing every row."""
    key = rows_key(cfg)
    if key is None:
        return _work_digests(cfg)
    if key not in _KEPT:
        while len(_KEPT) >= KEEP_DIGESTS:
            _KEPT.pop(next(iter(_KEPT)))  # the oldest
        _KEPT[key] = _work_digests(cfg)
    return _KEPT[key]


KEEP_DIGESTS = 4  # data sets whose digests a process keeps (a sweep has one; its control and confirmation the same)
_KEPT: dict[tuple, tuple[str, dict[str, tuple[str, int]]]] = {}


def rows_key(cfg) -> tuple | None:
    """What a process may key its memos of a run's rows by: what chooses them and their files' stamps; None where
    the rows are not on this machine's disk (the hub), or their folder is missing."""
    stamp = _data_stamp(cfg)
    return None if stamp is None else (_data_key(cfg), stamp)


def _data_key(cfg) -> tuple:
    """What chooses a run's rows (``train_val_dev``, ``general_examples``): not its student, loss, seed or names."""
    t = cfg.train
    return (cfg.task, cfg.data, cfg.data_dir, cfg.augment_dir, cfg.unlabeled_text) + (
        t.val_fraction,
        t.select_on,
        t.train_limit,
        t.eval_limit,
    )


def _data_stamp(cfg) -> tuple | None:
    """What changes when the data's files change (each file's time and size: the user's files or dataset, a built-in
    task's data folder and its subfolders, the augmented set, the corpus), or None where the rows come from the hub
    or a folder that is not there (worked out each time; the loaders name what is missing)."""
    from raydistill.tasks import dataset as hubdata
    from raydistill.tasks.readers import stamp

    data = cfg.data
    if data.given:
        files = hubdata.stamp(data.dataset) if data.dataset else tuple(stamp(data.path(s)) for s in data.splits())
    elif cfg.task == "general":
        if not (cfg.unlabeled_text and os.path.isfile(cfg.unlabeled_text)):
            return None
        files = (stamp(cfg.unlabeled_text),)
    elif cfg.data_dir and os.path.isdir(os.path.expanduser(cfg.data_dir)):
        files = hubdata.stamp(os.path.expanduser(cfg.data_dir))  # every file below: where the loaders look
    else:
        return None
    augmented = os.path.join(cfg.augment_dir, "train.jsonl") if cfg.augment_dir else ""
    return files, stamp(augmented) if os.path.isfile(augmented) else ()


def _work_digests(cfg) -> tuple[str, dict[str, tuple[str, int]]]:
    """The digests of ``data_fingerprint`` and ``datasets`` from one encoding of the rows: each split's JSON text
    goes into its own hash and into the whole's, ``[train, dev(, val, CARVE_VERSION)]``."""
    train, val, dev = _splits(cfg)
    parts = {"train": train, "dev": dev, **({"val": val} if val else {})}
    whole = hashlib.sha256(b"[")
    out = {}
    for i, (name, rows) in enumerate(parts.items()):
        own = hashlib.sha256()
        whole.update(b", " if i else b"")
        for piece in _list_text(rows):
            own.update(piece)
            whole.update(piece)
        out[name] = (own.hexdigest()[:16], len(rows))
    whole.update(f", {_dumps(CARVE_VERSION)}]".encode() if val else b"]")
    return whole.hexdigest()[:16], out


def log_inputs(tracker, run_id: str, cfg) -> None:
    """A new run's dataset inputs and, for the user's files, the label names in index order as ``task/labels.json``
    (a long list does not fit a param: ``data_params``)."""
    tracker.log_datasets(run_id, datasets(cfg))  # re-reads and hashes the data: it can fail too
    if cfg.data.labels:
        tracker.log_dict(run_id, {"labels": list(cfg.data.labels)}, "task/labels.json")


def _source(cfg, split: str) -> str | dict:
    """Where a split's rows come from: the user's dataset (name, config, split, revision: Hugging Face's source
    layout) or file (dev: the eval split or file, or train's when dev is held out of it), the augmented set (train),
    the corpus (general), the data folder or the hub."""
    data = cfg.data
    if data.dataset:
        name = data.eval_split if split == "dev" and data.eval_split else data.split_name("train")
        config, revision = data.dataset_config or None, data.dataset_revision or None
        return {"path": data.dataset, "config_name": config, "split": name, "revision": revision}
    if cfg.data.train_file:
        return cfg.data.eval_file if split == "dev" and cfg.data.eval_file else cfg.data.train_file
    source = cfg.unlabeled_text if cfg.task == "general" else (cfg.augment_dir or cfg.data_dir or "hub")
    return source if split == "train" else (cfg.data_dir or source)
