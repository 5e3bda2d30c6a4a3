"""`distillation_weight` (not in the GEAR paper): GEAR's advantage blended with the teacher's sampled-token log-ratio.

SDPO (Hübotter et al. 2026, arXiv 2601.20802) distils a self-teacher, the policy shown what it did not know, back
into the policy. Its sampled-token form (TRL's `SDPOTrainer`, `distillation_mode="sampled_token"`) is the per-token
loss ``(log pS(y_t) - log pT(y_t)).detach() * log pS(y_t)``, whose gradient is ``-delta_t * grad log pS(y_t)`` with
``delta_t = log pT(y_t) - log pS(y_t)``: a policy gradient whose advantage is ``delta_t``. Written as an advantage it
joins GRPO's in GRPO's own loss: ``(1 - w) * A_t + w * delta_t`` gives on policy (importance ratio 1) with
``loss_type="grpo"`` the gradient of TRL's ``(1 - w) * policy_loss + w * distillation_loss``; under a token-level
aggregation (``dapo``) the term is aggregated as the policy term is, where TRL's averages it per sequence
(tests/credit/test_credit_distill.py).

Every weighting GEAR has scales a rollout's one advantage by a weight >= 0, so a failed rollout's right decision is
blamed, at best less. The log-ratio has a sign per token: where the teacher, which sees the reference, gives the
sampled token more probability than the student, ``delta_t > 0`` whatever the rollout's outcome. That per-decision
sign is what the one ceiling the horizon study measured above GRPO, `oracle-process`, has
(docs/results/horizon.md).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

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


# ---------------------------------------------------------------------------------------------------------------------
# Bounded and gated distillation (issue 73; every option's default leaves the blend above exactly as it was)
# ---------------------------------------------------------------------------------------------------------------------

DISTILLATION_GATES = ("none", "mixed", "failed")
"""`distillation_gate`: which rows the distillation term may touch. `none`: every row with a teacher (as before);
`mixed`: only rows whose group has an outcome signal (its rewards not all equal); `failed`: only rows of such a group
whose outcome advantage is negative."""


def group_has_outcome_signal(rewards: torch.Tensor, group_size: int) -> torch.Tensor:
    """Per rollout, whether its group's rewards differ: the groups GRPO's advantage is not 0 on.

    A group whose rollouts all passed, or all failed, gets GRPO advantage 0 on every rollout; there the distillation
    term would be the whole update. Rewards are compared exactly (identical rewards are bitwise equal, so no tolerance
    is needed); a NaN reward (no reward source scored the rollout) takes no part, and a group with fewer than two
    scored rollouts has no signal.

    Args:
        rewards: [N] float, the (weighted) reward of every rollout of the generation batch, groups of `group_size`
            consecutive rows (GRPO's layout).
        group_size: G >= 1, rollouts per prompt; N must be a multiple of it.

    Returns:
        [N] bool.
    """
    if rewards.dim() != 1:
        raise ValueError(f"rewards must be [N]; got {tuple(rewards.shape)}.")
    if group_size < 1 or rewards.numel() % group_size:
        raise ValueError(f"rewards ({rewards.numel()}) must split into groups of group_size ({group_size}).")
    grouped = rewards.detach().float().view(-1, group_size)
    scored = ~grouped.isnan()
    high = torch.where(scored, grouped, torch.full_like(grouped, -math.inf)).max(dim=1).values
    low = torch.where(scored, grouped, torch.full_like(grouped, math.inf)).min(dim=1).values
    mixed = (scored.sum(dim=1) >= 2) & (high > low)
    return mixed.repeat_interleave(group_size)


def group_advantage_scale(advantages: torch.Tensor, mask: torch.Tensor, group_size: int) -> torch.Tensor:
    """Per rollout, its group's outcome advantage scale: the mean over the group's rollouts of each rollout's mean
    |A| over its model tokens (for one advantage per rollout, simply the group's mean |A_i|).

    Args:
        advantages: [N] float per rollout, or [N, T] per token (GiGPO's per-step advantages).
        mask: [N, T] bool (or 0/1), model-written tokens (read only for [N, T] advantages).
        group_size: G >= 1; N must be a multiple of it.

    Returns:
        [N] float32, >= 0; 0 for every rollout of a group whose advantages are all 0.
    """
    if advantages.dim() == 2:
        if advantages.shape != mask.shape:
            raise ValueError(f"[N, T] advantages need a mask of their shape; got {tuple(mask.shape)}.")
        m = mask.to(device=advantages.device, dtype=torch.float32)
        row = (advantages.detach().float().abs() * m).sum(dim=1) / m.sum(dim=1).clamp_min(1.0)
    elif advantages.dim() == 1:
        row = advantages.detach().float().abs()
    else:
        raise ValueError(f"advantages must be [N] or [N, T]; got {tuple(advantages.shape)}.")
    if group_size < 1 or row.numel() % group_size:
        raise ValueError(f"advantages ({row.numel()} rows) must split into groups of group_size ({group_size}).")
    return row.view(-1, group_size).mean(dim=1).repeat_interleave(group_size)


def distillation_gate(gate: str, signal: torch.Tensor, advantages: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """The rows `distillation_gate` lets the distillation term touch (to be and-ed with the rows that have a teacher).

    Args:
        gate: one of `DISTILLATION_GATES`.
        signal: [B] bool, `group_has_outcome_signal` of each row.
        advantages: [B] or [B, T] float, the outcome advantage (read by `failed`: a row is failed where the sum of its
            advantage over its model tokens is negative, the sign of GRPO's advantage since GEAR's weights are >= 0).
        mask: [B, T] bool (or 0/1), model-written tokens.

    Returns:
        [B] bool: every row for `none`; `signal` for `mixed`; `signal` and failed for `failed`.
    """
    if gate not in DISTILLATION_GATES:
        raise ValueError(f"gate must be one of {DISTILLATION_GATES}; got {gate!r}.")
    signal = signal.to(dtype=torch.bool)
    if gate == "none":
        return torch.ones_like(signal)
    if gate == "mixed":
        return signal
    m = mask.to(device=advantages.device, dtype=torch.float32)
    row = (advantages.detach().float() * m).sum(dim=1) if advantages.dim() == 2 else advantages.detach().float()
    return signal & (row.to(signal.device) < 0)


def bound_distill_signal(
    dense: torch.Tensor,
    weight: float,
    clip: float | None = None,
    bound: float | None = None,
    scale: torch.Tensor | None = None,
) -> torch.Tensor:
    """The dense term with `distillation_clip` and `distillation_bound` applied, so that `distill_advantages` and
    `distillation_share` read the term the loss uses.

    - `clip` c: each token's term is clipped to [-c, c] (in the log-ratio's units, nats; RLSD's clip of exp(delta) to
      [0.8, 1.2] is c ~ 0.2 on the log scale).
    - `bound` b: each token's *weighted* term ``w * delta_t`` is clipped to ``[-b * s, b * s]``, s its group's outcome
      advantage scale (`group_advantage_scale`), i.e. ``delta_t`` to ``[-b * s / w, b * s / w]``: the distillation
      can never push a token harder than b times what the outcome gives its group, and a group without an outcome
      signal (s = 0) gets no distillation at all.

    Both None returns `dense` itself (the same tensor): the blend is then exactly what it was without these options.

    Args:
        dense: [B, T] float, the term `distillation_weight` blends in (`log_ratio` or `agreement`).
        weight: ``w`` in (0, 1].
        clip: c > 0, or None.
        bound: b > 0, or None (then `scale` is not read).
        scale: [B] float >= 0, each row's group advantage scale (required with `bound`).

    Returns:
        [B, T] float32 (or `dense` unchanged).
    """
    if clip is None and bound is None:
        return dense
    if dense.dim() != 2:
        raise ValueError(f"dense must be [B, T]; got {tuple(dense.shape)}.")
    out = dense.detach().float()
    if clip is not None:
        if not clip > 0:
            raise ValueError(f"clip must be > 0; got {clip}.")
        out = out.clamp(-clip, clip)
    if bound is not None:
        if not bound > 0 or not 0 < weight <= 1:
            raise ValueError(f"bound must be > 0 and weight in (0, 1]; got {bound}, {weight}.")
        if scale is None or scale.shape != dense.shape[:1]:
            raise ValueError(
                f"bound needs scale [B] = [{dense.shape[0]}]; got {None if scale is None else tuple(scale.shape)}."
            )
        limit = (bound * scale.detach().to(out).clamp_min(0.0) / weight)[:, None]
        out = torch.maximum(torch.minimum(out, limit), -limit)
    return out


# ---------------------------------------------------------------------------------------------------------------------
# The collapse monitor's rule (issue 73): a pure function over a run's logged history
# ---------------------------------------------------------------------------------------------------------------------

MONITOR_WINDOW = 10
"""Logged steps the collapse monitor averages over (our choice; see `collapse_verdict`)."""
SHARE_LIMIT = 0.5
"""The distillation share above which, held over a window while the reward is below its start, the monitor warns."""
ENTROPY_RISE = 0.10
"""The relative rise of the policy's entropy over its first window that, with the reward below its start, warns."""


def _window_mean(values, start: int, stop: int) -> float | None:
    kept = [v for v in values[start:stop] if v is not None and not math.isnan(v)]
    return sum(kept) / len(kept) if kept else None


def collapse_verdict(
    share: list,
    reward: list,
    entropy: list | None = None,
    window: int = MONITOR_WINDOW,
    share_limit: float = SHARE_LIMIT,
    entropy_rise: float = ENTROPY_RISE,
) -> dict:
    """Whether a run's logged history looks like self-distillation collapse, judged at its last logged step.

    Two rules, each over the last `window` logged values against the run's first `window` (None or NaN values, a step
    that logged none, are skipped in each mean):

    - **share**: the distillation share's mean over the last window is above `share_limit` while the reward's mean
      over it is below its first window's: the distillation term carries most of the update and the reward has fallen
      since the run began (a share near 1 with the reward rising is a run whose groups all pass or all fail early on,
      not a collapse: the committed `independent-k8` runs start that way).
    - **entropy**: the entropy's mean over the last window is above its first window's by more than `entropy_rise`
      (relative) while the reward's is below its first window's: the policy spreads while it gets worse.

    Nothing is judged before `2 * window` values are logged (the two windows must not overlap).

    Args:
        share: per logged step, `gear/distill_share` (None where not logged).
        reward: per logged step, the mean training reward.
        entropy: per logged step, the policy's mean token entropy, or None where not available.
        window: W >= 1 logged steps.
        share_limit: the share's threshold, in (0, 1).
        entropy_rise: the relative entropy rise, >= 0.

    Returns:
        {"fires": bool, "rule": "share" | "entropy" | None, "share": last-window mean share or None,
        "reward_trend": last-window mean reward minus first-window mean (None before 2W steps),
        "entropy_trend": the same for entropy (None without it)}.
    """
    if window < 1:
        raise ValueError(f"window must be >= 1; got {window}.")
    n = len(reward)
    out = {"fires": False, "rule": None, "share": _window_mean(share, max(len(share) - window, 0), len(share)),
           "reward_trend": None, "entropy_trend": None}  # fmt: skip
    if n < 2 * window:
        return out
    first, last = _window_mean(reward, 0, window), _window_mean(reward, n - window, n)
    if first is not None and last is not None:
        out["reward_trend"] = last - first
    if entropy is not None and len(entropy) >= 2 * window:
        e_first, e_last = _window_mean(entropy, 0, window), _window_mean(entropy, len(entropy) - window, len(entropy))
        if e_first is not None and e_last is not None:
            out["entropy_trend"] = e_last - e_first
    falling = out["reward_trend"] is not None and out["reward_trend"] < 0
    if falling and out["share"] is not None and out["share"] > share_limit:
        out.update(fires=True, rule="share")
    elif (
        falling and out["entropy_trend"] is not None and e_first > 0 and out["entropy_trend"] > entropy_rise * e_first
    ):
        out.update(fires=True, rule="entropy")
    return out


def collapse_warning(verdict: dict, weight: float, backoff: bool) -> str:
    """The monitor's one warning for a verdict that fires (docs/metrics.md quotes it)."""
    if verdict["rule"] == "share":
        what = (
            f"the distillation term holds {verdict['share']:.2f} of the advantage (gear/distill_share, mean over "
            f"the last window) while the training reward is {-verdict['reward_trend']:.3f} below its first window"
        )
    else:
        what = (f"the policy's entropy rose by {verdict['entropy_trend']:.3f} while the training reward fell "
                f"{-verdict['reward_trend']:.3f} below its first window")  # fmt: skip
    action = ("`distillation_backoff` is on: `distillation_weight` is halved now and at each further warning, down to "
              "`distillation_backoff_floor`" if backoff else
              "Lower `distillation_weight`, clip the term per token (`distillation_clip`), keep it to the failed "
              "rows of groups with an outcome signal (`distillation_gate: failed`), or distil from a fixed teacher "
              "(`teacher: base`); `distillation_backoff: true` halves the weight automatically")  # fmt: skip
    return (
        f"Self-distillation may be collapsing at `distillation_weight: {weight:g}`: {what}. A term toward a copy "
        f"of the policy can outgrow the outcome's and feed on itself. {action} (docs/metrics.md, collapse "
        "monitor)."
    )


@dataclass(frozen=True)
class DistillationTerm:
    """A dense term to blend into the advantages: ``(1 - weight) * A_t + weight * dense_t`` on `rows`' model tokens
    (`gear_trl.credit.distill.distill_advantages`).

    Attributes:
        dense: float [B, T], the term, already clipped or bounded as the loss should use it.
        rows: bool [B], the rows it touches.
        weight: its weight in [0, 1].
    """

    dense: torch.Tensor
    rows: torch.Tensor
    weight: float


DISTILLATION_OPTIONS = (
    "distillation_weight",
    "distillation_signal",
    "distillation_gate",
    "distillation_clip",
    "distillation_bound",
)
"""The options SDPO's distillation term reads (`gear_trl.credit.modes.SDPO`)."""


def sdpo_distillation(inputs, advantages: torch.Tensor, rows: torch.Tensor):
    """`distillation_weight`'s term (`gear_trl.credit.modes.SDPO`): the sampled token's log pT - log pS
    (`inputs.log_ratio`, [B, T]) or with `distillation_signal: agreement` :func:`agreement_advantages` of
    `inputs.agreement` ([2, B, T]), then `distillation_gate` (on `inputs.group_signal`, [B]) narrows `rows` ([B] bool)
    and `distillation_clip` / `distillation_bound` (on `inputs.group_scale`, [B]) shape the term
    (:func:`bound_distill_signal`). `advantages`: [B, T], the mode's credit. None when `distillation_weight` is 0;
    with gate, clip and bound at their defaults the term is the signal itself on every row of `rows`."""
    options = inputs.options
    if options.distillation_weight <= 0:
        return None
    dense = inputs.log_ratio
    if options.distillation_signal == "agreement":
        dense = agreement_advantages(inputs.agreement[0], inputs.agreement[1], inputs.mask, inputs.group_size)
    if options.distillation_gate != "none":
        signal = inputs.group_signal.to(rows.device)
        rows = rows & distillation_gate(options.distillation_gate, signal, advantages, inputs.mask)
    scale = inputs.group_scale if options.distillation_bound is not None else None
    dense = bound_distill_signal(
        dense, options.distillation_weight, options.distillation_clip, options.distillation_bound, scale
    )
    return DistillationTerm(dense, rows, options.distillation_weight)


def sdpo_group_inputs(options) -> tuple[str, ...]:
    """What SDPO's term reads of each row's group (`gear_trl.credit.modes.SDPO`'s ``groups``): ``group_signal`` under
    `distillation_gate`, ``group_scale`` under `distillation_bound`; nothing when `distillation_weight` is 0."""
    if options.distillation_weight <= 0:
        return ()
    return (("group_signal",) if options.distillation_gate != "none" else ()) + (
        ("group_scale",) if options.distillation_bound is not None else ()
    )
