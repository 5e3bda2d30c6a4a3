"""GiGPO credit assignment: episode-level plus anchor-state step-level advantages.

GiGPO (Group-in-Group Policy Optimization, arXiv 2505.10978) keeps GRPO's
episode advantage over the G rollouts of one prompt and adds a step advantage
computed over *step groups*: steps of those rollouts that act on the same anchor
state. See ``/work/shared/specs/GIGPO.md`` for the computation this follows.

Everything here is a pure function of its inputs (no trainer state, no I/O).
Groups may span processes: the caller gathers rewards, group ids and anchors
from all ranks, calls :func:`gigpo_advantages` once, and keeps its local slice.
"""

from __future__ import annotations

import difflib
from collections.abc import Hashable, Sequence

import torch
from torch import Tensor

__all__ = [
    "GIGPO_MODES",
    "gigpo_advantages",
    "gigpo_advantages_with_stats",
    "gigpo_step_advantages",
    "step_advantages_to_tokens",
    "step_index_from_mask",
]

GIGPO_MODES = ("mean_std", "mean")
_EPS = 1e-6


def gigpo_advantages(
    rewards: Tensor,
    group_ids: Tensor,
    step_anchors: Sequence[Sequence[Hashable]],
    *,
    step_rewards: Sequence[Sequence[float]] | None = None,
    gamma: float = 0.95,
    omega: float = 1.0,
    mode: str = "mean_std",
    similarity_threshold: float | None = None,
    scorable: Tensor | None = None,
) -> list[Tensor]:
    """Combined GiGPO advantage of every step of every rollout.

    Args:
        rewards: ``[N]`` float, the return R_i of each rollout (episode).
        group_ids: ``[N]`` integer; rollouts of the same prompt share an id.
        step_anchors: ``N`` sequences; ``step_anchors[i][k]`` is the hashable
            anchor state (usually a str) that step k of rollout i acts on.
            ``K_i = len(step_anchors[i])`` may be 0.
        step_rewards: optional ``N`` sequences shaped like ``step_anchors``
            with the reward of each step; by default every step gets 0 except
            the last step of rollout i, which gets R_i.
        gamma: discount in [0, 1] for the step returns R_{i,k}.
        omega: weight of the step advantage in A_E(i) + omega * A_S(i, k).
        mode: ``"mean_std"`` (centre and divide by std + 1e-6) or ``"mean"``
            (centre only), used for both levels.
        similarity_threshold: ``None`` for exact anchor matching; a value in
            (0, 1] also groups string anchors whose difflib ratio to a step
            group's first anchor is at least this value.
        scorable: optional ``[N]`` bool; False marks a rollout no reward
            function could score (TRL's all-None rows). Its steps get advantage
            0 and its return stays out of every group statistic, episode and
            step level. Default: every rollout is scorable.

    Returns:
        ``N`` float32 tensors on ``rewards.device``; element i has shape
        ``[K_i]`` and holds A_E(i) + omega * A_S(i, k) for each step k.

    See :func:`gigpo_advantages_with_stats` for the exact definitions.
    """
    advantages, _ = gigpo_advantages_with_stats(
        rewards,
        group_ids,
        step_anchors,
        step_rewards=step_rewards,
        gamma=gamma,
        omega=omega,
        mode=mode,
        similarity_threshold=similarity_threshold,
        scorable=scorable,
    )
    return advantages


def gigpo_advantages_with_stats(
    rewards: Tensor,
    group_ids: Tensor,
    step_anchors: Sequence[Sequence[Hashable]],
    *,
    step_rewards: Sequence[Sequence[float]] | None = None,
    gamma: float = 0.95,
    omega: float = 1.0,
    mode: str = "mean_std",
    similarity_threshold: float | None = None,
    scorable: Tensor | None = None,
) -> tuple[list[Tensor], dict[str, float]]:
    """GiGPO advantages plus the step-group statistics a trainer logs.

    Arguments and the first return value are those of :func:`gigpo_advantages`.

    Definitions (std is always the unbiased sample std, ``torch.std``'s default):

    * Episode advantage, per episode group G (one value per rollout, so long
      rollouts do not weigh more, unlike verl-agent's per-step-row statistics):
      ``mean_std``: A_E(i) = (R_i - mean_G) / (std_G + 1e-6);
      ``mean``: A_E(i) = R_i - mean_G. A group of one rollout has no defined
      std, and a group whose returns are all equal carries no signal, so both
      get A_E = 0.
    * Step return: R_{i,k} = sum_{j>=k} gamma^(j-k) r_{i,j}.
    * Step groups: within one episode group, steps whose anchors are equal
      form a step group, across rollouts, across time steps and within one
      rollout. With ``similarity_threshold`` set, clustering is greedy and
      deterministic: steps are visited in order (rollouts by batch index, then
      steps by k); a step joins the first existing step group (in order of
      creation) whose representative, its first member, is a string with
      ``difflib.SequenceMatcher(None, representative, anchor).ratio() >=
      similarity_threshold`` (or equals the anchor exactly); otherwise it opens
      a new step group. Non-string anchors only match exactly. This costs up
      to (distinct anchors x step groups) difflib comparisons per episode
      group, which is why it is off by default.
    * Step advantage: ``mean_std``: A_S = (R_{i,k} - mean_g) / (std_g + 1e-6);
      ``mean``: A_S = R_{i,k} - mean_g; singleton step groups and step groups
      whose returns are all equal give 0.
    * Unscorable rollouts (``scorable`` False) are left out before any of the
      statistics above (group sizes, means, stds count scorable members only)
      and get A_E = A_S = 0, so every step of theirs has advantage 0.

    Returns:
        ``(advantages, stats)``. ``stats`` has float values:
        ``num_steps`` (total steps), ``num_step_groups``,
        ``singleton_step_group_frac`` (fraction of step groups with one step;
        0 when there are none) and ``step_adv_std`` (unbiased std of A_S over
        all steps, before omega; 0 with fewer than two steps). These count
        the steps of unscorable rollouts too (their A_S is 0).
    """
    rewards, group_ids, scorable = _validate(
        rewards, group_ids, step_anchors, step_rewards, gamma, mode, similarity_threshold, scorable
    )
    device = rewards.device
    n = rewards.shape[0]
    lengths = [len(anchors) for anchors in step_anchors]
    returns = rewards.detach().to(device="cpu", dtype=torch.float64)

    # Episode level: one value per rollout, so groups are dense episode indices.
    episode_ids, episode_group = torch.unique(group_ids.cpu(), return_inverse=True)

    # Step level, flattened in (rollout, step) order.
    lengths_t = torch.tensor(lengths, dtype=torch.long)
    owner = torch.repeat_interleave(torch.arange(n), lengths_t)
    num_steps = int(owner.numel())
    if step_rewards is None:
        # Only the last step is rewarded: R_{i,k} = gamma^(L_i - 1 - k) R_i.
        to_go = torch.tensor([k for length in lengths for k in range(length - 1, -1, -1)], dtype=torch.float64)
        step_returns_t = returns[owner] * torch.pow(gamma, to_go)
    else:
        step_returns: list[float] = []
        for per_step in step_rewards:
            step_returns.extend(_discounted_returns([float(r) for r in per_step], gamma))
        step_returns_t = torch.tensor(step_returns, dtype=torch.float64)

    step_group = _step_groups(episode_group.tolist(), step_anchors, similarity_threshold)
    step_group_t = torch.tensor(step_group, dtype=torch.long)
    # Episode and step groups are disjoint, so one normalization over both (offset step-group ids) gives each its own
    # statistics: half the small torch ops, which is most of this function's time on a CPU.
    episode_groups = episode_ids.numel()
    both = _group_normalize(
        torch.cat((returns, step_returns_t)),
        torch.cat((episode_group, step_group_t + episode_groups)),
        mode,
        keep=None if bool(scorable.all()) else torch.cat((scorable, scorable[owner])),
        num_groups=episode_groups + (max(step_group) + 1 if step_group else 0),
    )
    episode_adv, step_adv = both[:n], both[n:]

    combined = (episode_adv[owner] + omega * step_adv).to(torch.float32).to(device)
    advantages = list(torch.split(combined, lengths))

    sizes = torch.bincount(step_group_t) if num_steps else torch.zeros(0, dtype=torch.long)
    num_groups = int(sizes.numel())
    stats = {
        "num_steps": float(num_steps),
        "num_step_groups": float(num_groups),
        "singleton_step_group_frac": (float((sizes == 1).sum()) / num_groups if num_groups else 0.0),
        "step_adv_std": float(step_adv.std()) if num_steps > 1 else 0.0,
    }
    return advantages, stats


def step_index_from_mask(mask: Tensor) -> Tensor:
    """Number the model-written steps of each row of a token mask.

    Args:
        mask: ``[B, T]`` bool (or 0/1), True on model-written tokens.

    Returns:
        ``[B, T]`` long: each maximal run of True in a row is one step, numbered
        0, 1, 2, ... from the left within that row; -1 where ``mask`` is False.
    """
    if mask.dim() != 2:
        raise ValueError(f"mask must be 2-D [B, T], got shape {tuple(mask.shape)}")
    mask = mask.bool()
    previous = torch.zeros_like(mask)
    previous[:, 1:] = mask[:, :-1]
    run_starts = mask & ~previous
    index = torch.cumsum(run_starts.long(), dim=1) - 1
    return torch.where(mask, index, torch.full_like(index, -1))


def step_advantages_to_tokens(step_advs: Sequence[Tensor], step_index: Tensor) -> Tensor:
    """Broadcast per-step advantages onto the tokens of each step.

    Args:
        step_advs: ``B`` tensors; element b has shape ``[K_b]`` (as returned by
            :func:`gigpo_advantages` for the rows of the batch).
        step_index: ``[B, T]`` integer; k for tokens the model wrote in step k,
            -1 for other tokens (tool results, prompt, padding).

    Returns:
        ``[B, T]`` float32 on ``step_index.device``: ``step_advs[b][k]`` at
        tokens of step k, 0 where ``step_index`` is -1.
    """
    if step_index.dim() != 2:
        raise ValueError(f"step_index must be 2-D [B, T], got shape {tuple(step_index.shape)}")
    if step_index.is_floating_point() or step_index.dtype == torch.bool:
        raise ValueError(f"step_index must be an integer tensor, got {step_index.dtype}")
    batch = step_index.shape[0]
    if len(step_advs) != batch:
        raise ValueError(f"step_advs has {len(step_advs)} rows but step_index has {batch}")
    device = step_index.device
    lengths = torch.tensor([int(a.numel()) for a in step_advs], dtype=torch.long, device=device)
    if step_index.numel():
        if bool((step_index < -1).any()):
            raise ValueError("step_index must be >= -1")
        too_far = step_index >= lengths[:, None]
        if bool(too_far.any()):
            row = int(too_far.nonzero()[0, 0])
            raise ValueError(
                f"step_index row {row} refers to step {int(step_index[row][too_far[row]].max())} "
                f"but step_advs[{row}] has only {int(lengths[row])} steps"
            )
    max_steps = int(lengths.max()) if batch else 0
    # Column 0 holds the zero that index -1 maps to, so one gather does it all.
    table = torch.zeros(batch, max_steps + 1, dtype=torch.float32, device=device)
    for b, adv in enumerate(step_advs):
        table[b, 1 : adv.numel() + 1] = adv.reshape(-1).to(device=device, dtype=torch.float32)
    return table.gather(1, step_index.long() + 1)


def _group_normalize(
    values: Tensor, group: Tensor, mode: str, keep: Tensor | None = None, num_groups: int | None = None
) -> Tensor:
    """Centre (and for ``mean_std`` scale) ``values [M]`` within ``group [M]``.

    ``group`` holds dense ids 0..C-1. Groups of one element or with all-equal
    values give exactly 0: centring by a float mean could leave rounding noise
    that dividing by std + 1e-6 would blow up. ``keep`` (optional ``[M]`` bool):
    only these elements enter the statistics; the others get 0. ``num_groups``: C, if the caller knows it.
    """
    if keep is not None and not bool(keep.all()):
        out = torch.zeros_like(values)
        if bool(keep.any()):
            _, dense = torch.unique(group[keep], return_inverse=True)
            out[keep] = _group_normalize(values[keep], dense, mode)
        return out
    if values.numel() == 0:
        return values.clone()
    if num_groups is None:
        num_groups = int(group.max()) + 1
    count = torch.bincount(group, minlength=num_groups).to(values.dtype)
    total = torch.zeros(num_groups, dtype=values.dtype).index_add_(0, group, values)
    centred = values - (total / count)[group]
    high = torch.full((num_groups,), float("-inf"), dtype=values.dtype)
    low = torch.full((num_groups,), float("inf"), dtype=values.dtype)
    high = high.scatter_reduce(0, group, values, reduce="amax")
    low = low.scatter_reduce(0, group, values, reduce="amin")
    informative = high > low  # a group of one element has high == low too
    if mode == "mean_std":
        square_sum = torch.zeros(num_groups, dtype=values.dtype).index_add_(0, group, centred**2)
        std = torch.sqrt(square_sum / (count - 1).clamp(min=1))
        centred = centred / (std[group] + _EPS)
    return torch.where(informative[group], centred, 0.0)


def _discounted_returns(step_rewards: list[float], gamma: float) -> list[float]:
    """R_k = sum_{j>=k} gamma^(j-k) r_j for one rollout."""
    out = [0.0] * len(step_rewards)
    running = 0.0
    for k in range(len(step_rewards) - 1, -1, -1):
        running = step_rewards[k] + gamma * running
        out[k] = running
    return out


def _step_groups(
    episode_group: list[int],
    step_anchors: Sequence[Sequence[Hashable]],
    similarity_threshold: float | None,
) -> list[int]:
    """Dense step-group id for every step, flattened in (rollout, step) order."""
    # Per episode group: anchor -> step-group id (exact hits, also a cache for
    # the similarity search) and the (representative, id) list in creation order.
    exact: dict[int, dict[Hashable, int]] = {}
    representatives: dict[int, list[tuple[str, int]]] = {}
    next_id = 0
    out: list[int] = []
    if similarity_threshold is None:  # exact matching only: one dict look-up per step
        for i, anchors in enumerate(step_anchors):
            seen = exact.setdefault(episode_group[i], {})
            for k, anchor in enumerate(anchors):
                try:
                    hit = seen.setdefault(anchor, next_id)
                except TypeError:
                    raise ValueError(f"step_anchors[{i}][{k}] is not hashable: {type(anchor).__name__}") from None
                next_id += hit == next_id
                out.append(hit)
        return out
    for i, anchors in enumerate(step_anchors):
        g = episode_group[i]
        seen = exact.setdefault(g, {})
        reps = representatives.setdefault(g, [])
        for k, anchor in enumerate(anchors):
            try:
                hit = seen.get(anchor)
            except TypeError:
                raise ValueError(f"step_anchors[{i}][{k}] is not hashable: {type(anchor).__name__}") from None
            if hit is None and similarity_threshold is not None and isinstance(anchor, str):
                hit = _first_similar(anchor, reps, similarity_threshold)
            if hit is None:
                hit = next_id
                next_id += 1
                if isinstance(anchor, str):
                    reps.append((anchor, hit))
            # Caching is sound: an equal anchor later would make the same
            # first-match choice, since clusters are only ever appended.
            seen[anchor] = hit
            out.append(hit)
    return out


def _first_similar(anchor: str, reps: list[tuple[str, int]], threshold: float) -> int | None:
    """Id of the first representative whose difflib ratio to ``anchor`` >= threshold."""
    # seq2 is the side SequenceMatcher preprocesses, so fix it to the anchor.
    matcher = difflib.SequenceMatcher(None, "", anchor)
    for rep, group_id in reps:
        matcher.set_seq1(rep)
        # The quick ratios are upper bounds of ratio(); they skip hopeless pairs.
        if (
            matcher.real_quick_ratio() >= threshold
            and matcher.quick_ratio() >= threshold
            and matcher.ratio() >= threshold
        ):
            return group_id
    return None


def _validate(
    rewards: Tensor,
    group_ids: Tensor,
    step_anchors: Sequence[Sequence[Hashable]],
    step_rewards: Sequence[Sequence[float]] | None,
    gamma: float,
    mode: str,
    similarity_threshold: float | None,
    scorable: Tensor | None = None,
) -> tuple[Tensor, Tensor, Tensor]:
    rewards = torch.as_tensor(rewards)
    group_ids = torch.as_tensor(group_ids)
    if rewards.dim() != 1:
        raise ValueError(f"rewards must be 1-D [N], got shape {tuple(rewards.shape)}")
    if not rewards.is_floating_point():
        rewards = rewards.to(torch.float32)
    if not bool(torch.isfinite(rewards).all()):
        raise ValueError("rewards contains NaN or infinite values")
    n = rewards.shape[0]
    if group_ids.dim() != 1 or group_ids.shape[0] != n:
        raise ValueError(f"group_ids must have shape [N] = [{n}] like rewards, got {tuple(group_ids.shape)}")
    if group_ids.is_floating_point() or group_ids.is_complex():
        raise ValueError(f"group_ids must be an integer tensor, got {group_ids.dtype}")
    if isinstance(step_anchors, (str, bytes)) or len(step_anchors) != n:
        raise ValueError(f"step_anchors must be a list of N = {n} per-rollout lists, got length {len(step_anchors)}")
    for i, anchors in enumerate(step_anchors):
        # A bare string would silently become one step per character.
        if isinstance(anchors, (str, bytes)) or not isinstance(anchors, Sequence):
            raise ValueError(f"step_anchors[{i}] must be a list of anchors, got {type(anchors).__name__}")  # noqa: TRY004 -- tests expect ValueError
    if step_rewards is not None:
        if len(step_rewards) != n:
            raise ValueError(f"step_rewards must have N = {n} per-rollout lists, got {len(step_rewards)}")
        for i, (per_step, anchors) in enumerate(zip(step_rewards, step_anchors)):
            if len(per_step) != len(anchors):
                raise ValueError(
                    f"step_rewards[{i}] has {len(per_step)} entries but step_anchors[{i}] has {len(anchors)} steps"
                )
    if mode not in GIGPO_MODES:
        raise ValueError(f"mode must be one of {GIGPO_MODES}, got {mode!r}")
    if not 0.0 <= gamma <= 1.0:
        raise ValueError(f"gamma must be in [0, 1], got {gamma}")
    if similarity_threshold is not None and not 0.0 < similarity_threshold <= 1.0:
        raise ValueError(f"similarity_threshold must be None or in (0, 1], got {similarity_threshold}")
    if scorable is None:
        scorable = torch.ones(n, dtype=torch.bool)
    scorable = torch.as_tensor(scorable).cpu()
    if scorable.dtype != torch.bool or scorable.shape != (n,):
        raise ValueError(
            f"scorable must be a bool tensor of shape [N] = [{n}], got {scorable.dtype} {tuple(scorable.shape)}"
        )
    return rewards, group_ids, scorable


def gigpo_token_advantages(
    rewards_per_func: Tensor,
    reward_weights: Tensor,
    anchors: Sequence[Sequence[Hashable]],
    step_index: Tensor,
    start: int,
    group_size: int,
    *,
    gamma: float,
    omega: float,
    mode: str,
    similarity_threshold: float | None,
) -> tuple[Tensor, dict[str, float]]:
    """GiGPO's episode + step advantage of every model token of one rank's rows (`credit: gigpo`, `gear-gigpo`).

    Args:
        rewards_per_func: [N, F] float, every rollout of the generation batch (all ranks) per reward function, NaN
            where a function gave none.
        reward_weights: [F] float, the reward functions' weights.
        anchors: N lists, each rollout's step anchors (all ranks, in rank order).
        step_index: [B, T] long, this rank's rows' step of each token, -1 off model tokens
            (:func:`step_index_from_mask`).
        start: the index in N of this rank's first row.
        group_size: rollouts per prompt (consecutive rows form a group).
        gamma, omega, mode, similarity_threshold: `gigpo_gamma`, `gigpo_omega`, `gigpo_mode`,
            `gigpo_similarity_threshold`.

    Returns:
        The advantages [B, T] float (0 on tool results and padding), on `step_index`'s device, and
        :func:`gigpo_advantages_with_stats`' statistics. Rows no reward function scored get advantage 0 and stay out
        of the statistics, as in GRPO.
    """
    weights = reward_weights.to(rewards_per_func.device)
    rewards = torch.nan_to_num((rewards_per_func * weights[None]).nansum(dim=1), nan=0.0).cpu()
    scorable = ~torch.isnan(rewards_per_func).all(dim=1).cpu()
    group_ids = torch.arange(len(anchors)) // group_size
    step_advs, stats = gigpo_advantages_with_stats(
        rewards,
        group_ids,
        anchors,
        gamma=gamma,
        omega=omega,
        mode=mode,
        similarity_threshold=similarity_threshold,
        scorable=scorable,
    )
    rows = step_index.size(0)
    return step_advantages_to_tokens(step_advs[start : start + rows], step_index).to(step_index.device), stats


GIGPO_OPTIONS = ("gigpo_gamma", "gigpo_omega", "gigpo_mode", "gigpo_similarity_threshold")
"""What :func:`gigpo_step_advantages` reads (`gear_trl.credit.modes.GIGPO`)."""


def gigpo_step_advantages(batch) -> tuple[Tensor, dict[str, float]]:
    """GiGPO's advantages for `credit: gigpo` and `gear-gigpo` (their record's `steps`,
    `gear_trl.credit.modes.GIGPO`): one rank's [B, T] advantages and the `gigpo/` metrics.

    `batch` is a `gear_trl.credit.modes.GroupBatch`: ``mask`` [B, T] (this rank's model tokens),
    ``rewards_per_func`` [N, F] and ``reward_weights`` [F] (every rank's rollouts), ``group_size``, ``rank``,
    ``anchors()`` (this rank's rows' step anchors, one list per row), ``gather_object`` (every rank's lists, in rank
    order) and ``options`` (:data:`GIGPO_OPTIONS`). Groups span ranks, so every rank gathers the anchors of the whole
    generation batch, computes the same advantages (:func:`gigpo_token_advantages`) and keeps its own rows.
    A row with fewer anchors than token runs (its last turn cut to nothing) gets a unique anchor for each run without
    a turn: a singleton step group, step advantage 0.
    """
    mask = batch.mask
    options = batch.options
    step_index = step_index_from_mask(mask)
    steps = (step_index.max(dim=1).values + 1).clamp(min=0).tolist()
    local = []
    for i, (anchors, num_steps) in enumerate(zip(batch.anchors(), steps, strict=True)):
        unmatched = [f"unmatched:{batch.rank}:{i}:{k}" for k in range(len(anchors), num_steps)]
        local.append(list(anchors[:num_steps]) + unmatched)
    advantages, stats = gigpo_token_advantages(
        batch.rewards_per_func,
        batch.reward_weights,
        batch.gather_object(local),
        step_index,
        batch.rank * len(steps),
        batch.group_size,
        gamma=options.gigpo_gamma,
        omega=options.gigpo_omega,
        mode=options.gigpo_mode,
        similarity_threshold=options.gigpo_similarity_threshold,
    )
    metrics = {
        "gigpo/step_groups": stats["num_step_groups"],
        "gigpo/singleton_frac": stats["singleton_step_group_frac"],
        "gigpo/step_adv_std": stats["step_adv_std"],
    }
    return advantages.to(mask.device), metrics
