"""Multi-turn tool-use rewards: does the model leave the environment in the ground truth's final state?

    multi_turn_state_reward(completions, initial_config, involved_classes, ground_truth, environments=None, **kwargs)
        -> list[float | None]
    multi_turn_execution_reward(...)   # same signature; also requires the ground truth's tool results

For each sample (one user turn of a BFCL multi-turn task, `data/bfcl/multi_turn_base.jsonl`), the expected state is
`initial_config` with the turn's `ground_truth` calls executed in a fresh `BFCLEnvironment`. The actual state is

- the live environment's, when TRL passes `environments`: with `environment_factory`, TRL has already run the model's
  tool calls in that instance (one instance per completion, reset from the same row before generation), and
  `GRPOTrainer._calculate_rewards` adds the list of instances to every reward function's kwargs
  (`reward_kwargs["environments"] = self.environments`);
- otherwise the state after replaying the completion's calls from `initial_config` in a fresh environment (limited to
  the row's `tools`, as the live environment is). Calls are parsed with `gear_trl.envs.tool_calls.parse_tool_calls`:
  Qwen3-style `<tool_call>{"name", "arguments"}</tool_call>` blocks in text, or the `tool_calls` of assistant
  messages in TRL's conversational completions.

`multi_turn_state_reward` is 1.0 when the two states are equal and 0.0 otherwise. States are compared without
navigation state (GorillaFileSystem's working directory, `APIEnvironment.unscored_keys`): where the model ends up
browsing is not an outcome the user asked for. So a turn whose ground truth changes nothing (reading, listing,
computing: about half of the committed rows) scores 1.0 for a model that does nothing; failing or unparseable calls
change nothing, so they cost only when the ground truth changes the state.

`multi_turn_execution_reward` closes that gap in the spirit of BFCL's response check: it also requires every result
the ground-truth calls return (e.g. the `cat` output the user asked to see) to be among the tool results the model
got (the completion's `tool` messages with a live environment, the replayed results otherwise).

Rows without `initial_config` or `ground_truth` (single-turn rows) get None, which TRL leaves out of the mean.
Garbage never raises: a sample whose completion or columns cannot be used scores 0.0.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from gear_trl.envs import APIEnvironment, BFCLEnvironment
from gear_trl.envs.tool_calls import column_value, parse_tool_calls


def _is_empty(value: Any) -> bool:
    return value is None or (isinstance(value, str) and not value.strip())


def _as_list(value: Any) -> list:
    parsed = json.loads(value) if isinstance(value, str) else value
    if not isinstance(parsed, list):
        raise TypeError(f"Expected a JSON list, got {parsed!r}.")
    return parsed


def run_calls(
    initial_config: Any, involved_classes: Any, calls: Sequence[Any], tools: Any = None
) -> tuple[dict[str, Any], list[str]]:
    """`(scored state, tool results)` after running `calls` from `initial_config` in a fresh `BFCLEnvironment`.

    `tools` (the row's tool schemas), when given, limits the callable functions as in the live environment.
    """
    env = BFCLEnvironment.from_config(initial_config, involved_classes, tools)
    results = [env.execute(call) for call in calls]
    return env.scored_state(), results


def _live_state(environment: Any, initial_config: Any, involved_classes: Any) -> dict[str, Any] | None:
    """The scored state of TRL's live environment, or None when it is not one of gear_trl's."""
    if isinstance(environment, BFCLEnvironment):
        return environment.scored_state()
    if isinstance(environment, APIEnvironment):
        # A single API class as the environment: the other involved classes had no tools, so they are unchanged.
        state, _ = run_calls(initial_config, involved_classes, [])
        state[environment.class_name] = environment.scored_state()
        return state
    return None


def _tool_messages(completion: Any) -> list[str]:
    """The contents of the `tool` messages of a conversational completion."""
    if not isinstance(completion, (list, tuple)):
        return []
    return [str(m.get("content")) for m in completion if isinstance(m, dict) and m.get("role") == "tool"]


def _score(
    completions: list[Any],
    initial_config: Any,
    involved_classes: Any,
    ground_truth: Any,
    environments: Any,
    tools: Any,
    check_responses: bool,
) -> list[float | None]:
    expected_cache: dict[tuple[str, str, str], tuple[dict[str, Any], list[str]]] = {}
    rewards: list[float | None] = []
    for i, completion in enumerate(completions):
        config, classes, truth = (
            column_value(initial_config, i),
            column_value(involved_classes, i),
            column_value(ground_truth, i),
        )
        if _is_empty(config) or _is_empty(truth):
            rewards.append(None)
            continue
        try:
            key = (json.dumps(config, sort_keys=True), json.dumps(classes), json.dumps(truth, sort_keys=True))
            if key not in expected_cache:  # the G completions of a prompt share it
                expected_cache[key] = run_calls(config, classes, _as_list(truth))
            expected_state, expected_results = expected_cache[key]
            state = _live_state(column_value(environments, i), config, classes)
            if state is not None:
                results = _tool_messages(completion)
            else:
                state, results = run_calls(config, classes, parse_tool_calls(completion), column_value(tools, i))
            ok = state == expected_state
            if check_responses:
                ok = ok and set(expected_results) <= set(results)
            rewards.append(1.0 if ok else 0.0)
        except Exception:  # noqa: BLE001 - a reward never raises on a bad sample; it scores 0
            rewards.append(0.0)
    return rewards


def multi_turn_state_reward(
    completions: list[Any],
    initial_config: list[str] | None = None,
    involved_classes: list[str] | None = None,
    ground_truth: list[str] | None = None,
    environments: list[Any] | None = None,
    tools: list[str] | None = None,
    **kwargs: Any,
) -> list[float | None]:
    """1.0 where the completion leaves the environment in the ground truth's final state, else 0.0 (None: no task).

    Args:
        completions: one completion per sample: a string, or a list of messages (TRL's conversational format).
        initial_config: per sample, JSON string of `{class name: state}` at the start of the turn ("" if none).
        involved_classes: per sample, JSON string list of the API class names.
        ground_truth: per sample, JSON string list of the turn's calls `[{"name", "arguments"}]`.
        environments: TRL's live environment instances, one per completion, if the run uses `environment_factory`.
        tools: per sample, JSON string of the row's tool schemas; a replayed call to a function not listed fails,
            as it does in the live environment.
        **kwargs: the other dataset columns and TRL's extras, ignored.

    Returns:
        A list of len(completions) rewards: 1.0, 0.0, or None for rows without `initial_config`/`ground_truth`.
    """
    return _score(completions, initial_config, involved_classes, ground_truth, environments, tools, False)


def multi_turn_execution_reward(
    completions: list[Any],
    initial_config: list[str] | None = None,
    involved_classes: list[str] | None = None,
    ground_truth: list[str] | None = None,
    environments: list[Any] | None = None,
    tools: list[str] | None = None,
    **kwargs: Any,
) -> list[float | None]:
    """Like `multi_turn_state_reward`, and the model's tool results must include every ground-truth call's result.

    Args:
        completions: one completion per sample: a string, or a list of messages (TRL's conversational format).
        initial_config: per sample, JSON string of `{class name: state}` at the start of the turn ("" if none).
        involved_classes: per sample, JSON string list of the API class names.
        ground_truth: per sample, JSON string list of the turn's calls `[{"name", "arguments"}]`.
        environments: TRL's live environment instances, one per completion, if the run uses `environment_factory`;
            the tool results are then the completion's `tool` messages.
        tools: per sample, JSON string of the row's tool schemas (see `multi_turn_state_reward`).
        **kwargs: the other dataset columns and TRL's extras, ignored.

    Returns:
        A list of len(completions) rewards: 1.0, 0.0, or None for rows without `initial_config`/`ground_truth`.
    """
    return _score(completions, initial_config, involved_classes, ground_truth, environments, tools, True)


__all__ = ["multi_turn_execution_reward", "multi_turn_state_reward", "run_calls"]
