"""`assign_credit`: the one call the trainer makes for a batch's credit, whatever the mode.

It runs the mode's record (`gear_trl.credit.modes`): the mode's ``compute`` on its declared options, the documented
fallback for rows without a teacher (plain GRPO weights), the mode's distillation term (`CreditMode.distillation`,
SDPO's under `distillation_weight` by default) and the assembled :class:`CreditTrace`. Pure tensor code: what
needs the other ranks (group signals and scales) is gathered by the trainer beforehand and arrives in the inputs.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import torch

from .credit_trace import CreditTrace
from .distill import distill_advantages
from .modes import CreditInputs, CreditMode, declared_options
from .segments import below_noise_floor

TRACE_OPTIONS = ("onset_min_kl",)
"""What the assembly itself reads: the noise floor the trace's `below_floor` marks."""


def assign_credit(
    mode: CreditMode,
    settings: Any,
    inputs: CreditInputs,
    has_truth: torch.Tensor,
    scorable: torch.Tensor | None = None,
) -> CreditTrace:
    """The per-token credit of `mode` for one batch.

    Args:
        mode: the credit mode's record.
        settings: the run's options (a `GEARConfig`); each part receives only the names it declares
            (`CreditMode.declared`, `Distillation.options`, :data:`TRACE_OPTIONS`).
        inputs: the batch's signals ([B, T] each, `CreditInputs`); its `options` is ignored and set per part.
        has_truth: [B] bool, rows with a teacher; the others get plain GRPO weights (weight 1, no segments).
        scorable: [B] bool, rows some reward function scored (None: every row); only they are distilled.

    Returns:
        A :class:`CreditTrace`: weights, segments and advantages [B, T] (`advantages` = base * weights, or the
        mode's own), and with a distillation term the blended `distilled` [B, T] the loss uses.
    """
    mask = inputs.mask
    base = inputs.base
    out = mode.compute(dataclasses.replace(inputs, options=declared_options(mode.declared, settings)))
    base_tokens = base[:, None] if base.dim() == 1 else base
    rows = has_truth[:, None]
    weights = torch.where(rows, _on(out.weights, mask.device), mask.float())
    segment_ids = torch.where(rows, _on(out.segment_ids, mask.device), -1)
    advantages = base_tokens * weights
    if out.advantages is not None:
        advantages = torch.where(rows, out.advantages.to(advantages), advantages)
    log_ratio = inputs.log_ratio
    term = None
    if mode.distillation is not None:
        # a mode whose divergence pass gives the sampled token's log pS - log pT: its term reads log pT - log pS
        seen = -inputs.kl if mode.signal == "log_ratio" else log_ratio
        candidates = has_truth if scorable is None else has_truth & scorable.to(has_truth.device)
        options = declared_options(mode.distillation.options, settings)
        term = mode.distillation.term(
            dataclasses.replace(inputs, log_ratio=seen, options=options), advantages, candidates
        )
        if term is not None:
            log_ratio = seen
    floor = declared_options(TRACE_OPTIONS, settings).onset_min_kl
    return CreditTrace(
        completion_ids=inputs.completion_ids,
        mask=mask,
        kl=inputs.kl,
        entropy=inputs.entropy,
        signal=_on(out.signal, mask.device),
        segment_ids=segment_ids,
        weights=weights,
        advantages=advantages,
        has_ground_truth=has_truth,
        below_floor=has_truth & below_noise_floor(inputs.kl, mask, floor) if mode.signal != "log_ratio" else None,
        log_ratio=log_ratio,
        distilled=None if term is None else distill_advantages(advantages, term.dense, mask, term.weight, term.rows),
        dense=None if term is None else term.dense,
        distill_rows=None if term is None else term.rows,
        stats=out.stats,
    )


def _on(tensor: torch.Tensor, device: torch.device) -> torch.Tensor:
    """`tensor.to(device)`, without the operator where it is there already (host time on a GPU, for nothing)."""
    return tensor if tensor.device == device else tensor.to(device)
