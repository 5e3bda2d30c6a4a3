"""`teacher_reference: sibling`: the teacher is shown a successful rollout of the same group (ours, after SDPO's
successful-rollout reprompting), on hand-built groups."""

from __future__ import annotations

import json

import pytest
import torch
from datasets import Dataset
from transformers import AutoTokenizer

from gear_trl import GEARTrainer
from gear_trl.teacher.prompts import sibling_choice
from gear_trl.teacher.teacher import sibling_reference
from tests.utils import TINY, digit_share, make_trainer, tiny_args


def test_sibling_choice_on_hand_built_groups():
    rewards = [
        0.0, 1.0, 0.0, 1.5,  # group 0: two successes; the best (1.5, row 3) for the others, row 1 for row 3
        0.0, 0.2, 0.0, 0.9,  # group 1: no success (threshold 1.0)
        1.0, 0.0, 0.0, 0.0,  # group 2: one success, which has no other to be shown
        1.0, 1.0, 0.0, 1.0,  # group 3: ties go to the first other success
    ]  # fmt: skip
    choice, no_success, lone = sibling_choice(rewards, 4, 1.0)
    assert choice[:4] == [3, 3, 3, 1]
    assert choice[4:8] == [None] * 4 and no_success[4:8] == [True] * 4 and not any(lone[4:8])
    assert choice[8:12] == [None, 8, 8, 8] and lone[8:12] == [True, False, False, False]
    assert not any(no_success[8:12])
    assert choice[12:16] == [13, 12, 12, 12]
    assert not any(no_success[:4] + no_success[12:]) and not any(lone[:4] + lone[12:])
    # a last group cut short (eval batches) is its own group
    assert sibling_choice([1.0, 0.0, 2.0], 2, 1.0)[0] == [None, 0, None]


def test_sibling_reference_shows_tool_calls_or_the_boxed_answer_or_the_final_text():
    call = {"type": "function", "function": {"name": "add", "arguments": {"a": 1, "b": 2}}}
    tool_rollout = [
        {"role": "assistant", "content": "", "tool_calls": [call]},
        {"role": "tool", "name": "add", "content": "3"},
        {"role": "assistant", "content": "The sum is 3."},
    ]
    assert json.loads(sibling_reference(tool_rollout)) == [{"name": "add", "arguments": {"a": 1, "b": 2}}]
    math = [{"role": "assistant", "content": "2 + 2 = 4, so \\boxed{4}."}]
    assert sibling_reference(math) == "4"
    assert sibling_reference("So it is \\boxed{x^2}") == "x^2"
    assert sibling_reference([{"role": "assistant", "content": " yes "}]) == "yes"
    assert sibling_reference([{"role": "assistant", "content": "  "}]) is None


@pytest.mark.slow
def test_sibling_references_in_the_trainer_and_their_counts(tmp_path):
    rows = [{"prompt": [{"role": "user", "content": f"What is {i} + 2?"}]} for i in range(8)]  # no ground truth
    args = tiny_args(tmp_path, teacher_reference="sibling", per_device_train_batch_size=8, num_generations=4)

    def length(completions, **kwargs):  # two rewards that read no ground truth
        return [float(len(c[-1]["content"])) for c in completions]

    trainer = GEARTrainer(  # accepted without the column
        model=TINY,
        reward_funcs=[length, digit_share],
        args=args,
        train_dataset=Dataset.from_list(rows),
        processing_class=AutoTokenizer.from_pretrained(TINY),
    )
    answers = [f"\\boxed{{{k}}}" for k in range(8)]
    completions = [[{"role": "assistant", "content": a}] for a in answers]
    # two reward functions, weight 1 each: totals 0, 1, 0, 2 | 0, 0, 1, 0
    per_func = torch.tensor([[0, 0], [1, 0], [0, 0], [1, 1], [0, 0], [0, 0], [0.5, 0.5], [0, 0]], dtype=torch.float)
    references = trainer.teacher.sibling_references("train", [None] * 8, completions, per_func)
    assert references == ["3", "3", "3", "1", "6", "6", None, "6"]
    metrics = trainer._metrics["train"]
    assert metrics["gear/no_sibling_frac"][-1] == 0.0 and metrics["gear/lone_success_frac"][-1] == 1 / 8
    # As a fallback, only rows without a ground truth look for a sibling, and only they are counted.
    trainer.args.teacher_reference, trainer.args.teacher_sibling_fallback = "answer", True
    truths = ["2", None, "4", None, "x", "y", "z", None]
    references = trainer.teacher.sibling_references("train", truths, completions, per_func)
    assert references == ["2", "3", "4", "1", "x", "y", "z", "6"]
    assert metrics["gear/no_sibling_frac"][-1] == 0.0 and metrics["gear/lone_success_frac"][-1] == 0.0
    no_success = torch.zeros_like(per_func)
    references = trainer.teacher.sibling_references("train", truths, completions, no_success)
    assert references == ["2", None, "4", None, "x", "y", "z", None]
    assert metrics["gear/no_sibling_frac"][-1] == 1.0


@pytest.mark.slow
def test_a_sibling_teacher_step_runs_every_row_through_the_teacher_pass(tmp_path, monkeypatch):
    """A batch without ground truths under `teacher_reference: sibling`: rows whose group has a success get a
    teacher prompt showing it; the rest keep the student's prompt and weights 1, and every row is in the pass."""
    rows = [{"prompt": [{"role": "user", "content": f"What is {i} + 2?"}]} for i in range(8)]
    args = tiny_args(tmp_path, teacher_reference="sibling", max_steps=1, teacher_sibling_min_reward=0.5)

    def has_digit(completions, **kwargs):  # a reward with no ground truth, which the random tiny model varies on
        return [float(any(ch.isdigit() for ch in c[-1]["content"])) for c in completions]

    trainer = GEARTrainer(
        model=TINY,
        reward_funcs=[has_digit],
        args=args,
        train_dataset=Dataset.from_list(rows),
        processing_class=AutoTokenizer.from_pretrained(TINY),
    )
    built = trainer.teacher.prompts.__call__
    seen, passes = [], []
    monkeypatch.setattr(trainer.teacher, "prompts", lambda *a, **k: seen.append((a, built(*a, **k))) or seen[-1][1])
    hidden = trainer.teacher.hidden
    monkeypatch.setattr(trainer.teacher, "hidden", lambda out, ids: passes.append(len(ids)) or hidden(out, ids))
    trainer.train()
    (prompts, references, *_), built_prompts = seen[0]
    assert passes == [len(prompts)]
    assert built_prompts.has_ground_truth == [r is not None for r in references]
    logged = trainer.state.log_history[0]
    assert 0.0 <= logged["gear/no_sibling_frac"] <= 1.0 and 0.0 <= logged["gear/lone_success_frac"] <= 1.0


@pytest.mark.slow
def test_a_tool_rollouts_sibling_is_shown_as_reference_calls(tmp_path):
    """Multi-turn tool rollouts: the successful sibling's calls reach the teacher as the chat template writes tool
    calls, under the tool-call hint, as a tool row's reference calls do."""
    schema = {"type": "function", "function": {"name": "add", "description": "Add.", "parameters": {}}}
    rows = [{"prompt": [{"role": "user", "content": "Add 40 and 92."}], "tools": json.dumps([schema])}] * 4
    args = tiny_args(tmp_path, teacher_reference="sibling")
    trainer = make_trainer(tmp_path, args=args, dataset=Dataset.from_list(rows), reward_funcs=[digit_share])

    def rollout(a):
        call = {"type": "function", "function": {"name": "add", "arguments": {"a": a, "b": 92}}}
        return [
            {"role": "assistant", "content": "", "tool_calls": [call]},
            {"role": "tool", "name": "add", "content": str(a + 92)},
            {"role": "assistant", "content": f"\\boxed{{{a + 92}}}"},
        ]

    completions = [rollout(a) for a in (41, 40, 39, 38)]
    per_func = torch.tensor([[0.0, 0.0], [1.0, 0.0], [0.0, 0.0], [0.0, 0.0]])
    references = trainer.teacher.sibling_references("train", [None] * 4, completions, per_func)
    assert references[0] == references[2] == references[3] and references[1] is None  # the lone success
    assert json.loads(references[0]) == [{"name": "add", "arguments": {"a": 40, "b": 92}}]
    prompt = rows[0]["prompt"]
    built = trainer.teacher.prompts([prompt] * 4, references, [[schema]] * 4, trainer.teacher.render_reference)
    text = trainer._tokenizer.decode(built.input_ids[0])
    assert "Reference tool calls for this request" in text and '"a": 40' in text and "<tool_call>" in text
    assert built.has_ground_truth == [True, False, True, True]
