"""The committed BFCL multi-turn subset and its state-based rewards."""

import copy
import itertools
import json
from collections import defaultdict
from pathlib import Path

import pytest
from datasets import load_dataset

from gear_trl.envs import API_CLASSES, BFCLEnvironment
from gear_trl.rewards.multi_turn import multi_turn_execution_reward, multi_turn_state_reward

DATA = Path(__file__).resolve().parents[2] / "data" / "bfcl" / "multi_turn_base.jsonl"
COLUMNS = [
    "id",
    "category",
    "prompt",
    "tools",
    "ground_truth",
    "possible_answer",
    "initial_config",
    "involved_classes",
]
REWARDS = [multi_turn_state_reward, multi_turn_execution_reward]

ROWS = [json.loads(line) for line in DATA.read_text().splitlines()]


def task_id(row):
    return row["id"].rsplit("_turn_", 1)[0]


def columns(rows):
    """Rows as TRL passes them to a reward function: one list per column."""
    return {key: [row[key] for row in rows] for key in COLUMNS if key != "prompt"}


def qwen3_text(calls):
    return "".join(f"<tool_call>\n{json.dumps(call)}\n</tool_call>\n" for call in calls)


def run_like_trl(row, calls):
    """Reset an environment from the row and call its tool methods by keyword, as TRL's tool loop does.

    Returns the environment and the conversational completion TRL would hand to the reward.
    """
    env = BFCLEnvironment()
    env.reset(**row)
    completion = [
        {"role": "assistant", "content": "", "tool_calls": [{"type": "function", "function": c} for c in calls]}
    ]
    for call in calls:
        completion.append(
            {"role": "tool", "name": call["name"], "content": str(getattr(env, call["name"])(**call["arguments"]))}
        )
    completion.append({"role": "assistant", "content": "Done."})
    return env, completion


def state_changing_indices(row):
    """Indices of the ground-truth calls that change the scored state when executed in order."""
    env = BFCLEnvironment.from_config(row["initial_config"], row["involved_classes"])
    indices = []
    for i, call in enumerate(json.loads(row["ground_truth"])):
        before = env.scored_state()
        env.execute(call)
        if env.scored_state() != before:
            indices.append(i)
    return indices


CHANGING = [row for row in ROWS if state_changing_indices(row)]
READ_ONLY = [row for row in ROWS if not state_changing_indices(row)]


# ---- the data ----------------------------------------------------------------------------------------------------


def test_dataset_loads_and_round_trips():
    ds = load_dataset("json", data_files=str(DATA), split="train")
    assert ds.column_names == COLUMNS
    assert len(ds) == len(ROWS)
    for raw, loaded in zip(ROWS, ds, strict=True):
        assert dict(loaded) == raw  # heterogeneous tool-call arguments survive Arrow unchanged


def test_rows_follow_the_schema():
    assert len({task_id(row) for row in ROWS}) == 50
    for row in ROWS:
        assert row["category"] == "multi_turn_base" and row["possible_answer"] == ""
        assert set(json.loads(row["involved_classes"])) <= set(API_CLASSES)
        assert sorted(json.loads(row["initial_config"])) == json.loads(row["involved_classes"])
        assert row["prompt"][-1]["role"] == "user"
        calls = json.loads(row["ground_truth"])
        assert calls and all(set(call) == {"name", "arguments"} for call in calls)
        tool_names = {tool["function"]["name"] for tool in json.loads(row["tools"])}
        assert {call["name"] for call in calls} <= tool_names


def test_each_turn_starts_where_the_previous_ground_truth_left_off():
    by_task = defaultdict(list)
    for row in ROWS:
        by_task[task_id(row)].append(row)
    for turns in by_task.values():
        turns.sort(key=lambda row: int(row["id"].rsplit("_", 1)[1]))
        assert turns[0]["prompt"][0]["role"] == "user" and len(turns[0]["prompt"]) == 1
        for current, following in itertools.pairwise(turns):
            env = BFCLEnvironment.from_config(current["initial_config"], current["involved_classes"])
            calls = json.loads(current["ground_truth"])
            results = [env.execute(call) for call in calls]
            assert not any(r.startswith("Error") for r in results)
            assert env.state() == json.loads(following["initial_config"])
            added = following["prompt"][len(current["prompt"]) :]
            assert added[0]["tool_calls"] == [{"type": "function", "function": call} for call in calls]
            assert [m["content"] for m in added[1:-1]] == results
            assert added[-1]["role"] == "user"


# ---- rewards: ground truth, perturbations ------------------------------------------------------------------------


@pytest.mark.parametrize("reward", REWARDS, ids=lambda f: f.__name__)
def test_ground_truth_scores_one_in_every_completion_format(reward):
    calls = [json.loads(row["ground_truth"]) for row in ROWS]
    as_text = [qwen3_text(c) for c in calls]
    as_messages = [run_like_trl(row, c)[1] for row, c in zip(ROWS, calls, strict=True)]
    assert reward(as_text, **columns(ROWS)) == [1.0] * len(ROWS)
    assert reward(as_messages, **columns(ROWS)) == [1.0] * len(ROWS)


@pytest.mark.parametrize("reward", REWARDS, ids=lambda f: f.__name__)
def test_live_environments_are_scored_by_their_own_state(reward):
    rows = CHANGING[:20]
    envs, completions = zip(*(run_like_trl(row, json.loads(row["ground_truth"])) for row in rows), strict=True)
    assert reward(list(completions), environments=list(envs), **columns(rows)) == [1.0] * len(rows)
    # Idle live environments score 0 even though the completion text shows the right calls: TRL already ran them.
    idle = [BFCLEnvironment() for _ in rows]
    for env, row in zip(idle, rows, strict=True):
        env.reset(**row)
    texts = [qwen3_text(json.loads(row["ground_truth"])) for row in rows]
    assert reward(texts, environments=idle, **columns(rows)) == [0.0] * len(rows)
    # Something that is not one of our environments: fall back to replaying the completion.
    assert reward(texts, environments=[object()] * len(rows), **columns(rows)) == [1.0] * len(rows)


@pytest.mark.parametrize("reward", REWARDS, ids=lambda f: f.__name__)
def test_dropping_a_state_changing_call_scores_zero(reward):
    completions = []
    for row in CHANGING:
        calls = json.loads(row["ground_truth"])
        del calls[state_changing_indices(row)[-1]]
        completions.append(qwen3_text(calls))
    assert reward(completions, **columns(CHANGING)) == [0.0] * len(CHANGING)


def _perturb(arguments):
    """Arguments with their first string value suffixed (or first number incremented)."""
    arguments = copy.deepcopy(arguments)
    for key, value in arguments.items():
        if isinstance(value, str):
            arguments[key] = value + "_perturbed"
            return arguments
    for key, value in arguments.items():
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            arguments[key] = value + 1
            return arguments
        if isinstance(value, dict) and value:
            arguments[key] = _perturb(value)
            return arguments
    raise AssertionError(f"nothing to perturb in {arguments}")


@pytest.mark.parametrize("reward", REWARDS, ids=lambda f: f.__name__)
def test_changing_an_argument_scores_zero(reward):
    completions = []
    for row in CHANGING:
        calls = json.loads(row["ground_truth"])
        index = state_changing_indices(row)[0]
        calls[index] = {"name": calls[index]["name"], "arguments": _perturb(calls[index]["arguments"])}
        completions.append(qwen3_text(calls))
    assert reward(completions, **columns(CHANGING)) == [0.0] * len(CHANGING)


def test_doing_nothing_passes_the_state_check_only_when_nothing_should_change():
    assert READ_ONLY and CHANGING
    nothing = [""] * len(ROWS)
    expected = [0.0 if row in CHANGING else 1.0 for row in ROWS]
    assert multi_turn_state_reward(nothing, **columns(ROWS)) == expected
    # The execution reward also wants the results the user asked for (a read-only turn's cat/ls/grep output).
    assert multi_turn_execution_reward(nothing, **columns(ROWS)) == [0.0] * len(ROWS)


def test_excluded_functions_are_refused_on_replay():
    # multi_turn_base_0 excludes `cp`: copy-then-delete must not stand in for the expected `mv`.
    row = next(r for r in ROWS if r["id"] == "multi_turn_base_0_turn_0")
    assert "cp" not in {tool["function"]["name"] for tool in json.loads(row["tools"])}
    calls = [
        {"name": "cd", "arguments": {"folder": "document"}},
        {"name": "mkdir", "arguments": {"dir_name": "temp"}},
        {"name": "cp", "arguments": {"source": "final_report.pdf", "destination": "temp"}},
        {"name": "rm", "arguments": {"file_name": "final_report.pdf"}},
    ]
    assert multi_turn_state_reward([qwen3_text(calls)], **columns([row])) == [0.0]
    without_tools = {**columns([row]), "tools": None}
    assert multi_turn_state_reward([qwen3_text(calls)], **without_tools) == [1.0]


# ---- rewards: garbage and non-tasks ------------------------------------------------------------------------------


GARBAGE = [
    None,
    42,
    "",
    "I cannot help with that.",
    "<tool_call>not json</tool_call>",
    '<tool_call>{"name": "rm"}</tool_call>',
    '<tool_call>{"name": "rm", "arguments": "{broken"}</tool_call>',
    '<tool_call>{"name": 7, "arguments": []}</tool_call>',
    '<tool_call>{"name": "mkdir", "arguments": {"dir_name": {"nested": 1}}}</tool_call>',
    [{"role": "assistant", "tool_calls": [{"type": "function", "function": {"name": "cd", "arguments": "{bad"}}]}],
    [{"role": "assistant", "tool_calls": "nonsense"}],
    [None, 3, "text", {"role": "assistant", "content": None}],
    {"role": "assistant", "content": "<tool_call>{</tool_call>"},
]


@pytest.mark.parametrize("reward", REWARDS, ids=lambda f: f.__name__)
@pytest.mark.parametrize("completion", GARBAGE, ids=range(len(GARBAGE)))
def test_garbage_completions_score_zero_without_raising(reward, completion):
    rows = CHANGING[:10]
    assert reward([completion] * len(rows), **columns(rows)) == [0.0] * len(rows)


@pytest.mark.parametrize("reward", REWARDS, ids=lambda f: f.__name__)
def test_garbage_columns_score_zero_and_single_turn_rows_none(reward):
    row = CHANGING[0]
    completion = qwen3_text(json.loads(row["ground_truth"]))
    assert reward([completion], **{**columns([row]), "initial_config": ["{not json"]}) == [0.0]
    assert reward([completion], **{**columns([row]), "involved_classes": ['["NoSuchAPI"]']}) == [0.0]
    assert reward([completion], **{**columns([row]), "ground_truth": ['{"name": "ls"}']}) == [0.0]
    single_turn = {"initial_config": [""], "involved_classes": ["[]"], "ground_truth": ['[{"name": "f"}]']}
    assert reward([completion], **single_turn) == [None]
    assert reward([completion], initial_config=[row["initial_config"]], ground_truth=[""]) == [None]
    assert reward([]) == []
