"""GEAR's `gear/` metrics: reduced over all ranks with one collective each, in the same order on every rank (what
each means: docs/metrics.md)."""

from __future__ import annotations

import torch

from ..credit import distillation_share, failed_prefix_mask, teacher_supported_onsets
from ..credit.credit_trace import CreditTrace
from ..credit.diagnostics import SUM_NAMES as CONTRAST_SUMS
from ..credit.diagnostics import failure_contrast, failure_contrast_sums


class GearMetricsMixin:
    """`_log_gear_metrics` for `GEARTrainer`: one batch's credit trace into `self._metrics[mode]`."""

    def _failed_prefix_tokens(self, trace: CreditTrace) -> torch.Tensor:
        """Model tokens before the first onset in failed rollouts with a teacher (0 unless the credit mode's
        `prefix_weights`: segments that open at onsets, one advantage per completion). Failed as in `credit/diagnostics.py`, whose
        `tokens_failed` is the share's denominator: a negative row sum of the advantages, whose sign is the trajectory
        advantage's since weights are >= 0."""
        if not self.args.credit_mode.prefix_weights:
            return torch.zeros((), device=trace.mask.device)
        row_advantage = torch.where(trace.has_ground_truth, (trace.advantages * trace.mask).sum(dim=1), 0.0)
        return failed_prefix_mask(trace.segment_ids, trace.mask, row_advantage).float().sum()

    def _log_gear_metrics(self, mode, trace: CreditTrace, truncated: torch.Tensor, shared: torch.Tensor, control=None):
        kl, mask, segment_ids, weights, has_truth = (
            trace.kl,
            trace.mask,
            trace.segment_ids,
            trace.weights,
            trace.has_ground_truth,
        )
        device = mask.device
        m = mask.float()
        num_segments = (segment_ids.max(dim=1).values + 1).clamp(min=0).sum()
        in_segment = ((segment_ids >= 0) & mask).sum()
        # No boolean indexing and no `.item()` here: selections are masked sums and maxima, so the only host-device
        # waits of this method are the two copies of the reduced tensors below (bench/host_cost.py counts them).
        w_masked = torch.where(mask, weights, 0.0)
        # The teacher controls (Teacher.control_kl): per-row KL sums without a reference and with a wrong one, and
        # the largest KL without a reference.
        if control is None:
            control = torch.full((kl.size(0), 3), float("nan"), device=device)
        floor_rows, wrong_rows = ~control[:, 0].isnan(), ~control[:, 1].isnan() & has_truth
        row_kl, row_tokens = (kl * m).sum(dim=1), m.sum(dim=1)

        def rows_sum(values, rows):  # values[rows].sum(), without a boolean selection
            return torch.where(rows, values, 0.0).sum()

        sums = torch.stack(
            [
                (kl * m).sum(),
                m.sum(),
                num_segments.float(),
                in_segment.float(),
                w_masked.sum(),
                (w_masked * w_masked).sum(),
                has_truth.numel() - has_truth.float().sum(),
                truncated.float().sum(),
                torch.tensor(float(has_truth.numel()), device=device),
                shared.float().sum(),
                # the noise floor: KL of rows whose teacher prompt is the student's, and rows below onset_min_kl
                (kl * m * ~has_truth[:, None]).sum() + rows_sum(control[:, 0], floor_rows),
                (m * ~has_truth[:, None]).sum() + rows_sum(row_tokens, floor_rows),
                trace.below_floor.float().sum() if trace.below_floor is not None else torch.zeros((), device=device),
                # the wrong-reference control: its KL and the same rows' own-reference KL
                rows_sum(control[:, 1], wrong_rows),
                rows_sum(row_kl, wrong_rows),
                # failed rollouts' model tokens before the teacher's first onset (failed_prefix_weight scales them)
                self._failed_prefix_tokens(trace),
                # the distillation term's share of the loss's advantage mass (`distillation_weight` under SDPO's)
                *(
                    distillation_share(trace.advantages, trace.dense, mask, trace.distill_weight, trace.distill_rows)
                    if trace.distilled is not None
                    else torch.zeros(2, device=device)
                ),
                # label-free diagnostics, reduced with the rest (credit/diagnostics.py)
                *failure_contrast_sums(kl, mask, segment_ids, trace.advantages, has_truth),
                # onsets in passed rollouts, and those on tokens the teacher likes more than the student (credit/signed)
                *(
                    teacher_supported_onsets(segment_ids, trace.log_ratio, mask, trace.advantages, has_truth)
                    if trace.log_ratio is not None
                    else torch.zeros(2, device=device)
                ),
                # the credit mode's own metrics: (numerator, denominator) each
                *(
                    torch.as_tensor(v, dtype=torch.float32, device=device)
                    for pair in trace.stats.values()
                    for v in pair
                ),
            ]
        )
        big = torch.finfo(torch.float32).max
        sentinel = torch.full((1,), -big, device=device)

        def masked_max(values, keep):  # values[keep].max(), or -big where nothing is kept
            return torch.cat([torch.where(keep, values, -big).flatten(), sentinel]).max()

        any_token = mask.any()
        # rows without a reference and the control rows shown the student's prompt: a step whose floor is only the
        # control rows' still has a largest floor KL (the sentinel -big is for a rank with neither)
        floor_kl_max = torch.maximum(
            masked_max(kl, mask & ~has_truth[:, None]), masked_max(control[:, 2].nan_to_num(nan=-big), floor_rows)
        )
        extremes = torch.stack(
            [
                torch.where(any_token, masked_max(kl, mask), 0.0),
                masked_max(weights, mask),
                masked_max(-weights, mask),
                floor_kl_max,
            ]
        )
        sums = self.accelerator.reduce(sums, reduction="sum")
        extremes = self.accelerator.gather(extremes[None]).max(dim=0).values
        reduced, (kl_max, w_max, neg_w_min, floor_kl_max) = sums.tolist(), extremes.tolist()  # the two host copies
        (kl_sum, tokens, segments, in_seg, w_sum, w_sq, no_truth, n_truncated, rows, n_shared) = reduced[:10]
        floor_kl_sum, floor_tokens, n_below, wrong_kl, right_kl, n_prefix = reduced[10:16]
        distill_mass, advantage_mass = reduced[16:18]
        contrast = reduced[18 : 18 + len(CONTRAST_SUMS)]
        n_supported, n_onsets, *own = reduced[18 + len(CONTRAST_SUMS) :]
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
