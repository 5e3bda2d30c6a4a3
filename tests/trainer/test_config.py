"""GEARConfig validates every GEAR field at construction, naming the field and what it accepts."""

import re

import pytest

from gear_trl import GEARConfig
from gear_trl.credit import CREDIT_MODES


def make(**kwargs):
    return GEARConfig(output_dir="unused", use_cpu=True, bf16=False, report_to="none", **kwargs)


def test_defaults_are_the_documented_ones():
    config = make()
    assert (config.credit, config.onset_threshold, config.entropy_threshold) == ("gear", 0.1, 0.5)
    assert (config.weight_alpha, config.weight_eps, config.weight_lambda, config.weight_norm) == (
        1.0,
        0.5,
        1.0,
        "mean",
    )
    assert config.teacher == "live" and "{ground_truth}" in config.teacher_template
    assert config.onset_min_kl == 1e-3
    assert (config.rlsd_lambda, config.rlsd_eps, config.rlsd_lambda_decay_steps, config.rlsd_negative_only) == (
        0.5,
        0.2,
        None,
        False,
    )


def test_rlsd_reads_the_signed_sampled_log_ratio_and_refuses_topk():
    assert make(credit="rlsd").divergence_signal == "sampled_signed" and make(credit="rlsd").uses_teacher
    assert make(credit="gear", divergence="topk").divergence_signal == "topk"
    with pytest.raises(ValueError, match="divergence: topk"):
        make(credit="rlsd", divergence="topk")


def test_unknown_credit_mode_lists_the_valid_ones():
    with pytest.raises(ValueError) as err:
        make(credit="segment")
    message = str(err.value)
    assert "`credit`" in message and "'segment'" in message
    for mode in CREDIT_MODES:
        assert repr(mode) in message


@pytest.mark.parametrize(
    "field,value,fragment",
    [
        ("onset_threshold", 1.5, "[0.0, 1.0]"),
        ("onset_threshold", -0.1, "[0.0, 1.0]"),
        ("entropy_threshold", 2.0, "[0.0, 1.0]"),
        ("weight_eps", 1.0, "[0.0, 1.0)"),
        ("weight_lambda", 1.2, "[0.0, 1.0]"),
        ("weight_alpha", -1.0, "[0.0, inf]"),
        ("gigpo_gamma", 1.5, "[0.0, 1.0]"),
        ("gigpo_similarity_threshold", 0.0, "(0.0, 1.0]"),
        ("divergence_chunk_size", 0, "positive integer"),
        ("fixed_segment_len", 0, "positive integer"),
        ("max_segment_len", 0, "positive integer or None"),
        ("max_teacher_prompt_length", -3, "positive integer or None"),
        ("teacher_prefix_sharing_max_ratio", 0.0, "(0.0, 1.0]"),
        ("teacher_prefix_sharing_max_ratio", 1.5, "(0.0, 1.0]"),
        ("onset_min_kl", -1e-3, "[0.0, inf]"),
        ("rlsd_lambda", 1.5, "[0.0, 1.0]"),
        ("rlsd_eps", 1.0, "[0.0, 1.0)"),
        ("failed_prefix_weight", 1.5, "[0.0, 1.0]"),
        ("failed_prefix_weight", -0.5, "[0.0, 1.0]"),
        ("rlsd_lambda_decay_steps", 0, "positive integer or None"),
        ("distillation_weight", 1.5, "[0.0, 1.0]"),
        ("distillation_weight", -0.1, "[0.0, 1.0]"),
    ],
)
def test_out_of_range_values_name_the_field_and_range(field, value, fragment):
    with pytest.raises(ValueError) as err:
        make(**{field: value})
    assert f"`{field}`" in str(err.value) and fragment in str(err.value)


@pytest.mark.parametrize(
    "field,value",
    [
        ("divergence", "js"),
        ("normalize", "zscore"),
        ("weight_norm", "sum"),
        ("teacher", "frozen"),
        ("gigpo_mode", "std"),
    ],
)
def test_unknown_choices_are_rejected(field, value):
    with pytest.raises(ValueError, match=f"`{field}` must be one of"):
        make(**{field: value})


def test_teacher_template_needs_the_ground_truth_placeholder():
    with pytest.raises(ValueError, match="ground_truth"):
        make(teacher_template="Reference: {answer}")
    with pytest.raises(ValueError, match="braces"):
        make(teacher_template="{ground_truth} then a stray {")


def test_uses_teacher_only_for_divergence_modes():
    assert not make(credit="none").uses_teacher
    assert not make(credit="gigpo").uses_teacher
    assert make(credit="gear-gigpo").uses_teacher and make(credit="token").uses_teacher


def test_failed_prefix_weight_defaults_to_the_papers_gear_and_needs_gears_segments():
    assert make().failed_prefix_weight == 1.0
    for credit in ("gear", "gear-no-entropy", "gear-signed"):
        assert make(credit=credit, failed_prefix_weight=0.0).failed_prefix_weight == 0.0
    for credit in ("none", "token", "turn", "fixed", "rlsd", "gigpo", "gear-gigpo"):
        with pytest.raises(
            ValueError, match=re.escape("`failed_prefix_weight: 0.5`") + ".*" + re.escape(f"`credit: {credit}`")
        ):
            make(credit=credit, failed_prefix_weight=0.5)
    # At 1.0 it does nothing, so every mode takes it.
    assert make(credit="rlsd", failed_prefix_weight=1.0).credit == "rlsd"


def test_distillation_weight_defaults_to_the_papers_gear_and_runs_the_teacher_in_every_mode():
    assert make().distillation_weight == 0.0
    for credit in ("gear", "gear-signed", "token", "rlsd", "gear-gigpo", "none", "gigpo"):
        args = make(credit=credit, distillation_weight=0.5)
        # the log-ratio comes from the divergence pass (rlsd's own signal is it)
        assert args.wants_log_ratio == (credit != "rlsd")
        assert args.uses_teacher and not args.plain_grpo
    # GRPO plus self-distillation: `none` runs the teacher pass only for the distillation
    assert not make(credit="none").uses_teacher and make(credit="none").plain_grpo
    assert not make(credit="gigpo").uses_teacher and not make(credit="gigpo").plain_grpo
    assert not make(credit="token").wants_log_ratio


def test_renamed_credit_modes_are_refused_with_their_new_name():
    for old, new in (("gear_no_entropy", "gear-no-entropy"), ("gear+gigpo", "gear-gigpo")):
        with pytest.raises(ValueError, match=re.escape(f"got {old!r} (renamed: did you mean {new!r}?)")):
            make(credit=old)
    with pytest.raises(ValueError, match=re.escape("did you mean 'gear-signed'")):
        make(credit="gear_signed")
    with pytest.raises(ValueError, match=re.escape("`teacher` must be one of") + ".*did you mean 'periodic'"):
        make(teacher="periodical")


def test_sequence_level_importance_sampling_is_refused_with_distillation_on_grpo():
    with pytest.raises(ValueError, match=re.escape("`credit: none` and `distillation_weight: 0.25`")):
        make(credit="none", distillation_weight=0.25, importance_sampling_level="sequence")
    assert make(credit="none", importance_sampling_level="sequence").importance_sampling_level == "sequence"


def test_distillation_signal_agreement_needs_a_weight_and_the_whole_teacher_distribution():
    assert make().distillation_signal == "log_ratio"  # SDPO's term; the paper's GEAR has none (weight 0)
    args = make(credit="none", distillation_weight=0.5, distillation_signal="agreement")
    assert args.wants_agreement and args.uses_teacher and not make(distillation_weight=0.5).wants_agreement
    with pytest.raises(ValueError, match=re.escape("with `distillation_weight: 0` it would do nothing")):
        make(distillation_signal="agreement")
    with pytest.raises(ValueError, match=re.escape("only with `divergence: full`; here it computes `sampled`")):
        make(distillation_weight=0.5, distillation_signal="agreement", divergence="sampled")
    with pytest.raises(ValueError, match=re.escape("`credit: rlsd` reads the sampled token's log-ratio alone")):
        make(credit="rlsd", distillation_weight=0.5, distillation_signal="agreement")
    with pytest.raises(ValueError, match=re.escape("`distillation_signal` must be one of log_ratio, agreement")):
        make(distillation_weight=0.5, distillation_signal="prob")
