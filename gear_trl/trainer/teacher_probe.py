"""The teacher probe: the model scored as GEAR's teacher (its prompt with the recipe's reference) beside its score as
the student, before any training (`python -m gear_trl.evaluate --as-teacher [RECIPE]`).

GEAR's credit comes from where the teacher, shown the reference, disagrees with the student. A model that does no
better with the reference than without it has nothing to teach: its KL is the hint's style, and GEAR trains like GRPO
at GEAR's cost. The gap `as_teacher.accuracy - accuracy` says, in one evaluation, whether there is knowledge to
distil; `docs/metrics.md` says how to read it beside `gear/kl_failed_over_passed` and the teacher controls.

The teacher prompt is built as the trainer builds it (`gear_trl.data.teacher.teacher_prompt`): the recipe's
`teacher_template` and `teacher_reference` (a tool row's reference calls rendered as the chat template writes them,
the tool-call hint on rows with tools when the template is left at its default), without `max_teacher_prompt_length`'s
cut. Rows without a reference are scored with their own prompt and counted (`as_teacher.without_reference`).
"""

from __future__ import annotations

from collections.abc import Callable

from ..data.math import REFERENCE_SOLUTION_COLUMN
from ..data.teacher import has_ground_truth, teacher_prompt
from ..plugins import UserInputError
from .gear_config import DEFAULT_MATH_SOLUTION_TEMPLATE, DEFAULT_MATH_TEACHER_TEMPLATE
from .teacher import render_reference, tool_template_for

SETTINGS = ("teacher_template", "teacher_reference", "ground_truth_column")


def teacher_settings(recipe: str | None) -> dict:
    """The teacher's prompt settings of a recipe (YAML; None or "default": GEARConfig's defaults)."""
    settings = {"teacher_template": None, "teacher_reference": "answer", "ground_truth_column": "ground_truth"}
    if recipe and recipe != "default":
        import yaml

        try:
            with open(recipe, encoding="utf-8") as handle:
                loaded = yaml.safe_load(handle) or {}
        except OSError as err:
            raise UserInputError(f"--as-teacher: cannot read the recipe {recipe!r} ({err.strerror}).") from err
        if not isinstance(loaded, dict):
            raise UserInputError(f"--as-teacher: {recipe!r} is not a YAML recipe (a mapping of fields).")
        settings.update({key: loaded[key] for key in SETTINGS if loaded.get(key) is not None})
    if settings["teacher_reference"] not in ("answer", "solution"):
        raise UserInputError(
            f"--as-teacher probes a teacher shown a reference; `teacher_reference: {settings['teacher_reference']}` "
            "has none before a rollout exists (a successful sibling is chosen during training). Probe with a recipe "
            "whose rows carry a reference, or train and read gear/no_sibling_frac and gear/lone_success_frac."
        )
    if settings["teacher_template"] is None:
        solution = settings["teacher_reference"] == "solution"
        settings["teacher_template"] = DEFAULT_MATH_SOLUTION_TEMPLATE if solution else DEFAULT_MATH_TEACHER_TEMPLATE
    return settings


def check_probe(rows, recipe: str | None) -> dict:
    """The recipe's teacher settings (`teacher_settings`), checked against the evaluation rows before any is scored:
    a recipe the probe cannot follow, or rows none of which has a reference, is refused (`UserInputError`)."""
    settings = teacher_settings(recipe)
    column = settings["ground_truth_column"]
    rows = [dict(row) for row in rows]
    columns = sorted({key for row in rows for key in row})
    if not any(has_ground_truth(row.get(column)) for row in rows):
        raise UserInputError(
            f"--as-teacher: no row has a reference in column {column!r} (columns: {columns}), so the teacher "
            "would be scored on the student's own prompts: nothing to probe. For rows without references GEAR trains "
            "with `teacher_reference: sibling`."
        )
    return settings


def as_teacher_rows(rows: list[dict], tokenizer, settings: dict) -> tuple[list[dict], int]:
    """`rows` (prepared dataset rows) with each prompt replaced by its teacher prompt; and how many rows have no
    reference (kept with their own prompt)."""
    template = settings["teacher_template"]
    tool_template = tool_template_for(template)
    column = settings["ground_truth_column"]
    teacher_rows, without = [], 0
    for row in rows:
        truth = row.get(column)
        if not has_ground_truth(truth):
            without += 1
            teacher_rows.append(dict(row))
            continue
        solution = row.get(REFERENCE_SOLUTION_COLUMN) if settings["teacher_reference"] == "solution" else None
        has_tools = bool(row.get("tools"))
        row_template = tool_template if has_tools and tool_template is not None else template
        shown = render_reference(truth, tokenizer)
        teacher_rows.append({**row, "prompt": teacher_prompt(row["prompt"], shown, row_template, solution)})
    return teacher_rows, without


def probe_as_teacher(run: Callable[[list[dict]], dict], student: dict, rows, tokenizer, recipe: str | None) -> dict:
    """`student` (an evaluation report of `rows`) with `as_teacher`, the same evaluation (`run(rows)`) of the
    teacher prompts, and `teacher_gap`, the teacher's accuracy minus the student's."""
    teacher_rows, without = as_teacher_rows([dict(row) for row in rows], tokenizer, teacher_settings(recipe))
    teacher = run(teacher_rows)
    keys = ("n", "accuracy", "mean_reward", "rewards", "pass_at_k", "finished_frac", "per_sample")
    probe = {key: teacher[key] for key in keys if key in teacher}
    probe["without_reference"] = without
    gap = None
    if teacher.get("accuracy") is not None and student.get("accuracy") is not None:
        gap = teacher["accuracy"] - student["accuracy"]
    return {**student, "as_teacher": probe, "teacher_gap": gap}


def probe_summary(report: dict, reward_name: str) -> str:
    """The probe's line after the evaluation's own."""
    teacher = report["as_teacher"]
    accuracy = "n/a" if teacher.get("accuracy") is None else f"{teacher['accuracy']:.4f}"
    gap = "n/a" if report.get("teacher_gap") is None else f"{report['teacher_gap']:+.4f}"
    missing = f", {teacher['without_reference']} rows without a reference" if teacher["without_reference"] else ""
    return f"  as the teacher: {reward_name} {accuracy}, teacher_gap {gap}{missing}"
