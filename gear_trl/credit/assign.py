"""The trainer's two calls for a batch's credit, whatever the mode; each runs the mode's record (`gear_trl.credit.modes`).

- :func:`group_credit`, after generation: the mode's own advantages in place of GRPO's (`CreditMode.steps`, GiGPO's
  per-step ones) and what its distillation term reads of each row's group (`Distillation.groups`), from a
  :class:`GroupBatch` that carries the trainer's gathers (groups span ranks).
- :func:`assign_credit`, with the divergence pass: the mode's ``compute`` on its declared options, the documented
  fallback for rows without a teacher (plain GRPO weights), the mode's distillation term (`CreditMode.distillation`,
  SDPO's under `distillation_weight` by default) and the assembled :class:`CreditTrace`.

Pure tensor code: what needs the other ranks arrives as the trainer's gather functions or in the inputs.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

import torch

from .credit_trace import CreditTrace
from .distill import distill_advantages, group_advantage_scale, group_has_outcome_signal
from .modes import GROUP_INPUTS, CreditInputs, CreditMode, GroupBatch, declared_options
from .segments import below_noise_floor

TRACE_OPTIONS = ("onset_min_kl",)
"""What the assembly itself reads: the noise floor the trace's `below_floor` marks."""


@dataclass(frozen=True)
class GroupCredit:
    """What :func:`group_credit` computed for one rank's rows.

    Attributes:
        advantages: float [B, T], the mode's own advantages in place of GRPO's (`CreditMode.steps`), or None to keep
            GRPO's.
        group_signal: bool [B], whether each row's group's rewards differ, where the distillation reads it, else None.
        group_scale: float [B], each row's group's mean |advantage| (of `advantages` where set), where the
            distillation reads it, else None.
        metrics: the mode's own metrics for this batch, full name -> value (`gigpo/step_groups`, ...).
    """

    advantages: torch.Tensor | None = None
    group_signal: torch.Tensor | None = None
    group_scale: torch.Tensor | None = None
    metrics: dict[str, float] = field(default_factory=dict)


def group_credit(mode: CreditMode, settings: Any, batch: GroupBatch) -> GroupCredit:
    """The parts of `mode`'s credit that span a prompt's group, computed after generation, before the teacher pass.

    Args:
        mode: the credit mode's record.
        settings: the run's options (a `GEARConfig`); the step advantages receive only `StepAdvantages.options`,
            the distillation's `groups` only `Distillation.options`.
        batch: one rank's rows and the whole generation batch's rewards (:class:`GroupBatch`, its `options` ignored).
            Which gathers run is decided by `mode` and `settings` alone, so every rank makes the same ones.

    Returns:
        A :class:`GroupCredit`; with neither step advantages nor group inputs, an empty one (no gather made).
    """
    advantages, metrics = None, {}
    if mode.steps is not None:
        options = declared_options(mode.steps.options, settings)
        advantages, metrics = mode.steps.compute(dataclasses.replace(batch, options=options))
    wanted = ()
    if mode.distillation is not None and mode.distillation.groups is not None:
        wanted = mode.distillation.groups(declared_options(mode.distillation.options, settings))
        unknown = sorted(set(wanted) - set(GROUP_INPUTS))
        if unknown:
            raise ValueError(f"A distillation's `groups` names {unknown}; it may ask for {list(GROUP_INPUTS)}.")
    mask = batch.mask
    start = batch.rank * mask.size(0)
    rows = slice(start, start + mask.size(0))
    group_signal = group_scale = None
    if "group_signal" in wanted:
        per_func = batch.rewards_per_func
        weighted = (per_func * batch.reward_weights.to(per_func.device)[None]).nansum(dim=1)
        weighted = torch.where(torch.isnan(per_func).all(dim=1), torch.nan, weighted)  # unscored: no part
        group_signal = group_has_outcome_signal(weighted, batch.group_size)[rows].to(mask.device)
    if "group_scale" in wanted:
        current = (batch.advantages if advantages is None else advantages).float()
        if current.dim() == 2:
            m = mask.float()
            row = (current.abs() * m).sum(dim=1) / m.sum(dim=1).clamp_min(1.0)
        else:
            row = current.abs()
        every_row = batch.gather(row)
        group_scale = group_advantage_scale(every_row, None, batch.group_size)[rows].to(mask.device)
    return GroupCredit(advantages, group_signal, group_scale, metrics)


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
        distill_weight=0.0 if term is None else term.weight,
    )


def _on(tensor: torch.Tensor, device: torch.device) -> torch.Tensor:
    """`tensor.to(device)`, without the operator where it is there already (host time on a GPU, for nothing)."""
    return tensor if tensor.device == device else tensor.to(device)
