"""Hand-worked checks of GiGPO credit assignment (gear_trl/credit/gigpo.py)."""

import difflib
import math

import pytest
import torch

from gear_trl.credit.gigpo import (
    gigpo_advantages,
    gigpo_advantages_with_stats,
    step_advantages_to_tokens,
    step_index_from_mask,
)

EPS = 1e-6


def _close(actual, expected):
    expected = torch.tensor(expected, dtype=torch.float32)
    assert actual.dtype == torch.float32
    assert actual.shape == expected.shape
    torch.testing.assert_close(actual, expected, atol=1e-5, rtol=1e-5)


def _batch_two_groups():
    # Interleaved batch: rollouts 0, 2 in group 7 and 1, 3, 4 in group 3.
    # Anchor "s" appears in both groups and must not be pooled across them.
    rewards = torch.tensor([1.0, 2.0, 0.0, 0.0, 1.0])
    group_ids = torch.tensor([7, 3, 7, 3, 3])
    anchors = [["s", "a"], ["s", "c"], ["s", "b"], ["s"], ["t", "c"]]
    return rewards, group_ids, anchors


def test_two_groups_shared_states_mean():
    # gamma = 0.5, mode mean.
    # Group 7: R = [1, 0] -> A_E = +-0.5; step returns [0.5, 1] and [0, 0];
    #   "s" = {0.5, 0} -> +-0.25; "a", "b" singletons -> 0.
    # Group 3: R = [2, 0, 1] -> A_E = [1, -1, 0]; returns [1, 2], [0], [0.5, 1];
    #   "s" = {1, 0} -> +-0.5; "c" = {2, 1} -> +-0.5; "t" singleton -> 0.
    rewards, group_ids, anchors = _batch_two_groups()
    advs, stats = gigpo_advantages_with_stats(rewards, group_ids, anchors, gamma=0.5, mode="mean")
    _close(advs[0], [0.75, 0.5])
    _close(advs[1], [1.5, 1.5])
    _close(advs[2], [-0.75, -0.5])
    _close(advs[3], [-1.5])
    _close(advs[4], [0.0, -0.5])
    # Step groups: {s, a, b} in group 7 and {s, c, t} in group 3; a, b, t singletons.
    assert stats["num_steps"] == 9.0
    assert stats["num_step_groups"] == 6.0
    assert stats["singleton_step_group_frac"] == pytest.approx(0.5)
    step_only = [0.25, 0, 0.5, 0.5, -0.25, 0, -0.5, 0, -0.5]
    assert stats["step_adv_std"] == pytest.approx(float(torch.tensor(step_only).std()), abs=1e-6)
    # The wrapper returns the same advantages.
    plain = gigpo_advantages(rewards, group_ids, anchors, gamma=0.5, mode="mean")
    for a, b in zip(plain, advs):
        torch.testing.assert_close(a, b)


def test_mean_std_mode_hand_worked():
    # R = [3, 0, 0]: mean 1, deviations [2, -1, -1], unbiased var 6 / 2 = 3.
    # One step each on the same anchor: step returns equal R, so A_S = A_E.
    rewards = torch.tensor([3.0, 0.0, 0.0])
    advs = gigpo_advantages(rewards, torch.tensor([0, 0, 0]), [["s"], ["s"], ["s"]])
    std = math.sqrt(3.0)
    a = [2 / (std + EPS), -1 / (std + EPS), -1 / (std + EPS)]
    for i in range(3):
        _close(advs[i], [2 * a[i]])
    mean = gigpo_advantages(rewards, torch.tensor([0, 0, 0]), [["s"], ["s"], ["s"]], mode="mean")
    for i, dev in enumerate([2.0, -1.0, -1.0]):
        _close(mean[i], [2 * dev])


def test_episode_advantage_is_per_episode_not_per_step_row():
    # A 3-step rollout must not weigh 3x in the group mean/std.
    rewards = torch.tensor([1.0, 0.0])
    advs = gigpo_advantages(rewards, torch.tensor([0, 0]), [["x", "y", "z"], ["w"]])
    a_e = 0.5 / (math.sqrt(0.5) + EPS)
    _close(advs[0], [a_e, a_e, a_e])
    _close(advs[1], [-a_e])


def test_singleton_step_groups_give_zero_step_advantage():
    rewards = torch.tensor([1.0, 0.0])
    advs, stats = gigpo_advantages_with_stats(rewards, torch.tensor([0, 0]), [["a", "b"], ["c", "d"]], mode="mean")
    _close(advs[0], [0.5, 0.5])
    _close(advs[1], [-0.5, -0.5])
    assert stats["singleton_step_group_frac"] == 1.0
    assert stats["step_adv_std"] == 0.0


def test_repeated_anchor_within_one_rollout_forms_one_group():
    # Single rollout (group of size 1 -> A_E = 0) revisiting "x" three times.
    # gamma = 0.5, R = 1: returns [0.25, 0.5, 1], mean 7/12.
    advs, stats = gigpo_advantages_with_stats(
        torch.tensor([1.0]), torch.tensor([0]), [["x", "x", "x"]], gamma=0.5, mode="mean"
    )
    _close(advs[0], [-4 / 12, -1 / 12, 5 / 12])
    assert stats["num_step_groups"] == 1.0
    # mean_std: unbiased var = (16 + 1 + 25) / 144 / 2, std = sqrt(21) / 12.
    advs = gigpo_advantages(torch.tensor([1.0]), torch.tensor([0]), [["x", "x", "x"]], gamma=0.5)
    std = math.sqrt(21) / 12
    _close(advs[0], [(-4 / 12) / (std + EPS), (-1 / 12) / (std + EPS), (5 / 12) / (std + EPS)])


def test_group_of_size_one_has_zero_episode_advantage():
    advs = gigpo_advantages(torch.tensor([5.0]), torch.tensor([0]), [["a", "b"]])
    _close(advs[0], [0.0, 0.0])
    advs = gigpo_advantages(torch.tensor([5.0]), torch.tensor([0]), [["a", "b"]], mode="mean")
    _close(advs[0], [0.0, 0.0])


def test_all_equal_returns_give_zero():
    # 0.1 averages with rounding error; the result must still be exactly 0.
    advs = gigpo_advantages(torch.tensor([0.1, 0.1, 0.1]), torch.tensor([0, 0, 0]), [["s"]] * 3)
    for adv in advs:
        assert adv.tolist() == [0.0]


def test_discounted_returns_three_steps():
    # gamma = 0.9, R = [1, 0], same anchors a, b, c, mode mean.
    # Rollout 0 returns [0.81, 0.9, 1]; rollout 1 returns [0, 0, 0].
    # A_S rollout 0 = [0.405, 0.45, 0.5]; A_E = +-0.5.
    advs = gigpo_advantages(
        torch.tensor([1.0, 0.0]),
        torch.tensor([0, 0]),
        [["a", "b", "c"], ["a", "b", "c"]],
        gamma=0.9,
        mode="mean",
    )
    _close(advs[0], [0.905, 0.95, 1.0])
    _close(advs[1], [-0.905, -0.95, -1.0])


def test_step_rewards_supplied():
    # gamma = 0.5. Rollout 0 rewards [1, 0, 2] -> returns [1.5, 1, 2];
    # rollout 1 rewards [0, 1, 0] -> returns [0.5, 1, 0].
    # Groups: a {1.5, 0.5} -> +-0.5; b {1, 1} -> 0; c {2, 0} -> +-1.
    # Episode R = [3, 1] -> A_E = +-1 (episode returns come from `rewards`).
    advs = gigpo_advantages(
        torch.tensor([3.0, 1.0]),
        torch.tensor([0, 0]),
        [["a", "b", "c"], ["a", "b", "c"]],
        step_rewards=[[1.0, 0.0, 2.0], [0.0, 1.0, 0.0]],
        gamma=0.5,
        mode="mean",
    )
    _close(advs[0], [1.5, 1.0, 2.0])
    _close(advs[1], [-1.5, -1.0, -2.0])


def test_omega_scales_step_term_only():
    rewards, group_ids, anchors = _batch_two_groups()
    kwargs = {"gamma": 0.5, "mode": "mean"}
    episode_only = gigpo_advantages(rewards, group_ids, anchors, omega=0.0, **kwargs)
    # omega = 0 leaves A_E broadcast over steps.
    _close(episode_only[0], [0.5, 0.5])
    _close(episode_only[1], [1.0, 1.0])
    one = gigpo_advantages(rewards, group_ids, anchors, omega=1.0, **kwargs)
    half = gigpo_advantages(rewards, group_ids, anchors, omega=0.5, **kwargs)
    for e, o, h in zip(episode_only, one, half):
        torch.testing.assert_close(h, e + 0.5 * (o - e))
    _close(half[0], [0.625, 0.5])


def test_similarity_grouping():
    near_a = "You are in room 1. You see a key."
    near_b = "You are in room 1. You see a key!"
    other = "Nothing here matches that sentence"
    assert difflib.SequenceMatcher(None, near_a, near_b).ratio() >= 0.95
    assert difflib.SequenceMatcher(None, near_a, other).ratio() < 0.95
    rewards = torch.tensor([1.0, 0.0, 0.0, 0.0])
    group_ids = torch.tensor([0, 0, 1, 1])
    anchors = [[near_a], [near_b], [near_a], [other]]
    exact, exact_stats = gigpo_advantages_with_stats(rewards, group_ids, anchors, mode="mean")
    _close(exact[0], [0.5])
    assert exact_stats["num_step_groups"] == 4.0
    similar, stats = gigpo_advantages_with_stats(rewards, group_ids, anchors, mode="mean", similarity_threshold=0.95)
    # Group 0: near-identical anchors pooled, step returns {1, 0} -> +-0.5.
    _close(similar[0], [1.0])
    _close(similar[1], [-1.0])
    # Group 1: different strings stay apart (and group 0's anchors are not seen).
    _close(similar[2], [0.0])
    _close(similar[3], [0.0])
    assert stats["num_step_groups"] == 3.0


def test_similarity_clusters_against_first_member():
    # b is close to a and c is close to b, but c is not close to a: greedy
    # clustering compares with the representative, so c opens its own group.
    a, b, c = "a" * 40, "a" * 38 + "bb", "a" * 36 + "bbbb"
    ratio = lambda x, y: difflib.SequenceMatcher(None, x, y).ratio()
    assert ratio(a, b) >= 0.95 and ratio(b, c) >= 0.95 and ratio(a, c) < 0.95
    _, stats = gigpo_advantages_with_stats(
        torch.tensor([1.0, 0.0, 0.5]),
        torch.tensor([0, 0, 0]),
        [[a], [b], [c]],
        similarity_threshold=0.95,
    )
    assert stats["num_step_groups"] == 2.0


def test_non_string_anchors_match_exactly():
    advs = gigpo_advantages(
        torch.tensor([1.0, 0.0]),
        torch.tensor([0, 0]),
        [[("room", 1)], [("room", 1)]],
        mode="mean",
        similarity_threshold=0.5,
    )
    _close(advs[0], [1.0])
    _close(advs[1], [-1.0])


def test_empty_rollouts():
    # The empty rollout still counts in its group's episode statistics.
    advs = gigpo_advantages(torch.tensor([1.0, 0.0]), torch.tensor([0, 0]), [["s"], []], mode="mean")
    _close(advs[0], [0.5])
    assert advs[1].shape == (0,) and advs[1].dtype == torch.float32
    advs, stats = gigpo_advantages_with_stats(torch.tensor([1.0]), torch.tensor([0]), [[]])
    assert advs[0].shape == (0,)
    assert stats["num_step_groups"] == 0.0 and stats["singleton_step_group_frac"] == 0.0
    assert gigpo_advantages(torch.zeros(0), torch.zeros(0, dtype=torch.long), []) == []


def test_step_index_from_mask():
    mask = torch.tensor(
        [
            [0, 1, 1, 0, 0, 1, 0, 1],
            [1, 1, 0, 0, 0, 0, 0, 0],
            [0, 0, 0, 0, 0, 0, 0, 0],
        ],
        dtype=torch.bool,
    )
    expected = torch.tensor(
        [
            [-1, 0, 0, -1, -1, 1, -1, 2],
            [0, 0, -1, -1, -1, -1, -1, -1],
            [-1, -1, -1, -1, -1, -1, -1, -1],
        ]
    )
    out = step_index_from_mask(mask)
    assert out.dtype == torch.long
    assert torch.equal(out, expected)


def test_step_advantages_to_tokens():
    step_index = torch.tensor(
        [
            [-1, 0, 0, -1, -1, 1, -1, 2],
            [0, 0, -1, -1, -1, -1, -1, -1],
            [-1, -1, -1, -1, -1, -1, -1, -1],
        ]
    )
    step_advs = [torch.tensor([1.0, 2.0, 3.0]), torch.tensor([5.0]), torch.zeros(0)]
    out = step_advantages_to_tokens(step_advs, step_index)
    _close(
        out,
        [
            [0, 1, 1, 0, 0, 2, 0, 3],
            [5, 5, 0, 0, 0, 0, 0, 0],
            [0, 0, 0, 0, 0, 0, 0, 0],
        ],
    )
    with pytest.raises(ValueError, match="step_advs"):
        step_advantages_to_tokens(step_advs[:2], step_index)
    past_end = step_index.clone()
    past_end[1, 0] = 1
    with pytest.raises(ValueError, match=r"step 1 but step_advs\[1\] has only 1"):
        step_advantages_to_tokens(step_advs, past_end)
    with pytest.raises(ValueError, match="step_index"):
        step_advantages_to_tokens(step_advs, step_index.float())


def test_end_to_end_mask_to_token_advantages():
    mask = torch.tensor([[1, 1, 0, 1], [1, 0, 0, 0]], dtype=torch.bool)
    advs = gigpo_advantages(
        torch.tensor([1.0, 0.0]), torch.tensor([0, 0]), [["p", "o"], ["p"]], gamma=1.0, mode="mean"
    )
    out = step_advantages_to_tokens(advs, step_index_from_mask(mask))
    # "p" returns {1, 0} -> +-0.5; "o" singleton; A_E = +-0.5.
    _close(out, [[1.0, 1.0, 0.0, 0.5], [-1.0, 0.0, 0.0, 0.0]])


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"group_ids": torch.tensor([0, 0, 0])}, "group_ids"),
        ({"step_anchors": [["a"]]}, "step_anchors"),
        ({"step_anchors": ["ab", ["a"]]}, r"step_anchors\[0\]"),
        ({"step_anchors": [[["unhashable"]], ["a"]]}, r"step_anchors\[0\]\[0\]"),
        ({"step_rewards": [[1.0]]}, "step_rewards"),
        ({"step_rewards": [[1.0, 2.0], [0.0]]}, r"step_rewards\[0\]"),
        ({"mode": "median"}, "mean_std"),
        ({"gamma": 1.5}, "gamma"),
        ({"gamma": -0.1}, "gamma"),
        ({"similarity_threshold": 0.0}, "similarity_threshold"),
        ({"similarity_threshold": 1.5}, "similarity_threshold"),
        ({"rewards": torch.ones(2, 1)}, "rewards"),
        ({"rewards": torch.tensor([1.0, float("nan")])}, "rewards"),
        ({"group_ids": torch.tensor([0.0, 0.0])}, "group_ids"),
    ],
)
def test_bad_inputs_raise(kwargs, match):
    args = {
        "rewards": torch.tensor([1.0, 0.0]),
        "group_ids": torch.tensor([0, 0]),
        "step_anchors": [["a"], ["a"]],
    }
    args.update(kwargs)
    rewards = args.pop("rewards")
    group_ids = args.pop("group_ids")
    step_anchors = args.pop("step_anchors")
    with pytest.raises(ValueError, match=match):
        gigpo_advantages(rewards, group_ids, step_anchors, **args)


def test_mode_error_lists_valid_modes():
    with pytest.raises(ValueError, match=r"mean_std.*mean"):
        gigpo_advantages(torch.tensor([1.0]), torch.tensor([0]), [["a"]], mode="bogus")


# -- GiGPO as its mode record's `steps`, through `group_credit` (what the trainer calls) -------------------------------


def run_ranks(batches, mode, settings):
    """`group_credit` on each simulated rank's `GroupBatch`, with a `gather_object` that returns every rank's lists in
    rank order: a first round records what each rank sends, a second computes with the whole batch's."""
    from dataclasses import replace

    from gear_trl.credit import group_credit

    sent = {}

    def recording(rank):
        def gather(local):
            sent[rank] = local
            return local * len(batches)  # the right length; the numbers of this round are thrown away

        return gather

    for rank, batch in enumerate(batches):
        group_credit(mode, settings, replace(batch, rank=rank, gather_object=recording(rank)))

    def everyone(local):
        return [row for rank in sorted(sent) for row in sent[rank]]

    return [group_credit(mode, settings, replace(b, rank=r, gather_object=everyone)) for r, b in enumerate(batches)]


def test_gigpo_record_computes_step_advantages_across_ranks_by_hand():
    """One group of 2 split over two ranks. Rank 0's row has two token runs but one anchor ("a"), so its second run
    gets the unmatched anchor "unmatched:0:0:1" (a singleton step group); rank 1's row has one run and two anchors
    (the second dropped). mode `mean`, gamma 1, omega 1, returns (1, 0):
    A_E = (+0.5, -0.5); step group "a" holds returns (1, 0) -> A_S = (+0.5, -0.5); the singleton's A_S = 0.
    Rank 0's tokens: 1.0, 1.0, (tool), 0.5; rank 1's: -1.0 then padding."""
    from types import SimpleNamespace

    from gear_trl.credit import GroupBatch, credit_mode

    settings = SimpleNamespace(gigpo_gamma=1.0, gigpo_omega=1.0, gigpo_mode="mean", gigpo_similarity_threshold=None,
                               distillation_weight=0.0, distillation_signal="log_ratio", distillation_gate="mixed",
                               distillation_clip=None, distillation_bound=0.5)  # fmt: skip
    rewards = torch.tensor([[1.0], [0.0]])
    common = {"rewards_per_func": rewards, "reward_weights": torch.tensor([1.0]), "group_size": 2}
    batches = [
        GroupBatch(mask=torch.tensor([[True, True, False, True]]), advantages=torch.zeros(1), anchors=lambda: [["a"]],
                   **common),
        GroupBatch(mask=torch.tensor([[True, False, False, False]]), advantages=torch.zeros(1),
                   anchors=lambda: [["a", "b"]], **common),
    ]  # fmt: skip
    rank0, rank1 = run_ranks(batches, credit_mode("gigpo"), settings)
    _close(rank0.advantages, [[1.0, 1.0, 0.0, 0.5]])
    _close(rank1.advantages, [[-1.0, 0.0, 0.0, 0.0]])
    # step groups "a" and the singleton; A_S over the steps (0.5, 0, -0.5): unbiased std 0.5
    assert (
        rank0.metrics
        == rank1.metrics
        == {
            "gigpo/step_groups": 2.0,
            "gigpo/singleton_frac": 0.5,
            "gigpo/step_adv_std": pytest.approx(0.5),
        }
    )
    assert rank0.group_signal is None and rank0.group_scale is None  # gate and bound are off at weight 0


def test_per_step_alone_still_means_gigpos_steps():
    """A record of earlier releases that says `per_step=True` gets GiGPO's steps; one that gives `steps` is per step."""
    from gear_trl.credit import CreditMode, StepAdvantages
    from gear_trl.credit.modes import GIGPO, uniform

    assert CreditMode("old-style", uniform, per_step=True).steps is GIGPO
    own = StepAdvantages(lambda batch: (batch.mask.float(), {}))
    assert CreditMode("new-style", uniform, steps=own).per_step
    assert CreditMode("plain", uniform).steps is None and not CreditMode("plain", uniform).per_step
