"""GEARTrainer on the shipped tiny model: real generation, teacher pass, loss and optimizer steps on CPU."""

from __future__ import annotations

import copy
import math

import pytest
import torch
from datasets import Dataset
from transformers import AutoModelForCausalLM
from trl import GRPOConfig, GRPOTrainer

from tests.utils import TINY, make_trainer, math_rows, tiny_args, weighted

pytestmark = pytest.mark.slow


def first_batch(trainer):
    """One generation batch exactly as the training loop builds it."""
    batch = next(iter(trainer.get_train_dataloader()))
    return batch


def loss_and_grads(trainer, inputs):
    # Set by Trainer.train(); the loss normalizers read it.
    trainer.current_gradient_accumulation_steps = trainer.args.gradient_accumulation_steps
    trainer.model.zero_grad()
    loss = trainer.compute_loss(trainer.model, inputs)
    loss.backward()
    grads = {n: p.grad.detach().clone() for n, p in trainer.model.named_parameters() if p.grad is not None}
    return loss.detach(), grads


def generate(trainer, rows, seed=123):
    torch.manual_seed(seed)
    trainer.model.train()
    return trainer._generate_and_score_completions(copy.deepcopy(rows))


@pytest.mark.parametrize("credit,extra", [("none", {}), ("token", {"weight_alpha": 0.0})])
def test_neutral_credit_matches_grpo_loss_and_gradients(tmp_path, credit, extra):
    model = AutoModelForCausalLM.from_pretrained(TINY)
    grpo = make_trainer(tmp_path, GRPOTrainer, tiny_args(tmp_path, GRPOConfig), model=copy.deepcopy(model))
    gear = make_trainer(tmp_path, args=tiny_args(tmp_path, credit=credit, **extra), model=copy.deepcopy(model))
    rows = first_batch(grpo)

    grpo_batch = generate(grpo, rows)
    gear_batch = generate(gear, rows)
    assert torch.equal(grpo_batch["completion_ids"], gear_batch["completion_ids"])

    grpo_loss, grpo_grads = loss_and_grads(grpo, grpo_batch)
    gear_loss, gear_grads = loss_and_grads(gear, gear_batch)
    if credit == "none":
        assert gear_batch["advantages"].dim() == 1
    else:  # alpha = 0 gives weight 1 everywhere: the [B, T] path must be neutral
        assert gear_batch["advantages"].dim() == 2
    assert torch.allclose(grpo_loss, gear_loss, atol=1e-7), (grpo_loss, gear_loss)
    assert grpo_grads.keys() == gear_grads.keys() and grpo_grads
    for name in grpo_grads:
        assert torch.allclose(grpo_grads[name], gear_grads[name], atol=1e-7), name
    assert any(g.abs().sum() > 0 for g in gear_grads.values()), "a zero gradient would make the check vacuous"


def test_the_loss_forward_computes_the_divergence_with_grpos_log_probs(tmp_path, monkeypatch, caplog):
    """On CPU the loss's forward gives GEAR its divergence from the same student logits (gear_trl.trainer.fused_head); where
    TRL folds its tiles with Triton it does not, and the separate pass must give the same advantages and loss."""
    import logging

    import gear_trl.trainer.fused_head

    model = AutoModelForCausalLM.from_pretrained(TINY)
    fused = make_trainer(tmp_path, args=tiny_args(tmp_path, onset_threshold=0.05), model=copy.deepcopy(model))
    separate = make_trainer(tmp_path, args=tiny_args(tmp_path, onset_threshold=0.05), model=copy.deepcopy(model))
    rows = first_batch(fused)
    fused_batch, separate_batch = generate(fused, rows), generate(separate, rows)
    calls = []
    for trainer in (fused, separate):
        original = trainer._divergence
        trainer._divergence = lambda batch, hidden, original=original, owner=trainer: (
            calls.append(owner) or original(batch, hidden)
        )

    fused_loss, fused_grads = loss_and_grads(fused, fused_batch)
    assert calls == [], "the fused forward must not need the separate pass"
    monkeypatch.setattr(gear_trl.trainer.fused_head, "_use_triton", lambda device: True)
    with caplog.at_level(logging.INFO, logger="gear_trl.trainer.gear_trainer"):
        separate_loss, separate_grads = loss_and_grads(separate, separate_batch)
    assert calls == [separate] and "TRL folds the LM-head tiles with Triton" in caplog.text

    torch.testing.assert_close(fused_batch["advantages"], separate_batch["advantages"], atol=1e-6, rtol=1e-5)
    assert fused_batch["advantages"].abs().sum() > 0
    torch.testing.assert_close(fused_loss, separate_loss, atol=1e-6, rtol=1e-5)
    for name in fused_grads:
        torch.testing.assert_close(fused_grads[name], separate_grads[name], atol=1e-6, rtol=1e-4, msg=name)


def test_gear_reweights_advantages_preserving_each_completions_mean(tmp_path):
    trainer = make_trainer(tmp_path, args=tiny_args(tmp_path, onset_threshold=0.05))
    batch = weighted(trainer, generate(trainer, first_batch(trainer)))
    advantages = batch["advantages"]
    mask = batch["completion_mask"].bool()
    assert advantages.shape == batch["completion_ids"].shape

    weights_seen = []
    for row in range(advantages.size(0)):
        values = advantages[row][mask[row]]
        assert torch.all(advantages[row][~mask[row]] == 0)
        if values.numel() == 0:
            continue
        base = values.mean()
        # weight_norm=mean keeps each completion's mean advantage: A_i = mean_t A_i * w_t
        if base.abs() > 1e-6:
            weights_seen.append(values / base)
    assert weights_seen, "the batch needs a completion with non-zero advantage"
    metrics = trainer._metrics["train"]
    for name in (
        "kl_mean",
        "kl_max",
        "onset_rate",
        "segment_len_mean",
        "in_segment_frac",
        "weight_mean",
        "weight_std",
        "weight_min",
        "weight_max",
        "no_ground_truth_frac",
        "teacher_truncated_frac",
        "teacher_prefix_shared_frac",
    ):
        assert f"gear/{name}" in metrics, name
    assert metrics["gear/kl_mean"][-1] > 0
    assert metrics["gear/kl_max"][-1] >= metrics["gear/kl_mean"][-1]
    # 16-token completions after prompts several times longer: the shared pass runs under half the tokens
    assert metrics["gear/teacher_prefix_shared_frac"][-1] == 1.0


def test_missing_ground_truth_column_fails_before_training(tmp_path):
    data = Dataset.from_list([{"prompt": [{"role": "user", "content": "1+1?"}], "answer": "2"}] * 4)
    with pytest.raises(ValueError) as err:
        make_trainer(tmp_path, dataset=data)
    message = str(err.value)
    assert "'ground_truth'" in message and "answer" in message and "prompt" in message


def test_rows_without_ground_truth_get_plain_grpo_weights_and_are_counted(tmp_path):
    data = math_rows(8, ground_truths=["4", None])  # rows alternate: with and without ground truth
    trainer = make_trainer(tmp_path, dataset=data, args=tiny_args(tmp_path, shuffle_dataset=False, num_generations=2))
    rows = first_batch(trainer)
    batch = weighted(trainer, generate(trainer, rows))
    has_truth = torch.tensor([row["ground_truth"] is not None for row in rows])
    assert 0 < has_truth.sum() < len(rows)
    mask = batch["completion_mask"].bool()
    advantages = batch["advantages"]
    scalar = advantages.sum(-1) / mask.sum(-1).clamp(min=1)
    for row in torch.nonzero(~has_truth).flatten().tolist():
        expected = torch.where(mask[row], scalar[row], torch.zeros(()))
        assert torch.allclose(advantages[row], expected), "no ground truth must mean weight 1 on every model token"
    frac = trainer._metrics["train"]["gear/no_ground_truth_frac"][-1]
    assert frac == pytest.approx(float((~has_truth).float().mean()))
    # Their teacher prompt is the student's: what KL they get is the noise floor, logged, far below onset_min_kl.
    metrics = trainer._metrics["train"]
    assert 0 <= metrics["gear/kl_floor"][-1] < trainer.args.onset_min_kl / 10
    assert metrics["gear/kl_mean"][-1] > 10 * metrics["gear/kl_floor"][-1]


@pytest.mark.parametrize("onset_min_kl", [0.0, 1e3])
def test_completions_below_the_noise_floor_get_weights_one_and_are_counted(tmp_path, onset_min_kl):
    trainer = make_trainer(tmp_path, args=tiny_args(tmp_path, onset_threshold=0.05, onset_min_kl=onset_min_kl))
    batch = weighted(trainer, generate(trainer, first_batch(trainer)))
    mask = batch["completion_mask"].bool()
    advantages = batch["advantages"]
    scalar = advantages.sum(-1, keepdim=True) / mask.sum(-1, keepdim=True).clamp(min=1)
    plain = torch.allclose(advantages, torch.where(mask, scalar, 0.0), atol=1e-6)
    metrics = trainer._metrics["train"]
    assert metrics["gear/below_floor_frac"][-1] == (1.0 if onset_min_kl else 0.0)
    assert metrics["gear/onset_rate"][-1] == 0.0 if onset_min_kl else metrics["gear/onset_rate"][-1] > 0
    assert plain == bool(onset_min_kl)
    assert metrics["gear/kl_floor"][-1] != metrics["gear/kl_floor"][-1]  # NaN: every row has a ground truth


def test_teacher_prompt_truncation_is_counted(tmp_path):
    long_question = "Count the apples in this very long story. " * 40 + "How many apples?"
    data = Dataset.from_list([{"prompt": [{"role": "user", "content": long_question}], "ground_truth": "17"}] * 4)
    trainer = make_trainer(tmp_path, dataset=data, args=tiny_args(tmp_path, max_teacher_prompt_length=96))
    weighted(trainer, generate(trainer, first_batch(trainer)))
    assert trainer._metrics["train"]["gear/teacher_truncated_frac"][-1] == 1.0


@pytest.mark.parametrize("loss_type", ["grpo", "bnpo", "dr_grpo", "dapo", "cispo", "sapo", "luspo", "vespo"])
def test_every_grpo_loss_type_trains_with_token_advantages(tmp_path, loss_type):
    trainer = make_trainer(tmp_path, args=tiny_args(tmp_path, loss_type=loss_type, onset_threshold=0.05))
    batch = generate(trainer, first_batch(trainer))
    loss, grads = loss_and_grads(trainer, batch)
    assert batch["advantages"].dim() == 2
    assert torch.isfinite(loss)
    assert any(torch.isfinite(g).all() and g.abs().sum() > 0 for g in grads.values())


def params_snapshot(model):
    return {n: p.detach().clone() for n, p in model.named_parameters() if p.requires_grad}


def assert_some_changed(before, model):
    after = dict(model.named_parameters())
    assert any(not torch.equal(before[n], after[n].detach()) for n in before), "no trainable parameter changed"


def test_num_iterations_and_gradient_accumulation(tmp_path):
    args = tiny_args(tmp_path, num_iterations=2, gradient_accumulation_steps=2, max_steps=2)
    trainer = make_trainer(tmp_path, args=args)
    before = params_snapshot(trainer.model)
    trainer.train()
    assert trainer.state.global_step == 2
    assert_some_changed(before, trainer.model)
    logged = [entry for entry in trainer.state.log_history if "gear/weight_std" in entry]
    assert logged


@pytest.mark.parametrize("teacher", ["live", "base"])
def test_lora_training_with_live_and_base_teacher(tmp_path, teacher):
    from peft import LoraConfig

    args = tiny_args(tmp_path, teacher=teacher)
    trainer = make_trainer(
        tmp_path, args=args, peft_config=LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"])
    )
    before = params_snapshot(trainer.model)
    assert before and all("lora" in name for name in before)
    trainer.train()
    assert_some_changed(before, trainer.model)


def test_base_teacher_disables_the_adapters(tmp_path):
    """With non-zero adapters, `base` must really switch them off: its hidden states differ from the live ones."""
    from peft import LoraConfig

    peft = LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], init_lora_weights=False)
    trainer = make_trainer(tmp_path, args=tiny_args(tmp_path, teacher="live"), peft_config=peft)
    rows = first_batch(trainer)
    batch = generate(trainer, rows)
    prompts = trainer.teacher.prompts([r["prompt"] for r in rows], [r["ground_truth"] for r in rows])
    live = trainer.teacher.hidden(batch, prompts.input_ids)
    trainer.args.teacher = "base"
    base = trainer.teacher.hidden(batch, prompts.input_ids)
    with trainer.model.disable_adapter():
        expected = trainer.teacher.hidden(batch, prompts.input_ids)
    assert not torch.allclose(live, base)
    torch.testing.assert_close(base, expected)


def test_student_states_from_grpos_pass_and_from_the_loss_forward_give_the_same_weights(tmp_path):
    """GEAR never runs a student forward of its own: with num_iterations > 1 it reads GRPO's no-grad pass, else the
    loss's forward. Both must equal the weights computed from an explicit student pass."""
    model = AutoModelForCausalLM.from_pretrained(TINY)
    deferred = make_trainer(tmp_path, args=tiny_args(tmp_path, onset_threshold=0.05), model=copy.deepcopy(model))
    captured = make_trainer(
        tmp_path, args=tiny_args(tmp_path, onset_threshold=0.05, num_iterations=2), model=copy.deepcopy(model)
    )
    assert not deferred._grpo_runs_student_pass() and captured._grpo_runs_student_pass()
    rows = first_batch(deferred)
    late = generate(deferred, rows)
    early = generate(captured, rows)
    assert "gear_teacher_hidden" in late and early["advantages"].dim() == 2, "captured at generation time"
    divergence = deferred._divergence(late, deferred._student_hidden_pass(late))
    explicit = deferred._gear_advantages(dict(late), divergence, "train")
    weighted(deferred, late)
    torch.testing.assert_close(late["advantages"], explicit, atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(early["advantages"], explicit, atol=1e-5, rtol=1e-4)
    assert late["advantages"].abs().sum() > 0


def test_rlsd_weights_the_advantages_by_the_sampled_tokens_signed_log_ratio(tmp_path):
    """credit: rlsd in a real step: the loss's advantages are A_i * RLSD's weights of delta = log pT - log pS (signed:
    both signs occur), not rescaled; the fused loss forward and an explicit student pass agree."""
    from gear_trl.credit import rlsd_token_weights

    trainer = make_trainer(tmp_path, args=tiny_args(tmp_path, credit="rlsd", rlsd_lambda=1.0, rlsd_eps=0.5))
    batch = generate(trainer, first_batch(trainer))
    trace = trainer.compute_credit(dict(batch))
    mask = trace.mask
    assert (trace.signal[mask] > 0).any() and (trace.signal[mask] < 0).any()
    torch.testing.assert_close(trace.signal, -trace.kl)
    base = batch["gear_base_advantages"]
    expected = base[:, None] * rlsd_token_weights(trace.signal, mask, base, lam=1.0, eps=0.5)
    torch.testing.assert_close(trace.advantages, expected)
    weighted(trainer, batch)
    torch.testing.assert_close(batch["advantages"], expected, atol=1e-5, rtol=1e-4)
    metrics = trainer._metrics["train"]
    assert metrics["gear/rlsd_lambda"][-1] == 1.0
    assert 0 <= metrics["gear/rlsd_clip_frac"][-1] <= 1
    assert "gear/onset_rate" not in metrics  # no segments: not logged (docs/metrics.md, by mode)
    assert "gear/onsets_teacher_supported_frac" not in metrics


def test_distillation_leaves_rows_no_reward_function_scored_alone(tmp_path):
    """GRPO gives a row every reward function returned None for advantage 0 ("no learning signal"); the
    distillation term must not move the policy on it either, while the other rows are blended."""
    from transformers import AutoTokenizer

    from gear_trl import GEARTrainer
    from gear_trl.credit import distill_advantages

    def first_two_unscored(prompts, completions, **kwargs):
        return [None if i < 2 else float(len(str(c)) % 3) for i, c in enumerate(completions)]

    trainer = GEARTrainer(
        model=AutoModelForCausalLM.from_pretrained(TINY),
        reward_funcs=[first_two_unscored],
        args=tiny_args(tmp_path, distillation_weight=0.5),
        train_dataset=math_rows(),
        processing_class=AutoTokenizer.from_pretrained(TINY),
    )
    batch = generate(trainer, first_batch(trainer))
    assert batch["gear_scorable"].tolist() == [False, False, True, True]
    trace = trainer.compute_credit(dict(batch))
    assert trace.distill_rows.tolist() == [False, False, True, True]
    mask = trace.mask
    assert (trace.distilled[:2][mask[:2]] == 0).all()  # advantage 0 in GRPO, and left at 0
    assert (trace.log_ratio[:2][mask[:2]] != 0).any()  # it would have moved them
    expected = distill_advantages(trace.advantages, trace.log_ratio, mask, 0.5, trace.distill_rows)
    torch.testing.assert_close(trace.distilled, expected)
    assert not torch.allclose(trace.distilled[2:][mask[2:]], trace.advantages[2:][mask[2:]])


def test_distillation_weight_under_rlsd_distils_the_same_log_ratio_gear_reads(tmp_path):
    """rlsd + distillation_weight in a real step: rlsd's divergence pass gives log pS - log pT (signed) and no
    separate log-ratio, so the blend reads its negative; that is the log pT - log pS a `gear` trainer computes on the
    same batch, and the loss's advantages are (1 - w) * RLSD's advantages + w * it."""
    from gear_trl.credit import distill_advantages

    model = AutoModelForCausalLM.from_pretrained(TINY)
    gear = make_trainer(tmp_path, args=tiny_args(tmp_path, distillation_weight=0.5), model=copy.deepcopy(model))
    rlsd = make_trainer(
        tmp_path, args=tiny_args(tmp_path, credit="rlsd", rlsd_lambda=1.0, distillation_weight=0.5), model=model
    )
    batch = generate(rlsd, first_batch(rlsd))
    trace = rlsd.compute_credit(dict(batch))
    reference = gear.compute_credit(dict(batch))
    mask = trace.mask
    torch.testing.assert_close(trace.log_ratio[mask], reference.log_ratio[mask], atol=1e-5, rtol=1e-4)
    assert (trace.log_ratio[mask] > 0).any() and (trace.log_ratio[mask] < 0).any()
    expected = distill_advantages(trace.advantages, -trace.kl, mask, 0.5, trace.has_ground_truth)
    torch.testing.assert_close(trace.distilled, expected)
    assert not torch.allclose(trace.distilled[mask], trace.advantages[mask])  # the blend moved something
    rlsd.model.train()
    weighted(rlsd, batch)
    torch.testing.assert_close(batch["advantages"], trace.distilled, atol=1e-5, rtol=1e-4)
    assert 0 < rlsd._metrics["train"]["gear/distill_share"][-1] < 1


def test_rlsd_lambda_decays_over_training(tmp_path):
    args = tiny_args(tmp_path, credit="rlsd", rlsd_lambda_decay_steps=2, max_steps=2, rlsd_negative_only=True)
    trainer = make_trainer(tmp_path, args=args)
    trainer.train()
    lams = [entry["gear/rlsd_lambda"] for entry in trainer.state.log_history if "gear/rlsd_lambda" in entry]
    assert lams == [0.5, 0.25]


def test_teacher_reference_solution_shows_the_worked_solution_and_counts_answer_only_rows(tmp_path, monkeypatch):
    rows = [dict(row) for row in math_rows(8)]
    for i, row in enumerate(rows):
        row["reference_solution"] = f"{i} plus 2 makes {i + 2}." if i % 2 == 0 else None
    args = tiny_args(tmp_path, teacher_reference="solution", shuffle_dataset=False, num_generations=2)
    trainer = make_trainer(tmp_path, args=args, dataset=Dataset.from_list(rows))
    seen = []
    build = trainer.teacher.prompts.__call__
    monkeypatch.setattr(trainer.teacher, "prompts", lambda *a, **k: seen.append(build(*a, **k)) or seen[-1])
    batch_rows = first_batch(trainer)
    generate(trainer, batch_rows)
    texts = [trainer._tokenizer.decode(ids) for ids in seen[-1].input_ids]
    for row, text in zip(batch_rows, texts, strict=True):
        shown = row["reference_solution"] or row["ground_truth"]
        assert f"A reference solution to this problem is:\n{shown}\n" in text
    expected = sum(row["reference_solution"] is None for row in batch_rows) / len(batch_rows)
    assert 0 < expected < 1
    assert trainer._metrics["train"]["gear/teacher_answer_only_frac"][-1] == pytest.approx(expected)


def test_failed_prefix_weight_cuts_a_failed_rollouts_weights_before_its_first_segment(tmp_path):
    """failed_prefix_weight in a real step: the same batch under the paper's GEAR and at 0; weights differ exactly on
    failed rollouts' tokens before their first segment, which go to 0, unrescaled; the loss sees the same advantages."""
    model = AutoModelForCausalLM.from_pretrained(TINY)
    kwargs = {"onset_threshold": 0.9}  # a high threshold, so some failed rollout's first onset comes late
    paper = make_trainer(tmp_path, args=tiny_args(tmp_path, **kwargs), model=copy.deepcopy(model))
    cut = make_trainer(tmp_path, args=tiny_args(tmp_path, failed_prefix_weight=0.0, **kwargs), model=model)
    batch = generate(paper, first_batch(paper))
    plain = paper.compute_credit(dict(batch))
    trace = cut.compute_credit(dict(batch))
    torch.testing.assert_close(trace.segment_ids, plain.segment_ids)
    in_segment = (plain.segment_ids >= 0) & plain.mask
    before_first = (in_segment.long().cumsum(dim=1) == 0) & in_segment.any(dim=1, keepdim=True)
    failed = (batch["gear_base_advantages"] < 0)[:, None] & plain.has_ground_truth[:, None]
    spared = before_first & failed & plain.mask
    assert spared.any(), "the batch needs a failed rollout whose first onset is not its first token"
    assert (trace.weights[spared] == 0).all() and (plain.weights[spared] > 0).all()
    torch.testing.assert_close(trace.weights[~spared], plain.weights[~spared])
    cut.model.train()
    weighted(cut, batch)
    torch.testing.assert_close(batch["advantages"], trace.advantages, atol=1e-5, rtol=1e-4)
    assert "- failed_prefix_weight: `0.0`" in "\n".join(cut._credit_card_lines())
    # gear/failed_prefix_frac: the share of failed rollouts' model tokens the option scales, logged from the step.
    expected = spared.sum().item() / (failed & plain.mask).sum().item()
    assert cut._metrics["train"]["gear/failed_prefix_frac"][-1] == pytest.approx(expected, abs=1e-6)
    paper.model.train()
    weighted(paper, batch)  # the paper's GEAR logs the same share: it measures the teacher, not the option
    assert paper._metrics["train"]["gear/failed_prefix_frac"][-1] == pytest.approx(expected, abs=1e-6)
    # the label-free diagnostics after it in the reduced sums still read their own slice
    from gear_trl.credit import failure_contrast, failure_contrast_sums

    contrast = failure_contrast(
        failure_contrast_sums(plain.kl, plain.mask, plain.segment_ids, plain.advantages, plain.has_ground_truth)
    )
    for name, value in contrast.items():
        logged = paper._metrics["train"][f"gear/{name}"][-1]
        assert (value is None and math.isnan(logged)) or logged == pytest.approx(value, rel=1e-4), name


def test_gear_signed_flips_gears_weights_where_the_teacher_supports_the_sampled_token(tmp_path):
    """credit: gear-signed in a real step: GEAR's segments, the signal signed by the log-ratio the divergence pass
    gives beside the KL, so the weights differ from `gear` exactly on tokens with signal where log pT > log pS; both
    modes log the share of passed rollouts' onsets the teacher supports."""
    from gear_trl.credit import teacher_supported_onsets

    model = AutoModelForCausalLM.from_pretrained(TINY)
    kwargs = {"onset_threshold": 0.05, "weight_norm": "none"}
    gear = make_trainer(tmp_path, args=tiny_args(tmp_path, **kwargs), model=copy.deepcopy(model))
    signed = make_trainer(tmp_path, args=tiny_args(tmp_path, credit="gear-signed", **kwargs), model=model)
    rows = first_batch(gear)
    batch = generate(gear, rows)
    plain = gear.compute_credit(dict(batch))
    trace = signed.compute_credit(dict(batch))
    mask = trace.mask & (batch["gear_base_advantages"] != 0)[:, None] & (plain.signal > 0)
    supported = mask & (trace.log_ratio > 0)
    assert supported.any() and (mask & (trace.log_ratio < 0)).any()
    torch.testing.assert_close(trace.segment_ids, plain.segment_ids)
    torch.testing.assert_close(trace.log_ratio, plain.log_ratio)
    torch.testing.assert_close(trace.signal[mask], torch.where(supported, -plain.signal, plain.signal)[mask])
    assert not torch.isclose(trace.weights[supported], plain.weights[supported]).any()
    torch.testing.assert_close(trace.weights[mask & ~supported], plain.weights[mask & ~supported])
    # The fused loss forward gives the same advantages, and logs the metric from the same sums.
    signed.model.train()
    gear.model.train()
    weighted(signed, batch)
    torch.testing.assert_close(batch["advantages"], trace.advantages, atol=1e-5, rtol=1e-4)
    n_supported, n_onsets = teacher_supported_onsets(
        trace.segment_ids, trace.log_ratio, trace.mask, batch["gear_base_advantages"], trace.has_ground_truth
    )
    logged = signed._metrics["train"]["gear/onsets_teacher_supported_frac"][-1]
    if n_onsets:
        assert logged == pytest.approx((n_supported / n_onsets).item(), abs=1e-6)
    else:
        assert math.isnan(logged)  # no onset in a passed rollout this step
    # `gear` logs it too (computing the same log-ratio, never changing its own weights); `rlsd` does not.
    weighted(gear, dict(batch))
    assert len(gear._metrics["train"]["gear/onsets_teacher_supported_frac"]) == 1


def test_distillation_weight_blends_the_teachers_log_ratio_into_the_losss_advantages(tmp_path):
    """distillation_weight in a real step: GEAR's credit unchanged, the loss's advantages (1 - w) * A_t + w * delta_t
    on rows with a teacher, a failed rollout's teacher-supported token pushed up, gear/distill_share logged, and the
    model card names the setting."""
    from gear_trl.credit import distill_advantages

    model = AutoModelForCausalLM.from_pretrained(TINY)
    paper = make_trainer(tmp_path, args=tiny_args(tmp_path), model=copy.deepcopy(model))
    blend = make_trainer(tmp_path, args=tiny_args(tmp_path, distillation_weight=0.5), model=model)
    batch = generate(paper, first_batch(paper))
    plain = paper.compute_credit(dict(batch))
    trace = blend.compute_credit(dict(batch))
    assert plain.distilled is None
    torch.testing.assert_close(trace.advantages, plain.advantages)  # GEAR's own credit is the paper's
    expected = distill_advantages(plain.advantages, plain.log_ratio, plain.mask, 0.5, plain.has_ground_truth)
    torch.testing.assert_close(trace.distilled, expected)
    failed = (batch["gear_base_advantages"] < 0)[:, None] & trace.mask & trace.has_ground_truth[:, None]
    supported = failed & (trace.log_ratio > 0)
    assert supported.any(), "the batch needs a failed rollout's token the teacher supports"
    assert (trace.distilled[supported] > trace.advantages[supported]).all()
    blend.model.train()
    weighted(blend, batch)
    torch.testing.assert_close(batch["advantages"], trace.distilled, atol=1e-5, rtol=1e-4)
    keep = trace.mask & trace.has_ground_truth[:, None]
    dense = (0.5 * trace.log_ratio).abs()[keep].sum()
    share = dense / (dense + (0.5 * trace.advantages).abs()[keep].sum())
    assert blend._metrics["train"]["gear/distill_share"][-1] == pytest.approx(share.item(), rel=1e-4)
    card = "\n".join(blend._credit_card_lines())
    for line in ("distillation_weight: `0.5`", "distillation_gate: `none`", "distillation_bound: `None`"):
        assert f"- {line}" in card  # the card tells apart runs that differ in any of the blend's options
    assert "gear/distill_share" not in paper._metrics["train"]


def test_opsm_and_vespo_act_per_token_where_advantage_signs_vary_inside_a_completion(tmp_path):
    """TRL's off-policy sequence mask and VESPO's gamma weight read the sign of the advantage: with GEAR's own credit
    every model token carries its rollout's sign, so both act per completion as TRL documents; with
    `distillation_weight` a completion's signs differ, and both act per token (docs/configuration.md says so)."""
    model = AutoModelForCausalLM.from_pretrained(TINY)
    paper = make_trainer(tmp_path, args=tiny_args(tmp_path), model=copy.deepcopy(model))
    distil = make_trainer(tmp_path, args=tiny_args(tmp_path, distillation_weight=1.0), model=model)
    batch = generate(paper, first_batch(paper))
    mask = batch["completion_mask"].float()
    for trainer, per_row in ((paper, True), (distil, False)):
        trainer.model.train()
        inputs = weighted(trainer, dict(batch))
        advantages = inputs["advantages"]
        assert advantages.dim() == 2
        live = mask.bool() & (advantages != 0)
        mixed = [
            r for r in range(len(mask)) if (advantages[r][live[r]] > 0).any() and (advantages[r][live[r]] < 0).any()
        ]
        assert (not mixed) == per_row, mixed
        logps = torch.zeros_like(mask)
        # every completion off policy by 1 nat a token: OPSM keeps exactly the tokens with advantage >= 0
        keep = trainer.get_off_policy_mask(advantages, logps, logps + 1.0, mask, off_policy_threshold=0.5)
        assert keep.shape == advantages.shape
        assert torch.equal(keep.bool()[live], (advantages >= 0)[live])
        phi = trainer.get_gamma_weights(advantages, torch.full_like(mask, 0.01), mask, None)
        for r in range(len(mask)):
            distinct = phi[r][live[r]].unique()
            assert len(distinct) == (2 if r in mixed else 1 if live[r].any() else 0), (r, distinct)
