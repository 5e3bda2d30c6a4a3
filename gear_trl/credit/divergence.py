"""Student-teacher reverse KL and student entropy (spec GEAR.md, step 2).

Logits are never materialized for the whole batch: the LM head is applied to the
masked positions' final hidden states a chunk of positions at a time, so peak
extra memory is O(chunk_size x V) instead of O(B x T x V).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

DIVERGENCES = ("full", "topk", "sampled")


@torch.no_grad()
def reverse_kl_and_entropy(
    student_hidden: torch.Tensor,
    teacher_hidden: torch.Tensor,
    lm_head_weight: torch.Tensor,
    mask: torch.Tensor,
    *,
    temperature: float = 1.0,
    chunk_size: int = 256,
    lm_head_bias: torch.Tensor | None = None,
    divergence: str = "full",
    top_k: int = 20,
    token_ids: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Reverse KL ``D_t = KL(pS || pT)`` and student entropy ``H_t`` per token.

    ``pS = softmax(h_S W^T / tau)``, ``pT = softmax(h_T W^T / tau)``. The matmul
    runs in the LM head's dtype (an upcast copy of W would cost O(V x H));
    logits are upcast to float32 before the temperature and softmax.

    Args:
        student_hidden: [B, T, H], student final hidden states; position t
            predicts completion token t.
        teacher_hidden: [B, T, H], teacher final hidden states, aligned the same way.
        lm_head_weight: [V, H], the output embedding.
        mask: [B, T] bool (or 0/1); only these positions are computed.
        temperature: sampling temperature ``tau`` > 0.
        chunk_size: positions per LM-head chunk, >= 1.
        lm_head_bias: optional [V] bias of the LM head.
        divergence: ``"full"``: ``sum_v pS (log pS - log pT)`` clamped at 0;
            ``"topk"``: the same on the student's ``top_k`` tokens with both
            distributions renormalized over that set (``top_k`` is capped at V);
            ``"sampled"``: ``max(log pS(y_t) - log pT(y_t), 0)``, needs ``token_ids``.
        top_k: support size for ``"topk"``, >= 1.
        token_ids: [B, T] long, the sampled tokens ``y_t``; required for ``"sampled"``.

    Returns:
        kl: [B, T] float32, 0 at masked-out positions.
        entropy: [B, T] float32, full-vocabulary student entropy (every
            divergence option), 0 at masked-out positions.
    """
    if student_hidden.dim() != 3:
        raise ValueError(f"student_hidden must be [B, T, H]; got shape {tuple(student_hidden.shape)}.")
    if teacher_hidden.shape != student_hidden.shape:
        raise ValueError(
            f"teacher_hidden must match student_hidden {tuple(student_hidden.shape)}; "
            f"got {tuple(teacher_hidden.shape)}."
        )
    batch, length, hidden = student_hidden.shape
    if lm_head_weight.dim() != 2 or lm_head_weight.shape[1] != hidden:
        raise ValueError(f"lm_head_weight must be [V, {hidden}]; got shape {tuple(lm_head_weight.shape)}.")
    vocab = lm_head_weight.shape[0]
    if lm_head_bias is not None and lm_head_bias.shape != (vocab,):
        raise ValueError(f"lm_head_bias must be [{vocab}]; got shape {tuple(lm_head_bias.shape)}.")
    if mask.shape != (batch, length):
        raise ValueError(f"mask must be [{batch}, {length}]; got shape {tuple(mask.shape)}.")
    if temperature <= 0:
        raise ValueError(f"temperature must be > 0; got {temperature}.")
    if chunk_size < 1:
        raise ValueError(f"chunk_size must be >= 1; got {chunk_size}.")
    if divergence not in DIVERGENCES:
        raise ValueError(f"divergence must be one of {DIVERGENCES}; got {divergence!r}.")
    if divergence == "topk" and top_k < 1:
        raise ValueError(f"top_k must be >= 1; got {top_k}.")
    if divergence == "sampled" and (token_ids is None or token_ids.shape != (batch, length)):
        got = None if token_ids is None else tuple(token_ids.shape)
        raise ValueError(f'divergence="sampled" needs token_ids of shape [{batch}, {length}]; got {got}.')

    device = student_hidden.device
    mask = mask.to(device=device, dtype=torch.bool)
    student_rows = student_hidden[mask]
    teacher_rows = teacher_hidden[mask]
    sampled_rows = token_ids.to(device)[mask] if divergence == "sampled" else None

    # Peak extra memory is about three [chunk, V] float32 tensors (student and teacher log-probs, student probs):
    # log-softmax, the KL difference and the dot products below are done in place or as batched dots.
    kl_chunks, entropy_chunks = [], []
    for start in range(0, student_rows.shape[0], chunk_size):
        rows = slice(start, start + chunk_size)
        log_ps = _log_probs(student_rows[rows], lm_head_weight, lm_head_bias, temperature)
        log_pt = _log_probs(teacher_rows[rows], lm_head_weight, lm_head_bias, temperature)
        ps = log_ps.exp()
        entropy_chunks.append(-_row_dot(ps, log_ps))
        if divergence == "full":
            kl = _row_dot(ps, log_pt.neg_().add_(log_ps))  # log_pt now holds log_ps - log_pt
        elif divergence == "topk":
            support = log_ps.topk(min(top_k, vocab), dim=-1).indices
            log_ps_k = log_ps.gather(-1, support)
            log_pt_k = log_pt.gather(-1, support)
            log_ps_k = log_ps_k - log_ps_k.logsumexp(dim=-1, keepdim=True)
            log_pt_k = log_pt_k - log_pt_k.logsumexp(dim=-1, keepdim=True)
            kl = (log_ps_k.exp() * (log_ps_k - log_pt_k)).sum(dim=-1)
        else:
            y = sampled_rows[rows].unsqueeze(-1)
            kl = (log_ps.gather(-1, y) - log_pt.gather(-1, y)).squeeze(-1)
        del log_ps, log_pt, ps
        # Exact KL is >= 0 but rounding can dip below; the sampled estimate is
        # clamped by definition (spec step 2).
        kl_chunks.append(kl.clamp_min(0.0))

    kl_out = torch.zeros(batch, length, dtype=torch.float32, device=device)
    entropy_out = torch.zeros_like(kl_out)
    if kl_chunks:
        kl_out[mask] = torch.cat(kl_chunks)
        entropy_out[mask] = torch.cat(entropy_chunks)
    return kl_out, entropy_out


def _log_probs(
    hidden: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, temperature: float
) -> torch.Tensor:
    """[N, H] hidden states -> [N, V] float32 log-probabilities at ``temperature``, normalized in place."""
    logits = F.linear(hidden.to(weight.dtype), weight, None if bias is None else bias.to(weight.dtype)).float()
    if temperature != 1.0:
        logits.div_(temperature)
    return logits.sub_(logits.logsumexp(dim=-1, keepdim=True))


def _row_dot(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Row-wise dot product of two [N, V] tensors as a batched matmul, without an [N, V] temporary."""
    return torch.bmm(a.unsqueeze(1), b.unsqueeze(2)).view(-1)
