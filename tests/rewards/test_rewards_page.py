"""docs/rewards.md stays true: its examples run as written on every completion shape it describes, its argument
table names what the preflight accepts, and the warning it quotes is the one training prints (issue 76, item 1)."""

from __future__ import annotations

import re
from pathlib import Path

from gear_trl.inputs.preflight import TRL_REWARD_ARGUMENTS
from gear_trl.rewards.check import constant_reward_message, message_shape

PAGE = Path(__file__).resolve().parents[2] / "docs" / "rewards.md"


def blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", PAGE.read_text(encoding="utf-8"), re.DOTALL)


def examples() -> dict:
    namespace: dict = {}
    for block in blocks("python"):
        exec(compile(block, str(PAGE), "exec"), namespace)  # noqa: S102 - the page's own examples
    return namespace


def test_the_examples_score_every_shape_of_completion():
    ns = examples()
    exact, numeric = ns["exact_answer"], ns["numeric_answer"]
    chat = [{"role": "assistant", "content": "The total is 1,234."}]
    rollout = [
        {"role": "assistant", "content": "", "tool_calls": [{"type": "function", "function": {"name": "add"}}]},
        {"role": "tool", "name": "add", "content": "1234"},
        {"role": "assistant", "content": "It comes to 1234."},
    ]
    cut_after_tool = rollout[:2]  # max_completion_length reached after the tool's answer
    completions = ["1,234 it is", chat, rollout, cut_after_tool]
    assert exact(completions=completions, ground_truth=["1,234"] * 4, trainer_state=None) == [1.0, 1.0, 0.0, 0.0]
    assert numeric(completions=completions, ground_truth=["1234"] * 4, log_metric=print) == [1.0, 1.0, 1.0, 0.0]
    assert numeric(completions=[chat, chat], ground_truth=["n/a", None]) == [None, None]  # not scored, no raise
    assert numeric(completions=[[{"role": "assistant", "content": "-2.50"}]], ground_truth=["-2.5"]) == [1.0]
    assert exact(completions=[chat], ground_truth=[None]) == [0.0]


def test_the_argument_table_names_what_the_preflight_accepts():
    text = PAGE.read_text(encoding="utf-8")
    table = set(re.findall(r"^\| `(\w+)` \|", text, re.MULTILINE))
    assert table == {*TRL_REWARD_ARGUMENTS, "environments"}


def test_the_quoted_warning_is_the_one_training_prints():
    quoted = [" ".join(b.split()) for b in blocks("text") if "Reward function" in b or "message lists" in b]
    first, hint = quoted
    shape = message_shape([{"role": "assistant", "content": "x"}])
    message = constant_reward_message("exact_answer", [0.0] * 8, 2, shape=shape, read_messages=False)
    assert message.startswith(first)
    assert hint.startswith("... ") and message.endswith(hint[4:])
    assert message == first + " " + hint[4:]
