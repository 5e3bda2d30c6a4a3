"""`GEARConfig`: GRPO's configuration plus the knobs of GEAR's credit assignment.

Every field below that the GEAR paper does not pin down is marked "(our default)" in its help text, from which the
configuration reference (docs/configuration.md) is generated. Values are validated in `__post_init__`, so a bad recipe
fails before any model is loaded.
"""

from __future__ import annotations

import difflib
import os
from dataclasses import dataclass, field

import torch
from accelerate.utils import is_peft_model
from trl import GRPOConfig

from ..credit.distill import DISTILLATION_GATES, DISTILLATION_SIGNALS
from ..credit.divergence import DEFAULT_CHUNK_SIZE, DIVERGENCES, SIGNED_LOG_RATIO
from ..credit.gigpo import GIGPO_MODES
from ..credit.modes import CREDIT_MODES, CreditMode, credit_mode, credit_modes
from ..credit.rlsd import RLSD_EPS, RLSD_LAMBDA
from ..credit.segments import NORMALIZATIONS
from ..credit.weights import WEIGHT_NORMS
from ..teacher.kinds import teacher_kind
from ..teacher.prompts import DEFAULT_MATH_SOLUTION_TEMPLATE, DEFAULT_MATH_TEACHER_TEMPLATE

LOSS_TYPES = ("grpo", "dr_grpo", "dapo", "bnpo", "cispo", "sapo", "luspo", "vespo")
"""The `loss_type` values TRL 1.16's GRPOTrainer computes (its `_compute_loss`; tests/inputs/test_preflight_all.py checks)."""
TEACHER_REFERENCES = ("answer", "solution", "sibling")
# DEFAULT_MATH_TEACHER_TEMPLATE and DEFAULT_MATH_SOLUTION_TEMPLATE live with the teacher's prompts (imported above).


def _choice(name: str, value, choices) -> None:
    if value not in choices:
        close = difflib.get_close_matches(value, list(choices), n=1) if isinstance(value, str) else []
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise ValueError(f"`{name}` must be one of {list(choices)}, got {value!r}{hint}.")


def _in_range(name: str, value, low, high, *, low_open=False, high_open=False) -> None:
    too_low = value <= low if low_open else value < low
    too_high = value >= high if high_open else value > high
    if too_low or too_high:
        left, right = ("(" if low_open else "["), (")" if high_open else "]")
        raise ValueError(f"`{name}` must be in {left}{low}, {high}{right}, got {value!r}.")


@dataclass
class GEARConfig(GRPOConfig):
    r"""
    Configuration for [`GEARTrainer`]: everything in [`~trl.GRPOConfig`] plus GEAR's credit assignment.

    GEAR (Granularity-adaptivE Advantage Reweighting) runs the policy a second time, without gradients, with the ground
    truth in the prompt (the *teacher*), and turns the student/teacher reverse KL and the student's entropy into
    per-token weights over adaptive segments. The GRPO advantage of each completion is multiplied by these weights
    inside the loss.

    Parameters:
        credit (`str`, defaults to `"gear"`): credit-assignment mode, one of `none` (plain GRPO), `token`, `turn`,
            `fixed`, `gear-no-entropy`, `gear`, `gigpo`, `gear-gigpo`, `rlsd`, `gear-signed` (not the paper's: GEAR's
            segments and weights with each token's signal signed by the sampled token's log pT - log pS, so
            teacher-supported tokens gain credit in passed rollouts and lose blame in failed ones), or a mode
            registered with `gear_trl.credit.register_credit_mode`.
        divergence (`str`, defaults to `"full"`): how the reverse KL is computed: over the full vocabulary, over the
            student's `divergence_top_k` tokens, or from the sampled token only.
        divergence_top_k (`int`, defaults to `20`): size of the top-k set when `divergence="topk"`.
        divergence_chunk_size (`int`, defaults to `64`): positions per LM-head chunk in the divergence pass (on CPU,
            in the loss's LM-head forward, which computes the divergence too); its extra memory is O(chunk x
            vocabulary). 64 stays the default for the memory it keeps on CPU (117 MB of buffers at Qwen3's
            vocabulary; 512 needs 933 MB and was no faster there, bench/results/overhead/NOTES.md). On a GPU use 512,
            as the Qwen3 recipes do: at Qwen3-4B's shape on one H100 GEAR's step was 1.27x GRPO's at 512 against
            1.34x at 64, at the same peak memory (bench/results/overhead/cuda_chunk*.json), and every chunk costs the
            host 14 operators (bench/results/overhead/host_cost.md).
        normalize (`str`, defaults to `"max"`): per-completion normalization of KL and entropy (`max` or `minmax`).
        onset_threshold (`float`, defaults to `0.1`): normalized KL at or above which a token opens a segment.
        onset_min_kl (`float`, defaults to `1e-3`): the noise floor in nats: a token whose KL is below it never opens
            a segment, and a completion whose largest KL is below it gets weights 1.
        entropy_threshold (`float`, defaults to `0.5`): normalized entropy at or above which a token closes a segment.
        fixed_segment_len (`int`, defaults to `32`): window length for `credit="fixed"`.
        max_segment_len (`int` or `None`, defaults to `None`): cap on a segment's length in `gear` modes.
        weight_alpha (`float`, defaults to `1.0`): strength of the modulation, `alpha` in the weight formula.
        weight_eps (`float`, defaults to `0.5`): the weight's exponential term is clipped to `[1 - eps, 1 + eps]`.
        weight_lambda (`float`, defaults to `1.0`): blend between 1 and the modulated weight.
        weight_norm (`str`, defaults to `"mean"`): `mean` rescales each completion's weights to mean 1 (each step's,
            with GiGPO's per-step advantages), preserving its mean advantage; `none` leaves them as computed.
        failed_prefix_weight (`float`, defaults to `1.0`): not in the paper: in a completion with negative
            advantage, the tokens before its first segment are multiplied by this weight after `weight_norm`, so the
            blame taken off the prefix the teacher agrees with is dropped, not moved; 1.0 is the paper's GEAR.
        distillation_weight (`float`, defaults to `0.0`): not in the paper: each model token's advantage becomes
            `(1 - w) * A_t + w * (log pT(y_t) - log pS(y_t))`, SDPO's sampled-token distillation written as an
            advantage (TRL's `SDPOTrainer` name and meaning); 0.0 is the paper's GEAR.
        distillation_signal (`str`, defaults to `"log_ratio"`): not in the paper: the dense term that
            `distillation_weight` blends in. `log_ratio` is SDPO's `log pT(y_t) - log pS(y_t)`; `agreement` is
            `(pT(y_t) - b_t) / sqrt(b_t (1 - b_t))`, `b_t = sum_v pS(v) pT(v)`, clipped to GRPO's largest group
            advantage (`gear_trl.credit.agreement_advantages`).
        distillation_gate (`str`, defaults to `"none"`): not in the paper: the rows the distillation term touches:
            every row with a reference (`none`), rows whose group's rewards differ (`mixed`), or the failed rows of
            such groups (`failed`); the others keep their outcome advantage.
        distillation_bound (`float` or `None`, defaults to `None`): not in the paper: each token's weighted
            distillation term is clipped to +- this times its group's mean |advantage|.
        distillation_clip (`float` or `None`, defaults to `None`): not in the paper: the distillation term is clipped
            to +- this per token before weighting.
        distillation_backoff (`bool`, defaults to `False`): halve `distillation_weight` (down to
            `distillation_backoff_floor`, default 0.05) each time the collapse monitor warns.
        distillation_backoff_floor (`float`, defaults to `0.05`): the floor of `distillation_backoff`.
        rlsd_lambda, rlsd_eps (`float`, defaults to `0.5`, `0.2`): RLSD's blend and clip for `credit: rlsd`.
        rlsd_lambda_decay_steps (`int` or `None`, defaults to `None`): decay `rlsd_lambda` linearly to 0 over this
            many optimizer steps (after the warmup).
        rlsd_lambda_warmup_steps (`int` or `None`, defaults to `None`): raise the blend linearly from 0 to
            `rlsd_lambda` over this many optimizer steps first.
        rlsd_negative_only (`bool`, defaults to `False`): reweight only rollouts with negative advantage.
        teacher (`str`, defaults to `"live"`): `live` uses the current policy as teacher; `base` the run's initial
            policy (PEFT: adapters disabled, or a frozen copy of an adapter the model arrived with; full fine-tuning: a
            frozen copy of the initial model, TRL's reference model when `beta > 0`); `ema` an exponential moving
            average of the trained weights (of the adapter only under PEFT); `periodic` a frozen copy of the trained
            weights re-synced from the policy every `teacher_sync_steps` optimizer steps (RLSD's published setup).
        teacher_sync_steps (`int`, defaults to `20`): `teacher: periodic`'s sync interval (RLSD's script: 20).
        teacher_ema_decay (`float`, defaults to `0.05`): `teacher: ema`'s update rate r in
            `theta_T <- (1 - r) theta_T + r theta_S`, applied after each optimizer step (SDPO's 0.05).
        teacher_template (`str`): text appended to the last user message (or to a plain prompt) for the teacher;
            must contain `{ground_truth}` (the final answer) or `{reference_solution}`.
        teacher_reference (`str`, defaults to `"answer"`): what `{reference_solution}` receives: `answer` (the final
            answer) or `solution` (the dataset's worked solution, or a tool-use row's `reference_solution` text; the
            answer, or the rendered reference calls, for rows without one).
        ground_truth_column (`str`, defaults to `"ground_truth"`): dataset column holding the ground truth.
        max_teacher_prompt_length (`int` or `None`, defaults to `None`): longest teacher prompt in tokens; longer ones
            lose tokens from the question side, never from the ground truth.
        gigpo_gamma, gigpo_omega, gigpo_mode, gigpo_similarity_threshold: GiGPO's discount, step-advantage weight,
            normalization and optional similarity grouping of anchor states.
        teacher_prefix_sharing (`bool`, defaults to `True`): compute each distinct teacher prompt once per
            generation batch (key/value cache) and run only the completions on it.
        teacher_prefix_sharing_max_ratio (`float`, defaults to `0.5`): share a generation batch's prompts only when
            the shared pass runs at most this fraction of the full pass's tokens; 1.0 shares whenever it may.
    """

    credit: str = field(
        default="gear",
        metadata={
            "help": f"Credit-assignment mode. One of {list(CREDIT_MODES)} or a registered mode; `none` is plain GRPO "
            "(with `distillation_weight > 0`, GRPO plus SDPO-style self-distillation). `gear-signed` is "
            "not the paper's: GEAR with each token's signal signed by sign(log pT(y_t) - log pS(y_t)) of the "
            "sampled token, so teacher-supported tokens gain credit in passed rollouts and lose blame in failed ones."
        },
    )
    divergence: str = field(
        default="full",
        metadata={
            "help": "How the student/teacher reverse KL is computed: `full` (whole vocabulary), `topk` (the student's "
            "top-k tokens, renormalized), or `sampled` (log pS(y_t) - log pT(y_t) of the sampled token, clamped at 0)."
        },
    )
    divergence_top_k: int = field(default=20, metadata={"help": "k for `divergence: topk` (our default)."})
    divergence_chunk_size: int = field(
        default=DEFAULT_CHUNK_SIZE,
        metadata={
            "help": "Positions per LM-head chunk in the divergence pass (on CPU, in the loss's LM-head forward, which "
            "computes the divergence too). Extra memory is about 3 x chunk x vocabulary float32 values, independent "
            "of sequence length (our default)."
        },
    )
    normalize: str = field(
        default="max",
        metadata={"help": "Per-completion normalization of KL and entropy over model tokens: `max` or `minmax`."},
    )
    onset_threshold: float = field(
        default=0.1,
        metadata={"help": "Normalized KL at or above which a token opens a segment (paper: salient above 0.1)."},
    )
    onset_min_kl: float = field(
        default=1e-3,
        metadata={
            "help": "Noise floor in nats: a token whose raw KL is below it never opens a segment, whatever its "
            "normalized value, and a completion whose largest KL is below it gets weights 1 (counted in "
            "`gear/below_floor_frac`). Max-normalization would otherwise turn rounding noise into onsets; compare "
            "`gear/kl_floor`, the KL of rows whose teacher prompt equals the student's. 0 = no floor (our default: "
            "1e-3, ~6x the largest bf16 padding noise measured at Qwen3's vocabulary, bench/noise_floor.py)."
        },
    )
    entropy_threshold: float = field(
        default=0.5,
        metadata={"help": "Normalized entropy at or above which a token closes the open segment (our default)."},
    )
    fixed_segment_len: int = field(
        default=32, metadata={"help": "Window length in model tokens for `credit: fixed` (our default)."}
    )
    max_segment_len: int | None = field(
        default=None, metadata={"help": "Cap on a segment's length in `gear` modes; None = unbounded (our default)."}
    )
    weight_alpha: float = field(
        default=1.0, metadata={"help": "Modulation strength alpha in exp(-sign(A) * alpha * s_t) (our default)."}
    )
    weight_eps: float = field(
        default=0.5, metadata={"help": "The modulation is clipped to [1 - eps, 1 + eps]; in [0, 1) (our default)."}
    )
    weight_lambda: float = field(
        default=1.0,
        metadata={"help": "Blend lam in w = (1 - lam) + lam * modulation; in [0, 1] (our default)."},
    )
    weight_norm: str = field(
        default="mean",
        metadata={
            "help": "`mean`: rescale each completion's weights to mean 1 over its model tokens (over each step's, with "
            "GiGPO's per-step advantages), so its mean advantage is unchanged; `none`: no rescaling (our default: "
            "mean)."
        },
    )
    failed_prefix_weight: float = field(
        default=1.0,
        metadata={
            "help": "Ours, not the paper's: in a completion with negative advantage, multiply the weights of the "
            "tokens before its first segment (the teacher's first onset) by this, after `weight_norm`, so the blame "
            "taken off that prefix is dropped rather than moved onto the rest (a completion without an onset keeps "
            "its weights). In [0, 1]; 1.0 = the paper's GEAR (our default). modes whose segments open at onsets, with "
            "one advantage per completion (`gear`, `gear-no-entropy`, `gear-signed`). Why it exists: docs/results/horizon.md, where a label oracle of this shape was the "
            "only one above GRPO and its mean-1 rescaled twin fell below it."
        },
    )
    distillation_weight: float = field(
        default=0.0,
        metadata={
            "help": "Ours, not the paper's: on the model tokens of rows with a reference, the loss's advantage is "
            "(1 - w) * A_t + w * delta_t, delta_t = log pT(y_t) - log pS(y_t) of the sampled token from the teacher "
            "pass GEAR already runs: SDPO's sampled-token reverse-KL distillation written as an advantage (TRL's "
            "SDPOTrainer `distillation_weight`, the same gradient on policy with loss_type grpo), so a failed rollout's token the teacher "
            "supports is pushed up, which no weight >= 0 can do. In [0, 1]; 0.0 = the paper's GEAR (our default); "
            "1.0 = distillation alone (`distillation_signal` chooses another term than delta_t). Any mode; with "
            "`credit: none` the teacher pass runs for it alone (GRPO plus "
            "self-distillation). Logged as gear/distill_share. Why it exists: "
            "docs/results/horizon.md."
        },
    )
    distillation_signal: str = field(
        default="log_ratio",
        metadata={
            "help": "Ours, not the paper's: the dense per-token term `distillation_weight` blends into the advantage. "
            "`log_ratio` (our default, SDPO's): delta_t = log pT(y_t) - log pS(y_t). `agreement`: the teacher's "
            "probability of the sampled token against its expectation under the student, (pT(y_t) - b_t) / "
            "sqrt(b_t (1 - b_t)) with b_t = sum_v pS(v) pT(v), clipped to +-(G - 1) / sqrt(G) (G = "
            "num_generations, the largest advantage GRPO's group normalization gives); where the teacher puts all "
            "its mass on the right token this is that token's correctness normalized as GRPO normalizes a group's "
            "outcomes, in expectation over the student, i.e. the `oracle-process` ceiling's shape. Needs "
            "`distillation_weight > 0` and `divergence: full`. Why it exists, and how it has fared on fresh seeds: "
            "docs/results/credit-methods.md.",
            "choices": ["log_ratio", "agreement"],
        },
    )
    distillation_gate: str = field(
        default="none",
        metadata={
            "help": "Ours, not the paper's: which rows the distillation term of `distillation_weight` may touch. "
            "`none` (our default, as before): every row with a reference. `mixed`: only rows whose group has an "
            "outcome signal (its rewards not all equal); a group whose rollouts all failed, or all passed, has GRPO "
            "advantage 0, where the term would be the whole update toward a copy of the policy (the calculator "
            "collapse, docs/results/credit-methods.md). `failed`: only the failed rows (negative advantage) of such "
            "groups, a passed row keeping GRPO's advantage alone (after SRPO's routing of failed rollouts to "
            "distillation and correct ones to GRPO). Rows left out keep their outcome advantage. Needs "
            "`distillation_weight > 0`.",
            "choices": ["none", "mixed", "failed"],
        },
    )
    distillation_bound: float | None = field(
        default=None,
        metadata={
            "help": "Ours, not the paper's: bound b > 0 on the distillation term relative to the outcome: each "
            "token's w * delta_t is clipped to [-b * s, b * s], s the mean |advantage| of its group's rollouts (GRPO's "
            "scale there), so the term never pushes a token harder than b times what the outcome gives its group, and "
            "a group without an outcome signal (s = 0) gets none. None (our default) = no bound. Needs "
            "`distillation_weight > 0`; logged through gear/distill_share (the share of the bounded term)."
        },
    )
    distillation_clip: float | None = field(
        default=None,
        metadata={
            "help": "Ours, not the paper's: per-token clip c > 0 of the distillation term before it is weighted: "
            "delta_t (or the agreement term) clipped to [-c, c]. RLSD bounds its teacher term by clipping "
            "exp(delta) to [0.8, 1.2], about c = 0.2 on this log scale. None (our default) = no clip. Needs "
            "`distillation_weight > 0`."
        },
    )
    distillation_backoff: bool = field(
        default=False,
        metadata={
            "help": "Ours: when the collapse monitor (on whenever `distillation_weight > 0`; docs/metrics.md) warns, "
            "halve `distillation_weight` for the rest of the run, again at each further warning (one window later at "
            "the earliest), never below `distillation_backoff_floor`; each change is logged (gear/distill_weight). "
            "False (our default): the monitor only warns."
        },
    )
    distillation_backoff_floor: float = field(
        default=0.05,
        metadata={
            "help": "Ours: the lowest weight `distillation_backoff` halves `distillation_weight` to; in (0, "
            "`distillation_weight`] (our default: 0.05; the teacher pass keeps running, so 0 is not offered)."
        },
    )
    rlsd_lambda: float = field(
        default=RLSD_LAMBDA,
        metadata={
            "help": "`credit: rlsd`: blend lam in w = (1 - lam) + lam * clip(exp(sign(A) * delta), 1 - eps, 1 + eps), "
            "delta = log pT(y_t) - log pS(y_t) of the sampled token; in [0, 1] (RLSD: 0.5)."
        },
    )
    rlsd_eps: float = field(
        default=RLSD_EPS, metadata={"help": "`credit: rlsd`: clip half-width eps; in [0, 1) (RLSD: 0.2)."}
    )
    rlsd_lambda_decay_steps: int | None = field(
        default=None,
        metadata={
            "help": "`credit: rlsd`: decay `rlsd_lambda` linearly to 0 over this many optimizer steps, after which "
            "the run is GRPO; None = constant (RLSD offers both)."
        },
    )
    rlsd_lambda_warmup_steps: int | None = field(
        default=None,
        metadata={
            "help": "`credit: rlsd`: raise the blend linearly from 0 to `rlsd_lambda` over this many optimizer steps, "
            "before `rlsd_lambda_decay_steps` starts; None = no warmup (RLSD's script: none, then a decay over 60)."
        },
    )
    rlsd_negative_only: bool = field(
        default=False,
        metadata={"help": "`credit: rlsd`: reweight only rollouts with negative advantage; others keep weight 1."},
    )
    teacher: str = field(
        default="live",
        metadata={
            "help": "`live`: the current policy is the teacher; `base`: the run's initial policy (PEFT: adapters "
            "disabled, or a frozen copy of an adapter the model arrived with; full fine-tuning: a frozen copy of the "
            "initial model, one more copy of the weights in memory unless `beta > 0` lets it share TRL's reference "
            "model); `ema`: an exponential moving average of the trained weights, updated after each optimizer step, "
            "saved in checkpoints (of the adapter only under PEFT; of a copy of the model otherwise); `periodic`: a "
            "frozen copy of the trained weights re-synced from the policy every `teacher_sync_steps` optimizer steps, "
            "saved in checkpoints likewise (RLSD's published script)."
        },
    )
    teacher_sync_steps: int = field(
        default=20,
        metadata={
            "help": "`teacher: periodic`: copy the policy's trained weights into the teacher after every this many "
            "optimizer steps; the teacher of steps 1..N is the initial policy (RLSD's published script: 20)."
        },
    )
    teacher_ema_decay: float = field(
        default=0.05,
        metadata={
            "help": "`teacher: ema`: the update rate r of theta_T <- (1 - r) theta_T + r theta_S after each optimizer "
            "step; in (0, 1], 1 = the live policy one step late (SDPO's default, 0.05)."
        },
    )
    teacher_template: str = field(
        default=DEFAULT_MATH_TEACHER_TEMPLATE,
        metadata={
            "help": "Appended to the last user message (or to a plain-text prompt) to build the teacher prompt. "
            "Must contain `{ground_truth}` (the final answer) or `{reference_solution}` (see `teacher_reference`); "
            "literal braces are written `{{` and `}}`."
        },
    )
    teacher_reference: str = field(
        default="answer",
        metadata={
            "help": "What the teacher's `{reference_solution}` receives: `answer`, the final answer (as "
            "`{ground_truth}`), or `solution`, the row's worked solution (column `reference_solution`, kept by the "
            "dataset adapters: GSM8K's answer text, MATH's solution, a tool-use row's own text for its reference "
            "calls), falling back to the final answer (a tool row's rendered calls) in a row "
            "without one, counted in `gear/teacher_answer_only_frac`. With `solution` the default template becomes "
            "one that shows the solution (on rows whose ground truth is tool calls, a tool-call hint: 'Reference "
            "steps for this request'); a "
            "custom template must contain `{reference_solution}`. Rewards always read the final answer (our default: "
            "answer, today's behaviour, until a study shows which teaches better). `sibling` (not in the paper; after SDPO's "
            "successful-rollout reprompting): no ground truth is read; the teacher is shown a successful rollout of the "
            "same group (reward >= `teacher_sibling_min_reward`, the highest, ties to the first): its tool calls, its "
            "last \\boxed{} answer, or its final text, in the template's `{ground_truth}`. A row whose group has no "
            "other success gets weights 1 (gear/no_sibling_frac, gear/lone_success_frac)."
        },
    )
    teacher_sibling_fallback: bool = field(
        default=False,
        metadata={
            "help": "With `teacher_reference: answer` or `solution`: rows without a ground truth are shown a successful "
            "sibling, as under `teacher_reference: sibling`, instead of getting weights 1."
        },
    )
    teacher_environment_feedback: bool = field(
        default=False,
        metadata={
            "help": "Multi-turn rollouts: append the environment's last message in the rollout (its last tool "
            "result, at most 2,000 characters, the tail kept) to the teacher's hint, on rows whose teacher is shown a "
            "reference: the ground truth or, with `teacher_reference: sibling` (or its fallback), a successful "
            "sibling; a row shown neither keeps the student's prompt (not in the paper; after SDPO's environment feedback, "
            "which also pairs it with a successful rollout). Each row's teacher prompt then differs, so prefix "
            "sharing saves less."
        },
    )
    teacher_sibling_min_reward: float = field(
        default=1.0,
        metadata={
            "help": "Total reward (the reward functions' weighted sum) at or above which a rollout counts as a success "
            "a sibling's teacher may be shown (SDPO's `success_reward_threshold` default, 1.0: a correct answer under "
            "the accuracy rewards)."
        },
    )
    ground_truth_column: str = field(
        default="ground_truth", metadata={"help": "Dataset column holding each prompt's ground truth."}
    )
    environment_preflight: bool = field(
        default=True,
        metadata={
            "help": "With an `environment_factory`, build each environment once and call its `reset` on a training "
            "row before the model loads (its first row with an empty prompt, whose instruction `reset` must return, "
            "else its first row), so a broken environment fails in seconds. false: skip that (a sandboxed environment "
            "is not started one extra time); mistakes then surface at the first rollout, and empty prompts are "
            "trusted to get their instruction from `reset` (our default: true)."
        },
    )
    max_teacher_prompt_length: int | None = field(
        default=None,
        metadata={
            "help": "Longest teacher prompt in tokens. Longer ones are cut on the question side (the ground truth is "
            "kept) and counted in `gear/teacher_truncated_frac`. None = no limit."
        },
    )
    credit_report_steps: int = field(
        default=0,
        metadata={
            "help": "Every N steps, render a few rollouts with each token coloured by KL, entropy and weight (HTML and "
            "PNG under output_dir/credit/) and log them as a table through `report_to`; 0 = never."
        },
    )
    credit_report_rollouts: int = field(default=4, metadata={"help": "Rollouts per credit report."})
    credit_report_choice: str = field(
        default="mixed",
        metadata={
            "help": "Which rollouts a credit report shows: `mixed` (a passed and a failed rollout of the same prompt "
            "side by side, from groups whose outcomes differ; the first ones where no group does) or `first` (the "
            "first N of the batch)."
        },
    )
    teacher_control_steps: int = field(
        default=10,
        metadata={
            "help": "Every N generation batches, run `teacher_control_rows` rows of each rank through the teacher "
            "twice more, without a reference (the student's prompt: its KL is the noise floor, `gear/kl_floor`) and "
            "with another row's reference (`gear/kl_wrong_over_right`: near 1, the teacher's KL is the hint's style, "
            "not knowledge of the answer); 0 = never. Costs 3 x rows extra forwards (the rows' student pass and two "
            "teacher passes) every N batches: with 2 rows, N = 10 and 8 rows per rank, about 0.07 of one teacher pass "
            "on average (our default: 10, so that a 100-step run logs 10 points)."
        },
    )
    teacher_control_rows: int = field(
        default=2,
        metadata={
            "help": "Rows per rank in each `teacher_control_steps` control (rows with a ground truth first); every "
            "rank runs this many, whatever its rows hold, so ZeRO-3's gathers stay paired (our default: 2)."
        },
    )
    gigpo_gamma: float = field(default=0.95, metadata={"help": "GiGPO discount for step returns, in [0, 1]."})
    gigpo_omega: float = field(default=1.0, metadata={"help": "GiGPO weight of the step advantage (paper: 1.0)."})
    gigpo_mode: str = field(default="mean_std", metadata={"help": "GiGPO normalization: `mean_std` or `mean`."})
    gigpo_similarity_threshold: float | None = field(
        default=None,
        metadata={
            "help": "When set, anchor states whose difflib ratio is at or above it share a step group (0.95 is a "
            "common choice); None = exact match only."
        },
    )
    teacher_prefix_sharing: bool = field(
        default=True,
        metadata={
            "help": "Run each distinct teacher prompt once per generation batch and only the completion tokens of "
            "its rollouts on its key/value cache (GRPO repeats every prompt `num_generations` times). Holds the caches "
            "of at most per-device-batch-size prompts (every layer) plus one layer's keys and values of "
            "per-device-batch-size x (prompt + completion) tokens at a time; false = one full forward per rollout, "
            "as before. Models with any layer other than full attention (sliding window; Mamba, linear-attention or "
            "conv layers of hybrids) always take the full forward (our default: true)."
        },
    )
    teacher_prefix_sharing_max_ratio: float = field(
        default=0.5,
        metadata={
            "help": "With `teacher_prefix_sharing`, share a generation batch's teacher prompts only when the shared "
            "pass runs at most this fraction of the tokens of the full pass (prompts + completions); otherwise that "
            "batch takes the full pass. Short prompts with long completions (math) save little and would pay one "
            "more forward per prompt group (under ZeRO-3 one more gather of every parameter). In (0, 1]; 1.0 shares "
            "whenever it may. Logged as gear/teacher_prefix_shared_frac (our default: 0.5)."
        },
    )

    def __post_init__(self):
        super().__post_init__()
        mode = credit_mode(self.credit)  # a ValueError naming the modes (and the new name of a renamed one)
        _choice("divergence", self.divergence, DIVERGENCES)
        _choice("normalize", self.normalize, NORMALIZATIONS)
        _choice("weight_norm", self.weight_norm, WEIGHT_NORMS)
        kind = teacher_kind(self.teacher)  # a ValueError naming the kinds
        _choice("gigpo_mode", self.gigpo_mode, GIGPO_MODES)
        # TRL checks `loss_type` only when the first loss is computed, after the model has loaded.
        _choice("loss_type", self.loss_type, LOSS_TYPES)
        _in_range("onset_threshold", self.onset_threshold, 0.0, 1.0)
        _in_range("entropy_threshold", self.entropy_threshold, 0.0, 1.0)
        _in_range("onset_min_kl", self.onset_min_kl, 0.0, float("inf"))
        _in_range("weight_alpha", self.weight_alpha, 0.0, float("inf"))
        _in_range("weight_eps", self.weight_eps, 0.0, 1.0, high_open=True)
        _in_range("weight_lambda", self.weight_lambda, 0.0, 1.0)
        _in_range("failed_prefix_weight", self.failed_prefix_weight, 0.0, 1.0)
        if self.failed_prefix_weight != 1.0 and not mode.prefix_weights:
            prefix_modes = [name for name in credit_modes() if credit_mode(name).prefix_weights]
            raise ValueError(
                f"`failed_prefix_weight: {self.failed_prefix_weight}` needs GEAR's segments and trajectory-level "
                f"advantages (`credit` one of {', '.join(prefix_modes)}); `credit: {self.credit}` has "
                + ("per-step advantages" if mode.per_step else "no first onset to cut at")
                + ", so it would do nothing. Leave it at 1.0."
            )
        _in_range("distillation_weight", self.distillation_weight, 0.0, 1.0)
        if self.distillation_weight > 0 and "distillation_weight" not in getattr(mode.distillation, "options", ()):
            raise ValueError(
                f"`distillation_weight: {self.distillation_weight}` does nothing under `credit: {self.credit}`, whose "
                + (
                    "record has no distillation term"
                    if mode.distillation is None
                    else "own distillation term does not read it"
                )
                + " (`CreditMode.distillation`), but it would run the teacher pass. Leave it at 0."
            )
        if self.distillation_signal not in DISTILLATION_SIGNALS:
            raise ValueError(
                f"`distillation_signal` must be one of {', '.join(DISTILLATION_SIGNALS)}; got "
                f"{self.distillation_signal!r}."
            )
        if self.distillation_signal == "agreement":
            if self.distillation_weight == 0:
                raise ValueError(
                    "`distillation_signal: agreement` is the term `distillation_weight` blends in; with "
                    "`distillation_weight: 0` it would do nothing. Set `distillation_weight` in (0, 1]."
                )
            if self.divergence_signal != "full":
                raise ValueError(
                    "`distillation_signal: agreement` reads the whole teacher distribution (sum_v pS(v) pT(v)), "
                    f"which the divergence pass computes only with `divergence: full`; here it computes "
                    f"`{self.divergence_signal}`"
                    + (
                        f" (`credit: {self.credit}` reads the sampled token's log-ratio alone)"
                        if mode.signal == "log_ratio"
                        else ""
                    )
                    + ". Use `divergence: full`, or `distillation_signal: log_ratio`."
                )
        self._check_distillation_options()
        _in_range("gigpo_gamma", self.gigpo_gamma, 0.0, 1.0)
        _in_range("rlsd_lambda", self.rlsd_lambda, 0.0, 1.0)
        _in_range("teacher_ema_decay", self.teacher_ema_decay, 0.0, 1.0, low_open=True)
        if kind.weights == "initial" and self.beta > 0 and self.sync_ref_model:
            raise ValueError(
                f"`teacher: {self.teacher}` with `beta > 0` shares TRL's reference model, which `sync_ref_model: true` moves "
                "toward the policy, so the teacher would not be the initial policy. Set `sync_ref_model: false`, or "
                "use `teacher: ema`."
            )
        _in_range("rlsd_eps", self.rlsd_eps, 0.0, 1.0, high_open=True)
        if mode.signal == "log_ratio" and self.divergence == "topk":
            raise ValueError(
                f"`divergence: topk` does not apply to `credit: {self.credit}`, whose signal is the sampled token's "
                "log-ratio "
                "log pT(y_t) - log pS(y_t); leave `divergence` unset."
            )
        _in_range("gigpo_omega", self.gigpo_omega, 0.0, float("inf"))
        if not isinstance(self.credit_report_steps, int) or self.credit_report_steps < 0:
            raise ValueError(
                f"`credit_report_steps` must be a non-negative integer, got {self.credit_report_steps!r}."
            )
        for name in ("divergence_top_k", "divergence_chunk_size", "fixed_segment_len", "credit_report_rollouts"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"`{name}` must be a positive integer, got {value!r}.")
        if self.credit_report_choice not in ("mixed", "first"):
            raise ValueError(f"`credit_report_choice` must be 'mixed' or 'first', got {self.credit_report_choice!r}.")
        for name in ("teacher_control_steps", "teacher_control_rows"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 0:
                raise ValueError(f"`{name}` must be a non-negative integer, got {value!r}.")
        if not isinstance(self.teacher_sync_steps, int) or self.teacher_sync_steps < 1:
            raise ValueError(f"`teacher_sync_steps` must be a positive integer, got {self.teacher_sync_steps!r}.")
        for name in (
            "max_segment_len",
            "max_teacher_prompt_length",
            "rlsd_lambda_decay_steps",
            "rlsd_lambda_warmup_steps",
        ):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, int) or value < 1):
                raise ValueError(f"`{name}` must be a positive integer or None, got {value!r}.")
        if self.gigpo_similarity_threshold is not None:
            _in_range("gigpo_similarity_threshold", self.gigpo_similarity_threshold, 0.0, 1.0, low_open=True)
        _choice("teacher_reference", self.teacher_reference, TEACHER_REFERENCES)
        if self.teacher_reference == "solution" and self.teacher_template == DEFAULT_MATH_TEACHER_TEMPLATE:
            self.teacher_template = DEFAULT_MATH_SOLUTION_TEMPLATE
        if "{ground_truth}" not in self.teacher_template and "{reference_solution}" not in self.teacher_template:
            raise ValueError(
                "`teacher_template` must contain the placeholder `{ground_truth}` or `{reference_solution}`."
            )
        if self.teacher_reference == "solution" and "{reference_solution}" not in self.teacher_template:
            raise ValueError(
                "`teacher_reference: solution` needs the placeholder `{reference_solution}` in `teacher_template`, "
                "where the reference solution goes."
            )
        try:
            self.teacher_template.format(ground_truth="x", reference_solution="y")
        except (KeyError, IndexError, ValueError) as err:
            raise ValueError(
                f"`teacher_template` is not a valid format string ({err!r}); write literal braces as `{{` and `}}`."
            ) from err
        _in_range("teacher_prefix_sharing_max_ratio", self.teacher_prefix_sharing_max_ratio, 0.0, 1.0, low_open=True)
        self._check_grpo_options()

    def _check_distillation_options(self) -> None:
        """The gate, bound, clip and back-off of `distillation_weight`: bad values, then settings that would do
        nothing, all found at once (one ValueError naming each field)."""
        problems = []
        if self.distillation_gate not in DISTILLATION_GATES:
            problems.append(
                f"`distillation_gate` must be one of {list(DISTILLATION_GATES)}, got {self.distillation_gate!r}."
            )
        for name in ("distillation_bound", "distillation_clip"):
            value = getattr(self, name)
            if value is not None and (
                isinstance(value, bool)
                or not isinstance(value, (int, float))
                or not value > 0
                or value == float("inf")
            ):
                problems.append(f"`{name}` must be a positive finite number or None, got {value!r}.")
        if not isinstance(self.distillation_backoff, bool):
            problems.append(f"`distillation_backoff` must be true or false, got {self.distillation_backoff!r}.")
        floor = self.distillation_backoff_floor
        if isinstance(floor, bool) or not isinstance(floor, (int, float)) or not 0 < floor <= 1:
            problems.append(f"`distillation_backoff_floor` must be in (0, 1], got {floor!r}.")
        elif self.distillation_backoff and self.distillation_weight > 0 and floor > self.distillation_weight:
            problems.append(
                f"`distillation_backoff_floor: {floor}` is above `distillation_weight: {self.distillation_weight}`: "
                "the back-off could only raise the weight. Set the floor at or below the weight."
            )
        if self.distillation_weight == 0:
            idle = [
                f"`{name}: {getattr(self, name)}`"
                for name, default in (
                    ("distillation_gate", "none"),
                    ("distillation_bound", None),
                    ("distillation_clip", None),
                    ("distillation_backoff", False),
                )
                if getattr(self, name) != default
            ]
            if idle:
                problems.append(
                    f"{', '.join(idle)} shape{'s' if len(idle) == 1 else ''} the distillation term of "
                    "`distillation_weight`, which is 0 here, so it would do nothing. Set `distillation_weight` in "
                    "(0, 1], or leave these unset."
                )
        if problems:
            raise ValueError(" ".join(problems))

    def _check_grpo_options(self) -> None:
        """Refuse GRPO options that would quietly turn GEAR or GiGPO back into GRPO, or feed noise into GEAR's KL."""
        mode = self.credit_mode
        if not self.plain_grpo and self.importance_sampling_level == "sequence":
            raise ValueError(
                f"`importance_sampling_level: sequence` (GSPO) cannot be combined with `credit: {self.credit}`"
                + (f" and `distillation_weight: {self.distillation_weight}`" if self.distillation_weight else "")
                + ": the "
                "sequence ratio averages the token log-ratios, so per-token advantages whose mean is the GRPO "
                "advantage give exactly GRPO's gradient. Use `importance_sampling_level: token`, or `credit: none` "
                "for plain GSPO."
            )
        if mode.per_step:
            if self.scale_rewards != "group":
                raise ValueError(
                    f"`scale_rewards: {self.scale_rewards}` is not supported with `credit: {self.credit}`: GiGPO "
                    "replaces TRL's advantages and normalizes within each group by `gigpo_mode`. Leave "
                    "`scale_rewards: group` and set `gigpo_mode: mean` for unscaled advantages (what "
                    "`scale_rewards: none` does in GRPO)."
                )
            if self.multi_objective_aggregation != "sum_then_normalize":
                raise ValueError(
                    f"`multi_objective_aggregation: {self.multi_objective_aggregation}` is not supported with "
                    f"`credit: {self.credit}`: GiGPO normalizes the weighted sum of the rewards "
                    "(`sum_then_normalize`). Use `sum_then_normalize`, or a GEAR mode, which keeps TRL's advantages."
                )
        if not self.uses_teacher:
            return
        if self.top_entropy_quantile < 1.0:
            raise ValueError(
                f"`top_entropy_quantile: {self.top_entropy_quantile}` is not supported with `credit: {self.credit}`: "
                "masking low-entropy tokens out of the loss breaks GEAR's guarantee that each completion keeps its "
                "mean advantage. Use `top_entropy_quantile: 1.0`, or `credit: none` / `gigpo`."
            )
        if self.fsdp or os.environ.get("ACCELERATE_USE_FSDP", "false").lower() in ("1", "true"):
            raise ValueError(
                f"FSDP is not supported with `credit: {self.credit}`: GEAR's teacher pass calls the backbone directly "
                "and reads the LM head's weight, which is untested on FSDP-sharded parameters. Use DeepSpeed ZeRO-2/3 "
                "(accelerate_configs/) or DDP."
            )

    @property
    def divergence_signal(self) -> str:
        """What the divergence pass computes: `divergence`, or the signed sampled-token log-ratio for `rlsd`."""
        return SIGNED_LOG_RATIO if self.credit_mode.signal == "log_ratio" else self.divergence

    @property
    def wants_log_ratio(self) -> bool:
        """Whether the divergence pass also gives the sampled token's log pT - log pS: `gear-signed` signs its signal
        by it, `gear` logs `gear/onsets_teacher_supported_frac` from it, and `distillation_weight` distils it (under
        `rlsd` it is the signal itself)."""
        mode = self.credit_mode
        return mode.log_ratio or (self.distillation_weight > 0 and mode.signal != "log_ratio")

    @property
    def wants_agreement(self) -> bool:
        """Whether the divergence pass also gives pT(y_t) and sum_v pS(v) pT(v) (`distillation_signal: agreement`)."""
        return self.distillation_weight > 0 and self.distillation_signal == "agreement"

    @property
    def teacher_reads_siblings(self) -> bool:
        """Whether teacher prompts may show a successful sibling (`teacher_reference: sibling` or its fallback)."""
        return self.uses_teacher and (self.teacher_reference == "sibling" or self.teacher_sibling_fallback)

    @property
    def uses_teacher(self) -> bool:
        """Whether the teacher pass runs: every mode that weights tokens by divergence, and any mode with
        `distillation_weight > 0` (`credit: none` then is GRPO plus self-distillation)."""
        return self.credit_mode.teacher or self.distillation_weight > 0

    @property
    def teacher_setting(self) -> str:
        """The setting that runs the teacher pass, as messages name it."""
        if self.credit_mode.teacher:
            return f"`credit: {self.credit}`"
        return f"`credit: {self.credit}` with `distillation_weight: {self.distillation_weight}`"

    @property
    def credit_mode(self) -> CreditMode:
        """The record of `credit` (`gear_trl.credit.modes`)."""
        return credit_mode(self.credit)

    @property
    def plain_grpo(self) -> bool:
        """Whether every token carries its completion's GRPO advantage: no teacher, no step advantages, no
        distillation (`credit: none` alone)."""
        mode = self.credit_mode
        return not mode.teacher and not mode.per_step and self.distillation_weight == 0


# Checks that need more than the config (the model, the PEFT config, the tools); GEARTrainer runs them before any
# model is loaded.


def check_peft_for_teacher(model, peft_config) -> None:
    """Prompt and prefix tuning put virtual tokens in front of the input inside the PEFT model's forward; GEAR's
    direct backbone calls would leave them out of the teacher, so the student and teacher would differ by them."""
    config = peft_config
    if config is None and isinstance(model, torch.nn.Module) and is_peft_model(model):
        config = model.active_peft_config
    if getattr(config, "is_prompt_learning", False):
        raise ValueError(
            f"PEFT {type(config).__name__} (prompt/prefix tuning) is not supported by GEAR's teacher pass, which "
            "calls the backbone directly and would leave out the virtual tokens. Use LoRA (`use_peft: true`), full "
            "fine-tuning, or `credit: none` / `gigpo`."
        )


def check_vllm_server_tools(args, has_tools: bool) -> None:
    """TRL's vLLM server mode splits the gathered results by `process_index * len(prompts)`, which assumes equal prompt
    counts on every rank; the lockstep tool rounds give a finished rank a one-prompt throwaway generation."""
    if args.use_vllm and args.vllm_mode == "server" and has_tools and args.world_size > 1:
        raise ValueError(
            "`use_vllm: true` with `vllm_mode: server` and tools on several processes is not supported: ranks run "
            "different numbers of tool rounds and TRL's server mode splits the results assuming equal prompt counts. "
            "Use `vllm_mode: colocate`, or a single training process."
        )
