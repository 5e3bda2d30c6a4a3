"""Reward functions, looked up by name from a recipe's `reward_funcs` list.

Every function has TRL's reward signature, `f(completions, **columns) -> list[float | None]`, so the list returned by
`get_reward_funcs` can be passed to the trainer as `reward_funcs` unchanged.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

from ..envs.bfcl_official import bfcl_official_turn_reward
from ..inputs.errors import UserInputError
from ..inputs.plugins import load_plugin
from .acebench import acebench_accuracy
from .bfcl_ast import bfcl_ast
from .calculator import calculator_answer_reward
from .horizon import horizon_accuracy
from .item_lists import item_list_accuracy, numbered_list_accuracy
from .math_rewards import accuracy_reward, format_reward
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
    "horizon_accuracy": horizon_accuracy,
    "item_list_accuracy": item_list_accuracy,
    "numbered_list_accuracy": numbered_list_accuracy,
    "bfcl_official_turn": bfcl_official_turn_reward,
    "bfcl_ast": bfcl_ast,
    "acebench_accuracy": acebench_accuracy,
}


def get_reward_funcs(names: list[str], ground_truth_column: str = "ground_truth") -> list[RewardFunc]:
    """The reward functions registered under `names`, in order; a name may also be an import path of the user's own
    (`my_tasks.rewards:balance_reward`). An imported class is instantiated without arguments (a reward object).

    Rewards read the ground truth from their `ground_truth` argument; when the dataset keeps it in another column,
    each function is wrapped to read that column instead (its name, which TRL logs, is kept).
    """
    funcs = [_reward_func(name) for name in names]
    if ground_truth_column != "ground_truth":
        funcs = [_reading_ground_truth_from(func, ground_truth_column) for func in funcs]
    return funcs


def _reward_func(name: str) -> RewardFunc:
    func = load_plugin(name, "reward", REWARD_FUNCS)
    if isinstance(func, type):
        try:
            func = func()
        except TypeError as err:
            raise UserInputError(
                f"reward {name!r} is a class that cannot be built without arguments ({err}); name an instance or a "
                "function instead."
            ) from err
    if not callable(func):
        raise UserInputError(
            f"reward {name!r} is a {type(func).__name__}, not a function `f(completions, **columns)`."
        )
    return func


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
    "acebench_accuracy",
    "bfcl_ast",
    "calculator_answer_reward",
    "format_reward",
    "get_reward_funcs",
    "multi_turn_execution_reward",
    "multi_turn_state_reward",
    "tool_call_accuracy",
]
