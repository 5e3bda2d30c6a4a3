"""`credit: gear-signed` (a variant of this library, not in the GEAR paper): GEAR's signal signed by the teacher's view of the sampled token.

GEAR's reverse KL is unsigned: it cannot tell "the student left the teacher" from "the student was right but unsure
where the teacher, knowing the reference, was sure". In a rollout with positive advantage GEAR then takes credit from
exactly the tokens the teacher supports. Here each token's signal is multiplied by ``-sign(delta_t)``, ``delta_t =
log pT(y_t) - log pS(y_t)`` on the sampled token, before GEAR's weights: teacher-supported tokens (``delta > 0``) gain
credit in good rollouts and lose blame in bad ones; tokens the teacher disfavours are treated as GEAR treats them.
"""

from __future__ import annotations

import torch


def signed_signal(signal: torch.Tensor, log_ratio: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """``s'_t = -sign(delta_t) * s_t``, for `weights_from_signal` (whose weight is ``exp(-sign(A) * alpha * s)``).

    With ``delta_t > 0`` (the teacher gives the sampled token more probability than the student) the signal flips, so
    the token is up-weighted when ``A > 0`` and down-weighted when ``A < 0``; with ``delta_t < 0`` it is GEAR's own;
    with ``delta_t == 0`` it is 0 (weight 1 before rescaling).

    Args:
        signal: [B, T] float, GEAR's ``s_t`` (from `segment_signal`), >= 0.
        log_ratio: [B, T] float, ``delta_t = log pT(y_t) - log pS(y_t)``.
        mask: [B, T] bool (or 0/1), model-written tokens.

    Returns:
        [B, T] float32, 0 at masked-out positions.
    """
    if signal.dim() != 2 or log_ratio.shape != signal.shape or mask.shape != signal.shape:
        raise ValueError(
            f"signal, log_ratio and mask must all be [B, T]; got {tuple(signal.shape)}, {tuple(log_ratio.shape)}, "
            f"{tuple(mask.shape)}."
        )
    delta = log_ratio.detach().to(device=signal.device, dtype=torch.float32)
    keep = mask.to(device=signal.device, dtype=torch.bool)
    return (-delta.sign() * signal.float()).masked_fill(~keep, 0.0)


def segment_onsets(segment_ids: torch.Tensor) -> torch.Tensor:
    """[B, T] bool: the first token of each segment (ids numbered 0, 1, 2, ... left to right per row, -1 outside).

    Args:
        segment_ids: [B, T] long, as returned by `segment_signal`.
    """
    before = torch.full_like(segment_ids[:, :1], -1)
    seen = torch.cat([before, segment_ids[:, :-1].cummax(dim=1).values], dim=1) if segment_ids.shape[1] else before
    return (segment_ids >= 0) & (segment_ids > seen[:, : segment_ids.shape[1]])


def teacher_supported_onsets(
    segment_ids: torch.Tensor,
    log_ratio: torch.Tensor,
    mask: torch.Tensor,
    advantages: torch.Tensor,
    valid: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Onsets in passed rollouts (advantage > 0) and those of them where the teacher supports the sampled token.

    The numerator and denominator of ``gear/onsets_teacher_supported_frac``, as sums so they reduce across ranks:
    how often GEAR's onsets in a good rollout fall on tokens the teacher likes more than the student does, where an
    unsigned KL takes credit away from a token the teacher would reinforce.

    Args:
        segment_ids: [B, T] long, as returned by `segment_signal`.
        log_ratio: [B, T] float, ``log pT(y_t) - log pS(y_t)``.
        mask: [B, T] bool (or 0/1), model-written tokens.
        advantages: [B] float per rollout, or [B, T] per token (reduced to the row's mean over model tokens, as in
            `failure_contrast_sums`).
        valid: optional [B] bool, rows to count (those with a teacher); default all.

    Returns:
        (supported, onsets): 0-dim float32 tensors on `log_ratio`'s device.
    """
    device = log_ratio.device
    m = mask.to(device=device, dtype=torch.float32)
    advantages = advantages.detach().to(device=device, dtype=torch.float32)
    if advantages.dim() == 2:
        advantages = (advantages * m).sum(dim=1) / m.sum(dim=1).clamp(min=1)
    passed = advantages > 0
    if valid is not None:
        passed = passed & valid.to(device=device, dtype=torch.bool)
    onset = segment_onsets(segment_ids.to(device)) & passed[:, None] & m.bool()
    supported = onset & (log_ratio.detach() > 0)
    return supported.float().sum(), onset.float().sum()
