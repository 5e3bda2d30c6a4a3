"""Single-turn tool-call correctness against a BFCL possible answer, in TRL's reward-function signature.

    tool_call_accuracy(completions, possible_answer, tools, **kwargs) -> list[float | None]

A completion scores 1.0 when its tool calls are exactly the expected calls, 0.0 otherwise. The columns are those of
the shared tool-use schema (`data/README.md`, "BFCL (tool use)"): `possible_answer` is a JSON string,
`[{tool_name: {param: [allowed values...]}}]`, one entry per expected call, `""` among a parameter's allowed values
meaning it may be left out; `tools` is a JSON string of OpenAI-style tool schemas. Rows with an empty
`possible_answer` (multi-turn rows, scored by another reward) get None, which TRL leaves out of this reward's mean.

The checking gives the verdict of BFCL's AST checker (`ast_checker` in the bfcl-eval package, Python categories),
written independently; `tests/rewards/test_bfcl_checker_agreement.py` scores candidates generated from every BFCL
single-turn row with both and asserts they agree.

- The number of calls equals the number of expected calls, and calls and expected calls pair up one-to-one, in any
  order (for one expected call this is just "the one call matches").
- A call matches an expected call when the names are equal, every parameter the tool's schema requires is given,
  every given parameter is both declared by the tool and listed in the expected call, every given value is allowed,
  and every listed parameter left out has `""` among its allowed values.
- Type: a value has the schema's type exactly (a boolean is not an integer, a float is not an integer; an integer
  passes for a `number` at the top level), or the type of the parameter's first allowed value, which is how BFCL
  accepts the variable names it writes as strings (`"data['sales']"` for an array). Array items have the item type
  exactly (an integer in a `number` array fails) or the type of the first item of an allowed array; an allowed
  value that is not an array, such as the optional marker `""`, waives the item check. An untyped parameter is
  BFCL's `any`, checked as a string.
- Value: where the allowed values have the schema's type, strings compare after `normalize_string` (spaces, not
  tabs or newlines, and `, . / - _ * ^` dropped, `str.lower`, `'` read as `"`), arrays element by element with
  their string items normalized, objects key by key against BFCL's `{key: [allowed...]}` (one level deep, strings
  normalized, everything else by Python's `==`, so `2.0` equals `2`), arrays of objects object by object;
  otherwise, and for numbers, booleans and variable names, by Python's `==` with nothing normalized. Because the
  optional marker is itself a string and BFCL reads it as an empty array too, `""` passes for an optional string
  and `[]` for an optional array, as in BFCL.

Differences from BFCL's checker, kept on purpose:

- Parallel calls pair up by a perfect matching; BFCL hands each expected call the first unused call it matches, which
  fails a correct answer when one call matches two expected calls and is handed to the wrong one.
- A call on which BFCL's checker raises (a string among the items of an optional array of objects) does not match.
  A non-empty string among an array parameter's allowed arrays matches no array (BFCL compares it as the list of
  its characters). BFCL's data has neither case.
- Without the tool's schema (an unreadable `tools` column) the allowed values' own types stand in for the declared
  ones; BFCL always has the schema.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from ..data.bfcl import OPTIONAL_MARKER
from ..envs.tool_calls import ToolCall, load_json, parse_tool_calls

# BFCL compares strings without spaces, a few separators and case, so that "April 1, 2024", "april 1 2024" and
# "April-1-2024" are one answer, and treats ' and " alike.
_STRING_NOISE = re.compile(r"[ ,./\-_*^]")

# The Python type BFCL's checker wants for a parameter of each JSON-schema type (BFCL's own names: string, integer,
# float, boolean, array/tuple, dict).
_KIND_OF_TYPE = {
    "string": str,
    "integer": int,
    "number": float,
    "boolean": bool,
    "array": list,
    "object": dict,
    "null": type(None),
}


# ---------------------------------------------------------------------------------------------------------------------
# Checking calls against a possible answer
# ---------------------------------------------------------------------------------------------------------------------


def normalize_string(text: str) -> str:
    """`text` without spaces or any of `, . / - _ * ^`, lower-cased, with `'` read as `"` (BFCL's string match).

    Only the space character goes: a tab or a newline still counts, as in BFCL.
    """
    return _STRING_NOISE.sub("", text).lower().replace("'", '"')


def _answer_kind(allowed: list[Any]) -> type | None:
    # The Python type of the first allowed value that is not the optional marker: BFCL's "type of the answer".
    return next((type(option) for option in allowed if option != OPTIONAL_MARKER), None)


def _kind_of(json_type: Any, fallback: type | None) -> type | None:
    if json_type is None:
        return str  # BFCL's `any` (left untyped by `bfcl_schema_to_json_schema`), which BFCL checks as a string
    return _KIND_OF_TYPE.get(json_type, fallback) if isinstance(json_type, str) else fallback


def _declared_kinds(schema: dict[str, Any] | None, answer_kind: type | None) -> tuple[type | None, type | None]:
    # (the parameter's Python type, its items' Python type for an array). Without a tool schema the possible
    # answer's own type stands in for the declared one.
    if schema is None:
        return answer_kind, None
    kind = _kind_of(schema.get("type"), answer_kind)
    items = schema.get("items")
    item_kind = _kind_of(items.get("type"), None) if kind is list and isinstance(items, dict) else None
    return kind, item_kind


def _items_pass_type_check(items: list[Any], allowed: list[Any], item_kind: type) -> bool:
    # Every item has the schema's item type, or the type of the first item of one allowed array; there is no
    # int -> float allowance here, unlike at the top level. An allowed value that is not an array (the optional
    # marker, a variable name) waives the check, as in BFCL.
    return any(
        type(option) is not list
        or all(type(item) is item_kind or type(item) is _answer_kind(option) for item in items)
        for option in allowed
    )


def _passes_type_check(value: Any, allowed: list[Any], kind: type | None, item_kind: type | None) -> bool:
    # The declared type (exactly: a boolean is not an integer), or the type of the allowed values, which is how BFCL
    # accepts the variable name it writes as a string where the schema wants, say, an array.
    if type(value) is kind:
        return item_kind is None or _items_pass_type_check(value, allowed, item_kind)
    return type(value) is _answer_kind(allowed)


def _normalized(value: Any) -> Any:
    return normalize_string(value) if isinstance(value, str) else value


def _normalized_items(option: Any) -> list[Any] | None:
    # An allowed array with its string items normalized; the optional marker reads as the empty array (BFCL iterates
    # over it), any other non-array allowed value matches no array.
    if option == OPTIONAL_MARKER:
        return []
    return [_normalized(item) for item in option] if type(option) is list else None


def _object_matches(value: Any, allowed_by_key: dict[str, Any]) -> bool:
    # BFCL's allowed value for an object is {key: [allowed values...]}, with "" marking keys that may be left out.
    # One level deep: strings are normalized, anything else is compared with Python's `==` and no type check (so 2.0
    # passes for 2, and True for 1), as in BFCL.
    if not isinstance(value, dict):
        return False
    for key, item in value.items():
        if key not in allowed_by_key:
            return False
        choices = allowed_by_key[key] if isinstance(allowed_by_key[key], list) else [allowed_by_key[key]]
        if _normalized(item) not in [_normalized(choice) for choice in choices]:
            return False
    return all(key in value or _is_optional(allowed) for key, allowed in allowed_by_key.items())


def _object_list_matches(value: list[Any], option: Any) -> bool:
    # An array of objects matches an allowed array of {key: [allowed...]} element by element, in order.
    option = [] if option == OPTIONAL_MARKER else option
    return (
        type(option) is list
        and len(option) == len(value)
        and all(
            isinstance(expected, dict) and _object_matches(item, expected) for item, expected in zip(value, option)
        )
    )


def _is_optional(allowed: Any) -> bool:
    return isinstance(allowed, list) and OPTIONAL_MARKER in allowed


def value_allowed(value: Any, allowed: Any, schema: dict[str, Any] | None) -> bool:
    """Whether `value`, from a model's call, is one of a parameter's `allowed` values, as BFCL's checker decides.

    `schema` is the parameter's JSON schema in the tool (None when the tool has no schema). See the module
    docstring for the rules.
    """
    allowed = allowed if isinstance(allowed, list) else [allowed]
    answer_kind = _answer_kind(allowed)
    kind, item_kind = _declared_kinds(schema, answer_kind)
    if kind is float and type(value) is int:
        value = float(value)
    if not _passes_type_check(value, allowed, kind, item_kind):
        return False
    if answer_kind is not None and answer_kind is not kind:
        # The allowed values are variable names or literals of another type: exact equality, nothing normalized.
        return value in allowed
    if kind is dict:
        return any(isinstance(option, dict) and _object_matches(value, option) for option in allowed)
    if kind is list and item_kind is dict:
        return any(_object_list_matches(value, option) for option in allowed)
    if kind is str:
        return normalize_string(value) in {normalize_string(option) for option in allowed if isinstance(option, str)}
    if kind is list:
        return _normalized_items(value) in [_normalized_items(option) for option in allowed]
    return value in allowed


def call_matches(call: ToolCall, expected: dict[str, Any], tools_by_name: dict[str, dict[str, Any]]) -> bool:
    """Whether one parsed call satisfies one expected call `{tool_name: {param: [allowed...]}}`.

    `tools_by_name` maps tool names to their `parameters` schemas; without a schema for the expected tool only the
    possible answer is checked, its values' types standing in for the declared ones.
    """
    if not isinstance(expected, dict) or len(expected) != 1:
        return False
    ((name, allowed_by_param),) = expected.items()
    arguments = call.get("arguments")
    if call.get("name") != name or not isinstance(arguments, dict) or not isinstance(allowed_by_param, dict):
        return False
    parameters = tools_by_name.get(name)
    properties, required = None, []
    if parameters is not None:
        properties = _schema(parameters.get("properties"))
        required = parameters.get("required") if isinstance(parameters.get("required"), list) else []
    if any(param not in arguments for param in required):
        return False
    for param, value in arguments.items():
        if param not in allowed_by_param or (properties is not None and param not in properties):
            return False
        schema = _schema(properties.get(param)) if properties is not None else None
        if not value_allowed(value, allowed_by_param[param], schema):
            return False
    return all(param in arguments or _is_optional(allowed) for param, allowed in allowed_by_param.items())


def _has_perfect_matching(edges: list[list[int]], n_right: int) -> bool:
    # Kuhn's augmenting paths: can every left node (expected call) get its own right node (model call)?
    owner = [-1] * n_right

    def augment(left: int, seen: list[bool]) -> bool:
        for right in edges[left]:
            if not seen[right]:
                seen[right] = True
                if owner[right] == -1 or augment(owner[right], seen):
                    owner[right] = left
                    return True
        return False

    return all(augment(left, [False] * n_right) for left in range(len(edges)))


def _schema(node: Any) -> dict[str, Any]:
    return node if isinstance(node, dict) else {}


def _as_json(value: Any) -> Any:
    return load_json(value) if isinstance(value, str) else value


def tools_by_name(tools: Any) -> dict[str, dict[str, Any]]:
    """`{tool name: parameters schema}` from OpenAI-style tool schemas (a list or its JSON string)."""
    tools = _as_json(tools)
    result = {}
    for tool in tools if isinstance(tools, list) else []:
        function = tool.get("function", tool) if isinstance(tool, dict) else None
        if isinstance(function, dict) and isinstance(function.get("name"), str):
            result[function["name"]] = _schema(function.get("parameters"))
    return result


def check_calls(calls: Sequence[ToolCall], possible_answer: Any, tools: Any) -> bool:
    """Whether `calls` are exactly the expected calls of `possible_answer`, in any order.

    Args:
        calls: parsed calls, `[{"name": str, "arguments": dict}]` (as from `parse_tool_calls`).
        possible_answer: `[{tool_name: {param: [allowed values...]}}]`, one entry per expected call, or its JSON
            string.
        tools: the row's OpenAI-style tool schemas, or their JSON string.
    """
    expected_calls = _as_json(possible_answer)
    if not isinstance(expected_calls, list) or len(calls) != len(expected_calls):
        return False
    schemas = tools_by_name(tools)
    edges = []
    for expected in expected_calls:
        matching = [
            i for i, call in enumerate(calls) if isinstance(call, dict) and call_matches(call, expected, schemas)
        ]
        if not matching:  # most wrong answers stop here, without checking the remaining expected calls
            return False
        edges.append(matching)
    return _has_perfect_matching(edges, len(calls))


def tool_call_accuracy(
    completions: list[Any], possible_answer: list[str], tools: list[str], **kwargs: Any
) -> list[float | None]:
    """1.0 for each completion whose tool calls match its row's `possible_answer` (see `check_calls`), else 0.0.

    None for rows whose `possible_answer` is empty (`""` or None: multi-turn rows). A completion that is not text or
    messages, or whose calls cannot be parsed, scores 0.0; this never raises on model output.
    """
    rewards: list[float | None] = []
    for completion, answer, row_tools in zip(completions, possible_answer, tools, strict=True):
        if answer is None or answer == "":
            rewards.append(None)
            continue
        rewards.append(1.0 if check_calls(parse_tool_calls(completion), answer, row_tools) else 0.0)
    return rewards


__all__ = [
    "call_matches",
    "check_calls",
    "normalize_string",
    "tool_call_accuracy",
    "tools_by_name",
    "value_allowed",
]
