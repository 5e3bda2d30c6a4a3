"""The train/held-out overlap check (gear_trl.data.overlap) finds copies of a prompt that were reformatted: other
case, spacing, punctuation, number formatting, JSON key order, messages stored as a JSON string; and it keeps apart
prompts that differ in what they ask (an operator, a digit, a decimal point)."""

from __future__ import annotations

import json

import pytest

from gear_trl.data.overlap import normalize, request_text, shared_requests

NEAR_DUPLICATES = [
    ("What is 1,000 + 2.50?", "what is 1000+2.5"),
    ("  Find   the AREA of a triangle\nwith base 10.", "find the area of a triangle with base 10"),
    ("It's “fine”; isn't it!", 'It’s "fine": isn’t it?'),
    ("Take 3.0 apples and .5 pears, 007 times.", "take 3 apples and 0.5 pears 7 times"),
    ("Pay $1,234,567.00 now.", "pay $ 1234567 now"),
    ("Ｆｕｌｌ　width", "full width"),
    ('Book with {"city": "Paris", "nights": 3}', 'book with {"nights":3,"city":"Paris"}'),
]
DIFFERENT = [
    ("x^2+1", "x^2-1"),
    ("2/3", "2*3"),
    ("3.5 apples", "35 apples"),
    ("1,234,5", "1234,5"),
    ('call f({"a": 1})', 'call f({"a": 2})'),
    ("the rapist", "therapist"),
]


@pytest.mark.parametrize(("one", "other"), NEAR_DUPLICATES)
def test_a_reformatted_copy_is_found(one, other):
    assert normalize(one) == normalize(other)
    assert shared_requests([{"problem": one}, {"problem": "unrelated"}], [{"question": other}]) == [normalize(one)]


@pytest.mark.parametrize(("one", "other"), DIFFERENT)
def test_prompts_that_ask_different_things_stay_apart(one, other):
    assert normalize(one) != normalize(other)
    assert shared_requests([{"problem": one}], [{"problem": other}]) == []


def test_tool_rows_match_across_json_key_order_and_message_encoding():
    call = {"name": "get_weather", "arguments": {"city": "Lisbon", "days": 3}}
    reordered = {"arguments": {"days": 3, "city": "Lisbon"}, "name": "get_weather"}
    train = [{"query": f"Repeat this call: {json.dumps(call)}", "tools": "[]"}]
    # the held-out copy keeps its messages as a JSON string, keys in another order, and the call re-spaced
    held_out = [
        {"prompt": json.dumps([{"content": f"repeat this call:{json.dumps(reordered, indent=1)}", "role": "user"}])}
    ]
    assert len(shared_requests(train, held_out)) == 1
    held_out[0]["prompt"] = held_out[0]["prompt"].replace("Lisbon", "Porto")
    assert shared_requests(train, held_out) == []


def test_a_string_prompt_that_is_not_messages_is_read_as_text():
    assert request_text({"prompt": "[{not json"}) == "[{not json"
    assert request_text({"prompt": "[1, 2]"}) == "[1 2]"
    assert request_text({"prompt": "  ?!  "}) is None
