"""GEAR's `gear/` metrics: reduced over all ranks with one collective each, in the same order on every rank (what
each means: docs/metrics.md)."""

from __future__ import annotations

import torch

from ..credit import distillation_share
from ..credit.credit_trace import CreditTrace
from ..credit.diagnostics import SUM_NAMES as CONTRAST_SUMS
from ..credit.diagnostics import failure_contrast

COUNT_ROWS = ("tokens", "in_segment", "prefix", "onsets", "supported", "segments", "rows")
"""The per-row counts of `gear_metric_sums` (rows of its [7, 9] integer block): model tokens, those in segments, a
failed completion's model tokens before its first segment, onsets, onsets the teacher supports, segments, 1."""
ROW_SETS = ("all", "no_truth", "truncated", "shared", "below_floor", "floor", "failed", "passed", "failed_prefix")
"""The row sets they are summed over (columns of that block)."""
SUMS = ("kl", "w", "w_sq", "floor_kl", "wrong_kl", "right_kl", "kl_failed", "kl_passed", "distill", "advantage_mass")
"""The float sums of `gear_metric_sums`, ahead of the integer block and the credit mode's own numerators and
denominators."""


def gear_metric_sums(
    trace: CreditTrace,
    truncated: torch.Tensor,
    shared: torch.Tensor,
    control: torch.Tensor | None,
    *,
    prefix_weights: bool,
) -> tuple[torch.Tensor, torch.Tensor]:
    """What a rank adds to the other ranks' for the `gear/` metrics, in few operators (each is host time, a kernel
    launch, on a GPU): the sums that are not integers as the expressions they always were (a float sum's value
    depends on its reduction's order), every count of tokens, segments and rows (integers, exact in float32 below
    2^24 whatever the order) as one [7, 9] block: the per-row counts `COUNT_ROWS` summed over the row sets
    `ROW_SETS`.

    Args:
        trace: the batch's `CreditTrace` ([B, T] tensors, `has_ground_truth` [B]).
        truncated, shared: [B] bool, rows whose teacher prompt was cut, and rows of a teacher pass that shared
            prompt prefixes.
        control: [B, 3] float or None: the teacher controls' per-row KL sums without a reference and with a wrong
            one and the largest KL without one, NaN outside the control rows (`Teacher.control_kl`).
        prefix_weights: whether the credit mode's segments open at onsets with one advantage per completion
            (`failed_prefix_frac`'s tokens are counted).

    Returns:
        sums: [10 + 63 + 2k] float32: `SUMS`, the flattened [7, 9] block, then the k own statistics' (numerator,
            denominator).
        extremes: [4] float32: the largest KL, weight and -weight over model tokens and the largest no-reference KL
            (rows without a reference and the control rows; -float32 max where there is none; the KL 0 without
            model tokens).
    """
    kl, mask, segment_ids, weights, has_truth = (
        trace.kl,
        trace.mask,
        trace.segment_ids,
        trace.weights,
        trace.has_ground_truth,
    )
    device = mask.device
    if control is None:
        control = torch.full((kl.size(0), 3), float("nan"), device=device)
    no_truth = ~has_truth
    m = mask.float()
    km = kl * m
    row_kl, row_tokens = km.sum(dim=1), m.sum(dim=1)
    w_masked = torch.where(mask, weights, 0.0)
    controls = control.unbind(dim=1)
    floor_rows, wrong_rows = ~controls[0].isnan(), ~controls[1].isnan() & has_truth
    # Rows failed and passed (`credit/diagnostics.py`): the sign of the row's mean advantage over its model tokens.
    advantages = trace.advantages if trace.advantages.dtype == torch.float32 else trace.advantages.float()
    row_advantage = (advantages * m).sum(dim=1) if advantages.dim() == 2 else advantages
    mean_advantage = row_advantage / row_tokens.clamp(min=1) if advantages.dim() == 2 else advantages
    failed, passed = (mean_advantage < 0) & has_truth, (mean_advantage > 0) & has_truth
    floats = [
        km.sum(),
        w_masked.sum(),
        (w_masked * w_masked).sum(),
        # the noise floor: KL of rows whose teacher prompt is the student's, and of the control rows
        (km * no_truth[:, None]).sum() + torch.where(floor_rows, controls[0], 0.0).sum(),
        # the wrong-reference control: its KL and the same rows' own-reference KL
        torch.where(wrong_rows, controls[1], 0.0).sum(),
        torch.where(wrong_rows, row_kl, 0.0).sum(),
        (row_kl * failed.float()).sum(),
        (row_kl * passed.float()).sum(),
    ]
    if trace.distilled is not None:  # the mode's distillation term's share of the advantage mass, at its own weight
        floats.append(
            distillation_share(trace.advantages, trace.dense, mask, trace.distill_weight, trace.distill_rows)
        )
    else:
        floats.append(torch.zeros(2, device=device))

    # Per-token indicators, counted per row in one sum: model tokens, tokens in segments, a failed completion's
    # model tokens before its first segment (`credit.failed_prefix_mask`), onsets and those the teacher supports
    # (`credit.teacher_supported_onsets`; a token is an onset when its id exceeds every id before it).
    in_segment = (segment_ids >= 0) & mask
    tokens = [mask, in_segment]
    tokens.append(mask & (in_segment.long().cumsum(dim=1) == 0) if prefix_weights else torch.zeros_like(mask))
    if trace.log_ratio is not None:
        seen = torch.nn.functional.pad(segment_ids[:, :-1].cummax(dim=1).values, (1, 0), value=-1)
        onsets = (segment_ids > seen) & mask
        tokens += [onsets, onsets & (trace.log_ratio > 0)]
    else:
        tokens += [torch.zeros_like(mask)] * 2
    segments = (segment_ids.amax(dim=1) + 1).clamp(min=0)  # ids run 0, 1, ... per row: the largest + 1 segments
    every_row = torch.ones_like(has_truth)
    counts = torch.cat([torch.stack(tokens).sum(dim=2), segments[None], every_row[None]]).float()  # [COUNT_ROWS, B]
    below = trace.below_floor if trace.below_floor is not None else torch.zeros_like(has_truth)
    # the failed rows of `failed_prefix_frac`: a negative advantage sum over model tokens, and a segment
    failed_prefix = (
        (row_advantage < 0) & has_truth & in_segment.any(dim=1) if prefix_weights else torch.zeros_like(has_truth)
    )
    truncated, shared = (flags if flags.dtype == torch.bool else flags.bool() for flags in (truncated, shared))
    row_sets = [every_row, no_truth, truncated, shared, below, floor_rows, failed, passed, failed_prefix]
    block = (counts[:, None, :] * torch.stack(row_sets).float()[None]).sum(dim=2)  # [COUNT_ROWS, ROW_SETS]
    parts = [torch.stack(floats[:8]), floats[8], block.flatten()]
    if trace.stats:  # the credit mode's own metrics, (numerator, denominator) each
        own = [torch.as_tensor(v, dtype=torch.float32, device=device) for pair in trace.stats.values() for v in pair]
        parts.append(torch.stack(own))
    sums = torch.cat(parts)

    big = torch.finfo(torch.float32).max
    kl_kept = torch.where(mask, kl, -big)
    floor_kept = torch.where(no_truth[:, None], kl_kept, -big)
    kept = torch.stack([kl_kept, torch.where(mask, weights, -big), torch.where(mask, -weights, -big), floor_kept])
    kept = kept.flatten(1)
    control_floor = torch.where(floor_rows, controls[2].nan_to_num(nan=-big), -big)
    # -big stands for "none": a rank without model tokens, or without rows of the floor
    sentinel = torch.full((4, 1), -big, device=device)
    largest = torch.cat([kept, sentinel], dim=1).amax(dim=1)
    floor_max = torch.cat([largest[3:], control_floor]).max()
    extremes = torch.stack([torch.where(mask.any(), largest[0], 0.0), largest[1], largest[2], floor_max])
    return sums, extremes


class GearMetricsMixin:
    """`_log_gear_metrics` for `GEARTrainer`: one batch's credit trace into `self._metrics[mode]`."""

    def _log_gear_metrics(self, mode, trace: CreditTrace, truncated: torch.Tensor, shared: torch.Tensor, control=None):
        # No boolean indexing and no `.item()` here: selections are masked sums and maxima, so the only host-device
        # wait of this method is the one copy of the reduced tensors below (bench/host_cost.py counts them).
        sums, extremes = gear_metric_sums(
            trace,
            truncated,
            shared,
            control,
            prefix_weights=self.args.credit_mode.prefix_weights,
        )
        if self.accelerator.num_processes > 1:  # one collective each (alone, a rank's are the totals)
            sums = self.accelerator.reduce(sums, reduction="sum")
            extremes = self.accelerator.gather(extremes[None]).max(dim=0).values
        *reduced, kl_max, w_max, neg_w_min, floor_kl_max = torch.cat([sums, extremes]).tolist()  # the one host copy
        total = dict(zip(SUMS, reduced, strict=False))
        cells = iter(reduced[len(SUMS) :])
        count = {(c, r): next(cells) for c in COUNT_ROWS for r in ROW_SETS}
        own = list(cells)
        kl_sum, w_sum, w_sq, floor_kl_sum = total["kl"], total["w"], total["w_sq"], total["floor_kl"]
        wrong_kl, right_kl, distill_mass, advantage_mass = (
            total[name] for name in ("wrong_kl", "right_kl", "distill", "advantage_mass")
        )
        tokens, segments, in_seg = count["tokens", "all"], count["segments", "all"], count["in_segment", "all"]
        rows, no_truth, n_truncated = count["rows", "all"], count["rows", "no_truth"], count["rows", "truncated"]
        n_shared, n_below = count["rows", "shared"], count["rows", "below_floor"]
        floor_tokens = count["tokens", "no_truth"] + count["tokens", "floor"]
        n_prefix = count["prefix", "failed_prefix"]
        n_supported, n_onsets = count["supported", "passed"], count["onsets", "passed"]
        contrast = {  # failure_contrast_sums' values
            "kl_failed": total["kl_failed"],
            "tokens_failed": count["tokens", "failed"],
            "kl_passed": total["kl_passed"],
            "tokens_passed": count["tokens", "passed"],
            "onsets_failed": count["segments", "failed"],
            "onsets_passed": count["segments", "passed"],
        }
        contrast = [contrast[name] for name in CONTRAST_SUMS]
        tokens_ = max(tokens, 1.0)
        w_mean = w_sum / tokens_
        metrics = {
            "kl_mean": kl_sum / tokens_,
            "kl_max": kl_max,
            "onset_rate": segments / tokens_,
            "segment_len_mean": in_seg / max(segments, 1.0),
            "in_segment_frac": in_seg / tokens_,
            "weight_mean": w_mean,
            "weight_std": max(w_sq / tokens_ - w_mean**2, 0.0) ** 0.5,
            "weight_min": -neg_w_min if tokens else 0.0,
            "weight_max": w_max if tokens else 0.0,
            "no_ground_truth_frac": no_truth / max(rows, 1.0),
            "teacher_truncated_frac": n_truncated / max(rows, 1.0),
            "teacher_prefix_shared_frac": n_shared / max(rows, 1.0),
            # NaN (left out of the interval's mean) in a step without such rows
            "kl_floor": floor_kl_sum / floor_tokens if floor_tokens else float("nan"),
            # the largest of those rows' per-row largest KLs, against which `onset_min_kl` is set
            "kl_floor_max": floor_kl_max if floor_tokens else float("nan"),
            "below_floor_frac": n_below / max(rows - no_truth, 1.0),
        }
        # Undefined ratios (no failed or no passed rollout in the step) go in as NaN, which TRL's `log` leaves out of
        # the mean over the logging interval (None when no step of it had one).
        # the credit mode's own metrics (CreditOutputs.stats), numerators and denominators summed over ranks
        for k, name in enumerate(trace.stats):
            numerator, denominator = own[2 * k : 2 * k + 2]
            metrics[name] = numerator / denominator if denominator else float("nan")
        if self.args.wants_log_ratio:
            metrics["onsets_teacher_supported_frac"] = n_supported / n_onsets if n_onsets else float("nan")
        # NaN in a step without a control row (left out of the interval's mean, like kl_floor)
        metrics["kl_wrong_over_right"] = wrong_kl / right_kl if right_kl > 0 else float("nan")
        # where the mode's distillation term is on (by its options: every rank agrees); NaN in a step whose
        # advantages are all 0 on rows with a teacher
        if trace.distilled is not None:
            metrics["distill_share"] = distill_mass / advantage_mass if advantage_mass > 0 else float("nan")
        if self.args.credit_mode.prefix_weights:
            n_failed = contrast[CONTRAST_SUMS.index("tokens_failed")]
            metrics["failed_prefix_frac"] = n_prefix / n_failed if n_failed else float("nan")
        for name, value in failure_contrast(contrast).items():
            metrics[name] = float("nan") if value is None else value
        for name in self._meaningless_metrics():
            metrics.pop(name, None)
        if self.args.credit_mode.signal == "log_ratio":  # its `kl` is the signed log-ratio log pS - log pT
            metrics["log_ratio_mean"] = kl_sum / tokens_
        for name, value in metrics.items():
            self._metrics[mode][f"gear/{name}"].append(value)

    SIBLING_UNLOGGED = ("kl_wrong_over_right", "no_ground_truth_frac")
    """`gear/` metrics `teacher_reference: sibling` does not log: no row is shown a ground truth, so there is none to
    swap for a wrong one, and rows without a sibling are `gear/no_sibling_frac`."""

    def _meaningless_metrics(self) -> tuple[str, ...]:
        """The `gear/` metrics this configuration leaves out (decided by the configuration alone: every rank agrees);
        docs/metrics.md tabulates them by mode and teacher."""
        left_out = self.args.credit_mode.unlogged
        if self.args.teacher_reference == "sibling":
            left_out += self.SIBLING_UNLOGGED
        return left_out
