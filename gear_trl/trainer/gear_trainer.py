"""`GEARTrainer`: TRL's GRPOTrainer with GEAR's per-token advantage weights.

Glue only: the mathematics lives in `gear_trl.credit`, teacher prompts in `gear_trl.data.teacher`. After GRPO has generated
and scored a batch, the trainer

1. builds teacher prompts (the prompt with the ground truth in it) and appends the same completion tokens,
2. runs the student and the teacher without gradients up to their final hidden states,
3. computes reverse KL and entropy through the LM head chunk by chunk (never a [B, T, V] tensor): inside the loss's
   LM-head forward where TRL folds its tiles with torch ops (`gear_trl.trainer.fused_head`), else in a pass of its own,
4. turns them into per-token weights and hands `advantages[:, None] * weights` to GRPO's unchanged loss.

Every rank makes the same forward calls in the same order, whatever its data, so ZeRO-3's collective parameter
gathers stay in lockstep: rows without a ground truth still go through the teacher pass and get weight 1 afterwards.
"""

from __future__ import annotations

import logging
import os
import textwrap
import warnings
from collections import Counter
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, fields
from typing import ClassVar

import torch
from accelerate.utils import gather_object, is_peft_model
from datasets import Dataset
from trl import GRPOTrainer
from trl.data_utils import is_conversational
from trl.trainer.utils import maybe_gather_lm_head_ctx

from ..cli.errors import UserInputError
from ..credit import (
    below_noise_floor,
    distill_advantages,
    distillation_share,
    failed_prefix_mask,
    reverse_kl_and_entropy,
    rlsd_lambda,
    rlsd_token_weights,
    segment_signal,
    signed_signal,
    spare_failed_prefix,
    teacher_supported_onsets,
    weights_from_signal,
)
from ..credit.diagnostics import SUM_NAMES as CONTRAST_SUMS
from ..credit.diagnostics import failure_contrast, failure_contrast_sums
from ..credit.gigpo import gigpo_advantages_with_stats, step_advantages_to_tokens, step_index_from_mask
from ..data.math_tasks import REFERENCE_SOLUTION_COLUMN
from ..data.teacher import final_observation, has_ground_truth, suffix_attention_bias
from ..data.tool_use import json_text
from ..envs.checks import check_environments, check_rollout_func
from ..envs.rollout import ToolRolloutMixin, harden_response_parser, step_anchors, tool_stats
from ..rewards.guard import guard_reward_func
from .callbacks import CreditReportCallback
from .checkpoints import CheckpointSaveError, io_failure_cause, save_failure_message
from .devices import check_single_device
from .fused_head import FusedDivergence, divergence_in_log_probs
from .gear_config import PREFIX_WEIGHT_MODES, GEARConfig, check_peft_for_teacher, check_vllm_server_tools
from .hub import check_hub_access
from .preflight import check_trackers, looks_like_local_path, reward_parameter_problems
from .step_metrics import StepMetrics
from .teacher import Teacher, copy_initial_adapter

logger = logging.getLogger(__name__)

# What the generation batch carries to the loss for GEAR when the student's states come from the loss's forward.
GEAR_BATCH_KEYS = (
    "gear_teacher_hidden",
    "gear_base_advantages",
    "gear_has_truth",
    "gear_truncated",
    "gear_teacher_shared",
    "gear_control_kl",
    "gear_scorable",
    "gear_teacher_references",
)


TRUNCATION_WARN_FRACTION = 0.2
"""Warn (once) when more than this share of a batch's tool rollouts ran out of `max_completion_length`."""


@dataclass
class CreditTrace:
    """Per-token credit of one batch, every tensor [B, T] (has_ground_truth: [B]): what GEAR computed and why."""

    completion_ids: torch.Tensor
    mask: torch.Tensor
    kl: torch.Tensor
    entropy: torch.Tensor
    signal: torch.Tensor
    segment_ids: torch.Tensor
    weights: torch.Tensor
    advantages: torch.Tensor
    has_ground_truth: torch.Tensor
    below_floor: torch.Tensor | None = None
    """[B] bool: rows with a teacher whose largest KL is below `onset_min_kl` (weights 1)."""
    log_ratio: torch.Tensor | None = None
    """[B, T] float: the sampled token's log pT - log pS, in the modes that read it (`GEARConfig.wants_log_ratio`)."""
    distilled: torch.Tensor | None = None
    """[B, T] float: with `distillation_weight > 0`, the loss's advantages, (1 - w) * advantages + w * log pT - log pS
    on `distill_rows` (`credit.distill_advantages`); `advantages` stays GEAR's credit of the outcome."""
    distill_rows: torch.Tensor | None = None
    """[B] bool, with `distillation_weight > 0`: the rows distilled, those with a teacher that some reward function
    scored (GRPO gives a row every reward function returned None for advantage 0, "no learning signal": the
    distillation term would move the policy on it)."""

    def to(self, device) -> CreditTrace:
        moved = {f.name: getattr(self, f.name) for f in fields(self)}
        return CreditTrace(**{k: None if v is None else v.detach().to(device) for k, v in moved.items()})


GEAR_PAPER = {
    "title": "GEAR: Granularity-Adaptive Advantage Reweighting for LLM Agents via Self-Distillation",
    "id": "2605.11853",
    # docstyle-ignore
    "citation": textwrap.dedent("""\
        @article{li2026gear,
            title        = {{GEAR: Granularity-Adaptive Advantage Reweighting for LLM Agents via Self-Distillation}},
            author       = {Sijia Li and Yuchen Huang and Zifan Liu and Yanping Li and Jingjing Fu and Li Zhao and Jiang Bian and Ling Zhang and Jun Zhang and Rui Wang},
            year         = 2026,
            eprint       = {arXiv:2605.11853},
        }"""),
}


class GEARTrainer(ToolRolloutMixin, GRPOTrainer):
    """GRPO whose advantage is redistributed over tokens by GEAR (see `GEARConfig` for every knob).

    Takes the same arguments as [`~trl.GRPOTrainer`]; `args` must be a [`GEARConfig`]. The training dataset must have
    the column named by `args.ground_truth_column` unless `args.credit` runs no teacher (`none`, `gigpo`).
    """

    _tag_names: ClassVar[list[str]] = ["trl", "grpo", "gear"]
    _name = "GEAR"
    _paper = GEAR_PAPER

    _capture_generation_pass = False  # read GRPO's no-grad student pass of the current batch
    _pending_gear_batch = None  # batch whose weights the loss's forward will compute
    _student_hidden = None
    _reported_separate_divergence = False
    _checked_first_batch = False
    _warned_tool_truncation = False
    last_credit_trace: CreditTrace | None = None  # set every `credit_report_steps` steps for CreditReportCallback

    def __init__(self, model, reward_funcs=None, args: GEARConfig | None = None, train_dataset=None, **kwargs):
        if args is None:
            args = GEARConfig(output_dir="GEAR")
        if not isinstance(args, GEARConfig):
            raise TypeError(f"`args` must be a GEARConfig, got {type(args).__name__}.")
        # Fail before any model is loaded or any step is spent.
        check_trackers(args.report_to)
        if args.push_to_hub:
            check_hub_access(args.hub_token)
        columns = getattr(train_dataset, "column_names", None)
        if isinstance(columns, list) and reward_funcs is not None:  # a stream's columns are unknown until iterated
            funcs = reward_funcs if isinstance(reward_funcs, (list, tuple)) else [reward_funcs]
            found = reward_parameter_problems(
                funcs, columns, environment=kwargs.get("environment_factory") is not None
            )
            if found:
                raise UserInputError("Reward functions TRL could not call:\n  " + "\n  ".join(found))
        # Ground truths given as native lists or dicts (tool calls) are read as their JSON text, as the rest of the
        # pipeline (rewards, teacher prompts) reads the column.
        train_dataset = _ground_truth_as_json(train_dataset, args.ground_truth_column)
        if kwargs.get("eval_dataset") is not None:
            kwargs["eval_dataset"] = _ground_truth_as_json(kwargs["eval_dataset"], args.ground_truth_column)
        if args.uses_teacher and not args.teacher_reads_siblings:  # a successful sibling needs no ground truth
            if train_dataset is None:
                raise UserInputError(
                    f"`credit: {args.credit}` runs GEAR's teacher, which reads each row's ground truth from the "
                    f"dataset column {args.ground_truth_column!r}, but there is no `train_dataset` (the environment "
                    "supplies the prompts): every row would get plain GRPO weights at GEAR's cost. Pass a "
                    f"`train_dataset` with that column, {NO_REFERENCE_HINT}"
                )
            _check_ground_truth_column(train_dataset, args.ground_truth_column, "train_dataset")
            _check_ground_truth_column(kwargs.get("eval_dataset"), args.ground_truth_column, "eval_dataset")
            _check_some_ground_truth(train_dataset, args.ground_truth_column, args.credit)
        if args.uses_teacher:
            _as_user_error(check_peft_for_teacher, model, kwargs.get("peft_config"))
        if kwargs.get("environment_factory") is not None:
            # TRL builds tool schemas and calls `reset` only once generation starts: check them now (unless
            # `environment_preflight` is off), and keep `state_key` out of the tools.
            kwargs["environment_factory"] = check_environments(
                kwargs["environment_factory"], train_dataset, preflight=args.environment_preflight
            )
        if kwargs.get("rollout_func") is not None:
            check_rollout_func(args)
        _as_user_error(check_vllm_server_tools, args, bool(kwargs.get("tools") or kwargs.get("environment_factory")))
        if args.teacher == "base" and _is_loaded_peft_model(model) and args.beta == 0.0:
            copy_initial_adapter(model)  # with beta > 0, GRPOTrainer makes the same copy for its reference
        self._quantization_config = kwargs.get("quantization_config")  # the teacher's reload under ZeRO-3 reads it
        super().__init__(model, reward_funcs, args=args, train_dataset=train_dataset, **kwargs)
        # One guard for every reward source, the environments' own `get_reward` (which TRL appends) included: a
        # non-finite value becomes None, counted in rewards/<name>/non_finite_frac and warned about once.
        self.reward_funcs = [
            func if isinstance(func, torch.nn.Module) else guard_reward_func(func, name)
            for func, name in zip(self.reward_funcs, self.reward_func_names, strict=True)
        ]
        self._warned_unscorable = False
        if args.uses_teacher:  # a model TRL spread over several GPUs (gear_trl/trainer/devices.py)
            check_single_device(self.model, args.credit)
        # The teacher's weights, prompts and pass (gear_trl/trainer/teacher.py); None when no mode reads it.
        self.teacher = Teacher(self) if args.uses_teacher else None
        if args.uses_teacher:
            # The teacher pass and the student pass it is compared with (GRPO's no-grad pass or the loss's forward)
            # run in training mode: with dropout on they would see different random networks, and the KL between
            # two identical prompts would be noise. Both must see the same dropout-free network.
            switched_off = _switch_off_dropout(self.model)
            if switched_off:
                logger.warning(
                    "GEAR switched off dropout so that the student and teacher passes see the same network: %s. "
                    "Set `lora_dropout: 0` / `disable_dropout: true` to silence this.",
                    ", ".join(f"{count} x {kind}" for kind, count in switched_off.items()),
                )
        # A completion the tool-call parser chokes on is read as plain text (counted in tools/parse_failures).
        harden_response_parser(self._tokenizer)
        # Tool metrics reduce over ranks, so whether they run must not depend on a rank's batch: decided once here
        # from the trainer's tools and the datasets' columns (unknown columns count as possibly having tools).
        datasets = (train_dataset, kwargs.get("eval_dataset"))
        self._logs_tool_metrics = bool(self.tools) or any(_may_have_column(d, "tools") for d in datasets)
        if args.credit_report_steps > 0 and args.uses_teacher:
            self.add_callback(CreditReportCallback(self))
        self.step_metrics = StepMetrics(self, logs_teacher=args.uses_teacher)  # perf/ metrics (step_metrics.py)
        self.add_callback(self.step_metrics)

    # ----------------------------------------------------------------------------------------------------------------
    # The GEAR step. GEAR's extra cost is one teacher forward: the student's hidden states come from a forward the
    # GRPO step makes anyway: its own no-grad pass over the batch when it runs one (old log-probs for
    # `num_iterations > 1`, vLLM importance sampling), else the loss's forward, whose backbone output is read by a hook
    # before the loss needs the advantages.

    def _generate_and_score_completions(self, inputs):
        self._set_batch_row_tools(inputs)
        self._student_hidden = None
        self._capture_generation_pass = self.args.uses_teacher and self._grpo_runs_student_pass()
        with no_new_input_grad_hooks(self.model):
            output = super()._generate_and_score_completions(inputs)
        self._capture_generation_pass = False
        mode = "train" if self.model.training else "eval"
        record = self._rollout
        mask = _model_token_mask(output)
        if self._logs_tool_metrics:
            self._log_tool_metrics(mode, record)

        if self.args.credit in ("gigpo", "gear+gigpo"):
            output["advantages"] = self._gigpo_token_advantages(mode, mask, record)
        if not self.args.uses_teacher:
            return output

        ground_truths = [row.get(self.args.ground_truth_column) for row in inputs]
        kinds = ["ground truth"] * len(inputs)
        if self.args.teacher_reads_siblings:
            looks = [self.args.teacher_reference == "sibling" or not has_ground_truth(t) for t in ground_truths]
            ground_truths = self.teacher.sibling_references(
                mode, ground_truths, record.completions, record.rewards_per_func
            )
            kinds = [
                kind if not look else "successful sibling" if shown is not None else "none (no sibling)"
                for kind, look, shown in zip(kinds, looks, ground_truths, strict=True)
            ]
        # what each row's teacher was shown, for the credit reports: inspect reads it here, the callback from the
        # batch (a list, which TRL's split and shuffle carry with the rows as they do the tensors)
        self.last_teacher_references = list(zip(kinds, ground_truths, strict=True))
        tools = [self._prompt_tools(i) for i in range(len(inputs))]
        solutions = None
        if self.args.teacher_reference == "solution":
            solutions = [row.get(REFERENCE_SOLUTION_COLUMN) for row in inputs]
        feedbacks = (
            [final_observation(c) for c in record.completions] if self.args.teacher_environment_feedback else None
        )
        teacher = self.teacher.prompts(
            record.prompts, ground_truths, tools, self.teacher.render_reference, solutions, feedbacks
        )
        if mode == "train" and not self._checked_first_batch and not self.args.teacher_reads_siblings:
            self._checked_first_batch = True
            self._warn_without_ground_truth(teacher.has_ground_truth)
        if teacher.answer_only is not None:  # decided by the configuration: every rank reduces here
            counts = torch.tensor([sum(teacher.answer_only), sum(teacher.has_ground_truth)], device=mask.device)
            answer_only, with_truth = self.accelerator.reduce(counts.float(), reduction="sum").tolist()
            self._metrics[mode]["gear/teacher_answer_only_frac"].append(answer_only / max(with_truth, 1.0))
        with self.step_metrics.teacher_pass():  # the teacher's share of the step (perf/teacher_time_frac)
            output["gear_teacher_hidden"] = self.teacher.hidden(output, teacher.input_ids)
            output["gear_control_kl"] = self.teacher.control_kl(
                mode, output, record.prompts, ground_truths, tools, solutions
            )
        output["gear_base_advantages"] = output["advantages"]
        output["gear_has_truth"] = torch.tensor(teacher.has_ground_truth, device=mask.device)
        output["gear_truncated"] = torch.tensor(teacher.truncated, device=mask.device)
        output["gear_teacher_shared"] = torch.full((len(inputs),), self.teacher.pass_shared, device=mask.device)
        # Rows some reward function scored (rewards_per_func is the whole generation batch's; TRL slices it the same
        # way): GRPO zeroes an unscorable row's advantage, and distillation_weight leaves it alone too.
        start = self.accelerator.process_index * len(inputs)
        scorable = ~torch.isnan(record.rewards_per_func[start : start + len(inputs)]).all(dim=1)
        output["gear_scorable"] = scorable.to(mask.device)
        output["gear_teacher_references"] = list(self.last_teacher_references)
        if self._student_hidden is not None:
            divergence = self._divergence(output, self._student_hidden)
            output["advantages"] = self._gear_advantages(output, divergence, mode)
            self._student_hidden = None
            for key in GEAR_BATCH_KEYS:
                del output[key]
        return output

    def _calculate_rewards(self, inputs, prompts, completions, completion_ids_list):
        """TRL's rewards ([B_global, n_sources], gathered over ranks), with the completions no source scored counted:
        TRL gives them advantage 0 (docs/bad-input.md); `rewards/unscorable_frac` logs their share, a warning names
        the sources the first time, and a step in which no completion was scored says so every time."""
        rewards_per_func = super()._calculate_rewards(inputs, prompts, completions, completion_ids_list)
        unscorable = torch.isnan(rewards_per_func).all(dim=1)
        mode = "train" if self.model.training else "eval"
        self._metrics[mode]["rewards/unscorable_frac"].append(unscorable.float().mean().item())
        sources = ", ".join(self.reward_func_names)
        if not self.accelerator.is_main_process:  # gathered rewards: every rank would say the same
            return rewards_per_func
        if bool(unscorable.all()):
            logger.warning(
                "No reward source (%s) returned a usable value (a finite number) for any of the %d completions of "
                "this %s step: every advantage is 0 and the step learns nothing. Check that the rewards (or the "
                "environment's get_reward) return numbers for these rows.",
                sources,
                unscorable.numel(),
                mode,
            )
        elif bool(unscorable.any()) and not self._warned_unscorable:
            self._warned_unscorable = True
            logger.warning(
                "%d of %d completions got no usable value (None or non-finite) from any reward source (%s); they get "
                "advantage 0 and are counted in rewards/unscorable_frac. Further occurrences are only counted.",
                int(unscorable.sum()),
                unscorable.numel(),
                sources,
            )
        return rewards_per_func

    def _save_checkpoint(self, model, trial):
        # `teacher: ema` writes its average before the Trainer's files: a checkpoint whose trainer_state.json exists
        # has its teacher too. A full disk or an I/O error part way through either: one line naming the folder and
        # the cause, instead of a traceback from deep inside torch or safetensors. The Trainer rotates old checkpoints
        # (`save_total_limit`) only after the last file is written, so a failed save never costs the previous one.
        from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR

        run_dir = self._get_output_dir(trial=trial)
        folder = os.path.join(run_dir, f"{PREFIX_CHECKPOINT_DIR}-{self.state.global_step}")
        try:
            if self.teacher is not None and self.teacher.saves_weights:
                self.teacher.save(folder)
            return super()._save_checkpoint(model, trial)
        except Exception as err:
            cause = io_failure_cause(err)
            if cause is None:
                raise
            raise CheckpointSaveError(save_failure_message(folder, cause, run_dir)) from err

    def train(self, resume_from_checkpoint=None, *args, **kwargs):
        if resume_from_checkpoint is True:
            from transformers.trainer_utils import get_last_checkpoint

            resume_from_checkpoint = get_last_checkpoint(self.args.output_dir)
        self._gear_resume_from = resume_from_checkpoint  # read by TeacherWeightsCallback
        return super().train(resume_from_checkpoint, *args, **kwargs)

    def _grpo_runs_student_pass(self) -> bool:
        """Whether GRPOTrainer computes old log-probs with a no-grad pass of the policy (its own condition)."""
        generate_every = self.args.steps_per_generation * self.num_iterations
        return self.args.gradient_accumulation_steps % generate_every != 0 or (
            self.use_vllm and self.vllm_importance_sampling_correction
        )

    def _compute_loss(self, model, inputs):
        self._pending_gear_batch = inputs if "gear_teacher_hidden" in inputs else None
        try:
            return super()._compute_loss(model, inputs)
        finally:
            self._pending_gear_batch = None

    def _get_per_token_logps_and_entropies(self, model, input_ids, attention_mask, logits_to_keep, *args, **kwargs):
        batch = getattr(self, "_pending_gear_batch", None)
        if not (self._capture_generation_pass or batch is not None):
            return super()._get_per_token_logps_and_entropies(
                model, input_ids, attention_mask, logits_to_keep, *args, **kwargs
            )
        captured = []

        def keep_hidden(module, module_args, output):
            captured.append(completion_states(output.last_hidden_state, logits_to_keep))

        # The loss's forward computes GEAR's divergence from its own student logits where it can (gear_trl.trainer.fused_head);
        # the hook keeps the states for the separate pass where it cannot.
        fused = None
        if batch is not None:
            fused = FusedDivergence(
                batch["gear_teacher_hidden"],
                _model_token_mask(batch).bool(),
                chunk_size=self.args.divergence_chunk_size,
                divergence=self.args.divergence_signal,
                top_k=self.args.divergence_top_k,
                teacher_has_own_head=self.teacher.model is not None,
                with_log_ratio=self.args.wants_log_ratio,
            )
        handle = self._backbone().register_forward_hook(keep_hidden)
        try:
            with divergence_in_log_probs(fused) if fused is not None else nullcontext():
                result = super()._get_per_token_logps_and_entropies(
                    model, input_ids, attention_mask, logits_to_keep, *args, **kwargs
                )
        finally:
            handle.remove()
        if fused is None:  # GRPO's own no-grad pass, during generation
            self._capture_generation_pass = False
            self._student_hidden = torch.cat(captured)
            return result
        # The loss's forward: the advantages are read right after this returns.
        self._pending_gear_batch = None
        if fused.kl is not None:
            divergence = (fused.kl, fused.entropy, fused.log_ratio)
        else:
            if not self._reported_separate_divergence:
                self._reported_separate_divergence = True
                logger.info("GEAR computes its divergence in a pass of its own: %s.", fused.skipped)
            divergence = self._divergence(batch, torch.cat(captured))
        mode = "train" if self.model.training else "eval"
        batch["advantages"] = self._gear_advantages(batch, divergence, mode)
        return result

    @torch.no_grad()
    def _gear_advantages(self, batch, divergence: tuple, mode: str) -> torch.Tensor:
        """Per-token advantages A_i * w_t [B, T] from the batch's reverse KL, student entropy and sampled-token log
        pT - log pS ([B, T] each, the last None unless `wants_log_ratio`)."""
        trace = self._credit(batch, divergence)
        self._log_gear_metrics(
            mode, trace, batch["gear_truncated"], batch["gear_teacher_shared"], batch.get("gear_control_kl")
        )
        if mode == "train" and self.args.credit_report_steps and self._credit_report_due():
            self.last_credit_trace = trace.to("cpu")
            self.last_credit_prompt_ids = batch["prompt_ids"].cpu()  # a report shows rollouts of one prompt together
            self.last_credit_references = batch.get("gear_teacher_references")
        return trace.advantages if trace.distilled is None else trace.distilled

    @torch.no_grad()
    def _divergence(self, batch, student_hidden: torch.Tensor) -> tuple:
        """Reverse KL, student entropy and (with `wants_log_ratio`, else None) the sampled token's log pT - log pS
        [B, T] from student and teacher final hidden states [B, T, H], by a pass of the LM head of their own."""
        causal_lm = self._causal_lm()
        lm_head = causal_lm.get_output_embeddings()
        logit_scale, softcap = lm_head_transform(causal_lm.config)
        # A teacher model of its own has its own head (trained too under full fine-tuning).
        teacher_lm = self.teacher.causal_lm()
        teacher_head = teacher_lm.get_output_embeddings() if teacher_lm is not None else None
        mask = _model_token_mask(batch)
        log_ratio = mask.new_zeros(mask.shape, dtype=torch.float32) if self.args.wants_log_ratio else None
        with (
            maybe_gather_lm_head_ctx(lm_head.weight, lm_head.bias),
            maybe_gather_lm_head_ctx(teacher_head.weight, teacher_head.bias) if teacher_head else nullcontext(),
        ):
            kl, entropy = reverse_kl_and_entropy(
                student_hidden,
                batch["gear_teacher_hidden"],
                lm_head.weight,
                mask,
                temperature=self.temperature,
                chunk_size=self.args.divergence_chunk_size,
                lm_head_bias=lm_head.bias,
                divergence=self.args.divergence_signal,
                top_k=self.args.divergence_top_k,
                token_ids=batch["completion_ids"],
                logit_scale=logit_scale,
                final_logit_softcapping=softcap,
                teacher_lm_head_weight=None if teacher_head is None else teacher_head.weight,
                teacher_lm_head_bias=None if teacher_head is None else teacher_head.bias,
                log_ratio_out=log_ratio,
            )
        return kl, entropy, log_ratio

    @torch.no_grad()
    def _credit(self, batch, divergence: tuple) -> CreditTrace:
        kl, entropy, log_ratio = divergence
        mask = _model_token_mask(batch)
        base = batch["gear_base_advantages"]
        if self.args.credit == "rlsd":
            # kl holds log pS(y_t) - log pT(y_t), signed (divergence_signal); RLSD's delta is its negative.
            signal, segment_ids = -kl, torch.full_like(mask, -1, dtype=torch.long)
            args = self.args
            lam = rlsd_lambda(
                args.rlsd_lambda, self.state.global_step, args.rlsd_lambda_decay_steps, args.rlsd_lambda_warmup_steps
            )
            self._rlsd_lambda_now = lam
            weights = rlsd_token_weights(
                signal, mask, base, lam=lam, eps=self.args.rlsd_eps, negative_only=self.args.rlsd_negative_only
            )
        else:
            signal, segment_ids = segment_signal(
                kl,
                entropy,
                mask,
                mode=self.args.credit,
                onset_threshold=self.args.onset_threshold,
                entropy_threshold=self.args.entropy_threshold,
                turn_starts=_turn_starts(mask) if "tool_mask" in batch else None,
                fixed_segment_len=self.args.fixed_segment_len,
                max_segment_len=self.args.max_segment_len,
                normalize=self.args.normalize,
                onset_min_kl=self.args.onset_min_kl,
            )
            if self.args.credit == "gear-signed":
                signal = signed_signal(signal, log_ratio, mask)
            weights = weights_from_signal(
                signal,
                mask,
                base,
                alpha=self.args.weight_alpha,
                eps=self.args.weight_eps,
                lam=self.args.weight_lambda,
                weight_norm=self.args.weight_norm,
            )
            if self.args.failed_prefix_weight != 1.0:  # GEARConfig allows it only with trajectory-level advantages
                weights = spare_failed_prefix(weights, segment_ids, mask, base, self.args.failed_prefix_weight)
        # Documented fallback: a row without ground truth has no teacher, hence plain GRPO weights.
        has_truth = batch["gear_has_truth"]
        weights = torch.where(has_truth[:, None], weights, mask.float())
        segment_ids = torch.where(has_truth[:, None], segment_ids, torch.full_like(segment_ids, -1))
        advantages = (base[:, None] if base.dim() == 1 else base) * weights
        distilled = distill_rows = None
        if self.args.distillation_weight > 0:
            if self.args.credit == "rlsd":  # its divergence pass's signal is the sampled token's log pS - log pT
                log_ratio = -kl
            scorable = batch.get("gear_scorable")  # absent from a batch built by hand: every row scored
            distill_rows = has_truth if scorable is None else has_truth & scorable.to(has_truth.device)
            distilled = distill_advantages(advantages, log_ratio, mask, self.args.distillation_weight, distill_rows)
        return CreditTrace(
            completion_ids=batch["completion_ids"],
            mask=mask,
            kl=kl,
            entropy=entropy,
            signal=signal,
            segment_ids=segment_ids,
            weights=weights,
            advantages=advantages,
            has_ground_truth=has_truth,
            below_floor=has_truth & below_noise_floor(kl, mask, self.args.onset_min_kl)
            if self.args.credit != "rlsd"
            else None,
            log_ratio=log_ratio,
            distilled=distilled,
            distill_rows=distill_rows,
        )

    def compute_credit(self, batch) -> CreditTrace:
        """GEAR's per-token credit for a batch from `_generate_and_score_completions`, by an explicit student pass.

        For inspection and evaluation; training reads the student's states from forwards it makes anyway.
        """
        if "gear_teacher_hidden" not in batch:
            raise ValueError("The batch has no teacher states: build it with credit != none and num_iterations == 1.")
        return self._credit(batch, self._divergence(batch, self._student_hidden_pass(batch)))

    def _credit_report_due(self) -> bool:
        step = self.state.global_step
        if step % self.args.credit_report_steps or getattr(self, "_credit_reported_step", None) == step:
            return False
        self._credit_reported_step = step
        return True

    def _warn_without_ground_truth(self, has_truth: list[bool]) -> None:
        """After the first training batch: GEAR with no ground truth in it is plain GRPO at GEAR's cost; say so loudly
        (a refusal when this was knowable from the dataset is made at construction)."""
        if any(has_truth):
            return
        message = (
            f"No row of the first training batch has a ground truth in column {self.args.ground_truth_column!r}: "
            f"`credit: {self.args.credit}` gives such rows plain GRPO weights (gear/no_ground_truth_frac = 1) while "
            "still running the teacher pass. Put the ground truth in that column, or train with `credit: none`."
        )
        logger.warning(message)
        warnings.warn(message, stacklevel=2)

    def _gigpo_token_advantages(self, mode, mask, record) -> torch.Tensor:
        """GiGPO's episode + step advantage of every model token, [B, T] (0 on tool results and padding).

        Groups span ranks, so anchors and rewards of the whole generation batch are gathered, the advantages are
        computed identically on every rank, and each rank keeps its own slice.
        """
        num_generations = self.num_generations if mode == "train" else self.num_generations_eval
        weights = self.reward_weights.to(record.rewards_per_func.device)
        rewards = torch.nan_to_num((record.rewards_per_func * weights[None]).nansum(dim=1), nan=0.0).cpu()
        # Rows every reward function returned None for: advantage 0 and out of the statistics, as in GRPO.
        scorable = ~torch.isnan(record.rewards_per_func).all(dim=1).cpu()
        step_index = step_index_from_mask(mask)
        steps = (step_index.max(dim=1).values + 1).clamp(min=0).tolist()
        history = record.state_history
        local = []
        for i, num_steps in enumerate(steps):
            anchors = step_anchors(record.prompts[i], record.completions[i], history[i] if history else None)
            # Rollouts whose last turn was cut to nothing have fewer token runs than turns; a run without a turn
            # gets a unique anchor (a singleton group, step advantage 0).
            rank = self.accelerator.process_index
            anchors = anchors[:num_steps] + [f"unmatched:{rank}:{i}:{k}" for k in range(len(anchors), num_steps)]
            local.append(anchors)
        all_anchors = gather_object(local)
        group_ids = torch.arange(len(all_anchors)) // num_generations
        step_advs, stats = gigpo_advantages_with_stats(
            rewards,
            group_ids,
            all_anchors,
            gamma=self.args.gigpo_gamma,
            omega=self.args.gigpo_omega,
            mode=self.args.gigpo_mode,
            similarity_threshold=self.args.gigpo_similarity_threshold,
            scorable=scorable,
        )
        start = self.accelerator.process_index * len(steps)
        self._metrics[mode]["gigpo/step_groups"].append(stats["num_step_groups"])
        self._metrics[mode]["gigpo/singleton_frac"].append(stats["singleton_step_group_frac"])
        self._metrics[mode]["gigpo/step_adv_std"].append(stats["step_adv_std"])
        return step_advantages_to_tokens(step_advs[start : start + len(steps)], step_index).to(mask.device)

    def _log_tool_metrics(self, mode, record) -> None:
        stats = tool_stats(record.completions)
        # Tool errors where the calls happened, cut-off rollouts included: the calls that raised (TRL's failures,
        # so tools/error_rate agrees with TRL's tools/failure_frequency on raising tools) and those that returned an
        # error text. Without a count (no tool dicts this batch) the rollouts' messages are read instead.
        calls = record.tool_calls
        if calls is not None and calls.trl_calls:
            stats["tool_calls"], stats["tool_errors"] = calls.trl_calls, calls.trl_failures + calls.error_texts
            self._warn_failing_tools(calls.outcomes)
        names = sorted(stats)
        totals = self.accelerator.reduce(
            torch.tensor([float(stats[n]) for n in names], device=self.accelerator.device), reduction="sum"
        )
        totals = dict(zip(names, totals.tolist(), strict=True))
        self._metrics[mode]["tools/turns_per_rollout"].append(totals["turns"] / max(totals["rollouts"], 1.0))
        self._metrics[mode]["tools/error_rate"].append(totals["tool_errors"] / max(totals["tool_calls"], 1.0))
        self._metrics[mode]["tools/parse_failures"].append(totals["parse_failures"] / max(totals["rollouts"], 1.0))
        self._log_tool_truncation(mode, len(record.completions))

    TOOL_WINDOW = 20
    """Calls per tool over which `_warn_failing_tools` judges a tool (ours: enough calls that one bad batch of a
    usually working tool does not trip it)."""

    def _warn_failing_tools(self, outcomes: list) -> None:
        """One warning per tool that failed (raised or returned an error text) on most of its last `TOOL_WINDOW`
        calls (at least half of the window made), naming it and its last error. `outcomes`: (name, error or None)."""
        windows = self.__dict__.setdefault("_tool_windows", {})
        warned = self.__dict__.setdefault("_tools_warned", set())
        for name, error in outcomes:
            window = windows.setdefault(name, [])
            window.append(error)
            del window[: -self.TOOL_WINDOW]
        for name, window in windows.items():
            failed = [error for error in window if error is not None]
            if name not in warned and len(window) >= self.TOOL_WINDOW // 2 and len(failed) * 2 > len(window):
                warned.add(name)
                logger.warning(
                    "Tool `%s` failed on %d of its last %d calls (last error: %s). Its results are error texts the "
                    "model learns from; check the tool (tools/error_rate counts every tool's failures).",
                    name,
                    len(failed),
                    len(window),
                    textwrap.shorten(failed[-1], 300),
                )

    def _log_tool_truncation(self, mode, num_rollouts: int) -> None:
        """`tools/truncated_frac`: rollouts ended by `max_completion_length` (which counts tool results), which score
        as unfinished while `completions/clipped_ratio` may miss them; warned about once when above 20%."""
        truncated = self._tool_truncated if self._tool_truncated is not None else []
        self._tool_truncated = None
        counts = torch.tensor([float(sum(truncated)), float(num_rollouts)], device=self.accelerator.device)
        cut, rollouts = self.accelerator.reduce(counts, reduction="sum").tolist()
        fraction = cut / max(rollouts, 1.0)
        self._metrics[mode]["tools/truncated_frac"].append(fraction)
        if fraction > TRUNCATION_WARN_FRACTION and not self._warned_tool_truncation:
            self._warned_tool_truncation = True
            logger.warning(
                "%.0f%% of the tool rollouts of this batch ran out of `max_completion_length` (%d tokens, tool results "
                "included) before finishing (tools/truncated_frac); they score as unfinished. Raise "
                "`max_completion_length`, or lower `max_tool_calling_iterations`.",
                100 * fraction,
                self.max_completion_length,
            )

    def _tokenize_prompt(self, prompt, tools=None) -> list[int]:
        """Token ids of one prompt with the generation prompt, exactly as student prompts are tokenized."""
        if is_conversational({"prompt": prompt}):
            return self._tokenize_one(prompt, tools)
        return list(self.processing_class(text=[prompt])["input_ids"][0])

    def _student_hidden_pass(self, output) -> torch.Tensor:
        """The student's final hidden states [B, T, H] by a forward of its own (tests and tools; training reuses a
        forward GRPO makes anyway)."""
        input_ids = torch.cat([output["prompt_ids"], output["completion_ids"]], dim=1)
        attention_mask = torch.cat([output["prompt_mask"], output["completion_mask"]], dim=1)
        with torch.no_grad():
            return self._final_hidden(input_ids, attention_mask, output["completion_ids"].size(1))

    def _causal_lm(self):
        unwrapped = self.accelerator.unwrap_model(self.model)
        return unwrapped.get_base_model() if is_peft_model(unwrapped) else unwrapped

    _backbone_of_teacher = False  # set by `Teacher.weights` while the teacher's own model runs

    def _backbone(self):
        causal_lm = self.teacher.causal_lm() if self._backbone_of_teacher else self._causal_lm()
        return getattr(causal_lm, causal_lm.base_model_prefix)

    def _final_hidden(self, input_ids, attention_mask, keep: int) -> torch.Tensor:
        """Final hidden states [B, keep, H] at the positions that predict the last `keep` tokens.

        Runs the backbone only, so the LM head is applied later in chunks. Called like GRPOTrainer calls the model
        (no position ids): Qwen3's rotary attention depends on relative positions only, so left padding is harmless
        and student states read from GRPO's own forwards line up with these.
        """
        return completion_states(self._backbone_states(input_ids, attention_mask), keep)

    def _backbone_states(
        self, input_ids, attention_mask, position_ids=None, cache=None, after_cache: bool = False
    ) -> torch.Tensor:
        """The backbone's final hidden states [B, L, H], no gradient checkpointing (no-grad passes); with `cache`
        (a `DynamicCache`, filled in place) the inputs follow the tokens already in it.

        `after_cache`: `attention_mask` [B, S] covers the cached keys and the inputs, which are the last L of them.
        For SDPA and eager attention it is then handed over as one additive [B, 1, L, S] bias for every layer
        (`suffix_attention_bias`); flash-attention kernels take the 2-D mask as it is.
        """
        with checkpointing_paused(self.model), self.accelerator.autocast():
            if after_cache and self._causal_lm().config._attn_implementation in ("sdpa", "eager"):
                device_type = attention_mask.device.type
                if torch.is_autocast_enabled(device_type):
                    dtype = torch.get_autocast_dtype(device_type)
                else:
                    dtype = self._backbone().get_input_embeddings().weight.dtype
                attention_mask = suffix_attention_bias(attention_mask, input_ids.size(1), dtype)
            return self._backbone()(
                input_ids=input_ids,
                attention_mask=attention_mask,
                position_ids=position_ids,
                past_key_values=cache,
                use_cache=cache is not None,
            ).last_hidden_state

    # ----------------------------------------------------------------------------------------------------------------
    # Model card: TRL's, with local paths named as paths (TRL links every name to the Hub) and the credit settings.

    def create_model_card(self, model_name=None, dataset_name=None, tags=None):
        base_model = getattr(self.accelerator.unwrap_model(self.model).config, "_name_or_path", "") or None
        if is_peft_model(self.accelerator.unwrap_model(self.model)):
            base_model = getattr(self._causal_lm().config, "_name_or_path", "") or base_model
        hub_dataset = dataset_name if dataset_name and _is_hub_id(dataset_name) else None
        super().create_model_card(model_name=model_name, dataset_name=hub_dataset, tags=tags)
        if not self.is_world_process_zero():
            return
        path = os.path.join(self.args.output_dir, "README.md")
        with open(path, encoding="utf-8") as handle:
            lines = handle.read().split("\n")
        origin = "This model is a fine-tuned version of " + _name_or_link(base_model, "")
        if dataset_name:
            origin += " on the " + _name_or_link(dataset_name, "datasets/") + " dataset"
        lines = [origin + "." if line.startswith("This model is a fine-tuned version of") else line for line in lines]
        if not self.hub_model_id:  # not pushed: the quick start loads the saved folder
            lines = [line.replace('model="None"', f'model="{self.args.output_dir}"') for line in lines]
        at = next(
            (i + 1 for i, line in enumerate(lines) if line.startswith("This model was trained with")), len(lines)
        )
        lines[at:at] = ["", *self._credit_card_lines()]
        with open(path, "w", encoding="utf-8") as handle:
            handle.write("\n".join(lines))

    def _credit_card_lines(self) -> list[str]:
        """The model card's account of the credit assignment: the mode and the settings that shape its numbers."""
        args = self.args
        settings = {"credit": args.credit}
        if args.uses_teacher:
            settings.update(
                teacher=args.teacher,
                divergence=args.divergence if args.divergence != "topk" else f"topk (k={args.divergence_top_k})",
                onset_threshold=args.onset_threshold,
                entropy_threshold=args.entropy_threshold,
                normalize=args.normalize,
                max_segment_len=args.max_segment_len,
                weight_alpha=args.weight_alpha,
                weight_lambda=args.weight_lambda,
                weight_norm=args.weight_norm,
                weight_eps=args.weight_eps,
                failed_prefix_weight=args.failed_prefix_weight,
                distillation_weight=args.distillation_weight,
                teacher_reference=args.teacher_reference,
            )
            # The teacher kind's own knob: two runs differing only in it must not have the same card.
            if args.teacher == "periodic":
                settings.update(teacher_sync_steps=args.teacher_sync_steps)
            elif args.teacher == "ema":
                settings.update(teacher_ema_decay=args.teacher_ema_decay)
        if args.credit == "rlsd":
            settings.update(
                rlsd_lambda=args.rlsd_lambda,
                rlsd_eps=args.rlsd_eps,
                rlsd_lambda_decay_steps=args.rlsd_lambda_decay_steps,
                rlsd_lambda_warmup_steps=args.rlsd_lambda_warmup_steps,
            )
        if args.credit in ("gigpo", "gear+gigpo"):
            settings.update(gigpo_gamma=args.gigpo_gamma, gigpo_omega=args.gigpo_omega, gigpo_mode=args.gigpo_mode)
        settings.update(
            rewards=", ".join(self.reward_func_names),
            num_generations=self.num_generations,
            max_completion_length=self.max_completion_length,
            learning_rate=args.learning_rate,
            beta=args.beta,
        )
        return [
            "### Credit assignment",
            "",
            "Trained with gear_trl's `GEARTrainer` (a subclass of TRL's `GRPOTrainer`) with these settings:",
            "",
            *(f"- {name}: `{value}`" for name, value in settings.items()),
        ]

    # ----------------------------------------------------------------------------------------------------------------
    # Metrics: reduced over all ranks with one gather each, in the same order on every rank.

    def _rlsd_clipped(self, trace: CreditTrace) -> torch.Tensor:
        """Model tokens of rows with a teacher whose RLSD weight is at a clip bound (0 in other modes)."""
        bound = getattr(self, "_rlsd_lambda_now", 0.0) * self.args.rlsd_eps
        if self.args.credit != "rlsd" or bound == 0:
            return torch.zeros((), device=trace.mask.device)
        rows = trace.mask & trace.has_ground_truth[:, None]
        return (((trace.weights - 1).abs() >= bound * (1 - 1e-5)) & rows).float().sum()

    def _failed_prefix_tokens(self, trace: CreditTrace) -> torch.Tensor:
        """Model tokens before the first onset in failed rollouts with a teacher (0 outside `PREFIX_WEIGHT_MODES`,
        whose segments are not onsets or whose advantage is per token). Failed as in `credit/diagnostics.py`, whose
        `tokens_failed` is the share's denominator: a negative row sum of the advantages, whose sign is the trajectory
        advantage's since weights are >= 0."""
        if self.args.credit not in PREFIX_WEIGHT_MODES:
            return torch.zeros((), device=trace.mask.device)
        row_advantage = torch.where(trace.has_ground_truth, (trace.advantages * trace.mask).sum(dim=1), 0.0)
        return failed_prefix_mask(trace.segment_ids, trace.mask, row_advantage).float().sum()

    def _log_gear_metrics(self, mode, trace: CreditTrace, truncated: torch.Tensor, shared: torch.Tensor, control=None):
        kl, mask, segment_ids, weights, has_truth = (
            trace.kl,
            trace.mask,
            trace.segment_ids,
            trace.weights,
            trace.has_ground_truth,
        )
        device = mask.device
        m = mask.float()
        num_segments = (segment_ids.max(dim=1).values + 1).clamp(min=0).sum()
        in_segment = ((segment_ids >= 0) & mask).sum()
        w = weights[mask]
        # The teacher controls (Teacher.control_kl): per-row KL sums without a reference and with a wrong one, and
        # the largest KL without a reference.
        if control is None:
            control = torch.full((kl.size(0), 3), float("nan"), device=device)
        floor_rows, wrong_rows = ~control[:, 0].isnan(), ~control[:, 1].isnan() & has_truth
        row_kl, row_tokens = (kl * m).sum(dim=1), m.sum(dim=1)
        sums = torch.stack(
            [
                (kl * m).sum(),
                m.sum(),
                num_segments.float(),
                in_segment.float(),
                w.sum(),
                (w * w).sum(),
                has_truth.numel() - has_truth.float().sum(),
                truncated.float().sum(),
                torch.tensor(float(has_truth.numel()), device=device),
                shared.float().sum(),
                # the noise floor: KL of rows whose teacher prompt is the student's, and rows below onset_min_kl
                (kl * m * ~has_truth[:, None]).sum() + control[floor_rows, 0].sum(),
                (m * ~has_truth[:, None]).sum() + row_tokens[floor_rows].sum(),
                trace.below_floor.float().sum() if trace.below_floor is not None else torch.zeros((), device=device),
                # rlsd: model tokens whose weight sits at a clip bound, 1 +- lam * eps
                self._rlsd_clipped(trace),
                # the wrong-reference control: its KL and the same rows' own-reference KL
                control[wrong_rows, 1].sum(),
                row_kl[wrong_rows].sum(),
                # failed rollouts' model tokens before the teacher's first onset (failed_prefix_weight scales them)
                self._failed_prefix_tokens(trace),
                # distillation_weight: the distillation term's share of the loss's advantage mass
                *(
                    distillation_share(
                        trace.advantages, trace.log_ratio, mask, self.args.distillation_weight, trace.distill_rows
                    )
                    if trace.distilled is not None
                    else torch.zeros(2, device=device)
                ),
                # label-free diagnostics, reduced with the rest (credit/diagnostics.py)
                *failure_contrast_sums(kl, mask, segment_ids, trace.advantages, has_truth),
                # onsets in passed rollouts, and those on tokens the teacher likes more than the student (credit/signed)
                *(
                    teacher_supported_onsets(segment_ids, trace.log_ratio, mask, trace.advantages, has_truth)
                    if trace.log_ratio is not None
                    else torch.zeros(2, device=device)
                ),
            ]
        )
        big = torch.finfo(torch.float32).max
        # rows without a reference and the control rows shown the student's prompt: a step whose floor is only the
        # control rows' still has a largest floor KL (the sentinel -big is for a rank with neither)
        floor_kl = torch.cat([kl[mask & ~has_truth[:, None]], control[floor_rows, 2].nan_to_num(nan=-big)])
        extremes = torch.stack(
            [
                kl[mask].max() if w.numel() else torch.tensor(0.0, device=device),
                w.max() if w.numel() else torch.tensor(-big, device=device),
                -w.min() if w.numel() else torch.tensor(-big, device=device),
                floor_kl.max() if floor_kl.numel() else torch.tensor(-big, device=device),
            ]
        )
        sums = self.accelerator.reduce(sums, reduction="sum")
        extremes = self.accelerator.gather(extremes[None]).max(dim=0).values
        (kl_sum, tokens, segments, in_seg, w_sum, w_sq, no_truth, n_truncated, rows, n_shared) = sums[:10].tolist()
        floor_kl_sum, floor_tokens, n_below, n_clipped, wrong_kl, right_kl, n_prefix = sums[10:17].tolist()
        distill_mass, advantage_mass = sums[17:19].tolist()
        contrast = sums[19:-2]
        tokens_ = max(tokens, 1.0)
        w_mean = w_sum / tokens_
        metrics = {
            "kl_mean": kl_sum / tokens_,
            "kl_max": extremes[0].item(),
            "onset_rate": segments / tokens_,
            "segment_len_mean": in_seg / max(segments, 1.0),
            "in_segment_frac": in_seg / tokens_,
            "weight_mean": w_mean,
            "weight_std": max(w_sq / tokens_ - w_mean**2, 0.0) ** 0.5,
            "weight_min": -extremes[2].item() if tokens else 0.0,
            "weight_max": extremes[1].item() if tokens else 0.0,
            "no_ground_truth_frac": no_truth / max(rows, 1.0),
            "teacher_truncated_frac": n_truncated / max(rows, 1.0),
            "teacher_prefix_shared_frac": n_shared / max(rows, 1.0),
            # NaN (left out of the interval's mean) in a step without such rows
            "kl_floor": floor_kl_sum / floor_tokens if floor_tokens else float("nan"),
            # the largest of those rows' per-row largest KLs, against which `onset_min_kl` is set
            "kl_floor_max": extremes[3].item() if floor_tokens else float("nan"),
            "below_floor_frac": n_below / max(rows - no_truth, 1.0),
        }
        # Undefined ratios (no failed or no passed rollout in the step) go in as NaN, which TRL's `log` leaves out of
        # the mean over the logging interval (None when no step of it had one).
        if self.args.credit == "rlsd":
            metrics["rlsd_lambda"] = self._rlsd_lambda_now
            metrics["rlsd_clip_frac"] = n_clipped / tokens_
        n_supported, n_onsets = sums[-2:].tolist()
        if self.args.wants_log_ratio:
            metrics["onsets_teacher_supported_frac"] = n_supported / n_onsets if n_onsets else float("nan")
        # NaN in a step without a control row (left out of the interval's mean, like kl_floor)
        metrics["kl_wrong_over_right"] = wrong_kl / right_kl if right_kl > 0 else float("nan")
        if self.args.distillation_weight > 0:  # NaN in a step whose advantages are all 0 on rows with a teacher
            metrics["distill_share"] = distill_mass / advantage_mass if advantage_mass > 0 else float("nan")
        if self.args.credit in PREFIX_WEIGHT_MODES:
            n_failed = contrast[CONTRAST_SUMS.index("tokens_failed")].item()
            metrics["failed_prefix_frac"] = n_prefix / n_failed if n_failed else float("nan")
        for name, value in failure_contrast(contrast).items():
            metrics[name] = float("nan") if value is None else value
        for name in self._meaningless_metrics():
            metrics.pop(name, None)
        if self.args.credit == "rlsd":  # its `kl` is the signed log-ratio log pS - log pT of the sampled token
            metrics["log_ratio_mean"] = kl_sum / tokens_
        for name, value in metrics.items():
            self._metrics[mode][f"gear/{name}"].append(value)

    RLSD_UNLOGGED = (
        "kl_mean",
        "kl_max",
        "onset_rate",
        "segment_len_mean",
        "in_segment_frac",
        "kl_floor",
        "kl_floor_max",
        "below_floor_frac",
        "kl_wrong_over_right",
        "kl_failed_over_passed",
        "onsets_in_failed_frac",
    )
    """`gear/` metrics RLSD does not log: it has no segments, and its per-token signal is a signed log-ratio, not a
    KL (logged as `gear/log_ratio_mean` instead), so KL means, floors and ratios of them would read as nonsense."""
    SIBLING_UNLOGGED = ("kl_wrong_over_right", "no_ground_truth_frac")
    """`gear/` metrics `teacher_reference: sibling` does not log: no row is shown a ground truth, so there is none to
    swap for a wrong one, and rows without a sibling are `gear/no_sibling_frac`."""

    def _meaningless_metrics(self) -> tuple[str, ...]:
        """The `gear/` metrics this configuration leaves out (decided by the configuration alone: every rank agrees);
        docs/metrics.md tabulates them by mode and teacher."""
        left_out = self.RLSD_UNLOGGED if self.args.credit == "rlsd" else ()
        if self.args.teacher_reference == "sibling":
            left_out += self.SIBLING_UNLOGGED
        return left_out


def _as_user_error(check, *args) -> None:
    """Run a configuration check whose `ValueError` is a user's to fix, as a `UserInputError` (one line at the CLI)."""
    try:
        check(*args)
    except UserInputError:
        raise
    except ValueError as err:
        raise UserInputError(str(err)) from err


def _is_hub_id(name: str) -> bool:
    """Whether `name` names a Hub repository (`org/name` or `name`) rather than a local file or folder."""
    return not os.path.exists(os.path.expanduser(name)) and not looks_like_local_path(name)


def _name_or_link(name: str | None, kind: str) -> str:
    """A Hub id as a link to its page (`kind`: "" for models, "datasets/"), a local path as a path."""
    if not name:
        return "a local model"
    if _is_hub_id(name):
        return f"[{name}](https://huggingface.co/{kind}{name})"
    return f"`{name}` (a local path)"


def _model_token_mask(batch) -> torch.Tensor:
    """Model-written, non-padding completion tokens, [B, T] bool."""
    mask = batch["completion_mask"].bool()
    if "tool_mask" in batch:
        mask = mask & batch["tool_mask"].bool()
    return mask


def completion_states(hidden: torch.Tensor, keep: int) -> torch.Tensor:
    """The states [B, keep, H] that predict the last `keep` tokens, out of a backbone's [B, L, H], as a copy.

    A slice would share the whole tensor's storage and keep every prompt position alive as long as it is held: in
    TRL's chunked passes, every chunk's [b, prompt + completion, H] until the batch is done (GBs at agent prompt
    lengths). Detached: these states feed no-grad statistics only.
    """
    return hidden[:, -keep - 1 : -1].detach().clone(memory_format=torch.contiguous_format)


@contextmanager
def checkpointing_paused(model: torch.nn.Module):
    """Gradient checkpointing off for the block, by the modules' own `gradient_checkpointing` flags.

    TRL's `disable_gradient_checkpointing` calls `gradient_checkpointing_enable` on the way out, which registers one
    more `enable_input_require_grads` forward hook on the input embeddings every time (and a PEFT model never removes
    them): once per backbone call of every teacher pass, that is a pile of hooks growing without bound over a run.
    Flipping the flags changes nothing else and adds nothing. (No-grad passes need checkpointing off because a
    checkpointed layer in training mode drops `past_key_values`, which the shared-prefix teacher pass relies on.)
    """
    switched = [m for m in model.modules() if getattr(m, "gradient_checkpointing", False) is True]
    for module in switched:
        module.gradient_checkpointing = False
    try:
        yield
    finally:
        for module in switched:
            module.gradient_checkpointing = True


@contextmanager
def no_new_input_grad_hooks(model: torch.nn.Module):
    """Remove, after the block, forward hooks the block added to the input embeddings that duplicate one already
    there (same function): TRL's generation step pauses checkpointing through `gradient_checkpointing_enable`, which
    re-registers `enable_input_require_grads`' hook each time (two a step), and the earlier one is never removed."""
    embeddings = model.get_input_embeddings()
    before = dict(embeddings._forward_hooks)
    owners = [m for m in model.modules() if hasattr(m, "_require_grads_hooks")]
    handles = {id(m): (m._require_grads_hooks, getattr(m, "_require_grads_hook", None)) for m in owners}
    try:
        yield
    finally:
        # Only duplicates of hooks still there (a model whose checkpointing switch removes its hooks keeps the new).
        kept = [key for key in before if key in embeddings._forward_hooks]
        kinds = {_hook_kind(before[key]) for key in kept}
        for key, hook in list(embeddings._forward_hooks.items()):
            if key not in before and _hook_kind(hook) in kinds:
                del embeddings._forward_hooks[key]
                embeddings._forward_hooks_with_kwargs.pop(key, None)
                embeddings._forward_hooks_always_called.pop(key, None)
        if len(kept) == len(before):  # the handles transformers keeps must stay the live ones
            for module in owners:
                module._require_grads_hooks, first = handles[id(module)]
                if first is not None:
                    module._require_grads_hook = first


def _hook_kind(hook) -> str:
    return f"{getattr(hook, '__module__', '')}.{getattr(hook, '__qualname__', type(hook).__name__)}"


def _turn_starts(mask: torch.Tensor) -> torch.Tensor:
    """True at the first model token of each run of model tokens (each assistant turn), [B, T] bool."""
    previous = torch.zeros_like(mask)
    previous[:, 1:] = mask[:, :-1]
    return mask & ~previous


def _ground_truth_as_json(dataset, column: str):
    """`dataset` with a ground-truth column of lists or dicts (tool calls given as Python objects) rewritten as JSON
    text (`gear_trl.data.tool_use.json_text`), the form the rewards and the teacher read. Other datasets are returned
    as they are."""
    from datasets import Value

    if not isinstance(dataset, Dataset) or column not in dataset.column_names:
        return dataset
    if isinstance(dataset.features[column], Value):
        return dataset
    dataset = dataset.map(lambda row: {column: json_text(row[column])}, desc=f"Writing {column} as JSON")
    return dataset.cast_column(column, Value("string"))


def _check_some_ground_truth(dataset, column: str, credit: str) -> None:
    """Refuse a `Dataset` none of whose rows has a ground truth in `column` (a dataset whose rows cannot be read
    now, such as an IterableDataset, is checked on the first batch instead)."""
    if not isinstance(dataset, Dataset) or column not in dataset.column_names or len(dataset) == 0:
        return
    if not any(has_ground_truth(value) for value in dataset[column]):
        raise UserInputError(
            f"No row of `train_dataset` has a ground truth in column {column!r}, which GEAR's teacher "
            f"(`credit: {credit}`) reads: every row would get plain GRPO weights at GEAR's cost. Fill that column, "
            f"set `ground_truth_column`, {NO_REFERENCE_HINT}"
        )


NO_REFERENCE_HINT = (
    "or, for rows without a reference, set `teacher_reference: sibling`: the teacher is shown a successful rollout "
    "of the same group (reward >= `teacher_sibling_min_reward`), so it needs groups with a success and gives a group "
    "without one plain GRPO weights; or use `credit: none` for plain GRPO."
)
"""How to train GEAR on rows without a reference, said wherever a missing ground truth stops a run."""


def _check_ground_truth_column(dataset, column: str, name: str) -> None:
    if dataset is None:
        return
    datasets = dataset.values() if isinstance(dataset, dict) else [dataset]
    for part in datasets:
        columns = getattr(part, "column_names", None)
        if columns is None:  # e.g. an IterableDataset whose features are unknown until iterated
            continue
        if column not in columns:
            raise UserInputError(
                f"GEAR's teacher needs the ground-truth column {column!r} in `{name}`, but its columns are "
                f"{sorted(columns)}. Set `ground_truth_column` to the right column, map your data with a dataset "
                f"adapter (`dataset_format`), {NO_REFERENCE_HINT}"
            )


def lm_head_transform(config) -> tuple[float, float | None]:
    """The model's own logit transformation, as TRL's fused LM head reads it: `(scale, softcap)` with logits
    `softcap * tanh(scale * z / softcap)` (no tanh when softcap is None). Cohere scales by `logit_scale`, Falcon-H1 by
    `lm_head_multiplier`, Granite divides by `logits_scaling`, Gemma 2/3 soft-cap with `final_logit_softcapping`."""
    config = config.get_text_config()
    scale = getattr(config, "logit_scale", None)
    if scale is None:
        scale = getattr(config, "output_multiplier", None)
    if scale is None:
        scale = getattr(config, "lm_head_multiplier", None)
    if scale is None and getattr(config, "logits_scaling", None) is not None:
        scale = config.logits_scaling if config.model_type == "hyperclovax" else 1.0 / config.logits_scaling
    return (1.0 if scale is None else float(scale)), getattr(config, "final_logit_softcapping", None)


def _switch_off_dropout(model) -> Counter:
    """Set every dropout probability in `model` to 0 (`nn.Dropout` modules, PEFT's `lora_dropout` among them, and the
    `attention_dropout` attribute attention layers read in training mode); counts what was on, by kind."""
    switched_off = Counter()
    for name, module in model.named_modules():
        if isinstance(module, torch.nn.Dropout) and module.p > 0:
            kind = next((part for part in reversed(name.split(".")) if "dropout" in part), type(module).__name__)
            switched_off[f"{kind} p={module.p}"] += 1
            module.p = 0.0
        rate = getattr(module, "attention_dropout", None)
        if isinstance(rate, float) and rate > 0:
            switched_off[f"attention_dropout p={rate}"] += 1
            module.attention_dropout = 0.0
    return switched_off


def _is_loaded_peft_model(model) -> bool:
    return isinstance(model, torch.nn.Module) and is_peft_model(model)  # `model` may still be a name or path


def _may_have_column(dataset, column: str) -> bool:
    if dataset is None:
        return False
    parts = dataset.values() if isinstance(dataset, dict) else [dataset]
    for part in parts:
        columns = getattr(part, "column_names", None)
        if columns is None or column in columns:
            return True
    return False
