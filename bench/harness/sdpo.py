"""TRL's SDPOTrainer (`trl.experimental.sdpo`), as it ships, driven by the same recipe as a `gear_trl.train` run.

An adapter, not a reimplementation: the recipe's data, warm start, rewards, step budget, batch, generations per prompt,
sampling and learning rate go to TRL's `SDPOConfig`; every SDPO-specific field keeps TRL's default (its teacher, loss,
distillation weight 1.0, reprompt templates). `privileged_context="solution"` puts each row's reference solution in
SDPO's `privileged_context` column and turns on `include_environment_feedback`, so its teacher is shown the solution
(as GEAR's `teacher_reference: solution` is), besides its default successful-sibling demonstrations.

What still differs from GEAR's arms (docs/configuration.md says it too): the teacher prompt's wording (SDPO's
`reprompt_template` and `feedback_template`, not GEAR's `teacher_template`), its teacher (TRL's default EMA of the
policy, update rate 0.05, against GEAR's live policy), the loss aggregation and clipping of TRL's SDPO loss (its
`loss_type` and `distillation_is_clip` defaults), and that its distillation is a loss term rather than GEAR's blend
into the advantage.

Issue 73's fair arm (`privileged_context="gear-solution"`, `distillation_weight=0.5`): the teacher is shown GEAR's
teacher wording instead of SDPO's (`GEAR_WORDING`: its reprompt is the question followed by GEAR's filled template,
token for token), and the weight 0.5 keeps half of GRPO's reward gradient; every other SDPO field stays TRL's.
"""

from __future__ import annotations

import dataclasses

SHARED_FIELDS = (
    "num_generations",
    "num_generations_eval",
    "max_completion_length",
    "max_prompt_length",
    "steps_per_generation",
    "temperature",
    "top_p",
    "top_k",
    "min_p",
    "repetition_penalty",
    "chat_template_kwargs",
    "shuffle_dataset",
    "remove_unused_columns",
)
"""GRPO fields SDPOConfig has with the same meaning: they follow the recipe (`generation_batch_size` follows from
`steps_per_generation`, as GRPOConfig derives it; SDPOConfig refuses both at once). Every other SDPO field keeps TRL's
default (`beta`, `loss_type`, `epsilon`, `distillation_*`, `teacher_*`, the reprompt templates, ...)."""

PRIVILEGED = ("none", "solution", "gear-solution")
"""What SDPO's teacher is shown besides its successful-sibling demonstrations: nothing more (as it ships), the row's
reference solution in SDPO's own wording (`solution`), or GEAR's teacher wording (`gear-solution`, issue 73's fair
arm: `gear_teacher_wording`)."""

GEAR_WORDING = {"reprompt_template": "{prompt}{feedback}", "feedback_template": "{feedback_raw}"}
"""The fair arm's templates: the teacher's last user message is the question followed by exactly what GEAR's teacher
template appends (the row's `privileged_context`, `gear_teacher_wording`), so SDPO's teacher prompt is GEAR's,
token for token. `{solution}` (a successful sibling written in SDPO's own wording, "Correct solution:", which the
warm starts cannot read: bench/sdpo_teacher.py) is left out; GEAR's teacher shows no sibling either."""


def gear_teacher_wording(dataset, training_args):
    """`dataset` with SDPO's `privileged_context` set to the text GEAR's teacher appends to each row's question
    (`gear_trl.teacher.prompts.teacher_hint`): `training_args.teacher_template` (a `GEARConfig`'s, the solution template
    under `teacher_reference: solution`) filled with the row's ground truth and reference solution (the answer where
    the row has none), as GEAR's teacher prompt is filled."""
    from gear_trl.data.math_tasks import REFERENCE_SOLUTION_COLUMN
    from gear_trl.teacher.prompts import teacher_hint

    column, template = training_args.ground_truth_column, training_args.teacher_template
    if column not in dataset.column_names:
        raise ValueError(
            f"GEAR's teacher wording reads each row's ground truth from column {column!r}, which the dataset lacks "
            f"(its columns: {sorted(dataset.column_names)})."
        )
    return dataset.map(
        lambda row: {"privileged_context": teacher_hint(template, row[column], row.get(REFERENCE_SOLUTION_COLUMN))},
        desc="SDPO privileged context in GEAR's teacher wording",
    )


def sdpo_config(training_args, **overrides):
    """An `SDPOConfig` with `training_args`' (a `GEARConfig`) TrainingArguments fields and `SHARED_FIELDS`, TRL's
    defaults elsewhere, then `overrides`."""
    from transformers import TrainingArguments
    from trl.experimental.sdpo import SDPOConfig

    names = {f.name for f in dataclasses.fields(TrainingArguments) if f.init} | set(SHARED_FIELDS)
    sdpo_names = {f.name for f in dataclasses.fields(SDPOConfig) if f.init}
    values = {name: getattr(training_args, name) for name in names & sdpo_names if hasattr(training_args, name)}
    # TrainingArguments fields __post_init__ derives or rewrites are passed as the user gave them
    for derived in ("logging_dir", "hub_token", "push_to_hub_token", "deepspeed_plugin"):
        values.pop(derived, None)
    values.update(overrides)
    return SDPOConfig(**values)


def with_privileged_context(dataset, column: str = "reference_solution"):
    """`dataset` with SDPO's `privileged_context` column set to each row's reference solution (`column`)."""
    if column not in dataset.column_names:
        raise ValueError(
            f"`privileged_context: solution` reads each row's reference solution from column {column!r}, which the "
            f"dataset lacks (its columns: {sorted(dataset.column_names)})."
        )
    return dataset.map(lambda row: {"privileged_context": row[column]}, desc="SDPO privileged context")


def build_sdpo_trainer(
    script_args,
    training_args,
    model_args,
    train_dataset,
    privileged_context: str = "none",
    distillation_weight: float | None = None,
):
    """TRL's `SDPOTrainer` for the recipe parsed by `gear_trl.train.parse_args` (same model, data and rewards as
    `gear_trl.train.build_trainer` would use). `privileged_context="gear-solution"` shows the teacher GEAR's teacher
    wording (`GEAR_WORDING`, `gear_teacher_wording`); `distillation_weight` replaces TRL's default 1.0 (None keeps
    it)."""
    from trl import get_peft_config
    from trl.experimental.sdpo import SDPOTrainer

    from gear_trl.rewards import get_reward_funcs
    from gear_trl.train import reward_names

    if privileged_context not in PRIVILEGED:
        raise ValueError(f"privileged_context must be one of {PRIVILEGED}; got {privileged_context!r}.")
    if script_args.environment:
        raise ValueError("The SDPO adapter runs single-turn tasks only: TRL's SDPOTrainer takes no environment.")
    overrides = {}
    if privileged_context == "solution":
        train_dataset = with_privileged_context(train_dataset)
        overrides["include_environment_feedback"] = True
    elif privileged_context == "gear-solution":
        train_dataset = gear_teacher_wording(train_dataset, training_args)
        overrides.update(GEAR_WORDING, include_environment_feedback=True)
    if distillation_weight is not None:
        overrides["distillation_weight"] = distillation_weight
    args = sdpo_config(training_args, **overrides)
    model_init_kwargs = dict(training_args.model_init_kwargs or {})
    if model_args.dtype is not None:
        model_init_kwargs.setdefault("dtype", model_args.dtype)
    args.model_init_kwargs = model_init_kwargs or None
    reward_funcs = get_reward_funcs(reward_names(script_args), training_args.ground_truth_column)
    return SDPOTrainer(
        model=model_args.model_name_or_path,
        reward_funcs=reward_funcs,
        args=args,
        train_dataset=train_dataset,
        peft_config=get_peft_config(model_args),
    )


def train_sdpo(job: dict) -> dict:
    """A `train` job run by TRL's SDPOTrainer (`job["sdpo"]`: its `privileged_context`) instead of GEARTrainer: the
    same recipe, seed, steps and held-out scoring as `bench.harness.runs.train_one`, and its own series (no `gear/`
    metric: SDPO logs none)."""
    import time
    from pathlib import Path

    from gear_trl.train import load_splits, parse_args

    from .runs import run_record, score_and_keep, train_argv, worker_setup

    worker_setup()
    run_dir = Path(job["work_dir"]) / job["key"]
    run_dir.mkdir(parents=True, exist_ok=True)
    script_args, training_args, model_args = parse_args(train_argv(job, run_dir, "none"))
    train_dataset, _ = load_splits(script_args, training_args)
    start = time.perf_counter()
    trainer = build_sdpo_trainer(
        script_args,
        training_args,
        model_args,
        train_dataset,
        privileged_context=job["sdpo"]["privileged_context"],
        distillation_weight=job["sdpo"].get("distillation_weight"),
    )
    trainer.train()
    train_s = time.perf_counter() - start
    model_dir = str(run_dir / "model")
    trainer.save_model(model_dir)
    trainer.processing_class.save_pretrained(model_dir)
    key = "self_distillation/reward_mean"  # SDPO's name for GRPO's `reward`
    history = [dict(entry, reward=entry[key]) for entry in trainer.state.log_history if key in entry]
    result = run_record(job, trainer, train_s, history, SDPO_SERIES)
    del trainer
    return score_and_keep(result, model_dir, job, run_dir)


SDPO_SERIES = {
    "reward": "reward",
    "distillation_loss": "self_distillation/distillation_loss",
    "reprompt_sample_fraction": "self_distillation/reprompt_sample_fraction",
    "success_sample_fraction": "self_distillation/success_sample_fraction",
    "feedback_used_fraction": "self_distillation/feedback_used_fraction",
    "policy_loss": "self_distillation/policy_loss",
    "completion_length": "completions/mean_length",
}
"""The series an SDPO run keeps (result name -> logged metric); the credit-methods study keeps them in its run files
(`SDPO_KEPT`)."""

SDPO_KEPT = tuple(name for name in SDPO_SERIES if name != "reward")
"""SDPO's own diagnostics a credit-methods run file keeps beside `reward` (bench/credit_methods.py `dispatch`)."""
