"""`tool_call_accuracy`'s checker agrees with BFCL's own AST checker (`ast_checker` of the bfcl-eval package).

Every row of BFCL's four single-turn Python categories, read from the installed bfcl-eval package, yields candidate
answers: its reference calls, every allowed value of every parameter (optional ones included), perturbations of each
value (wrong types, int vs float, ints inside float arrays, string case, whitespace and punctuation, objects and
lists changed inside), missing and extra parameters, wrong function names, and reordered, dropped and duplicated
parallel calls. Both checkers score each candidate and must agree. Hand-written cases pin the rules one by one, and
the differences kept on purpose (see `gear_trl/rewards/tool_call.py`) are asserted as differences.

bfcl-eval is installed without its dependencies (`make install` does it: `pip install --no-deps bfcl-eval==...`).
"""

from __future__ import annotations

import importlib
import importlib.resources
import itertools
import json
import re
from collections.abc import Iterator
from typing import Any

import pytest

from gear_trl.data.bfcl import bfcl_function_to_tool_schema, bfcl_tool_name, reference_calls, rename_possible_answer
from gear_trl.rewards.bfcl_ast import _checker
from gear_trl.rewards.tool_call import check_calls

pytest.importorskip("bfcl_eval", reason="bfcl-eval is not installed; `make install` installs it (pip --no-deps)")

# Category (as BFCL's checker names it) -> file name under bfcl_eval/data/ and bfcl_eval/data/possible_answer/.
CATEGORY_FILES = {
    "simple_python": r"BFCL_v\d+_simple(_python)?\.json",
    "multiple": r"BFCL_v\d+_multiple\.json",
    "parallel": r"BFCL_v\d+_parallel\.json",
    "parallel_multiple": r"BFCL_v\d+_parallel_multiple\.json",
}


# BFCL's own checker, imported as the `bfcl_ast` reward imports it (a stand-in for the vendor clients its config
# module pulls in, which a --no-deps install lacks)
AST_CHECKER = _checker()
PYTHON = importlib.import_module("bfcl_eval.constants.enums").Language.PYTHON


def renamed_function(fn_doc: dict[str, Any]) -> dict[str, Any]:
    return {**fn_doc, "name": bfcl_tool_name(fn_doc["name"])}


def official(fn_docs: list[dict], calls: list[dict], possible_answer: list[dict], category: str) -> bool | str:
    """BFCL's verdict on `calls` (`[{"name", "arguments"}]`); the exception's name where its checker raises."""
    model_output = [{call["name"]: call["arguments"]} for call in calls]
    try:
        return AST_CHECKER.ast_checker(
            [renamed_function(fn) for fn in fn_docs], model_output, possible_answer, PYTHON, category, "unused"
        )["valid"]
    except Exception as error:  # noqa: BLE001 - a crash is a verdict to report, not a test error
        return type(error).__name__


def ours(fn_docs: list[dict], calls: list[dict], possible_answer: list[dict]) -> bool:
    return check_calls(calls, possible_answer, [bfcl_function_to_tool_schema(fn) for fn in fn_docs])


# ---------------------------------------------------------------------------------------------------------------------
# Candidates generated from BFCL's rows
# ---------------------------------------------------------------------------------------------------------------------


def _read_jsonl(relative_pattern: str) -> list[dict]:
    root = importlib.resources.files("bfcl_eval") / "data"
    folder, _, pattern = relative_pattern.rpartition("/")
    directory = root / folder if folder else root
    names = [entry.name for entry in directory.iterdir() if re.fullmatch(pattern, entry.name)]
    assert len(names) == 1, f"expected one file matching {relative_pattern} in bfcl_eval/data, found {names}"
    return [json.loads(line) for line in (directory / names[0]).read_text("utf-8").splitlines() if line.strip()]


def bfcl_rows(category: str) -> list[tuple[str, list[dict], list[dict]]]:
    """(id, function docs, possible answer with renamed functions) for every row of `category`."""
    answers = {row["id"]: row["ground_truth"] for row in _read_jsonl("possible_answer/" + CATEGORY_FILES[category])}
    return [
        (row["id"], row["function"], rename_possible_answer(answers[row["id"]]))
        for row in _read_jsonl(CATEGORY_FILES[category])
    ]


def value_variants(value: Any) -> Iterator[Any]:
    """Perturbations of one argument value, right and wrong."""
    if isinstance(value, bool):
        yield from (not value, int(value), str(value))
    elif isinstance(value, int):
        yield from (value + 1, float(value), str(value), True)
    elif isinstance(value, float):
        yield from (value + 0.5, str(value), True)
        if value.is_integer():
            yield int(value)
    elif isinstance(value, str):
        yield from (
            value.upper(),
            value.lower(),
            value.title(),
            f" {value} ",
            value + ".",
            value + ":",
            value + "x",
            "",
        )
        yield from (
            value.replace(" ", "\t"),
            value.replace(" ", "\n"),
            value.replace(" ", "-"),
            value.replace(" ", "_"),
        )
        yield from (value.replace("'", '"'), value.replace("ss", "\N{LATIN SMALL LETTER SHARP S}"))
    elif isinstance(value, list):
        yield from (value[::-1], value[:-1], value + value[-1:], [], [str(item) for item in value])
        for variant in value_variants(value[0] if value else 0):
            yield [variant, *value[1:]]
        yield [float(item) if type(item) is int else item for item in value]
        yield [int(item) if type(item) is float and item.is_integer() else item for item in value]  # ints, float array
        yield [item.upper() if isinstance(item, str) else item for item in value]
        yield [item.replace(" ", "\t") if isinstance(item, str) else item for item in value]
    elif isinstance(value, dict):
        for key, item in value.items():
            yield {other: value[other] for other in value if other != key}
            for variant in value_variants(item):
                yield {**value, key: variant}
        yield {**value, "extra_key": 1}
    yield from (None, [value], {"value": value})


def concrete(allowed: Any) -> Any:
    """One concrete value of an allowed value: nested {key: [allowed...]} objects take each key's first value."""
    if isinstance(allowed, dict):
        return {
            key: concrete(next(option for option in options if option != ""))
            for key, options in allowed.items()
            if isinstance(options, list) and any(option != "" for option in options)
        }
    if isinstance(allowed, list):
        return [concrete(item) for item in allowed]
    return allowed


def candidates(fn_docs: list[dict], possible_answer: list[dict]) -> Iterator[list[dict]]:
    reference = reference_calls(possible_answer, [bfcl_function_to_tool_schema(fn) for fn in fn_docs])
    yield reference
    names = [bfcl_tool_name(fn["name"]) for fn in fn_docs]
    for index, (call, expected) in enumerate(zip(reference, possible_answer, strict=True)):

        def replaced(name: str, arguments: dict, index: int = index) -> list[dict]:
            return [*reference[:index], {"name": name, "arguments": arguments}, *reference[index + 1 :]]

        name, arguments = call["name"], call["arguments"]
        for param, value in arguments.items():
            yield replaced(name, {other: arguments[other] for other in arguments if other != param})  # left out
            for variant in value_variants(value):
                yield replaced(name, {**arguments, param: variant})
        for param, allowed in expected[name].items():  # every allowed value, optional parameters included
            for option in allowed:
                if option != "":
                    yield replaced(name, {**arguments, param: concrete(option)})
        yield replaced(name, {**arguments, "unexpected_param": 1})
        yield replaced(name + "_v2", arguments)
        for other in names:
            if other != name:
                yield replaced(other, arguments)
    for order in itertools.islice(itertools.permutations(reference), 1, 6):
        yield list(order)
    yield reference[:-1]
    yield reference + reference[:1]


@pytest.mark.parametrize("category", list(CATEGORY_FILES))
def test_checkers_agree_on_generated_candidates(category):
    disagreements, verdicts = [], {True: 0, False: 0}
    for row_id, fn_docs, possible_answer in bfcl_rows(category):
        for calls in candidates(fn_docs, possible_answer):
            expected = official(fn_docs, calls, possible_answer, category)
            got = ours(fn_docs, calls, possible_answer)
            if got != expected:
                disagreements.append(f"{row_id}: {json.dumps(calls)[:300]} -> ours {got}, BFCL {expected}")
            verdicts[got] += 1
    assert not disagreements, f"{len(disagreements)} disagreements, e.g.\n" + "\n".join(disagreements[:10])
    # Not vacuous: thousands of candidates each way.
    assert verdicts[True] > 1000 and verdicts[False] > 5000, verdicts


# ---------------------------------------------------------------------------------------------------------------------
# The rules, one by one, on a hand-written function
# ---------------------------------------------------------------------------------------------------------------------

TRIP = {
    "name": "travel.plan",
    "description": "Plan a trip.",
    "parameters": {
        "type": "dict",
        "properties": {
            "city": {"type": "string"},
            "days": {"type": "integer"},
            "budget": {"type": "float"},
            "note": {"type": "string"},
            "weights": {"type": "array", "items": {"type": "float"}},
            "scores": {"type": "array", "items": {"type": "float"}},
            "levels": {"type": "array", "items": {"type": "float"}},
            "tags": {"type": "array", "items": {"type": "string"}},
            "prefs": {"type": "dict", "properties": {"seat": {"type": "string"}, "bags": {"type": "integer"}}},
            "stops": {"type": "array", "items": {"type": "dict"}},
            "data": {"type": "array", "items": {"type": "float"}},
            "extra": {"type": "any"},
        },
        "required": ["city", "days"],
    },
}
TRIP_ANSWER = {
    "travel_plan": {
        "city": ["New York, NY", "NYC"],
        "days": [3],
        "budget": [250.0, ""],
        "note": ["window seat", ""],
        "weights": [[0.5, 1.0]],
        "scores": [[1.0, 2.0], ""],
        "levels": [[1, 2], ""],
        "tags": [["Big Apple", "Museums"], ""],
        "prefs": [{"seat": ["aisle"], "bags": [2, ""], "rows": [["A 1", "B 2"], ""]}, ""],
        "stops": [[{"name": ["Boston"]}], ""],
        "data": ["data['sales']", ""],
        "extra": ["", "anything"],
    }
}
BASE = {"city": "NYC", "days": 3, "weights": [0.5, 1.0]}

# (case, arguments replacing BASE's, BFCL's verdict). The verdict is asserted for BFCL's checker and for ours.
RULES = [
    ("reference", {}, True),
    ("string: case, spaces, separators", {"city": "new-york ny"}, True),
    ("string: a tab is not a space", {"city": "New\tYork, NY"}, False),
    ("string: no Unicode case folding", {"note": "WINDOW SEAT".replace("S", "\N{LATIN SMALL LETTER LONG S}")}, False),
    ("string: '' for an optional string", {"note": ""}, True),
    ("integer: a float is wrong", {"days": 3.0}, False),
    ("integer: a boolean is wrong", {"days": True}, False),
    ("float: an integer passes", {"budget": 250}, True),
    ("float: a string is wrong", {"budget": "250"}, False),
    ("float array: an integer item is wrong", {"weights": [0.5, 1]}, False),
    ("optional float array: an integer item passes", {"scores": [1, 2]}, True),
    ("float array whose answer has integers: integer items pass", {"levels": [1, 2]}, True),
    ("float array whose answer has integers: float items pass", {"levels": [1.0, 2.0]}, True),
    ("string array: items normalized", {"tags": ["big apple", "MUSEUMS"]}, True),
    ("array: order matters", {"tags": ["Museums", "Big Apple"]}, False),
    ("array: [] for an optional array", {"tags": []}, True),
    ("object: optional key left out", {"prefs": {"seat": "Aisle"}}, True),
    ("object: Python equality inside (2.0 == 2)", {"prefs": {"seat": "aisle", "bags": 2.0}}, True),
    ("object: strings one level down compared exactly", {"prefs": {"seat": "aisle", "rows": ["a1", "b2"]}}, False),
    ("object: list value compared exactly", {"prefs": {"seat": "aisle", "rows": ["A 1", "B 2"]}}, True),
    ("object: unknown key", {"prefs": {"seat": "aisle", "meal": "veg"}}, False),
    ("object: required key missing", {"prefs": {"bags": 2}}, False),
    ("array of objects", {"stops": [{"name": "boston"}]}, True),
    ("array of objects: wrong length", {"stops": [{"name": "Boston"}, {"name": "Boston"}]}, False),
    ("variable name: exact", {"data": "data['sales']"}, True),
    ("variable name: not normalized", {"data": 'data["sales"]'}, False),
    ("any: read as a string", {"extra": "Anything"}, True),
    ("any: a number is wrong", {"extra": 1}, False),
    ("missing required", {"days": None}, False),
    ("extra parameter", {"hotel": "Hilton"}, False),
]


@pytest.mark.parametrize(("case", "changes", "verdict"), RULES, ids=[case for case, _, _ in RULES])
def test_rule(case, changes, verdict):
    arguments = {key: value for key, value in {**BASE, **changes}.items() if value is not None}
    calls = [{"name": "travel_plan", "arguments": arguments}]
    assert official([TRIP], calls, [TRIP_ANSWER], "simple_python") is verdict
    assert ours([TRIP], calls, [TRIP_ANSWER]) is verdict


def test_wrong_function_name_and_call_count():
    calls = [{"name": "travel_plan", "arguments": BASE}]
    for wrong in ([{"name": "travel_plans", "arguments": BASE}], calls * 2, []):
        assert official([TRIP], wrong, [TRIP_ANSWER], "simple_python") is False
        assert ours([TRIP], wrong, [TRIP_ANSWER]) is False


# ---------------------------------------------------------------------------------------------------------------------
# Differences kept on purpose
# ---------------------------------------------------------------------------------------------------------------------

PICK = {
    "name": "pick",
    "description": "Pick a number.",
    "parameters": {"type": "dict", "properties": {"n": {"type": "integer"}}, "required": ["n"]},
}


def test_parallel_calls_pair_up_by_matching_not_greedily():
    # Expected calls n in {1, 2} and n == 1; calls n=1, n=2 answer both. BFCL gives the first expected call the first
    # call it matches (n=1), leaving n=2 for n == 1: a correct answer fails, by order alone.
    possible_answer = [{"pick": {"n": [1, 2]}}, {"pick": {"n": [1]}}]
    calls = [{"name": "pick", "arguments": {"n": 1}}, {"name": "pick", "arguments": {"n": 2}}]
    assert official([PICK], calls, possible_answer, "parallel") is False
    assert official([PICK], calls[::-1], possible_answer, "parallel") is True
    assert ours([PICK], calls, possible_answer) and ours([PICK], calls[::-1], possible_answer)


def test_a_call_that_crashes_bfcl_scores_zero():
    # An optional array of objects waives BFCL's item type check, then its object check calls .items() on a string.
    calls = [{"name": "travel_plan", "arguments": {**BASE, "stops": ["Boston"]}}]
    assert official([TRIP], calls, [TRIP_ANSWER], "simple_python") == "AttributeError"
    assert ours([TRIP], calls, [TRIP_ANSWER]) is False
