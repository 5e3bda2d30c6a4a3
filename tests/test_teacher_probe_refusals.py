"""`evaluate --as-teacher` scores every shipped dataset format with its task's reward, and refuses what it cannot
probe before the student's evaluation starts (issue 52, item 4; issue 54, item 2's refusals)."""

from __future__ import annotations

import pytest

from gear_trl.data import DATASET_ADAPTERS
from gear_trl.evaluate import main, task_reward
from gear_trl.plugins import UserInputError
from tests.utils import TINY


def test_every_shipped_format_has_its_task_reward_or_none():
    """Tool calls are scored as tool calls (xlam had fallen through to the math `accuracy`); `trl` rows, whose
    columns are the user's own, have no reward evaluation could know."""
    rewards = {name: task_reward(name) for name in DATASET_ADAPTERS}
    assert rewards == {
        "gsm8k": "accuracy",
        "aime": "accuracy",
        "math": "accuracy",
        "tool_use": "tool_call_accuracy",
        "xlam": "tool_call_accuracy",
        "generic": "accuracy",
        "trl": None,
    }
    assert task_reward("acebench") == "acebench_accuracy" and task_reward("my_pkg.data:to_example") is None


def _refuses_before_loading(monkeypatch, argv, match):
    """`main(argv)` raises `UserInputError` matching `match` without loading the model."""
    from gear_trl import evaluate

    def no_model(*args, **kwargs):
        raise AssertionError("the model was loaded before the refusal")

    monkeypatch.setattr(evaluate, "load_model", no_model)
    with pytest.raises(UserInputError, match=match):
        main(argv)


def test_a_sibling_recipe_is_refused_before_the_student_is_scored(tmp_path, monkeypatch):
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text("credit: gear\nteacher_reference: sibling\n")
    argv = ["--model", TINY, "--dataset", "data/arith", "--dataset_format", "generic", "--limit", "4", "--no-progress",
            "--enable-thinking", "false", "--as-teacher", str(recipe), "--output", str(tmp_path / "r.json")]  # fmt: skip
    _refuses_before_loading(monkeypatch, argv, "teacher_reference: sibling` has none before a rollout exists")


def test_rows_without_any_reference_are_refused_before_the_student_is_scored(tmp_path, monkeypatch):
    data = tmp_path / "rows.jsonl"
    data.write_text('{"prompt": [{"role": "user", "content": "Add 2 and 3."}], "ground_truth": "", "target": 5}\n' * 3)
    argv = ["--model", TINY, "--dataset", str(data), "--split", "train", "--dataset_format", "generic",
            "--no-progress", "--enable-thinking", "false", "--as-teacher", "--output", str(tmp_path / "r.json")]  # fmt: skip
    _refuses_before_loading(monkeypatch, argv, r"no row has a reference in column 'ground_truth'.*sibling")
    argv[argv.index("generic")] = "trl"
    _refuses_before_loading(monkeypatch, argv, r"dataset_format 'trl' have no task reward .* --reward")


def test_tool_rows_are_probed_with_the_tool_call_reward(tmp_path):
    argv = ["--model", TINY, "--dataset", "data/xlam_sample", "--split", "train", "--dataset_format", "xlam",
            "--limit", "2", "--max-new-tokens", "8", "--no-progress", "--enable-thinking", "false", "--as-teacher",
            "--output", str(tmp_path / "r.json")]  # fmt: skip
    report = main(argv)
    assert report["config"]["reward"] == ["tool_call_accuracy"]
    assert report["as_teacher"]["n"] == report["n"] == 2 and report["as_teacher"]["without_reference"] == 0
