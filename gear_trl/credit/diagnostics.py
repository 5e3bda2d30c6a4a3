"""Label-free diagnostics: does the teacher's divergence single out the rollouts that failed?

GEAR only helps when the ground-truth-conditioned teacher disagrees with the student more where the student went
wrong. Whether it does can be measured without labels of *where* a rollout went wrong, from what every GEAR step has
anyway: the per-token reverse KL, the segments, and each rollout's advantage.

A rollout is **failed** when its mean token advantage over model tokens is negative and **passed** when it is positive
(with GRPO's group-relative advantage: its reward is below / above its group's mean; with GiGPO's per-token
advantages: the episode and step advantages it is trained with are negative / positive on net). Rollouts with mean
advantage exactly 0 (a group whose rewards are all equal) and rows left out by `valid` (no ground truth, hence no
informed teacher) count as neither.

Two functions, so that a trainer can sum over ranks between them:

- :func:`failure_contrast_sums` turns one batch into six additive sums, [6] float32;
- :func:`failure_contrast` turns (summed) sums into the ratios, each None when undefined for the batch.
"""

from __future__ import annotations

import math

import torch

SUM_NAMES: tuple[str, ...] = (
    "kl_failed",
    "tokens_failed",
    "kl_passed",
    "tokens_passed",
    "onsets_failed",
    "onsets_passed",
)


def failure_contrast_sums(
    kl: torch.Tensor,
    mask: torch.Tensor,
    segment_ids: torch.Tensor,
    advantages: torch.Tensor,
    valid: torch.Tensor | None = None,
) -> torch.Tensor:
    """Additive sums of reverse KL, model tokens and segment onsets in failed and in passed rollouts.

    Args:
        kl: [B, T] float, per-token reverse KL (student || teacher); read at model tokens only.
        mask: [B, T] bool (or 0/1), model-written tokens.
        segment_ids: [B, T] int, the segment of each token, numbered 0, 1, ... in each row, -1 outside any segment;
            a row's number of onsets is its largest id + 1.
        advantages: [B] float, one advantage per rollout; or [B, T] float per-token advantages, reduced to the
            rollout's mean over its model tokens (a row without model tokens has mean 0: neither kind).
        valid: optional [B] bool, rows to count (e.g. rows with a ground truth); default all.

    Returns:
        [6] float32 on `kl`'s device, in the order of `SUM_NAMES`: summed KL over model tokens of failed rollouts,
        their number of model tokens, the same two for passed rollouts, then the number of segment onsets in failed
        and in passed rollouts.
    """
    if kl.dim() != 2:
        raise ValueError(f"kl must be [B, T]; got shape {tuple(kl.shape)}.")
    if mask.shape != kl.shape or segment_ids.shape != kl.shape:
        raise ValueError(
            f"mask and segment_ids must have the shape of kl {tuple(kl.shape)}; got {tuple(mask.shape)} and "
            f"{tuple(segment_ids.shape)}."
        )
    if advantages.shape not in (kl.shape[:1], kl.shape):
        raise ValueError(
            f"advantages must be [B] = {tuple(kl.shape[:1])} or [B, T] = {tuple(kl.shape)}; got "
            f"{tuple(advantages.shape)}."
        )
    m = mask.to(device=kl.device, dtype=torch.float32)
    advantages = advantages.detach().to(device=kl.device, dtype=torch.float32)
    if advantages.dim() == 2:
        advantages = (advantages * m).sum(dim=1) / m.sum(dim=1).clamp(min=1)
    failed = advantages < 0
    passed = advantages > 0
    if valid is not None:
        valid = valid.to(device=kl.device, dtype=torch.bool)
        failed, passed = failed & valid, passed & valid
    kl_per_row = (kl.detach().float() * m).sum(dim=1)
    tokens_per_row = m.sum(dim=1)
    onsets_per_row = (segment_ids.to(kl.device).max(dim=1).values + 1).clamp(min=0).float()
    failed, passed = failed.float(), passed.float()
    return torch.stack(
        [
            (kl_per_row * failed).sum(),
            (tokens_per_row * failed).sum(),
            (kl_per_row * passed).sum(),
            (tokens_per_row * passed).sum(),
            (onsets_per_row * failed).sum(),
            (onsets_per_row * passed).sum(),
        ]
    )


def failure_contrast(sums: torch.Tensor | list[float]) -> dict[str, float | None]:
    """Ratios from the sums of :func:`failure_contrast_sums` (one batch, or added over ranks or batches).

    Returns:
        kl_failed_over_passed: mean per-token KL in failed rollouts / mean per-token KL in passed rollouts. Near 1:
            the teacher diverges from the student as much where it succeeded as where it failed, so GEAR's weights
            carry no information about the error and GEAR trains like GRPO (or worse). Well above 1: the teacher's
            divergence concentrates in the rollouts that went wrong. None when the batch has no failed or no passed
            model token, or no KL in passed rollouts.
        onsets_in_failed_frac: share of the segment onsets of failed and passed rollouts that lie in failed ones.
            None without any onset.
        failed_tokens_frac: share of the model tokens of failed and passed rollouts that lie in failed ones: the
            value `onsets_in_failed_frac` takes when onsets fall on tokens regardless of failure. None without any
            such token.
    """
    kl_failed, tokens_failed, kl_passed, tokens_passed, onsets_failed, onsets_passed = (
        sums.tolist() if isinstance(sums, torch.Tensor) else list(sums)
    )

    def ratio(numerator: float, denominator: float) -> float | None:
        value = numerator / denominator if denominator > 0 else None
        return value if value is not None and math.isfinite(value) else None

    kl_ratio = None
    if tokens_failed > 0 and tokens_passed > 0:
        kl_ratio = ratio(kl_failed / tokens_failed, kl_passed / tokens_passed)
    return {
        "kl_failed_over_passed": kl_ratio,
        "onsets_in_failed_frac": ratio(onsets_failed, onsets_failed + onsets_passed),
        "failed_tokens_frac": ratio(tokens_failed, tokens_failed + tokens_passed),
    }
