"""Unpadded (packed) forwards: the linear layers and the feed-forward blocks see only the batch's real tokens.

A right-padded batch ``[B, T]`` becomes one row ``[1, N]`` of its N real tokens, with each sequence's own position
ids and the standard varlen keyword arguments of transformers (``cu_seq_lens_q/k``, ``max_length_q/k``), which the
model hands to every attention call:

- a model loaded with a flash-attention implementation runs the library's varlen kernel on them, no padding at all;
- every other model runs ``PACKED_IMPL``: each attention call scatters its queries, keys and values back to
  ``[B, heads, T, d]`` and runs PyTorch sdpa with the padding mask, exactly the padded computation (CPU included);
  called without the varlen arguments (scoring, a padded stage) it is plain sdpa.

A forward hook on the encoder scatters its output back to ``[B, T, H]`` before the pooler and the task head, so the
[CLS] logits, token logits and spans come out in the padded layout; ``packed_forward`` does the same for the hidden
states it returns. Pad positions hold zeros instead of the padded path's values, which no loss reads (losses mask
pads). Attention scores are never materialised here: methods that read them (TinyBERT's attention loss, MiniLM's
relations) keep the padded path.

    prepare(student)                       # once: the implementation and the encoder hook
    out = packed_forward(student, batch, hidden_states=True)
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from transformers import AttentionInterface
from transformers.integrations.sdpa_attention import sdpa_attention_forward
from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

PACKED_IMPL = "raydistill_packed"


@dataclass(frozen=True)
class Layout:
    """Where a padded batch's real tokens sit: ``keep`` [B, T] (True = real), and the varlen arguments."""

    keep: torch.Tensor
    cu_seqlens: torch.Tensor  # int32 [B + 1]: sequence starts in the packed row, then N
    max_len: int

    @classmethod
    def of(cls, attention_mask: torch.Tensor) -> Layout:
        keep = attention_mask.bool()
        lengths = keep.sum(1, dtype=torch.int32)
        cu = torch.nn.functional.pad(lengths.cumsum(0, dtype=torch.int32), (1, 0))
        return cls(keep, cu, int(keep.shape[1]))

    def kwargs(self) -> dict:
        """The varlen keyword arguments that transformers hands to each attention call."""
        return {
            "cu_seq_lens_q": self.cu_seqlens,
            "cu_seq_lens_k": self.cu_seqlens,
            "max_length_q": self.max_len,
            "max_length_k": self.max_len,
        }

    def pad(self, packed: torch.Tensor) -> torch.Tensor:
        """``[1, N, ...]`` → ``[B, T, ...]``, zeros at pad positions."""
        return _scatter(packed[0], self.cu_seqlens, self.max_len)


def _keep_of(cu: torch.Tensor, max_len: int) -> torch.Tensor:
    lengths = cu.diff()
    return torch.arange(max_len, device=cu.device)[None, :] < lengths[:, None]


# Integer indices from the sequence starts, not boolean masks: every shape follows from the inputs' shapes, so
# torch.compile traces these without data-dependent sizes.
def _flat_index(cu: torch.Tensor, n: int, max_len: int) -> torch.Tensor:
    """Each packed token's position in the flattened ``[B * T]`` padded layout."""
    cu = cu.long()
    tokens = torch.arange(n, device=cu.device)
    # all of cu as the boundaries (cu[0] = 0 ≤ every token, hence the - 1), not the slice cu[1:]: torch 2.11's
    # Inductor cannot lower searchsorted over a sliced view (NotImplementedError: SliceView; unpadded + compile, GPU)
    row = torch.searchsorted(cu, tokens, right=True) - 1
    return row * max_len + tokens - cu[row]


def _scatter(x: torch.Tensor, cu: torch.Tensor, max_len: int) -> torch.Tensor:
    """``[N, ...]`` → ``[B, T, ...]``, zeros at pad positions."""
    b = cu.shape[0] - 1
    out = x.new_zeros((b * max_len, *x.shape[1:])).index_copy(0, _flat_index(cu, x.shape[0], max_len), x)
    return out.view(b, max_len, *x.shape[1:])


def _gather(x: torch.Tensor, cu: torch.Tensor, n: int) -> torch.Tensor:
    """``[B, T, ...]`` → ``[N, ...]``: the real tokens, in packed order."""
    return x.reshape(-1, *x.shape[2:]).index_select(0, _flat_index(cu, n, x.shape[1]))


def _packed_attention(module, query, key, value, attention_mask, dropout: float = 0.0, scaling=None, **kwargs):
    cu, max_len = kwargs.pop("cu_seq_lens_q", None), kwargs.pop("max_length_q", None)
    for k in ("cu_seq_lens_k", "max_length_k"):
        kwargs.pop(k, None)
    if cu is None:  # a padded call: plain sdpa
        return sdpa_attention_forward(
            module, query, key, value, attention_mask, dropout=dropout, scaling=scaling, **kwargs
        )
    max_len, n = int(max_len), query.shape[2]

    def pad(x):  # [1, heads, N, d] -> [B, heads, T, d]
        return _scatter(x[0].transpose(0, 1), cu, max_len).transpose(1, 2)

    mask = _keep_of(cu, max_len)[:, None, None, :]  # bool, True = attend: the padded path's padding mask
    out, _ = sdpa_attention_forward(
        module, pad(query), pad(key), pad(value), mask, dropout=dropout, scaling=scaling, **kwargs
    )
    return _gather(out, cu, n)[None], None  # [B, T, heads, d] -> [1, N, heads, d]


AttentionInterface.register(PACKED_IMPL, _packed_attention)
AttentionMaskInterface.register(PACKED_IMPL, sdpa_mask)


def _unpad_encoder_output(module, args, kwargs, output):
    cu = kwargs.get("cu_seq_lens_q")
    if cu is not None:
        output.last_hidden_state = _scatter(output.last_hidden_state[0], cu, int(kwargs["max_length_q"]))
    return output


def prepare(model) -> None:
    """Ready ``model`` (or a DDP wrapper's module) for ``packed_forward``, once: flash implementations stay (their
    varlen kernel reads the arguments), any other becomes ``PACKED_IMPL``; the encoder's output is padded back."""
    model = getattr(model, "module", model)
    if getattr(model, "_raydistill_packed", False):
        return
    if not str(model.config._attn_implementation).startswith("flash"):
        model.set_attn_implementation(PACKED_IMPL)
    model.base_model.encoder.register_forward_hook(_unpad_encoder_output, with_kwargs=True)
    model._raydistill_packed = True


def _position_offset(model) -> int:
    # RoBERTa-like embeddings number real tokens from padding_idx + 1; BERT and ELECTRA from 0
    emb = getattr(model, "module", model).base_model.embeddings
    return emb.padding_idx + 1 if hasattr(emb, "create_position_ids_from_input_ids") else 0


def packed_forward(model, inputs: dict, hidden_states: bool = False):
    """``model(**inputs)`` on the real tokens only (``prepare`` first); outputs in the padded layout."""
    layout = Layout.of(inputs["attention_mask"])
    keep = layout.keep
    positions = keep.long().cumsum(1) - 1 + _position_offset(model)
    packed = {k: v[keep][None] for k, v in inputs.items() if k != "attention_mask"}
    packed["position_ids"] = positions[keep][None]
    out = model(**packed, output_hidden_states=hidden_states, **layout.kwargs())
    if hidden_states and out.hidden_states is not None:
        n = int(layout.cu_seqlens[-1])
        out.hidden_states = tuple(layout.pad(h) if h.shape[:2] == (1, n) else h for h in out.hidden_states)
    return out
