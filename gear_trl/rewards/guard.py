"""Check what a reward function returns before TRL turns it into a tensor.

TRL converts each reward function's list to a float tensor as is: an `inf` enters the group mean and standard
deviation, turns every advantage of its group into nan and then 0 (no gradient) and is logged as inf, silently; a
string fails inside `torch.tensor` with a message that does not say which function returned it.

`guard_reward_func` wraps a reward function so that

- a non-finite value (inf, -inf, nan) becomes None, which TRL already treats as "no reward from this function for
  this completion"; the fraction of such values is logged as `rewards/<name>/non_finite_frac` every batch and a
  warning names the function the first time it happens;
- a value that is not a number (or None) raises a `TypeError` naming the function, the value and its position.

It also watches the function's first calls in training and warns once when it returns one value for every
completion, with how to read the text when it was given message lists it never read (`gear_trl.rewards.check`).

The wrapper keeps the function's `__name__` (TRL's metric names) and its async-ness.
"""

from __future__ import annotations

import functools
import inspect
import math
import numbers
import warnings
from collections.abc import Callable

from .check import ConstantRewardWatch


def _checked(name: str, rewards, warned: list[bool], log_metric: Callable | None) -> list:
    if not isinstance(rewards, (list, tuple)) and not hasattr(rewards, "tolist"):
        raise TypeError(
            f"Reward function {name!r} returned {type(rewards).__name__}; it must return a list of floats."
        )
    values = rewards.tolist() if hasattr(rewards, "tolist") else list(rewards)
    cleaned, non_finite = [], 0
    for i, value in enumerate(values):
        if value is None:
            cleaned.append(None)
            continue
        if getattr(value, "ndim", None) == 0 and hasattr(value, "item"):  # a 0-d tensor or numpy array
            value = value.item()
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            raise TypeError(
                f"Reward function {name!r} returned {value!r} ({type(value).__name__}) for completion {i}; rewards "
                "must be numbers, or None for 'no reward'."
            )
        value = float(value)
        if math.isfinite(value):
            cleaned.append(value)
        else:
            cleaned.append(None)
            non_finite += 1
    if non_finite and not warned[0]:
        warned[0] = True
        warnings.warn(
            f"Reward function {name!r} returned {non_finite} non-finite value(s) (inf/nan) in a batch of "
            f"{len(values)}; they are treated as None (no reward from it for those completions) and counted in "
            f"`rewards/{name}/non_finite_frac`. Further occurrences are only counted.",
            stacklevel=3,
        )
    if log_metric is not None:
        log_metric(f"rewards/{name}/non_finite_frac", non_finite / max(len(values), 1))
    return cleaned


def guard_reward_func(func: Callable, name: str | None = None) -> Callable:
    """`func` with its output checked as the module docstring says; already guarded functions are returned as is."""
    if getattr(func, "_gear_guarded", False):
        return func
    name = name or getattr(func, "__name__", None) or type(func).__name__
    warned = [False]
    watch = ConstantRewardWatch(name, func)

    if inspect.iscoroutinefunction(func):

        @functools.wraps(func)
        async def guarded(*args, **kwargs):
            values = _checked(name, await func(*args, **watch.before(kwargs)), warned, kwargs.get("log_metric"))
            watch.after(values, kwargs)
            return values

    else:

        @functools.wraps(func)
        def guarded(*args, **kwargs):
            values = _checked(name, func(*args, **watch.before(kwargs)), warned, kwargs.get("log_metric"))
            watch.after(values, kwargs)
            return values

    guarded._gear_guarded = True
    return guarded
