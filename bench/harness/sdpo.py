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

PRIVILEGED = ("none", "solution")


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


def build_sdpo_trainer(script_args, training_args, model_args, train_dataset, privileged_context: str = "none"):
    """TRL's `SDPOTrainer` for the recipe parsed by `gear_trl.train.parse_args` (same model, data and rewards as
    `gear_trl.train.build_trainer` would use)."""
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
        script_args, training_args, model_args, train_dataset, privileged_context=job["sdpo"]["privileged_context"]
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
    "completion_length": "completions/mean_length",
}
"""The series an SDPO run keeps (result name -> logged metric)."""
