"""The ground-truth column the teacher reads: checks run before the model loads, and the column's values as JSON."""

from __future__ import annotations

from datasets import Dataset

from ..data.tool_use import json_text
from ..inputs.errors import UserInputError
from ..teacher.prompts import has_ground_truth


def ground_truth_as_json(dataset, column: str):
    """`dataset` with a ground-truth column of lists or dicts (tool calls given as Python objects) rewritten as JSON
    text (`gear_trl.data.tool_use.json_text`), the form the rewards and the teacher read. Other datasets are returned
    as they are."""
    from datasets import Value

    if not isinstance(dataset, Dataset) or column not in dataset.column_names:
        return dataset
    if isinstance(dataset.features[column], Value):
        return dataset
    dataset = dataset.map(lambda row: {column: json_text(row[column])}, desc=f"Writing {column} as JSON")
    return dataset.cast_column(column, Value("string"))


def check_some_ground_truth(dataset, column: str, setting: str) -> None:
    """Refuse a `Dataset` none of whose rows has a ground truth in `column` (a dataset whose rows cannot be read
    now, such as an IterableDataset, is checked on the first batch instead)."""
    if not isinstance(dataset, Dataset) or column not in dataset.column_names or len(dataset) == 0:
        return
    if not any(has_ground_truth(value) for value in dataset[column]):
        raise UserInputError(
            f"No row of `train_dataset` has a ground truth in column {column!r}, which GEAR's teacher "
            f"({setting}) reads: every row would get plain GRPO weights at GEAR's cost. Fill that column, "
            f"set `ground_truth_column`, {NO_REFERENCE_HINT}"
        )


NO_REFERENCE_HINT = (
    "or, for rows without a reference, set `teacher_reference: sibling`: the teacher is shown a successful rollout "
    "of the same group (reward >= `teacher_sibling_min_reward`), so it needs groups with a success and gives a group "
    "without one plain GRPO weights; or use `credit: none` for plain GRPO."
)
"""How to train GEAR on rows without a reference, said wherever a missing ground truth stops a run."""


def check_ground_truth_column(dataset, column: str, name: str) -> None:
    if dataset is None:
        return
    datasets = dataset.values() if isinstance(dataset, dict) else [dataset]
    for part in datasets:
        columns = getattr(part, "column_names", None)
        if columns is None:  # e.g. an IterableDataset whose features are unknown until iterated
            continue
        if column not in columns:
            raise UserInputError(
                f"GEAR's teacher needs the ground-truth column {column!r} in `{name}`, but its columns are "
                f"{sorted(columns)}. Set `ground_truth_column` to the right column, map your data with a dataset "
                f"adapter (`dataset_format`), {NO_REFERENCE_HINT}"
            )


def may_have_column(dataset, column: str) -> bool:
    if dataset is None:
        return False
    parts = dataset.values() if isinstance(dataset, dict) else [dataset]
    for part in parts:
        columns = getattr(part, "column_names", None)
        if columns is None or column in columns:
            return True
    return False
