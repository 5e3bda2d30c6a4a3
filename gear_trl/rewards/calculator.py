r"""Reward of the calculator task (`data/calc_tools/`): the right answer, computed with the right tool calls.

    calculator_answer_reward(completions, ground_truth, environments=None, **kwargs) -> list[float | None]

`ground_truth` is a row's reference call chain, a JSON list `[{"name": "add", "arguments": {"a": 84, "b": 17}},
{"name": "subtract", "arguments": {"a": 101, "b": 9}}]`; running it in a fresh `gear_trl.envs.Calculator` gives the
reference results `[101, 92]`, the last of which is the answer. A completion scores 1.0 when

- the calculator's results in that rollout are exactly the reference results (its final state equals the reference
  chain's): every operation done with the tools, in order, none missing or extra, so one wrong call anywhere (a
  miscopied number, the wrong tool, the original operand instead of the last result) spoils the rollout even if a
  later call lands on the right number; calls that fail (an error text) change nothing and cost nothing; and
- the last `\boxed{...}` of its final assistant message is the answer (an integer; `92.0` counts);

0.0 otherwise. The calculator's results are read from TRL's live environment when training with
`environment_factory` (TRL passes `environments`, one instance per completion, already driven by the model's calls),
else by replaying the completion's calls (`gear_trl.envs.tool_calls.parse_tool_calls`) in a fresh `Calculator`.
Rows without a ground truth get None (left out of the mean); garbage never raises, it scores 0.0.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from gear_trl.data.math_tasks import last_boxed
from gear_trl.envs.calculator import Calculator
from gear_trl.envs.tool_calls import column_value, parse_tool_calls


def run_chain(calls: Sequence[Any]) -> tuple[Calculator, list[str]]:
    """A fresh `Calculator` after running `calls` (`{"name", "arguments"}` dicts) in order, and their results."""
    env = Calculator()
    env.reset()
    return env, [env.execute(call) for call in calls]


def expected_results(ground_truth: Any) -> list[int]:
    """The calculator's results after a reference chain (a JSON string or a list); ValueError if any call fails."""
    calls = json.loads(ground_truth) if isinstance(ground_truth, str) else ground_truth
    if not isinstance(calls, list) or not calls:
        raise ValueError(f"A reference chain is a non-empty list of calls, got {ground_truth!r}.")
    env, results = run_chain(calls)
    if any(result.startswith("Error") for result in results):
        raise ValueError(f"The reference chain {ground_truth!r} does not run: {results}.")
    return env.state()["results"]


def expected_answer(ground_truth: Any) -> int:
    """The answer of a reference chain: its last result."""
    return expected_results(ground_truth)[-1]


def final_text(completion: Any) -> str:
    """The content of the last assistant message of a conversational completion (a string: itself)."""
    if isinstance(completion, str):
        return completion
    if not isinstance(completion, (list, tuple)):
        return ""
    for message in reversed(completion):
        if isinstance(message, dict) and message.get("role", "assistant") == "assistant":
            content = message.get("content")
            return content if isinstance(content, str) else ""
    return ""


def parse_integer(text: str | None) -> int | None:
    """`"92"`, `" 92 "`, `"92.0"` -> 92; anything else -> None."""
    if text is None:
        return None
    text = text.strip().replace(",", "")
    try:
        return int(text)
    except ValueError:
        try:
            value = float(text)
        except ValueError:
            return None
        return int(value) if value.is_integer() else None


def calculator_answer_reward(
    completions: list[Any],
    ground_truth: list[str] | None = None,
    environments: list[Any] | None = None,
    **kwargs: Any,
) -> list[float | None]:
    """1.0 where the calculator's results are the reference chain's and the final `\\boxed{}` answer is its last
    result, else 0.0; None for rows without a reference chain.

    Args:
        completions: one completion per sample: a string, or a list of messages (TRL's conversational format).
        ground_truth: per sample, the JSON list of reference calls `[{"name", "arguments"}]`.
        environments: TRL's live environment instances, one per completion, when the run uses
            `environment_factory`; a `Calculator` among them is read instead of replaying the calls.
        **kwargs: the other dataset columns and TRL's extras, ignored.
    """
    rewards: list[float | None] = []
    cache: dict[str, list[int]] = {}
    for i, completion in enumerate(completions):
        truth = column_value(ground_truth, i)
        if truth is None or (isinstance(truth, str) and not truth.strip()):
            rewards.append(None)
            continue
        try:
            key = truth if isinstance(truth, str) else json.dumps(truth, sort_keys=True)
            if key not in cache:  # the G completions of a prompt share it
                cache[key] = expected_results(truth)
            expected = cache[key]
            environment = column_value(environments, i)
            if not isinstance(environment, Calculator):
                environment, _ = run_chain(parse_tool_calls(completion))
            answer = parse_integer(last_boxed(final_text(completion)))
            rewards.append(1.0 if environment.state()["results"] == expected and answer == expected[-1] else 0.0)
        except Exception:  # noqa: BLE001 - a reward never raises on a bad sample; it scores 0
            rewards.append(0.0)
    return rewards


__all__ = [
    "calculator_answer_reward",
    "expected_answer",
    "expected_results",
    "final_text",
    "parse_integer",
    "run_chain",
]
