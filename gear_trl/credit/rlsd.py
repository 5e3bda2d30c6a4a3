"""RLSD's token reweighting (Reinforcement Learning with Self-Distillation, arXiv 2604.03128), for `credit: rlsd`.

RLSD is GEAR's closest relative: the same privileged teacher (the policy shown the reference), the same clipped
exponential weight on the trajectory advantage. It differs in the signal and in what it leaves out: the signed
log-ratio of the sampled token instead of a normalized, clamped KL; no segments; no rescaling of a completion's
weights to mean 1, so a completion's total advantage changes with its weights.
"""

from __future__ import annotations

import torch

RLSD_LAMBDA = 0.5
RLSD_EPS = 0.2


def rlsd_token_weights(
    log_ratio: torch.Tensor,
    mask: torch.Tensor,
    advantages: torch.Tensor,
    *,
    lam: float = RLSD_LAMBDA,
    eps: float = RLSD_EPS,
    negative_only: bool = False,
) -> torch.Tensor:
    """RLSD's multiplicative weights ``w_t = (1 - lam) + lam * clip(exp(sign(A_i) * delta_t), 1 - eps, 1 + eps)``.

    ``delta_t = log pT(y_t) - log pS(y_t)`` on the sampled token: in a completion with positive advantage, tokens the
    teacher likes more than the student get more credit; with negative advantage, tokens the teacher likes less get
    more blame. No rescaling to mean 1.

    Args:
        log_ratio: [B, T] float, ``delta_t`` (teacher minus student log-probability of the sampled token).
        mask: [B, T] bool (or 0/1), model-written tokens.
        advantages: [B] float, ``A_i``; or [B, T] per-token advantages, whose sign is then taken token by token.
        lam: blend between 1 (``lam=0``) and the clipped weight, in [0, 1].
        eps: clip half-width, in [0, 1).
        negative_only: reweight only tokens whose advantage is negative; the others keep weight 1.

    Returns:
        [B, T] float32 weights; 0 at masked-out positions, 1 where ``A == 0``.
    """
    if not 0 <= lam <= 1:
        raise ValueError(f"lam must be in [0, 1]; got {lam}.")
    if not 0 <= eps < 1:
        raise ValueError(f"eps must be in [0, 1); got {eps}.")
    if log_ratio.dim() != 2 or mask.shape != log_ratio.shape:
        raise ValueError(
            f"log_ratio and mask must both be [B, T]; got {tuple(log_ratio.shape)} and {tuple(mask.shape)}."
        )
    if advantages.shape not in (log_ratio.shape[:1], log_ratio.shape):
        raise ValueError(f"advantages must be [B] or [B, T] for log_ratio {tuple(log_ratio.shape)}.")
    delta = log_ratio.detach().float()
    sign = advantages.detach().to(device=delta.device, dtype=torch.float32).sign()
    if sign.dim() == 1:
        sign = sign.unsqueeze(1)
    if negative_only:
        sign = sign.clamp(max=0.0)
    clipped = torch.exp(sign * delta).clamp(1 - eps, 1 + eps)
    return ((1 - lam) + lam * clipped) * mask.to(device=delta.device, dtype=torch.float32)


def rlsd_lambda(lam: float, step: int, decay_steps: int | None, warmup_steps: int | None = None) -> float:
    """RLSD's blend at optimizer step ``step``: raised linearly from 0 to ``lam`` over ``warmup_steps`` (None or 0:
    no warmup), then decayed linearly to 0 over ``decay_steps`` (None or 0: constant), as RLSD's trainer schedules
    it (its published script: no warmup, decay over 60 steps)."""
    warmup = warmup_steps or 0
    if step < warmup:
        return lam * step / warmup
    if not decay_steps:
        return lam
    return lam * max(0.0, 1.0 - (step - warmup) / decay_steps)
