"""`held_out_datasets` entries that name an evaluation preset (`benchmark:NAME`): the rows `gear_trl.evaluate
--benchmark NAME` scores, for the overlap check (`gear_trl.data.overlap`). Several benchmarks are not Hub datasets
(bfcl-eval's categories ship in its package, ACEBench's on GitHub), so a dataset name alone cannot hold them out."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

BENCHMARK_PREFIX = "benchmark:"
"""A `held_out_datasets` entry `benchmark:PRESET` names a `gear_trl.evaluate --benchmark` preset."""


def benchmark_splits(name: str, load: Callable | None = None) -> list[tuple[str, list[dict[str, Any]]]]:
    """(label, rows) of the rows the `--benchmark` preset `name` scores, read from where evaluation reads them: a
    Hub or local dataset split, bfcl-eval's single-turn entries or multi-turn tasks, or ACEBench's category. A
    multi-turn task's request is its first turn's user messages. Unknown presets and missing sources raise
    `UserInputError` naming the entry. `load(dataset, config, what=...)` reads a Hub or local dataset (the entry
    points pass `gear_trl.inputs.preflight.load_dataset_named`, which names what is missing; the task layer does not
    import the trainer's); default `datasets.load_dataset`."""
    from ..inputs.errors import UserInputError

    try:
        return _benchmark_splits(name, load)
    except UserInputError as err:
        raise UserInputError(f"`held_out_datasets` entry {BENCHMARK_PREFIX}{name}: {err}") from err


def _benchmark_splits(name: str, load: Callable | None) -> list[tuple[str, list[dict[str, Any]]]]:
    from .benchmarks import get_preset

    preset = get_preset(name)
    label = f"benchmark {preset.name!r}"
    if preset.dataset_format == "bfcl_multi_turn":
        from ..envs.bfcl_official import MULTI_TURN_CATEGORIES, load_tasks

        categories = MULTI_TURN_CATEGORIES if preset.split in ("all", "multi_turn") else (preset.split,)
        rows = []
        for category in categories:
            for task in load_tasks(category):
                first = next((turn for turn in task["turns"] if turn), [])
                rows.append({"prompt": [m for m in first if isinstance(m, dict)]})
        return [(label, rows)]
    if preset.dataset_format == "bfcl_single_turn":
        from ..rewards.bfcl_ast import categories_of, load_rows

        return [(label, [row for category in categories_of(preset.split) for row in load_rows(category)])]
    if preset.dataset_format == "acebench":
        from ..data.acebench import load_acebench

        return [(label, list(load_acebench(preset.dataset, preset.split)))]
    from ..inputs.errors import UserInputError

    if load is None:
        from datasets import load_dataset

        splits = load_dataset(preset.dataset, name=preset.dataset_config)
    else:
        splits = load(preset.dataset, preset.dataset_config, what=f"held_out_datasets entry {name!r}")
    if preset.split not in splits:
        raise UserInputError(f"benchmark {name!r}: split {preset.split!r} is not in {preset.dataset!r}.")
    return [(label, splits[preset.split])]
