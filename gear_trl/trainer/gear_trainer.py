"""`GEARTrainer`: TRL's GRPOTrainer with GEAR's per-token advantage weights.

Glue only: the mathematics lives in `gear_trl.credit`, the teacher in `gear_trl.teacher`. After GRPO has generated
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
import math
import os
import textwrap
import warnings
from contextlib import nullcontext
from typing import ClassVar

import torch
from accelerate.utils import gather_object, is_peft_model
from trl import GRPOTrainer
from trl.data_utils import is_conversational
from trl.trainer.utils import maybe_gather_lm_head_ctx

from ..credit import (
    CreditInputs,
    CreditTrace,
    GroupBatch,
    GroupCredit,
    assign_credit,
    group_credit,
    reverse_kl_and_entropy,
)
from ..data.math_tasks import REFERENCE_SOLUTION_COLUMN
from ..envs.checks import check_environments, check_rollout_func
from ..envs.rollout import ToolRolloutMixin, harden_response_parser, step_anchors, tool_stats
from ..inputs.errors import UserInputError
from ..inputs.preflight import check_trackers, reward_parameter_problems
from ..rewards.guard import guard_reward_func
from ..teacher.kinds import teacher_kind
from ..teacher.prompts import final_observation, suffix_attention_bias
from ..teacher.teacher import HostParts, Teacher, copy_initial_adapter
from .callbacks import CreditReportCallback, DistillationMonitor
from .checkpoints import CheckpointSaveError, io_failure_cause, save_failure_message
from .devices import check_single_device
from .fused_head import FusedDivergence, divergence_in_log_probs
from .gear_config import GEARConfig, check_peft_for_teacher, check_vllm_server_tools
from .gear_metrics import GearMetricsMixin
from .ground_truth import (
    NO_REFERENCE_HINT,
    check_ground_truth_column,
    check_some_ground_truth,
    ground_truth_as_json,
    may_have_column,
)
from .hub import check_hub_access
from .model_card import CreditCardMixin
from .model_parts import (
    checkpointing_paused,
    completion_states,
    is_loaded_peft_model,
    lm_head_transform,
    model_token_mask,
    no_new_input_grad_hooks,
    switch_off_dropout,
    turn_starts,
)
from .step_metrics import StepMetrics

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
    "gear_group_signal",
    "gear_group_scale",
)


TRUNCATION_WARN_FRACTION = 0.2
"""Warn (once) when more than this share of a batch's tool rollouts ran out of `max_completion_length`."""


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


class GEARTrainer(CreditCardMixin, GearMetricsMixin, ToolRolloutMixin, GRPOTrainer):
    """GRPO whose advantage is redistributed over tokens by GEAR (see `GEARConfig` for every knob).

    Takes the same arguments as [`~trl.GRPOTrainer`]; `args` must be a [`GEARConfig`]. The training dataset must have
    the column named by `args.ground_truth_column` unless the configuration runs no teacher (`GEARConfig.uses_teacher`).
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
        train_dataset = ground_truth_as_json(train_dataset, args.ground_truth_column)
        if kwargs.get("eval_dataset") is not None:
            kwargs["eval_dataset"] = ground_truth_as_json(kwargs["eval_dataset"], args.ground_truth_column)
        if args.uses_teacher and not args.teacher_reads_siblings:  # a successful sibling needs no ground truth
            if train_dataset is None:
                raise UserInputError(
                    f"{args.teacher_setting} runs GEAR's teacher, which reads each row's ground truth from the "
                    f"dataset column {args.ground_truth_column!r}, but there is no `train_dataset` (the environment "
                    "supplies the prompts): every row would get plain GRPO weights at GEAR's cost. Pass a "
                    f"`train_dataset` with that column, {NO_REFERENCE_HINT}"
                )
            check_ground_truth_column(train_dataset, args.ground_truth_column, "train_dataset")
            check_ground_truth_column(kwargs.get("eval_dataset"), args.ground_truth_column, "eval_dataset")
            check_some_ground_truth(train_dataset, args.ground_truth_column, args.teacher_setting)
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
        if teacher_kind(args.teacher).weights == "initial" and is_loaded_peft_model(model) and args.beta == 0.0:
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
        # The teacher's weights, prompts and pass (gear_trl/teacher/teacher.py); None when no mode reads it.
        self.teacher = Teacher(self) if args.uses_teacher else None
        if args.uses_teacher:
            # The teacher pass and the student pass it is compared with (GRPO's no-grad pass or the loss's forward)
            # run in training mode: with dropout on they would see different random networks, and the KL between
            # two identical prompts would be noise. Both must see the same dropout-free network.
            switched_off = switch_off_dropout(self.model)
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
        self._logs_tool_metrics = bool(self.tools) or any(may_have_column(d, "tools") for d in datasets)
        if args.credit_report_steps > 0 and args.uses_teacher:
            self.add_callback(CreditReportCallback(self))
        self.step_metrics = StepMetrics(self, logs_teacher=args.uses_teacher)  # perf/ metrics (step_metrics.py)
        self.add_callback(self.step_metrics)
        # the collapse monitor of `distillation_weight` (callbacks.DistillationMonitor, docs/metrics.md)
        self.distillation_monitor = DistillationMonitor(args) if args.distillation_weight > 0 else None

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
        mask = model_token_mask(output)
        if self._logs_tool_metrics:
            self._log_tool_metrics(mode, record)

        # the mode's parts that span a prompt's group (GiGPO's step advantages, what its distillation reads of each
        # group): gear_trl.credit.group_credit, with this trainer's gathers; which gathers run the configuration decides
        grouped = self._group_credit(mode, mask, record, output["advantages"])
        if grouped.advantages is not None:
            output["advantages"] = grouped.advantages
        for name, value in grouped.metrics.items():
            self._metrics[mode][name].append(value)
        if not self.args.uses_teacher:
            return output

        ground_truths = [row.get(self.args.ground_truth_column) for row in inputs]
        # what each row's teacher is shown (its ground truth or a sibling's answer), for the credit reports: inspect
        # reads it here, the callback from the batch (a list, which TRL's split and shuffle carry with the rows)
        self.last_teacher_references = self.teacher.references(
            mode, ground_truths, record.completions, record.rewards_per_func
        )
        ground_truths = [reference for _, reference in self.last_teacher_references]
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
        # the rows' flags, [B] bool each, from one host tensor (each tensor made is host time, a copy, on a GPU)
        flags = [[bool(f) for f in teacher.has_ground_truth], [bool(f) for f in teacher.truncated]]
        flags = torch.tensor([*flags, [self.teacher.pass_shared] * len(inputs)], dtype=torch.bool, device=mask.device)
        output["gear_has_truth"], output["gear_truncated"], output["gear_teacher_shared"] = flags.unbind()
        # Rows some reward function scored (rewards_per_func is the whole generation batch's; TRL slices it the same
        # way): GRPO zeroes an unscorable row's advantage, and distillation_weight leaves it alone too.
        start = self.accelerator.process_index * len(inputs)
        scorable = ~torch.isnan(record.rewards_per_func[start : start + len(inputs)]).all(dim=1)
        output["gear_scorable"] = scorable if scorable.device == mask.device else scorable.to(mask.device)
        output["gear_teacher_references"] = list(self.last_teacher_references)
        if grouped.group_signal is not None:
            output["gear_group_signal"] = grouped.group_signal
        if grouped.group_scale is not None:
            output["gear_group_scale"] = grouped.group_scale
        if self._student_hidden is not None:
            divergence = self._divergence(output, self._student_hidden)
            output["advantages"] = self._gear_advantages(output, divergence, mode)
            self._student_hidden = None
            for key in GEAR_BATCH_KEYS:
                output.pop(key, None)  # the group keys exist only where the distillation reads them
        return output

    def _group_credit(self, mode: str, mask, record, advantages) -> GroupCredit:
        """`gear_trl.credit.group_credit` for this rank's rows: the distributed glue only (the whole generation
        batch's rewards, this rank's index, the step anchors of its rollouts, accelerate's gathers)."""
        history = record.state_history

        def anchors() -> list[list[str]]:
            return [
                step_anchors(record.prompts[i], record.completions[i], history[i] if history else None)
                for i in range(mask.size(0))
            ]

        batch = GroupBatch(
            mask=mask,
            advantages=advantages,
            rewards_per_func=record.rewards_per_func,
            reward_weights=self.reward_weights,
            group_size=self.group_size(mode),
            rank=self.accelerator.process_index,
            anchors=anchors,
            gather_object=gather_object,
            gather=self.accelerator.gather,
        )
        return group_credit(self.args.credit_mode, self.args, batch)

    def _calculate_rewards(self, inputs, prompts, completions, completion_ids_list):
        """TRL's rewards ([B_global, n_sources], gathered over ranks), with the completions no source scored counted:
        TRL gives them advantage 0 (docs/bad-input.md); `rewards/unscorable_frac` logs their share, a warning names
        the sources the first time, and a step in which no completion was scored says so every time."""
        rewards_per_func = super()._calculate_rewards(inputs, prompts, completions, completion_ids_list)
        unscorable = torch.isnan(rewards_per_func).all(dim=1).float()
        mode = "train" if self.model.training else "eval"
        # One host copy for the unscorable share, its count and the reward functions' own metrics (`_log_metric`).
        stats = torch.stack([unscorable.mean(), unscorable.sum()])
        pending = self.__dict__.pop("_reward_metrics", {})
        names = sorted(pending)
        if self.accelerator.num_processes > 1:  # every rank lists every name, as TRL's flush does
            names = sorted(set(gather_object(names)))
        if names:  # TRL's flush: per name, (sum, count) over the processes; here in one tensor and one collective
            local = [[sum(pending.get(name, [])), len(pending.get(name, []))] for name in names]
            local = torch.tensor(local, dtype=torch.float32, device=self.accelerator.device)
            totals = self.accelerator.gather(local).view(-1, len(names), 2).sum(dim=0)
            stats = torch.cat([stats, totals.flatten()])
        fraction, count, *totals = stats.tolist()
        self._metrics[mode]["rewards/unscorable_frac"].append(fraction)
        for name, total, number in zip(names, totals[::2], totals[1::2], strict=True):
            self._metrics[mode][name].append(total / number)
        sources = ", ".join(self.reward_func_names)
        if not self.accelerator.is_main_process:  # gathered rewards: every rank would say the same
            return rewards_per_func
        if count == unscorable.numel():
            logger.warning(
                "No reward source (%s) returned a usable value (a finite number) for any of the %d completions of "
                "this %s step: every advantage is 0 and the step learns nothing. Check that the rewards (or the "
                "environment's get_reward) return numbers for these rows.",
                sources,
                unscorable.numel(),
                mode,
            )
        elif count > 0 and not self._warned_unscorable:
            self._warned_unscorable = True
            logger.warning(
                "%d of %d completions got no usable value (None or non-finite) from any reward source (%s); they get "
                "advantage 0 and are counted in rewards/unscorable_frac. Further occurrences are only counted.",
                int(count),
                unscorable.numel(),
                sources,
            )
        return rewards_per_func

    def _log_metric(self, name: str, value: float) -> None:
        """A reward function's metric (TRL's `log_metric`): kept here and averaged over the processes in
        `_calculate_rewards` as TRL's flush would (the sum of the values over their count), all of the step's in one
        collective and one host copy, where TRL's flush makes one of each per metric (the reward guard logs one per
        reward function)."""
        self.__dict__.setdefault("_reward_metrics", {}).setdefault(name, []).append(value)

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

    def log(self, logs: dict[str, float], start_time: float | None = None) -> None:
        """GRPO's log, with the collapse monitor's metrics of a training log added before GRPO averages the step
        metrics (they go to the trackers and `log_history` with the rest)."""
        monitor = getattr(self, "distillation_monitor", None)
        if monitor is not None and self.model.training and self._metrics["train"].get("reward"):
            if not monitor.reward:  # a resumed run's history is in its checkpoint's log_history (none in a new run)
                monitor.resume(self.state.log_history)

            def mean(name):
                values = [v for v in self._metrics["train"].get(name, []) if not math.isnan(v)]
                return sum(values) / len(values) if values else None

            for name, value in monitor.observe(mean("gear/distill_share"), mean("reward"), mean("entropy")).items():
                self._metrics["train"][name].append(value)
        return super().log(logs, start_time)

    # ----------------------------------------------------------------------------------------------------------------
    # The teacher's host (`gear_trl.teacher.teacher.TeacherHost`): what the teacher reads of this trainer. Each method
    # looks up the trainer's own at the call, so a subclass's or a test's replacement of one is what the teacher calls.

    def teacher_parts(self) -> HostParts:
        return HostParts(
            policy=self.model,
            causal_lm=self._causal_lm(),
            ref_model=self.ref_model,
            tokenizer=self._tokenizer,
            processing_class=self.processing_class,
            chat_template=self.chat_template,
            quantization_config=self._quantization_config,
            is_deepspeed_enabled=self.is_deepspeed_enabled,
            reward_weights=self.reward_weights,
            resume_checkpoint=getattr(self, "_gear_resume_from", None),
        )

    def tokenize_prompt(self, prompt, tools=None) -> list[int]:
        return self._tokenize_prompt(prompt, tools)

    def backbone_states(self, input_ids, attention_mask, position_ids=None, cache=None, after_cache=False):
        return self._backbone_states(input_ids, attention_mask, position_ids, cache, after_cache)

    def final_hidden(self, input_ids, attention_mask, keep: int) -> torch.Tensor:
        return self._final_hidden(input_ids, attention_mask, keep)

    def divergence(self, batch, student_hidden) -> tuple:
        return self._divergence(batch, student_hidden)

    def use_teacher_backbone(self, on: bool) -> None:
        self._backbone_of_teacher = on

    def group_size(self, mode: str) -> int:
        return self.num_generations if mode == "train" else self.num_generations_eval

    def log_teacher_metric(self, mode: str, name: str, value: float) -> None:
        self._metrics[mode][name].append(value)

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
                model_token_mask(batch),
                chunk_size=self.args.divergence_chunk_size,
                divergence=self.args.divergence_signal,
                top_k=self.args.divergence_top_k,
                teacher_has_own_head=self.teacher.model is not None,
                with_log_ratio=self.args.wants_log_ratio,
                with_agreement=self.args.wants_agreement,
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
            self._student_hidden = _joined(captured)
            return result
        # The loss's forward: the advantages are read right after this returns.
        self._pending_gear_batch = None
        if fused.kl is not None:
            divergence = (fused.kl, fused.entropy, fused.log_ratio, fused.agreement)
        else:
            if not self._reported_separate_divergence:
                self._reported_separate_divergence = True
                logger.info("GEAR computes its divergence in a pass of its own: %s.", fused.skipped)
            divergence = self._divergence(batch, _joined(captured))
        mode = "train" if self.model.training else "eval"
        batch["advantages"] = self._gear_advantages(batch, divergence, mode)
        return result

    @torch.no_grad()
    def _gear_advantages(self, batch, divergence: tuple, mode: str) -> torch.Tensor:
        """Per-token advantages A_i * w_t [B, T] from the batch's reverse KL, student entropy and sampled-token log
        pT - log pS ([B, T] each, None unless `wants_log_ratio`), and with `wants_agreement` pT(y_t) and
        sum_v pS(v) pT(v) ([2, B, T], else None)."""
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
        [B, T], and (with `wants_agreement`, else None) pT(y_t) and sum_v pS(v) pT(v) [2, B, T], from student and
        teacher final hidden states [B, T, H], by a pass of the LM head of their own."""
        causal_lm = self._causal_lm()
        lm_head = causal_lm.get_output_embeddings()
        logit_scale, softcap = lm_head_transform(causal_lm.config)
        # A teacher model of its own has its own head (trained too under full fine-tuning).
        teacher_lm = self.teacher.causal_lm()
        teacher_head = teacher_lm.get_output_embeddings() if teacher_lm is not None else None
        mask = model_token_mask(batch)
        log_ratio = mask.new_zeros(mask.shape, dtype=torch.float32) if self.args.wants_log_ratio else None
        agreement = mask.new_zeros((2, *mask.shape), dtype=torch.float32) if self.args.wants_agreement else None
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
                agreement_out=agreement,
            )
        return kl, entropy, log_ratio, agreement

    @torch.no_grad()
    def _credit(self, batch, divergence: tuple) -> CreditTrace:
        """The credit of `args.credit`'s record for this batch (`gear_trl.credit.assign_credit`: the mode, the
        fallback for rows without a ground truth, its distillation term), from the batch and the divergence pass."""
        kl, entropy, log_ratio, agreement = divergence
        mask = model_token_mask(batch)
        inputs = CreditInputs(
            kl=kl,
            entropy=entropy,
            log_ratio=log_ratio,
            mask=mask,
            base=batch["gear_base_advantages"],
            step=self.state.global_step,
            turn_starts=turn_starts(mask) if "tool_mask" in batch else None,
            completion_ids=batch["completion_ids"],
            prompt_ids=batch["prompt_ids"],
            tokenizer=getattr(self.processing_class, "tokenizer", self.processing_class),
            agreement=agreement,
            group_signal=batch.get("gear_group_signal"),
            group_scale=batch.get("gear_group_scale"),
            group_size=self.num_generations,
        )
        # `gear_scorable` is absent from a batch built by hand: every row scored
        return assign_credit(
            self.args.credit_mode, self.args, inputs, batch["gear_has_truth"], batch.get("gear_scorable")
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
            f"{self.args.teacher_setting} gives such rows plain GRPO weights (gear/no_ground_truth_frac = 1) while "
            "still running the teacher pass. Put the ground truth in that column, or train with `credit: none`."
        )
        logger.warning(message)
        warnings.warn(message, stacklevel=2)

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
    """Calls per tool over which `_warn_failing_tools` judges a tool (our choice: enough calls that one bad batch of a
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


def _joined(states: list[torch.Tensor]) -> torch.Tensor:
    """The [B, T, H] states the hook kept, forward by forward: one forward's as they are (`completion_states` made
    them a copy of their own), several joined."""
    return states[0] if len(states) == 1 else torch.cat(states)


def _as_user_error(check, *args) -> None:
    """Run a configuration check whose `ValueError` is a user's to fix, as a `UserInputError` (one line at the CLI)."""
    try:
        check(*args)
    except UserInputError:
        raise
    except ValueError as err:
        raise UserInputError(str(err)) from err
