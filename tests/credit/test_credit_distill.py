"""`distillation_weight` (ours): GEAR's advantage blended with the teacher's sampled-token log-ratio, on hand-worked
examples, and its agreement with TRL's SDPO sampled-token distillation loss."""

import pytest
import torch

from gear_trl.credit import (
    agreement_advantages,
    bound_distill_signal,
    collapse_verdict,
    distill_advantages,
    distillation_gate,
    distillation_share,
    group_advantage_scale,
    group_has_outcome_signal,
)

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


def _sdpo_case(seed=0):
    torch.manual_seed(seed)
    b, t, v = 3, 5, 11
    student = torch.randn(b, t, v, requires_grad=True)
    teacher = torch.randn(b, t, v)
    ids = torch.randint(v, (b, t))
    mask = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 0, 0, 0], [1, 1, 1, 1, 0]], dtype=torch.bool)  # lengths 5, 2, 4
    return student, teacher, ids, mask, torch.tensor([0.8, -1.2, 0.4])


def _logps(logits, ids):
    return torch.log_softmax(logits, dim=-1).gather(-1, ids[..., None])[..., 0]


def _sdpo_terms(w=0.3):
    """The case, TRL's sampled-token distillation loss on it (per token) and GRPO's on-policy per-token loss with
    the rollouts' own advantages: (student, teacher, ids, mask, advantages, distill, policy, w)."""
    from trl.experimental.sdpo.loss_utils import compute_sampled_token_self_distillation_loss

    student, teacher, ids, mask, advantages = _sdpo_case()
    b, t, _ = student.shape
    distill = compute_sampled_token_self_distillation_loss(student, teacher, ids, distillation_alpha=1.0)
    policy = _policy_per_token(student, ids, advantages[:, None].expand(b, t))
    return student, teacher, ids, mask, advantages, distill, policy, w


def _per_sequence_mean(per_token, mask):
    """TRL's `loss_type="grpo"` aggregation, and the one SDPOTrainer gives its distillation loss whatever the loss
    type (trl/experimental/sdpo/sdpo_trainer.py, `_compute_self_distillation_loss`): per sequence, then the batch."""
    return ((per_token * mask).sum(-1) / mask.sum(-1).clamp(min=1)).mean()


def _token_mean(per_token, mask):
    """TRL's `loss_type="dapo"` aggregation (GRPOTrainer's default, and the recipes'): over every token."""
    return (per_token * mask).sum() / mask.sum()


def _policy_per_token(student, ids, per_token_advantages):
    lp = _logps(student, ids)
    return -torch.exp(lp - lp.detach()) * per_token_advantages  # on policy: importance ratio 1


def test_the_blend_gives_trls_sdpo_gradient_on_policy():
    """TRL's SDPOTrainer loss with `loss_type="grpo"`, (1 - w) * policy_loss + w * distillation_loss with its
    sampled-token distillation, both averaged per sequence and then over the batch, has on policy (importance ratio
    1) the gradient of GRPO's `grpo` loss with our blended advantages."""
    student, teacher, ids, mask, advantages, distill, policy, w = _sdpo_terms()
    theirs = (1 - w) * _per_sequence_mean(policy, mask) + w * _per_sequence_mean(distill, mask)
    (grad_theirs,) = torch.autograd.grad(theirs, student)
    delta = (_logps(teacher, ids) - _logps(student, ids)).detach()
    ours = _per_sequence_mean(_policy_per_token(student, ids, distill_advantages(advantages, delta, mask, w)), mask)
    (grad_ours,) = torch.autograd.grad(ours, student)
    torch.testing.assert_close(grad_ours, grad_theirs, atol=1e-6, rtol=1e-5)
    assert grad_ours.abs().sum() > 0


def test_under_token_aggregation_the_term_is_weighted_per_token_unlike_trls_sdpo():
    """Under `loss_type="dapo"` the blend's distillation term is aggregated as the policy term is, over every token:
    the gradient of (1 - w) * dapo(policy) + w * dapo(distillation). TRL's SDPOTrainer averages its distillation
    term per sequence whatever the loss type, so with completions of different lengths the two differ (a long
    completion's tokens weigh more here); docs/configuration.md says so."""
    student, teacher, ids, mask, advantages, distill, policy, w = _sdpo_terms()
    token_level = (1 - w) * _token_mean(policy, mask) + w * _token_mean(distill, mask)
    trls = (1 - w) * _token_mean(policy, mask) + w * _per_sequence_mean(distill, mask)
    (grad_token_level,) = torch.autograd.grad(token_level, student, retain_graph=True)
    (grad_trls,) = torch.autograd.grad(trls, student)
    delta = (_logps(teacher, ids) - _logps(student, ids)).detach()
    ours = _token_mean(_policy_per_token(student, ids, distill_advantages(advantages, delta, mask, w)), mask)
    (grad_ours,) = torch.autograd.grad(ours, student)
    torch.testing.assert_close(grad_ours, grad_token_level, atol=1e-6, rtol=1e-5)
    assert (grad_ours - grad_trls).abs().max() > 1e-3  # the lengths 5, 2 and 4 weigh differently


# `distillation_signal: agreement` (ours): (pT(y) - b) / sqrt(b (1 - b)), b = sum_v pS(v) pT(v), clipped at (G-1)/sqrt(G)


def test_agreement_by_hand():
    teacher_prob = torch.tensor([[1.0, 0.0, 0.9, 1.0], [0.5, 1.0, 0.3, 0.0]])
    expected = torch.tensor([[0.5, 0.5, 0.9, 1.0], [0.2, 0.0, 0.3, 0.999999]])
    mask = torch.tensor([[1, 1, 1, 1], [1, 1, 1, 0]], dtype=torch.bool)
    out = agreement_advantages(teacher_prob, expected, mask, group_size=8)
    bound = 7 / 8**0.5  # 2.4749: one success in a group of 8 under GRPO's sample-std normalization
    # row 0: a right token where the student was at even odds: +1; a wrong one: -1; the teacher's probability at its
    # expectation: 0; a student as sure as the teacher: b (1 - b) = 0, so 0
    # row 1: (0.5 - 0.2) / sqrt(0.16) = 0.75; b = 0: 0; p = b: 0; off the mask: 0 (and it would be clipped anyway)
    torch.testing.assert_close(out, torch.tensor([[1.0, -1.0, 0.0, 0.0], [0.75, 0.0, 0.0, 0.0]]))
    sure = agreement_advantages(torch.tensor([[0.0, 1.0]]), torch.tensor([[0.99, 0.01]]), torch.ones(1, 2).bool(), 8)
    torch.testing.assert_close(sure, torch.tensor([[-bound, bound]]))  # -9.95 and +9.95 clipped


def test_agreement_is_grpos_group_normalization_in_the_limit():
    # A teacher sure of the right token r: the value is r's indicator normalized over the student's samples, which is
    # what GRPO's normalization of G Bernoulli(pS(r)) outcomes tends to as G grows.
    p_right = 0.3
    teacher_prob = torch.tensor([[1.0, 0.0]])  # the sampled token right, then wrong
    out = agreement_advantages(teacher_prob, torch.full((1, 2), p_right), torch.ones(1, 2).bool(), group_size=64)
    outcomes = (torch.rand(200_000, generator=torch.Generator().manual_seed(0)) < p_right).float()
    grpo = (torch.tensor([1.0, 0.0]) - outcomes.mean()) / outcomes.std()
    torch.testing.assert_close(out[0], grpo, atol=5e-3, rtol=0)


def test_agreement_has_mean_zero_under_the_student():
    # E_{y ~ pS}[pT(y)] - b = 0 for any teacher: the term adds no drift of its own to a token's expected push.
    generator = torch.Generator().manual_seed(1)
    ps = torch.randn(5, 7, generator=generator).softmax(-1)
    pt = torch.randn(5, 7, generator=generator).softmax(-1)
    b = (ps * pt).sum(-1, keepdim=True).expand(5, 7)
    values = agreement_advantages(pt, b, torch.ones(5, 7).bool(), group_size=1000)
    torch.testing.assert_close((ps * values).sum(-1), torch.zeros(5), atol=1e-6, rtol=0)


def test_agreement_refuses_bad_shapes_and_groups():
    ones = torch.ones(2, 3)
    with pytest.raises(ValueError, match="must all be"):
        agreement_advantages(ones, torch.ones(2, 4), ones.bool(), 4)
    with pytest.raises(ValueError, match="group_size"):
        agreement_advantages(ones, ones, ones.bool(), 1)


# -- bounded and gated distillation (issue 73) ------------------------------------------------------------------------


def test_group_signal_by_hand():
    # groups of 3: all failed; mixed; all passed; one scored row of 0.5 among NaNs (no signal); 0.5 vs 0.5 and NaN
    rewards = torch.tensor([0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 1.0, 1.0, 1.0,
                            float("nan"), 0.5, float("nan"), 0.5, float("nan"), 0.5])  # fmt: skip
    out = group_has_outcome_signal(rewards, 3)
    assert out.tolist() == [False] * 3 + [True] * 3 + [False] * 3 + [False] * 3 + [False] * 3
    # continuous rewards differing in the last place still count: the comparison is exact
    point = torch.tensor(0.3)
    next_up = torch.nextafter(point, torch.tensor(1.0))
    assert group_has_outcome_signal(torch.stack([point, point, next_up]), 3).all()
    with pytest.raises(ValueError, match="groups of group_size"):
        group_has_outcome_signal(torch.zeros(5), 2)


def test_group_scale_by_hand():
    # one advantage per rollout: groups (1, -1) and (0.5, -1.5): mean |A| 1 and 1
    torch.testing.assert_close(group_advantage_scale(torch.tensor([1.0, -1.0, 0.5, -1.5]), None, 2),
                               torch.tensor([1.0, 1.0, 1.0, 1.0]))  # fmt: skip
    # per token: row means of |A| over model tokens (2, 1) and (0, 0): group scales 1.5 and 0
    adv = torch.tensor([[2.0, -2.0, 9.0], [1.0, 0.0, 0.0], [0.0, 0.0, 0.0], [0.0, 0.0, 5.0]])
    mask = torch.tensor([[1, 1, 0], [1, 0, 0], [1, 1, 1], [1, 1, 0]], dtype=torch.bool)
    torch.testing.assert_close(group_advantage_scale(adv, mask, 2), torch.tensor([1.5, 1.5, 0.0, 0.0]))


def test_the_gates_by_hand():
    signal = torch.tensor([True, True, False, False])
    adv = torch.tensor([1.0, -1.0, 0.0, 0.0])
    mask = torch.ones(4, 2, dtype=torch.bool)
    assert distillation_gate("none", signal, adv, mask).tolist() == [True] * 4
    assert distillation_gate("mixed", signal, adv, mask).tolist() == [True, True, False, False]
    assert distillation_gate("failed", signal, adv, mask).tolist() == [False, True, False, False]
    # per-token advantages: failed where the row's sum over model tokens is negative
    per_token = torch.tensor([[0.5, -2.0], [1.0, 1.0], [0.0, 0.0], [0.0, 0.0]])
    assert distillation_gate("failed", signal, per_token, mask).tolist() == [True, False, False, False]
    with pytest.raises(ValueError, match="gate must be one of"):
        distillation_gate("all", signal, adv, mask)


def test_a_gated_row_keeps_its_outcome_advantage_in_the_blend():
    # the gate only narrows `valid`: the mixed group's rows blend, the uniform group's rows keep A (0 there)
    adv = torch.tensor([1.0, -1.0, 0.0, 0.0])
    delta = torch.tensor([[0.4, -0.2], [1.0, 0.6], [2.0, 3.0], [-1.0, 0.5]])
    mask = torch.ones(4, 2, dtype=torch.bool)
    rows = distillation_gate("mixed", torch.tensor([True, True, False, False]), adv, mask)
    out = distill_advantages(adv, delta, mask, 0.5, rows)
    expected = torch.tensor([[0.7, 0.4], [0.0, -0.2], [0.0, 0.0], [0.0, 0.0]])
    torch.testing.assert_close(out, expected)


def test_clip_and_bound_by_hand():
    dense = torch.tensor([[0.5, -3.0, 0.1], [2.0, -0.05, 1.0]])
    # defaults: the very same tensor (the blend is bitwise what it was)
    assert bound_distill_signal(dense, 0.5) is dense
    torch.testing.assert_close(bound_distill_signal(dense, 0.5, clip=0.2),
                               torch.tensor([[0.2, -0.2, 0.1], [0.2, -0.05, 0.2]]))  # fmt: skip
    # bound b = 0.5 on w * delta with w = 0.5: |delta| <= b * s / w = s; row scales 1.0 and 0.0
    scale = torch.tensor([1.0, 0.0])
    torch.testing.assert_close(bound_distill_signal(dense, 0.5, bound=0.5, scale=scale),
                               torch.tensor([[0.5, -1.0, 0.1], [0.0, 0.0, 0.0]]))  # fmt: skip
    # both: the tighter limit per token
    torch.testing.assert_close(bound_distill_signal(dense, 0.5, clip=0.3, bound=0.5, scale=scale),
                               torch.tensor([[0.3, -0.3, 0.1], [0.0, 0.0, 0.0]]))  # fmt: skip
    # the weighted term never exceeds b * s: a failed row's push is at most half its group's outcome scale
    blended = distill_advantages(torch.tensor([1.0, 0.0]), bound_distill_signal(dense, 0.5, bound=0.5, scale=scale),
                                 torch.ones(2, 3, dtype=torch.bool), 0.5)  # fmt: skip
    torch.testing.assert_close(blended, torch.tensor([[0.75, 0.0, 0.55], [0.0, 0.0, 0.0]]))
    with pytest.raises(ValueError, match="bound needs scale"):
        bound_distill_signal(dense, 0.5, bound=1.0)
    with pytest.raises(ValueError, match="clip must be > 0"):
        bound_distill_signal(dense, 0.5, clip=0.0)


def test_collapse_verdict_by_hand():
    w = 3
    # share above 0.5 over the last window while the reward fell below its first window: fires on the share rule
    share = [0.1, 0.1, 0.1, 0.2, 0.9, 1.0]
    reward = [0.4, 0.3, 0.5, 0.1, 0.0, 0.0]
    v = collapse_verdict(share, reward, window=w)
    assert v["fires"] and v["rule"] == "share"
    assert v["share"] == pytest.approx(0.7) and v["reward_trend"] == pytest.approx(0.1 / 3 - 0.4)
    # the same share with the reward rising (groups all pass early on): quiet
    assert not collapse_verdict(share, [0.0, 0.0, 0.1, 0.3, 0.5, 0.6], window=w)["fires"]
    # too short to judge: two windows are needed
    assert collapse_verdict(share[:5], reward[:5], window=w) == {
        "fires": False,
        "rule": None,
        "share": pytest.approx(0.4),
        "reward_trend": None,
        "entropy_trend": None,
    }
    # None steps are skipped in the means
    assert collapse_verdict([None, None, None, 0.9, None, 0.8], reward, window=w)["share"] == pytest.approx(0.85)
    # entropy up 20% (> 10%) with the reward down: fires on the entropy rule, with a low share
    low = [0.1] * 6
    entropy = [1.0, 1.0, 1.0, 1.2, 1.2, 1.2]
    v = collapse_verdict(low, reward, entropy, window=w)
    assert v["fires"] and v["rule"] == "entropy" and v["entropy_trend"] == pytest.approx(0.2)
    # entropy up only 5%: quiet; entropy up with the reward rising: quiet
    assert not collapse_verdict(low, reward, [1.0, 1.0, 1.0, 1.05, 1.05, 1.05], window=w)["fires"]
    assert not collapse_verdict(low, [0.0] * 3 + [0.5] * 3, entropy, window=w)["fires"]
