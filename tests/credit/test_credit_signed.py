"""gear_trl.credit.signed: `credit: gear-signed`'s signal and the share of teacher-supported onsets, by hand."""

import pytest
import torch

from gear_trl.credit import segment_onsets, signed_signal, teacher_supported_onsets, weights_from_signal


def test_signed_signal_flips_where_the_teacher_supports_the_token():
    signal = torch.tensor([[0.8, 0.8, 0.5, 0.2]])
    log_ratio = torch.tensor([[1.5, -0.3, 0.0, 2.0]])  # log pT - log pS
    mask = torch.tensor([[True, True, True, False]])
    torch.testing.assert_close(signed_signal(signal, log_ratio, mask), torch.tensor([[-0.8, 0.8, 0.0, 0.0]]))
    with pytest.raises(ValueError, match=r"\[B, T\]"):
        signed_signal(signal, log_ratio[:, :3], mask)


def test_teacher_supported_tokens_gain_credit_when_passed_and_lose_blame_when_failed():
    # Token 0 the teacher supports, token 1 it does not; same GEAR signal 1.0 on both, alpha 1, eps 0.5, no rescaling.
    signal = torch.tensor([[1.0, 1.0], [1.0, 1.0]])
    log_ratio = torch.tensor([[0.7, -0.7], [0.7, -0.7]])
    mask = torch.ones(2, 2, dtype=torch.bool)
    advantages = torch.tensor([1.0, -1.0])  # row 0 passed, row 1 failed
    gear = weights_from_signal(signal, mask, advantages, alpha=1.0, eps=0.5, weight_norm="none")
    signed = weights_from_signal(
        signed_signal(signal, log_ratio, mask), mask, advantages, alpha=1.0, eps=0.5, weight_norm="none"
    )
    # GEAR: clamp(exp(-sign(A))) -> 0.5 in the passed row, 1.5 in the failed one, whatever the teacher thinks.
    torch.testing.assert_close(gear, torch.tensor([[0.5, 0.5], [1.5, 1.5]]))
    # Signed: the supported token gets 1.5 when passed (more credit) and 0.5 when failed (less blame).
    torch.testing.assert_close(signed, torch.tensor([[1.5, 0.5], [0.5, 1.5]]))


def test_segment_onsets_are_each_segments_first_token():
    ids = torch.tensor([[-1, 0, 0, -1, 1, 1, 2], [0, 0, -1, -1, -1, -1, -1], [-1] * 7])
    expected = torch.tensor(
        [[0, 1, 0, 0, 1, 0, 1], [1, 0, 0, 0, 0, 0, 0], [0] * 7],
        dtype=torch.bool,
    )
    assert torch.equal(segment_onsets(ids), expected)
    # A segment that runs across masked-out tool tokens (id -1 there) has one onset, not two.
    assert segment_onsets(torch.tensor([[0, -1, 0, 1]])).tolist() == [[True, False, False, True]]


def test_teacher_supported_onsets_count_onsets_of_passed_rows_only():
    ids = torch.tensor([[0, 0, 1, 1], [0, 1, 1, -1], [0, 0, 0, 0]])
    log_ratio = torch.tensor([[0.2, -1.0, -0.1, 3.0], [0.5, 0.4, 0.0, 0.0], [1.0, 1.0, 1.0, 1.0]])
    mask = torch.tensor([[1, 1, 1, 1], [1, 1, 1, 0], [1, 1, 1, 1]], dtype=torch.bool)
    # Row 0 passed: onsets at 0 (supported) and 2 (not); row 1 passed: onsets at 0, 1, both supported;
    # row 2 failed: not counted.
    supported, onsets = teacher_supported_onsets(ids, log_ratio, mask, torch.tensor([0.5, 1.0, -1.0]))
    assert (supported.item(), onsets.item()) == (3.0, 4.0)
    # Per-token advantages reduce to the row's mean; `valid` drops rows (here row 1, without a teacher).
    per_token = torch.tensor([0.5, 1.0, -1.0])[:, None] * mask
    valid = torch.tensor([True, False, True])
    supported, onsets = teacher_supported_onsets(ids, log_ratio, mask, per_token, valid)
    assert (supported.item(), onsets.item()) == (1.0, 2.0)
