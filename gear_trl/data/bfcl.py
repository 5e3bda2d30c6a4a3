"""Berkeley Function Calling Leaderboard (BFCL) data: reading it from the `bfcl-eval` wheel and converting it.

BFCL ships its questions, function docs and possible answers as JSON files inside the `bfcl-eval` package on PyPI
(under `bfcl_eval/data/`). The wheel is a zip, so the files are read straight out of it: nothing is installed.

Conversions shared by every BFCL category (single- and multi-turn):

- a BFCL function doc becomes an OpenAI-style tool schema (`bfcl_function_to_tool_schema`): its Python-flavoured
  types become JSON-schema types, and its name has `"."` replaced by `"_"` (`bfcl_tool_name`), because many chat
  templates and APIs only accept `[A-Za-z0-9_-]` in tool names;
- a BFCL possible answer (`[{func_name: {param: [allowed values...]}}]`) gets the same renaming
  (`rename_possible_answer`) and yields one concrete reference call per expected call (`reference_calls`).

The data is Apache-2.0, from the Berkeley Function Calling Leaderboard (Patil et al., Gorilla project).
This module only uses the standard library, so the data scripts and the rewards can both import it cheaply.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

BFCL_EVAL_VERSION = "2026.3.23"
"""Version of the `bfcl-eval` package the committed data was generated from."""

BFCL_DATA_DIR = "bfcl_eval/data/"
"""Folder of the data files inside the wheel; `name_pattern`s are matched against paths relative to it."""

OPTIONAL_MARKER = ""
"""In a BFCL possible answer, `""` among a parameter's allowed values means the parameter may be left out."""

# BFCL's parameter types are Python's; a chat template expects JSON-schema ones. "any" has no JSON-schema type, so it
# gets none (which JSON schema reads as "anything"). The Java/JavaScript categories use their languages' type names,
# and BFCL passes all their arguments as strings, hence the "string" fallback for names not listed here.
_JSON_SCHEMA_TYPES = {
    "string": "string",
    "integer": "integer",
    "float": "number",
    "number": "number",
    "boolean": "boolean",
    "array": "array",
    "tuple": "array",
    "dict": "object",
    "object": "object",
    "null": "null",
    "any": None,
    "": None,
}

# Keys of a BFCL schema node that are not JSON schema and only duplicate `required`.
_NON_SCHEMA_KEYS = {"optional"}


# ---------------------------------------------------------------------------------------------------------------------
# Reading the wheel
# ---------------------------------------------------------------------------------------------------------------------


def fetch_bfcl_wheel(dest: str | Path, version: str = BFCL_EVAL_VERSION) -> Path:
    """Download the `bfcl-eval` wheel (without its dependencies) into `dest` and return its path.

    Runs `pip download --no-deps bfcl-eval==<version>`; needs network access to PyPI.
    """
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", f"bfcl-eval=={version}",
         "-d", str(dest)],
        check=True,
    )  # fmt: skip
    wheels = sorted(dest.glob(f"bfcl_eval-{version}-*.whl"))
    if not wheels:
        raise FileNotFoundError(f"pip download reported success but no bfcl_eval-{version} wheel is in {dest}.")
    return wheels[0]


def list_bfcl_files(wheel_path: str | Path, name_pattern: str) -> list[str]:
    """Data files in the wheel whose path relative to `bfcl_eval/data/` fully matches the regex `name_pattern`.

    Paths are returned relative to `bfcl_eval/data/`, sorted. A regex rather than a glob, because BFCL's names nest
    (`BFCL_v*_multiple.json` as a glob would also match `BFCL_v4_parallel_multiple.json`).
    """
    pattern = re.compile(name_pattern)
    with zipfile.ZipFile(wheel_path) as wheel:
        names = [name[len(BFCL_DATA_DIR) :] for name in wheel.namelist() if name.startswith(BFCL_DATA_DIR)]
    return sorted(name for name in names if pattern.fullmatch(name))


def read_bfcl_json(wheel_path: str | Path, name_pattern: str) -> list[dict[str, Any]]:
    """The records of the one data file whose path relative to `bfcl_eval/data/` fully matches regex `name_pattern`.

    Most BFCL files are JSON lines (one record a line); a file holding a single JSON document gives that document
    (a list as is, an object as a one-element list). Raises if no file or more than one matches.

        >>> read_bfcl_json(wheel, r"possible_answer/BFCL_v\\d+_simple_python\\.json")[0]["id"]
        'simple_python_0'
    """
    matches = list_bfcl_files(wheel_path, name_pattern)
    if len(matches) != 1:
        raise FileNotFoundError(
            f"Expected exactly one BFCL data file matching {name_pattern!r} in {wheel_path}, found {matches}."
        )
    with zipfile.ZipFile(wheel_path) as wheel:
        text = wheel.read(BFCL_DATA_DIR + matches[0]).decode("utf-8")
    try:
        document = json.loads(text)
    except json.JSONDecodeError:
        return [json.loads(line) for line in text.splitlines() if line.strip()]
    return document if isinstance(document, list) else [document]


# ---------------------------------------------------------------------------------------------------------------------
# Function docs to tool schemas
# ---------------------------------------------------------------------------------------------------------------------


def bfcl_tool_name(name: str) -> str:
    """The tool name used for BFCL function `name`: dots become underscores (`math.factorial` -> `math_factorial`)."""
    return name.replace(".", "_")


def bfcl_schema_to_json_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """A BFCL parameter schema with JSON-schema types, recursively through `properties` and `items`.

    `dict` -> `object`, `float` -> `number`, `tuple` -> `array`, `any` -> no `type`, Java/JavaScript type names ->
    `string`; BFCL's non-standard `optional` flag is dropped (`required` already says it). Other keys (`description`,
    `enum`, `default`, `required`, ...) are kept.
    """
    converted: dict[str, Any] = {}
    for key, value in schema.items():
        if key in _NON_SCHEMA_KEYS:
            continue
        if key == "type" and isinstance(value, str):
            json_type = _JSON_SCHEMA_TYPES.get(value, "string")
            if json_type is not None:
                converted["type"] = json_type
        elif key == "properties" and isinstance(value, dict):
            converted["properties"] = {
                name: bfcl_schema_to_json_schema(sub) if isinstance(sub, dict) else sub for name, sub in value.items()
            }
        elif key == "items" and isinstance(value, dict):
            converted["items"] = bfcl_schema_to_json_schema(value)
        else:
            converted[key] = value
    return converted


def bfcl_function_to_tool_schema(fn_doc: dict[str, Any]) -> dict[str, Any]:
    """An OpenAI-style tool schema for a BFCL function doc.

    Returns `{"type": "function", "function": {"name", "description", "parameters"}}` with the name mapped by
    `bfcl_tool_name` and the parameters by `bfcl_schema_to_json_schema`. Keys a chat template does not render (the
    multi-turn docs' `response`) are dropped.
    """
    parameters = fn_doc.get("parameters") or {"type": "dict", "properties": {}}
    return {
        "type": "function",
        "function": {
            "name": bfcl_tool_name(fn_doc["name"]),
            "description": fn_doc.get("description", ""),
            "parameters": bfcl_schema_to_json_schema(parameters),
        },
    }


# ---------------------------------------------------------------------------------------------------------------------
# Possible answers
# ---------------------------------------------------------------------------------------------------------------------


def json_type_accepts(json_type: Any, value: Any) -> bool:
    """Whether `value` (as parsed from JSON) has JSON-schema type `json_type`; no type or an unknown one accepts all.

    Booleans are not numbers here, unlike in Python; integers are numbers.
    """
    if json_type == "string":
        return isinstance(value, str)
    if json_type == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if json_type == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if json_type == "boolean":
        return isinstance(value, bool)
    if json_type == "array":
        return isinstance(value, (list, tuple))
    if json_type == "object":
        return isinstance(value, dict)
    if json_type == "null":
        return value is None
    return True


def rename_possible_answer(possible_answer: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A BFCL possible answer, `[{func_name: {param: [allowed...]}}]`, with its names mapped by `bfcl_tool_name`."""
    return [{bfcl_tool_name(name): params for name, params in call.items()} for call in possible_answer]


_OMIT = object()  # a reference value meaning "leave this parameter out"


def _reference_value(allowed: Any, schema: dict[str, Any], required: bool) -> Any:
    # One concrete value out of a parameter's allowed values. The first value that has the schema's type wins; a
    # value of another type is one of BFCL's quirks (a variable name like "data['sales']" for an array, `None` for a
    # float, `True` for a string): it is kept only when the parameter cannot be left out instead.
    allowed = allowed if isinstance(allowed, list) else [allowed]
    candidates = [value for value in allowed if value != OPTIONAL_MARKER]
    json_type = schema.get("type")
    typed = [value for value in candidates if json_type_accepts(json_type, value)]
    if typed:
        return _concrete(typed[0], schema)
    if OPTIONAL_MARKER in allowed and not required:
        return _OMIT
    return candidates[0] if candidates else _OMIT


def _concrete(candidate: Any, schema: dict[str, Any]) -> Any:
    # Inside an `object` (and an array of them) BFCL nests allowed-value lists again: {"key": [allowed...]}.
    json_type = schema.get("type")
    if json_type == "object" and isinstance(candidate, dict):
        return _reference_arguments(candidate, schema)
    if json_type == "array" and isinstance(candidate, list):
        items = schema.get("items") if isinstance(schema.get("items"), dict) else {}
        return [_concrete(item, items) for item in candidate]
    return candidate


def _reference_arguments(allowed_by_param: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    properties = schema.get("properties")
    required = set(schema.get("required") or [])
    arguments = {}
    for param, allowed in allowed_by_param.items():
        if properties is not None and param not in properties and param not in required:
            # BFCL lists a few optional parameters the function does not have; a call passing them would be invalid.
            allowed = [OPTIONAL_MARKER]
        sub_schema = (properties or {}).get(param) or {}
        value = _reference_value(allowed, sub_schema, required=param in required)
        if value is not _OMIT:
            arguments[param] = value
    return arguments


def reference_calls(possible_answer: list[dict[str, Any]], tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One concrete call per expected call of a (renamed) possible answer: `[{"name": str, "arguments": dict}]`.

    Each parameter takes the first allowed value that is not the `""` optional marker and has the parameter's schema
    type; an optional parameter (one with `""` allowed) that has no such value, or that the tool does not declare, is
    left out; a required one falls back to its first non-`""` value. `tools` are the row's tool schemas, as made by
    `bfcl_function_to_tool_schema`.
    """
    parameters_by_name = {tool["function"]["name"]: tool["function"].get("parameters") or {} for tool in tools}
    calls = []
    for call in possible_answer:
        for name, allowed_by_param in call.items():
            calls.append(
                {"name": name, "arguments": _reference_arguments(allowed_by_param, parameters_by_name.get(name, {}))}
            )
    return calls


__all__ = [
    "BFCL_DATA_DIR",
    "BFCL_EVAL_VERSION",
    "OPTIONAL_MARKER",
    "bfcl_function_to_tool_schema",
    "bfcl_schema_to_json_schema",
    "bfcl_tool_name",
    "fetch_bfcl_wheel",
    "json_type_accepts",
    "list_bfcl_files",
    "read_bfcl_json",
    "reference_calls",
    "rename_possible_answer",
]
