"""Seeing the credit: a few rollouts, every token coloured by GEAR's reverse KL, entropy and final weight.

    python -m gear_trl.inspect_credit --config recipes/tiny/config_math.yaml --num_rollouts 4 --out outputs/inspect
    python -m gear_trl.inspect_credit --config RECIPE.yaml --model outputs/run --split test --max_completion_length 512

The trainer is built from the recipe exactly as `gear_trl.train` builds it (any recipe field can be overridden on the
command line), rollouts are sampled on `--split` with the policy in train mode, and `GEARTrainer.compute_credit`
gives each token's KL, entropy, segment and weight. Written to `--out`: `credit_<split>.html` (self-contained; hover
a token for its exact values; switch the colouring between weight, KL and entropy) and `credit_<split>.png`.

This module is the command line only; the rendering is `gear_trl.reporting`, which the training callback uses too.
"""

from __future__ import annotations

import math
import os
import sys
from dataclasses import replace

from .evaluation.generation import is_adapter_dir, load_model
from .inputs.errors import UserInputError
from .inputs.flags import FlagParser
from .reporting import (
    choose_rollouts,
    decode_tokens,
    prompt_text,
    trace_rows,
    trainer_tokenizer,
    write_report,
)
from .train import build_trainer, load_splits, parse_args

MIXED_SEARCH = 4
"""`choice="mixed"` samples up to this many prompts for each passed/failed pair it wants, a generation batch at a
time, stopping as soon as enough prompts mix outcomes: a few more rollouts than the first-N choice needs, so that a
policy that fails most prompts still shows a pair."""


def _mixed_groups(rows: list[dict], prompt_of: list[int]) -> int:
    signs: dict[int, set] = {}
    for row, prompt in zip(rows, prompt_of, strict=True):
        advantage = row.get("advantage") or 0.0
        signs.setdefault(prompt, set()).add((advantage > 0) - (advantage < 0))
    return sum({1, -1} <= found for found in signs.values())


def sample_credit(trainer, dataset, num_rollouts: int, choice: str = "first") -> list[tuple[list[str], dict]]:
    """Sample rollouts for the first prompts of `dataset` (each `num_generations` times, as in training, so the
    advantages are GRPO's), compute their credit, and return `num_rollouts` of them as `(tokens, trace_row)`.

    choice: `first`, the first `num_rollouts` (every rollout of the first prompts, in order); `mixed`, a passed and
    a failed rollout of the same prompt side by side, sampling prompts a generation batch at a time until
    `ceil(num_rollouts / 2)` of them mix outcomes or `MIXED_SEARCH` times that many were tried. Either way each row is labelled with its group (`group`, saying whether its prompt's
    rollouts mix outcomes; `gear_trl.reporting.choose_rollouts`)."""
    import torch

    if not trainer.args.uses_teacher:
        raise UserInputError(
            f"`credit: {trainer.args.credit}` runs no teacher, so there is no per-token credit to show; inspect a "
            "GEAR mode (e.g. --credit gear)."
        )
    if len(dataset) == 0:
        raise UserInputError("The split is empty: choose another with --split.")
    generations = trainer.num_generations
    pairs = math.ceil(num_rollouts / 2)
    # mixed: up to MIXED_SEARCH prompts per pair wanted, sampled a generation batch at a time until enough mix
    wanted = pairs * MIXED_SEARCH if choice == "mixed" else math.ceil(num_rollouts / generations)
    num_prompts = min(wanted, len(dataset))
    per_call = max(1, trainer.args.generation_batch_size // generations)
    # compute_credit needs the teacher states in the batch; GRPO's own no-grad student pass (num_iterations > 1,
    # vLLM importance sampling) would consume them during generation, so inspection always defers to compute_credit.
    trainer._grpo_runs_student_pass = lambda: False
    tokenizer = trainer_tokenizer(trainer)
    column = trainer.args.ground_truth_column
    trainer.model.train()  # sample as training does
    rendered, prompt_of = [], []  # prompt_of: each rollout's prompt, its group
    for start in range(0, num_prompts, per_call):
        rows = [dict(dataset[j]) for j in range(start, min(start + per_call, num_prompts)) for _ in range(generations)]
        batch = trainer._generate_and_score_completions(rows)
        trace = trainer.compute_credit(batch).to("cpu")
        record = trainer._rollout
        first = trainer.accelerator.process_index * len(rows)  # the record holds every rank's rewards
        rewards_per_func = record.rewards_per_func[first : first + len(rows)].cpu()
        weights = trainer.reward_weights.cpu()
        rewards = torch.nan_to_num((rewards_per_func * weights[None]).nansum(dim=1), nan=0.0)
        names = list(trainer.reward_func_names)
        details = [
            {name: (None if math.isnan(v) else v) for name, v in zip(names, r, strict=True)}
            for r in rewards_per_func.tolist()
        ]
        rows_out = trace_rows(
            trace,
            completion_mask=batch["completion_mask"].cpu(),
            rewards=rewards,
            reward_details=details,
            base_advantages=batch["gear_base_advantages"].cpu(),
            prompts=[prompt_text(p) for p in record.prompts],
            ground_truths=[row.get(column) for row in rows],
            teacher_references=getattr(trainer, "last_teacher_references", None),
        )
        for index, row in enumerate(rows_out):
            rendered.append((decode_tokens(tokenizer, row["completion_ids"]), row))
            prompt_of.append(start + index // generations)
        if choice == "mixed" and _mixed_groups([row for _, row in rendered], prompt_of) >= pairs:
            break
    for position, (_, row) in enumerate(rendered):
        row["position"] = position
    chosen = choose_rollouts([row for _, row in rendered], num_rollouts, prompt_of, choice)
    return [(rendered[row.pop("position")][0], row) for row in chosen]


def parse_cli(argv: list[str] | None = None):
    """(inspection options, (script_args, training_args, model_args)) from the command line."""
    parser = FlagParser(
        prog="python -m gear_trl.inspect_credit",
        description="Render a few rollouts with every token coloured by GEAR's reverse KL, entropy and weight.",
        epilog="Every other option is a recipe field, as for gear_trl.train (--config RECIPE.yaml "
        "--max_completion_length 256 ...).",
        allow_abbrev=False,
    )
    parser.add_argument(
        "--model",
        default=None,
        help="A model directory or a LoRA adapter directory to inspect "
        "instead of the recipe's model (e.g. a training run's output_dir).",
    )
    parser.add_argument(
        "--split",
        default=None,
        help="Dataset split to draw prompts from (default: the recipe's dataset_test_split where the dataset has it, "
        "else its dataset_train_split: a single .jsonl file has only `train`).",
    )
    parser.add_argument("--num_rollouts", type=int, default=4, help="Rollouts to render.")
    parser.add_argument(
        "--first_n",
        action="store_true",
        help="Render the first N rollouts in order, rather than (the default) a passed and a failed rollout of the "
        "same prompt side by side, from prompts whose rollouts mix outcomes.",
    )
    parser.add_argument("--out", default=os.path.join("outputs", "inspect"), help="Output folder.")
    options, rest = parser.parse_known_args(argv)
    if options.num_rollouts < 1:
        parser.error("--num_rollouts must be at least 1")
    # Inspection trains nothing, reports nothing and pushes nothing; whatever the Trainer writes goes to --out.
    recipe = parse_args([*rest, "--report_to", "none", "--push_to_hub", "false", "--output_dir", options.out])
    return options, recipe


def default_split(script_args) -> str:
    """The split to inspect when `--split` is not given: the recipe's `dataset_test_split` if the dataset has it, else
    its `dataset_train_split` (said on stdout either way)."""
    from .inputs.preflight import load_dataset_named

    splits = load_dataset_named(
        script_args.dataset_name, script_args.dataset_config, revision=getattr(script_args, "dataset_revision", None)
    )
    test, train = script_args.dataset_test_split, script_args.dataset_train_split
    split = test if test in splits else train
    print(
        f"Inspecting split {split!r} of {script_args.dataset_name!r} (its splits: {list(splits)}; --split to choose)."
    )
    return split


def main(argv: list[str] | None = None) -> tuple[str, str]:
    options, (script_args, training_args, model_args) = parse_cli(argv)
    if options.split is None:
        options.split = default_split(script_args)
    # load_splits prepares its train split: point it at the split to inspect.
    split_args = replace(script_args, dataset_train_split=options.split, max_train_samples=None)
    dataset, eval_dataset = load_splits(split_args, training_args, split_option="--split")

    model, tokenizer = None, None
    if options.model is not None:
        if is_adapter_dir(options.model):
            model, tokenizer = load_model(
                options.model, dtype=model_args.dtype or "auto", merge=False, is_trainable=True
            )
        else:
            model_args.model_name_or_path = options.model
    trainer = build_trainer(
        script_args, training_args, model_args, dataset, eval_dataset, model=model, processing_class=tokenizer
    )
    rollouts = sample_credit(trainer, dataset, options.num_rollouts, "first" if options.first_n else "mixed")
    if not options.first_n and not any(
        "above the group's mean" in row.get("group", "") and "no mix" not in row["group"] for _, row in rollouts
    ):
        print("No prompt sampled has rollouts with mixed outcomes: showing the first ones, each said to have no mix.")
    name = options.model or model_args.model_name_or_path
    title = f"GEAR credit: {name} on {script_args.dataset_name} [{options.split}], credit={training_args.credit}"
    html_path, png_path = write_report(rollouts, options.out, f"credit_{options.split}", title)
    print(f"Wrote {len(rollouts)} rollouts to {html_path}" + (f" and {png_path}" if png_path else ""))
    return html_path, png_path


def cli(argv: list[str] | None = None) -> None:
    """Console-script entry point."""
    from .inputs.errors import exit_on_user_error

    exit_on_user_error(main, argv)


if __name__ == "__main__":
    cli(sys.argv[1:])
