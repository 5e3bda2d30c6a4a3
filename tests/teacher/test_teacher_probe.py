"""`python -m gear_trl.evaluate --as_teacher`: the model scored with GEAR's teacher prompts beside its student score."""

from __future__ import annotations

import json

import pytest
from transformers import AutoTokenizer

from gear_trl.inputs.errors import UserInputError
from gear_trl.teacher.probe import as_teacher_rows, teacher_settings
from gear_trl.trainer.gear_config import DEFAULT_MATH_SOLUTION_TEMPLATE, DEFAULT_MATH_TEACHER_TEMPLATE
from tests.utils import TINY


def test_teacher_settings_come_from_the_recipe(tmp_path):
    assert teacher_settings(None)["teacher_template"] == DEFAULT_MATH_TEACHER_TEMPLATE
    recipe = tmp_path / "r.yaml"
    recipe.write_text("teacher_reference: solution\nground_truth_column: answer\n")
    settings = teacher_settings(str(recipe))
    assert (
        settings["teacher_template"] == DEFAULT_MATH_SOLUTION_TEMPLATE and settings["ground_truth_column"] == "answer"
    )
    recipe.write_text("teacher_reference: sibling\nteacher_sibling_min_reward: 0.5\n")
    assert teacher_settings(str(recipe))["teacher_sibling_min_reward"] == 0.5  # probed by sampling groups
    recipe.write_text("teacher_reference: siblings\n")
    with pytest.raises(UserInputError, match="not one of answer, solution, sibling"):
        teacher_settings(str(recipe))
    with pytest.raises(UserInputError, match="cannot read"):
        teacher_settings(str(tmp_path / "missing.yaml"))


def test_teacher_rows_show_the_reference_as_the_trainer_does():
    tokenizer = AutoTokenizer.from_pretrained(TINY)
    rows = [
        {"prompt": [{"role": "user", "content": "What is 66 + 2?"}], "ground_truth": "68", "reference_solution": "66 + 2 = 68"},
        {"prompt": "Compute 1 + 1.", "ground_truth": ""},
    ]  # fmt: skip
    shown, without = as_teacher_rows(rows, tokenizer, teacher_settings(None))
    assert without == 1 and shown[1] == rows[1]
    assert (
        shown[0]["prompt"][-1]["content"].startswith("What is 66 + 2?")
        and "answer to this problem is: 68" in (shown[0]["prompt"][-1]["content"])
    )
    settings = {**teacher_settings(None), "teacher_reference": "solution"}
    settings["teacher_template"] = DEFAULT_MATH_SOLUTION_TEMPLATE
    shown, _ = as_teacher_rows(rows, tokenizer, settings)
    assert "66 + 2 = 68" in shown[0]["prompt"][-1]["content"]


@pytest.mark.slow
def test_as_teacher_reports_the_teacher_beside_the_student(tmp_path, capsys):
    from gear_trl.evaluation.cli import main

    output = tmp_path / "report.json"
    report = main(
        [
            "--model", "data/tiny-qwen3-arith-sol35", "--dataset", "data/arith", "--dataset_format", "generic",
            "--limit", "16", "--max_new_tokens", "48", "--as_teacher", "--output", str(output), "--no_progress",
        ]
    )  # fmt: skip
    assert report["as_teacher"]["n"] == report["n"] == 16
    assert report["teacher_gap"] == pytest.approx(report["as_teacher"]["accuracy"] - report["accuracy"])
    # the warm start learned to read the answer in its teacher prompt (data/README.md): a gap well above 0
    assert report["teacher_gap"] > 0.3
    prompts = [s["prompt"] for s in report["as_teacher"]["per_sample"]]
    assert all("A reference answer to this problem is" in p[-1]["content"] for p in prompts)
    assert json.loads(output.read_text())["teacher_gap"] == report["teacher_gap"]
    assert "as the teacher: accuracy" in capsys.readouterr().out
