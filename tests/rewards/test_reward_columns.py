"""A reward function's required parameters are checked against the training rows' columns and what TRL passes
before the model loads, every mismatch in one message naming the function and the column (issue 54, item 3)."""

from __future__ import annotations

import json

import pytest

from gear_trl.inputs.preflight import reward_parameter_problems

pytestmark = pytest.mark.usefixtures("never_load_a_model")  # tests/conftest.py

REWARDS = """
def boxed_target(completions, target, **kwargs):
    return [float(str(t) in str(c)) for c, t in zip(completions, target)]


def needs_difficulty(completions, difficulty, *, weight):
    return [0.0 for _ in completions]


def reads_kwargs(completions, **kwargs):
    return [0.0 for _ in completions]


class Judge:
    __name__ = "judge"

    def __call__(self, completions, rubric, environments, trainer_state, **kwargs):
        return [0.0 for _ in completions]
"""


def test_required_parameters_are_checked_against_columns_and_what_trl_passes(tmp_path, monkeypatch):
    (tmp_path / "reward_columns_fixture.py").write_text(REWARDS)
    monkeypatch.syspath_prepend(str(tmp_path))
    import reward_columns_fixture

    columns = ["prompt", "ground_truth"]
    assert reward_parameter_problems([reward_columns_fixture.reads_kwargs], columns) == []
    assert reward_parameter_problems([reward_columns_fixture.boxed_target], [*columns, "target"]) == []
    (problem,) = reward_parameter_problems([reward_columns_fixture.boxed_target], columns)
    assert problem.startswith("reward `boxed_target` needs 'target', which the training rows do not have")
    problems = reward_parameter_problems(
        [reward_columns_fixture.needs_difficulty, reward_columns_fixture.Judge()], columns
    )
    assert "reward `needs_difficulty` needs 'difficulty', 'weight'" in problems[0]
    # `environments` is passed only when the run has an environment; `trainer_state` always
    assert "reward `judge` needs 'rubric', 'environments'" in problems[1]
    (problem,) = reward_parameter_problems([reward_columns_fixture.Judge()], columns, environment=True)
    assert "needs 'rubric'," in problem and "'environments'" not in problem.split(", which")[0]
    # `prompt` is not passed by that name (TRL passes `prompts`)
    assert "needs 'prompt'" in reward_parameter_problems([lambda completions, prompt: []], columns)[0]


def test_a_recipe_reward_needing_a_missing_column_stops_before_the_model_loads(tmp_path, monkeypatch):
    from gear_trl.train import cli

    (tmp_path / "reward_columns_fixture.py").write_text(REWARDS)
    monkeypatch.syspath_prepend(str(tmp_path))
    data = tmp_path / "rows.jsonl"
    row = {"prompt": [{"role": "user", "content": "What is 2 + 3?"}], "ground_truth": "5"}
    data.write_text("\n".join(json.dumps(row) for _ in range(4)))
    argv = ["--config", "recipes/tiny/config_math.yaml", "--output_dir", str(tmp_path / "out"), "--dataset_name",
            str(data), "--dataset_format", "generic", "--reward_funcs", "reward_columns_fixture:boxed_target", "accuracy",
            "reward_columns_fixture:needs_difficulty"]  # fmt: skip
    with pytest.raises(SystemExit) as exit_info:
        cli(argv)
    message = str(exit_info.value.code)
    assert "Reward functions TRL could not call" in message and "Traceback" not in message
    assert "reward `boxed_target` needs 'target'" in message
    assert "reward `needs_difficulty` needs 'difficulty', 'weight'" in message  # both, at once
    assert "reward `accuracy`" not in message
