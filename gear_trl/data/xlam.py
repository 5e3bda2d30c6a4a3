"""Rows of the xLAM / APIGen function-calling set (`Salesforce/xlam-function-calling-60k`, CC-BY-4.0) as tool-use
training examples.

The Qwen3 tool-use recipes train on it because it shares no task with the benchmarks they are scored on (BFCL,
ACEBench): a recipe that trains on its benchmark measures memorisation (issue 32). Its rows are single-turn:

| column | type | content |
|---|---|---|
| `id` | int | row number |
| `query` | str | the user's request |
| `tools` | JSON str | `[{"name", "description", "parameters": {param: {"type", "description", "default"?}}}]`, types written as Python's (`str`, `int`, `float`, `bool`, `List[int]`, `Dict[str, Any]`), an optional parameter's type ending in `, optional` |
| `answers` | JSON str | the reference calls, `[{"name", "arguments": {...}}]` |

`XLAM` maps a row to gear_trl's tool-use schema (data/README.md, "BFCL (tool use)"): `prompt` (the query as the user
message), `tools` (OpenAI-style schemas with JSON-schema types), `ground_truth` (the reference calls, for the
teacher) and `possible_answer` (BFCL's answer-set form, for the `tool_call_accuracy` reward): each argument of a
reference call allows its one value, and an optional parameter the reference leaves out may be left out or given its
default. Names get `bfcl_tool_name`'s `.` -> `_` mapping, as BFCL's rows do.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from ..inputs.errors import UserInputError
from .bfcl import OPTIONAL_MARKER, bfcl_tool_name
from .math_tasks import with_system_prompt

# The leading word of an xLAM type (`List[int]` -> `list`, `str, optional` -> `str`) to its JSON-schema type. Types
# not listed (`callable`, `function`, a class name) get none, which JSON schema reads as "anything".
_JSON_SCHEMA_TYPES = {
    "str": "string",
    "string": "string",
    "int": "integer",
    "integer": "integer",
    "float": "number",
    "number": "number",
    "bool": "boolean",
    "boolean": "boolean",
    "list": "array",
    "tuple": "array",
    "set": "array",
    "array": "array",
    "dict": "object",
    "object": "object",
}
_OPTIONAL = re.compile(r",\s*optional\s*$", re.IGNORECASE)


def xlam_type(type_text: Any) -> tuple[str | None, bool]:
    """(JSON-schema type or None, optional?) of an xLAM parameter type such as `List[int], optional`."""
    text = str(type_text or "").strip()
    optional = bool(_OPTIONAL.search(text))
    head = re.split(r"[\[,\s|]", _OPTIONAL.sub("", text), maxsplit=1)[0].lower()
    return _JSON_SCHEMA_TYPES.get(head), optional


def xlam_tool_schema(tool: dict[str, Any]) -> tuple[dict[str, Any], dict[str, tuple[bool, Any]]]:
    """The OpenAI-style schema of one xLAM tool, and per parameter (optional?, default or None).

    A parameter is optional when its type says so or it has a default; the others are `required`."""
    properties, required, optional = {}, [], {}
    for name, spec in (tool.get("parameters") or {}).items():
        spec = spec if isinstance(spec, dict) else {}
        json_type, marked_optional = xlam_type(spec.get("type"))
        schema = {"description": str(spec.get("description", ""))}
        if json_type is not None:
            schema["type"] = json_type
        has_default = spec.get("default") not in (None, "")
        if has_default:
            schema["default"] = spec["default"]
        properties[name] = schema
        if marked_optional or has_default:
            optional[name] = (True, spec.get("default") if has_default else None)
        else:
            required.append(name)
    function = {
        "name": bfcl_tool_name(str(tool["name"])),
        "description": str(tool.get("description", "")),
        "parameters": {"type": "object", "properties": properties, "required": required},
    }
    return {"type": "function", "function": function}, optional


def possible_answer(calls: list[dict[str, Any]], optional_by_tool: dict[str, dict[str, tuple[bool, Any]]]) -> list:
    """BFCL's answer-set form of reference calls: `[{name: {param: [allowed values...]}}]`."""
    answer = []
    for call in calls:
        name = bfcl_tool_name(str(call["name"]))
        allowed = {param: [value] for param, value in (call.get("arguments") or {}).items()}
        for param, (_, default) in optional_by_tool.get(name, {}).items():
            if param not in allowed:
                allowed[param] = [OPTIONAL_MARKER] + ([default] if default is not None else [])
            elif default is not None and allowed[param] == [default]:
                allowed[param].append(OPTIONAL_MARKER)  # the default given or left out: the same call
        answer.append({name: allowed})
    return answer


def _parsed(row: dict[str, Any], column: str) -> list:
    value = row[column]
    try:
        parsed = json.loads(value) if isinstance(value, str) else value
    except ValueError as err:
        raise UserInputError(f"xlam row {row.get('id', '?')}: `{column}` is not valid JSON ({err}).") from err
    if not isinstance(parsed, list) or not all(isinstance(item, dict) and "name" in item for item in parsed):
        raise UserInputError(
            f"xlam row {row.get('id', '?')}: `{column}` must be a JSON list of objects with a `name`."
        )
    return parsed


@dataclass(frozen=True)
class XLAMAdapter:
    name: str = "xlam"
    columns: tuple[str, ...] = ("query", "tools", "answers")
    checks_own_tools: bool = True
    """Its raw `tools` are xLAM's, not OpenAI-style schemas: the adapter converts and checks them itself."""

    def matches(self, column_names: list[str]) -> bool:
        return all(column in column_names for column in self.columns)

    def __call__(
        self, row: dict[str, Any], *, ground_truth_column: str = "ground_truth", system_prompt: str | None = None, **_
    ) -> dict[str, Any]:
        schemas, optional_by_tool = [], {}
        for tool in _parsed(row, "tools"):
            schema, optional = xlam_tool_schema(tool)
            schemas.append(schema)
            optional_by_tool[schema["function"]["name"]] = optional
        calls = _parsed(row, "answers")
        reference = [
            {"name": bfcl_tool_name(str(c["name"])), "arguments": dict(c.get("arguments") or {})} for c in calls
        ]
        return {
            "prompt": with_system_prompt([{"role": "user", "content": str(row["query"])}], system_prompt),
            "tools": json.dumps(schemas, ensure_ascii=False),
            ground_truth_column: json.dumps(reference, ensure_ascii=False) if reference else None,
            "possible_answer": json.dumps(possible_answer(calls, optional_by_tool), ensure_ascii=False),
            "id": str(row.get("id", "")),
            "category": "xlam",
            "initial_config": "",
            "involved_classes": "[]",
        }


XLAM = XLAMAdapter()
