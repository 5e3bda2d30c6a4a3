"""`GEARTrainer`: TRL's GRPOTrainer with GEAR's per-token advantage weights.

Glue only: the mathematics lives in `gear_trl.credit`, teacher prompts in `gear_trl.teacher`. After GRPO has generated
and scored a batch, the trainer

1. builds teacher prompts (the prompt with the ground truth in it) and appends the same completion tokens,
2. runs the student and the teacher without gradients up to their final hidden states,
3. computes reverse KL and entropy through the LM head chunk by chunk (never a [B, T, V] tensor),
4. turns them into per-token weights and hands `advantages[:, None] * weights` to GRPO's unchanged loss.

Every rank makes the same forward calls in the same order, whatever its data, so ZeRO-3's collective parameter
gathers stay in lockstep: rows without a ground truth still go through the teacher pass and get weight 1 afterwards.
"""

from __future__ import annotations

import textwrap
from contextlib import nullcontext

import torch
from accelerate.utils import is_peft_model
from trl import GRPOTrainer
from trl.data_utils import is_conversational
from trl.models.utils import disable_gradient_checkpointing
from trl.trainer.utils import maybe_gather_lm_head_ctx, pad, use_adapter

from .config import GEARConfig
from .credit import reverse_kl_and_entropy, segment_signal, weights_from_signal
from .hub import check_hub_access
from .teacher import TeacherPromptBuilder

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


class GEARTrainer(GRPOTrainer):
    """GRPO whose advantage is redistributed over tokens by GEAR (see `GEARConfig` for every knob).

    Takes the same arguments as [`~trl.GRPOTrainer`]; `args` must be a [`GEARConfig`]. The training dataset must have
    the column named by `args.ground_truth_column` unless `args.credit` runs no teacher (`none`, `gigpo`).
    """

    _tag_names = ["trl", "grpo", "gear"]
    _name = "GEAR"
    _paper = GEAR_PAPER

    def __init__(self, model, reward_funcs=None, args: GEARConfig | None = None, train_dataset=None, **kwargs):
        if args is None:
            args = GEARConfig(output_dir="GEAR")
        if not isinstance(args, GEARConfig):
            raise TypeError(f"`args` must be a GEARConfig, got {type(args).__name__}.")
        # Fail before any model is loaded or any step is spent.
        if args.push_to_hub:
            check_hub_access(args.hub_token)
        if args.uses_teacher:
            _check_ground_truth_column(train_dataset, args.ground_truth_column, "train_dataset")
            _check_ground_truth_column(kwargs.get("eval_dataset"), args.ground_truth_column, "eval_dataset")
        super().__init__(model, reward_funcs, args=args, train_dataset=train_dataset, **kwargs)
        if args.teacher == "base" and not is_peft_model(self.model):
            raise ValueError(
                "`teacher: base` uses the initial model by disabling the PEFT adapters, so it needs a PEFT model "
                "(pass `peft_config` / `use_peft: true`). Use `teacher: live` for full fine-tuning."
            )
        self._teacher_prompts = TeacherPromptBuilder(
            self._tokenize_prompt, self._tokenizer, args.teacher_template, args.max_teacher_prompt_length
        )

    # ----------------------------------------------------------------------------------------------------------------
    # The GEAR step: runs once per generation batch, so `num_iterations > 1` and gradient accumulation reuse it.

    def _generate_and_score_completions(self, inputs):
        output = super()._generate_and_score_completions(inputs)
        if not self.args.uses_teacher:
            return output
        mode = "train" if self.model.training else "eval"
        mask = output["completion_mask"].bool()
        if "tool_mask" in output:
            mask = mask & output["tool_mask"].bool()

        ground_truths = [row.get(self.args.ground_truth_column) for row in inputs]
        teacher = self._teacher_prompts([row["prompt"] for row in inputs], ground_truths)
        kl, entropy = self._divergence(output, teacher.input_ids, mask)

        has_truth = torch.tensor(teacher.has_ground_truth, device=mask.device)
        signal, segment_ids = segment_signal(
            kl,
            entropy,
            mask,
            mode=self.args.credit,
            onset_threshold=self.args.onset_threshold,
            entropy_threshold=self.args.entropy_threshold,
            turn_starts=_turn_starts(mask) if "tool_mask" in output else None,
            fixed_segment_len=self.args.fixed_segment_len,
            max_segment_len=self.args.max_segment_len,
            normalize=self.args.normalize,
        )
        weights = weights_from_signal(
            signal,
            mask,
            output["advantages"],
            alpha=self.args.weight_alpha,
            eps=self.args.weight_eps,
            lam=self.args.weight_lambda,
            weight_norm=self.args.weight_norm,
        )
        # Documented fallback: a row without ground truth has no teacher, hence plain GRPO weights.
        weights = torch.where(has_truth[:, None], weights, mask.float())
        segment_ids = torch.where(has_truth[:, None], segment_ids, torch.full_like(segment_ids, -1))
        output["advantages"] = output["advantages"][:, None] * weights

        self._log_gear_metrics(mode, kl, mask, segment_ids, weights, has_truth, teacher.truncated)
        return output

    def _tokenize_prompt(self, prompt) -> list[int]:
        """Token ids of one prompt with the generation prompt, exactly as GRPOTrainer tokenizes student prompts."""
        if is_conversational({"prompt": prompt}):
            tokenized = self.processing_class.apply_chat_template(
                conversation=[prompt],
                tools=self.tools or None,
                chat_template=self.chat_template,
                add_generation_prompt=True,
                tokenize=True,
                return_dict=True,
                **self.chat_template_kwargs,
            )
            return list(tokenized["input_ids"][0])
        return list(self.processing_class(text=[prompt])["input_ids"][0])

    @torch.no_grad()
    def _divergence(self, output, teacher_prompt_ids: list[list[int]], mask: torch.Tensor):
        """Reverse KL(student || teacher) and student entropy, [B, T] each, over the completion tokens."""
        device = self.accelerator.device
        completion_ids, completion_mask = output["completion_ids"], output["completion_mask"]
        teacher_ids = pad(
            [torch.tensor(ids) for ids in teacher_prompt_ids],
            padding_value=self._tokenizer.pad_token_id,
            padding_side="left",
        ).to(device)
        teacher_mask = pad(
            [torch.ones(len(ids), dtype=torch.long) for ids in teacher_prompt_ids], padding_value=0, padding_side="left"
        ).to(device)
        student_input = torch.cat([output["prompt_ids"], completion_ids], dim=1)
        student_attention = torch.cat([output["prompt_mask"], completion_mask], dim=1)
        teacher_input = torch.cat([teacher_ids, completion_ids], dim=1)
        teacher_attention = torch.cat([teacher_mask, completion_mask], dim=1)

        causal_lm = self._causal_lm()
        lm_head = causal_lm.get_output_embeddings()
        batch_size = self.args.per_device_train_batch_size if self.model.training else self.args.per_device_eval_batch_size
        kl_rows, entropy_rows = [], []
        for start in range(0, completion_ids.size(0), batch_size):
            rows = slice(start, start + batch_size)
            keep = completion_ids.size(1)
            student_hidden = self._final_hidden(student_input[rows], student_attention[rows], keep)
            teacher_context = use_adapter(self.model, None) if self.args.teacher == "base" else nullcontext()
            with teacher_context:
                teacher_hidden = self._final_hidden(teacher_input[rows], teacher_attention[rows], keep)
            with maybe_gather_lm_head_ctx(lm_head.weight, lm_head.bias):
                kl, entropy = reverse_kl_and_entropy(
                    student_hidden,
                    teacher_hidden,
                    lm_head.weight,
                    mask[rows],
                    temperature=self.temperature,
                    chunk_size=self.args.divergence_chunk_size,
                    lm_head_bias=lm_head.bias,
                    divergence=self.args.divergence,
                    top_k=self.args.divergence_top_k,
                    token_ids=completion_ids[rows],
                )
            kl_rows.append(kl)
            entropy_rows.append(entropy)
        return torch.cat(kl_rows), torch.cat(entropy_rows)

    def _causal_lm(self):
        unwrapped = self.accelerator.unwrap_model(self.model)
        return unwrapped.get_base_model() if is_peft_model(unwrapped) else unwrapped

    def _final_hidden(self, input_ids, attention_mask, keep: int) -> torch.Tensor:
        """Final hidden states [B, keep, H] at the positions that predict the last `keep` tokens.

        Runs the backbone only, so the LM head is applied later in chunks. Position ids follow the attention mask,
        so a prompt's left padding does not shift its positions (teacher and student prompts are padded differently).
        """
        causal_lm = self._causal_lm()
        backbone = getattr(causal_lm, causal_lm.base_model_prefix)
        position_ids = (attention_mask.cumsum(-1) - 1).clamp(min=0)
        with disable_gradient_checkpointing(self.model, self.args.gradient_checkpointing_kwargs):
            with self.accelerator.autocast():
                hidden = backbone(
                    input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids, use_cache=False
                ).last_hidden_state
        return hidden[:, -keep - 1 : -1]

    # ----------------------------------------------------------------------------------------------------------------
    # Metrics: reduced over all ranks with one gather each, in the same order on every rank.

    def _log_gear_metrics(self, mode, kl, mask, segment_ids, weights, has_truth, truncated):
        device = mask.device
        m = mask.float()
        num_segments = (segment_ids.max(dim=1).values + 1).clamp(min=0).sum()
        in_segment = ((segment_ids >= 0) & mask).sum()
        w = weights[mask]
        sums = torch.stack(
            [
                (kl * m).sum(),
                m.sum(),
                num_segments.float(),
                in_segment.float(),
                w.sum(),
                (w * w).sum(),
                has_truth.numel() - has_truth.float().sum(),
                torch.tensor(float(sum(truncated)), device=device),
                torch.tensor(float(has_truth.numel()), device=device),
            ]
        )
        big = torch.finfo(torch.float32).max
        extremes = torch.stack(
            [
                kl[mask].max() if w.numel() else torch.tensor(0.0, device=device),
                w.max() if w.numel() else torch.tensor(-big, device=device),
                -w.min() if w.numel() else torch.tensor(-big, device=device),
            ]
        )
        sums = self.accelerator.reduce(sums, reduction="sum")
        extremes = self.accelerator.gather(extremes[None]).max(dim=0).values
        (kl_sum, tokens, segments, in_seg, w_sum, w_sq, no_truth, n_truncated, rows) = sums.tolist()
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
        }
        for name, value in metrics.items():
            self._metrics[mode][f"gear/{name}"].append(value)


def _turn_starts(mask: torch.Tensor) -> torch.Tensor:
    """True at the first model token of each run of model tokens (each assistant turn), [B, T] bool."""
    previous = torch.zeros_like(mask)
    previous[:, 1:] = mask[:, :-1]
    return mask & ~previous


def _check_ground_truth_column(dataset, column: str, name: str) -> None:
    if dataset is None:
        return
    datasets = dataset.values() if isinstance(dataset, dict) else [dataset]
    for part in datasets:
        columns = getattr(part, "column_names", None)
        if columns is None:  # e.g. an IterableDataset whose features are unknown until iterated
            continue
        if column not in columns:
            raise ValueError(
                f"GEAR's teacher needs the ground-truth column {column!r} in `{name}`, but its columns are "
                f"{sorted(columns)}. Set `ground_truth_column` to the right column, map your data with a dataset "
                "adapter (`dataset_format`), or use `credit: none` for plain GRPO."
            )
