"""Hand-worked examples for gear_trl.credit.diagnostics (teacher KL and onsets in failed vs passed rollouts)."""

import math

import pytest
import torch

from gear_trl.credit import failure_contrast, failure_contrast_sums

# Four rollouts: failed (A < 0), passed (A > 0), a zero-advantage one (neither) and a failed one whose last token is
# padding. Segment ids: row 0 has two segments (2 onsets), row 1 one, row 2 one, row 3 one.
KL = torch.tensor(
    [
        [0.4, 0.2, 0.6],
        [0.1, 0.1, 0.1],
        [9.0, 9.0, 9.0],
        [0.2, 0.4, 7.0],
    ]
)
MASK = torch.tensor([[1, 1, 1], [1, 1, 1], [1, 1, 1], [1, 1, 0]], dtype=torch.bool)
SEGMENTS = torch.tensor([[0, 0, 1], [-1, 0, 0], [0, 0, 0], [0, -1, -1]])
ADVANTAGES = torch.tensor([-1.0, 0.5, 0.0, -0.5])


def test_sums_by_hand():
    sums = failure_contrast_sums(KL, MASK, SEGMENTS, ADVANTAGES)
    # failed rows 0 and 3: KL 1.2 + 0.6 (the padded 7.0 is not counted) over 3 + 2 tokens, onsets 2 + 1;
    # passed row 1: KL 0.3 over 3 tokens, 1 onset; row 2 (A = 0) counts nowhere.
    torch.testing.assert_close(sums, torch.tensor([1.8, 5.0, 0.3, 3.0, 3.0, 1.0]))


def test_ratios_by_hand():
    metrics = failure_contrast(failure_contrast_sums(KL, MASK, SEGMENTS, ADVANTAGES))
    # mean KL per token: failed 1.8 / 5 = 0.36, passed 0.3 / 3 = 0.1
    assert metrics["kl_failed_over_passed"] == pytest.approx(3.6)
    assert metrics["onsets_in_failed_frac"] == pytest.approx(3 / 4)
    assert metrics["failed_tokens_frac"] == pytest.approx(5 / 8)


def test_per_token_advantages_are_reduced_to_the_rollouts_mean_over_model_tokens():
    # GiGPO-style [B, T] advantages: row 0 nets -0.2 (failed) although one token is positive; row 1 nets +0.1;
    # row 3's padded position (+9) is ignored, so it nets -0.5.
    per_token = torch.tensor(
        [[0.5, -0.5, -0.6], [0.3, 0.0, 0.0], [0.0, 0.0, 0.0], [-0.5, -0.5, 9.0]],
    )
    torch.testing.assert_close(
        failure_contrast_sums(KL, MASK, SEGMENTS, per_token),
        failure_contrast_sums(KL, MASK, SEGMENTS, ADVANTAGES),
    )


def test_valid_rows_only():
    valid = torch.tensor([False, True, True, True])  # row 0 has no ground truth: no informed teacher
    sums = failure_contrast_sums(KL, MASK, SEGMENTS, ADVANTAGES, valid)
    torch.testing.assert_close(sums, torch.tensor([0.6, 2.0, 0.3, 3.0, 1.0, 1.0]))


def test_sums_add_over_ranks():
    # Summing per-rank sums and then dividing is the ratio of the whole batch, not a mean of per-rank ratios.
    whole = failure_contrast_sums(KL, MASK, SEGMENTS, ADVANTAGES)
    parts = sum(failure_contrast_sums(KL[i : i + 2], MASK[i : i + 2], SEGMENTS[i : i + 2], ADVANTAGES[i : i + 2])
                for i in (0, 2))  # fmt: skip
    torch.testing.assert_close(parts, whole)


def test_undefined_ratios_are_none_not_a_number():
    only_failed = failure_contrast(failure_contrast_sums(KL[:1], MASK[:1], SEGMENTS[:1], ADVANTAGES[:1]))
    assert only_failed["kl_failed_over_passed"] is None
    assert only_failed["onsets_in_failed_frac"] == 1.0
    assert only_failed["failed_tokens_frac"] == 1.0
    all_equal = failure_contrast(failure_contrast_sums(KL, MASK, SEGMENTS, torch.zeros(4)))
    assert all_equal == {"kl_failed_over_passed": None, "onsets_in_failed_frac": None, "failed_tokens_frac": None}
    # passed rollouts whose teacher agrees exactly with the student: no finite ratio
    zero_kl = failure_contrast([1.0, 2.0, 0.0, 3.0, 0.0, 0.0])
    assert zero_kl["kl_failed_over_passed"] is None and zero_kl["onsets_in_failed_frac"] is None
    assert not any(isinstance(v, float) and math.isnan(v) for v in zero_kl.values())


def test_shape_errors_name_the_argument():
    with pytest.raises(ValueError, match="advantages must be"):
        failure_contrast_sums(KL, MASK, SEGMENTS, ADVANTAGES[:2])
    with pytest.raises(ValueError, match="mask and segment_ids"):
        failure_contrast_sums(KL, MASK[:, :2], SEGMENTS, ADVANTAGES)


@pytest.mark.slow
def test_trainer_logs_the_diagnostics_of_its_credit_trace(tmp_path):
    from tests.trainer.test_trainer import first_batch, generate
    from tests.utils import make_trainer, tiny_args, weighted

    trainer = make_trainer(tmp_path, args=tiny_args(tmp_path, onset_threshold=0.05))
    traces = []
    log_gear_metrics = trainer._log_gear_metrics

    def keep_trace(mode, trace, *rest):
        traces.append(trace)
        return log_gear_metrics(mode, trace, *rest)

    trainer._log_gear_metrics = keep_trace
    weighted(trainer, generate(trainer, first_batch(trainer)))
    (trace,) = traces
    row_advantage = trace.advantages.sum(dim=1)
    assert (row_advantage < 0).any() and (row_advantage > 0).any(), "the check needs failed and passed rollouts"
    expected = failure_contrast(
        failure_contrast_sums(trace.kl, trace.mask, trace.segment_ids, trace.advantages, trace.has_ground_truth)
    )
    metrics = trainer._metrics["train"]
    for name, value in expected.items():
        assert value is not None
        assert metrics[f"gear/{name}"] == [pytest.approx(value)], name
