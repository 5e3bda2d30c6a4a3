"""The BFCL benchmarks read from the installed bfcl-eval: the multi-turn tasks and single-turn rows `--split` names,
and the per-category figures of their reports."""

from __future__ import annotations

from ..inputs.errors import UserInputError
from .pass_at_k import _mean

BFCL_MULTI_TURN = "bfcl_multi_turn"
"""`--dataset_format` of the BFCL multi-turn preset: tasks read from the installed bfcl-eval, rolled out and scored
by `evaluate_bfcl_multi_turn`."""


def _bfcl_tasks(args) -> list[dict]:
    """The BFCL multi-turn tasks `--split` names (`all`: the four categories the leaderboard's multi-turn score
    averages), the first `--max_samples` of each."""
    from ..envs.bfcl_official import MULTI_TURN_CATEGORIES, load_tasks

    categories = list(MULTI_TURN_CATEGORIES) if args.split in ("all", "multi_turn") else [args.split]
    unknown = [c for c in categories if c not in MULTI_TURN_CATEGORIES]
    if unknown:
        raise UserInputError(f"--split {args.split!r}: use all or one of {list(MULTI_TURN_CATEGORIES)}.")
    return [task for category in categories for task in load_tasks(category, limit=args.max_samples)]


BFCL_SINGLE_TURN = "bfcl_single_turn"
"""`--dataset_format` of the BFCL single-turn presets read from the installed bfcl-eval (live, Java, JavaScript,
irrelevance, relevance): rows from `gear_trl.rewards.bfcl_ast.load_rows`, scored by BFCL's checker (`bfcl_ast`)."""


def _bfcl_single_turn_rows(args):
    """The rows of the BFCL categories `--split` names (a category or `live`), the first `--max_samples` of each."""
    from datasets import Dataset

    from ..rewards.bfcl_ast import categories_of, load_rows

    return Dataset.from_list([row for c in categories_of(args.split) for row in load_rows(c, limit=args.max_samples)])


def _single_turn_categories(result: dict, rows) -> dict:
    """The report with `categories` (each category's accuracy); `accuracy` stays the mean over all rows, which over
    the live categories is the leaderboard's live column (weighted by each category's number of entries)."""
    categories = rows["category"]
    per_category: dict[str, list[float]] = {}
    for sample in result["per_sample"]:
        task_reward = next(iter(sample["rewards"].values()))  # the first reward is the task's (`accuracy`'s)
        per_category.setdefault(categories[sample["index"]], []).append(task_reward)
    result["categories"] = {name: _mean(values) for name, values in per_category.items()}
    return result


def _by_category(result: dict, tasks: list[dict]) -> dict:
    """The report with `categories` (each category's accuracy) and `accuracy` their unweighted mean, as the
    leaderboard's multi-turn column averages its categories."""
    per_category: dict[str, list[float]] = {}
    for sample in result["per_sample"]:
        per_category.setdefault(tasks[sample["index"]]["category"], []).append(sample["reward"])
    categories = {name: _mean(values) for name, values in per_category.items()}
    result["categories"] = categories
    result["accuracy"] = _mean(categories.values())
    return result
