from pathlib import Path

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer
from trl.chat_template_utils import (
    add_response_schema,
    get_training_chat_template,
    parse_response,
    qwen3_chat_template,
    supports_tool_calling,
)

from gear_trl.testing.tiny import ADDED_TOKENS, SPECIAL_TOKENS, build_tiny_qwen3, train_tokenizer

TINY_DIR = Path(__file__).resolve().parents[2] / "data" / "tiny-qwen3"
SMALLER = {"hidden_size": 32, "intermediate_size": 48, "num_hidden_layers": 1, "num_attention_heads": 2,
           "num_key_value_heads": 1, "head_dim": 16}  # fmt: skip
PROMPT = [{"role": "user", "content": "What is 2 + 3?"}]


@pytest.fixture(scope="module")
def tokenizer():
    return AutoTokenizer.from_pretrained(TINY_DIR)


def test_committed_tokenizer_has_qwen3_tokens_and_template(tokenizer):
    assert tokenizer.chat_template == qwen3_chat_template
    assert 2000 <= len(tokenizer) <= 4000
    ids = tokenizer.convert_tokens_to_ids(SPECIAL_TOKENS + ADDED_TOKENS)
    assert ids == list(range(len(tokenizer) - 9, len(tokenizer)))  # Qwen3's order, at the end of the vocabulary
    assert (tokenizer.pad_token, tokenizer.eos_token, tokenizer.bos_token) == ("<|endoftext|>", "<|im_end|>", None)

    text = '<|im_start|>assistant\n<think>\nx\n</think>\n<tool_call>\n{"a": 1}\n</tool_call><|im_end|>'
    encoded = tokenizer(text)["input_ids"]
    for token in SPECIAL_TOKENS[1:] + ["<think>", "</think>", "<tool_call>", "</tool_call>"]:  # one id each
        assert tokenizer.convert_tokens_to_ids(token) in encoded
    assert tokenizer.decode(encoded) == text
    # Only the control tokens are special: the markers survive skip_special_tokens, as TRL's parsing needs.
    assert tokenizer.decode(encoded, skip_special_tokens=True) == text.replace("<|im_start|>", "").replace(
        "<|im_end|>", ""
    )


def test_committed_tokenizer_round_trips_text(tokenizer):
    text = "Solve $3x + 5 = 20$: x = \\boxed{5}. Caf\u00e9, 1,234 km \u2014 ok? \U0001f600\n\ttabs"
    assert tokenizer.decode(tokenizer(text)["input_ids"]) == text


def test_tool_calls_parse_with_trl_response_schema(tokenizer):
    assert supports_tool_calling(tokenizer)
    get_training_chat_template(tokenizer)  # what TRL swaps in for multi-turn tool use; raises if unsupported
    add_response_schema(tokenizer)
    prefix = tokenizer.apply_chat_template(PROMPT, add_generation_prompt=True, tokenize=True, return_dict=False)

    completion = '<tool_call>\n{"name": "f", "arguments": {"x": 1}}\n</tool_call><|im_end|>'
    parsed = parse_response(tokenizer, tokenizer(completion)["input_ids"], prefix=prefix)
    assert parsed["tool_calls"] == [{"type": "function", "function": {"name": "f", "arguments": {"x": 1}}}]
    assert parsed["content"] == ""

    completion = "<think>\nadd them\n</think>\n\nThe sum is \\boxed{5}.<|im_end|>"
    parsed = parse_response(tokenizer, tokenizer(completion)["input_ids"], prefix=prefix)
    assert parsed["content"] == "The sum is \\boxed{5}." and parsed["reasoning_content"] == "add them"


def test_build_smaller_model_saves_loads_and_generates(tokenizer, tmp_path):
    model = build_tiny_qwen3(tokenizer, **SMALLER)
    assert model.config.vocab_size == len(tokenizer) and model.config.hidden_size == 32
    assert torch.equal(model.get_input_embeddings().weight, build_tiny_qwen3(tokenizer, **SMALLER).lm_head.weight)
    model.save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)

    loaded = AutoModelForCausalLM.from_pretrained(tmp_path)
    assert loaded.dtype == torch.float32
    assert loaded.generation_config.eos_token_id == tokenizer.convert_tokens_to_ids("<|im_end|>")
    assert loaded.generation_config.pad_token_id == tokenizer.convert_tokens_to_ids("<|endoftext|>")
    inputs = tokenizer.apply_chat_template(PROMPT, add_generation_prompt=True, return_tensors="pt", return_dict=True)
    assert tokenizer.decode(inputs["input_ids"][0]).endswith("<|im_start|>assistant\n")
    output = loaded.generate(**inputs, max_new_tokens=5, do_sample=False)
    assert output.shape[1] > inputs["input_ids"].shape[1]


def test_train_tokenizer_on_small_text():
    small = train_tokenizer(["What is 12 + 30? The answer is \\boxed{42}.", "Hello there, general."] * 5, 300)
    assert len(small) <= 300
    assert small.eos_token == "<|im_end|>" and small.pad_token == "<|endoftext|>"
    assert small.convert_tokens_to_ids("<think>") == len(small) - 2
    assert small.apply_chat_template(PROMPT, tokenize=False, add_generation_prompt=True).startswith("<|im_start|>")


def test_committed_model_is_small_and_loads_offline(tokenizer):
    assert sum(f.stat().st_size for f in TINY_DIR.iterdir()) < 5 * 2**20
    model = AutoModelForCausalLM.from_pretrained(TINY_DIR)
    assert model.config.model_type == "qwen3" and model.config.vocab_size == len(tokenizer)
    assert model.config.tie_word_embeddings and model.dtype == torch.float32
    inputs = tokenizer.apply_chat_template(PROMPT, add_generation_prompt=True, return_tensors="pt", return_dict=True)
    torch.manual_seed(0)
    output = model.generate(**inputs, max_new_tokens=8, do_sample=True)
    assert output.shape[0] == 1 and output.shape[1] > inputs["input_ids"].shape[1]
