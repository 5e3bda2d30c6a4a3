"""A reward that returns one value for every completion of the first training batches is warned about once, with how
to read the text when it was handed message lists it never read (issue 76, item 1)."""

from __future__ import annotations

import warnings

import pytest
from datasets import Dataset
from transformers import TrainerState

from gear_trl.rewards.check import (
    ConstantRewardWatch,
    _Reads,
    constant_reward_message,
    message_shape,
    watched_completions,
)
from gear_trl.rewards.guard import guard_reward_func
from tests.utils import make_trainer, tiny_args

ASSISTANT = [{"role": "assistant", "content": "The answer is 4."}]


# The reward of the issue, exactly as a new user writes it.
def exact_answer(completions, answer, **kw):
    return [1.0 if a in c else 0.0 for c, a in zip(completions, answer)]


def exact_answer_text(completions, answer, **kw):
    """The same reward, reading the text of each completion."""
    return [1.0 if a in c[-1]["content"] else 0.0 for c, a in zip(completions, answer)]


# --- the decision (pure) ---------------------------------------------------------------------------------------------


def test_one_value_for_every_scored_completion_is_warned_about():
    message = constant_reward_message("r", [0.0, 0.0, None, 0.0], 2)
    assert message.startswith("Reward function 'r' returned 0 for every one of the 3 completions it scored in the")
    assert "first 2 training batches" in message
    assert 'completion[-1]["content"]' not in message  # strings: nothing to say about messages
    assert constant_reward_message("r", [1.0, 1.0], 2).startswith("Reward function 'r' returned 1 for every")
    assert constant_reward_message("r", [0.5, 0.5], 2).startswith("Reward function 'r' returned 0.5 for every")


def test_a_varying_reward_and_too_few_values_are_not():
    assert constant_reward_message("r", [0.0, 1.0, 0.0], 2) is None
    assert constant_reward_message("r", [0.0, None, None], 2) is None  # one scored value says nothing
    assert constant_reward_message("r", [None, None], 2) is None  # unscored: counted elsewhere
    assert constant_reward_message("r", [], 2) is None


def test_the_text_hint_only_when_message_lists_were_never_read():
    shape = message_shape(ASSISTANT)
    assert shape == "[{'role': 'assistant', 'content': '...'}]"
    hinted = constant_reward_message("r", [0.0, 0.0], 2, shape=shape, read_messages=False)
    assert "Its `completions` are message lists, shaped [{'role': 'assistant', 'content': '...'}]" in hinted
    assert 'Read the text with `completion[-1]["content"]`' in hinted
    read = constant_reward_message("r", [0.0, 0.0], 2, shape=shape, read_messages=True)
    assert "message lists" not in read and read.startswith("Reward function 'r' returned 0")


def test_message_shape_of_a_tool_rollout():
    rollout = [
        {"role": "assistant", "content": "", "tool_calls": [{"type": "function", "function": {"name": "add"}}]},
        {"role": "tool", "name": "add", "content": "7"},
        {"role": "assistant", "content": "7"},
    ]
    assert message_shape(rollout) == (
        "[{'role': 'assistant', 'content': '...', 'tool_calls': [...]}, {'role': 'tool', 'name': '...', "
        "'content': '...'}, {'role': 'assistant', 'content': '...'}]"
    )
    assert message_shape(rollout * 2).endswith("'tool_calls': [...]}, ... (2 more)]")


@pytest.mark.parametrize(
    "read, seen",
    [
        (lambda c: c[-1]["content"], True),
        (lambda c: c[0].get("content"), True),
        (lambda c: [m for m in c[0]], True),
        (lambda c: dict(c[0]), True),
        (lambda c: "4" in c, False),  # the list searched as if it were the text
        (lambda c: c == "The answer is 4.", False),
        (lambda c: str(c), False),
        (lambda c: len(c), False),
    ],
)
def test_reading_a_messages_fields_is_recorded_and_testing_the_list_is_not(read, seen):
    reads = _Reads()
    (completion,) = watched_completions([ASSISTANT], reads)
    read(completion)
    assert reads.seen is seen
    assert completion == ASSISTANT and isinstance(completion[-1], dict)  # the reward sees equal messages


# --- the watch, as the guard runs it ---------------------------------------------------------------------------------


def call(func, completions, answer, state):
    kwargs = {"completions": completions, "answer": answer, "log_metric": lambda *a: None}
    if state is not None:
        kwargs["trainer_state"] = state
    return func(prompts=["q"] * len(completions), **kwargs)


def test_the_guard_warns_once_after_the_first_two_training_batches():
    guarded = guard_reward_func(exact_answer)
    batch, answers = [ASSISTANT, ASSISTANT], ["4", "5"]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert call(guarded, batch, answers, TrainerState()) == [0.0, 0.0]
        assert not caught  # one batch is not enough
        call(guarded, batch, answers, TrainerState())
        call(guarded, batch, answers, TrainerState())
    assert len(caught) == 1
    message = str(caught[0].message)
    assert "Reward function 'exact_answer' returned 0 for every one of the 4 completions" in message
    assert 'completion[-1]["content"]' in message


def test_no_warning_outside_training_on_other_ranks_or_for_a_reward_that_varies():
    by_hand = guard_reward_func(exact_answer)
    other_rank = guard_reward_func(exact_answer)
    state = TrainerState()
    state.is_world_process_zero = False
    varies = guard_reward_func(exact_answer_text)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for _ in range(3):
            call(by_hand, [ASSISTANT, ASSISTANT], ["4", "5"], None)  # no trainer_state: not a training call
            call(other_rank, [ASSISTANT, ASSISTANT], ["4", "5"], state)
            assert call(varies, [ASSISTANT, ASSISTANT], ["4", "5"], TrainerState()) == [1.0, 0.0]


def test_a_reward_reading_the_text_gets_the_warning_without_the_hint():
    watch = ConstantRewardWatch("exact_answer_text", exact_answer_text)
    for _ in range(2):
        kwargs = watch.before({"completions": [ASSISTANT, ASSISTANT], "trainer_state": TrainerState()})
        values = exact_answer_text(answer=["@", "@"], **kwargs)
        if watch.calls == 1:
            with pytest.warns(UserWarning) as caught:
                watch.after(values, kwargs)
        else:
            watch.after(values, kwargs)
    (warning,) = caught
    assert "returned 0 for every one of the 4 completions" in str(warning.message)
    assert "message lists" not in str(warning.message)


# --- in training -----------------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_the_issues_reward_is_warned_about_in_training_with_how_to_read_the_text(tmp_path):
    # Conversational rows, as `dataset_format: columns` and most chat data give them; answers no completion contains,
    # so that the reward reading the text is constant too (and is told nothing about messages).
    rows = Dataset.from_list(
        [{"prompt": [{"role": "user", "content": f"What is {i} + 2?"}], "answer": "@@@@"} for i in range(8)]
    )
    trainer = make_trainer(
        tmp_path,
        dataset=rows,
        reward_funcs=[exact_answer, exact_answer_text],
        args=tiny_args(tmp_path, credit="none", max_steps=3),
    )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        trainer.train()
    messages = [str(w.message) for w in caught if "for every one of the" in str(w.message)]
    assert len(messages) == 2, messages  # one each, after the first two batches, not again at the third
    wrong, right = sorted(messages, key=lambda m: "exact_answer_text" in m)
    assert wrong.startswith("Reward function 'exact_answer' returned 0 for every one of the 8 completions it scored")
    assert "shaped [{'role': 'assistant', 'content': '...'}]" in wrong
    assert 'Read the text with `completion[-1]["content"]` (docs/rewards.md).' in wrong
    assert right.startswith("Reward function 'exact_answer_text' returned 0 for every one of the 8 completions")
    assert "message lists" not in right
