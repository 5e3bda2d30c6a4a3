"""Whether tool rounds run in lockstep across ranks is decided from the configuration: only where a round's
generation makes a collective call."""

from dataclasses import fields
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from gear_trl import GEARConfig
from gear_trl.envs.rollout import tool_rounds_need_lockstep

DEFAULTS = {f.name: f.default for f in fields(GEARConfig) if f.name.startswith("vllm_")}


def settings(**overrides):
    return SimpleNamespace(**{**DEFAULTS, **overrides})


@pytest.mark.parametrize(
    ("use_vllm", "overrides", "world_size", "lockstep"),
    [
        (False, {}, 1, False),  # one rank: nothing to match
        (False, {}, 2, True),  # transformers generation: ZeRO-3 gathers parameters in every forward
        (True, {"vllm_mode": "colocate"}, 2, False),  # its own weights, synced once a step
        (True, {"vllm_mode": "colocate", "vllm_tensor_parallel_size": 2}, 4, True),  # gathers prompts in its group
        (True, {"vllm_mode": "colocate", "vllm_enable_sleep_mode": True}, 2, True),  # re-syncs weights every call
        (True, {"vllm_mode": "server"}, 2, True),  # gathers prompts to the main process
    ],
)
def test_lockstep_decision(use_vllm, overrides, world_size, lockstep):
    assert tool_rounds_need_lockstep(settings(**overrides), use_vllm, world_size) is lockstep


def test_shipped_tool_recipes_skip_the_lockstep():
    recipes = sorted(Path(__file__).resolve().parents[1].glob("recipes/Qwen3-*/*/config_tool_use.yaml"))
    assert len(recipes) == 6
    for path in recipes:
        recipe = yaml.safe_load(path.read_text())
        args = settings(**{k: v for k, v in recipe.items() if k.startswith("vllm_")})
        assert not tool_rounds_need_lockstep(args, recipe["use_vllm"], 8), path
        # ... and without vLLM (a CPU or transformers run) they keep it
        assert tool_rounds_need_lockstep(args, False, 8), path
