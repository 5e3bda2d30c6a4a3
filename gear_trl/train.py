"""Train with GEAR (or plain GRPO, `credit: none`) from a YAML recipe.

    python -m gear_trl.train --config recipes/tiny/config_math.yaml
    accelerate launch --config_file accelerate_configs/zero3.yaml -m gear_trl.train --config RECIPE.yaml

Any recipe field can be overridden on the command line (`--learning_rate 1e-6`). The run resumes from the last
checkpoint in `output_dir` when there is one, saves the model (the adapter under LoRA), writes the model card, and
pushes to the Hub when `push_to_hub` is set (access is checked before training starts).
"""

from __future__ import annotations

import difflib
import os
import re
import sys
from dataclasses import dataclass, field, fields

from transformers.trainer_utils import get_last_checkpoint
from trl import ModelConfig, ScriptArguments, TrlParser, get_peft_config

from .config import GEARConfig


@dataclass
class GEARScriptArguments(ScriptArguments):
    """Data and reward arguments of a recipe (model and training arguments live in ModelConfig and GEARConfig)."""

    dataset_format: str = field(
        default="auto",
        metadata={
            "help": "Dataset adapter mapping rows to `prompt` + ground truth: `auto` (by columns), `gsm8k` "
            "(question, answer with '#### n'), `math` (problem, solution with \\boxed{}), `aime` (problem, answer: "
            "the answer itself), `tool_use` (prompt, tools, ground_truth: BFCL-style rows), `generic` (prompt, "
            "ground_truth)."
        },
    )
    reward_funcs: list[str] = field(
        default_factory=lambda: ["accuracy"],
        metadata={"help": "Reward functions by registered name (see `gear_trl.rewards.REWARD_FUNCS`), summed."},
    )
    system_prompt: str | None = field(default=None, metadata={"help": "Optional system message for every prompt."})
    environment: str | None = field(
        default=None,
        metadata={
            "help": "Executable tool environment passed to TRL as `environment_factory` (e.g. `bfcl`); its methods "
            "become the tools of a multi-turn rollout. None: no tool execution."
        },
    )
    max_train_samples: int | None = field(
        default=None, metadata={"help": "Use only the first N training rows (quick experiments)."}
    )


def make_parser() -> TrlParser:
    return TrlParser((GEARScriptArguments, GEARConfig, ModelConfig))


def parse_args(argv: list[str] | None = None):
    """Parse a recipe and command-line overrides; an unknown recipe key is an error that names it."""
    parser = make_parser()
    try:
        return parser.parse_args_and_config(args=argv)
    except ValueError as err:
        unknown = re.findall(r"'--([A-Za-z0-9_]+)'", str(err)) if "Unknown arguments" in str(err) else []
        if not unknown:
            raise
        known = sorted({f.name for cls in (GEARScriptArguments, GEARConfig, ModelConfig) for f in fields(cls)})
        parts = []
        for key in unknown:
            close = difflib.get_close_matches(key, known, n=1)
            parts.append(f"{key!r}" + (f" (did you mean {close[0]!r}?)" if close else ""))
        raise ValueError(f"Unknown recipe key(s): {', '.join(parts)}. Remove or rename them.") from None


def load_splits(script_args: GEARScriptArguments, training_args: GEARConfig):
    """Load the recipe's dataset and map it through the task adapter; returns (train, eval or None)."""
    from datasets import load_dataset

    from .data import prepare_dataset

    if not script_args.dataset_name:
        raise ValueError(
            "The recipe needs `dataset_name` (a Hub dataset id or a local folder such as data/math/generic)."
        )
    dataset = load_dataset(script_args.dataset_name, name=script_args.dataset_config)
    if script_args.dataset_train_split not in dataset:
        raise ValueError(
            f"`dataset_train_split` {script_args.dataset_train_split!r} is not in {script_args.dataset_name!r}; "
            f"its splits are {list(dataset)}."
        )

    def prepare(split):
        data = dataset[split]
        if split == script_args.dataset_train_split and script_args.max_train_samples:
            data = data.select(range(min(script_args.max_train_samples, len(data))))
        return prepare_dataset(
            data,
            adapter=script_args.dataset_format,
            ground_truth_column=training_args.ground_truth_column,
            system_prompt=script_args.system_prompt,
        )

    train = prepare(script_args.dataset_train_split)
    evaluate = None
    if training_args.eval_strategy != "no":
        if script_args.dataset_test_split not in dataset:
            raise ValueError(
                f"Evaluation is on but `dataset_test_split` {script_args.dataset_test_split!r} is not in "
                f"{script_args.dataset_name!r}; its splits are {list(dataset)}."
            )
        evaluate = prepare(script_args.dataset_test_split)
    return train, evaluate


def build_trainer(
    script_args, training_args, model_args, train_dataset, eval_dataset=None, *, model=None, processing_class=None
):
    """The GEARTrainer a recipe describes. `model`: an already loaded model (e.g. a trained LoRA adapter) used
    instead of `model_args.model_name_or_path` and `use_peft`."""
    from .rewards import get_reward_funcs
    from .trainer import GEARTrainer

    reward_funcs = get_reward_funcs(script_args.reward_funcs, training_args.ground_truth_column)
    if model is None:
        model_init_kwargs = dict(training_args.model_init_kwargs or {})
        model_init_kwargs.setdefault("revision", model_args.model_revision)
        if model_args.dtype is not None:
            model_init_kwargs.setdefault("dtype", model_args.dtype)
        if model_args.attn_implementation is not None:
            model_init_kwargs.setdefault("attn_implementation", model_args.attn_implementation)
        training_args.model_init_kwargs = model_init_kwargs
        model, peft_config = model_args.model_name_or_path, get_peft_config(model_args)
    else:
        training_args.model_init_kwargs, peft_config = None, None

    environment_factory = None
    if script_args.environment:
        from .envs import get_environment_factory

        environment_factory = get_environment_factory(script_args.environment)

    return GEARTrainer(
        model=model,
        reward_funcs=reward_funcs,
        args=training_args,
        train_dataset=train_dataset,
        eval_dataset=eval_dataset,
        peft_config=peft_config,
        environment_factory=environment_factory,
        processing_class=processing_class,
    )


def main(script_args: GEARScriptArguments, training_args: GEARConfig, model_args: ModelConfig):
    train_dataset, eval_dataset = load_splits(script_args, training_args)
    trainer = build_trainer(script_args, training_args, model_args, train_dataset, eval_dataset)

    checkpoint = training_args.resume_from_checkpoint
    if checkpoint is None and os.path.isdir(training_args.output_dir):
        checkpoint = get_last_checkpoint(training_args.output_dir)
    if checkpoint is not None:
        trainer.accelerator.print(f"Resuming from {checkpoint}")
    trainer.train(resume_from_checkpoint=checkpoint)

    trainer.save_model(training_args.output_dir)
    if trainer.accelerator.is_main_process:
        trainer.create_model_card(dataset_name=script_args.dataset_name, tags=["gear_trl"])
    card = os.path.join(training_args.output_dir, "README.md")
    trainer.accelerator.print(f"Model saved to {training_args.output_dir}\nModel card: {card}")

    if training_args.push_to_hub:
        trainer.push_to_hub(dataset_name=script_args.dataset_name)
        trainer.accelerator.print(f"Pushed to https://huggingface.co/{trainer.hub_model_id}")
    trainer.accelerator.wait_for_everyone()
    # Tear the process group down before the interpreter exits. Left to static destruction, gloo's worker threads
    # can abort a rank after training has finished and saved ("terminate called without an active exception",
    # SIGABRT), and the launcher then reports the run as failed.
    trainer.accelerator.end_training()
    return trainer


def cli(argv: list[str] | None = None) -> None:
    main(*parse_args(argv))


if __name__ == "__main__":
    cli(sys.argv[1:])
