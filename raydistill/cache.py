"""Teacher-output cache shared by every trial of a sweep (and by later sweeps).

In task distillation the frozen teacher's forward pass is most of a step, and a sweep would recompute it for
every trial and epoch. It is computed once per (teacher weights + tokenizer, max length, training data, task
kind) and stored compactly: fp16, one row per example without padding (token-level outputs flat with offsets),
memory-mapped by every trial and DDP rank. Stored: the prediction logits and the [CLS] state of every layer,
which serve ``kd``, ``pkd``, and the prediction stages of ``tinybert``/``two_stage``. Stages that need
full-sequence hidden states or attention scores run the live teacher (``Needs.teacher_full``).
"""
from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import tempfile

import numpy as np
import torch

VERSION = "1"


def _tokenizer_hash(teacher_dir: str) -> str:
    h = hashlib.sha256()
    for name in sorted(os.listdir(teacher_dir)) if os.path.isdir(teacher_dir) else []:
        if name.startswith(("tokenizer", "vocab", "merges", "special_tokens")):
            with open(os.path.join(teacher_dir, name), "rb") as f:
                h.update(name.encode() + f.read())
    return h.hexdigest()


def cache_key(cfg, kind: str) -> str:
    from .distill.data import data_fingerprint
    from .models.teacher import fingerprint

    parts = {"v": VERSION, "teacher": fingerprint(cfg.teacher), "tokenizer": _tokenizer_hash(cfg.teacher),
             "max_length": cfg.train.max_length, "data": data_fingerprint(cfg), "kind": kind}
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:20]


class TeacherCache:
    def __init__(self, root: str, key: str, kind: str):
        self.dir, self.kind = os.path.join(root, key), kind
        self.arrays: dict[str, np.ndarray] = {}

    @property
    def ready(self) -> bool:
        return os.path.isfile(os.path.join(self.dir, "meta.json"))

    def ensure(self, teacher, features: list, collate, pad_id: int, device, log=print) -> "TeacherCache":
        """Build once under a file lock (concurrent trials and ranks wait, then read), then memory-map."""
        os.makedirs(os.path.dirname(self.dir), exist_ok=True)
        with open(self.dir + ".lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not self.ready:
                log(f"teacher cache: computing teacher outputs for {len(features)} examples into {self.dir}")
                self._build(teacher, features, collate, pad_id, device)
            fcntl.flock(lock, fcntl.LOCK_UN)
        meta = json.load(open(os.path.join(self.dir, "meta.json")))
        self.arrays = {k: np.load(os.path.join(self.dir, f"{k}.npy"), mmap_mode="r") for k in meta["arrays"]}
        return self

    @torch.no_grad()
    def _build(self, teacher, features, collate, pad_id, device, batch_size: int = 64) -> None:
        teacher.eval()
        token_level = self.kind in ("token", "qa")
        preds, cls, lengths = [], [], []
        order = sorted(range(len(features)), key=lambda i: len(features[i]["input_ids"]))  # little padding
        rows: dict[int, tuple] = {}
        for s in range(0, len(order), batch_size):
            idx = order[s:s + batch_size]
            batch = {k: v.to(device) for k, v in collate([features[i] for i in idx], pad_id).items()}
            inputs = {k: batch[k] for k in ("input_ids", "attention_mask", "token_type_ids") if k in batch}
            out = teacher(**inputs, output_hidden_states=True)
            pred = torch.stack([out.start_logits, out.end_logits], -1) if self.kind == "qa" else out.logits
            cls_b = torch.stack([h[:, 0] for h in out.hidden_states], 1).half().cpu().numpy()  # [B, L+1, H]
            lens = batch["attention_mask"].sum(-1).tolist()
            pred = pred.float().cpu().numpy()
            for j, i in enumerate(idx):
                rows[i] = (pred[j, : lens[j]] if token_level else pred[j], cls_b[j], lens[j])
        for i in range(len(features)):
            p, c, n = rows[i]
            preds.append(p.astype(np.float16))
            cls.append(c)
            lengths.append(n)
        tmp = tempfile.mkdtemp(prefix=".tmp-", dir=os.path.dirname(self.dir))
        try:
            arrays = {"cls": np.stack(cls), "offsets": np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)}
            arrays["pred"] = np.concatenate(preds) if token_level else np.stack(preds)
            for k, v in arrays.items():
                np.save(os.path.join(tmp, f"{k}.npy"), v)
            with open(os.path.join(tmp, "meta.json"), "w") as f:
                json.dump({"arrays": sorted(arrays), "kind": self.kind, "n": len(features)}, f)
            os.replace(tmp, self.dir)  # atomic: a half-built cache is never read
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise

    def outputs(self, idx: list[int], batch: dict):
        """Teacher ``Outputs`` for the examples ``idx`` of this batch, padded to the batch's length."""
        from .distill.methods import Outputs

        device, L = batch["input_ids"].device, batch["input_ids"].shape[1]
        cls = torch.from_numpy(np.asarray(self.arrays["cls"][idx], dtype=np.float32)).to(device)
        hidden = tuple(cls[:, j:j + 1] for j in range(cls.shape[1]))  # [CLS] only: [B, 1, H] per layer
        pred, off = self.arrays["pred"], self.arrays["offsets"]
        if self.kind in ("token", "qa"):
            out = torch.zeros((len(idx), L) + pred.shape[1:], dtype=torch.float32)
            for r, i in enumerate(idx):
                a, b = off[i], off[i + 1]
                out[r, : b - a] = torch.from_numpy(np.asarray(pred[a:b], dtype=np.float32))
            out = out.to(device)
            if self.kind == "qa":
                return Outputs(start=out[..., 0], end=out[..., 1], hidden=hidden)
            return Outputs(logits=out, hidden=hidden)
        return Outputs(logits=torch.from_numpy(np.asarray(pred[idx], dtype=np.float32)).to(device), hidden=hidden)
