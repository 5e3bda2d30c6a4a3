"""The recipes' GPU path on CPU: TRL's colocated vLLM generation (by the stand-in engine of
`gear_trl.testing.vllm_standin`) with its importance-sampling correction on, where GEAR reads the student's states
from TRL's no-grad pass and runs its divergence as a pass of its own. Each batch's credit must equal the credit the
loss path (GEAR's divergence fused into TRL's LM head, every other CPU test's path) gives the same batch."""

from __future__ import annotations

import json
import math

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from gear_trl.testing.vllm_standin import DEFAULT_LOGPROB_OFFSET, SamplingParams, colocated_vllm_standin
from tests.standin_credit import VLLM_ARGS, standin_trainer, tool_script

TINY = "data/tiny-qwen3"


def sampling(**overrides):
    base = {"n": 1, "temperature": 0.7, "top_p": 1.0, "top_k": 0, "min_p": 0.0, "repetition_penalty": 1.0}
    return SamplingParams(**{**base, "max_tokens": 6, "logprobs": 0, **overrides})


def test_standin_reports_the_models_log_probabilities_less_the_offset():
    from trl.generation import vllm_generation

    with colocated_vllm_standin(logprob_offset=0.25) as engines:
        llm = vllm_generation.LLM(model=TINY, seed=3)
        prompt = [5, 17, 99, 4]
        (out,) = llm.generate([{"prompt_token_ids": prompt}], sampling_params=sampling())
    assert engines == [llm]
    tokens = out.outputs[0].token_ids
    assert out.prompt_token_ids == prompt and 1 <= len(tokens) <= 6
    model = AutoModelForCausalLM.from_pretrained(TINY, dtype=torch.float32)
    with torch.no_grad():
        logits = model(torch.tensor([prompt + tokens])).logits[0, len(prompt) - 1 : -1] / 0.7
    expected = torch.log_softmax(logits, dim=-1).gather(-1, torch.tensor(tokens)[:, None]).squeeze(-1) - 0.25
    reported = [next(iter(lp.values())).logprob for lp in out.outputs[0].logprobs]
    assert [next(iter(lp)) for lp in out.outputs[0].logprobs] == tokens
    torch.testing.assert_close(torch.tensor(reported), expected, atol=1e-5, rtol=0)
    # vLLM's module is restored on exit
    assert not hasattr(vllm_generation, "LLM") or vllm_generation.LLM is not engines[0]


def test_standin_takes_synced_weights_and_refuses_what_it_cannot_sample():
    with colocated_vllm_standin() as _:
        from trl.generation import vllm_generation

        llm = vllm_generation.LLM(model=TINY)
        runner = llm.llm_engine.model_executor.driver_worker.model_runner
        norm = torch.full_like(llm.hf_model.model.norm.weight, 0.5)
        runner.model.load_weights([("model.norm.weight", norm)])
        assert torch.equal(llm.hf_model.model.norm.weight, norm)
        with pytest.raises(KeyError, match="no parameter"):
            runner.model.load_weights([("model.not_a_weight", norm)])
        with pytest.raises(NotImplementedError, match="top_p"):
            llm.generate([{"prompt_token_ids": [1, 2]}], sampling_params=sampling(top_p=0.9))


def script_for(tools: bool, rounds: int = 2):
    return tool_script(AutoTokenizer.from_pretrained(TINY), rounds) if tools else None


def recipe_args(tools: bool, tmp_path) -> list[str]:
    if tools:
        recipe = ["--config", "recipes/tiny/config_tool_use.yaml", "--reward_funcs", "multi_turn_execution"]
        length = "160"
    else:
        recipe = ["--config", "recipes/tiny/config_math.yaml", "--reward_funcs", "accuracy"]
        length = "16"
    # digit_share: rewards that differ within a group, so advantages and GEAR's reweighting are not all zero
    return [
        *recipe,
        "tests.utils:digit_share",
        *VLLM_ARGS,
        "--output_dir",
        str(tmp_path / "run"),
        "--max_steps",
        "2",
        "--save_strategy",
        "no",
        "--max_completion_length",
        length,
        # the tiny model's KLs sit below the default noise floor (1e-3), which would leave GRPO's weights
        "--onset_min_kl",
        "1e-6",
    ]


def assert_checks(checks: list, tools: bool, steps: int = 2) -> None:
    assert len(checks) == steps
    for check in checks:
        assert check["fused"], "the loss path must be the fused LM head's"
        assert check["max_abs_advantage"] > 0.1, "rewards must vary, or the credit compared is all zero"
        assert check["max_reweighting"] > 0.01, "GEAR's weights must differ from GRPO's, or the check is GRPO's"
        assert check["credit_diff"] <= 1e-6 * check["max_abs_advantage"], check
        assert check["kl_diff"] <= 1e-6, check
        # TRL's sequence-level ratios exp(sum(trainer - sampler log-probs)) are exp(offset x tokens): the stand-in's
        # log-probabilities reached TRL, and the ratios are not 1
        assert check["ratio_error"] < 1e-4, check
        assert check["ratio_min"] > math.exp(DEFAULT_LOGPROB_OFFSET) - 1e-4
        assert (check["tool_rows"] > 0) is tools


LORA = ["--use_peft", "true", "--lora_r", "4", "--lora_alpha", "8", "--lora_target_modules", "q_proj", "v_proj"]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("tools", "lora"), [(False, False), (True, False), (False, True)], ids=["no-tools", "tools", "lora"]
)
def test_vllm_path_credit_equals_loss_path_credit_on_one_rank(tmp_path, tools, lora):
    extra = [*LORA, "--learning_rate", "0.05"] if lora else []  # the recipes' LoRA, a rate that moves the policy
    with colocated_vllm_standin(script=script_for(tools)) as engines:
        trainer = standin_trainer([*recipe_args(tools, tmp_path), *extra])
        trainer.train()
    assert trainer.state.global_step == 2
    # checked at both steps: the second's ratios (exp(offset x tokens) to 1e-4) show the engine generated with the
    # weights the first step trained (under LoRA: TRL merges the adapter into the weights it syncs)
    assert_checks(trainer.checks, tools)
    # TRL pushed the weights into the engine once a step (every parameter, the tied LM head once)
    engine = engines[0]
    assert engine.calls["load_weights"] == 2 * 24
    assert engine.calls["generate"] == (6 if tools else 2)  # tool rollouts: 2 tool rounds and the answer
    if lora:
        initial = AutoModelForCausalLM.from_pretrained(TINY).model.layers[0].self_attn.q_proj.weight
        synced = engine.hf_model.model.layers[0].self_attn.q_proj.weight
        assert (synced - initial).abs().max() > 1e-4, "the engine holds the trained (merged) weights"


@pytest.mark.slow
def test_the_check_sees_generation_states_one_position_off(tmp_path, monkeypatch):
    """The comparison can fail: with the no-grad pass's states read one position early (an off-by-one the loss path,
    which reads TRL's own states, cannot make), the generation path's credit differs from the loss path's."""
    import gear_trl.trainer.gear_trainer as trainer_module

    real = trainer_module.completion_states
    monkeypatch.setattr(trainer_module, "completion_states", lambda hidden, keep: real(hidden[:, :-1], keep))
    with colocated_vllm_standin():
        trainer = standin_trainer([*recipe_args(False, tmp_path), "--max_steps", "1"])
        trainer.train()
    (check,) = trainer.checks
    assert check["fused"] and check["kl_diff"] > 1e-4 and check["credit_diff"] > 1e-3


@pytest.mark.slow
@pytest.mark.distributed
@pytest.mark.parametrize("tools", [False, True], ids=["no-tools", "tools"])
def test_vllm_path_credit_equals_loss_path_credit_on_two_zero3_ranks(tmp_path, tools):
    from tests.distributed.test_distributed import HERE, launch

    report = tmp_path / "report.json"
    target = [str(HERE / "vllm_standin.py"), "--report", str(report), *recipe_args(tools, tmp_path)]
    if tools:
        target.insert(1, "--tools")
    launch("zero3_cpu.yaml", target, tmp_path)
    ranks = json.loads(report.read_text())
    assert [r["rank"] for r in ranks] == [0, 1]
    assert [r["zero_stage"] for r in ranks] == [3, 3]
    assert [r["step"] for r in ranks] == [2, 2]
    for r in ranks:
        assert_checks(r["checks"], tools)
        assert r["engine_calls"]["load_weights"] > 0
    if tools:
        # rank 0's tool rollouts ran 2 rounds, rank 1's 1: no lockstep at tensor-parallel size 1 without sleep mode
        assert [r["engine_calls"]["generate"] for r in ranks] == [6, 4]


@pytest.mark.slow
@pytest.mark.distributed
@pytest.mark.parametrize(("config", "generations"), [("ddp_cpu.yaml", [6, 4]), ("zero3_cpu.yaml", [6, 6])])
def test_sleep_mode_keeps_tool_rounds_in_lockstep_only_where_weight_syncs_gather(tmp_path, config, generations):
    """Sleep mode re-syncs the weights at every generation: under DDP that gathers nothing, and ranks whose rollouts
    need different numbers of tool rounds (2 and 1) generate as often as they need; under ZeRO-3 it gathers every
    parameter, and rank 1 matches rank 0's six generations with throwaway ones."""
    from tests.distributed.test_distributed import HERE, launch

    report = tmp_path / "report.json"
    target = [str(HERE / "vllm_standin.py"), "--tools", "--report", str(report), *recipe_args(True, tmp_path)]
    launch(config, [*target, "--vllm_enable_sleep_mode", "true"], tmp_path)
    ranks = json.loads(report.read_text())
    assert [r["zero_stage"] for r in ranks] == ([0, 0] if config == "ddp_cpu.yaml" else [3, 3])
    assert [r["step"] for r in ranks] == [2, 2]
    for r in ranks:
        assert_checks(r["checks"], tools=True)
    assert [sorted(set(r["turns"])) for r in ranks] == [[1, 3], [1, 2]]
    calls = [r["engine_calls"] for r in ranks]
    assert [c["generate"] for c in calls] == generations
    # asleep from the start and after every generation, its weights re-synced before each
    assert [c["sleep"] for c in calls] == [n + 1 for n in generations]
    assert [c["load_weights"] for c in calls] == [n * 24 for n in generations]


@pytest.mark.slow
@pytest.mark.distributed
def test_tensor_parallel_group_with_tool_rounds_of_different_counts(tmp_path):
    """Colocated vLLM with tensor parallelism 2 on two ranks (one group), tool rollouts of rank 0 running one tool
    round and rank 1's two. In rank 1's last round rank 0 has no rollout left: it joins with a throwaway prompt (the
    lockstep within the group), and repeats it to rank 1's two prompts, so that TRL's slice of the group's outputs,
    which assumes equal counts, hands rank 1 its own two completions."""
    from tests.distributed.test_distributed import HERE, launch

    report = tmp_path / "report.json"
    target = [str(HERE / "vllm_standin.py"), "--tools", "--rounds", "1,2", "--report", str(report)]
    launch("ddp_cpu.yaml", [*target, *recipe_args(True, tmp_path), "--vllm_tensor_parallel_size", "2"], tmp_path)
    ranks = json.loads(report.read_text())
    assert [r["step"] for r in ranks] == [2, 2]
    for r in ranks:
        assert_checks(r["checks"], tools=True)
    # every rollout got its own rank's completions: half answer at once, the others after their rank's tool rounds
    assert [sorted(set(r["turns"])) for r in ranks] == [[1, 2], [1, 3]]
    assert [r["engine_calls"]["generate"] for r in ranks] == [6, 6]  # rank 0 matched rank 1's third round
