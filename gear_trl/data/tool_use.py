"""Tool-use task plug-in: rows already in gear_trl's tool-use schema (see data/README.md, "BFCL").

Schema: `prompt` (messages), `tools` (JSON list of tool schemas), `ground_truth` (JSON list of reference calls
`{"name", "arguments"}`), and optionally `possible_answer` (single-turn answer sets), `initial_config` and
`involved_classes` (multi-turn environment state), and `reference_solution` (text shown to the teacher in place of the
rendered reference calls with `teacher_reference: solution`). The adapter checks the JSON fields and keeps every
column the rewards, environments and teacher read.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from .math_tasks import REFERENCE_SOLUTION_COLUMN, with_system_prompt


def json_text(value: Any) -> str | None:
    """A column value given as Python lists or dicts (tool calls, schemas) as the JSON text the rewards and the teacher
    read; strings and None as they are. Arrow fills the keys a row's dicts lack with None (a struct column holds the
    union of every row's keys), so None-valued keys are dropped."""
    if value is None or isinstance(value, str):
        return value
    return json.dumps(_without_nulls(value), ensure_ascii=False)


def _without_nulls(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _without_nulls(item) for key, item in value.items() if item is not None}
    if isinstance(value, list):
        return [_without_nulls(item) for item in value]
    return value


OPTIONAL_COLUMNS = {
    "id": "",
    "category": "",
    "possible_answer": "",
    "initial_config": "",
    "involved_classes": "[]",
    REFERENCE_SOLUTION_COLUMN: "",
}
"""Columns kept with these defaults when a row lacks them (an empty `reference_solution`: the teacher is shown the
reference calls, counted in `gear/teacher_answer_only_frac` under `teacher_reference: solution`)."""


@dataclass(frozen=True)
class ToolUseAdapter:
    name: str = "tool_use"
    columns: tuple[str, ...] = ("prompt", "tools", "ground_truth")

    def matches(self, column_names: list[str]) -> bool:
        return all(column in column_names for column in self.columns)

    def __call__(
        self,
        row: dict[str, Any],
        *,
        ground_truth_column: str = "ground_truth",
        system_prompt: str | None = None,
        **_: Any,
    ) -> dict[str, Any]:
        messages = with_system_prompt([dict(message) for message in row["prompt"]], system_prompt)
        tools = row["tools"]
        parsed = json.loads(tools) if isinstance(tools, str) else tools
        if not isinstance(parsed, list):
            raise TypeError(f"Row {row.get('id', '?')}: `tools` must be a JSON list of tool schemas.")
        example = {
            "prompt": messages,
            "tools": tools if isinstance(tools, str) else json.dumps(tools),
            ground_truth_column: json_text(row["ground_truth"]) or None,
        }
        for column, default in OPTIONAL_COLUMNS.items():
            example[column] = row.get(column) or default
        return example


TOOL_USE = ToolUseAdapter()
