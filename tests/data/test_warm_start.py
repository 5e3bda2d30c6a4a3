"""The warm-started tiny models the demo, the RL tests and the learning testbeds start from: `data/tiny-qwen3-arith/`
on the arithmetic task (`data/arith/`) and `data/tiny-qwen3-calc/` on the multi-turn calculator task
(`data/calc_tools/`). Each loads offline, stays small, and is partly right on its task."""

import json
import os
import re
from pathlib import Path

import pytest
import torch
from datasets import load_dataset
from transformers import AutoModelForCausalLM, AutoTokenizer

from gear_trl.data.math_tasks import GENERIC, boxed_spans
from gear_trl.rewards.math_rewards import accuracy_reward
from gear_trl.trainer.gear_config import DEFAULT_MATH_TEACHER_TEMPLATE

DATA_DIR = Path(__file__).resolve().parents[2] / "data"
MODEL_DIR = DATA_DIR / "tiny-qwen3-arith"
TASK_DIR = DATA_DIR / "arith"
EXPRESSION = re.compile(r"\d+(?: [+-] \d+)+")


@pytest.fixture(scope="module")
def tokenizer():
    return AutoTokenizer.from_pretrained(MODEL_DIR)


@pytest.fixture(scope="module")
def model():
    return AutoModelForCausalLM.from_pretrained(MODEL_DIR).eval()


@pytest.fixture(scope="module")
def task():
    return load_dataset(str(TASK_DIR))


def test_model_loads_offline_and_is_small(model, tokenizer):
    assert os.environ.get("HF_HUB_OFFLINE") == "1"  # set by conftest: nothing comes from the Hub
    size = sum(f.stat().st_size for f in MODEL_DIR.iterdir() if f.is_file())
    assert size < 20 * 2**20
    assert model.dtype == torch.float32
    assert model.config.vocab_size == len(tokenizer)
    eos = tokenizer.convert_tokens_to_ids("<|im_end|>")
    assert tokenizer.eos_token == "<|im_end|>" and tokenizer.pad_token == "<|endoftext|>"
    assert model.config.eos_token_id == eos and model.generation_config.eos_token_id == eos
    assert tokenizer.chat_template == AutoTokenizer.from_pretrained(DATA_DIR / "tiny-qwen3").chat_template


def test_task_has_generic_train_and_test_splits(task):
    assert set(task) == {"train", "test"}  # sft.jsonl is not picked up as a split
    assert len(task["train"]) >= 1000 and len(task["test"]) >= 100
    for split in task.values():
        assert split.column_names == ["prompt", "ground_truth", "reference_solution"]
        for row in split.select(range(20)):
            assert isinstance(row["prompt"], str) and row["ground_truth"].isdigit()
            assert str(eval(EXPRESSION.search(row["prompt"]).group())) == row["ground_truth"]
            # the worked solution: one correct line per operation, on the previous line's result, then the answer
            *steps, last = row["reference_solution"].split("\n")
            assert last == f"The answer is \\boxed{{{row['ground_truth']}}}."
            left = EXPRESSION.search(row["prompt"]).group().split(" ")[0]
            for step in steps:
                expression, result = step.split(" = ")
                assert expression.split(" ")[0] == left and str(eval(expression)) == result
                left = result
            assert left == row["ground_truth"] and len(steps) == len(re.findall(r" [+-] ", row["prompt"]))
    expressions = {EXPRESSION.search(p).group() for p in task["train"]["prompt"]}
    assert not any(EXPRESSION.search(p).group() in expressions for p in task["test"]["prompt"])


def test_sft_rows_show_the_rl_prompt(task):
    with open(TASK_DIR / "sft.jsonl") as handle:
        rows = [json.loads(line) for line in handle]
    train_prompts = {GENERIC(row)["prompt"][0]["content"]: row["ground_truth"] for row in task["train"]}
    teacher_style = 0
    for row in rows[:200]:
        user, assistant = row["messages"]
        assert (user["role"], assistant["role"]) == ("user", "assistant")
        answer = re.search(r"\\boxed\{(\d+)\}", assistant["content"]).group(1)
        hint = DEFAULT_MATH_TEACHER_TEMPLATE.format(ground_truth=answer)
        if user["content"].endswith(hint):
            teacher_style += 1
            plain = user["content"][: -len(hint)]
        else:
            plain = user["content"]
        if plain in train_prompts:  # the SFT problems start with the train problems, then fresh ones
            assert train_prompts[plain] == answer
    assert 0.15 <= teacher_style / 200 <= 0.45


def test_arith_recipe_gives_the_teacher_the_worked_solution(task):
    # Through the recipe's adapter (`dataset_format: generic`) each row keeps its worked solution, which the teacher
    # prompt of `teacher_reference: solution` shows in place of the bare answer.
    from gear_trl.teacher.prompts import teacher_prompt
    from gear_trl.train import load_splits, parse_args

    script_args, args, _ = parse_args(
        ["--config", "recipes/tiny/config_arith.yaml", "--teacher_reference", "solution", "--max_train_samples", "8"]
    )
    train, _ = load_splits(script_args, args)
    assert len(train) == 8
    for row, raw in zip(train, task["train"].select(range(8)), strict=True):
        assert row["reference_solution"] == raw["reference_solution"] and row["ground_truth"] == raw["ground_truth"]
        teacher = teacher_prompt(row["prompt"], row["ground_truth"], args.teacher_template, row["reference_solution"])
        assert teacher[-1]["content"].endswith(
            f"A reference solution to this problem is:\n{raw['reference_solution']}\n"
            "Use it only to check your own reasoning; solve the problem step by step and give the final answer in "
            "\\boxed{}."
        )


def test_greedy_decoding_is_partly_right(model, tokenizer, task):
    rows = task["test"].select(range(16))
    texts = [tokenizer.apply_chat_template(GENERIC(row)["prompt"], add_generation_prompt=True, tokenize=False)
             for row in rows]  # fmt: skip
    tokenizer.padding_side = "left"
    batch = tokenizer(texts, return_tensors="pt", padding=True, add_special_tokens=False)
    with torch.no_grad():
        output = model.generate(**batch, max_new_tokens=48, do_sample=False)
    completions = tokenizer.batch_decode(output[:, batch["input_ids"].shape[1] :], skip_special_tokens=True)
    rewards = accuracy_reward(completions, rows["ground_truth"])
    assert 1 <= sum(rewards) <= len(rows) - 4, completions  # partly right: room for RL
    assert sum(bool(boxed_spans(c)) for c in completions) >= 12, completions


# --- the calculator warm start -------------------------------------------------------------------------------------

CALC_DIR = DATA_DIR / "tiny-qwen3-calc"


def test_calculator_warm_start_loads_offline_is_small_and_partly_right():
    from gear_trl.evaluation.loops import evaluate_multi_turn, load_eval_split
    from gear_trl.rewards import get_reward_funcs

    size = sum(f.stat().st_size for f in CALC_DIR.iterdir() if f.is_file())
    assert size < 20 * 2**20
    model = AutoModelForCausalLM.from_pretrained(CALC_DIR).eval()
    tokenizer = AutoTokenizer.from_pretrained(CALC_DIR)
    assert model.dtype == torch.float32 and model.generation_config.eos_token_id == tokenizer.eos_token_id
    rows, _ = load_eval_split(str(DATA_DIR / "calc_tools"), "test", dataset_format="tool_use", limit=24)
    report = evaluate_multi_turn(model, tokenizer, rows, get_reward_funcs(["calculator_answer"]), "calculator",
                                 temperature=1.0, num_samples=2, batch_size=24, max_tool_calling_iterations=4,
                                 progress=False)  # fmt: skip
    assert report["tool_calls"] >= 1.0  # it calls the tools ...
    assert 0.1 <= report["accuracy"] <= 0.9, report["accuracy"]  # ... and is partly right: room for RL


def test_stop_and_snapshot_callback_stops_on_the_step_and_saves_every_n(tmp_path):
    from types import SimpleNamespace

    from data.scripts.make_warm_start import StopAndSnapshotCallback

    saved = []
    model = SimpleNamespace(save_pretrained=lambda path: saved.append(path.name))
    callback = StopAndSnapshotCallback(stop_at=75, every=25, snapshot_dir=tmp_path)
    stops = []
    for step in range(1, 101):
        control = SimpleNamespace(should_training_stop=False)
        callback.on_step_end(None, SimpleNamespace(global_step=step), control, model=model)
        stops.append(control.should_training_stop)
    assert saved == ["step-25", "step-50", "step-75", "step-100"]
    assert stops.index(True) == 74  # after step 75, not before
    quiet = StopAndSnapshotCallback(stop_at=None)
    control = SimpleNamespace(should_training_stop=False)
    quiet.on_step_end(None, SimpleNamespace(global_step=25), control, model=model)
    assert not control.should_training_stop and len(saved) == 4
