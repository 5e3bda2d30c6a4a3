"""Outcome-aware, asymmetric token weights of GEAR (spec GEAR.md, step 5)."""

from __future__ import annotations

import torch

from .gigpo import step_index_from_mask
from .segments import _as, resolve_mode, segment_signal

WEIGHT_NORMS = ("mean", "none")


def gear_token_weights(
    kl: torch.Tensor,
    entropy: torch.Tensor,
    mask: torch.Tensor,
    advantages: torch.Tensor,
    *,
    mode: str = "gear",
    alpha: float = 1.0,
    eps: float = 0.5,
    lam: float = 1.0,
    weight_norm: str = "mean",
    **segment_kwargs,
) -> torch.Tensor:
    """Multiplicative per-token weights ``w_t`` for the trajectory advantage.

    ``w_t = (1 - lam) + lam * clamp(exp(-sign(A_i) * alpha * s_t), 1 - eps, 1 + eps)``
    with ``s_t`` from :func:`segment_signal`: high-signal tokens are down-weighted
    in completions with positive advantage and up-weighted in those with negative
    advantage. With ``weight_norm="mean"`` each row is divided by its mean over
    masked tokens, so ``sum_t A_i * w_t = A_i * n_masked``: the trajectory
    advantage is redistributed, not changed.

    Args:
        kl: [B, T] float, reverse KL per completion token.
        entropy: [B, T] float, student entropy per completion token.
        mask: [B, T] bool (or 0/1), True at model-written, non-padding tokens.
        advantages: [B] float, trajectory-level advantage ``A_i``.
        mode: credit mode (see :data:`CREDIT_MODES`); ``"none"`` and ``"gigpo"``
            give weight 1 at every masked token.
        alpha: signal scale, >= 0.
        eps: clip half-width, in [0, 1).
        lam: blend between 1 (``lam=0``) and the clipped weight (``lam=1``).
        weight_norm: ``"mean"`` (renormalize per row) or ``"none"``.
        **segment_kwargs: passed to :func:`segment_signal` (onset_threshold,
            entropy_threshold, turn_starts, fixed_segment_len, max_segment_len,
            normalize).

    Returns:
        [B, T] float32 weights on the device of ``kl``; 0 at masked-out
        positions, 1 at masked positions when ``A_i == 0``; a fully masked row is
        all zeros.
    """
    if alpha < 0:
        raise ValueError(f"alpha must be >= 0; got {alpha}.")
    if not 0 <= eps < 1:
        raise ValueError(f"eps must be in [0, 1); got {eps}.")
    if not 0 <= lam <= 1:
        raise ValueError(f"lam must be in [0, 1]; got {lam}.")
    if weight_norm not in WEIGHT_NORMS:
        raise ValueError(f"weight_norm must be one of {WEIGHT_NORMS}; got {weight_norm!r}.")
    if kl.dim() != 2:
        raise ValueError(f"kl must be [B, T]; got shape {tuple(kl.shape)}.")
    if mask.shape != kl.shape:
        raise ValueError(f"mask must have the shape of kl {tuple(kl.shape)}; got {tuple(mask.shape)}.")
    if advantages.shape != kl.shape[:1]:
        raise ValueError(f"advantages must be [B] = {tuple(kl.shape[:1])}; got {tuple(advantages.shape)}.")

    if resolve_mode(mode) == "none":
        # Plain GRPO: skip the signal so the loss is exactly GRPOTrainer's.
        return mask.to(device=kl.device, dtype=torch.float32)
    signal, _ = segment_signal(kl, entropy, mask, mode=mode, **segment_kwargs)
    return weights_from_signal(signal, mask, advantages, alpha=alpha, eps=eps, lam=lam, weight_norm=weight_norm)


def weights_from_signal(
    signal: torch.Tensor,
    mask: torch.Tensor,
    advantages: torch.Tensor,
    *,
    alpha: float = 1.0,
    eps: float = 0.5,
    lam: float = 1.0,
    weight_norm: str = "mean",
) -> torch.Tensor:
    """Step 5 alone: weights from a signal already computed by :func:`segment_signal`.

    Lets a caller that also needs the segments (for metrics) scan once. Same formula and
    normalization as :func:`gear_token_weights`.

    With [B, T] advantages (GiGPO's, constant over each step), ``weight_norm="mean"``
    divides each step, a maximal run of masked tokens (:func:`step_index_from_mask`),
    by its own mean, so ``sum_t A_t * w_t`` is unchanged within every step and hence
    over the completion (GEAR.md step 5); one mean over the whole row would move
    advantage between steps whose advantages differ.

    Args:
        signal: [B, T] float, ``s_t`` (0 at masked-out positions).
        mask: [B, T] bool (or 0/1), model-written tokens.
        advantages: [B] float, ``A_i``; or [B, T] float per-token advantages (GiGPO's
            step-level ones), whose sign is then taken token by token.

    Returns:
        [B, T] float32 weights; 0 at masked-out positions.
    """
    mask_f = mask.to(device=signal.device, dtype=torch.float32)
    sign = _as(advantages, torch.float32, signal.device).sign()
    if sign.dim() == 1:
        sign = sign.unsqueeze(1)
    # alpha = 1 and lam = 1 (the defaults) leave out the operators that would multiply by 1 and add 0: the same values,
    # exactly (the clipped weight is > 0), in fewer launches on a GPU.
    exponent = -sign * alpha if alpha != 1 else -sign
    clipped = torch.exp(exponent * signal).clamp(1 - eps, 1 + eps)
    weights = ((1 - lam) + lam * clipped if lam != 1 else clipped) * mask_f

    if weight_norm == "mean":
        # Weights are >= (1 - lam) + lam * (1 - eps) > 0, so only an empty row (or step)
        # has mean 0; it stays all zeros.
        if advantages.dim() == 1:
            n_masked = mask_f.sum(dim=1, keepdim=True)
            mean = weights.sum(dim=1, keepdim=True) / n_masked.clamp_min(1)
        else:
            mean = _step_means(weights, mask_f, step_index_from_mask(mask.to(signal.device)))
        weights = weights / torch.where(mean > 0, mean, 1.0)
    return weights


def _step_means(weights: torch.Tensor, mask_f: torch.Tensor, step_index: torch.Tensor) -> torch.Tensor:
    """[B, T]: at each position, the mean of ``weights`` over the masked tokens of its step (``step_index``, -1
    outside steps, where the value is irrelevant: the weight there is 0)."""
    index = step_index.clamp_min(0)
    # A row has at most T steps: T slots a row need no count of them first (no `.item()`, no wait for a device).
    slots = max(weights.shape[1], 1)
    sums = weights.new_zeros(weights.shape[0], slots).scatter_add(1, index, weights * mask_f)
    counts = weights.new_zeros(weights.shape[0], slots).scatter_add(1, index, mask_f)
    return (sums / counts.clamp_min(1)).gather(1, index)


def spare_failed_prefix(
    weights: torch.Tensor,
    segment_ids: torch.Tensor,
    mask: torch.Tensor,
    advantages: torch.Tensor,
    prefix_weight: float,
) -> torch.Tensor:
    """Lower the weight of a failed completion's tokens before its first segment (not in the GEAR paper).

    In a completion with negative advantage, the model tokens before its first segment (the first onset, where the
    teacher first disagrees; :func:`failed_prefix_mask`) are multiplied by ``prefix_weight``; every other position
    (padding included), and every completion with advantage >= 0 or with no segment at all, keeps its weight.
    Applied after :func:`weights_from_signal`'s ``weight_norm``, so the blame taken off the prefix is dropped, not
    moved onto the rest of the completion: the horizon study's label oracles found that moving it (a mean-1
    rescale) is what made sparing the prefix hurt (docs/results/horizon.md). ``prefix_weight=1`` returns ``weights``
    unchanged (the paper's GEAR).

    Args:
        weights: [B, T] float, token weights (0 at masked-out positions).
        segment_ids: [B, T] long, -1 outside segments (:func:`segment_signal`).
        mask: [B, T] bool (or 0/1), model-written tokens.
        advantages: [B] float, trajectory-level advantage ``A_i``.
        prefix_weight: in [0, 1].

    Returns:
        [B, T] float weights, the dtype and device of ``weights``.
    """
    if not 0 <= prefix_weight <= 1:
        raise ValueError(f"prefix_weight must be in [0, 1]; got {prefix_weight}.")
    if advantages.dim() != 1 or advantages.shape[0] != weights.shape[0]:
        raise ValueError(
            f"advantages must be [B] = {tuple(weights.shape[:1])} (trajectory-level); got {tuple(advantages.shape)}."
        )
    if segment_ids.shape != weights.shape or mask.shape != weights.shape:
        raise ValueError(
            f"segment_ids and mask must have the shape of weights {tuple(weights.shape)}; got "
            f"{tuple(segment_ids.shape)} and {tuple(mask.shape)}."
        )
    if prefix_weight == 1:
        return weights
    spared = failed_prefix_mask(segment_ids, mask, advantages).to(weights.device)
    return torch.where(spared, weights * prefix_weight, weights)


def failed_prefix_mask(segment_ids: torch.Tensor, mask: torch.Tensor, advantages: torch.Tensor) -> torch.Tensor:
    """The tokens :func:`spare_failed_prefix` scales: a failed completion's model tokens before its first segment.

    Args:
        segment_ids: [B, T] long, -1 outside segments (:func:`segment_signal`).
        mask: [B, T] bool (or 0/1), model-written tokens.
        advantages: [B] float, trajectory-level advantage ``A_i``; a completion fails where it is < 0.

    Returns:
        [B, T] bool on ``segment_ids``'s device: True at model tokens before the first segment token of a row with
        advantage < 0 and at least one segment; False everywhere else (passed rows, rows without a segment, the
        segment tokens and everything after them, padding).
    """
    device = segment_ids.device
    model = mask.to(device=device, dtype=torch.bool)
    in_segment = (segment_ids >= 0) & model
    # before_first[b, t]: no segment token at or before t in row b; a row without segments is all True.
    before_first = in_segment.long().cumsum(dim=1) == 0
    has_segment = in_segment.any(dim=1, keepdim=True)
    failed = (advantages.detach().to(device) < 0)[:, None]
    return before_first & has_segment & failed & model
