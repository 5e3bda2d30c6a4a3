"""Credit assignment for gear_trl: pure tensor functions, no trainer state.

- :func:`reverse_kl_and_entropy`: student-teacher reverse KL and entropy per token.
- :func:`lm_head_statistics`: the same per row, with the student's log-partition and target log-probabilities.
- :class:`CreditMode`, :func:`register_credit_mode`, :func:`credit_mode`: the credit modes' registry, one record and
  one function per mode; :class:`Distillation`: a mode's distillation term.
- :func:`assign_credit`: the trainer's call with the divergence: a mode's credit, distillation and :class:`CreditTrace`;
  :func:`group_credit`: its call after generation: a mode's step advantages (:class:`StepAdvantages`, GiGPO's) and
  what its distillation reads of each row's group, from a :class:`GroupBatch` carrying the trainer's gathers.
- :func:`segment_signal`: normalized signal and segments for a credit mode.
- :func:`below_noise_floor`: completions whose largest KL is below the noise floor (`onset_min_kl`).
- :func:`gear_token_weights`: GEAR's asymmetric multiplicative token weights; :func:`spare_failed_prefix` lowers a
  failed completion's weights before its first segment (`failed_prefix_weight`, not in the paper), the tokens
  :func:`failed_prefix_mask` marks.
- :func:`gigpo_advantages`: GiGPO step-level advantages; :func:`gigpo_token_advantages` spreads them over a rank's tokens;
  :func:`gigpo_step_advantages` is `gigpo`'s and `gear-gigpo`'s ``steps`` (from a :class:`GroupBatch`).
- :func:`rlsd_token_weights`, :func:`rlsd_lambda`: RLSD's token weights (`credit: rlsd`) and its lambda schedule.
- :func:`signed_signal`, :func:`teacher_supported_onsets`: `credit: gear-signed` (not in the paper) and the share of onsets in
  passed rollouts on teacher-supported tokens.
- :func:`distill_advantages`, :func:`distillation_share`: GEAR's advantage blended with the teacher's sampled-token
  log-ratio, SDPO's distillation as an advantage (`distillation_weight`, after SDPO, arXiv 2601.20802), and the share it holds.
- :func:`group_has_outcome_signal`, :func:`group_advantage_scale`, :func:`distillation_gate`,
  :func:`bound_distill_signal`: the gate, clip and bound of the distillation term (`distillation_gate`,
  `distillation_clip`, `distillation_bound`); :func:`collapse_verdict`: the collapse monitor's rule over a run's
  logged history.
- :func:`agreement_advantages`: the teacher's probability of the sampled token against its expectation under the
  student, normalized (`distillation_signal: agreement`, this library's).
- :func:`failure_contrast_sums`, :func:`failure_contrast`: label-free diagnostics (teacher KL in failed vs passed
  rollouts).
"""

from .assign import GroupCredit, assign_credit, group_credit
from .credit_trace import CreditTrace
from .diagnostics import failure_contrast, failure_contrast_sums
from .distill import (
    agreement_advantages,
    bound_distill_signal,
    collapse_verdict,
    distill_advantages,
    distillation_gate,
    distillation_share,
    group_advantage_scale,
    group_has_outcome_signal,
)
from .divergence import HeadStatistics, lm_head_statistics, reverse_kl_and_entropy
from .gigpo import gigpo_advantages, gigpo_step_advantages, gigpo_token_advantages
from .modes import (
    CREDIT_MODES,
    CreditInputs,
    CreditMode,
    CreditOutputs,
    DeclaredOptions,
    Distillation,
    DistillationTerm,
    GroupBatch,
    StepAdvantages,
    credit_mode,
    credit_modes,
    register_credit_mode,
)
from .rlsd import rlsd_lambda, rlsd_token_weights
from .segments import (
    SEGMENT_MODES,
    below_noise_floor,
    register_segmenter,
    segment_signal,
    segment_stats,
)
from .signed import segment_onsets, signed_signal, teacher_supported_onsets
from .weights import failed_prefix_mask, gear_token_weights, spare_failed_prefix, weights_from_signal

__all__ = [
    "CREDIT_MODES",
    "SEGMENT_MODES",
    "CreditInputs",
    "CreditMode",
    "CreditOutputs",
    "CreditTrace",
    "DeclaredOptions",
    "Distillation",
    "DistillationTerm",
    "GroupBatch",
    "GroupCredit",
    "HeadStatistics",
    "StepAdvantages",
    "agreement_advantages",
    "assign_credit",
    "below_noise_floor",
    "bound_distill_signal",
    "collapse_verdict",
    "credit_mode",
    "credit_modes",
    "distill_advantages",
    "distillation_gate",
    "distillation_share",
    "failed_prefix_mask",
    "failure_contrast",
    "failure_contrast_sums",
    "gear_token_weights",
    "gigpo_advantages",
    "gigpo_step_advantages",
    "gigpo_token_advantages",
    "group_advantage_scale",
    "group_credit",
    "group_has_outcome_signal",
    "lm_head_statistics",
    "register_credit_mode",
    "register_segmenter",
    "reverse_kl_and_entropy",
    "rlsd_lambda",
    "rlsd_token_weights",
    "segment_onsets",
    "segment_signal",
    "segment_stats",
    "signed_signal",
    "spare_failed_prefix",
    "teacher_supported_onsets",
    "weights_from_signal",
]
