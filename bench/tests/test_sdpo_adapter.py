"""bench/harness/sdpo.py: TRL's SDPOTrainer driven by a gear_trl recipe, as it ships (issue 51's `sdpo-trl` arms)."""

from __future__ import annotations

import pytest

from bench.harness import REPO_ROOT as REPO
from bench.harness.sdpo import SHARED_FIELDS, build_sdpo_trainer, sdpo_config, with_privileged_context
from gear_trl.train import load_splits, parse_args

RECIPE = [
    "--config", "recipes/tiny/config_horizon.yaml",
    "--model_name_or_path", "data/tiny-qwen3-horizon-independent",
    "--dataset_name", "data/horizon/independent/k8",
    "--credit", "none", "--teacher_reference", "solution",
    "--max_steps", "1", "--per_device_train_batch_size", "8", "--num_generations", "4",
    "--max_completion_length", "24", "--learning_rate", "3e-4", "--seed", "7",
    "--report_to", "none", "--save_strategy", "no",
]  # fmt: skip


def recipe(tmp_path):
    script_args, training_args, model_args = parse_args([*RECIPE, "--output_dir", str(tmp_path / "out")])
    dataset, _ = load_splits(script_args, training_args)
    return script_args, training_args, model_args, dataset.select(range(8))


def test_the_recipe_sets_the_shared_fields_and_sdpo_keeps_its_own_defaults(tmp_path):
    from trl.experimental.sdpo import SDPOConfig

    _, training_args, _, _ = recipe(tmp_path)
    args = sdpo_config(training_args)
    shipped = SDPOConfig(output_dir=str(tmp_path / "defaults"), use_cpu=True, bf16=False)
    for name in ("seed", "learning_rate", "max_steps", "per_device_train_batch_size", "output_dir", "use_cpu"):
        assert getattr(args, name) == getattr(training_args, name), name
    for name in SHARED_FIELDS:
        if hasattr(training_args, name) and name != "num_generations_eval":
            assert getattr(args, name) == getattr(training_args, name), name
    assert (args.num_generations, args.max_completion_length) == (4, 24)
    # TRL's own SDPO settings, not the recipe's GRPO ones
    for name in ("distillation_weight", "teacher_model_kind", "loss_type", "beta", "teacher_sync_steps",
                 "include_environment_feedback", "reprompt_template"):  # fmt: skip
        assert getattr(args, name) == getattr(shipped, name), name
    assert args.distillation_weight == 1.0


def test_the_solution_variant_shows_the_reference_solution_as_privileged_context(tmp_path):
    _, _, _, dataset = recipe(tmp_path)
    shown = with_privileged_context(dataset)
    assert shown["privileged_context"] == dataset["reference_solution"]
    with pytest.raises(ValueError, match="column 'reference_solution'"):
        with_privileged_context(dataset.remove_columns("reference_solution"))


@pytest.mark.slow
def test_sdpo_trains_a_step_from_the_recipe_with_the_solution_shown(tmp_path):
    script_args, training_args, model_args, dataset = recipe(tmp_path)
    with pytest.raises(ValueError, match="privileged_context must be one of"):
        build_sdpo_trainer(script_args, training_args, model_args, dataset, privileged_context="answer")
    trainer = build_sdpo_trainer(script_args, training_args, model_args, dataset, privileged_context="solution")
    assert trainer.args.include_environment_feedback
    trainer.train()
    assert trainer.state.global_step == 1
    logged = trainer.state.log_history[0]
    assert logged["self_distillation/feedback_used_fraction"] == 1.0  # every row's teacher saw its solution


def test_the_sdpo_teacher_probe_builds_each_trainers_prompt():
    """bench/sdpo_teacher.py: the student's prompt is the trainer's (`dataset_format: generic`), GEAR's teacher prompt
    carries the reference solution in GEAR's template, and SDPO's two use TRL's own templates around the same text."""
    import json

    from bench.sdpo_teacher import DATA, prompts_for, sdpo_templates
    from gear_trl.data.math_tasks import GENERIC
    from gear_trl.trainer.gear_config import DEFAULT_MATH_SOLUTION_TEMPLATE

    row = json.loads((REPO / DATA).read_text().splitlines()[0])
    templates = sdpo_templates()
    assert "{successful_previous_attempt}" in templates["solution_template"]
    prompts = prompts_for(row, templates)
    assert prompts["student"] == GENERIC(row)["prompt"]
    question = prompts["student"][-1]["content"]
    gear = prompts["gear-solution"][-1]["content"]
    assert gear.startswith(question) and row["reference_solution"] in gear
    assert DEFAULT_MATH_SOLUTION_TEMPLATE.split("{")[0].strip() in gear
    demo, feedback = prompts["sdpo-demonstration"][-1]["content"], prompts["sdpo-feedback"][-1]["content"]
    for text in (demo, feedback):
        assert text.startswith(question) and row["reference_solution"] in text
    assert (
        templates["solution_template"].split("{")[0] in demo
        and templates["feedback_template"].split("{")[0] in feedback
    )
    assert templates["feedback_template"].split("{")[0] not in demo


# -- issue 73 item 3: the fair SDPO arm ------------------------------------------------------------------------------


def test_the_fair_arm_shows_sdpos_teacher_gears_prompt_at_weight_one_half(tmp_path):
    """`sdpo-trl-fair-0.5`: SDPOTrainer's teacher prompt is GEAR's, token for token (the question, then GEAR's
    solution template filled with the row's solution), `distillation_weight` 0.5, every other SDPO field TRL's."""
    from trl.experimental.sdpo import SDPOConfig
    from trl.experimental.sdpo.sdpo_trainer import SuccessfulRolloutTeacherContextBuilder

    from bench import credit_methods as study
    from bench.harness.sdpo import GEAR_WORDING
    from gear_trl.data.math_tasks import GENERIC
    from gear_trl.teacher.prompts import teacher_prompt
    from gear_trl.trainer.gear_config import DEFAULT_MATH_SOLUTION_TEMPLATE

    job = study.job_for("independent-k8", "sdpo-trl-fair-0.5", 0, tmp_path)
    assert job["sdpo"] == {"privileged_context": "gear-solution", "distillation_weight": 0.5}
    assert job["overrides"][-2:] == ["--teacher_reference", "solution"]  # GEAR's solution template, as its arms
    assert "sdpo-trl-fair-0.5" not in study.arms_of("independent-k8")  # not in the declared study's families
    script_args, training_args, model_args, dataset = recipe(tmp_path)
    assert training_args.teacher_template == DEFAULT_MATH_SOLUTION_TEMPLATE
    trainer = build_sdpo_trainer(script_args, training_args, model_args, dataset,
                                 privileged_context="gear-solution", distillation_weight=0.5)  # fmt: skip
    args, shipped = trainer.args, SDPOConfig(output_dir=str(tmp_path / "defaults"), use_cpu=True, bf16=False)
    assert args.distillation_weight == 0.5 and args.include_environment_feedback
    assert (args.reprompt_template, args.feedback_template) == (GEAR_WORDING["reprompt_template"],
                                                               GEAR_WORDING["feedback_template"])  # fmt: skip
    for name in ("teacher_model_kind", "loss_type", "beta", "teacher_sync_steps", "distillation_mode",
                 "distillation_is_clip", "success_reward_threshold", "solution_template"):  # fmt: skip
        assert getattr(args, name) == getattr(shipped, name), name
    # SDPO's reprompt for a row (no sibling demonstration, its feedback the privileged context) is GEAR's teacher
    row = dataset[0]
    shown = trainer.train_dataset[0]["privileged_context"]
    builder = SuccessfulRolloutTeacherContextBuilder(trainer)
    sdpo_teacher = builder._build_reprompt_text(GENERIC(row)["prompt"][-1]["content"], "",
                                                args.feedback_template.format(feedback_raw=shown))  # fmt: skip
    gear_teacher = teacher_prompt(GENERIC(row)["prompt"], row["ground_truth"], DEFAULT_MATH_SOLUTION_TEMPLATE,
                                  row["reference_solution"])[-1]["content"]  # fmt: skip
    assert sdpo_teacher == gear_teacher and row["reference_solution"] in sdpo_teacher
    # a sibling's demonstration in SDPO's wording is left out of the fair arm's prompt
    assert builder._build_reprompt_text("Q", "\nCorrect solution:\n\nX\n\n", "F") == "QF"


@pytest.mark.slow
def test_the_fair_arm_trains_a_step_and_keeps_sdpos_diagnostics(tmp_path):
    from bench.harness.runs import _log_series
    from bench.harness.sdpo import SDPO_KEPT, SDPO_SERIES

    script_args, training_args, model_args, dataset = recipe(tmp_path)
    trainer = build_sdpo_trainer(script_args, training_args, model_args, dataset,
                                 privileged_context="gear-solution", distillation_weight=0.5)  # fmt: skip
    trainer.train()
    logged = trainer.state.log_history[0]
    assert logged["self_distillation/feedback_used_fraction"] == 1.0  # every row's teacher saw GEAR's wording
    assert "self_distillation/policy_loss" in logged  # weight 0.5: the reward gradient is kept
    history = [dict(e, reward=e["self_distillation/reward_mean"]) for e in trainer.state.log_history
               if "self_distillation/reward_mean" in e]  # fmt: skip
    kept = {name: _log_series(history, SDPO_SERIES[name]) for name in SDPO_KEPT}
    assert kept["feedback_used_fraction"] == [1.0] and kept["policy_loss"][0] is not None
