"""A recipe that loads bf16 weights runs on CPU in float32, and says so (bench/cpu_bf16.py shows why)."""

import pytest

from gear_trl.train import float32_on_cpu, parse_args

RECIPE = "recipes/Qwen3-4B/gear/config_math.yaml"


def parsed(*overrides):
    return parse_args(["--config", RECIPE, "--use_vllm", "false", "--push_to_hub", "false", *overrides])


@pytest.mark.parametrize("bf16", ["true", "false"])  # `bf16: false` alone leaves bf16 weights: still switched
def test_bf16_weights_on_cpu_are_loaded_in_float32(bf16):
    _, training_args, model_args = parsed("--use_cpu", "true", "--bf16", bf16)
    assert model_args.dtype == "bfloat16" and training_args.device.type == "cpu"
    said = []
    assert float32_on_cpu(model_args, training_args, print_fn=said.append)
    assert model_args.dtype == "float32"
    assert len(said) == 1 and "bfloat16" in said[0] and "--dtype float32" in said[0]


def test_float32_recipes_are_left_alone():
    _, training_args, model_args = parsed("--use_cpu", "true", "--bf16", "false", "--dtype", "float32")
    said = []
    assert not float32_on_cpu(model_args, training_args, print_fn=said.append)
    assert model_args.dtype == "float32" and not said
