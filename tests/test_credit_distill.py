"""`distillation_weight` (ours): GEAR's advantage blended with the teacher's sampled-token log-ratio, on hand-worked
examples, and its agreement with TRL's SDPO sampled-token distillation loss."""

import pytest
import torch

from gear_trl.credit import distill_advantages, distillation_share

A = torch.tensor([1.0, -0.5])  # a passed and a failed rollout
DELTA = torch.tensor([[0.2, -1.0, 0.0], [0.4, 3.0, 0.7]])  # log pT - log pS of the sampled tokens
MASK = torch.tensor([[1, 1, 0], [1, 1, 1]], dtype=torch.bool)


def test_the_blend_by_hand():
    out = distill_advantages(A, DELTA, MASK, 0.5)
    # row 0: 0.5 * 1 + 0.5 * 0.2, 0.5 * 1 - 0.5 * 1.0; its padding keeps A
    # row 1: -0.25 + 0.2, -0.25 + 1.5 (a failed rollout's token the teacher supports gets a positive advantage), ...
    expected = torch.tensor([[0.6, 0.0, 1.0], [-0.05, 1.25, 0.1]])
    torch.testing.assert_close(out, expected)
    assert out.dtype == torch.float32 and out.shape == DELTA.shape


def test_rows_without_a_teacher_keep_their_advantage():
    out = distill_advantages(A, DELTA, MASK, 0.5, valid=torch.tensor([True, False]))
    torch.testing.assert_close(out[1], torch.full((3,), -0.5))
    torch.testing.assert_close(out[0], torch.tensor([0.6, 0.0, 1.0]))


def test_the_ends_of_the_blend():
    torch.testing.assert_close(distill_advantages(A, DELTA, MASK, 0.0), A[:, None].expand(2, 3))
    pure = distill_advantages(A, DELTA, MASK, 1.0)
    torch.testing.assert_close(pure[MASK], DELTA[MASK])  # distillation alone: the outcome plays no part
    # per-token advantages (GEAR's A_i * w_t) blend token by token
    per_token = torch.tensor([[2.0, 0.0, 9.0], [-1.0, -0.2, 0.0]])
    out = distill_advantages(per_token, DELTA, MASK, 0.25)
    torch.testing.assert_close(out, torch.tensor([[1.55, -0.25, 9.0], [-0.65, 0.6, 0.175]]))


def test_bad_shapes_and_weights_are_refused():
    with pytest.raises(ValueError, match="advantages must be"):
        distill_advantages(torch.ones(3), DELTA, MASK, 0.5)
    with pytest.raises(ValueError, match="log_ratio and mask"):
        distill_advantages(A, DELTA, MASK[:, :2], 0.5)
    with pytest.raises(ValueError, match="weight must be in"):
        distill_advantages(A, DELTA, MASK, 1.5)


def test_the_share_by_hand():
    dense, total = distillation_share(A, DELTA, MASK, 0.5, torch.tensor([True, True])).tolist()
    # dense: 0.5 * (0.2 + 1.0) + 0.5 * (0.4 + 3.0 + 0.7) = 2.65; outcome: 0.5 * (1 + 1) + 0.5 * 0.5 * 3 = 1.75
    assert dense == pytest.approx(2.65) and total == pytest.approx(4.4)
    dense, total = distillation_share(A, DELTA, MASK, 0.5, torch.tensor([True, False])).tolist()
    assert dense == pytest.approx(0.6) and total == pytest.approx(1.6)


def test_the_blend_gives_trls_sdpo_gradient_on_policy():
    """TRL's SDPOTrainer loss, (1 - w) * policy_loss + w * distillation_loss with its sampled-token distillation, has
    on policy (importance ratio 1) the gradient of GRPO's loss with our blended advantages, both summed over the
    completion mask and divided by its size (DAPO's aggregation, TRL's default)."""
    from trl.experimental.sdpo.loss_utils import compute_sampled_token_self_distillation_loss

    torch.manual_seed(0)
    b, t, v, w = 3, 5, 11, 0.3
    student = torch.randn(b, t, v, requires_grad=True)
    teacher = torch.randn(b, t, v)
    ids = torch.randint(v, (b, t))
    mask = torch.rand(b, t) > 0.2
    advantages = torch.tensor([0.8, -1.2, 0.4])

    def logps(logits):
        return torch.log_softmax(logits, dim=-1).gather(-1, ids[..., None])[..., 0]

    def policy_loss(per_token_advantages):
        lp = logps(student)
        ratio = torch.exp(lp - lp.detach())
        return -(ratio * per_token_advantages * mask).sum() / mask.sum()

    distill = compute_sampled_token_self_distillation_loss(student, teacher, ids, distillation_alpha=1.0)
    theirs = (1 - w) * policy_loss(advantages[:, None].expand(b, t)) + w * (distill * mask).sum() / mask.sum()
    (grad_theirs,) = torch.autograd.grad(theirs, student)
    delta = (logps(teacher) - logps(student)).detach()
    ours = policy_loss(distill_advantages(advantages, delta, mask, w))
    (grad_ours,) = torch.autograd.grad(ours, student)
    torch.testing.assert_close(grad_ours, grad_theirs, atol=1e-6, rtol=1e-5)
    assert grad_ours.abs().sum() > 0
