"""`CreditTrace`: what `gear_trl.credit.assign_credit` computed for one batch's credit, token by token, and why (read
by the metrics, the credit reports and `gear-trl-inspect`)."""

from __future__ import annotations

from dataclasses import dataclass, field, fields

import torch


@dataclass
class CreditTrace:
    """Per-token credit of one batch, every tensor [B, T] (has_ground_truth: [B]): what GEAR computed and why."""

    completion_ids: torch.Tensor
    mask: torch.Tensor
    kl: torch.Tensor
    entropy: torch.Tensor
    signal: torch.Tensor
    segment_ids: torch.Tensor
    weights: torch.Tensor
    advantages: torch.Tensor
    has_ground_truth: torch.Tensor
    below_floor: torch.Tensor | None = None
    """[B] bool: rows with a teacher whose largest KL is below `onset_min_kl` (weights 1)."""
    log_ratio: torch.Tensor | None = None
    """[B, T] float: the sampled token's log pT - log pS, in the modes that read it (`GEARConfig.wants_log_ratio`)."""
    distilled: torch.Tensor | None = None
    """[B, T] float: with `distillation_weight > 0`, the loss's advantages, (1 - w) * advantages + w * dense on
    `distill_rows` (`credit.distill_advantages`); `advantages` stays GEAR's credit of the outcome."""
    dense: torch.Tensor | None = None
    """[B, T] float, with `distillation_weight > 0`: the term blended in, `log_ratio` or (`distillation_signal:
    agreement`) `credit.agreement_advantages`."""
    distill_rows: torch.Tensor | None = None
    """[B] bool, with `distillation_weight > 0`: the rows distilled, those with a teacher that some reward function
    scored (GRPO gives a row every reward function returned None for advantage 0, "no learning signal": the
    distillation term would move the policy on it)."""
    stats: dict = field(default_factory=dict)
    """The credit mode's own `gear/` metrics, name -> (numerator, denominator) (`CreditOutputs.stats`)."""
    distill_weight: float = 0.0
    """The weight `distilled` blends `dense` in with (`DistillationTerm.weight`: `distillation_weight` under SDPO's
    term); 0 without a term."""

    def to(self, device) -> CreditTrace:
        moved = {f.name: getattr(self, f.name) for f in fields(self)}
        moved = {k: v.detach().to(device) if isinstance(v, torch.Tensor) else v for k, v in moved.items()}
        return CreditTrace(**moved)
