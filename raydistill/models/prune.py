"""Init ``prune``: a student cut out of the fine-tuned teacher by importance (structured pruning as in Minitron and
CoFi, here without the pruning-aware training: distillation is what follows).

``student.init`` = ``prune[:ARGS]``, ARGS comma-separated: a sample size N (default ``min(256, training rows)``;
0, or more than the run's training rows, is refused) and a layer rule (default ``every_other``): ``prune``,
``prune:512``, ``prune:block``, ``prune:block,512``. The teacher, in eval mode, runs once over N training rows drawn
with the run's seed (``distill.examples.prune_rows``: never a dev row) and every structure gets a score, averaged
over real (unpadded) tokens:

  heads     ‖ctx_h · W_Oᵀ[h]‖: the norm of what head h writes to the residual stream, i.e. its context output
            through its own columns of the attention output projection (the plain context norm would ignore W_O;
            a Taylor score would need labels and a backward pass)
  neurons   mean |activation| after the FFN non-linearity (the input of the FFN's output projection)
  channels  mean |x_c| of the residual stream, summed over the encoder's input (the embeddings' output), each
            attention block's LayerNorm output and each layer's output
  layers    ``every_other`` (DistilBERT's pick, as ``slice``), ``first_k``, ``uniform``, or ``block``: block
            importance 1 − cos(layer input, layer output) (ShortGPT), the student's depth of highest kept

Every student layer keeps its own top heads and neurons; ONE set of hidden channels is kept everywhere the residual
stream goes (word, position and token-type embeddings, every LayerNorm, every projection's input and output, the
pooler and the task head), so the kept channels line up from the embeddings to the head. Whatever is kept stays in
the teacher's order, and ties go to the lower index, so one seed gives one student. Heads keep the teacher's head
size (student hidden = heads × the teacher's head size; sizes ``heads: keep_head_size`` does that), and nothing can
be larger than the teacher's: ``config.sizes.check_shape`` refuses it. At the teacher's own shape nothing is cut and
the student
computes exactly what the teacher does.

What was kept (``plan``: layers 1-based; heads, neurons and channels as 0-based indices into the teacher's) is the
student's ``prune_plan``; ``checkpoint.save_checkpoint`` writes it beside the weights as ``prune.json``, so the
exported student and its MLflow artifacts carry it.
"""

from __future__ import annotations

import logging
import re

import torch

from raydistill.common.errors import UserError, check
from raydistill.models.encoder import encoder_layers

log = logging.getLogger(__name__)

DEFAULT_SAMPLES = 256
LAYER_RULES = ("every_other", "first_k", "uniform", "block")
PLAN_FILE = "prune.json"
LAYER_KEY = re.compile(r"((?:^|\.)encoder\.layer\.)(\d+)(\.)")
# per dimension of a tensor inside an encoder layer: which kept indices cut it (None = kept whole)
IN_LAYER: dict[str, tuple[str, ...]] = {
    f"attention.self.{m}.weight": ("heads", "channels") for m in ("query", "key", "value")
}
IN_LAYER.update({f"attention.self.{m}.bias": ("heads",) for m in ("query", "key", "value")})
IN_LAYER.update(
    {
        "attention.output.dense.weight": ("channels", "heads"),
        "intermediate.dense.bias": ("neurons",),
        "intermediate.dense.weight": ("neurons", "channels"),
        "output.dense.weight": ("channels", "neurons"),
    }
)


def parse_arg(arg: str | None) -> tuple[str, int | None]:
    """``prune[:ARGS]``'s ARGS → (layer rule, sample size or None for the default)."""
    rule, n = "every_other", None
    for part in filter(None, (p.strip() for p in (arg or "").split(","))):
        if part.isdigit():
            n = int(part)
            check(
                n >= 1,
                "student.init",
                f"prune:{arg} scores the teacher on {n} examples; give at least 1 "
                f"(e.g. prune:{DEFAULT_SAMPLES}) or write prune for the default",
            )
        elif part in LAYER_RULES:
            rule = part
        else:
            raise UserError(
                "student.init",
                f"prune:{arg}: {part!r} is neither a sample size nor a layer rule "
                f"({', '.join(LAYER_RULES)}); write e.g. prune, prune:512, prune:block or prune:block,512",
            )
    return rule, n


def importance(teacher, batches: list[dict]) -> dict:
    """Scores of every head [layers, heads], FFN neuron [layers, intermediate], hidden channel [hidden] and layer
    (block importance, [layers]) of ``teacher`` over ``batches`` (model inputs), averaged over real tokens."""
    layers = encoder_layers(teacher)
    scores = _Scores(teacher.config, len(layers))
    hooks = scores.register(layers)
    total = _forward(teacher, batches, scores, hooks)
    check(total > 0, "student.init", "init prune saw no tokens in its training sample; check the training data")
    return {k: (v / total).float() for k, v in scores.acc.items()}


class _Scores:
    """The sums ``importance`` averages, filled by forward hooks on every layer (float64: many batches add up)."""

    def __init__(self, cfg, n: int):
        self.heads, self.d = cfg.num_attention_heads, cfg.hidden_size // cfg.num_attention_heads
        self.acc = {
            "heads": torch.zeros(n, self.heads, dtype=torch.float64),
            "block": torch.zeros(n, dtype=torch.float64),
            "neurons": torch.zeros(n, cfg.intermediate_size, dtype=torch.float64),
            "channels": torch.zeros(cfg.hidden_size, dtype=torch.float64),
        }
        self.mask = torch.zeros(0)  # the current batch's attention mask [B, L] (set by _forward)

    def tokens_sum(self, x):  # Σ over real tokens of x [B, L, ...] → [...]
        return torch.einsum("bl,bl...->...", self.mask, x.float()).double().cpu()

    def register(self, layers) -> list:
        hooks = []
        for i, layer in enumerate(layers):
            hooks += [
                layer.attention.output.dense.register_forward_pre_hook(self.on_context(i)),
                layer.output.dense.register_forward_pre_hook(self.on_ffn(i)),
                layer.attention.output.LayerNorm.register_forward_hook(self.on_norm),
                layer.register_forward_hook(self.on_layer(i), with_kwargs=True),
            ]
        return hooks

    def on_context(self, i):
        heads, d = self.heads, self.d

        def hook(mod, args):
            ctx = args[0].float().unflatten(-1, (heads, d))  # [B, L, h, d]
            w = mod.weight.float().unflatten(-1, (heads, d))  # [H, h, d]
            gram = torch.einsum("ehd,ehf->hdf", w, w)  # G = W_hᵀW_h: ‖c W_hᵀ‖² = c G cᵀ
            sq = torch.einsum("blhd,hdf,blhf->blh", ctx, gram, ctx)
            self.acc["heads"][i] += self.tokens_sum(sq.clamp_min(0).sqrt())

        return hook

    def on_ffn(self, i):
        def hook(mod, args):
            self.acc["neurons"][i] += self.tokens_sum(args[0].abs())

        return hook

    def on_layer(self, i):
        def hook(mod, args, kwargs, out):
            x = args[0] if args else kwargs["hidden_states"]
            y = out[0] if isinstance(out, tuple) else out
            self.acc["channels"] += self.tokens_sum(y.abs()) + (self.tokens_sum(x.abs()) if i == 0 else 0)
            cos = torch.nn.functional.cosine_similarity(x.float(), y.float(), dim=-1)
            self.acc["block"][i] += self.tokens_sum(1 - cos)

        return hook

    def on_norm(self, mod, args, out):
        self.acc["channels"] += self.tokens_sum(out.abs())


def _forward(teacher, batches: list[dict], scores: _Scores, hooks: list) -> float:
    """Run ``batches`` through ``teacher`` (on the GPU when it sits on the CPU and there is one); the hooks are
    removed and the teacher's device and train/eval mode restored after. Returns the number of real tokens."""
    home, was_training, total = next(teacher.parameters()).device, teacher.training, 0.0
    device = torch.device("cuda") if home.type == "cpu" and torch.cuda.is_available() else home
    teacher.to(device).eval()
    try:
        with torch.no_grad():
            for batch in batches:
                batch = {k: v.to(device) for k, v in batch.items()}
                scores.mask = batch["attention_mask"].float()
                total += float(scores.mask.sum())
                teacher(**batch)
    finally:
        for h in hooks:
            h.remove()
        teacher.to(home).train(was_training)
    return total


def top(scores, k: int) -> list[int]:
    """The ``k`` highest-scoring indices, in increasing order; ties go to the lower index (deterministic)."""
    order = torch.sort(torch.as_tensor(scores), descending=True, stable=True).indices
    return sorted(order[:k].tolist())


def plan(scores: dict, layers: list[int], sizes: dict, rule: str, samples: int) -> dict:
    """What a student of ``sizes`` keeps: ``layers`` (1-based teacher layers), then per kept layer its top heads
    and neurons, and the top hidden channels. JSON-ready."""
    return {
        "layer_rule": rule,
        "samples": samples,
        "layers": list(layers),
        "heads": [top(scores["heads"][t - 1], sizes["heads"]) for t in layers],
        "neurons": [top(scores["neurons"][t - 1], sizes["intermediate"]) for t in layers],
        "channels": top(scores["channels"], sizes["hidden"]),
        "kept": {
            "layers": len(layers),
            "heads_per_layer": sizes["heads"],
            "neurons_per_layer": sizes["intermediate"],
            "channels": sizes["hidden"],
        },
        "of": {
            "layers": len(scores["block"]),
            "heads_per_layer": scores["heads"].shape[1],
            "neurons_per_layer": scores["neurons"].shape[1],
            "channels": len(scores["channels"]),
        },
    }


def copy_pruned(teacher, student, kept: dict) -> list[str]:
    """Copy into ``student`` the teacher's tensors cut to the indices ``kept`` (a ``plan``); returns the student
    tensors left as they were (no teacher counterpart that cuts to their shape), which should be none."""
    t_sd, hidden = teacher.state_dict(), teacher.config.hidden_size
    d = hidden // teacher.config.num_attention_heads
    channels = torch.tensor(kept["channels"])
    per_layer = [
        {
            "heads": torch.tensor([h * d + j for h in hs for j in range(d)], dtype=torch.long),
            "neurons": torch.tensor(ns, dtype=torch.long),
            "channels": channels,
        }
        for hs, ns in zip(kept["heads"], kept["neurons"], strict=True)
    ]
    left = []
    with torch.no_grad():
        for name, p in student.state_dict().items():
            m = LAYER_KEY.search(name)
            src = name if m is None else f"{name[: m.start(2)]}{kept['layers'][int(m[2])] - 1}{name[m.end(2) :]}"
            t = t_sd.get(src)
            rules = IN_LAYER.get(name[m.end() :], ()) if m else ()
            index = per_layer[int(m[2])] if m else {"channels": channels}
            x = t
            for dim in range(t.dim() if t is not None else 0):
                kind = (
                    rules[dim]
                    if dim < len(rules)
                    else None
                    if p.shape[dim] == t.shape[dim]
                    else "channels"
                    if t.shape[dim] == hidden
                    else None
                )
                if kind is not None:
                    x = x.index_select(dim, index[kind])
            if x is None or x.shape != p.shape:
                left.append(name)
                continue
            p.copy_(x)
    return left


def summary(kept: dict) -> str:
    k, o = kept["kept"], kept["of"]
    return (
        f"init prune ({kept['layer_rule']}, {kept['samples']} examples): layers {kept['layers']} of "
        f"{o['layers']}, {k['heads_per_layer']}/{o['heads_per_layer']} heads and {k['neurons_per_layer']}/"
        f"{o['neurons_per_layer']} FFN neurons per layer, {k['channels']}/{o['channels']} hidden channels"
    )
