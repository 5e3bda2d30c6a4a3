"""bench/credit_sites.py: locating where a calculator rollout departs from the reference (hand-built rollouts)."""

from __future__ import annotations

import importlib
import json
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sites = importlib.import_module("bench.credit_sites")

TRUTH = json.dumps([{"name": "add", "arguments": {"a": 33, "b": 24}}])
CALL = ["<tool_call>\n", '{"name": "add", "arguments": {"a": ', "3", "3", ', "b": ', "2", "4", "}}", "\n</tool_call>"]
TOOL = ["<tool_response>", '{"result": 57}', "</tool_response>"]


def rollout(call_tokens, answer_tokens):
    tokens = [*call_tokens, *TOOL, *answer_tokens]
    mask = [True] * len(call_tokens) + [False] * len(TOOL) + [True] * len(answer_tokens)
    return tokens, {"ground_truth": TRUTH, "mask": mask}


def test_the_reference_rollout_has_no_error_site():
    tokens, row = rollout(CALL, ["The answer is ", "\\boxed{", "57", "}."])
    assert sites.expected_turns(TRUTH) == ['{"name": "add", "arguments": {"a": 33, "b": 24}}', "\\boxed{57}"]
    assert sites.turns_of(tokens, row["mask"]) == [list(range(9)), list(range(12, 16))]
    assert sites.error_site(tokens, row) is None


def test_a_miscopied_digit_is_the_error_site():
    call = list(CALL)
    call[5] = "1"  # b = 14 instead of 24
    tokens, row = rollout(call, ["The answer is ", "\\boxed{", "47", "}."])
    assert sites.error_site(tokens, row) == 5


def test_a_wrong_final_answer_is_the_error_site():
    tokens, row = rollout(CALL, ["The answer is ", "\\boxed{", "75", "}."])
    assert sites.error_site(tokens, row) == 14  # the answer token, after the tool result


def test_a_turn_too_many_and_a_missing_call_are_located_or_skipped():
    tokens, row = rollout(CALL, ["The answer is ", "\\boxed{", "57", "}."])
    extra_tokens = [*tokens, "<tool_response>", "x", "more"]
    extra_row = {**row, "mask": [*row["mask"], False, True, True]}
    assert sites.error_site(extra_tokens, extra_row) == len(tokens) + 1
    plain, plain_row = rollout(["I will not call tools."], ["The answer is ", "\\boxed{", "57", "}."])
    assert sites.error_site(plain, plain_row) is None  # no call JSON to compare: not located


def test_onset_is_the_first_token_of_a_segment():
    segments = [-1, 0, 0, -1, 1, 2]
    assert [sites.is_onset(segments, i) for i in range(6)] == [False, True, False, False, True, True]


def test_arith_reference_and_error_site():
    assert sites.arith_reference("Compute 47 + 38 - 12.\n\nPlease reason step by step") == (
        "47 + 38 = 85\n85 - 12 = 73\nThe answer is \\boxed{73}."
    )
    tokens = ["<think>", "\n\n", "</think>", "\n\n", "47", " + ", "38", " = ", "8", "4", "\n", "84", " - ", "12"]
    row = {"prompt": "What is 47 + 38 - 12?", "mask": [True] * len(tokens)}
    assert sites.arith_error_site(tokens, row) == 9  # "84": the units digit is the first wrong character
    right = {"prompt": "What is 47 + 38?", "mask": [True] * 4}
    assert sites.arith_error_site(["47", " + ", "38", " = 85"], right) is None


def test_label_free_diagnostics_of_trace_rows():
    rows = [
        {"kl": [0.4, 0.2], "mask": [True, True], "segment_ids": [0, 1], "advantage": -1.0, "has_ground_truth": True},
        {"kl": [0.1, 0.1], "mask": [True, True], "segment_ids": [0, 0], "advantage": 1.0, "has_ground_truth": True},
    ]
    report = sites.label_free(rows)
    assert report["kl_failed_over_passed"] == pytest.approx(3.0)
    assert report["onsets_in_failed_frac"] == pytest.approx(2 / 3)
