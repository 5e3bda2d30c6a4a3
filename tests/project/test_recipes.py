"""Every shipped Qwen3 recipe is a meaningful run on the data it names: its schedule, computed from the dataset's size
and the batch settings as TRL's sampler and the Trainer compute it, has hundreds of optimizer steps, a short warmup
and several checkpoints; vLLM's context fits the recipe's prompts and completions."""

import json
import math
import re
from pathlib import Path

import pytest
import yaml
from datasets import load_dataset
from transformers import AutoTokenizer

from tests.utils import TINY, make_trainer, math_rows, tiny_args

REPO = Path(__file__).resolve().parents[2]
RECIPES = sorted(REPO.glob("recipes/Qwen3-*/*/config_*.yaml"))

# Training rows of the Hub datasets the recipes name (not downloadable here): MATH-lighteval's `train` split and
# xLAM's one split, as their dataset cards give them.
HUB_TRAIN_ROWS = {
    ("DigitalLearningGmbH/MATH-lighteval", "default", "train"): 7500,
    ("Salesforce/xlam-function-calling-60k", None, "train"): 60000,
}
# The longest prompt assumed for each Hub dataset (not measurable here): the GEAR recipes cap their teacher prompts,
# which are longer than the student's, at this length.
HUB_PROMPT_TOKENS = {"DigitalLearningGmbH/MATH-lighteval": 2048, "Salesforce/xlam-function-calling-60k": 4096}


def read(path: Path) -> tuple[dict, int]:
    """The recipe's fields and the process count of the launch command in its header."""
    text = path.read_text()
    launch = re.search(r"--num_processes (\d+)", text)
    assert launch, f"{path}: the header names no `--num_processes`"
    return yaml.safe_load(text), int(launch.group(1))


def train_rows(recipe: dict) -> int:
    key = (recipe["dataset_name"], recipe.get("dataset_config"), recipe.get("dataset_train_split", "train"))
    if key in HUB_TRAIN_ROWS:
        return HUB_TRAIN_ROWS[key]
    return len(load_dataset(str(REPO / key[0]), key[1], split=key[2]))


def schedule(recipe: dict, rows: int, processes: int) -> dict:
    """Optimizer steps as TRL 1.16 and transformers 5 compute them.

    One generation batch is `per_device_train_batch_size * processes * steps_per_generation` rollouts of
    `num_generations` each; TRL's RepeatSampler drops the incomplete last group of prompts of an epoch and repeats each
    generation batch `steps_per_generation * num_iterations` times, so every process sees `steps_per_generation *
    num_iterations` batches per generation batch; the Trainer makes an optimizer step every
    `gradient_accumulation_steps` of them (rounding an epoch up) for `num_train_epochs` epochs.
    """
    per_device = recipe["per_device_train_batch_size"]
    accumulation = recipe.get("gradient_accumulation_steps", 1)
    steps_per_generation = recipe.get("steps_per_generation") or accumulation
    iterations = recipe.get("num_iterations", 1)
    prompts_per_generation = per_device * processes * steps_per_generation // recipe["num_generations"]
    batches = (rows // prompts_per_generation) * steps_per_generation * iterations
    steps_per_epoch = max(math.ceil(batches / accumulation), 1)
    max_steps = recipe.get("max_steps", -1)
    if max_steps is None or max_steps <= 0:
        max_steps = math.ceil(recipe.get("num_train_epochs", 3) * steps_per_epoch)
    return {
        "prompts_per_step": prompts_per_generation * accumulation // steps_per_generation,
        "steps_per_epoch": steps_per_epoch,
        "max_steps": max_steps,
    }


@pytest.mark.parametrize(
    ("rows", "overrides"),
    [
        (40, {"per_device_train_batch_size": 4, "num_generations": 4, "gradient_accumulation_steps": 2}),
        (37, {"per_device_train_batch_size": 4, "num_generations": 2, "gradient_accumulation_steps": 3}),
        (30, {"per_device_train_batch_size": 4, "num_generations": 4, "steps_per_generation": 2, "num_iterations": 2}),
    ],
)
def test_schedule_matches_the_trainer(tmp_path, rows, overrides):
    """The formula against the Trainer's own count on a real GRPO dataloader (one process)."""
    settings = {"max_steps": -1, "num_train_epochs": 3, **overrides}
    trainer = make_trainer(tmp_path, args=tiny_args(tmp_path, **settings), dataset=math_rows(rows))
    values = trainer.set_initial_training_values(trainer.args, trainer.get_train_dataloader())
    expected = schedule(settings, rows, processes=1)
    assert values[-1] == expected["max_steps"]
    assert values[1] == expected["steps_per_epoch"]


def test_bfcl_schedule_by_hand():
    # 159 multi-turn prompts; 4 per device x 8 processes x 2 accumulation / 8 generations = 8 prompts a step
    recipe = {"per_device_train_batch_size": 4, "gradient_accumulation_steps": 2, "num_generations": 8}
    assert schedule({**recipe, "num_train_epochs": 16}, 159, 8) == {
        "prompts_per_step": 8,
        "steps_per_epoch": 19,
        "max_steps": 304,
    }
    # what the recipes shipped before: 32 prompts a step, 4 steps an epoch, 12 steps over 3 epochs
    old = {"per_device_train_batch_size": 4, "gradient_accumulation_steps": 8, "num_generations": 8}
    assert schedule({**old, "num_train_epochs": 3}, 159, 8)["max_steps"] == 12


@pytest.mark.parametrize("path", RECIPES, ids=lambda p: str(p.relative_to(REPO / "recipes")))
def test_recipe_is_a_meaningful_run(path):
    recipe, processes = read(path)
    plan = schedule(recipe, train_rows(recipe), processes)
    assert plan["max_steps"] >= 200, plan
    warmup = recipe.get("warmup_steps", 0)
    assert 1 <= warmup <= 0.05 * plan["max_steps"], (warmup, plan)
    assert recipe["save_strategy"] == "steps"
    assert plan["max_steps"] // recipe["save_steps"] >= 3, (recipe["save_steps"], plan)


def test_recipes_of_one_task_share_their_schedule():
    """GEAR and its baselines are compared at the same budget."""
    plans = {}
    for path in RECIPES:
        recipe, processes = read(path)
        task = (path.parts[-3], path.name)
        plan = schedule(recipe, train_rows(recipe), processes)
        plans.setdefault(task, []).append((plan, recipe["warmup_steps"], recipe["save_steps"]))
    assert len(plans) == 4
    for task, seen in plans.items():
        assert all(entry == seen[0] for entry in seen), task


def test_vllm_context_fits_prompts_and_completions():
    """Unset, vLLM takes the model's 40,960-token context, whose KV cache starves at the recipes' memory share. The
    tool-use prompts are measured with the repository's tokenizer and TRL's Qwen3 template (its 2,264-token vocabulary
    splits text into more tokens than Qwen3's 151,936, so this overstates them)."""
    tokenizer = AutoTokenizer.from_pretrained(TINY)
    longest = {}
    for path in RECIPES:
        recipe, _ = read(path)
        assert recipe.get("vllm_max_model_length"), f"{path}: no vllm_max_model_length"
        completion = recipe["max_completion_length"]
        if recipe["dataset_name"].startswith("data/"):
            key = (recipe["dataset_name"], recipe["dataset_config"])
            if key not in longest:
                rows = load_dataset(str(REPO / key[0]), key[1], split=recipe["dataset_train_split"])
                longest[key] = max(
                    len(
                        tokenizer.apply_chat_template(
                            row["prompt"], tools=json.loads(row["tools"]), add_generation_prompt=True, tokenize=True
                        )["input_ids"]
                    )
                    for row in rows
                )
            prompt = longest[key]
        else:
            prompt = HUB_PROMPT_TOKENS[recipe["dataset_name"]]
            assert recipe.get("max_teacher_prompt_length", prompt) == prompt, path
        assert prompt + completion <= recipe["vllm_max_model_length"] < 40960, (path, prompt, completion)


# ---------------------------------------------------------------------------------------------------------------------
# Held-out lists (issue 52): every benchmark a recipe's task is scored on is named where the overlap check reads it
# ---------------------------------------------------------------------------------------------------------------------

MATH_FORMATS = {"math", "aime", "gsm8k"}
"""Preset adapters of the math benchmarks; every other preset scores tool use."""


def scored_presets() -> dict[str, set[str]]:
    """{task: presets docs/reproducing.md's evaluation loops run}, the task (`math`, `tool_use`) by the preset's
    adapter."""
    from gear_trl.evaluation.benchmarks import PRESETS

    page = (REPO / "docs/reproducing.md").read_text()
    looped = {name for names in re.findall(r"for benchmark in ([\w ]+); do", page) for name in names.split()}
    tasks: dict[str, set[str]] = {"math": set(), "tool_use": set()}
    for name in looped:
        tasks["math" if PRESETS[name].dataset_format in MATH_FORMATS else "tool_use"].add(name)
    return tasks


def held_out_covers(recipe: dict, preset) -> bool:
    """The recipe's overlap check reads the preset's rows: as `benchmark:NAME`, as the dataset (and configuration)
    the preset reads, or as the training set's own `dataset_test_split`."""
    held = set(recipe.get("held_out_datasets", []))
    dataset = preset.dataset + (f":{preset.dataset_config}" if preset.dataset_config else "")
    own_test = (preset.dataset, preset.split) == (recipe["dataset_name"], recipe.get("dataset_test_split"))
    return f"benchmark:{preset.name}" in held or dataset in held or own_test


@pytest.mark.parametrize("path", RECIPES, ids=lambda p: str(p.relative_to(REPO / "recipes")))
def test_held_out_lists_name_every_benchmark_the_docs_score(path):
    from gear_trl.evaluation.benchmarks import PRESETS

    recipe = yaml.safe_load(path.read_text())
    task = path.stem.removeprefix("config_")
    scored = scored_presets()[task]
    assert scored, f"docs/reproducing.md runs no {task} benchmark"
    missing = sorted(name for name in scored if not held_out_covers(recipe, PRESETS[name]))
    assert not missing, f"{path}: scored on {missing} but they are not in held_out_datasets"
    for spec in recipe["held_out_datasets"]:  # each entry is one the overlap check can read
        if spec.startswith("benchmark:"):
            assert spec.removeprefix("benchmark:") in PRESETS, spec
        elif spec.startswith("data/"):
            assert (REPO / spec.partition(":")[0]).is_dir(), spec
        else:
            assert re.fullmatch(r"[\w.-]+/[\w.-]+(:\w+)?", spec), spec


@pytest.mark.parametrize("path", RECIPES, ids=lambda p: str(p.relative_to(REPO / "recipes")))
def test_recipe_comments_name_only_presets_that_exist(path):
    """`--benchmark bfcl|acebench` and `--benchmark NAME` named no preset; `--benchmark` refuses any name not in
    `PRESETS`. Each Qwen3 recipe's comments show a command its reader can run."""
    from gear_trl.evaluation.benchmarks import PRESETS

    named = re.findall(r"--benchmark\s+`?([\w|]+)", path.read_text())
    names = {name for group in named for name in group.split("|")}
    assert names, f"{path}: the comments show no `--benchmark` command"
    assert names <= set(PRESETS), sorted(names - set(PRESETS))


def test_the_overlap_check_reads_benchmark_presets(monkeypatch):
    """`benchmark:NAME` entries load the rows evaluation scores (bfcl-eval's categories, ACEBench's), and a training
    set sharing a request with one of them is warned about."""
    from gear_trl.data import acebench
    from gear_trl.data.overlap import request_texts
    from gear_trl.evaluation.held_out import benchmark_splits
    from gear_trl.inputs.errors import UserInputError
    from gear_trl.train import GEARScriptArguments, overlap_warnings

    # ACEBench's presets download from GitHub; its committed sample of converted rows stands in
    real = acebench.load_acebench
    monkeypatch.setattr(
        acebench,
        "load_acebench",
        lambda source, category, limit=None: real(str(REPO / "data/acebench"), category, limit),
    )
    ((label, ace),) = benchmark_splits("acebench_parallel")
    assert label == "benchmark 'acebench_parallel'" and len(request_texts(ace)) == 3
    ((_, live),) = benchmark_splits("bfcl_live")
    ((_, multi),) = benchmark_splits("bfcl_multi_turn")
    assert len(live) == 258 + 1053 + 16 + 24 and len(multi) == 800 and request_texts(multi)
    with pytest.raises(UserInputError, match="`held_out_datasets` entry benchmark:bfcl: Unknown --benchmark 'bfcl'"):
        benchmark_splits("bfcl")
    args = GEARScriptArguments(
        dataset_name="data/bfcl",
        dataset_config="single_turn",
        dataset_train_split="simple",
        dataset_test_split="simple",
        held_out_datasets=["benchmark:bfcl_simple", "benchmark:bfcl_java"],
    )
    (message,) = overlap_warnings(args)
    assert "shares 400 prompt(s) with benchmark 'bfcl_simple' of 'benchmark:bfcl_simple'" in message
