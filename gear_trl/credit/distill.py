"""`distillation_weight` (not in the GEAR paper): GEAR's advantage blended with the teacher's sampled-token log-ratio.

SDPO (Hübotter et al. 2026, arXiv 2601.20802) distils a self-teacher, the policy shown what it did not know, back
into the policy. Its sampled-token form (TRL's `SDPOTrainer`, `distillation_mode="sampled_token"`) is the per-token
loss ``(log pS(y_t) - log pT(y_t)).detach() * log pS(y_t)``, whose gradient is ``-delta_t * grad log pS(y_t)`` with
``delta_t = log pT(y_t) - log pS(y_t)``: a policy gradient whose advantage is ``delta_t``. Written as an advantage it
joins GRPO's in GRPO's own loss: ``(1 - w) * A_t + w * delta_t`` gives on policy (importance ratio 1) with
``loss_type="grpo"`` the gradient of TRL's ``(1 - w) * policy_loss + w * distillation_loss``; under a token-level
aggregation (``dapo``) the term is aggregated as the policy term is, where TRL's averages it per sequence
(tests/test_credit_distill.py).

Every weighting GEAR has scales a rollout's one advantage by a weight >= 0, so a failed rollout's right decision is
blamed, at best less. The log-ratio has a sign per token: where the teacher, which sees the reference, gives the
sampled token more probability than the student, ``delta_t > 0`` whatever the rollout's outcome. That per-decision
sign is what the one ceiling the horizon study measured above GRPO, `oracle-process`, has
(docs/results/horizon.md).
"""

from __future__ import annotations

import math

import torch

DISTILLATION_SIGNALS = ("log_ratio", "agreement")
"""`distillation_signal`: the dense term `distillation_weight` blends in (`log_ratio` is SDPO's)."""


def _per_token(advantages: torch.Tensor, log_ratio: torch.Tensor) -> torch.Tensor:
    """[B] or [B, T] advantages as [B, T] float32 on `log_ratio`'s device, detached."""
    base = advantages.detach().to(device=log_ratio.device, dtype=torch.float32)
    return base[:, None].expand(log_ratio.shape) if base.dim() == 1 else base


def distill_advantages(
    advantages: torch.Tensor,
    log_ratio: torch.Tensor,
    mask: torch.Tensor,
    weight: float,
    valid: torch.Tensor | None = None,
) -> torch.Tensor:
    """``(1 - w) * A_t + w * delta_t`` on the model tokens of rows with a teacher; ``A_t`` elsewhere.

    Args:
        advantages: [B] float per rollout, or [B, T] per token (GEAR's ``A_i * w_t``).
        log_ratio: [B, T] float, ``delta_t = log pT(y_t) - log pS(y_t)`` of the sampled token (no gradient flows).
        mask: [B, T] bool (or 0/1), model-written tokens.
        weight: ``w`` in [0, 1]; 0 returns the advantages unchanged (as [B, T]), 1 is pure distillation.
        valid: optional [B] bool, rows with a teacher (a reference); other rows keep ``A_t`` (plain GRPO's fallback
            for a row without ground truth, whose teacher prompt is the student's). Default: every row.

    Returns:
        [B, T] float32.
    """
    if log_ratio.dim() != 2 or mask.shape != log_ratio.shape:
        raise ValueError(
            f"log_ratio and mask must both be [B, T]; got {tuple(log_ratio.shape)} and {tuple(mask.shape)}."
        )
    if advantages.shape not in (log_ratio.shape[:1], log_ratio.shape):
        raise ValueError(
            f"advantages must be [B] or [B, T] with [B, T] = {tuple(log_ratio.shape)}; got {tuple(advantages.shape)}."
        )
    if not 0.0 <= weight <= 1.0:
        raise ValueError(f"weight must be in [0, 1]; got {weight}.")
    device = log_ratio.device
    base = _per_token(advantages, log_ratio)
    blend = (1.0 - weight) * base + weight * log_ratio.detach().float()
    keep = mask.to(device=device, dtype=torch.bool)
    if valid is not None:
        keep = keep & valid.to(device=device, dtype=torch.bool)[:, None]
    return torch.where(keep, blend, base)


def distillation_share(
    advantages: torch.Tensor, log_ratio: torch.Tensor, mask: torch.Tensor, weight: float, valid: torch.Tensor
) -> torch.Tensor:
    """Sums for ``gear/distill_share``: over model tokens of rows with a teacher, ``sum |w * delta_t|`` and
    ``sum |(1 - w) * A_t| + sum |w * delta_t|``, so the share of the loss's advantage mass the distillation term
    holds reduces across ranks (0 with ``w = 0``; near 1 where groups have no mixed outcomes).

    Args: as `distill_advantages` (``valid`` required).

    Returns:
        [2] float32: (distillation mass, total mass).
    """
    device = log_ratio.device
    base = _per_token(advantages, log_ratio)
    keep = (mask.to(device=device, dtype=torch.bool) & valid.to(device=device, dtype=torch.bool)[:, None]).float()
    dense = (weight * log_ratio.detach().float()).abs().mul(keep).sum()
    outcome = ((1.0 - weight) * base).abs().mul(keep).sum()
    return torch.stack([dense, dense + outcome])


def agreement_advantages(
    teacher_prob: torch.Tensor, expected: torch.Tensor, mask: torch.Tensor, group_size: int
) -> torch.Tensor:
    """`distillation_signal: agreement` (this library's, not SDPO's or GEAR's): per model token,
    ``clip((pT(y_t) - b_t) / sqrt(b_t (1 - b_t)), -c, c)`` with ``b_t = sum_v pS(v) pT(v)``, the teacher's probability
    of a token the student would sample there, and ``c = (G - 1) / sqrt(G)``.

    Why this shape: if the teacher puts all its mass on one right token r, ``pT(y_t)`` is 1 where the sampled token is
    r and 0 elsewhere, ``b_t = pS(r)``, and the value is that token's correctness minus its mean over the student's
    samples, divided by its standard deviation: GRPO's group normalization of a binary outcome with infinitely many
    rollouts, per token, which is the shape of the horizon study's `oracle-process` ceiling (each decision's
    correctness normalized over its group). Its mean under the student is 0 for any teacher. Unlike the log-ratio it
    is bounded: ``c`` is the largest advantage GRPO's normalization gives with G rollouts (one success among G, the
    sample standard deviation), so no token's push exceeds what the outcome reward can give. Where ``b_t (1 - b_t)``
    is 0 (the student sure of a token the teacher is sure of, or sure of one it rules out) the value is 0: nothing to
    normalize by, and GRPO gives a group whose rollouts all agree 0 too.

    Args:
        teacher_prob: [B, T] float, ``pT(y_t)`` of the sampled token, in [0, 1].
        expected: [B, T] float, ``b_t = sum_v pS(v) pT(v)``, in [0, 1].
        mask: [B, T] bool (or 0/1), model-written tokens.
        group_size: G >= 2, the rollouts per prompt (`num_generations`).

    Returns:
        [B, T] float32, in [-c, c], 0 off the mask.
    """
    if teacher_prob.dim() != 2 or expected.shape != teacher_prob.shape or mask.shape != teacher_prob.shape:
        raise ValueError(
            f"teacher_prob, expected and mask must all be [B, T]; got {tuple(teacher_prob.shape)}, "
            f"{tuple(expected.shape)}, {tuple(mask.shape)}."
        )
    if group_size < 2:
        raise ValueError(f"group_size must be >= 2; got {group_size}.")
    bound = (group_size - 1) / math.sqrt(group_size)
    p = teacher_prob.detach().float().clamp(0.0, 1.0)
    b = expected.detach().to(p).clamp(0.0, 1.0)
    var = b * (1.0 - b)
    keep = mask.to(device=p.device, dtype=torch.bool) & (var > 1e-12)
    value = ((p - b) / var.clamp_min(1e-12).sqrt()).clamp(-bound, bound)
    return torch.where(keep, value, torch.zeros_like(value))
