"""Teacher prefix sharing: each distinct teacher prompt runs once, and the teacher's states equal the full pass's."""

from __future__ import annotations

import copy
import json

import pytest
import torch
from datasets import Dataset
from transformers import AutoModelForCausalLM

from gear_trl.teacher.prompts import (
    prefix_sharing_forwards,
    prefix_sharing_plan,
    prefix_sharing_tokens,
    suffix_attention_bias,
)
from tests.utils import TINY, make_trainer, tiny_args

# ---- the plan (pure) ---------------------------------------------------------------------------------------------


def test_plan_groups_rows_by_prompt_in_batch_order_and_bounds_each_unit():
    a, b, c = [1, 2, 3], [4, 5], [6]
    prompts = [a, a, a, b, b, c, a]  # a prompt may come back later in the batch (e.g. groups split by a sampler)
    units = prefix_sharing_plan(prompts, max_rows=4)
    assert units == [[(a, [0, 1, 2, 6])], [(b, [3, 4]), (c, [5])]]
    assert prefix_sharing_forwards(units, 4) == 4  # per unit: one prefix pass, then its rows 4 at a time
    # a prompt with more rows than a unit holds is a unit of its own, its rows split into passes
    units = prefix_sharing_plan([a] * 5 + [b], max_rows=2)
    assert units == [[(a, [0, 1, 2, 3, 4])], [(b, [5])]]
    assert prefix_sharing_forwards(units, 2) == (1 + 3) + (1 + 1)
    with pytest.raises(ValueError, match="max_rows"):
        prefix_sharing_plan(prompts, 0)


def test_sharing_tokens_by_hand():
    a, b = [1, 2, 3, 4, 5], [6, 7]
    units = prefix_sharing_plan([a, a, a, b], max_rows=2)  # [[(a, [0, 1, 2])], [(b, [3])]]
    # full: 4 rows x (longest prompt 5 + completion 10); shared: a's 4 prefix tokens, b's 1, then 4 x 10
    assert prefix_sharing_tokens(units, 10) == (4 * 15, 4 + 1 + 40)
    # one unit with both prompts: b is left-padded to a's length in the prefix pass
    assert prefix_sharing_tokens(prefix_sharing_plan([a, b], max_rows=2), 3) == (2 * 8, 2 * 4 + 2 * 3)
    # a one-token prompt still costs its prefix pass one (masked) token
    assert prefix_sharing_tokens(prefix_sharing_plan([[9], [9]], max_rows=2), 4) == (2 * 5, 1 + 2 * 4)


# ---- the trainer's teacher pass on the tiny model ----------------------------------------------------------------


def both_paths(trainer, batch, prompt_ids):
    """Teacher states from the full path and from the shared path, with the tokens each fed to the backbone."""
    tokens = []
    real = trainer._backbone_states

    def counting(input_ids, *args, **kwargs):
        tokens.append(input_ids.numel())
        return real(input_ids, *args, **kwargs)

    trainer._backbone_states = counting
    try:
        trainer.args.teacher_prefix_sharing = False
        full = trainer.teacher.hidden(batch, prompt_ids)
        full_tokens, tokens[:] = sum(tokens), []
        trainer.args.teacher_prefix_sharing, ratio = True, trainer.args.teacher_prefix_sharing_max_ratio
        trainer.args.teacher_prefix_sharing_max_ratio = 1.0  # share whatever it saves
        shared = trainer.teacher.hidden(batch, prompt_ids)
        assert trainer.teacher.pass_shared
    finally:
        trainer.args.teacher_prefix_sharing_max_ratio = ratio
        del trainer._backbone_states
    return full, shared, full_tokens, sum(tokens)


def assert_same_states(full, shared, batch):
    assert full.shape == shared.shape
    mask = batch["completion_mask"].bool()
    assert mask.any()
    torch.testing.assert_close(shared[mask], full[mask], atol=1e-5, rtol=1e-4)


def generate(trainer, rows):
    torch.manual_seed(0)
    trainer.model.train()
    return trainer._generate_and_score_completions(copy.deepcopy(rows))


def teacher_ids(trainer, rows, tools=None):
    prompts = trainer._rollout.prompts
    truths = [row.get(trainer.args.ground_truth_column) for row in rows]
    return trainer.teacher.prompts(prompts, truths, tools, render=trainer.teacher.render_reference).input_ids


@pytest.mark.slow
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_suffix_attention_bias_by_hand(dtype):
    # Keys of row 0: [pad, prompt, q0, q1]; of row 1: [prompt, prompt, q0, q1]. The queries are the
    # last two keys: q0 sees the prompt and itself, q1 also q0; nobody sees the pad.
    key_mask = torch.tensor([[0, 1, 1, 1], [1, 1, 1, 1]])
    bias = suffix_attention_bias(key_mask, 2, dtype)
    lo = torch.finfo(dtype).min
    expected = torch.tensor(
        [
            [[lo, 0, 0, lo], [lo, 0, 0, 0]],
            [[0, 0, 0, lo], [0, 0, 0, 0]],
        ],
        dtype=dtype,
    )[:, None]
    assert bias.dtype == dtype and bias.shape == (2, 1, 2, 4)
    assert torch.equal(bias, expected)


@pytest.mark.parametrize("attention", ["sdpa", "eager"])  # both take the rollout pass's mask as one 4-D bias
def test_single_turn_prompts_of_different_lengths_with_and_without_ground_truth(tmp_path, attention):
    questions = ["What is 3 + 2?", "A farmer has " + "many sheep and goats, " * 12 + "how many legs?", "2 + 2?"]
    data = Dataset.from_list(
        [
            {"prompt": [{"role": "user", "content": q}], "ground_truth": truth}
            for q, truth in zip(questions * 2, ["5", None, "4", None, "40", "4"], strict=True)
        ]
    )
    args = tiny_args(tmp_path, per_device_train_batch_size=6, num_generations=2, shuffle_dataset=False)
    model = AutoModelForCausalLM.from_pretrained(TINY, attn_implementation=attention)
    trainer = make_trainer(tmp_path, args=args, dataset=data, model=model)
    assert trainer._causal_lm().config._attn_implementation == attention
    rows = next(iter(trainer.get_train_dataloader()))
    batch = generate(trainer, rows)
    prompt_ids = teacher_ids(trainer, rows)
    distinct = {tuple(ids) for ids in prompt_ids}
    assert len(distinct) == 3 and len({len(ids) for ids in prompt_ids}) == 3, "three prompts of different lengths"
    assert any(row["ground_truth"] is None for row in rows) and any(row["ground_truth"] for row in rows)

    full, shared, full_tokens, shared_tokens = both_paths(trainer, batch, prompt_ids)
    assert_same_states(full, shared, batch)
    length = batch["completion_ids"].size(1)
    longest = max(len(ids) for ids in prompt_ids)
    assert full_tokens == len(rows) * (longest + length)
    # one prefix pass over the three prompts (left-padded to the longest), then every rollout's completion alone
    assert shared_tokens == 3 * (longest - 1) + len(rows) * length
    # short prompts save too little: by default (teacher_prefix_sharing_max_ratio 0.5) the batch takes the full pass
    assert shared_tokens > 0.5 * full_tokens
    torch.testing.assert_close(trainer.teacher.hidden(batch, prompt_ids), full)
    assert not trainer.teacher.pass_shared


@pytest.mark.slow
def test_multi_turn_completions_with_tool_results(tmp_path):
    from tests.scripted import call_text, scripted_trainer

    def script(row, round_index, rollout_index, rank):
        calls = json.loads(row["ground_truth"])
        if rollout_index % 2 == 0 and round_index < len(calls):
            return call_text(calls[round_index]["name"], calls[round_index]["arguments"])
        return call_text("ls") if round_index == 0 else "Done."

    argv = ["--config", "recipes/tiny/config_tool_use.yaml", "--output_dir", str(tmp_path), "--credit", "gear"]
    trainer = scripted_trainer(script, argv)
    rows = next(iter(trainer.get_train_dataloader()))
    batch = generate(trainer, rows)
    assert (batch["completion_mask"].bool() & ~batch["tool_mask"].bool()).any(), "tool results in the completions"
    prompt_ids = teacher_ids(trainer, rows, [trainer._prompt_tools(i) for i in range(len(rows))])
    assert min(len(ids) for ids in prompt_ids) > 2 * batch["completion_ids"].size(1), "an agent-sized prompt"
    full, shared, full_tokens, shared_tokens = both_paths(trainer, batch, prompt_ids)
    assert_same_states(full, shared, batch)
    assert shared_tokens < full_tokens / 2
    trainer.teacher.hidden(batch, prompt_ids)
    assert trainer.teacher.pass_shared  # agent prompts: shared under the default ratio


@pytest.mark.slow
def test_base_teacher_under_peft_shares_the_prefix_with_adapters_off(tmp_path):
    from peft import LoraConfig

    peft = LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], init_lora_weights=False)
    args = tiny_args(tmp_path, teacher="base", per_device_train_batch_size=8, num_generations=4)
    trainer = make_trainer(tmp_path, args=args, peft_config=peft)
    rows = next(iter(trainer.get_train_dataloader()))
    batch = generate(trainer, rows)
    prompt_ids = teacher_ids(trainer, rows)
    full, shared, _, _ = both_paths(trainer, batch, prompt_ids)
    assert_same_states(full, shared, batch)
    trainer.args.teacher = "live"
    live = trainer.teacher.hidden(batch, prompt_ids)
    assert not torch.allclose(live, shared, atol=1e-3), "the adapters must be off for the base teacher"
    with trainer.model.disable_adapter():
        expected = trainer.teacher.hidden(batch, prompt_ids)
    assert_same_states(expected, shared, batch)
