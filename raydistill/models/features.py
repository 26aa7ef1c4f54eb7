"""Teacher/student features for distillation, computed without waste.

Hidden states: pass ``output_hidden_states=True``; the model keeps them anyway. ``outputs.hidden_states`` is a tuple
of L+1 tensors [B, T, H]; index 0 is the embedding output, index i the output of layer i (1-based).

Attention scores (TinyBERT's attention loss needs pre-softmax scores, which fused sdpa never materialises):
``AttentionCapture`` routes only the chosen layers through an eager-style attention that keeps
``scores = (q @ kᵀ) · scaling`` (before the additive padding mask) and then finishes attention exactly like eager
(mask, softmax, dropout, @ v). Every other layer calls PyTorch sdpa with the very arguments it would get anyway. It is
done through transformers' ``AttentionInterface``: one registered implementation that dispatches per module, switched
on for the duration of a ``with`` block (no model surgery, no hooks left behind).

    with AttentionCapture(student, {1, 3}) as cap:      # 0-based layer indices
        out = student(**batch, output_hidden_states=True)
    cap.scores[3]                                        # [B, heads, T, T], differentiable in train mode

MiniLM's relations read a layer's queries, keys and values instead: ``AttentionCapture(model, (), qkv={5})`` keeps
``cap.qkv[5] = (q, k, v)``, each [B, heads, T, head_size], and lets that layer run sdpa as usual.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from transformers import AttentionInterface
from transformers.integrations.sdpa_attention import sdpa_attention_forward
from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

from raydistill.common.errors import check
from raydistill.models.encoder import encoder_layers

CAPTURE_IMPL = "raydistill_capture"
# id(self-attention module) -> (capture, 0-based layer); only modules inside an active ``with`` block are here
_ACTIVE: dict[int, tuple[AttentionCapture, int]] = {}


def _capture_attention(
    module, query, key, value, attention_mask, dropout: float = 0.0, scaling: float | None = None, **kwargs
):
    hit = _ACTIVE.get(id(module))
    if hit is not None and hit[1] in hit[0].qkv_layers:
        hit[0].qkv[hit[1]] = (query, key, value)
        hit = hit if hit[1] in hit[0].layers else None
    if hit is None:  # no scores wanted from this layer: the fused kernel, as without capture
        return sdpa_attention_forward(
            module, query, key, value, attention_mask, dropout=dropout, scaling=scaling, **kwargs
        )
    capture, layer = hit
    scaling = query.size(-1) ** -0.5 if scaling is None else scaling
    scores = torch.matmul(query, key.transpose(2, 3)) * scaling  # [B, H, Tq, Tk], pre-mask, pre-softmax
    capture.scores[layer] = scores
    weights = scores
    if attention_mask is not None:  # sdpa-style mask: bool (True = attend) or additive float
        weights = (
            scores.masked_fill(~attention_mask, torch.finfo(scores.dtype).min)
            if attention_mask.dtype == torch.bool
            else scores + attention_mask
        )
    weights = F.dropout(F.softmax(weights, dim=-1), p=dropout, training=module.training)
    return torch.matmul(weights, value).transpose(1, 2).contiguous(), weights


# masks are built exactly as for sdpa (bool or None), so the delegated layers see what plain sdpa sees
AttentionInterface.register(CAPTURE_IMPL, _capture_attention)
AttentionMaskInterface.register(CAPTURE_IMPL, sdpa_mask)


class AttentionCapture:
    """Context manager: keep pre-softmax attention scores of ``layers`` (0-based) during the forward passes inside it.

    ``scores`` maps layer → Tensor [B, heads, T, T] (the latest forward's; reset on each ``with``). Scores carry
    gradients like any activation, so a student loss on them trains the student; wrap the teacher's forward in
    ``torch.no_grad()`` as usual. Inside the block the other layers run PyTorch sdpa whatever the model's own
    implementation is (same numbers as eager); on exit the model's implementation is restored. ``qkv`` layers
    (0-based) also keep their (query, key, value) in ``qkv``. Empty ``layers`` and ``qkv`` leave the model untouched.
    Accepts a DDP/DataParallel wrapper (uses ``.module``).
    """

    def __init__(self, model, layers, qkv=()):
        self.model = getattr(model, "module", model)
        layers, qkv = set(layers), set(qkv)
        n = len(encoder_layers(self.model))
        check(
            all(isinstance(i, int) and 0 <= i < n for i in layers | qkv),
            "distill.mapping",
            f"attention layers {sorted(layers | qkv)} are outside the model's 0..{n - 1}; check the layer mapping",
        )
        self.layers, self.qkv_layers = frozenset(layers), frozenset(qkv)
        self._modules = {id(encoder_layers(self.model)[i].attention.self): i for i in layers | qkv}
        self.scores: dict[int, torch.Tensor] = {}
        self.qkv: dict[int, tuple] = {}
        self._prev = None

    def __enter__(self) -> AttentionCapture:
        self.scores, self.qkv = {}, {}
        if not self._modules:
            return self
        check(
            not any(k in _ACTIVE for k in self._modules),
            "distill.mapping",
            "this model is already inside an AttentionCapture; use one capture per model",
        )
        self._prev = self.model.config._attn_implementation
        self.model.set_attn_implementation(CAPTURE_IMPL)
        _ACTIVE.update({k: (self, i) for k, i in self._modules.items()})
        return self

    def __exit__(self, *exc) -> None:
        if not self._modules:
            return
        for k in self._modules:
            _ACTIVE.pop(k, None)
        self.model.set_attn_implementation(self._prev)


def forward_features(model, inputs: dict, attention_layers=(), hidden_states: bool = True):
    """One forward returning ``(outputs, scores)``: ``outputs.hidden_states`` when asked, ``scores`` as in
    ``AttentionCapture`` for ``attention_layers`` (0-based)."""
    with AttentionCapture(model, attention_layers) as cap:
        out = model(**inputs, output_hidden_states=hidden_states)
    return out, cap.scores
