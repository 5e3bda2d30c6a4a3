"""Evaluation as users run it: the in-process `evaluate`, LoRA adapters, the CLI and its JSON report."""

from __future__ import annotations

import json

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from gear_trl.evaluation.cli import main
from gear_trl.evaluation.generation import is_adapter_dir, load_model, prompt_ids
from gear_trl.evaluation.loops import evaluate, load_eval_split
from gear_trl.rewards import get_reward_funcs
from tests.utils import StandInModel

TINY = "data/tiny-qwen3"
GSM8K = "data/math/gsm8k_style"


@pytest.fixture(scope="module")
def tiny():
    return AutoModelForCausalLM.from_pretrained(TINY), AutoTokenizer.from_pretrained(TINY)


@pytest.fixture(scope="module")
def gsm8k_rows():
    dataset, adapter = load_eval_split(GSM8K, "test", limit=3)
    assert adapter == "gsm8k"
    return dataset


def test_evaluate_reports_accuracy_and_every_sample(tiny, gsm8k_rows):
    model, tokenizer = tiny
    model.train()
    report = evaluate(
        model,
        tokenizer,
        gsm8k_rows,
        get_reward_funcs(["accuracy", "format"]),
        batch_size=2,
        max_new_tokens=8,
        progress=False,
        reward_names=["accuracy", "format"],
    )
    assert report["n"] == 3 and report["num_samples"] == 1 and len(report["per_sample"]) == 3
    assert 0.0 <= report["accuracy"] <= 1.0 and report["mean_reward"] is not None
    assert set(report["rewards"]) == {"accuracy", "format"} and "pass_at_k" not in report
    for index, sample in enumerate(report["per_sample"]):
        assert sample["index"] == index and sample["sample"] == 0
        assert sample["prompt"] == gsm8k_rows[index]["prompt"]
        assert sample["ground_truth"] == gsm8k_rows[index]["ground_truth"]
        assert isinstance(sample["completion"], str) and set(sample["rewards"]) == {"accuracy", "format"}
        assert sample["reward"] == pytest.approx(sum(sample["rewards"].values()))
    assert model.training  # generation ran in eval mode; the caller's mode is restored
    model.eval()


def test_sampling_draws_k_completions_per_prompt_and_reports_pass_at_k(tiny, gsm8k_rows):
    model, tokenizer = tiny
    report = evaluate(
        model,
        tokenizer,
        gsm8k_rows,
        get_reward_funcs(["accuracy"]),
        max_new_tokens=4,
        temperature=1.0,
        num_samples=2,
        progress=False,
    )
    assert len(report["per_sample"]) == 6 and [s["sample"] for s in report["per_sample"][:2]] == [0, 1]
    assert 0.0 <= report["pass_at_k"] <= 1.0
    with pytest.raises(ValueError, match="Greedy"):
        evaluate(model, tokenizer, gsm8k_rows, get_reward_funcs(["accuracy"]), num_samples=2, progress=False)


class Answers(StandInModel):
    """Stands in for a model that answers every prompt with a fixed completion (then stops)."""

    def __init__(self, tokenizer, text):
        self.answer = tokenizer(text)["input_ids"] + [tokenizer.eos_token_id]
        self.generation_config = None
        self.eos = tokenizer.eos_token_id

    def generate(self, input_ids, attention_mask, generation_config):
        answer = torch.tensor(self.answer).repeat(input_ids.size(0), 1)
        padding = torch.full((input_ids.size(0), 3), self.eos)  # what generate leaves after a row has stopped
        return torch.cat([input_ids, answer, padding], dim=1)


def test_a_correct_answer_scores_one_and_stops_at_eos(tiny, gsm8k_rows):
    _, tokenizer = tiny
    truth = gsm8k_rows[0]["ground_truth"]
    report = evaluate(
        Answers(tokenizer, f"So the answer is \\boxed{{{truth}}}."),
        tokenizer,
        gsm8k_rows.select([0]),
        get_reward_funcs(["accuracy"]),
        progress=False,
    )
    sample = report["per_sample"][0]
    assert report["accuracy"] == 1.0 and sample["finished"]
    assert sample["completion"] == f"So the answer is \\boxed{{{truth}}}."


def test_chat_template_kwargs_reach_the_template(tiny, gsm8k_rows):
    _, tokenizer = tiny
    default = tokenizer.decode(prompt_ids(tokenizer, gsm8k_rows[0]))
    no_thinking = tokenizer.decode(prompt_ids(tokenizer, gsm8k_rows[0], {"enable_thinking": False}))
    assert default.endswith("<|im_start|>assistant\n")
    assert no_thinking.endswith("<think>\n\n</think>\n\n")


def test_multi_turn_tool_rows_are_skipped_and_counted(tiny):
    dataset, adapter = load_eval_split("data/bfcl_tiny", "test")
    assert adapter == "tool_use"
    model, tokenizer = tiny
    report = evaluate(model, tokenizer, dataset, get_reward_funcs(["tool_call_accuracy"]), progress=False)
    assert report["n"] == 0 and report["skipped_multi_turn"] == len(dataset) and report["accuracy"] is None


def test_single_turn_tool_rows_are_rendered_with_their_tools_and_scored(tiny):
    dataset, _ = load_eval_split("data/bfcl", "simple", dataset_config="single_turn", limit=2)
    model, tokenizer = tiny
    report = evaluate(
        model, tokenizer, dataset, get_reward_funcs(["tool_call_accuracy"]), max_new_tokens=4, progress=False
    )
    assert report["n"] == 2 and report["accuracy"] in (0.0, 0.5, 1.0)


def test_a_lora_adapter_loads_on_its_base_and_evaluates(tmp_path, gsm8k_rows):
    from peft import LoraConfig, get_peft_model

    torch.manual_seed(0)
    peft_model = get_peft_model(
        AutoModelForCausalLM.from_pretrained(TINY), LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"])
    )
    with torch.no_grad():  # a trained adapter: B is no longer zero
        for name, param in peft_model.named_parameters():
            if "lora_B" in name:
                param.normal_(std=0.5)
    adapter_dir = tmp_path / "adapter"
    peft_model.save_pretrained(adapter_dir)  # no tokenizer saved: it must come from the base
    assert is_adapter_dir(str(adapter_dir)) and not is_adapter_dir(TINY)

    model, tokenizer = load_model(str(adapter_dir))
    base, _ = load_model(TINY)
    ids = torch.tensor([tokenizer("What is 2 + 3?")["input_ids"]])
    with torch.no_grad():
        assert not torch.allclose(model(ids).logits, base(ids).logits, atol=1e-4), "the adapter was not applied"
    report = evaluate(model, tokenizer, gsm8k_rows, get_reward_funcs(["accuracy"]), max_new_tokens=4, progress=False)
    assert report["n"] == 3 and 0.0 <= report["accuracy"] <= 1.0


def test_cli_writes_the_json_report(tmp_path, capsys):
    output = tmp_path / "report.json"
    main(
        [
            "--model",
            TINY,
            "--dataset",
            "data/math/generic",
            "--split",
            "test",
            "--dataset_format",
            "auto",
            "--limit",
            "3",
            "--batch_size",
            "2",
            "--max_new_tokens",
            "6",
            "--enable_thinking",
            "false",
            "--output",
            str(output),
            "--no_progress",
        ]
    )
    report = json.loads(output.read_text())
    for key in ("model", "dataset", "split", "n", "accuracy", "mean_reward", "per_sample", "config"):
        assert key in report, key
    assert (report["model"], report["dataset"], report["split"], report["n"]) == (TINY, "data/math/generic", "test", 3)
    assert len(report["per_sample"]) == 3 and 0.0 <= report["accuracy"] <= 1.0
    assert report["config"]["reward"] == ["accuracy"] and report["config"]["dataset_format"] == "generic"
    assert report["config"]["chat_template_kwargs"] == {"enable_thinking": False}
    assert set(report["per_sample"][0]) >= {"prompt", "completion", "ground_truth", "reward"}
    line = capsys.readouterr().out.strip().splitlines()[-1]
    assert "accuracy" in line and str(output) in line


# --- multi-turn tool use: the tools executed through TRL's own tool loop ------------------------------------------

CALC = "data/tiny-qwen3-calc"


def _calculator_results(completion: list[dict]) -> list[tuple[int, int]]:
    """(the result the calculator returned, the result of the call's own arguments) for every tool call."""
    pairs = []
    for call_message, tool_message in zip(completion[:-1:2], completion[1::2], strict=False):
        (call,) = call_message["tool_calls"]
        a, b = call["function"]["arguments"]["a"], call["function"]["arguments"]["b"]
        expected = a + b if call["function"]["name"] == "add" else a - b
        pairs.append((json.loads(tool_message["content"])["result"], expected))
    return pairs


def test_environment_rolls_out_multi_turn_rows_with_their_tools_executed(tmp_path):
    from gear_trl.rewards.calculator import calculator_answer_reward

    output = tmp_path / "calc.json"
    argv = ["--model", CALC, "--dataset", "data/calc_tools", "--dataset_format", "tool_use", "--environment"]
    argv += ["calculator", "--max_tool_calling_iterations", "4", "--limit", "12", "--batch_size", "5"]
    report = main([*argv, "--output", str(output), "--no_progress"])
    assert json.loads(output.read_text())["accuracy"] == report["accuracy"]
    assert report["config"]["reward"] == ["calculator_answer"] and report["skipped_multi_turn"] == 0
    samples = report["per_sample"]
    assert report["n"] == 12 and [s["index"] for s in samples] == list(range(12))
    dataset, _ = load_eval_split("data/calc_tools", "test", dataset_format="tool_use", limit=12)
    assert [s["prompt"] for s in samples] == list(dataset["prompt"])  # each rollout is filed under its own row
    assert [s["ground_truth"] for s in samples] == list(dataset["ground_truth"])
    # The rewards the trainer's reward function saw are those of the recorded rollouts.
    rescored = calculator_answer_reward([s["completion"] for s in samples], [s["ground_truth"] for s in samples])
    assert rescored == [s["reward"] for s in samples]
    # The calls really ran: every tool message holds what the calculator computes from that call's arguments.
    pairs = [pair for s in samples for pair in _calculator_results(s["completion"])]
    assert len(pairs) == round(report["tool_calls"] * 12) >= 12
    assert all(returned == expected for returned, expected in pairs)
    assert report["accuracy"] > 0 and report["finished_frac"] == 1.0


def test_sampled_multi_turn_evaluation_draws_k_rollouts_per_row(tmp_path):
    from gear_trl.evaluation.loops import evaluate_multi_turn

    model, tokenizer = load_model(CALC, dtype="float32")
    dataset, _ = load_eval_split("data/calc_tools", "test", dataset_format="tool_use", limit=6)
    assert model.config.use_cache and not model.training
    reward = get_reward_funcs(["calculator_answer"])
    report = evaluate_multi_turn(model, tokenizer, dataset, reward, "calculator", temperature=1.0, num_samples=3,
                                 batch_size=4, max_tool_calling_iterations=4, progress=False)  # fmt: skip
    samples = report["per_sample"]
    assert [(s["index"], s["sample"]) for s in samples] == [(i, j) for i in range(6) for j in range(3)]
    best = [max(s["reward"] for s in samples if s["index"] == i) for i in range(6)]
    assert report["pass_at_k"] == pytest.approx(sum(best) / 6) and report["pass_at_k"] >= report["accuracy"]
    assert model.config.use_cache and not model.training  # the model comes back as it went in
    with pytest.raises(ValueError, match="temperature"):
        evaluate_multi_turn(model, tokenizer, dataset, reward, "calculator", temperature=0.0, num_samples=2)


def test_executing_rewards_need_an_environment_and_the_environment_must_exist():
    argv = ["--model", TINY, "--dataset", "data/calc_tools", "--dataset_format", "tool_use", "--limit", "1"]
    with pytest.raises(ValueError, match="--environment"):
        main([*argv, "--reward", "calculator_answer"])
    with pytest.raises(ValueError, match="Unknown environment 'abacus'"):
        main([*argv, "--environment", "abacus"])
