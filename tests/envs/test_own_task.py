"""A task of one's own from Python (issue 22): mistakes that used to pass silently or fail late are refused before the
model loads or reported after the first batch; ground truths given as Python objects; tool rows' teacher hint; tool
rollouts cut by the completion budget counted."""

from __future__ import annotations

import json
import logging

import pytest
from datasets import Dataset, IterableDataset

from gear_trl import GEARConfig, GEARTrainer
from gear_trl.envs import Calculator
from gear_trl.envs.rollout import ran_out_of_budget
from gear_trl.inputs.errors import UserInputError
from gear_trl.teacher.prompts import DEFAULT_TOOL_SOLUTION_TEMPLATE, DEFAULT_TOOL_TEACHER_TEMPLATE
from tests.bank_plugin.bank import BankEnv, balance_reward
from tests.scripted import call_text, scripted_trainer
from tests.utils import make_trainer, math_rows, tiny_args

CALLS = [{"name": "transfer", "arguments": {"source": "alice", "target": "bob", "amount": 5}}]


def config(tmp_path, **overrides):
    return GEARConfig(output_dir=str(tmp_path / "out"), report_to="none", use_cpu=True, **overrides)


# --- ground truth ----------------------------------------------------------------------------------------------------


def test_no_ground_truth_anywhere_is_refused_before_the_model_loads(tmp_path):
    # TRL's own pattern: the environment supplies the prompts, no dataset at all.
    with pytest.raises(UserInputError, match="there is no `train_dataset`.*`credit: none`"):
        GEARTrainer("no/such-model", [balance_reward], args=config(tmp_path, max_steps=1), environment_factory=BankEnv)
    empty = math_rows(4, ground_truths=[None])
    with pytest.raises(UserInputError, match="No row of `train_dataset` has a ground truth in column 'ground_truth'"):
        GEARTrainer("no/such-model", [balance_reward], args=config(tmp_path), train_dataset=empty)


@pytest.mark.slow
def test_no_ground_truth_in_the_first_batch_warns_loudly(tmp_path):
    rows = [{"prompt": [{"role": "user", "content": f"What is {i} + 2?"}], "ground_truth": None} for i in range(8)]
    stream = IterableDataset.from_generator(lambda: iter(rows))
    trainer = make_trainer(tmp_path, dataset=stream, args=tiny_args(tmp_path, max_steps=1))
    with pytest.warns(UserWarning, match="No row of the first training batch has a ground truth"):
        trainer.train()


def test_ground_truth_as_python_objects_is_read_and_rendered_as_its_json_text(tmp_path):
    # Arrow gives every row's `arguments` the union of all rows' keys, filled with None: they must not reach the data.
    other = [{"name": "deposit", "arguments": {"account": "bob", "amount": 3}}]
    rows = Dataset.from_list(
        [
            {"prompt": [{"role": "user", "content": "Pay bob 5"}], "ground_truth": CALLS},
            {"prompt": [{"role": "user", "content": "Give bob 3"}], "ground_truth": other},
        ]
    )
    trainer = make_trainer(tmp_path, dataset=rows, args=tiny_args(tmp_path, credit="gear"))
    assert [json.loads(v) for v in trainer.train_dataset["ground_truth"]] == [CALLS, other]
    as_text = trainer.teacher.render_reference(json.dumps(CALLS))
    assert "<tool_call>" in as_text
    assert trainer.teacher.render_reference(CALLS) == as_text  # a native list
    assert trainer.teacher.render_reference(CALLS[0]) == as_text  # one call as a dict, native
    assert trainer.teacher.render_reference(json.dumps(CALLS[0])) == as_text  # ... or as JSON text
    assert trainer.teacher.render_reference({"alice": 95}) == '{"alice": 95}'  # not a call: JSON, never a Python repr


# --- teacher hint of tool rows ---------------------------------------------------------------------------------------


def test_tool_rows_get_the_tool_call_hint_when_teacher_template_is_left_at_its_default(tmp_path):
    schema = {"type": "function", "function": {"name": "add", "description": "Add.", "parameters": {}}}
    rows = Dataset.from_list(
        [
            {"prompt": [{"role": "user", "content": "3 + 4"}], "ground_truth": "7", "tools": json.dumps([schema])}
            for _ in range(4)
        ]
    )
    trainer = make_trainer(tmp_path, dataset=rows, args=tiny_args(tmp_path, credit="gear"))
    prompt = [{"role": "user", "content": "3 + 4"}]
    with_tools = trainer.teacher.prompts([prompt], ['[{"name": "add", "arguments": {}}]'], [[schema]])
    text = trainer._tokenizer.decode(with_tools.input_ids[0])
    assert "Reference tool calls for this request" in text and "boxed" not in text
    without = trainer.teacher.prompts([prompt], ["7"], [None])
    assert "boxed" in trainer._tokenizer.decode(without.input_ids[0])  # math rows keep the math hint
    # an explicit template is used as written, tools or not
    own = make_trainer(tmp_path, dataset=rows, args=tiny_args(tmp_path, teacher_template="\nHint: {ground_truth}"))
    assert own.teacher.prompts.tool_template is None
    assert trainer.teacher.prompts.tool_template == DEFAULT_TOOL_TEACHER_TEMPLATE


def test_tool_rows_get_the_tool_steps_hint_under_teacher_reference_solution(tmp_path):
    schema = {"type": "function", "function": {"name": "add", "description": "Add.", "parameters": {}}}
    steps = "3 add 4 = 7"
    rows = Dataset.from_list(
        [
            {
                "prompt": [{"role": "user", "content": "3 + 4"}],
                "ground_truth": '[{"name": "add", "arguments": {"a": 3, "b": 4}}]',
                "reference_solution": steps,
                "tools": json.dumps([schema]),
            }
            for _ in range(4)
        ]
    )
    args = tiny_args(tmp_path, credit="gear", teacher_reference="solution")
    trainer = make_trainer(tmp_path, dataset=rows, args=args)
    assert trainer.teacher.prompts.tool_template == DEFAULT_TOOL_SOLUTION_TEMPLATE
    prompt = [{"role": "user", "content": "3 + 4"}]
    calls = rows[0]["ground_truth"]
    with_tools = trainer.teacher.prompts([prompt], [calls], [[schema]], solutions=[steps])
    text = trainer._tokenizer.decode(with_tools.input_ids[0])
    assert "Reference steps for this request:\n3 add 4 = 7" in text and "boxed" not in text
    without = trainer.teacher.prompts([prompt], ["3 + 4 = 7"], [None])
    assert "A reference solution to this problem is" in trainer._tokenizer.decode(without.input_ids[0])


def test_the_teacher_hint_follows_what_the_ground_truth_is_not_whether_the_prompt_has_tools(tmp_path):
    schema = {"type": "function", "function": {"name": "guess", "description": "Guess.", "parameters": {}}}
    prompt = [{"role": "user", "content": "Guess my number"}]
    rows = Dataset.from_list([{"prompt": prompt, "ground_truth": "42", "tools": json.dumps([schema])}] * 4)
    trainer = make_trainer(tmp_path, dataset=rows, args=tiny_args(tmp_path, credit="gear"))
    answer = trainer._tokenizer.decode(trainer.teacher.prompts([prompt], ["42"], [[schema]]).input_ids[0])
    assert "A reference answer to this problem is: 42" in answer and "Reference tool calls" not in answer
    calls = json.dumps([{"name": "guess", "arguments": {"number": 42}}])
    for tools in ([schema], None):  # reference calls get the tool-call hint, tools rendered in the prompt or not
        text = trainer._tokenizer.decode(trainer.teacher.prompts([prompt], [calls], [tools]).input_ids[0])
        assert "Reference tool calls for this request" in text and "boxed" not in text
    # an answer that merely looks like JSON is still an answer
    assert "A reference answer" in trainer._tokenizer.decode(
        trainer.teacher.prompts([prompt], ["[1, 2]"]).input_ids[0]
    )


# --- tool rollouts cut by max_completion_length ----------------------------------------------------------------------


def test_ran_out_of_budget_tells_budget_from_round_limit():
    stop = {0}
    call = {"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "add"}}]}
    result = {"role": "tool", "content": "7"}
    done = {"role": "assistant", "content": "\\boxed{7}"}
    assert not ran_out_of_budget([call, result, done], [5, 0], stop, max_rounds=4)  # finished
    assert ran_out_of_budget([call, result, call], [5, 0], stop, max_rounds=4)  # its call's result did not fit
    assert not ran_out_of_budget([call, result, call], [5, 0], stop, max_rounds=1)  # stopped by the round limit
    assert ran_out_of_budget([call, result, done], [5, 6], stop, max_rounds=4)  # cut mid-turn


@pytest.mark.slow
def test_tool_rollouts_cut_by_the_budget_are_counted_and_warned_about(tmp_path, caplog):
    from transformers import AutoTokenizer

    def script(row, round_index, rollout_index, rank):
        # even rollouts call a tool whose result does not fit in the budget left; odd ones answer at once
        return call_text("add", {"a": 1, "b": 2}) if rollout_index % 2 == 0 else "\\boxed{1}"

    tokenizer = AutoTokenizer.from_pretrained("data/tiny-qwen3-calc")
    call_length = len(tokenizer(call_text("add", {"a": 1, "b": 2}) + tokenizer.eos_token)["input_ids"])
    # The call fits; the call and its tool result do not: TRL drops the result and ends the rollout on its stop token.
    argv = ["--config", "recipes/tiny/config_calc_tools.yaml", "--output_dir", str(tmp_path)]
    argv += ["--max_completion_length", str(call_length + 2), "--per_device_train_batch_size", "8", "--credit", "none"]
    trainer = scripted_trainer(script, argv)
    trainer.model.train()
    with caplog.at_level(logging.WARNING, logger="gear_trl.trainer.gear_trainer"):
        trainer._generate_and_score_completions(next(iter(trainer.get_train_dataloader())))
    metrics = trainer._metrics["train"]
    assert metrics["tools/truncated_frac"] == [0.5]
    assert metrics["completions/clipped_ratio"] == [0.0]  # what TRL's own metric says about the same rollouts
    assert "raise `max_completion_length`" in caplog.text.lower() and "tools/truncated_frac" in caplog.text


def test_calculator_is_still_a_valid_environment():
    from gear_trl.envs.checks import check_environment

    assert check_environment(Calculator) == ["add", "subtract"]


# --- model card ------------------------------------------------------------------------------------------------------


def test_model_card_names_local_paths_as_paths_links_hub_ids_and_states_the_credit(tmp_path):
    trainer = make_trainer(tmp_path, args=tiny_args(tmp_path, credit="gear", onset_threshold=0.3))
    trainer.create_model_card(dataset_name="data/math/gsm8k_style")
    card = (tmp_path / "out" / "README.md").read_text()
    assert "huggingface.co/None" not in card and "[None]" not in card and 'model="None"' not in card
    assert "https://huggingface.co/datasets/data" not in card and "huggingface.co/datasets//" not in card
    assert (
        "fine-tuned version of `data/tiny-qwen3` (a local path) on the `data/math/gsm8k_style` (a local path)" in card
    )
    assert "- credit: `gear`" in card and "- onset_threshold: `0.3`" in card and "- teacher: `live`" in card
    assert "- weight_eps: `" in card and "- teacher_reference: `" in card
    assert "teacher_sync_steps" not in card and "teacher_ema_decay" not in card  # a live teacher has neither
    assert "GEAR" in card and "2605.11853" in card  # TRL's paper line is kept
    trainer.create_model_card(dataset_name="openai/gsm8k")
    card = (tmp_path / "out" / "README.md").read_text()
    assert "[openai/gsm8k](https://huggingface.co/datasets/openai/gsm8k)" in card


@pytest.mark.parametrize(
    ("teacher", "field", "value"), [("periodic", "teacher_sync_steps", 7), ("ema", "teacher_ema_decay", 0.9)]
)
def test_model_card_states_the_teacher_kinds_own_setting(tmp_path, teacher, field, value):
    args = tiny_args(tmp_path, credit="gear", teacher=teacher, **{field: value})
    trainer = make_trainer(tmp_path, args=args)
    trainer.create_model_card()
    card = (tmp_path / "out" / "README.md").read_text()
    assert f"- teacher: `{teacher}`" in card and f"- {field}: `{value}`" in card
