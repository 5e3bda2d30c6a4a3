"""Dataset adapters: the task plug-ins that turn raw dataset rows into GEAR training examples.

An adapter is looked up by name (`get_adapter`) or picked from the columns a dataset has (`adapter="auto"`), and
`prepare_dataset` applies it to every row:

    >>> from datasets import load_dataset
    >>> from gear_trl.data import prepare_dataset
    >>> train = prepare_dataset(load_dataset("data/math/gsm8k_style", split="train"))
    >>> train.column_names
    ['prompt', 'ground_truth', 'reference_solution']

Every adapter keeps the row's other columns as they are (those it does not read to build the prompt, ground truth
and reference solution), as TRL keeps them: the rewards and the environment's `reset(**row)` see them. Rows already
in TRL's shape (`prompt` plus columns of one's own) go through `dataset_format: trl` unchanged.
"""

from __future__ import annotations

from typing import Any

from datasets import Dataset, DatasetDict

from ..inputs.errors import UserInputError
from ..inputs.plugins import load_plugin
from .math_tasks import (
    AIME,
    GENERIC,
    GSM8K,
    MATH,
    MATH_PROMPT_TEMPLATE,
    FunctionAdapter,
    MathAdapter,
    column_adapter,
    pattern_ground_truth,
)
from .tool_use import OPTIONAL_COLUMNS, TOOL_USE, ToolUseAdapter
from .trl_format import TRL, TRLAdapter
from .xlam import XLAM, XLAMAdapter

Adapter = MathAdapter | ToolUseAdapter | XLAMAdapter | FunctionAdapter | TRLAdapter

# Tool-use rows also have `prompt` and `ground_truth`, so `auto` must try the tool-use adapter before `generic`;
# AIME sets often carry a `solution` column too, so `aime` (its clean `answer`) comes before `math`; `trl` (a `prompt`
# column alone) fits more rows than any other, so it is tried last.
DATASET_ADAPTERS: dict[str, Adapter] = {
    adapter.name: adapter for adapter in (GSM8K, AIME, MATH, TOOL_USE, XLAM, GENERIC, TRL)
}
"""Adapters by name, in the order `adapter="auto"` tries them."""


def get_adapter(name: str) -> Adapter:
    """The adapter registered under `name`, or the one an import path names: an adapter object (with `name`,
    `columns`, `matches` and `__call__`, like those here) or a function `row -> {"prompt", "ground_truth", ...}`."""
    adapter = load_plugin(name, "dataset_format", {**DATASET_ADAPTERS, "auto": None})
    if adapter is None:
        raise UserInputError("`auto` picks an adapter from the columns: call `detect_adapter`.")
    if isinstance(adapter, type):
        adapter = adapter()
    if all(hasattr(adapter, attr) for attr in ("name", "columns", "matches")) and callable(adapter):
        return adapter
    if callable(adapter):
        return FunctionAdapter(name, adapter)
    raise UserInputError(
        f"dataset_format {name!r} is a {type(adapter).__name__}; it must be an adapter or a function "
        "`row -> {'prompt': ..., 'ground_truth': ...}`."
    )


def consumed_columns(adapter) -> tuple[str, ...]:
    """The input columns `adapter` turns into its output (the question, the answer, the solution), which are not kept
    beside it; an adapter of one's own may say so with a `consumed_columns` attribute, else its `columns` are."""
    if hasattr(adapter, "consumed_columns"):
        return tuple(adapter.consumed_columns)
    if isinstance(adapter, MathAdapter):
        return tuple(c for c in (*adapter.columns, adapter.solution_column) if c)
    if isinstance(adapter, ToolUseAdapter):
        return (*adapter.columns, *OPTIONAL_COLUMNS)
    if isinstance(adapter, (FunctionAdapter, TRLAdapter)):
        return ()  # a function's row is its own to map; TRL's rows are passed through
    return tuple(getattr(adapter, "columns", ()))


def detect_adapter(column_names: list[str]) -> Adapter:
    """The first registered adapter whose input columns are all present."""
    for adapter in DATASET_ADAPTERS.values():
        if adapter.matches(column_names):
            return adapter
    expected = "; ".join(f"{name}: {list(adapter.columns)}" for name, adapter in DATASET_ADAPTERS.items())
    raise UserInputError(
        f"Cannot pick a dataset adapter: no adapter's columns are all present. Expected columns by adapter: "
        f"{expected}. Columns present: {list(column_names)}."
    )


def prepare_dataset(
    dataset: Dataset | DatasetDict,
    adapter: str | Adapter = "auto",
    ground_truth_column: str = "ground_truth",
    system_prompt: str | None = None,
    prompt_template: str = MATH_PROMPT_TEMPLATE,
) -> Dataset | DatasetDict:
    """Map every row to `{"prompt": [messages], ground_truth_column: str | None, ...}`; the row's columns the adapter
    does not read (`consumed_columns`) are kept as they are.

    Args:
        dataset: a `Dataset`, or a `DatasetDict` whose splits are each prepared.
        adapter: a name in `DATASET_ADAPTERS`, `"auto"` to pick one from the columns present, an import path
            (`get_adapter`), or an adapter object (`column_adapter(...)`, ...).
        ground_truth_column: name of the output column holding the extracted ground truth.
        system_prompt: if given, the first message of every prompt is this system message.
        prompt_template: user-message text for string questions; `{question}` is replaced by the question.
    """
    if isinstance(dataset, DatasetDict):
        return DatasetDict(
            {
                split: prepare_dataset(part, adapter, ground_truth_column, system_prompt, prompt_template)
                for split, part in dataset.items()
            }
        )
    if isinstance(adapter, str):
        chosen = detect_adapter(dataset.column_names) if adapter == "auto" else get_adapter(adapter)
    else:
        chosen = adapter
    if not chosen.matches(dataset.column_names):
        raise UserInputError(
            f"dataset_format {chosen.name!r} needs columns {list(chosen.columns)}; columns present: {dataset.column_names}."
        )

    consumed = set(consumed_columns(chosen))

    def to_example(row: dict[str, Any]) -> dict[str, Any]:
        example = chosen(
            row, ground_truth_column=ground_truth_column, system_prompt=system_prompt, prompt_template=prompt_template
        )
        # What the adapter returns wins over a raw column of the same name.
        return {**{k: v for k, v in row.items() if k not in consumed}, **example}

    return dataset.map(to_example, remove_columns=dataset.column_names, desc=f"Preparing {chosen.name} rows")


__all__ = [
    "DATASET_ADAPTERS",
    "MATH_PROMPT_TEMPLATE",
    "FunctionAdapter",
    "MathAdapter",
    "TRLAdapter",
    "ToolUseAdapter",
    "XLAMAdapter",
    "column_adapter",
    "consumed_columns",
    "detect_adapter",
    "get_adapter",
    "pattern_ground_truth",
    "prepare_dataset",
]
