"""Hand-worked examples for gear_trl.credit.rlsd (RLSD's token weights, `credit: rlsd`)."""

import math

import pytest
import torch

from gear_trl.credit import rlsd_lambda, rlsd_token_weights

# delta_t = log pT(y_t) - log pS(y_t): 0.1 (teacher slightly prefers the token), -1.0 (teacher rejects it), 0.0
DELTA = torch.tensor([[0.1, -1.0, 0.0, 5.0], [0.1, -1.0, 0.0, 5.0]])
MASK = torch.tensor([[1, 1, 1, 0], [1, 1, 1, 1]], dtype=torch.bool)


def test_defaults_are_rlsds_and_the_weight_is_not_rescaled():
    # lam 0.5, eps 0.2. Row 0, A > 0: exp(0.1) = 1.10517 (inside the clip) -> 0.5 + 0.5 * 1.10517 = 1.052585;
    # exp(-1) = 0.368 clipped to 0.8 -> 0.9; exp(0) -> 1; t3 masked -> 0.
    # Row 1, A < 0: exp(-0.1) = 0.904837 -> 0.952419; exp(1) clipped to 1.2 -> 1.1; 1; exp(-5) clipped to 0.8 -> 0.9.
    weights = rlsd_token_weights(DELTA, MASK, torch.tensor([1.0, -2.0]))
    expected = torch.tensor([[0.5 + 0.5 * math.exp(0.1), 0.9, 1.0, 0.0], [0.5 + 0.5 * math.exp(-0.1), 1.1, 1.0, 0.9]])
    torch.testing.assert_close(weights, expected)
    assert weights[0, :3].mean() != pytest.approx(1.0)  # no rescaling to mean 1, unlike GEAR's weight_norm: mean


def test_negative_only_leaves_positive_and_zero_advantages_at_one():
    weights = rlsd_token_weights(DELTA, MASK, torch.tensor([1.0, -2.0]), negative_only=True)
    assert weights[0].tolist() == [1.0, 1.0, 1.0, 0.0]
    torch.testing.assert_close(weights[1], torch.tensor([0.5 + 0.5 * math.exp(-0.1), 1.1, 1.0, 0.9]))
    zero = rlsd_token_weights(DELTA, MASK, torch.tensor([0.0, 0.0]))
    assert zero.tolist() == MASK.float().tolist()


def test_per_token_advantages_take_their_sign_token_by_token():
    advantages = torch.tensor([[1.0, -1.0, 1.0, 1.0], [-1.0, 1.0, 1.0, 1.0]])
    weights = rlsd_token_weights(DELTA, MASK, advantages, lam=1.0, eps=0.5)
    # t0 row 0: exp(0.1); t1 row 0 (A < 0): exp(1) clipped to 1.5; t0 row 1 (A < 0): exp(-0.1); t1 row 1: exp(-1) -> 0.5
    torch.testing.assert_close(weights[:, :2], torch.tensor([[math.exp(0.1), 1.5], [math.exp(-0.1), 0.5]]))


def test_gear_formula_is_rlsds_without_segments_and_rescaling():
    # GEAR's weights with s_t = -delta (log pS - log pT) as a "token" signal would be max-normalized; with alpha = 1
    # the unnormalized formula exp(-sign(A) * s_t) is RLSD's exp(sign(A) * delta).
    from gear_trl.credit import weights_from_signal

    advantages = torch.tensor([1.0, -2.0])
    gear = weights_from_signal(-DELTA, MASK, advantages, alpha=1.0, eps=0.2, lam=0.5, weight_norm="none")
    torch.testing.assert_close(gear, rlsd_token_weights(DELTA, MASK, advantages))


def test_lambda_decays_linearly_to_zero():
    assert rlsd_lambda(0.5, 0, None) == rlsd_lambda(0.5, 1000, 0) == 0.5
    assert rlsd_lambda(0.5, 0, 100) == 0.5
    assert rlsd_lambda(0.5, 25, 100) == pytest.approx(0.375)
    assert rlsd_lambda(0.5, 100, 100) == rlsd_lambda(0.5, 150, 100) == 0.0
    weights = rlsd_token_weights(DELTA, MASK, torch.tensor([1.0, -2.0]), lam=rlsd_lambda(0.5, 100, 100))
    assert weights.tolist() == MASK.float().tolist()  # lam 0: GRPO


@pytest.mark.parametrize(
    "kwargs, message",
    [({"lam": 1.5}, "lam"), ({"eps": 1.0}, "eps"), ({"advantages": torch.ones(3)}, "advantages")],
)
def test_invalid_arguments(kwargs, message):
    arguments = {"advantages": torch.ones(2), **kwargs}
    with pytest.raises(ValueError, match=message):
        rlsd_token_weights(DELTA, MASK, **arguments)
