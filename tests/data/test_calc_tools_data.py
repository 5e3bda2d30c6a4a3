"""The multi-turn calculator task (`data/calc_tools/`): its environment, reward, data, SFT conversations and recipe.

Fast checks (no model is trained); the last test drives the recipe's trainer with scripted tool calls (slow)."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path

import pytest
import torch
import yaml
from datasets import load_dataset
from transformers import AutoTokenizer

from gear_trl.data import prepare_dataset
from gear_trl.envs import Calculator, get_environment_factory
from gear_trl.rewards import get_reward_funcs
from gear_trl.rewards.calculator import calculator_answer_reward, expected_answer
from gear_trl.teacher.prompts import teacher_prompt, tool_calls_text, training_chat_template
from tests.utils import assistant_loss_text, load_file

REPO = Path(__file__).resolve().parents[2]
TASK_DIR = REPO / "data" / "calc_tools"
RECIPE = REPO / "recipes" / "tiny" / "config_calc_tools.yaml"
EXPRESSION = re.compile(r"\d+(?: [+-] \d+)+")


def _load_script():
    return load_file(REPO / "data" / "scripts" / "make_calc_tools_data.py", "make_calc_tools_data")


script = _load_script()


@pytest.fixture(scope="module")
def task():
    return load_dataset(str(TASK_DIR))


@pytest.fixture(scope="module")
def sft(tmp_path_factory):
    """The SFT conversations, regenerated with the script's defaults (`sft.jsonl`, 9 MB, is not committed); the
    regenerated train and test splits must be the committed ones."""
    out = tmp_path_factory.mktemp("calc_tools")
    script.main(["--out-dir", str(out)])
    for name in ("train.jsonl", "test.jsonl"):
        assert (out / name).read_bytes() == (TASK_DIR / name).read_bytes(), name
    with open(out / "sft.jsonl") as handle:
        return [json.loads(line) for line in handle]


@pytest.fixture(scope="module")
def tokenizer():
    return AutoTokenizer.from_pretrained(REPO / "data" / "tiny-qwen3")


def reference_completion(row: dict) -> list[dict]:
    """The reference rollout as TRL's reward functions get it (assistant and tool messages after the prompt)."""
    return script.conversation(json.loads(row["ground_truth"]))


def calls_of(row: dict) -> list[dict]:
    return json.loads(row["ground_truth"])


# --- environment ---------------------------------------------------------------------------------------------------


def test_calculator_is_registered_and_exposes_two_tools():
    assert get_environment_factory("calculator") is Calculator
    env = Calculator()
    env.reset(initial_config="", involved_classes='["Calculator"]')
    assert json.loads(env.add(a=84, b=17)) == {"result": 101}
    assert json.loads(env.subtract(a=101, b=9)) == {"result": 92}
    assert env.state() == {"results": [101, 92]} and env.last_result() == 92
    # errors are text for the model and leave the state alone
    for bad in (env.add(a=1.5, b=1), env.add(a="3", b=1), env.add(a=1), env.execute({"name": "mul", "arguments": {}})):
        assert bad.startswith("Error")
    assert env.state() == {"results": [101, 92]}
    env.reset()
    assert env.state() == {"results": []} and env.last_result() is None


def test_state_key_follows_the_values_computed():
    def key_after(calls):
        env = Calculator()
        env.reset()
        for call in calls:
            env.execute(call)
        return env.state_key()

    add = {"name": "add", "arguments": {"a": 84, "b": 17}}
    sub = {"name": "subtract", "arguments": {"a": 101, "b": 9}}
    wrong = {"name": "subtract", "arguments": {"a": 84, "b": 17}}
    assert key_after([add]) == key_after([add])  # identical prefixes share an anchor state
    assert key_after([add, sub]) == key_after([add, sub])
    assert key_after([add]) != key_after([wrong])  # a different call moves the state
    assert key_after([add, sub]) != key_after([add])
    assert key_after([]) != key_after([add])
    assert key_after([add, {"name": "add", "arguments": {"a": "x"}}]) == key_after([add])  # a failed call: no move


# --- data ----------------------------------------------------------------------------------------------------------


def test_rows_have_the_tool_use_schema(task):
    assert set(task) == {"train", "test"}  # sft.jsonl is not picked up as a split
    assert 1000 <= len(task["train"]) <= 2000 and len(task["test"]) >= 150
    tools = json.loads(task["train"][0]["tools"])
    assert [tool["function"]["name"] for tool in tools] == ["add", "subtract"]
    assert tools == script.calculator_tools()  # exactly what TRL derives from the environment's methods
    for split in task.values():
        assert split.column_names == [
            "id", "category", "prompt", "tools", "ground_truth", "answer", "initial_config", "involved_classes",
        ]  # fmt: skip
    prepared = prepare_dataset(task["test"].select(range(8)), adapter="tool_use")
    for column in ("prompt", "tools", "ground_truth", "initial_config", "involved_classes"):
        assert column in prepared.column_names
    assert prepared[0]["prompt"][0]["role"] == "user" and "\\boxed{}" in prepared[0]["prompt"][0]["content"]


def test_reference_chains_compute_the_answer_and_score_1(task):
    rows = [*task["train"].select(range(100)), *task["test"]]
    for row in rows:
        expression = EXPRESSION.search(row["prompt"][0]["content"]).group()
        assert expected_answer(row["ground_truth"]) == eval(expression) == int(row["answer"])
        calls = calls_of(row)
        assert len(calls) == expression.count("+") + expression.count("-")
        assert [c["name"] for c in calls] == [
            "add" if op == "+" else "subtract" for op in re.findall(r"[+-]", expression)
        ]
    completions = [reference_completion(row) for row in rows]
    truths = [row["ground_truth"] for row in rows]
    assert calculator_answer_reward(completions, truths) == [1.0] * len(rows)  # replayed calls
    environments = []
    for row in rows:  # the live environments, as TRL passes them after running the model's calls
        env = Calculator()
        env.reset(**row)
        for call in calls_of(row):
            env.execute(call)
        environments.append(env)
    assert calculator_answer_reward(completions, truths, environments=environments) == [1.0] * len(rows)
    (reward,) = get_reward_funcs(["calculator_answer"])
    assert reward(completions[:3], ground_truth=truths[:3]) == [1.0] * 3


def test_a_wrong_call_anywhere_spoils_the_answer(task):
    row = next(r for r in task["test"] if len(calls_of(r)) == 3)
    calls = calls_of(row)
    truth = row["ground_truth"]

    def score(completion):
        return calculator_answer_reward([completion], [truth])[0]

    def chained(calls):  # each call after the first on the previous call's result, as a model reading them does
        calls, env = copy.deepcopy(calls), Calculator()
        for call in calls:
            if env.last_result() is not None:
                call["arguments"]["a"] = env.last_result()
            env.execute(call)
        return calls

    assert chained(calls) == calls and score(script.conversation(calls)) == 1.0
    for step in range(len(calls)):
        miscopied = copy.deepcopy(calls)
        miscopied[step]["arguments"]["b"] += 1
        assert score(script.conversation(chained(miscopied))) == 0.0
        assert score(script.conversation(miscopied)) == 0.0  # even when the later calls use the reference numbers
        wrong_tool = copy.deepcopy(calls)
        wrong_tool[step]["name"] = "add" if calls[step]["name"] == "subtract" else "subtract"
        assert score(script.conversation(chained(wrong_tool))) == 0.0
    assert score(script.conversation(calls[:-1])) == 0.0  # stops one call early
    assert score(script.conversation([*calls, {"name": "add", "arguments": {"a": 1, "b": 0}}])) == 0.0  # extra
    retried = script.conversation(calls)  # a failed call (an error text) changes nothing and costs nothing
    failed = {"name": "add", "arguments": {"a": "one", "b": 2}}
    retried[:0] = [
        {"role": "assistant", "content": "", "tool_calls": [{"type": "function", "function": failed}]},
        {"role": "tool", "name": "add", "content": Calculator().execute(failed)},
    ]
    assert retried[1]["content"].startswith("Error") and score(retried) == 1.0
    answer_only = [{"role": "assistant", "content": f"The answer is \\boxed{{{row['answer']}}}."}]
    assert score(answer_only) == 0.0  # the right answer without the tools
    wrong_box = script.conversation(calls)
    wrong_box[-1] = {"role": "assistant", "content": f"The answer is \\boxed{{{int(row['answer']) + 1}}}."}
    assert score(wrong_box) == 0.0
    assert calculator_answer_reward(["garbage", [{"role": "assistant"}]], [truth, ""]) == [0.0, None]


def test_train_test_and_sft_problems_are_disjoint(task, sft):
    def expressions(prompts):
        return {EXPRESSION.search(p[0]["content"]).group() for p in prompts}

    test = expressions(task["test"]["prompt"])
    train = expressions(task["train"]["prompt"])
    assert len(test) == len(task["test"]) and len(train) == len(task["train"])
    assert not test & train
    assert not test & expressions([row["messages"] for row in sft])
    assert train <= expressions([row["messages"] for row in sft])


def test_generation_is_deterministic_and_the_test_split_does_not_depend_on_sizes(tmp_path):
    script.main(["--out-dir", str(tmp_path / "a"), "--n-train", "20", "--n-sft", "30"])
    script.main(["--out-dir", str(tmp_path / "b"), "--n-train", "20", "--n-sft", "30"])
    for name in ("train.jsonl", "test.jsonl", "sft.jsonl"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()
    assert (tmp_path / "a" / "test.jsonl").read_bytes() == (TASK_DIR / "test.jsonl").read_bytes()


# --- SFT conversations ---------------------------------------------------------------------------------------------


def test_sft_rows_are_tool_conversations_some_with_the_teacher_prompt(sft, tokenizer, task):
    teacher_rows = [row for row in sft if "Reference tool calls" in row["messages"][0]["content"]]
    assert 0.25 <= len(teacher_rows) / len(sft) <= 0.35
    template = training_chat_template(tokenizer)
    prompts = {row["prompt"][0]["content"]: row for row in task["train"]}
    checked = 0
    for row in sft[:200]:
        messages = row["messages"]
        assert json.loads(row["tools"]) == script.calculator_tools()
        assert [m["role"] for m in messages[1:]] == ["assistant", "tool"] * ((len(messages) - 2) // 2) + ["assistant"]
        for call_message, tool_message in zip(messages[1:-1:2], messages[2:-1:2], strict=True):
            (tool_call,) = call_message["tool_calls"]
            assert call_message["content"] == "" and tool_call["type"] == "function"
            assert tool_message["name"] == tool_call["function"]["name"]
            assert set(json.loads(tool_message["content"])) == {"result"}
        assert re.fullmatch(r"The answer is \\boxed\{\d+\}\.", messages[-1]["content"])
        question = messages[0]["content"].split("\n\nReference tool calls")[0]
        if question in prompts:  # a train problem: the user message is the RL prompt (teacher prompt) exactly
            train_row = prompts[question]
            expected = train_row["prompt"]
            if "Reference tool calls" in messages[0]["content"]:
                reference = tool_calls_text(tokenizer, calls_of(train_row), template)
                expected = teacher_prompt(expected, reference, script.TEACHER_TEMPLATE)
            assert messages[:1] == expected
            assert messages[1:] == reference_completion(train_row)
            checked += 1
    assert checked > 20


def test_the_recipe_uses_the_task_environment_reward_and_teacher_template():
    recipe = yaml.safe_load(RECIPE.read_text())
    assert recipe["teacher_template"] == script.TEACHER_TEMPLATE
    assert recipe["environment"] == "calculator" and recipe["reward_funcs"] == ["calculator_answer"]
    assert recipe["dataset_name"] == "data/calc_tools" and recipe["dataset_format"] == "tool_use"
    assert recipe["credit"] == "gear-gigpo" and recipe["num_generations"] == 8


def test_the_learning_benchmark_scores_the_tools_task_with_multi_turn_rollouts(monkeypatch):
    bench = load_file(REPO / "bench" / "learning.py", "gear_bench_learning_tools")
    tools = bench.TASKS["tools"]
    assert tools["recipe"] == str(RECIPE.relative_to(REPO))
    assert tools["modes"] == [
        "none",
        "gear",
        "gigpo",
        "gear+gigpo",
    ]  # the committed runs' arm labels (run under `gear-gigpo`, `bench.harness.runs.credit_of`)
    recipe = yaml.safe_load(RECIPE.read_text())
    assert tools["eval"]["dataset"] == recipe["dataset_name"] and tools["eval"]["split"] == "test"
    assert tools["eval"]["environment"] == recipe["environment"]
    assert tools["eval"]["max_tool_calling_iterations"] == recipe["max_tool_calling_iterations"]
    assert tools["eval"]["max_new_tokens"] == recipe["max_completion_length"]
    seen = []

    def fake_main(argv):
        seen.append(argv)
        return {"n": 3, "accuracy": 0.5}

    import gear_trl.evaluate

    monkeypatch.setattr(gear_trl.evaluate, "main", fake_main)
    bench.evaluate_model("m", tools["eval"], temperature=1.0, num_samples=2, limit=3, output="o.json")
    (argv,) = seen
    assert argv[argv.index("--environment") + 1] == "calculator"
    assert argv[argv.index("--max_tool_calling_iterations") + 1] == "4"
    assert argv[argv.index("--dataset_format") + 1] == "tool_use" and argv[argv.index("--limit") + 1] == "3"


def test_sft_row_renders_tool_calls_and_masks_only_assistant_turns(sft, tokenizer):
    row = next(r for r in sft if len(r["messages"]) == 6)
    ids, mask, masked, expected = assistant_loss_text(tokenizer, row)
    assert masked == expected  # the loss covers the assistant turns, tool calls included, and nothing else
    tool_call, tool_response = tokenizer.convert_tokens_to_ids(["<tool_call>", "<tool_response>"])
    assert sum(m for t, m in zip(ids, mask, strict=True) if t == tool_call) == 2
    assert ids.count(tool_response) == 2 and not any(m for t, m in zip(ids, mask, strict=True) if t == tool_response)


# --- the recipe's trainer, with scripted tool calls ----------------------------------------------------------------


@pytest.mark.slow
def test_recipe_trainer_runs_the_calculator_and_shares_anchor_states(tmp_path):
    """GEARTrainer on the recipe (random tiny model, scripted completions): the calls run in the real Calculator,
    the reference chain scores 1 and a wrong call 0, and rollouts with the same first result share a GiGPO anchor."""
    from gear_trl.envs.rollout import step_anchors
    from tests.scripted import call_text, scripted_trainer
    from tests.utils import weighted

    def script(row, round_index, rollout_index, rank):
        calls = copy.deepcopy(calls_of(row))
        if rollout_index % 4 == 2 and len(calls) > 1:
            calls[1]["arguments"]["b"] += 1  # right first call, wrong second one
        if rollout_index % 4 == 3:
            calls[0]["arguments"]["b"] += 1  # wrong from the start
        if round_index < len(calls):
            return call_text(calls[round_index]["name"], calls[round_index]["arguments"])
        env = Calculator()
        for call in calls:
            env.execute(call)
        return f"The answer is \\boxed{{{env.last_result()}}}."

    overrides = ["--model_name_or_path", "data/tiny-qwen3", "--output_dir", str(tmp_path), "--max_steps", "1"]
    overrides += ["--per_device_train_batch_size", "8", "--num_generations", "4", "--max_completion_length", "256"]
    overrides += ["--save_strategy", "no", "--max_train_samples", "16"]
    trainer = scripted_trainer(script, ["--config", str(RECIPE), *overrides])
    trainer.model.train()
    rows = next(iter(trainer.get_train_dataloader()))
    batch = weighted(trainer, trainer._generate_and_score_completions(rows))
    record = trainer._rollout
    rewards = record.rewards_per_func[:, 0].tolist()
    for i, row in enumerate(rows):
        multi = len(calls_of(row)) > 1
        assert rewards[i] == {0: 1.0, 1: 1.0, 2: 0.0 if multi else 1.0, 3: 0.0}[i % 4], (i, rewards)
    for i in range(0, len(rows), 4):
        anchors = [
            step_anchors(record.prompts[j], record.completions[j], record.state_history[j]) for j in (i, i + 1, i + 3)
        ]
        assert anchors[0] == anchors[1]  # identical rollouts: identical anchors at every turn
        assert anchors[0][0] == anchors[2][0] and anchors[0][1] != anchors[2][1]  # same prompt, different first result
        if len(calls_of(rows[i])) > 1:  # right first call, wrong second one: shares the anchor after the first call
            second = step_anchors(record.prompts[i + 2], record.completions[i + 2], record.state_history[i + 2])
            assert second[:2] == anchors[0][:2] and second[2] != anchors[0][2]
    assert torch.isfinite(batch["advantages"]).all() and (batch["advantages"] != 0).any()
    assert trainer._metrics["train"]["tools/turns_per_rollout"][-1] > 1.5
