"""Scoring completions as TRL's trainer scores them (`score`), and the report every evaluation loop returns
(`_report`: avg@n, each reward's mean, pass@k)."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from ..inputs.errors import UserInputError
from .pass_at_k import _mean, _pass_at, _pass_ks


def _noop(*args, **kwargs):
    return None


def score(
    reward_funcs: Sequence[Callable], rows: list[dict], completions: list, completion_ids: list, **extra
) -> list[list]:
    """Per completion, each reward (None where a reward does not apply), called as TRL calls reward functions: the
    prompts, completions and completion ids, plus every other dataset column and `extra` (e.g. `environments`)."""
    keys = [key for key in rows[0] if key not in ("prompt", "completion", "completion_ids")]
    kwargs = {key: [row[key] for row in rows] for key in keys}
    kwargs.update(trainer_state=None, log_extra=_noop, log_metric=_noop, **extra)
    prompts = [row["prompt"] for row in rows]
    columns = []
    for func in reward_funcs:
        values = func(prompts=prompts, completions=completions, completion_ids=completion_ids, **kwargs)
        if len(values) != len(completions):
            raise ValueError(
                f"Reward {getattr(func, '__name__', func)!r} returned {len(values)} values for "
                f"{len(completions)} completions."
            )
        columns.append([None if v is None or (isinstance(v, float) and math.isnan(v)) else float(v) for v in values])
    return [list(values) for values in zip(*columns, strict=True)]


def _check_sampling(temperature: float, num_samples: int, batch_size: int) -> None:
    if temperature < 0:
        raise UserInputError(f"`temperature` must be >= 0, got {temperature}.")
    if num_samples < 1 or batch_size < 1:
        raise UserInputError("`num_samples` and `batch_size` must be at least 1.")
    if temperature == 0 and num_samples > 1:
        raise UserInputError(
            "Greedy decoding (temperature 0) gives one completion per prompt; set a temperature > 0 "
            "to draw several samples."
        )


def _reward_names(reward_funcs: Sequence[Callable], reward_names: Sequence[str] | None) -> list[str]:
    names = list(reward_names or [getattr(func, "__name__", f"reward_{i}") for i, func in enumerate(reward_funcs)])
    if len(names) != len(reward_funcs):
        raise ValueError(f"{len(names)} reward names for {len(reward_funcs)} reward functions.")
    return names


def _sample(i: int, j: int, row: dict, completion, values: list, names: list[str], finished: bool, gt_column: str):
    """One `per_sample` entry: sample `j` of row `i` with its rewards (None where a reward does not apply)."""
    applicable = [v for v in values if v is not None]
    return {
        "index": i,
        "sample": j,
        "prompt": row["prompt"],
        "completion": completion,
        "ground_truth": row.get(gt_column),
        "reward": sum(applicable) if applicable else None,
        "rewards": dict(zip(names, values, strict=True)),
        "finished": finished,
    }


def _report(
    n: int, num_samples: int, names: list[str], per_sample: list[dict], pass_ks: Sequence[int] | None = None, **extra
) -> dict:
    """The report both evaluations return (see `evaluate`); `extra` entries go before `per_sample`."""
    ks = _pass_ks(pass_ks, num_samples)
    accuracy = _mean(s["rewards"][names[0]] for s in per_sample) if names else None
    result = {
        "n": n,
        "num_samples": num_samples,
        "accuracy": accuracy,
        f"avg@{num_samples}": accuracy,
        "mean_reward": _mean(s["reward"] for s in per_sample),
        "rewards": {name: _mean(s["rewards"][name] for s in per_sample) for name in names},
        "finished_frac": _mean(float(s["finished"]) for s in per_sample),
        **extra,
        "per_sample": per_sample,
    }
    if num_samples > 1:
        pass_at = _pass_at(names, per_sample, ks)
        result["pass_at_k"] = pass_at[str(num_samples)]
        result["pass_at"] = pass_at
    return result


def environment_reward(factory) -> Callable:
    """A reward function scoring each rollout with its environment's `get_reward()` (sync or async), named after the
    environment's class as TRL names the reward it adds in training; a value it cannot read as a number is None."""
    import asyncio
    import inspect

    from ..envs import factory_class

    cls = factory_class(factory)

    def reward(environments, **kwargs):
        values = []
        for environment in environments:
            try:
                value = environment.get_reward()
                if inspect.isawaitable(value):
                    value = asyncio.run(value)
                values.append(float(value))
            except Exception:  # noqa: BLE001 -- a reward never ends an evaluation: None, counted as unscored
                values.append(None)
        return values

    reward.__name__ = cls.__name__
    reward._environment_reward = True
    return reward
