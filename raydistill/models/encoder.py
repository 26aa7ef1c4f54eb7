"""Load an encoder folder (a teacher, or a saved student) and fingerprint it.

Supported: any BERT/RoBERTa-like encoder, i.e. ``base_model.embeddings`` and
``base_model.encoder.layer[i].attention.self`` (bert, roberta, xlm-roberta, camembert, electra, …); layer mapping,
layer copying and attention capture rely on it.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from raydistill.common.errors import UserError, check
from raydistill.common.hub import hub_reachable, is_local
from raydistill.models.heads import KINDS, SUFFIX, auto_class

# model_type -> family; other model types are accepted when they have the same encoder layout (check_structure)
KNOWN_FAMILIES = {
    "bert": "bert",
    "roberta": "roberta",
    "xlm-roberta": "roberta",
    "camembert": "roberta",
    "electra": "electra",
}
_SUPPORTED = "only BERT/RoBERTa-like encoders (bert, roberta, xlm-roberta, electra, …) are supported; pick one"


def load_model(
    name_or_dir: str,
    kind: str,
    num_labels: int | None = None,
    trust_remote_code: bool = False,
    attn_implementation: str = "sdpa",
    field: str = "teacher",
):
    """Load ``name_or_dir`` with the ``AutoModelFor…`` class of ``kind`` (classification | regression | token | qa |
    mlm | base). ``num_labels`` builds a fresh head of that size when the checkpoint has none; a checkpoint whose own
    head has a different size is a UserError (it was fine-tuned on another label set)."""
    check(kind in KINDS, "kind", f"unknown kind {kind!r}; use one of {', '.join(KINDS)}")
    name_or_dir = _local_folder(str(name_or_dir), field)
    # offline: a hub name can still come from the local Hugging Face cache, without minutes of retries
    offline = {} if is_local(name_or_dir) or hub_reachable() else {"local_files_only": True}
    cfg = _config(name_or_dir, offline, field, trust_remote_code=trust_remote_code)
    mismatch = _fit_head(cfg, kind, num_labels, name_or_dir, field)
    try:
        model = auto_class(kind).from_pretrained(
            name_or_dir,
            config=cfg,
            trust_remote_code=trust_remote_code,
            attn_implementation=attn_implementation,
            ignore_mismatched_sizes=mismatch,
            **offline,
        )
    except (OSError, ValueError, RuntimeError) as e:  # no/corrupt weights, unsupported head for this family
        raise UserError(field, f"cannot load {name_or_dir} as a {kind} model: {_first_line(e)}") from None
    check_structure(model, name_or_dir, field)
    return model


def _local_folder(name_or_dir: str, field: str) -> str:
    """A local path must be a saved model folder (its expanded path returned); a hub name is returned as it is."""
    if not is_local(name_or_dir):
        return name_or_dir
    path = Path(name_or_dir).expanduser()
    check(
        path.is_dir(),
        field,
        f"{name_or_dir} does not exist or is not a folder; pass a saved model folder "
        "(config.json + weights) or a Hugging Face hub name",
    )
    check(
        (path / "config.json").is_file(),
        field,
        f"{name_or_dir} has no config.json; pass the folder that save_pretrained wrote",
    )
    return str(path)


def _config(name_or_dir: str, offline: dict, field: str, trust_remote_code: bool = False):
    """The model's config, refused unless its model type is a known family or has the encoder layout."""
    from transformers import AutoConfig

    try:
        cfg = AutoConfig.from_pretrained(name_or_dir, trust_remote_code=trust_remote_code, **offline)
    except (OSError, ValueError, KeyError, TypeError) as e:  # missing, unreadable JSON, unknown model_type
        hint = " (the hub cannot be reached; pass a local folder)" if offline else ""
        raise UserError(field, f"cannot read the config of {name_or_dir}{hint}: {_first_line(e)}") from None
    if cfg.model_type not in KNOWN_FAMILIES:  # check the layout before reading any weights (meta = no memory)
        import torch

        try:
            with torch.device("meta"):
                check_structure(auto_class("base").from_config(cfg), name_or_dir, field)
        except (ValueError, KeyError, AttributeError):
            check(False, field, f"{name_or_dir} is a {cfg.model_type!r} model; {_SUPPORTED}")
    return cfg


def _fit_head(cfg, kind: str, num_labels: int | None, name_or_dir: str, field: str) -> bool:
    """Set ``cfg`` up for the task's head; True when the checkpoint's head is to be re-initialised (another size)."""
    mismatch = False
    if kind in ("classification", "regression", "token") and num_labels is not None and cfg.num_labels != num_labels:
        own_head = SUFFIX[kind] in " ".join(cfg.architectures or [])
        check(
            not own_head,
            field,
            f"{name_or_dir} has a {cfg.num_labels}-label head but the task has "
            f"{num_labels} label(s); pass a model fine-tuned on this task (or a plain encoder)",
        )
        cfg.id2label = {i: f"LABEL_{i}" for i in range(num_labels)}  # fresh head of the task's size
        cfg.label2id = {v: k for k, v in cfg.id2label.items()}
        mismatch = True  # a head of another task (e.g. classifier.* of a different size) is re-initialised
    if kind == "regression":
        cfg.problem_type = "regression"
    return mismatch


def _first_line(e: Exception) -> str:
    return (str(e).strip().splitlines() or [type(e).__name__])[0][:300]


def encoder_layers(model):
    """The ``nn.ModuleList`` of transformer layers (``base_model.encoder.layer``)."""
    return model.base_model.encoder.layer


def check_structure(model, name: str = "model", field: str = "teacher") -> None:
    """Refuse models without the BERT layout that layer mapping, layer copying and attention capture rely on."""
    base = model.base_model
    layers = getattr(getattr(base, "encoder", None), "layer", None)
    ok = (
        hasattr(base, "embeddings")
        and layers is not None
        and len(layers) > 0
        and all(hasattr(getattr(getattr(layer, "attention", None), "self", None), "query") for layer in layers)
    )
    check(ok, field, f"{name} is a {model.config.model_type!r} model; {_SUPPORTED}")


def family(model) -> str:
    """``bert`` | ``roberta`` | ``electra`` for known types, else the raw ``model_type``."""
    mt = model.config.model_type
    return KNOWN_FAMILIES.get(mt, mt)


def head_kind(model) -> str:
    """The task kind that the model's head class serves (inverse of ``heads.auto_class``)."""
    name = type(model).__name__
    for kind, suffix in SUFFIX.items():
        if name.endswith(suffix):
            return "regression" if kind == "classification" and model.config.problem_type == "regression" else kind
    return "base"


def _is_weights(name: str) -> bool:
    # model weights only: training state (optimizer.pt, training_args.bin) does not change the model
    return name.endswith(".safetensors") or (name.startswith("pytorch_model") and name.endswith(".bin"))


def fingerprint(model_dir: str | os.PathLike, length: int = 12) -> str:
    """Short sha256 over config.json (canonical JSON) and the sha256 of every weight file, in name order.

    Identifies a teacher for caches and run params; a hub name that is not a local folder is hashed by name. Worked
    out once per process for a folder whose files keep their times and sizes: a run asks several times (its cache
    key, run params, resume record), each a pass over the weights (seconds for a large teacher)."""
    path = Path(model_dir).expanduser()
    if not path.is_dir():
        return hashlib.sha256(f"name:{model_dir}".encode()).hexdigest()[:length]
    files = sorted(p for p in path.iterdir() if p.is_file() and (p.name == "config.json" or _is_weights(p.name)))
    stats = [(f.name, f.stat()) for f in files]
    key = (str(path.resolve()), tuple((n, st.st_ino, st.st_mtime_ns, st.st_size) for n, st in stats))
    if key not in _FINGERPRINTS:
        while len(_FINGERPRINTS) >= KEEP_FINGERPRINTS:
            _FINGERPRINTS.pop(next(iter(_FINGERPRINTS)))  # the oldest
        _FINGERPRINTS[key] = _hash_model(path, [f for f in files if f.name != "config.json"])
    return _FINGERPRINTS[key][:length]


KEEP_FINGERPRINTS = 8  # model folders whose fingerprints a process keeps (a sweep has a teacher or two)
_FINGERPRINTS: dict[tuple, str] = {}


def _hash_model(path: Path, weights: list[Path]) -> str:
    h = hashlib.sha256()
    cfg = path / "config.json"
    if cfg.is_file():
        try:
            h.update(json.dumps(json.loads(cfg.read_text(encoding="utf-8")), sort_keys=True).encode())
        except ValueError:
            h.update(cfg.read_bytes())
    for f in weights:
        fh = hashlib.sha256()
        with open(f, "rb") as fp:
            for chunk in iter(lambda: fp.read(1 << 20), b""):
                fh.update(chunk)
        h.update(f"{f.name}:{fh.hexdigest()}".encode())
    return h.hexdigest()


def quiet_hf() -> None:
    """Per-save progress bars and load reports drown the per-epoch lines a person reads."""
    import transformers

    transformers.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
