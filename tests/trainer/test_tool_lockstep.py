"""Whether tool rounds run in lockstep across ranks is decided from the configuration: only where a round's
generation makes a collective call, and only across the ranks that call together."""

from dataclasses import fields
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
import yaml

from gear_trl import GEARConfig
from gear_trl.envs import rollout
from gear_trl.envs.rollout import LOCKSTEP_TENSOR_PARALLEL, LOCKSTEP_WORLD, ToolRolloutMixin, tool_rounds_need_lockstep

DEFAULTS = {f.name: f.default for f in fields(GEARConfig) if f.name.startswith("vllm_")}


def settings(**overrides):
    return SimpleNamespace(**{**DEFAULTS, **overrides})


WORLD, TP = LOCKSTEP_WORLD, LOCKSTEP_TENSOR_PARALLEL
COLOCATE = {"vllm_mode": "colocate"}
SLEEP = {**COLOCATE, "vllm_enable_sleep_mode": True}
TP2 = {**COLOCATE, "vllm_tensor_parallel_size": 2}


@pytest.mark.parametrize(
    ("use_vllm", "overrides", "world_size", "sharded", "peft", "scope"),
    [
        (False, {}, 1, True, False, None),  # one rank: nothing to match
        (False, {}, 2, True, False, WORLD),  # transformers generation: ZeRO-3 gathers parameters in every forward
        (True, COLOCATE, 2, True, False, None),  # its own weights, synced once a step
        (True, SLEEP, 2, True, False, WORLD),  # re-syncs weights every call: a gather under ZeRO-3 / FSDP
        (True, SLEEP, 2, False, False, None),  # ... but not under DDP or ZeRO-2, where every rank holds them whole
        (True, SLEEP, 2, False, True, None),  # PEFT merges its adapters in place, no gather without sharding
        (True, TP2, 4, False, False, TP),  # gathers prompts within each tensor-parallel group only
        (True, TP2, 4, True, False, TP),  # ... whatever the engine: the weights sync once a step
        (True, TP2, 4, False, True, WORLD),  # PEFT: TRL puts a barrier on every rank before each generation
        (True, {**TP2, "vllm_enable_sleep_mode": True}, 4, True, False, WORLD),  # sleep-mode gathers on every rank
        (True, {**TP2, "vllm_enable_sleep_mode": True}, 4, False, False, TP),
        (True, {"vllm_mode": "server"}, 2, False, False, WORLD),  # gathers prompts to the main process
    ],
)
def test_lockstep_decision(use_vllm, overrides, world_size, sharded, peft, scope):
    args = settings(**overrides)
    assert tool_rounds_need_lockstep(args, use_vllm, world_size, sharded=sharded, peft=peft) == scope


class _TrlToolLoop:
    """TRL's `_tool_call_loop` as the mixin sees it: one rollout, answered without a tool call."""

    def _tool_call_loop(self, prompts, prompt_ids, completion_ids, completions, logprobs, images, fields):
        self.during = (self._tool_rounds_in_lockstep, self._lockstep_group)
        return None, [[{"role": "assistant", "content": "4"}]], [[7, 0]], None, None, None

    def _generate_single_turn(self, *args, **kwargs):
        raise AssertionError("a rank that is done generates nothing when no other rank polls")


class Probe(ToolRolloutMixin, _TrlToolLoop):
    eos_token_ids = (0,)
    _tokenizer = SimpleNamespace(pad_token_id=0)
    max_tool_calling_iterations = 2

    def __init__(self, zero3: bool, **vllm):
        self.args = settings(**vllm)
        self.use_vllm = bool(vllm)
        self._dist = SimpleNamespace(is_zero3=zero3, is_fsdp=False)
        self.model = torch.nn.Linear(2, 2)
        self.vllm_generation = SimpleNamespace(tp_group="the tensor-parallel group")
        self.polls = []

    def _any_rank_generating(self, generating):
        self.polls.append((generating, self._lockstep_group))
        return False


@pytest.mark.parametrize(
    ("zero3", "vllm", "during", "polls"),
    [
        (False, SLEEP, (False, None), []),  # sleep mode under DDP / ZeRO-2: no poll
        (True, SLEEP, (True, None), [(False, None)]),  # ... under ZeRO-3: every rank polls
        (False, TP2, (True, "the tensor-parallel group"), [(False, "the tensor-parallel group")]),
    ],
)
def test_tool_loop_polls_only_the_ranks_that_generate_together(monkeypatch, zero3, vllm, during, polls):
    monkeypatch.setattr(rollout.dist, "is_initialized", lambda: True)
    monkeypatch.setattr(rollout.dist, "get_world_size", lambda group=None: 4)
    probe = Probe(zero3, **vllm)
    probe._tool_call_loop(["p"], [[1, 2]], None, None, None, None, {})
    assert probe.during == during
    assert probe.polls == polls
    assert (probe._tool_rounds_in_lockstep, probe._lockstep_group) == (False, None)  # reset after the loop


def test_shipped_tool_recipes_skip_the_lockstep():
    recipes = sorted(Path(__file__).resolve().parents[2].glob("recipes/Qwen3-*/*/config_tool_use.yaml"))
    assert len(recipes) == 6
    for path in recipes:
        recipe = yaml.safe_load(path.read_text())
        args = settings(**{k: v for k, v in recipe.items() if k.startswith("vllm_")})
        assert tool_rounds_need_lockstep(args, recipe["use_vllm"], 8) is None, path
        # ... and without vLLM (a CPU or transformers run) they keep it
        assert tool_rounds_need_lockstep(args, False, 8) == LOCKSTEP_WORLD, path
