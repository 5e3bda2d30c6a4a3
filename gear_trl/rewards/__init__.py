"""Reward functions, looked up by name from a recipe's `reward_funcs` list.

Every function has TRL's reward signature, `f(completions, **columns) -> list[float | None]`, so the list returned by
`get_reward_funcs` can be passed to the trainer as `reward_funcs` unchanged.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

from .calculator import calculator_answer_reward
from .math import accuracy_reward, format_reward
from .multi_turn import multi_turn_execution_reward, multi_turn_state_reward
from .tool_call import tool_call_accuracy

RewardFunc = Callable[..., list]

REWARD_FUNCS: dict[str, RewardFunc] = {
    "accuracy": accuracy_reward,
    "format": format_reward,
    "tool_call_accuracy": tool_call_accuracy,
    "multi_turn_state": multi_turn_state_reward,
    "multi_turn_execution": multi_turn_execution_reward,
    "calculator_answer": calculator_answer_reward,
}


def get_reward_funcs(names: list[str], ground_truth_column: str = "ground_truth") -> list[RewardFunc]:
    """The reward functions registered under `names`, in order.

    Rewards read the ground truth from their `ground_truth` argument; when the dataset keeps it in another column,
    each function is wrapped to read that column instead (its name, which TRL logs, is kept).
    """
    unknown = [name for name in names if name not in REWARD_FUNCS]
    if unknown:
        raise ValueError(f"Unknown reward function(s) {unknown}; known reward functions: {sorted(REWARD_FUNCS)}.")
    funcs = [REWARD_FUNCS[name] for name in names]
    if ground_truth_column != "ground_truth":
        funcs = [_reading_ground_truth_from(func, ground_truth_column) for func in funcs]
    return funcs


def _reading_ground_truth_from(func: RewardFunc, column: str) -> RewardFunc:
    @functools.wraps(func)
    def wrapped(*args, **kwargs):
        if column in kwargs:
            kwargs["ground_truth"] = kwargs.pop(column)
        return func(*args, **kwargs)

    return wrapped


__all__ = [
    "REWARD_FUNCS",
    "RewardFunc",
    "accuracy_reward",
    "calculator_answer_reward",
    "format_reward",
    "get_reward_funcs",
    "multi_turn_execution_reward",
    "multi_turn_state_reward",
    "tool_call_accuracy",
]
