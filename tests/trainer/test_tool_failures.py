"""Tool failures are counted where the calls happen, cut-off rollouts included, and agree with TRL's own
`tools/failure_frequency`; a tool failing on most of its calls gets one warning naming it and its last error
(issue 54, item 5). Completions are scripted (a random tiny model does not write tool calls)."""

from __future__ import annotations

import logging

import pytest

from tests.scripted import call_text, scripted_trainer

pytestmark = pytest.mark.slow

ENV = '''
class Flaky:
    """A tool that always raises."""

    def reset(self, **row):
        return None

    def boom(self, x: int) -> str:
        """Blow up.

        Args:
            x: Anything.
        """
        raise RuntimeError("disk on fire")

    def get_reward(self) -> float:
        return 0.0
'''


def always_boom(row, round_index, rollout_index, rank):
    return call_text("boom", {"x": round_index})


@pytest.mark.parametrize("max_completion_length", [192, 40])  # 40: the results do not fit, TRL drops them
def test_a_raising_tool_is_counted_like_trls_count_and_warned_about_once(
    tmp_path, monkeypatch, caplog, max_completion_length
):
    (tmp_path / "tool_failures_fixture.py").write_text(ENV)
    monkeypatch.syspath_prepend(str(tmp_path))
    data = tmp_path / "rows.jsonl"
    data.write_text('{"prompt": [{"role": "user", "content": "Blow up the disk."}]}\n' * 8)
    argv = ["--config", "recipes/tiny/config_tool_use.yaml", "--output_dir", str(tmp_path / "out"),
            "--dataset_name", str(data), "--dataset_format", "trl", "--environment", "tool_failures_fixture:Flaky",
            "--reward_funcs", "format", "--credit", "gigpo",
            "--max_completion_length", str(max_completion_length)]  # fmt: skip
    trainer = scripted_trainer(always_boom, argv)
    trainer.model.train()
    loader = iter(trainer.get_train_dataloader())
    with caplog.at_level(logging.WARNING, logger="gear_trl.trainer.gear_trainer"):
        for _ in range(3):
            trainer._generate_and_score_completions(next(loader))
    metrics = trainer._metrics["train"]
    assert metrics["tools/failure_frequency"] == [1.0, 1.0, 1.0]  # TRL's count
    assert metrics["tools/error_rate"] == metrics["tools/failure_frequency"]
    kept = [m for c in trainer._rollout.completions for m in c if isinstance(m, dict) and m.get("role") == "tool"]
    assert trainer._rollout.tool_calls.trl_calls > len(kept) if max_completion_length == 40 else len(kept) > 0
    assert caplog.text.count("Tool `boom` failed on") == 1
    assert "(last error: RuntimeError: disk on fire)" in caplog.text
