"""Issue 75's cuts to GEAR's host-side work outside the credit functions change no value: the `gear/` metrics' sums
against the public functions they batch, and the teacher's padded prompts against TRL's `pad`, compared exactly."""

from __future__ import annotations

import pytest
import torch
from trl.trainer.utils import pad

from gear_trl.credit import (
    distillation_share,
    failed_prefix_mask,
    failure_contrast_sums,
    teacher_supported_onsets,
)
from gear_trl.credit.credit_trace import CreditTrace
from gear_trl.teacher.teacher import left_padded
from gear_trl.trainer.gear_metrics import COUNT_ROWS, ROW_SETS, SUMS, gear_metric_sums


def _trace(seed: int, batch: int = 6, length: int = 29) -> tuple[CreditTrace, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    mask = torch.rand(batch, length, generator=g) > 0.3
    mask[1] = False  # a row without model tokens
    kl = torch.where(mask, torch.rand(batch, length, generator=g) ** 3, 0.0)
    starts = (torch.rand(batch, length, generator=g) > 0.8) & mask
    inside = (torch.rand(batch, length, generator=g) > 0.3) & mask  # -1 gaps inside segments
    has_truth = torch.rand(batch, generator=g) > 0.25
    segment_ids = torch.where(inside & has_truth[:, None], starts.long().cumsum(1) - 1, -1).clamp(min=-1)
    weights = torch.where(mask, 0.5 + torch.rand(batch, length, generator=g), 0.0)
    base = torch.randn(batch, generator=g).round(decimals=1)
    base[3] = 0.0  # neither failed nor passed
    advantages = base[:, None] * weights
    trace = CreditTrace(
        completion_ids=torch.zeros(batch, length, dtype=torch.long),
        mask=mask,
        kl=kl,
        entropy=kl,
        signal=kl,
        segment_ids=segment_ids,
        weights=weights,
        advantages=advantages,
        has_ground_truth=has_truth,
        below_floor=has_truth & (torch.rand(batch, generator=g) > 0.7),
        log_ratio=torch.where(mask, torch.randn(batch, length, generator=g), 0.0),
        distilled=advantages * 0.9,
        dense=torch.randn(batch, length, generator=g),
        distill_rows=has_truth,
        distill_weight=0.3,
        stats={"own": (torch.tensor(3.0), 7.0)},
    )
    control = torch.full((batch, 3), float("nan"))
    control[0] = torch.tensor([2.5, 3.25, 0.75])
    control[2, 0], control[2, 2] = 1.125, 0.5
    return trace, control


@pytest.mark.parametrize("seed", range(6))
def test_metric_sums_are_the_sums_of_the_public_functions(seed):
    trace, control = _trace(seed)
    truncated = torch.arange(trace.mask.shape[0]) % 3 == 0
    shared = torch.ones_like(truncated)
    sums, extremes = gear_metric_sums(trace, truncated, shared, control, prefix_weights=True)
    kl, mask, segment_ids, has_truth = trace.kl, trace.mask, trace.segment_ids, trace.has_ground_truth
    m, no_truth = mask.float(), ~has_truth
    total = dict(zip(SUMS, sums[: len(SUMS)], strict=True))
    block = sums[len(SUMS) : len(SUMS) + len(COUNT_ROWS) * len(ROW_SETS)].view(len(COUNT_ROWS), len(ROW_SETS))

    def count(what, rows):
        return block[COUNT_ROWS.index(what), ROW_SETS.index(rows)]

    floor_rows, wrong_rows = ~control[:, 0].isnan(), ~control[:, 1].isnan() & has_truth
    row_kl = (kl * m).sum(dim=1)
    assert torch.equal(total["kl"], (kl * m).sum())
    w_masked = torch.where(mask, trace.weights, 0.0)
    assert torch.equal(total["w"], w_masked.sum()) and torch.equal(total["w_sq"], (w_masked * w_masked).sum())
    floor = (kl * m * no_truth[:, None]).sum() + torch.where(floor_rows, control[:, 0], 0.0).sum()
    assert torch.equal(total["floor_kl"], floor)
    assert torch.equal(total["wrong_kl"], torch.where(wrong_rows, control[:, 1], 0.0).sum())
    assert torch.equal(total["right_kl"], torch.where(wrong_rows, row_kl, 0.0).sum())
    share = distillation_share(trace.advantages, trace.dense, mask, 0.3, trace.distill_rows)
    assert torch.equal(torch.stack([total["distill"], total["advantage_mass"]]), share)
    contrast = failure_contrast_sums(kl, mask, segment_ids, trace.advantages, has_truth)
    ours = [total["kl_failed"], count("tokens", "failed"), total["kl_passed"], count("tokens", "passed")]
    ours += [count("segments", "failed"), count("segments", "passed")]
    assert torch.equal(torch.stack(ours), contrast)
    supported, onsets = teacher_supported_onsets(segment_ids, trace.log_ratio, mask, trace.advantages, has_truth)
    assert torch.equal(count("supported", "passed"), supported) and torch.equal(count("onsets", "passed"), onsets)
    row_advantage = torch.where(has_truth, (trace.advantages * mask).sum(dim=1), 0.0)
    prefix = failed_prefix_mask(segment_ids, mask, row_advantage).float().sum()
    assert torch.equal(count("prefix", "failed_prefix"), prefix)
    assert count("tokens", "all") == m.sum() and count("rows", "all") == mask.shape[0]
    assert count("segments", "all") == (segment_ids.max(dim=1).values + 1).clamp(min=0).sum()
    assert count("in_segment", "all") == ((segment_ids >= 0) & mask).sum()
    assert count("rows", "no_truth") == no_truth.sum() and count("rows", "truncated") == truncated.sum()
    assert count("rows", "shared") == shared.sum() and count("rows", "below_floor") == trace.below_floor.sum()
    assert (
        count("tokens", "no_truth") + count("tokens", "floor")
        == (m * no_truth[:, None]).sum() + torch.where(floor_rows, m.sum(dim=1), 0.0).sum()
    )
    assert sums[-2:].tolist() == [3.0, 7.0]  # the mode's own (numerator, denominator)

    big = torch.finfo(torch.float32).max
    floor_tokens = mask & no_truth[:, None]
    floor_values = torch.cat([kl[floor_tokens], control[:, 2][floor_rows], torch.tensor([-big])])
    expected = [kl[mask].max(), trace.weights[mask].max(), (-trace.weights[mask]).max(), floor_values.max()]
    assert torch.equal(extremes, torch.stack(expected))


def test_metric_extremes_of_a_rank_without_model_tokens():
    trace, _ = _trace(0)
    trace.mask = torch.zeros_like(trace.mask)
    flags = torch.zeros(trace.mask.shape[0], dtype=torch.bool)
    _, extremes = gear_metric_sums(trace, flags, flags, None, prefix_weights=False)
    big = torch.finfo(torch.float32).max
    assert extremes.tolist() == [0.0, -big, -big, -big]  # the KL 0, the rest "none"


@pytest.mark.parametrize("rows", [[[5, 6, 7], [8], [9, 10]], [[1], [2]], [[3, 4], []]])
def test_left_padded_prompts_are_trls_pad(rows):
    ids, mask = left_padded(rows, 0, "cpu")
    assert torch.equal(
        ids, pad([torch.tensor(r, dtype=torch.long) for r in rows], padding_value=0, padding_side="left")
    )
    ones = [torch.ones(len(r), dtype=torch.long) for r in rows]
    assert torch.equal(mask, pad(ones, padding_value=0, padding_side="left"))
    assert ids.dtype == mask.dtype == torch.long
