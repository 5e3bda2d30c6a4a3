"""Hand-worked examples for gear_trl.credit.gear_token_weights.

``mode="token"`` with a row maximum of 1.0 makes the signal equal to kl, so the
expected weights can be written from exp(-sign(A) * alpha * kl) directly.
"""

import math

import pytest
import torch

from gear_trl.credit import failed_prefix_mask, gear_token_weights, spare_failed_prefix

KL = torch.tensor([[0.0, 0.5, 1.0]])
ZEROS = torch.zeros(1, 3)
MASK = torch.ones(1, 3, dtype=torch.bool)


def weights(kl=KL, advantages=(1.0,), mask=None, **kwargs):
    kwargs.setdefault("mode", "token")
    mask = MASK if mask is None else mask
    return gear_token_weights(kl, torch.zeros_like(kl), mask, torch.tensor(advantages), **kwargs)


def close(actual, expected):
    torch.testing.assert_close(actual, torch.tensor(expected, dtype=torch.float32), atol=1e-6, rtol=1e-6)


def test_sign_asymmetry_and_eps_clipping():
    # Positive advantage: high-divergence tokens are down-weighted.
    close(weights(advantages=(1.0,), eps=0.9, weight_norm="none"), [[1.0, math.exp(-0.5), math.exp(-1.0)]])
    # Negative advantage: up-weighted; e^1 = 2.718 is clipped to 1 + eps = 1.9.
    close(weights(advantages=(-1.0,), eps=0.9, weight_norm="none"), [[1.0, math.exp(0.5), 1.9]])
    # Only the sign of A matters, not its size.
    close(weights(advantages=(-7.0,), eps=0.9, weight_norm="none"), [[1.0, math.exp(0.5), 1.9]])


def test_eps_clips_both_sides():
    close(weights(advantages=(1.0,), eps=0.2, weight_norm="none"), [[1.0, 0.8, 0.8]])
    close(weights(advantages=(-1.0,), eps=0.2, weight_norm="none"), [[1.0, 1.2, 1.2]])
    close(weights(advantages=(-1.0,), eps=0.0, weight_norm="none"), [[1.0, 1.0, 1.0]])


def test_alpha_scales_the_signal():
    close(weights(alpha=0.5, eps=0.9, weight_norm="none"), [[1.0, math.exp(-0.25), math.exp(-0.5)]])
    close(weights(alpha=0.0, weight_norm="none"), [[1.0, 1.0, 1.0]])


def test_lam_blends_towards_one():
    blended = [[1.0, 0.5 + 0.5 * math.exp(-0.5), 0.5 + 0.5 * math.exp(-1.0)]]
    close(weights(lam=0.5, eps=0.9, weight_norm="none"), blended)
    close(weights(lam=0.0, eps=0.9, weight_norm="none"), [[1.0, 1.0, 1.0]])


def test_mean_normalization_preserves_the_trajectory_advantage():
    raw = [1.0, math.exp(-0.5), math.exp(-1.0)]
    mean = sum(raw) / 3
    w = weights(advantages=(2.0,), eps=0.9)
    close(w, [[x / mean for x in raw]])

    # Batch with tool tokens masked out: mean over masked tokens is 1 per row and
    # sum_t A_i * w_t = A_i * n_masked.
    generator = torch.Generator().manual_seed(0)
    kl = torch.rand(3, 8, generator=generator)
    mask = torch.rand(3, 8, generator=generator) > 0.3
    advantages = torch.tensor([1.5, -0.7, 0.3])
    w = gear_token_weights(kl, torch.rand(3, 8, generator=generator), mask, advantages, mode="gear")
    n_masked = mask.sum(dim=1).float()
    close(w.sum(dim=1) / n_masked, [1.0, 1.0, 1.0])
    close((advantages.unsqueeze(1) * w).sum(dim=1), (advantages * n_masked).tolist())
    assert bool((w[~mask] == 0).all())


def test_zero_advantage_gives_unit_weights():
    mask = torch.tensor([[1, 1, 0]], dtype=torch.bool)
    for weight_norm in ("mean", "none"):
        close(weights(advantages=(0.0,), mask=mask, weight_norm=weight_norm), [[1.0, 1.0, 0.0]])


def test_fully_masked_row_is_zero_without_nan():
    kl = torch.tensor([[0.0, 0.5, 1.0], [0.3, 0.2, 0.1]])
    mask = torch.tensor([[1, 1, 1], [0, 0, 0]], dtype=torch.bool)
    for mode in ("gear", "token", "turn", "none"):
        w = weights(kl=kl, advantages=(1.0, -1.0), mask=mask, mode=mode)
        assert not torch.isnan(w).any()
        assert w[1].tolist() == [0.0, 0.0, 0.0]


@pytest.mark.parametrize("mode", ["none", "gigpo"])
def test_none_mode_is_the_mask(mode):
    mask = torch.tensor([[1, 0, 1]], dtype=torch.bool)
    close(weights(advantages=(-3.0,), mask=mask, mode=mode), [[1.0, 0.0, 1.0]])


def test_gear_segments_share_the_onset_weight():
    # Segments as in test_credit_segments: signal [.02 .4 .4 .4 .03 .01 .6 .04].
    kl = torch.tensor([[0.02, 0.40, 0.05, 1.00, 0.03, 0.01, 0.60, 0.04]])
    entropy = torch.tensor([[0.10, 0.20, 0.30, 0.20, 0.90, 0.10, 0.20, 1.00]])
    w = gear_token_weights(
        kl, entropy, torch.ones(1, 8, dtype=torch.bool), torch.tensor([1.0]), eps=0.9, weight_norm="none"
    )
    close(w, [[math.exp(-s) for s in (0.02, 0.40, 0.40, 0.40, 0.03, 0.01, 0.60, 0.04)]])


def test_segment_kwargs_are_forwarded():
    kl = torch.tensor([[0.5, 0.02, 0.03, 1.0]])
    turn_starts = torch.tensor([[1, 0, 1, 0]], dtype=torch.bool)
    w = gear_token_weights(
        kl,
        torch.zeros(1, 4),
        torch.ones(1, 4),
        torch.tensor([1.0]),
        eps=0.9,
        weight_norm="none",
        turn_starts=turn_starts,
        onset_threshold=0.4,
    )
    close(w, [[math.exp(-0.5), math.exp(-0.5), math.exp(-0.03), 1 / math.e]])


@pytest.mark.parametrize(
    "kwargs, argument",
    [
        ({"alpha": -0.1}, "alpha"),
        ({"eps": 1.0}, "eps"),
        ({"eps": -0.1}, "eps"),
        ({"lam": 1.5}, "lam"),
        ({"weight_norm": "sum"}, "weight_norm"),
        ({"mode": "gera"}, "credit mode"),
    ],
)
def test_invalid_arguments_are_named(kwargs, argument):
    with pytest.raises(ValueError, match=argument):
        weights(**kwargs)


def test_advantages_must_be_one_per_row():
    with pytest.raises(ValueError, match="advantages"):
        weights(advantages=(1.0, 2.0))


def test_per_token_advantages_take_their_sign_token_by_token():
    """gear-gigpo: step-level advantages differ in sign within a completion; each token's weight follows its own."""
    from gear_trl.credit import weights_from_signal

    signal = torch.tensor([[0.5, 0.5, 0.5, 0.5]])
    mask = torch.ones(1, 4, dtype=torch.bool)
    advantages = torch.tensor([[1.0, 1.0, -1.0, 0.0]])
    weights = weights_from_signal(signal, mask, advantages, alpha=1.0, eps=0.9, lam=1.0, weight_norm="none")
    expected = torch.tensor([[math.exp(-0.5), math.exp(-0.5), math.exp(0.5), 1.0]])
    torch.testing.assert_close(weights, expected)


def test_per_token_advantages_are_normalized_within_each_step():
    """gear-gigpo: the mean-1 rescale runs over each step (a run of model tokens; position 2 is a tool result), so
    each step keeps sum A_t w_t. Step 0 (A = +1): exp(-[ln 2, 0]) = [0.5, 1], mean 0.75. Step 1 (A = -1):
    exp([ln 1.5, 0]) = [1.5, 1], mean 1.25. One mean over the row (1.0) would leave sum A_t w_t = 1.5 - 2.5 = -1
    where the advantages sum to 0."""
    from gear_trl.credit import weights_from_signal

    signal = torch.tensor([[math.log(2.0), 0.0, 0.0, math.log(1.5), 0.0]])
    mask = torch.tensor([[1, 1, 0, 1, 1]], dtype=torch.bool)
    advantages = torch.tensor([[1.0, 1.0, 0.0, -1.0, -1.0]])
    weights = weights_from_signal(signal, mask, advantages, alpha=1.0, eps=0.9, lam=1.0, weight_norm="mean")
    torch.testing.assert_close(weights, torch.tensor([[2 / 3, 4 / 3, 0.0, 1.2, 0.8]]))
    torch.testing.assert_close((weights * advantages).sum(), advantages.sum())


def test_per_token_advantages_of_one_step_match_the_trajectory_ones():
    """A row that is one step with one advantage gets the weights of that advantage given per row."""
    from gear_trl.credit import weights_from_signal

    signal = torch.tensor([[0.9, 0.1, 0.4, 0.0], [0.3, 0.0, 0.7, 0.2]])
    mask = torch.tensor([[1, 1, 1, 0], [1, 1, 1, 1]], dtype=torch.bool)
    per_row = torch.tensor([1.5, -0.5])
    per_token = per_row[:, None].expand(2, 4) * mask
    kwargs = {"alpha": 1.0, "eps": 0.5, "lam": 1.0, "weight_norm": "mean"}
    torch.testing.assert_close(
        weights_from_signal(signal, mask, per_token, **kwargs), weights_from_signal(signal, mask, per_row, **kwargs)
    )


def test_spare_failed_prefix_hand_worked():
    # Rows: failed with a segment at tokens 2-3; passed, same layout; failed without a segment; failed with a
    # masked-out first position; zero advantage.
    weights = torch.tensor(
        [
            [1.0, 1.0, 1.5, 1.5, 1.0],
            [1.0, 1.0, 0.5, 0.5, 1.0],
            [1.0, 1.0, 1.0, 1.0, 1.0],
            [0.0, 0.8, 1.2, 1.0, 1.0],
            [1.0, 1.0, 1.0, 1.0, 1.0],
        ]
    )
    segment_ids = torch.tensor(
        [
            [-1, -1, 0, 0, -1],
            [-1, -1, 0, 0, -1],
            [-1, -1, -1, -1, -1],
            [-1, -1, 0, -1, 1],
            [-1, 0, 0, 0, 0],
        ]
    )
    mask = torch.tensor([[1, 1, 1, 1, 1]] * 3 + [[0, 1, 1, 1, 1], [1, 1, 1, 1, 1]], dtype=torch.bool)
    advantages = torch.tensor([-1.0, 1.0, -0.5, -2.0, 0.0])

    out = spare_failed_prefix(weights, segment_ids, mask, advantages, prefix_weight=0.25)

    expected = torch.tensor(
        [
            [0.25, 0.25, 1.5, 1.5, 1.0],  # the prefix lowered, the segment and what follows it kept
            [1.0, 1.0, 0.5, 0.5, 1.0],  # passed: unchanged
            [1.0, 1.0, 1.0, 1.0, 1.0],  # no onset: nothing is known to be a correct prefix
            [0.0, 0.2, 1.2, 1.0, 1.0],  # masked-out position stays 0; a later segment does not move the cut
            [1.0, 1.0, 1.0, 1.0, 1.0],  # zero advantage: unchanged
        ]
    )
    torch.testing.assert_close(out, expected)
    # Not rescaled: the failed row's total weight drops by what the prefix lost.
    assert out[0].sum().item() == pytest.approx(weights[0].sum().item() - 2 * 0.75)


def test_failed_prefix_mask_hand_worked():
    # Rows: failed, onset at token 2; failed with a masked-out first position and padding at the end; failed without
    # a segment; passed with an onset at token 1.
    segment_ids = torch.tensor([[-1, -1, 0, -1], [-1, -1, 0, -1], [-1, -1, -1, -1], [-1, 0, 0, -1]])
    mask = torch.tensor([[1, 1, 1, 1], [0, 1, 1, 0], [1, 1, 1, 1], [1, 1, 1, 1]], dtype=torch.bool)
    advantages = torch.tensor([-1.0, -0.5, -2.0, 1.0])
    expected = torch.tensor(
        [
            [True, True, False, False],
            [False, True, False, False],  # only model tokens
            [False, False, False, False],  # no onset, no known prefix
            [False, False, False, False],  # passed
        ]
    )
    assert torch.equal(failed_prefix_mask(segment_ids, mask, advantages), expected)
    # The tokens spare_failed_prefix scales are exactly these.
    weights = torch.full((4, 4), 2.0) * mask
    out = spare_failed_prefix(weights, segment_ids, mask, advantages, prefix_weight=0.5)
    assert torch.equal(out != weights, expected)


def test_spare_failed_prefix_segment_id_on_a_masked_position_is_not_an_onset():
    weights = torch.ones(1, 4)
    segment_ids = torch.tensor([[0, -1, 1, 1]])
    mask = torch.tensor([[False, True, True, True]])
    out = spare_failed_prefix(weights, segment_ids, mask, torch.tensor([-1.0]), prefix_weight=0.0)
    # the masked-out position is left as it is (weights there are 0 in the trainer), the model token before the
    # first real onset cut
    torch.testing.assert_close(out, torch.tensor([[1.0, 0.0, 1.0, 1.0]]))


def test_spare_failed_prefix_one_is_the_identity_and_bad_arguments_are_named():
    weights = torch.rand(2, 3)
    ids = torch.tensor([[-1, 0, 0], [-1, -1, 0]])
    mask = torch.ones(2, 3, dtype=torch.bool)
    assert spare_failed_prefix(weights, ids, mask, torch.tensor([-1.0, -1.0]), 1.0) is weights
    with pytest.raises(ValueError, match="prefix_weight"):
        spare_failed_prefix(weights, ids, mask, torch.tensor([-1.0, -1.0]), 1.5)
    with pytest.raises(ValueError, match="advantages"):
        spare_failed_prefix(weights, ids, mask, torch.tensor([[-1.0] * 3] * 2), 0.0)
    with pytest.raises(ValueError, match="segment_ids and mask"):
        spare_failed_prefix(weights, ids[:, :2], mask, torch.tensor([-1.0, -1.0]), 0.0)
