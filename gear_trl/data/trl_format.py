"""`dataset_format: trl`: rows already in TRL's shape, passed through.

TRL's GRPOTrainer reads a `prompt` column (text or messages) and hands every other column, untouched, to the reward
functions and to the environment's `reset(**row)`. This adapter does the same: the prompt is kept as it is (only
`system_prompt`, when set, is put in front of conversational prompts) and no column is added, renamed or dropped. The
ground truth, where GEAR's teacher or a reward reads one, is the `ground_truth_column` the rows already have. `auto`
picks it when no other adapter's columns are all present and the rows have a `prompt`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..inputs.errors import UserInputError
from .math_tasks import with_system_prompt
from .tool_use import json_text


def prompt_problem(prompt: Any) -> str | None:
    """Why `prompt` is not a TRL prompt (a string, or a list of messages each with a `role`); None when it is."""
    if isinstance(prompt, str):
        return None
    if not isinstance(prompt, list):
        return f"`prompt` is a {type(prompt).__name__}, not a string or a list of messages"
    for index, message in enumerate(prompt):
        if not isinstance(message, dict) or not isinstance(message.get("role"), str):
            return f"`prompt`[{index}] is not a message with a `role`"
    return None


@dataclass(frozen=True)
class TRLAdapter:
    name: str = "trl"
    columns: tuple[str, ...] = ("prompt",)

    def matches(self, column_names: list[str]) -> bool:
        return "prompt" in column_names

    def __call__(
        self,
        row: dict[str, Any],
        *,
        ground_truth_column: str = "ground_truth",
        system_prompt: str | None = None,
        **_: Any,
    ) -> dict[str, Any]:
        example = dict(row)
        prompt = row["prompt"]
        problem = prompt_problem(prompt)
        if problem:
            raise UserInputError(f"dataset_format 'trl': {problem}.")
        if system_prompt is not None:
            if isinstance(prompt, str):
                raise UserInputError(
                    "`system_prompt` needs conversational prompts (lists of messages), but dataset_format 'trl' keeps "
                    "this row's plain-text prompt as it is. Give the prompts as messages or drop `system_prompt`."
                )
            example["prompt"] = with_system_prompt([dict(m) for m in prompt], system_prompt)
        if ground_truth_column in example:
            # Tool calls given as Python lists or dicts are read as their JSON text, as by the other adapters.
            example[ground_truth_column] = json_text(example[ground_truth_column])
        return example


TRL = TRLAdapter()
