import threading

import pytest

from gear_trl.rewards import REWARD_FUNCS, accuracy_reward, format_reward, get_reward_funcs


def score(completion, truth):
    return accuracy_reward([completion], [truth])[0]


@pytest.mark.parametrize(
    ("completion", "truth"),
    [
        (r"2 + 2 = 4, so the answer is \boxed{4}.", "4"),
        (r"\boxed{\frac{1}{2}}", "0.5"),
        (r"\boxed{0.5}", r"\frac{1}{2}"),
        (r"\boxed{\dfrac{3}{4}}", r"\frac{3}{4}"),
        (r"\boxed{-\frac{17}{3}}", r"-\frac{17}{3}"),
        (r"\boxed{6 + x}", "x + 6"),
        (r"\boxed{x = 5}", "5"),
        (r"\boxed{1234}", "1234"),
        (r"first \boxed{3}, on reflection \boxed{4}", "4"),
        ("no box, but the answer is 37.", "37"),
    ],
)
def test_correct_and_equivalent_answers_score_one(completion, truth):
    assert score(completion, truth) == 1.0


@pytest.mark.parametrize(
    ("completion", "truth"),
    [
        (r"\boxed{5}", "4"),
        (r"\boxed{x + 7}", "x + 6"),
        (r"first \boxed{3}, on reflection \boxed{4}", "3"),
        (r"\boxed{3} \boxed{4}", "3, 4"),
    ],
)
def test_wrong_answers_score_zero(completion, truth):
    assert score(completion, truth) == 0.0


@pytest.mark.parametrize(
    "completion",
    ["", "blah", r"\boxed{", r"\boxed{}", "}}{{", r"\frac{", r"\boxed{\frac{1}{0}}", "$$$", "x" * 3000, None, 7, []],
)
def test_garbage_never_raises_and_scores_zero(completion):
    assert score(completion, "1") == 0.0


def test_missing_ground_truth_gives_none():
    assert accuracy_reward([r"\boxed{1}", r"\boxed{1}", r"\boxed{1}"], [None, "", "1"]) == [None, None, 1.0]


def test_conversational_completions_use_the_last_message():
    completions = [
        [{"role": "assistant", "content": r"\boxed{2}"}],
        [{"role": "assistant", "content": r"\boxed{9}"}, {"role": "tool", "content": "x"},
         {"role": "assistant", "content": r"so \boxed{2}"}],
        [{"role": "assistant", "content": None}],
    ]  # fmt: skip
    assert accuracy_reward(completions, ["2", "2", "2"]) == [1.0, 1.0, 0.0]
    assert format_reward(completions) == [1.0, 1.0, 0.0]


def test_accuracy_works_outside_the_main_thread():
    # math_verify's default time limits use signal.alarm, which raises outside the main thread.
    results = []
    worker = threading.Thread(target=lambda: results.append(accuracy_reward([r"\boxed{\frac{1}{2}}"], ["0.5"])))
    worker.start()
    worker.join()
    assert results == [[1.0]]


def test_format_rewards_exactly_one_nonempty_box():
    completions = [r"\boxed{1}", r"\boxed{\frac{1}{2}}", r"\boxed{1} \boxed{2}", r"\boxed{}", "no box", r"\boxed{1"]
    assert format_reward(completions) == [1.0, 1.0, 0.0, 0.0, 0.0, 0.0]


def test_registry():
    assert get_reward_funcs(["format", "accuracy"]) == [format_reward, accuracy_reward]
    assert set(REWARD_FUNCS) >= {"accuracy", "format"}
    with pytest.raises(ValueError, match="accuracy"):
        get_reward_funcs(["accuracy", "correctness"])


def test_rewards_read_a_renamed_ground_truth_column():
    from gear_trl.rewards import get_reward_funcs

    (accuracy,) = get_reward_funcs(["accuracy"], ground_truth_column="answer_number")
    assert accuracy.__name__ == "accuracy_reward"
    assert accuracy(completions=["so \\boxed{12}", "\\boxed{3}"], answer_number=["12", "4"]) == [1.0, 0.0]
