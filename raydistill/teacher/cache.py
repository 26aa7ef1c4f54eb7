"""Teacher-output cache shared by every trial of a sweep (and by later sweeps).

In task distillation the frozen teacher's forward pass is most of a step, and a sweep would recompute it for
every trial and epoch. It is computed once per (teacher weights + tokenizer, max length, training data, task
kind, teacher precision) and stored compactly: fp16, one row per real token or example (no padding; token-level
arrays flat with offsets), shared by every trial and DDP rank, read by row range (``RowFile``).

Always stored: the prediction logits and the [CLS] state of every layer (``kd``, ``pkd``, prediction stages).
Full-sequence hidden states and pre-softmax attention scores (TinyBERT / two-stage intermediate stage, DistilBERT's
cosine loss) are stored per layer when they fit the size budget: every layer when all fit (one teacher pass serves
every mapping a sweep can try), else the layers this run asks for, else none, and the live teacher serves that
stage. The budget counts only what the disk can take: a build leaves ``DISK_RESERVE`` free where the cache lives (a
full disk fails the run's checkpoints, and whatever else the user keeps there); a disk without room for even the
logits and [CLS] states gets no cache (``NoRoom``: ``open_cache`` says so in one line, and the teacher runs live).
Layers added later are written beside the existing arrays; nothing already written is rewritten.
"""

from __future__ import annotations

import contextlib
import fcntl
import glob
import hashlib
import json
import os
import re
import shutil
import tempfile
import weakref
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from raydistill.common.paths import free_bytes, write_json_atomic
from raydistill.common.progress import Progress
from raydistill.tasks.encode import collate
from raydistill.tasks.encode import lengths as feature_lengths
from raydistill.train.precision import autocast

VERSION = "2"
GiB = 1 << 30
# what a build of full-sequence states leaves free on the cache's disk: a run's checkpoints go on after it (a 12-layer
# student with its optimizer state writes ~1.5 GB), and the disk is seldom the cache's alone
DISK_RESERVE = 2 * GiB


class NoRoom(OSError):
    """The cache's disk cannot take even a new cache's base arrays with ``DISK_RESERVE`` left free: no cache."""


def _base_bytes(cfg, n: int) -> int:
    """About what a new cache's base arrays take: fp16 [CLS] of every layer are most of them."""
    return n * (cfg.num_hidden_layers + 1) * cfg.hidden_size * 2


def _tokenizer_hash(teacher_dir: str) -> str:
    h = hashlib.sha256()
    for name in sorted(os.listdir(teacher_dir)) if os.path.isdir(teacher_dir) else []:
        if name.startswith(("tokenizer", "vocab", "merges", "special_tokens")):
            with open(os.path.join(teacher_dir, name), "rb") as f:
                h.update(name.encode() + f.read())
    return h.hexdigest()


def cache_key(cfg, kind: str, dtype: str = "fp32") -> str:
    """``dtype``: what the teacher forward ran in ('bf16' autocast or 'fp32'); the outputs differ by ~1e-3."""
    from raydistill.data.splits import data_fingerprint
    from raydistill.models.encoder import fingerprint

    parts = {
        "v": VERSION,
        "teacher": fingerprint(cfg.teacher),
        "tokenizer": _tokenizer_hash(cfg.teacher),
        "max_length": cfg.train.max_length,
        "data": data_fingerprint(cfg),
        "kind": kind,
        "dtype": dtype,
    }
    if cfg.train.attention != "padded":  # the layout's rounding differs; padded keys stay as they were (caches kept)
        parts["attention"] = cfg.train.attention
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:20]


def _save(path: str, arr: np.ndarray) -> None:
    """Write next to ``path`` and rename: a reader never maps a half-written array."""
    tmp = path + ".tmp.npy"
    np.save(tmp, arr)
    os.replace(tmp, path)


def _clear_leftovers(parent: str, key: str) -> None:
    """A killed build's temporary folders and half-written arrays of cache ``key`` (its lock held by the caller)."""
    for stale in glob.glob(os.path.join(glob.escape(parent), f".tmp-{glob.escape(key)}-*")):
        shutil.rmtree(stale, ignore_errors=True)
    for stale in glob.glob(os.path.join(glob.escape(parent), glob.escape(key), "*.tmp.npy")):
        os.remove(stale)


def _rows(offsets, idx) -> np.ndarray:
    """The flat token rows of examples ``idx``, in order (token-level arrays store real tokens only)."""
    return np.concatenate([np.arange(offsets[i], offsets[i + 1]) for i in idx])


class RowFile:
    """Row ranges of a cached ``.npy`` array read with one ``pread`` each, the file's readahead off. Why not the
    memory map: a fault in a map reads around it by the disk's readahead window (megabytes on some virtual disks), so
    once the cache outgrows the page cache a step's random rows cost many times their size in reads
    (docs/benchmarks/2026-11-28-cache-reads.md)."""

    def __init__(self, path: str):
        with open(path, "rb") as f:
            fmt = np.lib.format
            header = fmt.read_array_header_1_0 if fmt.read_magic(f) == (1, 0) else fmt.read_array_header_2_0
            self.shape, fortran, self.dtype = header(f)
            assert not fortran  # written C-order by _CacheWriter
            self.start = f.tell()
        self.row_bytes = int(np.prod(self.shape[1:], dtype=np.int64)) * self.dtype.itemsize
        self.path, self.fd = path, os.open(path, os.O_RDONLY)
        if hasattr(os, "posix_fadvise"):  # Linux: read exactly the pages asked for
            os.posix_fadvise(self.fd, 0, 0, os.POSIX_FADV_RANDOM)
        weakref.finalize(self, os.close, self.fd)

    def take(self, ranges) -> np.ndarray:
        """Rows ``[a, b)`` of each range in ``ranges``, concatenated (one read per range)."""
        ranges = [(int(a), int(b)) for a, b in ranges]
        out = np.empty((sum(b - a for a, b in ranges),) + tuple(self.shape[1:]), self.dtype)
        view, at = memoryview(out.reshape(-1).view(np.uint8).data), 0
        for a, b in ranges:
            n = (b - a) * self.row_bytes
            self._read_into(view[at : at + n], self.start + a * self.row_bytes)
            at += n
        return out

    def _read_into(self, buf: memoryview, offset: int) -> None:
        while len(buf):
            got = os.preadv(self.fd, [buf], offset)
            if got <= 0:
                raise OSError(f"teacher cache: {self.path} ended early at byte {offset}")
            buf, offset = buf[got:], offset + got


@dataclass(frozen=True)
class TeacherInputs:
    """What the teacher runs over: the encoded training ``features``, batched by ``collate`` with ``pad_id``."""

    features: list
    collate: Callable
    pad_id: int


@dataclass(frozen=True)
class CacheWants:
    """What a run asks of the cache: the precision its teacher forward runs in (``dtype``), the full-sequence hidden
    states (``hidden_layers``: 0..L, −1 = last) and attention scores (``att_layers``: 0-based) its stages read (empty
    when only logits and [CLS] are needed), and the size budget in GiB those may take (``budget_gb``)."""

    dtype: str = "fp32"
    hidden_layers: frozenset = frozenset()
    att_layers: frozenset = frozenset()
    budget_gb: float = 4.0


class TeacherCache:
    def __init__(self, root: str, key: str, kind: str, unpadded: bool = False):
        self.dir, self.kind = os.path.join(root, key), kind
        self.unpadded = unpadded  # built with packed forwards (``models.packing``) where no scores are written
        self.arrays: dict[str, np.ndarray] = {}
        self.rows: dict[str, RowFile] = {}  # every array but the offsets, read by row ranges (RowFile says why)
        self.hidden_layers: frozenset = frozenset()  # full-sequence hidden states cached (0 = embeddings)
        self.att_layers: frozenset = frozenset()  # attention scores cached (0-based layers)
        self.heads = self.layers = 0

    def _meta(self) -> dict | None:
        path = os.path.join(self.dir, "meta.json")
        if not os.path.isfile(path):
            return None
        with open(path) as f:
            return json.load(f)

    def ensure(
        self, teacher, inputs: TeacherInputs, device, log=print, want: CacheWants = CacheWants()
    ) -> TeacherCache:
        """Build what is missing of what this run ``want``s once, under a file lock (concurrent trials and ranks wait,
        then read), then map."""
        features = inputs.features
        os.makedirs(os.path.dirname(self.dir), exist_ok=True)
        with open(self.dir + ".lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            self._clear_killed_builds()  # first: a killed build's arrays would count against the budget below
            meta = self._meta()
            free = self._disk_room(teacher, len(features), meta)
            self.layers = meta["layers"] if meta else teacher.config.num_hidden_layers  # no teacher needed on a hit
            add_h, add_a = self._to_add(teacher, features, meta, want, free, log)
            if meta is None or add_h or add_a:
                what = "teacher outputs" + (
                    f" (+ full states of {len(add_h)} layers, scores of {len(add_a)})" if add_h or add_a else ""
                )
                log(f"teacher cache: computing {what} for {len(features)} examples into {self.dir}")
                with autocast(device, want.dtype):  # the same precision as the live teacher of this run
                    self._build(teacher, inputs, device, meta is None, add_h, add_a, log=log)
            fcntl.flock(lock, fcntl.LOCK_UN)
        return self._map()

    def _clear_killed_builds(self) -> None:
        """What a build killed mid-way left (SIGKILL, a machine's end: its cleanup never ran), gigabytes on a large
        set: this key's temporary folder and half-written arrays (under the key's lock no one else writes them), and
        those of any other key no one holds the lock of now (a set never built again would keep them). Only the names
        a cache's build writes, of keys with a lock file: nothing else in a folder the user chose."""
        parent, key = os.path.split(self.dir)
        _clear_leftovers(parent, key)
        found = (re.fullmatch(r"([0-9a-f]{20})\.lock", name) for name in os.listdir(parent))
        for other in sorted({m[1] for m in found if m} - {key}):
            try:
                # "a": an exclusive lock needs a file open for writing on NFS, where a shared cache lives
                with open(os.path.join(parent, f"{other}.lock"), "a") as lock:
                    fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)  # released when closed
                    _clear_leftovers(parent, other)
            except OSError:  # being built now (BlockingIOError), or a lock this file system refuses: left alone
                continue

    def _to_add(
        self, teacher, features: list, meta: dict | None, want: CacheWants, free: int, log
    ) -> tuple[set[int], set[int]]:
        """The hidden-state and attention layers to add to the cache: every one it lacks when all fit the budget and
        the disk (its ``free`` bytes for them, ``DISK_RESERVE`` left free), else the ones this run wants when those
        fit, else none (said in one line, naming which of the two refused: the live teacher serves them)."""
        want_h, want_a, budget_gb = self._hidden(want.hidden_layers), set(want.att_layers), want.budget_gb
        have_h, have_a = (set(meta["hidden"]), set(meta["att"])) if meta else (set(), set())
        if not (want_h - have_h or want_a - have_a):
            return set(), set()
        cfg = teacher.config
        lengths = np.array(feature_lengths(features), dtype=np.int64)  # int64: n * n sums past int32
        h_bytes = int(lengths.sum()) * cfg.hidden_size * 2
        a_bytes = int((lengths * lengths).sum()) * cfg.num_attention_heads * 2
        used = sum(os.path.getsize(os.path.join(self.dir, f)) for f in os.listdir(self.dir)) if meta else 0
        budget_room = int(budget_gb * GiB) - used
        room = min(budget_room, free - DISK_RESERVE)
        all_h, all_a = set(range(cfg.num_hidden_layers + 1)) - have_h, set(range(cfg.num_hidden_layers)) - have_a
        if len(all_h) * h_bytes + len(all_a) * a_bytes <= room:
            return all_h, all_a
        need = len(want_h - have_h) * h_bytes + len(want_a - have_a) * a_bytes
        if need <= room:
            return want_h - have_h, want_a - have_a
        what = f"teacher cache: full-sequence states of layers {sorted(want_h)} / attention {sorted(want_a)} "
        if need <= budget_room:  # the budget holds them; the disk does not
            log(
                f"{what}need {need / GiB:.2f} GiB more, but {os.path.dirname(self.dir)} has {free / GiB:.2f} GiB "
                f"free beside the cache's other arrays, and a build leaves at least {DISK_RESERVE / GiB:g} GiB free: "
                "the live teacher serves that stage (free space there, or put the cache on a larger disk with "
                "--teacher-cache)"
            )
        else:
            log(
                f"{what}need {need / GiB:.2f} GiB more, over the {budget_gb:g} GiB budget: the live teacher serves "
                "that stage (raise --teacher-cache-gb to cache them)"
            )
        return set(), set()

    def _disk_room(self, teacher, n: int, meta: dict | None) -> int:
        """The disk's free bytes for full-sequence arrays: a new cache's base arrays, written in the same build, set
        aside — ``NoRoom`` where even those do not fit with ``DISK_RESERVE`` left free."""
        parent = os.path.dirname(self.dir)
        free = free_bytes(parent)
        if meta:
            return free
        need = _base_bytes(teacher.config, n)
        if need > free - DISK_RESERVE:
            raise NoRoom(
                f"teacher cache: the teacher's outputs for {n} examples need {need / GiB:.2f} GiB, but {parent} has "
                f"{free / GiB:.2f} GiB free, and a build leaves at least {DISK_RESERVE / GiB:g} GiB free: no cache, "
                "the live teacher runs every step (free space there, or put the cache on a larger disk with "
                "--teacher-cache)"
            )
        return free - need

    def _map(self) -> TeacherCache:
        """The built arrays (read by ``rows``; the maps stay for a look at the whole), and the layers they hold."""
        meta = self._meta()
        assert meta is not None  # built by ensure, under the lock
        self.arrays = {k: np.load(os.path.join(self.dir, f"{k}.npy"), mmap_mode="r") for k in meta["arrays"]}
        self.rows = {k: RowFile(os.path.join(self.dir, f"{k}.npy")) for k in meta["arrays"] if "offsets" not in k}
        for k in ("offsets", "att_offsets"):  # 8 bytes a row, read for every batch: held in memory
            if k in self.arrays:
                self.arrays[k] = np.array(self.arrays[k])
        self.hidden_layers, self.att_layers = frozenset(meta["hidden"]), frozenset(meta["att"])
        self.heads = meta["heads"]
        return self

    def _hidden(self, layers) -> set:
        """Hidden-state layer indices with −1 (the last layer) resolved."""
        return {self.layers if j < 0 else j for j in layers}

    def serves(self, needs) -> bool:
        """True when this cache holds every teacher feature a stage with ``needs`` reads."""
        if not needs.teacher_full:
            return True
        if needs.teacher_qkv:  # MiniLM's queries/keys/values are not stored: its relation stage runs the teacher live
            return False
        return (
            bool(needs.teacher_hidden or needs.teacher_att)
            and needs.teacher_att <= self.att_layers
            and self._hidden(needs.teacher_hidden) <= self.hidden_layers
        )

    @torch.no_grad()
    def _build(
        self,
        teacher,
        inputs: TeacherInputs,
        device,
        base: bool,
        add_h: set,
        add_a: set,
        batch_size: int = 64,
        log=print,
    ) -> None:
        """Run the teacher over ``inputs`` and write its outputs: the base arrays (``base``: [CLS] per layer and
        predictions, into a new folder put in place whole) and/or the full-sequence layers ``add_h`` / ``add_a``."""
        features, collate, pad_id = inputs.features, inputs.collate, inputs.pad_id
        from raydistill.models.features import AttentionCapture
        from raydistill.models.packing import packed_forward

        teacher.to(device).eval()
        parent, key = os.path.split(self.dir)
        out_dir = tempfile.mkdtemp(prefix=f".tmp-{key}-", dir=parent) if base else self.dir
        w = _CacheWriter(out_dir, features, teacher.config, self.kind)
        try:
            order = sorted(range(len(features)), key=lambda i: w.lengths[i])  # little padding
            progress = Progress("teacher cache", -(-len(order) // batch_size), log=log)
            for s in range(0, len(order), batch_size):
                idx = order[s : s + batch_size]
                batch = {k: v.to(device) for k, v in collate([features[i] for i in idx], pad_id).items()}
                fed = {k: batch[k] for k in ("input_ids", "attention_mask", "token_type_ids") if k in batch}
                with AttentionCapture(teacher, add_a) as cap:
                    out = (
                        packed_forward(teacher, fed, hidden_states=True)
                        if self.unpadded and not add_a
                        else teacher(**fed, output_hidden_states=True)
                    )
                real = batch["attention_mask"].bool()
                if base:
                    w.write_base(out, idx, real)
                w.write_hidden(out, idx, real, add_h)
                w.write_scores(cap.scores, idx, add_a)
                progress.update(items=len(idx))
            w.close(base, add_a)
            self._write_meta(out_dir, w, add_h, add_a, len(features))
            if base:
                os.replace(out_dir, self.dir)  # atomic: a half-built cache is never read
        except BaseException:
            if base:
                shutil.rmtree(out_dir, ignore_errors=True)
            w.discard()  # layers being added to an existing cache: drop the partial files
            raise

    def _write_meta(self, out_dir: str, w: _CacheWriter, add_h: set, add_a: set, n: int) -> None:
        old = self._meta() or {"arrays": [], "hidden": [], "att": []}
        names = set(old["arrays"]) | set(w.arrays) | {"offsets"} | ({"att_offsets"} if add_a else set())
        meta = {
            "arrays": sorted(names),
            "hidden": sorted(set(old["hidden"]) | add_h),
            "att": sorted(set(old["att"]) | add_a),
            "kind": self.kind,
            "n": n,
            "heads": w.heads,
            "layers": w.n_layers,
        }
        write_json_atomic(os.path.join(out_dir, "meta.json"), meta)

    def _tokens(self, name: str, idx: list[int], lengths: np.ndarray, L: int, device) -> torch.Tensor:
        """Rows of a token-level array for ``idx``, laid out on the batch's (right-)padded [B, L] grid, zeros on
        padding. Lengths come from the cache's offsets, not the device mask: no device→host sync per step."""
        src, off = self.rows[name], self.arrays["offsets"]
        out = torch.zeros((len(idx), L) + tuple(src.shape[1:]), dtype=torch.float16)
        out[torch.arange(L)[None, :] < torch.from_numpy(lengths)[:, None]] = torch.from_numpy(
            src.take((off[i], off[i + 1]) for i in idx)
        )
        return out.to(device, non_blocking=True).float()  # fp16 over the bus, fp32 for the losses

    def outputs(self, idx: list[int], batch: dict, needs):
        """Teacher ``Outputs`` for the examples ``idx`` of this batch, padded to the batch's length. Hidden states
        are [CLS]-only ([B, 1, H]) except the full-sequence layers ``needs`` asks for."""
        from raydistill.distill.methods import Outputs

        device, L = batch["input_ids"].device, batch["input_ids"].shape[1]
        off = self.arrays["offsets"]
        lengths = np.array([off[i + 1] - off[i] for i in idx], dtype=np.int64)
        one = [(i, i + 1) for i in idx]  # example-level rows
        cls = torch.from_numpy(self.rows["cls"].take(one)).to(device, non_blocking=True).float()
        hidden = [cls[:, j : j + 1] for j in range(cls.shape[1])]
        scores = {}
        if needs.teacher_full:
            for j in self._hidden(needs.teacher_hidden):
                hidden[j] = self._tokens(f"hidden_{j}", idx, lengths, L, device)
            for j in needs.teacher_att:
                src, a_off = self.rows[f"att_{j}"], self.arrays["att_offsets"]
                out = torch.zeros(len(idx), self.heads, L, L, dtype=torch.float16)
                for r, (i, n) in enumerate(zip(idx, lengths, strict=True)):
                    block = src.take([(a_off[i], a_off[i + 1])]).reshape(self.heads, n, n)
                    out[r, :, :n, :n] = torch.from_numpy(block)
                scores[j] = out.to(device, non_blocking=True).float()
        layers = tuple(hidden)
        if self.kind in ("token", "qa"):
            pred = self._tokens("pred", idx, lengths, L, device)
            if self.kind == "qa":
                return Outputs(start=pred[..., 0], end=pred[..., 1], hidden=layers, scores=scores)
            return Outputs(logits=pred, hidden=layers, scores=scores)
        logits = torch.from_numpy(self.rows["pred"].take(one)).to(device, non_blocking=True).float()
        return Outputs(logits=logits, hidden=layers, scores=scores)


class _CacheWriter:
    """The memory-mapped arrays of one cache build, filled batch by batch (``*.tmp.npy`` until ``close``): rows of
    token-level arrays laid out by ``offsets`` (one row per real token), attention scores by ``att_offsets``."""

    def __init__(self, out_dir: str, features, config, kind: str):
        self.out_dir, self.config, self.kind = out_dir, config, kind
        self.n, self.n_layers, self.heads = len(features), config.num_hidden_layers, config.num_attention_heads
        self.lengths = np.array(feature_lengths(features), dtype=np.int64)
        self.offsets = np.concatenate([[0], np.cumsum(self.lengths)])
        self.att_offsets = np.concatenate([[0], np.cumsum(self.lengths * self.lengths * self.heads)])
        self.token_level = kind in ("token", "qa")
        self.arrays: dict[str, np.memmap] = {}

    def new(self, name: str, shape, dtype=np.float16) -> np.memmap:
        shape = tuple(int(d) for d in shape)  # numpy ints would be written into the .npy header as np.int64(…)
        path = os.path.join(self.out_dir, f"{name}.tmp.npy")
        self.arrays[name] = np.lib.format.open_memmap(path, "w+", dtype, shape)
        return self.arrays[name]

    def write_base(self, out, idx: list[int], real: torch.Tensor) -> None:
        """[CLS] of every layer and the predictions (per token for token tasks and QA)."""
        pred = torch.stack([out.start_logits, out.end_logits], -1) if self.kind == "qa" else out.logits
        pred = pred.float()
        if "cls" not in self.arrays:
            self.new("cls", (self.n, self.n_layers + 1, self.config.hidden_size))
            rows = (self.offsets[-1],) if self.token_level else (self.n,)
            self.new("pred", rows + tuple(pred.shape[2 if self.token_level else 1 :]))
        self.arrays["cls"][idx] = torch.stack([h[:, 0] for h in out.hidden_states], 1).cpu().half().numpy()
        if self.token_level:
            self.arrays["pred"][_rows(self.offsets, idx)] = pred[real].cpu().numpy()
        else:
            self.arrays["pred"][idx] = pred.cpu().numpy()

    def write_hidden(self, out, idx: list[int], real: torch.Tensor, layers: set) -> None:
        for j in layers:
            arr = self.arrays.get(f"hidden_{j}")
            if arr is None:
                arr = self.new(f"hidden_{j}", (self.offsets[-1], self.config.hidden_size))
            arr[_rows(self.offsets, idx)] = out.hidden_states[j][real].cpu().half().numpy()

    def write_scores(self, scores: dict, idx: list[int], layers: set) -> None:
        for j in layers:
            arr = self.arrays.get(f"att_{j}")
            if arr is None:
                arr = self.new(f"att_{j}", (self.att_offsets[-1],))
            sc = scores[j].float().cpu()
            for r, i in enumerate(idx):
                n = self.lengths[i]
                arr[self.att_offsets[i] : self.att_offsets[i + 1]] = sc[r, :, :n, :n].reshape(-1).half().numpy()

    def close(self, base: bool, add_a: set) -> None:
        """Offsets saved, every array flushed and renamed into place."""
        if base:
            _save(os.path.join(self.out_dir, "offsets.npy"), self.offsets)
        if add_a:
            _save(os.path.join(self.out_dir, "att_offsets.npy"), self.att_offsets)
        for name, arr in self.arrays.items():
            arr.flush()
            os.replace(os.path.join(self.out_dir, f"{name}.tmp.npy"), os.path.join(self.out_dir, f"{name}.npy"))

    def discard(self) -> None:
        for name in self.arrays:
            with contextlib.suppress(OSError):
                os.remove(os.path.join(self.out_dir, f"{name}.tmp.npy"))


def open_cache(cfg, needs: list, teacher, data, device, log: Callable[[str], None], t_dtype: str):
    """The shared teacher-output cache of a run (``cfg.teacher_cache``), built on ``device`` where cold, when it is on
    and can serve at least one of the stages with ``needs``; else None (the teacher runs live). What the launchers
    that start runs hand the loop as ``Context.open_cache``."""
    kind = data.task.kind
    if not cfg.teacher_cache or teacher is None or not data.task.labelled or not any(n.teacher for n in needs):
        return None
    full = [n for n in needs if n.teacher and n.teacher_full]
    hidden = frozenset().union(*(n.teacher_hidden for n in full))
    att = frozenset().union(*(n.teacher_att for n in full))
    unpadded = cfg.train.attention == "unpadded"
    want = CacheWants(t_dtype, hidden, att, cfg.teacher_cache_gb)
    try:
        return TeacherCache(cfg.teacher_cache, cache_key(cfg, kind, t_dtype), kind, unpadded).ensure(
            teacher, TeacherInputs(data.train, collate, data.pad_id), device, log, want
        )
    except NoRoom as e:
        log(str(e))
        return None
