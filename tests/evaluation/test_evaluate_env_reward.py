"""An environment's `get_reward` is evaluation's default reward, as it is training's (issue 54, item 2)."""

from __future__ import annotations

import pytest

from gear_trl.evaluation.cli import main
from gear_trl.inputs.errors import UserInputError
from tests.utils import TINY

ENVS = '''
class Scored:
    """Scores every rollout 0.75 by itself."""

    def reset(self, **row):
        return None

    def look(self, x: int) -> str:
        """Look around.

        Args:
            x: Where.
        """
        return "nothing"

    def get_reward(self) -> float:
        return 0.75


class Unscored:
    def reset(self, **row):
        return None

    def look(self, x: int) -> str:
        """Look around.

        Args:
            x: Where.
        """
        return "nothing"
'''


@pytest.fixture
def task(tmp_path, monkeypatch):
    (tmp_path / "evaluate_env_reward_fixture.py").write_text(ENVS)
    monkeypatch.syspath_prepend(str(tmp_path))
    data = tmp_path / "rows.jsonl"
    data.write_text('{"prompt": [{"role": "user", "content": "Look around."}]}\n' * 2)
    return ["--model", TINY, "--dataset", str(data), "--split", "train", "--dataset_format", "trl",
            "--max_new_tokens", "8", "--no_progress", "--enable_thinking", "false",
            "--output", str(tmp_path / "r.json")]  # fmt: skip


def test_the_environments_own_reward_scores_the_rollouts(task):
    report = main([*task, "--environment", "evaluate_env_reward_fixture:Scored"])
    assert report["config"]["reward"] == ["Scored"]
    assert report["mean_reward"] == pytest.approx(0.75) and report["n"] == 2


def test_an_environment_without_get_reward_still_needs_a_reward(task):
    with pytest.raises(UserInputError, match="has no default reward and no `get_reward` method"):
        main([*task, "--environment", "evaluate_env_reward_fixture:Unscored"])
