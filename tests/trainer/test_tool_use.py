"""Multi-turn tool use end to end on the tiny model: real BFCL environment, tool loop, rewards, teacher pass,
GiGPO and GEAR credit; completions are scripted (a random tiny model does not write tool calls)."""

from __future__ import annotations

import json

import pytest
import torch

from tests.scripted import call_text, scripted_trainer
from tests.utils import weighted

pytestmark = pytest.mark.slow

RECIPE = "recipes/tiny/config_tool_use.yaml"


def solve_or_wander(row, round_index, rollout_index, rank):
    """Even rollouts make the reference calls one per round; odd ones look around with `ls` and stop."""
    calls = json.loads(row["ground_truth"])
    if rollout_index % 2 == 0:
        if round_index < len(calls):
            return call_text(calls[round_index]["name"], calls[round_index]["arguments"])
        return "Done."
    return call_text("ls") if round_index == 0 else "Done."


def make(tmp_path, *overrides, script=solve_or_wander):
    trainer = scripted_trainer(script, ["--config", RECIPE, "--output_dir", str(tmp_path), *overrides])
    trainer.model.train()
    return trainer


def test_tool_rollouts_execute_in_the_environment_and_get_credit(tmp_path):
    trainer = make(tmp_path)
    batch = weighted(trainer, trainer._generate_and_score_completions(next(iter(trainer.get_train_dataloader()))))
    record = trainer._rollout
    rewards = record.rewards_per_func[:, 0]
    # the scripted reference calls succeed in the real environment, the wandering rollouts do not
    assert rewards[0::2].min() == 1.0 and rewards[1::2].max() == 0.0
    tool_mask = batch["tool_mask"].bool() & batch["completion_mask"].bool()
    assert (~batch["tool_mask"].bool() & batch["completion_mask"].bool()).any(), "tool results are in the sequence"
    # tool results and padding carry no advantage; model tokens do
    assert torch.all(batch["advantages"][~tool_mask] == 0)
    assert (batch["advantages"][tool_mask] != 0).any()
    metrics = trainer._metrics["train"]
    for name in (
        "gigpo/step_groups",
        "gigpo/singleton_frac",
        "gigpo/step_adv_std",
        "tools/turns_per_rollout",
        "tools/error_rate",
        "tools/parse_failures",
        "gear/kl_mean",
        "gear/onset_rate",
    ):
        assert name in metrics, name
    assert metrics["tools/turns_per_rollout"][-1] > 1.5
    assert metrics["tools/parse_failures"][-1] == 0.0
    # every state along the way was recorded for the anchors
    assert record.state_history is not None and all(len(h) >= 1 for h in record.state_history)


def test_tool_errors_are_returned_to_the_model_and_counted(tmp_path):
    def bad_calls(row, round_index, rollout_index, rank):
        return call_text("cd", {"folder": "no_such_folder"}) if round_index == 0 else "Done."

    trainer = make(tmp_path, "--credit", "gigpo", script=bad_calls)
    trainer._generate_and_score_completions(next(iter(trainer.get_train_dataloader())))
    completions = trainer._rollout.completions
    tool_messages = [m for c in completions for m in c if m["role"] == "tool"]
    assert tool_messages and all("Error" in m["content"] or "error" in m["content"] for m in tool_messages)
    assert trainer._metrics["train"]["tools/error_rate"][-1] == 1.0


def test_teacher_sees_reference_calls_and_the_same_completion_tokens(tmp_path):
    trainer = make(tmp_path, "--credit", "gear")
    rows = next(iter(trainer.get_train_dataloader()))
    trainer._generate_and_score_completions(rows)
    tools = [trainer._prompt_tools(i) for i in range(len(rows))]
    teacher = trainer.teacher.prompts(
        trainer._rollout.prompts, [r["ground_truth"] for r in rows], tools, render=trainer.teacher.render_reference
    )
    text = trainer.processing_class.decode(teacher.input_ids[0])
    first_call = json.loads(rows[0]["ground_truth"])[0]["name"]
    assert "Reference tool calls" in text and f'"name": "{first_call}"' in text and "<tool_call>" in text
    assert '"name": "mkdir"' in text or '"name": "cd"' in text  # the row's own tools are rendered too


def test_a_few_training_steps_log_gigpo_and_tool_metrics(tmp_path):
    trainer = make(tmp_path, "--max_steps", "2")
    before = {n: p.detach().clone() for n, p in trainer.model.named_parameters()}
    trainer.train()
    logged = [entry for entry in trainer.state.log_history if "gigpo/step_groups" in entry]
    assert len(logged) == 2
    assert all(entry["tools/turns_per_rollout"] > 1 for entry in logged)
    assert any(not torch.equal(before[n], p.detach()) for n, p in trainer.model.named_parameters())
