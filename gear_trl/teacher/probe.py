"""The teacher probe: the model scored as GEAR's teacher (its prompt with the recipe's reference) beside its score as
the student, before any training (`python -m gear_trl.evaluate --as_teacher [RECIPE]`).

GEAR's credit comes from where the teacher, shown the reference, disagrees with the student. A model that does no
better with the reference than without it has nothing to teach: its KL is the hint's style, and GEAR trains like GRPO
at GEAR's cost. The gap `as_teacher.accuracy - accuracy` says, in one evaluation, whether there is knowledge to
distil; `docs/metrics.md` says how to read it beside `gear/kl_failed_over_passed` and the teacher controls.

The teacher prompt is built as the trainer builds it (`gear_trl.teacher.prompts.teacher_prompt`): the recipe's
`teacher_template` and `teacher_reference` (a tool row's reference calls rendered as the chat template writes them,
the tool-call hint on rows with tools when the template is left at its default), without `max_teacher_prompt_length`'s
cut. Rows without a reference are scored with their own prompt and counted (`as_teacher.without_reference`).
"""

from __future__ import annotations

from collections.abc import Callable

from ..data.math_tasks import REFERENCE_SOLUTION_COLUMN
from ..inputs.errors import UserInputError
from .prompts import DEFAULT_MATH_SOLUTION_TEMPLATE, DEFAULT_MATH_TEACHER_TEMPLATE, has_ground_truth, teacher_prompt
from .teacher import render_reference, tool_template_for

SETTINGS = ("teacher_template", "teacher_reference", "ground_truth_column", "teacher_sibling_min_reward")


def teacher_settings(recipe: str | None) -> dict:
    """The teacher's prompt settings of a recipe (YAML; None or "default": GEARConfig's defaults)."""
    settings = {
        "teacher_template": None,
        "teacher_reference": "answer",
        "ground_truth_column": "ground_truth",
        "teacher_sibling_min_reward": 1.0,
    }
    if recipe and recipe != "default":
        import yaml

        try:
            with open(recipe, encoding="utf-8") as handle:
                loaded = yaml.safe_load(handle) or {}
        except OSError as err:
            raise UserInputError(f"--as_teacher: cannot read the recipe {recipe!r} ({err.strerror}).") from err
        if not isinstance(loaded, dict):
            raise UserInputError(f"--as_teacher: {recipe!r} is not a YAML recipe (a mapping of fields).")
        settings.update({key: loaded[key] for key in SETTINGS if loaded.get(key) is not None})
    if settings["teacher_reference"] not in ("answer", "solution", "sibling"):
        raise UserInputError(
            f"--as_teacher: `teacher_reference: {settings['teacher_reference']}` is not one of answer, solution, "
            "sibling."
        )
    if settings["teacher_template"] is None:
        solution = settings["teacher_reference"] == "solution"
        settings["teacher_template"] = DEFAULT_MATH_SOLUTION_TEMPLATE if solution else DEFAULT_MATH_TEACHER_TEMPLATE
    return settings


def check_probe(rows, recipe: str | None, num_samples: int = 1, temperature: float = 0.0) -> dict:
    """The recipe's teacher settings (`teacher_settings`), checked against the evaluation rows and sampling before
    any row is scored: a recipe the probe cannot follow, rows none of which has a reference, or (sibling) a
    sampling that draws no group per prompt is refused (`UserInputError`)."""
    settings = teacher_settings(recipe)
    if settings["teacher_reference"] == "sibling":
        if num_samples < 2 or temperature <= 0:
            raise UserInputError(
                "--as_teacher with `teacher_reference: sibling` samples a group per prompt, as training does, and "
                "shows a success to the teacher of the group's other rollouts: pass --num_samples G (G >= 2, e.g. "
                f"the recipe's num_generations) and --temperature > 0 (given: {num_samples} samples at temperature "
                f"{temperature})."
            )
        return settings
    column = settings["ground_truth_column"]
    rows = [dict(row) for row in rows]
    columns = sorted({key for row in rows for key in row})
    if not any(has_ground_truth(row.get(column)) for row in rows):
        raise UserInputError(
            f"--as_teacher: no row has a reference in column {column!r} (columns: {columns}), so the teacher "
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


def probe_as_teacher(run: Callable[..., dict], student: dict, rows, tokenizer, recipe: str | None) -> dict:
    """`student` (an evaluation report of `rows`) with `as_teacher`, the same evaluation (`run(rows)`) of the
    teacher prompts, and `teacher_gap`, the teacher's accuracy minus the student's. Under `teacher_reference:
    sibling`, `probe_siblings`."""
    settings = teacher_settings(recipe)
    if settings["teacher_reference"] == "sibling":
        return probe_siblings(run, student, rows, tokenizer, settings)
    teacher_rows, without = as_teacher_rows([dict(row) for row in rows], tokenizer, settings)
    teacher = run(teacher_rows)
    keys = ("n", "accuracy", "mean_reward", "rewards", "pass_at_k", "finished_frac", "per_sample")
    probe = {key: teacher[key] for key in keys if key in teacher}
    probe["without_reference"] = without
    gap = None
    if teacher.get("accuracy") is not None and student.get("accuracy") is not None:
        gap = teacher["accuracy"] - student["accuracy"]
    return {**student, "as_teacher": probe, "teacher_gap": gap}


def probe_siblings(run: Callable[..., dict], student: dict, rows, tokenizer, settings: dict) -> dict:
    """The sibling teacher probed as training runs it. `student`: the evaluation of `rows` with G samples a prompt
    (a group). In each group, every rollout whose group has another success (total reward >=
    `teacher_sibling_min_reward`) is given, as training gives it, the best other success (`sibling_choice`) shown to
    its teacher as a reference (`sibling_reference`); each such teacher prompt is scored with one fresh sample
    (`run(rows, num_samples=1)`), and set against the student's score of that same rollout. Samples are independent,
    so a rollout's own score is not biased by its group having another success: `teacher_gap` is the teacher's
    accuracy minus the student's over those rollouts.

    Adds `as_teacher` {n (teacher rows), accuracy, student_accuracy (the same rollouts'), reference: "sibling",
    prompts, no_success_frac (prompts whose group has no success: plain GRPO weights in training),
    lone_success_frac (prompts with exactly one success: its own rollout has no other to be shown)}."""
    from .prompts import sibling_choice
    from .teacher import sibling_reference

    rows = [dict(row) for row in rows]
    column, floor = settings["ground_truth_column"], float(settings["teacher_sibling_min_reward"])
    groups: dict[int, list[dict]] = {}
    for sample in student["per_sample"]:
        groups.setdefault(sample["index"], []).append(sample)
    name = next(iter(student["rewards"]), None)
    shown_rows, student_scores, no_success, lone = [], [], 0, 0
    for index, samples in sorted(groups.items()):
        samples.sort(key=lambda s: s["sample"])
        totals = [0.0 if s["reward"] is None else float(s["reward"]) for s in samples]  # as training: no reward, 0
        choice, _, _ = sibling_choice(totals, len(samples), floor)
        successes = sum(total >= floor for total in totals)
        no_success += successes == 0
        lone += successes == 1
        for k, j in enumerate(choice):
            shown = None if j is None else sibling_reference(samples[j]["completion"])
            if shown is None:
                continue
            shown_rows.append({**rows[index], column: shown})
            student_scores.append(samples[k]["rewards"].get(name))
    prompts = len(groups)
    probe = {
        "reference": "sibling",
        "prompts": prompts,
        "no_success_frac": no_success / max(prompts, 1),
        "lone_success_frac": lone / max(prompts, 1),
        "n": len(shown_rows),
        "accuracy": None,
        "student_accuracy": None,
        "without_reference": 0,
    }
    gap = None
    if shown_rows:
        teacher_rows, _ = as_teacher_rows(shown_rows, tokenizer, {**settings, "teacher_reference": "answer"})
        teacher = run(teacher_rows, num_samples=1)
        scored = [(t["rewards"].get(name), s) for t, s in zip(teacher["per_sample"], student_scores, strict=True)]
        scored = [(t, s) for t, s in scored if t is not None and s is not None]
        if scored:
            probe["accuracy"] = sum(t for t, _ in scored) / len(scored)
            probe["student_accuracy"] = sum(s for _, s in scored) / len(scored)
            gap = probe["accuracy"] - probe["student_accuracy"]
        probe["per_sample"] = teacher["per_sample"]
    return {**student, "as_teacher": probe, "teacher_gap": gap}


def probe_summary(report: dict, reward_name: str) -> str:
    """The probe's line after the evaluation's own."""
    teacher = report["as_teacher"]
    if teacher.get("reference") == "sibling":
        accuracy = "n/a" if teacher["accuracy"] is None else f"{teacher['accuracy']:.4f}"
        student = "n/a" if teacher["student_accuracy"] is None else f"{teacher['student_accuracy']:.4f}"
        gap = "n/a" if report.get("teacher_gap") is None else f"{report['teacher_gap']:+.4f}"
        return (
            f"  as the sibling teacher: {reward_name} {accuracy} on {teacher['n']} rollouts shown a successful "
            f"sibling (the student {student} on the same rollouts), teacher_gap {gap}; of {teacher['prompts']} "
            f"prompts, {teacher['no_success_frac']:.0%} had no success (plain GRPO weights in training) and "
            f"{teacher['lone_success_frac']:.0%} a lone one"
        )
    accuracy = "n/a" if teacher.get("accuracy") is None else f"{teacher['accuracy']:.4f}"
    gap = "n/a" if report.get("teacher_gap") is None else f"{report['teacher_gap']:+.4f}"
    missing = f", {teacher['without_reference']} rows without a reference" if teacher["without_reference"] else ""
    return f"  as the teacher: {reward_name} {accuracy}, teacher_gap {gap}{missing}"
