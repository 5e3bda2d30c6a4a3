"""Configurations that used to give wrong results quietly (issue 10, part A): each is now either correct or refused
before any model is loaded, with a message that says why and what to do."""

from __future__ import annotations

import copy
import json
import logging
import os
from pathlib import Path

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from gear_trl import GEARConfig, GEARTrainer
from gear_trl.credit import reverse_kl_and_entropy
from gear_trl.credit.gigpo import gigpo_advantages
from gear_trl.credit.modes import CREDIT_MODES
from gear_trl.trainer.gear_trainer import lm_head_transform
from tests.utils import TINY, make_trainer, math_rows, run_ranks, tiny_args, torchrun, weighted

HERE = Path(__file__).resolve().parents[1] / "distributed"
TOKEN_MODES = [mode for mode in CREDIT_MODES if mode != "none"]


def config(tmp_path, **overrides):
    return GEARConfig(output_dir=str(tmp_path / "out"), report_to="none", use_cpu=True, **overrides)


def generate(trainer, seed=123):
    rows = next(iter(trainer.get_train_dataloader()))
    torch.manual_seed(seed)
    trainer.model.train()
    return trainer._generate_and_score_completions(copy.deepcopy(rows)), rows


# --- 1. dropout --------------------------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("num_iterations", [1, 2])  # student states from the loss's forward / GRPO's no-grad pass
def test_dropout_is_switched_off_so_identical_prompts_have_zero_kl(tmp_path, caplog, monkeypatch, num_iterations):
    """Rows without ground truth give the teacher the student's own prompt: their KL must be 0, not dropout noise."""
    from peft import LoraConfig

    import gear_trl.trainer.gear_trainer

    # A dataset without any ground truth is refused at construction; here every row lacks one on purpose.
    monkeypatch.setattr(gear_trl.trainer.gear_trainer, "check_some_ground_truth", lambda *args: None)

    peft = LoraConfig(
        r=8,
        lora_alpha=16,
        lora_dropout=0.5,
        target_modules=["q_proj", "k_proj", "v_proj", "o_proj", "up_proj", "down_proj"],
        init_lora_weights=False,  # a non-zero up-projection, so the adapter's dropout changes the output
    )
    data = math_rows(8, ground_truths=[None])
    with caplog.at_level(logging.WARNING, logger="gear_trl.trainer.gear_trainer"):
        trainer = make_trainer(
            tmp_path, dataset=data, peft_config=peft, args=tiny_args(tmp_path, num_iterations=num_iterations)
        )
    batch, _ = generate(trainer)
    weighted(trainer, batch)  # the loss's forward is the student pass here
    metrics = trainer._metrics["train"]
    assert metrics["gear/no_ground_truth_frac"][-1] == 1.0
    assert metrics["gear/kl_max"][-1] < 1e-4, metrics["gear/kl_max"]
    assert "lora_dropout p=0.5" in caplog.text
    assert all(m.p == 0 for m in trainer.model.modules() if isinstance(m, torch.nn.Dropout))


@pytest.mark.slow
def test_with_a_reference_model_the_student_states_still_come_from_the_student_pass(tmp_path):
    """beta > 0 adds a reference pass (adapters disabled) after GRPO's no-grad student pass: GEAR must read the
    student's states, not the reference's."""
    from peft import LoraConfig

    peft = LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], init_lora_weights=False)
    trainer = make_trainer(tmp_path, args=tiny_args(tmp_path, beta=0.1, num_iterations=2), peft_config=peft)
    read = []
    compute = trainer._divergence
    trainer._divergence = lambda batch, hidden: read.append(hidden) or compute(batch, hidden)
    batch, _ = generate(trainer)
    assert "ref_per_token_logps" in batch and len(read) == 1, "read at generation time, with a reference pass"
    torch.testing.assert_close(read[0], trainer._student_hidden_pass(batch))
    with trainer.model.disable_adapter():
        assert not torch.allclose(read[0], trainer._student_hidden_pass(batch))


# --- 2. GSPO ---------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("credit", TOKEN_MODES)
def test_sequence_level_importance_sampling_is_refused_with_token_credit(tmp_path, credit):
    with pytest.raises(ValueError, match="importance_sampling_level: sequence"):
        config(tmp_path, credit=credit, importance_sampling_level="sequence")


def test_sequence_level_importance_sampling_still_works_with_plain_grpo(tmp_path):
    assert (
        config(tmp_path, credit="none", importance_sampling_level="sequence").importance_sampling_level == "sequence"
    )


# --- 3. collectives with mixed tool rows -------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.distributed
def test_ranks_with_and_without_tool_rows_do_not_hang(tmp_path):
    report = tmp_path / "report.json"
    env = dict(os.environ, HF_HUB_OFFLINE="1", OMP_NUM_THREADS="1", TRL_EXPERIMENTAL_SILENCE="1")
    command = torchrun(str(HERE / "mixed_tools.py"), "--report", str(report), "--output_dir", str(tmp_path / "run"))
    run_ranks(command, env, 300, "two ranks, one with tool rows and one without")
    ranks = json.loads(report.read_text())
    # Both ranks logged the tool metrics (reduced together) and GEAR's metrics after them.
    assert [len(r["turns_per_rollout"]) for r in ranks] == [1, 1]
    assert ranks[0]["turns_per_rollout"] == ranks[1]["turns_per_rollout"]
    assert [len(r["kl_mean"]) for r in ranks] == [1, 1]


# --- 4. GiGPO and TRL's advantage options ----------------------------------------------------------------------------


@pytest.mark.parametrize("credit", ["gigpo", "gear-gigpo"])
@pytest.mark.parametrize(
    "option",
    [{"scale_rewards": "none"}, {"scale_rewards": "batch"}, {"multi_objective_aggregation": "normalize_then_sum"}],
)
def test_gigpo_refuses_trl_advantage_options_it_would_ignore(tmp_path, credit, option):
    name = next(iter(option))
    with pytest.raises(ValueError, match=name):
        config(tmp_path, credit=credit, **option)


@pytest.mark.parametrize("mode", ["mean", "mean_std"])
def test_gigpo_unscorable_rollouts_get_zero_and_stay_out_of_the_statistics(mode):
    """Hand-worked: one group, one step each on the same anchor. Scorable returns 1, 3, 2 have mean 2 and std 1, so
    A_E = A_S = -1, 1, 0 (divided by 1 + 1e-6 in mean_std); the unscorable rollout (reward 100) gets 0 and does not
    move the mean. Combined with omega = 1: -2, 2, 0, 0."""
    advantages = gigpo_advantages(
        torch.tensor([1.0, 3.0, 100.0, 2.0]),
        torch.zeros(4, dtype=torch.long),
        [["s"], ["s"], ["s"], ["s"]],
        mode=mode,
        scorable=torch.tensor([True, True, False, True]),
    )
    expected = torch.tensor([-2.0, 2.0, 0.0, 0.0]) / (1.0 + 1e-6 if mode == "mean_std" else 1.0)
    torch.testing.assert_close(torch.cat(advantages), expected)


def test_gigpo_all_unscorable_group_gets_zero():
    advantages = gigpo_advantages(
        torch.tensor([1.0, 3.0]),
        torch.zeros(2, dtype=torch.long),
        [["a", "b"], ["a"]],
        scorable=torch.tensor([False, False]),
    )
    assert all(torch.equal(a, torch.zeros_like(a)) for a in advantages)


@pytest.mark.slow
def test_gigpo_trainer_gives_rows_without_any_reward_advantage_zero(tmp_path):
    def odd_rows_unscored(completions, **kwargs):
        texts = [c[-1]["content"] for c in completions]
        return [None if i % 2 else float(len(text)) for i, text in enumerate(texts)]

    trainer = GEARTrainer(
        model=AutoModelForCausalLM.from_pretrained(TINY),
        reward_funcs=[odd_rows_unscored],
        args=tiny_args(tmp_path, credit="gigpo"),
        train_dataset=math_rows(),
        processing_class=AutoTokenizer.from_pretrained(TINY),
    )
    batch, _ = generate(trainer)
    advantages = batch["advantages"]
    assert advantages.shape == batch["completion_ids"].shape
    assert torch.all(advantages[1::2] == 0), "rows no reward function scored must get advantage 0"
    assert advantages[0::2].abs().sum() > 0, "the scored rows must still get an advantage"


# --- 5. logit scaling and soft-capping ---------------------------------------------------------------------------------


def tiny_family(name):
    from transformers import CohereConfig, Gemma2Config, GraniteConfig

    size = {
        "vocab_size": 96,
        "hidden_size": 32,
        "intermediate_size": 64,
        "num_hidden_layers": 1,
        "num_attention_heads": 2,
        "num_key_value_heads": 1,
        "head_dim": 16,
        "initializer_range": 0.5,  # logits large enough for the cap and the scale to matter
    }
    if name == "gemma2":
        return Gemma2Config(**size, final_logit_softcapping=2.0, query_pre_attn_scalar=16, sliding_window=8)
    if name == "granite":
        size.pop("head_dim")
        return GraniteConfig(**size, logits_scaling=0.25)
    return CohereConfig(**size, logit_scale=4.0)


@pytest.mark.parametrize("family", ["gemma2", "granite", "cohere"])
def test_divergence_applies_the_models_logit_scaling_and_softcap(family):
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(tiny_family(family), dtype=torch.float32).eval()
    student_ids, teacher_ids = torch.randint(0, 96, (2, 2, 7))
    with torch.no_grad():
        hidden_s = model.model(input_ids=student_ids).last_hidden_state
        hidden_t = model.model(input_ids=teacher_ids).last_hidden_state
        logits_s = model(input_ids=student_ids).logits.double()
        logits_t = model(input_ids=teacher_ids).logits.double()
    temperature = 0.7
    log_ps = (logits_s / temperature).log_softmax(-1)
    log_pt = (logits_t / temperature).log_softmax(-1)
    ref_kl = (log_ps.exp() * (log_ps - log_pt)).sum(-1)
    ref_entropy = -(log_ps.exp() * log_ps).sum(-1)

    scale, softcap = lm_head_transform(model.config)
    mask = torch.ones(2, 7, dtype=torch.bool)
    weight = model.get_output_embeddings().weight
    kwargs = {"temperature": temperature, "chunk_size": 5}
    kl, entropy = reverse_kl_and_entropy(
        hidden_s, hidden_t, weight, mask, logit_scale=scale, final_logit_softcapping=softcap, **kwargs
    )
    torch.testing.assert_close(kl.double(), ref_kl, atol=2e-5, rtol=1e-4)
    torch.testing.assert_close(entropy.double(), ref_entropy, atol=2e-5, rtol=1e-4)
    raw_kl, _ = reverse_kl_and_entropy(hidden_s, hidden_t, weight, mask, **kwargs)
    assert (raw_kl.double() - ref_kl).abs().max() > 1e-2, "the family's transformation must matter in this test"


@pytest.mark.slow
def test_trainer_hands_the_models_logit_transformation_to_the_divergence(tmp_path):
    trainer = make_trainer(tmp_path)
    batch, _ = generate(trainer)
    student = trainer._student_hidden_pass(batch)
    config = trainer._causal_lm().config
    config.logit_scale, config.final_logit_softcapping = 3.0, 0.5
    trace = trainer._credit(batch, trainer._divergence(batch, student))
    lm_head = trainer._causal_lm().get_output_embeddings()
    expected, _ = reverse_kl_and_entropy(
        student,
        batch["gear_teacher_hidden"],
        lm_head.weight,
        trace.mask,
        temperature=trainer.temperature,
        logit_scale=3.0,
        final_logit_softcapping=0.5,
    )
    torch.testing.assert_close(trace.kl, expected)
    plain, _ = reverse_kl_and_entropy(
        student, batch["gear_teacher_hidden"], lm_head.weight, trace.mask, temperature=trainer.temperature
    )
    assert not torch.allclose(trace.kl, plain)


def test_lm_head_transform_of_a_plain_model_is_the_identity():
    from transformers import AutoConfig

    assert lm_head_transform(AutoConfig.from_pretrained(TINY)) == (1.0, None)


# --- 6. vLLM server mode with tools on several processes ---------------------------------------------------------------


def add(a: int, b: int) -> int:
    """Add two numbers.

    Args:
        a: first number
        b: second number
    """
    return a + b


def test_vllm_server_with_tools_on_several_processes_is_refused(tmp_path, monkeypatch):
    args = tiny_args(tmp_path, use_vllm=True, vllm_mode="server")
    monkeypatch.setattr(GEARConfig, "world_size", property(lambda self: 2))
    with pytest.raises(ValueError, match="vllm_mode: server"):
        make_trainer(tmp_path, args=args, model=TINY, tools=[add])


# --- 7. teacher: base, prompt tuning, FSDP, top_entropy_quantile -------------------------------------------------------


@pytest.mark.slow
def test_base_teacher_of_a_trained_adapter_is_the_initial_policy(tmp_path):
    """A model that arrives with a trained adapter: the teacher is that adapter as it was at the start, not the bare
    base model, and stays so while the adapter trains."""
    from peft import LoraConfig, get_peft_model

    trained = get_peft_model(
        AutoModelForCausalLM.from_pretrained(TINY),
        LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], init_lora_weights=False),
    )
    trainer = make_trainer(tmp_path, args=tiny_args(tmp_path, teacher="base"), model=trained)
    model = trainer.model
    assert not any(p.requires_grad for n, p in model.named_parameters() if ".ref." in n)
    batch, rows = generate(trainer)
    prompts = trainer.teacher.prompts([r["prompt"] for r in rows], [r["ground_truth"] for r in rows])

    def teacher(kind):
        trainer.args.teacher = kind
        return trainer.teacher.hidden(batch, prompts.input_ids)

    initial = teacher("live")
    torch.testing.assert_close(teacher("base"), initial)
    with model.disable_adapter():
        bare = teacher("live")
    assert not torch.allclose(bare, initial), "the bare base model is not the run's initial policy"
    with torch.no_grad():  # as if training had moved the adapter
        for name, param in model.named_parameters():
            if "lora_B.default" in name:
                param.add_(0.5)
    assert not torch.allclose(teacher("live"), initial)
    torch.testing.assert_close(teacher("base"), initial)


@pytest.mark.parametrize("kind", ["prompt", "prefix"])
def test_prompt_and_prefix_tuning_are_refused_with_a_teacher(tmp_path, kind):
    from peft import PrefixTuningConfig, PromptTuningConfig

    cls = PromptTuningConfig if kind == "prompt" else PrefixTuningConfig
    with pytest.raises(ValueError, match="prompt/prefix tuning"):
        make_trainer(tmp_path, model=TINY, peft_config=cls(task_type="CAUSAL_LM", num_virtual_tokens=4))


def test_fsdp_is_refused_with_a_teacher(tmp_path, monkeypatch):
    monkeypatch.setenv("ACCELERATE_USE_FSDP", "true")
    with pytest.raises(ValueError, match="FSDP is not supported"):
        config(tmp_path, credit="gear")


@pytest.mark.parametrize("credit", [m for m in TOKEN_MODES if m != "gigpo"])
def test_top_entropy_quantile_is_refused_with_gear_modes(tmp_path, credit):
    with pytest.raises(ValueError, match="top_entropy_quantile"):
        config(tmp_path, credit=credit, top_entropy_quantile=0.2)
    assert config(tmp_path, credit="gigpo", top_entropy_quantile=0.2).top_entropy_quantile == 0.2
