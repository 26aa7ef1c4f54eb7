"""Distillation losses: plain functions the methods (``methods/``) combine. Every function returns a scalar tensor.

The soft loss and how α, β weigh the terms: the loss convention in docs/methods.md ("The loss convention");
``config.LOSS_CONVENTION`` logs its short form with every run.

Shapes: B batch, T tokens, C classes, H hidden, A attention heads; ``mask``/``attention_mask`` is [B, T] with 1 for
real tokens and 0 for padding. Teacher tensors are constants: compute them under ``torch.no_grad()``.
Intermediate losses are per layer; the caller combines mapped layers (TinyBERT sums them, Patient-KD averages
inside ``pkd_patient``).

Under DDP the caller passes ``world`` (the number of ranks, default 1) to every function that takes it: a mean whose
count varies per example — real tokens, real query×key pairs, labelled tokens; sequences too (MiniLM's per-sequence
relation mean), should ranks ever hold unequal slices — then divides this rank's sum by the count over every rank ÷
``world``, so the gradient DDP averages is that of the mean over the global batch, as one worker would compute it.
With ``world`` > 1 every rank must compute the same losses in the same order: each such mean all-reduces its count
once. The other means (over the batch's examples or all elements) are per rank: the loop's equal slices (drop-last)
make them global.
"""

from __future__ import annotations

import math

import torch
import torch.distributed as dist
import torch.nn.functional as F

from raydistill.common.errors import check


def _mean(total: torch.Tensor, count: torch.Tensor, world: int = 1) -> torch.Tensor:
    """``total / count``; with ``world`` > 1 ranks, ``count`` is summed over the ranks and divided by their number
    (per-rank means would weigh a token by 1 / its own rank's count)."""
    if world > 1:
        count = count.detach().clone()
        dist.all_reduce(count)
        return total / (count.clamp_min(1) / world)
    return total / count.clamp_min(1)


def _masked_mean(x: torch.Tensor, mask: torch.Tensor | None, world: int = 1) -> torch.Tensor:
    """Mean of ``x`` [B, T, …] over the positions where ``mask`` [B, T] is 1 (all elements when mask is None)."""
    if mask is None:
        return x.mean()
    m = mask.to(x.dtype).reshape(*mask.shape, *([1] * (x.dim() - mask.dim()))).expand_as(x)
    return _mean((x * m).sum(), m.sum(), world)


def _ce(logits: torch.Tensor, labels: torch.Tensor, ignore_index: int = -100, world: int = 1) -> torch.Tensor:
    """Cross-entropy averaged over the labels that are not ``ignore_index`` (their number varies per batch)."""
    total = F.cross_entropy(logits, labels, ignore_index=ignore_index, reduction="sum")
    return _mean(total, (labels != ignore_index).sum(), world)


def soft_ce(student_logits, teacher_logits, T: float, mask=None, *, world: int = 1):
    """T² · Σ_c p_t,c (log p_t,c − log p_s,c), p = softmax(z/T); mean over the batch ([B, C]) or over real tokens
    ([B, T, C] with ``mask`` [B, T]). This is the KL form: soft cross-entropy minus the teacher's entropy, which has
    the same gradient but is 0 when student = teacher."""
    log_ps = F.log_softmax(student_logits.float() / T, dim=-1)
    log_pt = F.log_softmax(teacher_logits.float() / T, dim=-1)
    kl = (log_pt.exp() * (log_pt - log_ps)).sum(-1)  # [B] or [B, T]
    return T * T * _masked_mean(kl, mask, world)


def hard_loss(kind: str, logits_or_outputs, batch: dict, *, world: int = 1):
    """Gold-label loss over the rows that have one: classification CE(z, y) over labels that are not −100; regression
    mean (z − y)² over labels that are not NaN (augmented copies carry neither); token CE over tokens whose label is
    not −100; qa (CE(start) + CE(end)) / 2 with out-of-range positions ignored (as Hugging Face does); mlm =
    ``mlm_loss``. ``logits_or_outputs`` is a model output, a logits tensor, or (start_logits, end_logits) for qa."""
    out = logits_or_outputs
    if kind == "qa":
        start, end = (out.start_logits, out.end_logits) if hasattr(out, "start_logits") else out
        ignored = start.size(1)
        sp, ep = batch["start_positions"].clamp(0, ignored), batch["end_positions"].clamp(0, ignored)
        return (_ce(start.float(), sp, ignored, world) + _ce(end.float(), ep, ignored, world)) / 2
    logits = (out.logits if hasattr(out, "logits") else out).float()
    labels = batch["labels"]
    if kind == "classification":
        return _ce(logits, labels, world=world)
    if kind == "regression":
        y = labels.float().reshape(-1)
        has = ~torch.isnan(y)
        return _mean(torch.where(has, logits.reshape(-1) - y, 0.0).pow(2).sum(), has.sum(), world)
    if kind in ("token", "mlm"):
        return _ce(logits.reshape(-1, logits.size(-1)), labels.reshape(-1), world=world)
    raise ValueError(f"unknown task kind {kind!r}")


def logit_mse(student_logits, teacher_logits, mask=None, *, world: int = 1):
    """mean (z_s − z_t)² over all logits ([B, C]) or over the logits of real tokens ([B, T, C] with ``mask``)."""
    return _masked_mean((student_logits.float() - teacher_logits.float()) ** 2, mask, world)


def qa_logit_mse(s_start, s_end, t_start, t_end, mask=None, *, world: int = 1):
    """(MSE(start) + MSE(end)) / 2 on [B, T] span logits, each averaged over positions where ``mask`` is 1 (padding
    logits are often −inf-like and must not count)."""
    return (
        _masked_mean((s_start.float() - t_start.float()) ** 2, mask, world)
        + _masked_mean((s_end.float() - t_end.float()) ** 2, mask, world)
    ) / 2


def regression_mse(student, teacher):
    """mean (y_s − y_t)² over the batch (STS-B prediction distillation); [B] or [B, 1]."""
    return F.mse_loss(student.float().reshape(-1), teacher.float().reshape(-1))


def _project(h, proj):
    if proj is None:
        return h
    return h @ proj if isinstance(proj, torch.Tensor) else proj(h)


def hidden_mse(student_h, teacher_h, proj=None, mask=None, *, world: int = 1):
    """TinyBERT: mean over all elements of (h_s W − h_t)², h [B, T, H]; ``proj`` is W [H_s, H_t] or a module
    (e.g. ``nn.Linear``) mapping the student width to the teacher's; ``mask`` [B, T] restricts the mean to real
    tokens (TinyBERT itself averages over padding too: pass mask=None to match it)."""
    hs = _project(student_h, proj)
    check(
        hs.shape == teacher_h.shape,
        "student.hidden",
        f"student states {tuple(hs.shape)} vs teacher {tuple(teacher_h.shape)}: give a projection to the teacher width",
    )
    return _masked_mean((hs.float() - teacher_h.float()) ** 2, mask, world)


embedding_mse = hidden_mse  # same formula on the embedding outputs (hidden_states[0])


def attention_mse(s_scores, t_scores, attention_mask=None, *, world: int = 1):
    """TinyBERT: mean of (S_s − S_t)² over the pre-softmax scores S [B, A, T, T] of every head, over (real query,
    real key) pairs when ``attention_mask`` [B, T] is given, else over all elements. (TinyBERT zeroes padding-key
    columns — it adds the −10000 mask, then zeroes entries ≤ −100 — but keeps padded query rows, which with dynamic
    padding would make an example's loss depend on its batch.) Needs equal head counts; the run config refuses
    student.heads ≠ teacher heads before training."""
    check(
        s_scores.shape == t_scores.shape,
        "student.heads",
        f"student scores {tuple(s_scores.shape)} vs teacher {tuple(t_scores.shape)}: TinyBERT's attention loss needs "
        "the teacher's number of heads",
    )
    sq = (s_scores.float() - t_scores.float()) ** 2
    if attention_mask is None:
        return sq.mean()
    m = attention_mask.bool()
    keep = (m[:, None, :, None] & m[:, None, None, :]).expand_as(sq)  # real query × real key
    return _mean(sq.masked_fill(~keep, 0.0).sum(), keep.sum(), world)


def cosine_hidden(student_h, teacher_h, attention_mask=None, *, world: int = 1):
    """DistilBERT: mean over real tokens of 1 − cos(h_s, h_t) (CosineEmbeddingLoss with target 1), h [B, T, H]."""
    check(
        student_h.shape[-1] == teacher_h.shape[-1],
        "student.hidden",
        "the cosine loss compares hidden states directly, so the student needs the teacher's hidden size",
    )
    cos = F.cosine_similarity(student_h.float(), teacher_h.float(), dim=-1)  # [B, T]
    return _masked_mean(1.0 - cos, attention_mask, world)


def pkd_patient(student_cls_list, teacher_cls_list):
    """Patient-KD: mean over K mapped layers, B examples and H dims of (ĥ_s − ĥ_t)², ĥ = h_[CLS] / ‖h_[CLS]‖₂.

    Same as the reference ``F.mse_loss`` on normalised [B, K, H] stacks, i.e. the per-layer mean MSE averaged over
    layers — the scale the paper's β ∈ {10 … 1000} is meant for. Inputs: lists of K tensors [B, H]."""
    check(
        len(student_cls_list) == len(teacher_cls_list) > 0,
        "distill.mapping",
        f"{len(student_cls_list)} student vs {len(teacher_cls_list)} teacher layers for the patient loss",
    )
    s = F.normalize(torch.stack([x.float() for x in student_cls_list], 1), p=2, dim=-1)
    t = F.normalize(torch.stack([x.float() for x in teacher_cls_list], 1), p=2, dim=-1)
    return F.mse_loss(s, t)


def concat_heads(x: torch.Tensor) -> torch.Tensor:
    """[B, A, T, d] per-head queries/keys/values (as attention receives them) → [B, T, A·d], heads side by side."""
    return x.transpose(1, 2).reshape(x.size(0), x.size(2), -1)


def _relation_logp(a: torch.Tensor, b: torch.Tensor, heads: int, mask, who: str) -> torch.Tensor:
    """log softmax(a_r b_rᵀ / √d_r) over the real keys, per relation head r: a, b [B, T, H] → [B, heads, T, T]."""
    bsz, t, h = a.shape
    check(
        h % heads == 0,
        "distill.relation_heads",
        f"{heads} relation heads do not divide the {who}'s width {h}; pick a number that divides both widths",
    )
    d = h // heads
    a = a.float().reshape(bsz, t, heads, d).transpose(1, 2)
    b = b.float().reshape(bsz, t, heads, d).transpose(1, 2)
    scores = a @ b.transpose(-1, -2) / math.sqrt(d)
    if mask is not None:  # a large finite negative, not -inf: exp gives 0 and 0·(log p_t − log p_s) stays 0, not NaN
        scores = scores.masked_fill(~mask.bool()[:, None, None, :], -1e9)
    return F.log_softmax(scores, dim=-1)


def relation_kl(s_a, s_b, t_a, t_b, heads: int, mask=None, per: str = "sequence", *, world: int = 1):
    """MiniLM / MiniLMv2 self-attention relation loss. Each input is a [B, T, H] set of vectors with the attention
    heads side by side (``concat_heads``); it is split into ``heads`` relation heads of width d_r = H / heads, and
    R = softmax(x_a x_bᵀ / √d_r) over the real keys. Returns KL(R_t ‖ R_s) summed over keys and averaged over relation
    heads and real queries: ``per="sequence"`` (the papers' 1/(A_r·|x|) Σ_r Σ_t KL per sequence x, then the batch
    mean, as the public MiniLMv2 code does) or ``per="query"`` (every real query of the batch weighs the same, so
    long sequences weigh more). Student and teacher widths may differ (each has its own d_r).
    MiniLM v1 with the model's own heads: (Q, K) is the attention distribution, (V, V) the value relation;
    MiniLMv2: (Q, Q), (K, K), (V, V) with any number of relation heads dividing both widths."""
    check(per in ("sequence", "query"), "distill.relation_mean", f"must be sequence or query, got {per!r}")
    log_s = _relation_logp(s_a, s_b, heads, mask, "student")
    log_t = _relation_logp(t_a, t_b, heads, mask, "teacher")
    kl = (log_t.exp() * (log_t - log_s)).sum(-1).mean(1)  # [B, T]: summed over keys, averaged over relation heads
    if per == "query":
        return _masked_mean(kl, mask, world)
    if mask is None:
        return kl.mean()
    m = mask.to(kl.dtype)
    per_seq = (kl * m).sum(1) / m.sum(1).clamp_min(1)  # [B]: each sequence's mean over its real queries
    return _mean(per_seq.sum(), torch.tensor(float(per_seq.numel()), device=kl.device), world)  # global batch mean


def mlm_loss(logits, labels, *, world: int = 1):
    """Masked-LM cross-entropy over positions whose label is not −100; logits [B, T, V], labels [B, T]."""
    return _ce(logits.float().reshape(-1, logits.size(-1)), labels.reshape(-1), world=world)
