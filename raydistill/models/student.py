"""Build a student in the teacher's own family (BERT → BERT, RoBERTa → RoBERTa) with the teacher's head and labels.

Initialisation strategies live in the string-keyed registry ``INITS`` (``StudentConfig.init`` = ``name`` or
``name:arg``). With N teacher layers and M student layers, the layer-copy inits pick these teacher layers (1-based):

  first_k       1, 2, …, M                                  (Patient-KD: the bottom k layers)
  every_other   s = N // M; the lower ⌈M/2⌉ take 1, 1+s, 1+2s, …, the upper ⌊M/2⌋ end on the top layer:
                …, N−2s, N−s, N                             (DistilBERT: 12→6 takes 1,3,5,8,10,12; 6→3 takes 1,3,6)
  uniform       round_half_up(i·N/M) for i = 1..M          (evenly spaced, ends on the top layer: 12→4 takes 3,6,9,12)
  layers:1,3,5  exactly these, strictly increasing, M of them

They copy the embeddings (word, position, token type, LayerNorm), the chosen encoder layers, and the pooler and task
head (same head class, so the shapes match), which requires the teacher's hidden, intermediate and heads.
``slice`` takes every_other's layers for a student of any width: each tensor is cut to the student's shape (its
leading rows and columns: the first hidden units, intermediate neurons and, with the teacher's head size, the first
heads), the way AutoTinyBERT and weight subcloning extract a narrow model from a wide one, so a narrower student
(MiniLM's relations leave width and heads free) starts from the teacher's weights rather than random ones. It needs
no dimension wider than the teacher's (a wider FFN is refused) and logs one warning listing any tensor it still left
random, and one when the student's head size is not the teacher's (each student head then mixes teacher heads).
``prune`` (``prune``, ``prune:512``, ``prune:block,512``; ``models/prune.py``) cuts the student out of the teacher by
importance measured on
training examples instead of taking the leading block: the top heads, FFN neurons and hidden channels, whole heads of
the teacher's head size; ``build_student`` then needs ``examples``, a callable sample size → batches of model inputs.
``random`` initialises everything fresh; ``checkpoint:DIR`` loads a saved student (e.g. from general distillation)
whose architecture then wins over the size fields, with a fresh task head when the checkpoint has none or another.
An empty init means the method's default (``Method.default_init``: pkd first_k, distilbert every_other, else random),
which ``RunConfig`` fills in; a bare ``StudentConfig`` outside a run has no method, so empty means ``random`` here.
"""

from __future__ import annotations

import logging
from pathlib import Path

import torch

from raydistill.common.errors import UserError, check
from raydistill.config.schema import StudentConfig, split_init
from raydistill.config.sizes import FIELDS, Shape, check_shape
from raydistill.models import prune
from raydistill.models.encoder import KNOWN_FAMILIES, encoder_layers, family, head_kind
from raydistill.models.heads import auto_class
from raydistill.tasks.files import PLACEHOLDER

log = logging.getLogger(__name__)


# ---- layer selection: (M, N, arg) -> 1-based teacher layers ---------------------------------------------------------


def _first_k(m: int, n: int, arg: str | None) -> list[int]:
    return list(range(1, m + 1))


def _every_other(m: int, n: int, arg: str | None) -> list[int]:
    # DistilBERT's extraction keeps the teacher's top layer (the pooler and head copied on top were trained on it):
    # every s-th layer from the bottom for the lower half, every s-th layer down from the top for the upper half.
    s, upper = n // m, m // 2
    lower = [i * s for i in range(m - upper)]
    return [1 + t for t in lower + [n - 1 - (upper - 1 - j) * s for j in range(upper)]]


def _uniform(m: int, n: int, arg: str | None) -> list[int]:
    return [(2 * i * n + m) // (2 * m) for i in range(1, m + 1)]  # round half up of i·N/M, without float error


def _explicit(m: int, n: int, arg: str | None) -> list[int]:
    from raydistill.distill.mapping import parse_layer_list

    return parse_layer_list(
        arg or "",
        m,
        n,
        "student.init",
        f"layers:{arg}",
        f"layers:{arg} is not a comma-separated list of teacher layers, e.g. layers:1,3,5",
    )


LAYER_SELECTORS = {"first_k": _first_k, "every_other": _every_other, "uniform": _uniform, "layers": _explicit}


def init_layers(init: str, m: int, n: int) -> list[int] | None:
    """1-based teacher layers that ``init`` copies into an M-layer student, or None when it copies none."""
    name, _, arg = init.partition(":")
    if name not in LAYER_SELECTORS:
        return None
    check(
        m <= n,
        "student.layers",
        f"init {name} copies teacher layers, so the student cannot have more layers "
        f"({m}) than the teacher ({n}); lower student.layers or use --init random",
    )
    return LAYER_SELECTORS[name](m, n, arg or None)


# ---- builders --------------------------------------------------------------------------------------------------------


def student_config(tc, spec: StudentConfig):
    """The teacher's config ``tc`` (family, vocab, positions, labels, problem_type) with the student's sizes."""
    cfg = type(tc).from_dict(tc.to_dict())
    if getattr(cfg, "embedding_size", None) == tc.hidden_size:  # ELECTRA: embeddings follow the hidden size
        cfg.embedding_size = spec.hidden
    cfg.num_hidden_layers, cfg.hidden_size = spec.layers, spec.hidden
    cfg.intermediate_size, cfg.num_attention_heads = spec.intermediate, spec.heads
    return cfg


def _fresh(teacher, spec: StudentConfig):
    kind = head_kind(teacher)
    cfg = student_config(teacher.config, spec)
    kw = {}
    if kind == "base":  # a bare encoder never uses its pooler, and unused parameters break DDP
        kw["add_pooling_layer"] = False
    return auto_class(kind).from_config(cfg, attn_implementation="sdpa", dtype=torch.float32, **kw)


def _random(teacher, spec: StudentConfig, arg: str | None):
    """Fresh random weights: nothing copied from the teacher; any size."""
    return _fresh(teacher, spec)


_COPY_DOC = {  # an init's docstring is its one line in ``python -m raydistill list inits``
    "first_k": "Copy the teacher's bottom M layers (Patient-KD); the teacher's width.",
    "every_other": "Copy every other teacher layer, the top one kept (DistilBERT); the teacher's width.",
    "uniform": "Copy M evenly spaced teacher layers ending on the top one (12→4: 3,6,9,12); the teacher's width.",
    "layers": "Copy exactly these teacher layers (layers:1,3,5, 1-based); the teacher's width.",
}


def _layer_copy(name: str):
    def init(teacher, spec: StudentConfig, arg: str | None):
        tc = teacher.config
        for f, t in (
            ("hidden", tc.hidden_size),
            ("intermediate", tc.intermediate_size),
            ("heads", tc.num_attention_heads),
        ):
            check(
                getattr(spec, f) == t,
                f"student.{f}",
                f"init {name} copies teacher layers, so {f} must equal the teacher's {t} (got {getattr(spec, f)}); "
                f"use --init random or set student.{f}={t}",
            )
        src = init_layers(f"{name}:{arg}" if arg else name, spec.layers, tc.num_hidden_layers)
        assert src is not None  # a layer-copying init names teacher layers
        student = _fresh(teacher, spec)
        copy_weights(teacher, student, [s - 1 for s in src])
        return student

    init.__doc__ = _COPY_DOC[name] + " Embeddings, pooler and head are copied too."
    return init


def copy_weights(teacher, student, teacher_layers: list[int], sliced: bool = False) -> list[str]:
    """Copy every student tensor whose teacher counterpart has the same name and shape (``sliced``: or a shape no
    smaller in any dimension, whose leading block is copied); student encoder layer i comes from teacher layer
    ``teacher_layers[i]`` (0-based). Returns the copied student names."""
    t_sd = teacher.state_dict()
    copied = []
    with torch.no_grad():
        for name, p in student.state_dict().items():
            src = prune.LAYER_KEY.sub(lambda mt: f"{mt[1]}{teacher_layers[int(mt[2])]}{mt[3]}", name, count=1)
            t = t_sd.get(src)
            if (
                t is None
                or t.dim() != p.dim()
                or t.shape != p.shape
                and not (sliced and all(a <= b for a, b in zip(p.shape, t.shape, strict=True)))
            ):
                continue
            p.copy_(t[tuple(slice(0, n) for n in p.shape)])
            copied.append(name)
    return copied


def _slice(teacher, spec: StudentConfig, arg: str | None):
    """Copy every_other's teacher layers, each tensor cut to the student's shape (module docstring)."""
    tc = teacher.config
    check(
        spec.intermediate <= tc.intermediate_size,
        "student.intermediate",
        f"init slice cuts teacher tensors, so the student's FFN cannot be wider ({spec.intermediate}) than the "
        f"teacher's {tc.intermediate_size}; lower student.intermediate or use --init random",
    )
    src = init_layers("every_other", spec.layers, tc.num_hidden_layers)
    assert src is not None  # every_other names teacher layers
    student = _fresh(teacher, spec)
    copied = set(copy_weights(teacher, student, [s - 1 for s in src], sliced=True))
    left = [n for n in student.state_dict() if n not in copied]
    if left:
        log.warning(
            "init slice left %d tensors random (no teacher tensor at least as large): %s", len(left), ", ".join(left)
        )
    d_t, d_s = tc.hidden_size // tc.num_attention_heads, spec.hidden // spec.heads
    if d_s != d_t:
        log.warning(
            "init slice: the student's head size %d is not the teacher's %d, so each student head is cut "
            "from parts of teacher heads; keep the teacher's head size (heads: keep_head_size) or use "
            "--init prune",
            d_s,
            d_t,
        )
    return student


def _prune(teacher, spec: StudentConfig, arg: str | None, examples=None):
    """Cut the student out of the teacher by importance: the heads, neurons, channels and layers that matter most."""
    rule, n = prune.parse_arg(arg)
    sizes = {k: getattr(spec, k) for k in FIELDS}
    check_shape(sizes, Shape.of(teacher.config))
    if examples is None:
        raise ValueError("init prune scores the teacher on training examples: build_student(..., examples=fn)")
    batches = examples(n)
    scores = prune.importance(teacher, batches)
    m, t_layers = spec.layers, teacher.config.num_hidden_layers
    layers = [i + 1 for i in prune.top(scores["block"], m)] if rule == "block" else init_layers(rule, m, t_layers)
    assert layers is not None  # every prune layer rule names teacher layers
    kept = prune.plan(scores, layers, sizes, rule, sum(len(b["input_ids"]) for b in batches))
    student = _fresh(teacher, spec)
    left = prune.copy_pruned(teacher, student, kept)
    if left:
        log.warning("init prune left %d tensors random: %s", len(left), ", ".join(left))
    if hasattr(teacher.base_model, "embeddings_project") and not hasattr(student.base_model, "embeddings_project"):
        log.warning(
            "init prune: the student's width %d is the teacher's embedding size, so it has no embedding "
            "projection and the teacher's is dropped; pick another width",
            spec.hidden,
        )
    student.prune_plan = kept  # checkpoint.save_checkpoint writes it beside the weights (prune.json)
    log.info(prune.summary(kept))
    return student


def _checkpoint(teacher, spec: StudentConfig, arg: str | None):
    """Load a saved student (checkpoint:DIR, e.g. from general distillation); its own sizes win."""
    from transformers import AutoConfig

    path = Path(arg or "").expanduser()
    check(
        bool(arg) and (path / "config.json").is_file(),
        "student.init",
        f"checkpoint:{arg} is not a saved model folder (config.json + weights); pass checkpoint:DIR of a saved student",
    )
    try:
        cfg = AutoConfig.from_pretrained(str(path))
    except (OSError, ValueError, KeyError) as e:
        raise UserError("student.init", f"cannot read the config of checkpoint {arg}: {e}") from None
    tc = teacher.config
    fam = KNOWN_FAMILIES.get(cfg.model_type, cfg.model_type)
    check(
        fam == family(teacher) and cfg.vocab_size == tc.vocab_size,
        "student.init",
        f"checkpoint {arg} is a {cfg.model_type} model with vocab {cfg.vocab_size} but the teacher is "
        f"{tc.model_type} with vocab {tc.vocab_size}; distil from a checkpoint of the teacher's family and tokenizer",
    )
    sizes = {
        "layers": cfg.num_hidden_layers,
        "hidden": cfg.hidden_size,
        "intermediate": cfg.intermediate_size,
        "heads": cfg.num_attention_heads,
    }
    if any(getattr(spec, k) != v for k, v in sizes.items()):
        log.warning("init checkpoint:%s: using the checkpoint's sizes %s, not the student config's", arg, sizes)
    # the teacher's label set, so the head (fresh unless the checkpoint already has this one) fits the task
    cfg.id2label, cfg.label2id, cfg.problem_type = dict(tc.id2label), dict(tc.label2id), tc.problem_type
    try:
        return auto_class(head_kind(teacher)).from_pretrained(
            str(path), config=cfg, attn_implementation="sdpa", dtype=torch.float32, ignore_mismatched_sizes=True
        )
    except (OSError, ValueError, RuntimeError) as e:
        raise UserError("student.init", f"cannot load checkpoint {arg}: {e}") from None


INITS = {
    "random": _random,
    "first_k": _layer_copy("first_k"),
    "every_other": _layer_copy("every_other"),
    "uniform": _layer_copy("uniform"),
    "layers": _layer_copy("layers"),
    "slice": _slice,
    "prune": _prune,
    "checkpoint": _checkpoint,
}


def build_student(teacher, spec: StudentConfig, examples=None):
    """A float32, sdpa-attention student of the teacher's family, head class and label config, initialised by
    ``spec.init`` (see module docstring). ``examples`` (sample size or None → batches of model inputs) is what
    init ``prune`` scores the teacher on."""
    spec.validate()
    name, arg = split_init(spec.init)
    check(
        name in INITS,
        "student.init",
        f"unknown init {spec.init!r}; use one of random, first_k, every_other, "
        "uniform, layers:1,3,5, slice, prune, checkpoint:DIR",
    )
    check(
        bool(arg) == (name in ("layers", "checkpoint")) or name == "prune",
        "student.init",
        f"{spec.init!r}: only layers:…, checkpoint:… and prune:… take an argument (e.g. layers:1,3,5)",
    )
    encoder_layers(teacher)  # fails early for a non-BERT layout
    if name == "prune":
        return _prune(teacher, spec, arg or None, examples)
    return INITS[name](teacher, spec, arg or None)


def name_labels(config, names: tuple[str, ...]) -> None:
    """Give a model ``config`` whose label names are transformers' placeholders (``LABEL_0``…, a teacher nobody
    named) the run's ``names``, index for index: the student then answers with the data's labels in the order the
    run trained (and printed: ``tasks.files.align``). A config with real names keeps them (a named teacher's order is
    the run's order already), as does one whose head has another size."""
    old = [str(v) for _, v in sorted((getattr(config, "id2label", None) or {}).items(), key=lambda kv: int(kv[0]))]
    if not names or len(old) != len(names) or not all(PLACEHOLDER.fullmatch(n) for n in old):
        return
    config.id2label = dict(enumerate(names))
    config.label2id = {n: i for i, n in enumerate(names)}


def count_params(model, trainable_only: bool = False) -> int:
    """Number of parameters (tied weights counted once)."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad or not trainable_only)
