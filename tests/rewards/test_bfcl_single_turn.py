"""The committed BFCL single-turn subsets (`data/bfcl/`) and the `tool_call_accuracy` reward that scores them.

Offline: reads the committed JSONL only. Every row's own reference calls must score 1.0 however they are rendered,
and perturbed calls 0.0.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from datasets import load_dataset

from gear_trl.data.bfcl import bfcl_function_to_tool_schema, reference_calls
from gear_trl.envs.tool_calls import parse_tool_calls
from gear_trl.rewards.tool_call import check_calls, normalize_string, tool_call_accuracy

DATA_DIR = Path(__file__).resolve().parents[2] / "data" / "bfcl"
CATEGORIES = ["simple", "multiple", "parallel", "parallel_multiple"]
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


def as_qwen_text(calls: list[dict]) -> str:
    blocks = [f"<tool_call>\n{json.dumps(call)}\n</tool_call>" for call in calls]
    return "I will call the tools.\n" + "\n".join(blocks)


def as_trl_messages(calls: list[dict], arguments_as_json: bool = False) -> list[dict]:
    tool_calls = [
        {
            "type": "function",
            "function": {
                "name": call["name"],
                "arguments": json.dumps(call["arguments"]) if arguments_as_json else call["arguments"],
            },
        }
        for call in calls
    ]
    return [{"role": "assistant", "content": "", "tool_calls": tool_calls}]


def score(rows: list[dict], completions: list) -> list[float | None]:
    return tool_call_accuracy(
        completions, possible_answer=[row["possible_answer"] for row in rows], tools=[row["tools"] for row in rows]
    )


@pytest.fixture(scope="module")
def datasets_by_category():
    return {
        category: load_dataset("json", data_files=str(DATA_DIR / f"{category}.jsonl"), split="train")
        for category in CATEGORIES
    }


@pytest.fixture(scope="module")
def rows(datasets_by_category):
    return [row for category in CATEGORIES for row in datasets_by_category[category]]


def references(row: dict) -> list[dict]:
    return json.loads(row["ground_truth"])


# ---------------------------------------------------------------------------------------------------------------------
# The committed data
# ---------------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("category", CATEGORIES)
def test_subset_loads_with_the_shared_schema(datasets_by_category, category):
    dataset = datasets_by_category[category]
    assert dataset.num_rows > 0
    assert dataset.column_names == COLUMNS
    assert len(set(dataset["id"])) == dataset.num_rows
    for row in dataset:
        assert row["category"] == category
        assert row["prompt"] and all(message["role"] == "user" for message in row["prompt"])
        assert row["initial_config"] == "" and row["involved_classes"] == "[]"
        tools = json.loads(row["tools"])
        assert tools and all(tool["type"] == "function" for tool in tools)
        for tool in tools:
            assert "." not in tool["function"]["name"]
            assert tool["function"]["parameters"]["type"] == "object"
        possible_answer = json.loads(row["possible_answer"])
        assert len(possible_answer) == len(references(row)) >= 1
        if category in ("simple", "multiple"):
            assert len(possible_answer) == 1


def test_bfcl_types_become_json_schema_types():
    fn_doc = {
        "name": "geo.distance",
        "description": "d",
        "parameters": {
            "type": "dict",
            "properties": {
                "points": {"type": "array", "items": {"type": "tuple", "items": {"type": "float"}}},
                "options": {"type": "dict", "properties": {"unit": {"type": "string", "optional": True}}},
                "data": {"type": "any", "description": "anything"},
            },
            "required": ["points"],
            "optional": ["options"],
        },
        "response": {"type": "dict"},
    }
    tool = bfcl_function_to_tool_schema(fn_doc)
    assert tool["function"]["name"] == "geo_distance"
    parameters = tool["function"]["parameters"]
    assert parameters["type"] == "object" and "optional" not in parameters
    assert parameters["properties"]["points"]["items"] == {"type": "array", "items": {"type": "number"}}
    assert parameters["properties"]["options"] == {"type": "object", "properties": {"unit": {"type": "string"}}}
    assert parameters["properties"]["data"] == {"description": "anything"}
    assert set(tool["function"]) == {"name", "description", "parameters"}


def test_reference_calls_pick_typed_values_and_drop_unusable_optionals():
    tools = [
        {
            "type": "function",
            "function": {
                "name": "f",
                "parameters": {
                    "type": "object",
                    "properties": {"a": {"type": "integer"}, "mod": {"type": "number"}, "venue": {"type": "string"}},
                    "required": ["a"],
                },
            },
        }
    ]
    possible_answer = [{"f": {"a": ["", 3], "mod": ["", None], "venue": ["", True], "ghost": ["", 1]}}]
    assert reference_calls(possible_answer, tools) == [{"name": "f", "arguments": {"a": 3}}]


# ---------------------------------------------------------------------------------------------------------------------
# Reference calls score 1.0
# ---------------------------------------------------------------------------------------------------------------------


def test_reference_calls_as_qwen_text_score_one(rows):
    rewards = score(rows, [as_qwen_text(references(row)) for row in rows])
    failures = [row["id"] for row, reward in zip(rows, rewards, strict=True) if reward != 1.0]
    assert not failures


def test_reference_calls_as_trl_tool_call_messages_score_one(rows):
    rewards = score(rows, [as_trl_messages(references(row)) for row in rows])
    assert [row["id"] for row, reward in zip(rows, rewards, strict=True) if reward != 1.0] == []
    rewards = score(rows, [as_trl_messages(references(row), arguments_as_json=True) for row in rows])
    assert [row["id"] for row, reward in zip(rows, rewards, strict=True) if reward != 1.0] == []


def test_parallel_calls_match_in_any_order(rows):
    parallel = [row for row in rows if row["category"].startswith("parallel") and len(references(row)) > 1]
    assert parallel
    reversed_calls = [as_qwen_text(references(row)[::-1]) for row in parallel]
    rotated_calls = [as_trl_messages(references(row)[1:] + references(row)[:1]) for row in parallel]
    assert score(parallel, reversed_calls) == [1.0] * len(parallel)
    assert score(parallel, rotated_calls) == [1.0] * len(parallel)


def test_parallel_matching_is_one_to_one_not_greedy():
    # Expected call 0 allows x in {1, 2}, call 1 only x = 1: pairing call 0 with the first model call (x = 1) first
    # would leave x = 2 for call 1. A full assignment exists (0 <- x=2, 1 <- x=1), so this is correct.
    tools = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object",
              "properties": {"x": {"type": "integer"}}, "required": ["x"]}}}]  # fmt: skip
    possible_answer = [{"f": {"x": [1, 2]}}, {"f": {"x": [1]}}]
    calls = [{"name": "f", "arguments": {"x": 1}}, {"name": "f", "arguments": {"x": 2}}]
    assert check_calls(calls, possible_answer, tools)
    assert not check_calls([calls[1], calls[1]], possible_answer, tools)


# ---------------------------------------------------------------------------------------------------------------------
# Perturbed calls score 0.0
# ---------------------------------------------------------------------------------------------------------------------


def _perturbed_value(value):
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        return None
    if isinstance(value, str):
        return value + " qzx"
    return value + 1000


def test_wrong_function_name_scores_zero(rows):
    completions = []
    for row in rows:
        calls = references(row)
        calls[0]["name"] += "_v2"
        completions.append(as_qwen_text(calls))
    assert score(rows, completions) == [0.0] * len(rows)


def test_wrong_value_scores_zero(rows):
    perturbed_rows, completions = [], []
    for row in rows:
        calls = references(row)
        for param, value in calls[0]["arguments"].items():
            if _perturbed_value(value) is not None:
                calls[0]["arguments"][param] = _perturbed_value(value)
                perturbed_rows.append(row)
                completions.append(as_qwen_text(calls))
                break
    assert len(perturbed_rows) > 0.9 * len(rows)
    assert score(perturbed_rows, completions) == [0.0] * len(perturbed_rows)


def test_missing_required_parameter_scores_zero(rows):
    perturbed_rows, completions = [], []
    for row in rows:
        calls = references(row)
        tools = {tool["function"]["name"]: tool["function"] for tool in json.loads(row["tools"])}
        required = tools[calls[0]["name"]]["parameters"].get("required", [])
        if required:
            del calls[0]["arguments"][required[0]]
            perturbed_rows.append(row)
            completions.append(as_trl_messages(calls))
    assert len(perturbed_rows) > 0.9 * len(rows)
    assert score(perturbed_rows, completions) == [0.0] * len(perturbed_rows)


def test_unknown_parameter_scores_zero(rows):
    completions = []
    for row in rows:
        calls = references(row)
        calls[-1]["arguments"]["not_a_parameter"] = 1
        completions.append(as_qwen_text(calls))
    assert score(rows, completions) == [0.0] * len(rows)


def test_extra_call_scores_zero(rows):
    completions = [as_qwen_text(references(row) + references(row)[:1]) for row in rows]
    assert score(rows, completions) == [0.0] * len(rows)


def test_missing_call_in_parallel_scores_zero(rows):
    parallel = [row for row in rows if row["category"].startswith("parallel")]
    completions = [as_trl_messages(references(row)[:-1]) for row in parallel]
    assert score(parallel, completions) == [0.0] * len(parallel)


# ---------------------------------------------------------------------------------------------------------------------
# Value semantics on hand-made examples
# ---------------------------------------------------------------------------------------------------------------------

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "book",
            "parameters": {
                "type": "object",
                "properties": {
                    "city": {"type": "string"},
                    "nights": {"type": "integer"},
                    "budget": {"type": "number"},
                    "pets": {"type": "boolean"},
                    "guests": {"type": "array", "items": {"type": "string"}},
                    "filters": {
                        "type": "object",
                        "properties": {"stars": {"type": "integer"}, "pool": {"type": "boolean"}},
                    },
                },
                "required": ["city", "nights"],
            },
        },
    }
]
POSSIBLE_ANSWER = [
    {
        "book": {
            "city": ["New York, NY", "NYC"],
            "nights": [3],
            "budget": [250.0, ""],
            "pets": [False, ""],
            "guests": [["Ann", "Bob"], ""],
            "filters": [{"stars": [4], "pool": [True, ""]}, ""],
        }
    }
]


def _book(**arguments) -> bool:
    return check_calls([{"name": "book", "arguments": arguments}], POSSIBLE_ANSWER, TOOLS)


def test_values_follow_bfcl_semantics():
    assert _book(city="new york ny", nights=3)  # case, spaces and separators are ignored
    assert _book(city=" NYC ", nights=3, budget=250)  # an integer passes for a number
    assert _book(city="NYC", nights=3, guests=["ann", "BOB"], filters={"stars": 4})
    assert _book(city="NYC", nights=3, pets=False, filters={"stars": 4, "pool": True})
    assert not _book(city="Boston", nights=3)
    assert not _book(city="NYC", nights=3.0)  # a float does not pass for an integer
    assert not _book(city="NYC", nights=True)  # nor does a boolean
    assert not _book(city="NYC", nights=3, budget=True)
    assert not _book(city="NYC", nights=3, pets=0)
    assert not _book(city="NYC", nights=3, guests=["Bob", "Ann"])  # arrays are ordered
    assert not _book(city="NYC", nights=3, guests=["Ann"])
    assert not _book(city="NYC", nights=3, filters={"stars": 4, "spa": True})  # unknown key
    assert not _book(city="NYC", nights=3, filters={"pool": True})  # missing non-optional key
    assert not _book(city="NYC", nights=3, budget="")  # "" marks an omissible parameter, it is not a value
    assert not _book(city="NYC")  # required
    assert not _book(nights=3)


def test_listed_parameter_without_optional_marker_must_be_given():
    possible_answer = [{"book": {"city": ["NYC"], "nights": [3], "budget": [100.0]}}]
    assert not check_calls([{"name": "book", "arguments": {"city": "NYC", "nights": 3}}], possible_answer, TOOLS)


def test_allowed_value_of_another_type_is_compared_exactly():
    # BFCL writes variable names for arrays: x=data['sales'] in the question, "data['sales']" in the answer; BFCL's
    # checker compares such a value exactly, without normalizing it as a string.
    tools = [{"type": "function", "function": {"name": "fit", "parameters": {"type": "object",
              "properties": {"x": {"type": "array", "items": {"type": "number"}}}, "required": ["x"]}}}]  # fmt: skip
    possible_answer = [{"fit": {"x": ["data['sales']"]}}]
    assert check_calls([{"name": "fit", "arguments": {"x": "data['sales']"}}], possible_answer, tools)
    assert not check_calls([{"name": "fit", "arguments": {"x": 'data["sales"]'}}], possible_answer, tools)
    assert not check_calls([{"name": "fit", "arguments": {"x": [1.0]}}], possible_answer, tools)


def test_normalize_string():
    assert normalize_string(" April 1, 2024 ") == normalize_string("april-1 2024") == "april12024"
    assert normalize_string("it's") == 'it"s'
    assert normalize_string("New\tYork") == "new\tyork"  # only the space character is dropped, as in BFCL


# ---------------------------------------------------------------------------------------------------------------------
# Parsing and garbage
# ---------------------------------------------------------------------------------------------------------------------

GOOD = {"name": "book", "arguments": {"city": "NYC", "nights": 3}}


def test_parse_text_and_messages():
    draft = as_qwen_text([GOOD | {"name": "draft"}])
    assert parse_tool_calls(f"<think>{draft}</think>\n" + as_qwen_text([GOOD])) == [GOOD]
    assert parse_tool_calls("reasoning </think>" + as_qwen_text([GOOD])) == [GOOD]
    assert parse_tool_calls(as_trl_messages([GOOD], arguments_as_json=True)) == [GOOD]
    content_parts = [{"role": "assistant", "content": [{"type": "text", "text": as_qwen_text([GOOD])}]}]
    assert parse_tool_calls(content_parts) == [GOOD]
    conversation = [{"role": "user", "content": as_qwen_text([GOOD])}, {"role": "assistant", "content": "no call"}]
    assert parse_tool_calls(conversation) == []  # only assistant messages call tools


GARBAGE = [
    None,
    42,
    "",
    "The answer is 42.",
    "<tool_call>not json</tool_call>",
    "<tool_call>[1, 2]</tool_call>",
    '<tool_call>{"name": "book", "arguments": {"city": "NYC", "nights": 3}',  # unclosed block
    '<tool_call>{"name": "book", "arguments": "{broken"}</tool_call>',
    '<tool_call>{"name": "book", "arguments": [1]}</tool_call>',
    '<tool_call>{"name": 7, "arguments": {}}</tool_call>',
    "<tool_call>" + "[" * 100_000 + "</tool_call>",
    "<think>" + as_qwen_text([GOOD]),  # an unclosed thought hides the call
    as_qwen_text([GOOD]) + "\n<tool_call>oops</tool_call>",  # one good call and one broken one
    [{"role": "assistant", "tool_calls": "book"}],
    [{"role": "assistant", "tool_calls": [None, 3]}],
    [{"role": "assistant", "tool_calls": [{"function": {"name": "book", "arguments": "{not json"}}]}],
    [{"role": "assistant", "content": None}],
    [None, 3, "text"],
    {"role": "assistant", "content": {"weird": True}},
]


def test_garbage_scores_zero_without_raising():
    n = len(GARBAGE)
    rewards = tool_call_accuracy(GARBAGE, [json.dumps(POSSIBLE_ANSWER)] * n, [json.dumps(TOOLS)] * n)
    assert rewards == [0.0] * len(GARBAGE)


def test_good_call_scores_one_and_broken_columns_do_not_raise():
    completion = as_qwen_text([GOOD])
    assert tool_call_accuracy([completion], [json.dumps(POSSIBLE_ANSWER)], [json.dumps(TOOLS)]) == [1.0]
    assert tool_call_accuracy([completion], [POSSIBLE_ANSWER], [TOOLS]) == [1.0]  # already-decoded columns
    assert tool_call_accuracy([completion], [json.dumps(POSSIBLE_ANSWER)], ["not json"]) == [1.0]  # answer-only check
    assert tool_call_accuracy([completion], ["{not json"], [json.dumps(TOOLS)]) == [0.0]


def test_rows_without_possible_answer_get_none():
    completions = [as_qwen_text([GOOD])] * 3
    rewards = tool_call_accuracy(completions, ["", None, json.dumps(POSSIBLE_ANSWER)], [json.dumps(TOOLS)] * 3)
    assert rewards == [None, None, 1.0]


def test_rewards_accept_trl_keyword_call(rows):
    row = rows[0]
    rewards = tool_call_accuracy(
        prompts=[row["prompt"]],
        completions=[as_trl_messages(references(row))],
        completion_ids=[[1, 2, 3]],
        possible_answer=[row["possible_answer"]],
        tools=[row["tools"]],
        ground_truth=[row["ground_truth"]],
        id=[row["id"]],
        category=[row["category"]],
        initial_config=[""],
        involved_classes=["[]"],
        trainer_state=None,
    )
    assert rewards == [1.0]
