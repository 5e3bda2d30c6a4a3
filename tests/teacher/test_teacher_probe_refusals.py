"""`evaluate --as_teacher` scores every shipped dataset format with its task's reward, and refuses what it cannot
probe before the student's evaluation starts (issue 52, item 4; issue 54, item 2's refusals)."""

from __future__ import annotations

import pytest

from gear_trl.data import DATASET_ADAPTERS
from gear_trl.evaluation.cli import main
from gear_trl.evaluation.loops import task_reward
from gear_trl.inputs.errors import UserInputError
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
    from gear_trl.evaluation import cli as evaluate

    def no_model(*args, **kwargs):
        raise AssertionError("the model was loaded before the refusal")

    monkeypatch.setattr(evaluate, "load_model", no_model)
    with pytest.raises(UserInputError, match=match):
        main(argv)


def test_a_sibling_probe_without_groups_is_refused_before_the_student_is_scored(tmp_path, monkeypatch):
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text("credit: gear\nteacher_reference: sibling\n")
    argv = ["--model", TINY, "--dataset", "data/arith", "--dataset_format", "generic", "--limit", "4", "--no_progress",
            "--enable_thinking", "false", "--as_teacher", str(recipe), "--output", str(tmp_path / "r.json")]  # fmt: skip
    # the message is gear_trl/teacher/probe.py's, still in the dash spelling
    _refuses_before_loading(monkeypatch, argv, r"samples a group per prompt.*--num_samples G")


def test_rows_without_any_reference_are_refused_before_the_student_is_scored(tmp_path, monkeypatch):
    data = tmp_path / "rows.jsonl"
    data.write_text('{"prompt": [{"role": "user", "content": "Add 2 and 3."}], "ground_truth": "", "target": 5}\n' * 3)
    argv = ["--model", TINY, "--dataset", str(data), "--split", "train", "--dataset_format", "generic",
            "--no_progress", "--enable_thinking", "false", "--as_teacher", "--output", str(tmp_path / "r.json")]  # fmt: skip
    _refuses_before_loading(monkeypatch, argv, r"no row has a reference in column 'ground_truth'.*sibling")
    argv[argv.index("generic")] = "trl"
    _refuses_before_loading(monkeypatch, argv, r"dataset_format 'trl' have no task reward .* --reward")


def test_tool_rows_are_probed_with_the_tool_call_reward(tmp_path):
    argv = ["--model", TINY, "--dataset", "data/xlam_sample", "--split", "train", "--dataset_format", "xlam",
            "--limit", "2", "--max_new_tokens", "8", "--no_progress", "--enable_thinking", "false", "--as_teacher",
            "--output", str(tmp_path / "r.json")]  # fmt: skip
    report = main(argv)
    assert report["config"]["reward"] == ["tool_call_accuracy"]
    assert report["as_teacher"]["n"] == report["n"] == 2 and report["as_teacher"]["without_reference"] == 0


REWARD = """
def even_length(completions, **kwargs):
    texts = [c[-1]["content"] if isinstance(c, list) else c for c in completions]
    return [float(len(t) % 2 == 0) for t in texts]
"""


def test_the_sibling_probe_shows_a_success_to_the_teacher_of_the_groups_other_rollouts(tmp_path, monkeypatch, capsys):
    """Rows without references: each prompt is sampled as a group; every rollout whose group has another success
    gets a teacher prompt showing the best other one (as training chooses), scored against the rollout's own score."""
    from gear_trl.teacher.prompts import sibling_choice

    (tmp_path / "sibling_probe_fixture.py").write_text(REWARD)
    monkeypatch.syspath_prepend(str(tmp_path))
    data = tmp_path / "rows.jsonl"
    data.write_text("".join(f'{{"prompt": [{{"role": "user", "content": "Say {i}."}}]}}\n' for i in range(6)))
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text("credit: gear\nteacher_reference: sibling\n")
    argv = ["--model", TINY, "--dataset", str(data), "--split", "train", "--dataset_format", "trl",
            "--reward", "sibling_probe_fixture:even_length", "--num_samples", "4", "--temperature", "1.0",
            "--max_new_tokens", "6",
            "--no_progress", "--enable_thinking", "false", "--as_teacher", str(recipe),
            "--output", str(tmp_path / "r.json")]  # fmt: skip
    report = main(argv)
    probe = report["as_teacher"]
    groups = {}
    for sample in sorted(report["per_sample"], key=lambda s: (s["index"], s["sample"])):
        groups.setdefault(sample["index"], []).append(sample["reward"])
    expected_rows, expected_student, none, lone = 0, [], 0, 0
    for rewards in groups.values():
        choice, _, _ = sibling_choice(rewards, 4, 1.0)
        expected_rows += sum(j is not None for j in choice)
        expected_student += [r for r, j in zip(rewards, choice, strict=True) if j is not None]
        none, lone = none + (sum(rewards) == 0), lone + (sum(rewards) == 1)
    assert probe["reference"] == "sibling" and probe["prompts"] == 6
    assert probe["n"] == expected_rows > 0
    assert probe["no_success_frac"] == none / 6 and probe["lone_success_frac"] == lone / 6
    assert probe["student_accuracy"] == pytest.approx(sum(expected_student) / len(expected_student))
    assert report["teacher_gap"] == pytest.approx(probe["accuracy"] - probe["student_accuracy"])
    assert all("A reference answer to this problem is:" in s["prompt"][-1]["content"] for s in probe["per_sample"])
    assert "as the sibling teacher: sibling_probe_fixture:even_length" in capsys.readouterr().out
