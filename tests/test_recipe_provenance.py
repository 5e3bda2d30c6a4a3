"""Honest recipes (issue 32): each Qwen3 recipe says which values follow the paper (only GEAR's structure and its 0.1
onset threshold are public) and gives every other choice as ours with a reason; one learning rate for 4B and 8B;
the baselines carry no GEAR-only field; the `vllm` extra is the range TRL 1.16 supports."""

from __future__ import annotations

import configparser
import dataclasses
import re
from importlib.metadata import requires
from pathlib import Path

import pytest
import yaml
from packaging.requirements import Requirement
from trl import GRPOConfig

from gear_trl import GEARConfig

REPO = Path(__file__).resolve().parents[1]
RECIPES = sorted(REPO.glob("recipes/Qwen3-*/*/config_*.yaml"))
PAPER_KEYS = {"credit", "onset_threshold"}
"""What the paper publishes: GEAR's structure (`credit: gear`) and its onset threshold."""
CHOICES = {
    "use_peft", "lora_r", "lora_alpha", "lora_dropout", "lora_target_modules", "entropy_threshold", "teacher",
    "max_teacher_prompt_length", "num_generations", "per_device_train_batch_size", "gradient_accumulation_steps",
    "temperature", "learning_rate", "lr_scheduler_type", "warmup_steps", "beta", "loss_type", "max_completion_length",
    "num_train_epochs", "max_steps", "vllm_mode", "vllm_gpu_memory_utilization", "vllm_max_model_length",
    "gigpo_gamma", "gigpo_omega", "gigpo_mode", "weight_alpha", "weight_eps", "weight_lambda", "teacher_template",
}  # fmt: skip
"""Values that shape the result: each carries a comment saying whose it is and why."""
GRPO_FIELDS = {field.name for field in dataclasses.fields(GRPOConfig)}
GEAR_FIELDS = {field.name for field in dataclasses.fields(GEARConfig)} - GRPO_FIELDS
GIGPO_FIELDS = {name for name in GEAR_FIELDS if name.startswith("gigpo_")}
SHARED_FIELDS = {"credit", "ground_truth_column", "credit_report_steps", "credit_report_rollouts"}
"""GEARConfig fields that are not GEAR's alone: the mode itself and what every mode reads."""


def key_lines(path: Path) -> dict[str, str]:
    """Top-level key -> its line, comment included."""
    return {m.group(1): m.group(0) for m in re.finditer(r"^(\w+):.*$", path.read_text(), re.MULTILINE)}


@pytest.mark.parametrize("path", RECIPES, ids=lambda p: str(p.relative_to(REPO / "recipes")))
def test_each_value_says_whose_it_is(path):
    text = path.read_text()
    assert "training hyperparameters are not public" in text and "[paper]" in text
    lines = key_lines(path)
    tagged = {key for key, line in lines.items() if "[paper]" in line}
    method = path.parts[-2]
    assert tagged == (PAPER_KEYS if method == "gear" else set()), tagged
    for key in CHOICES & set(lines):
        line = lines[key]
        assert "# ours" in line or "# [paper]" in line, f"{path.name}: `{key}` does not say whose value it is"
        if key not in PAPER_KEYS:
            assert "[paper]" not in line


def test_one_learning_rate_for_both_sizes():
    by_run = {}
    for path in RECIPES:
        recipe = yaml.safe_load(path.read_text())
        by_run.setdefault((path.parts[-2], path.name), set()).add(recipe["learning_rate"])
        assert recipe["use_peft"] is True  # full fine-tuning would need its own rate (preflight warns)
    assert all(len(rates) == 1 for rates in by_run.values()), by_run
    assert len({rate for rates in by_run.values() for rate in rates}) == 1


@pytest.mark.parametrize("path", [p for p in RECIPES if p.parts[-2] != "gear"], ids=str)
def test_baselines_carry_no_gear_only_field(path):
    recipe = yaml.safe_load(path.read_text())
    allowed = SHARED_FIELDS | (GIGPO_FIELDS if recipe["credit"] == "gigpo" else set())
    assert not (set(recipe) & GEAR_FIELDS) - allowed, sorted((set(recipe) & GEAR_FIELDS) - allowed)


@pytest.mark.parametrize("path", [p for p in RECIPES if p.parts[-2] == "gear"], ids=str)
def test_gear_recipes_carry_no_gigpo_field(path):
    assert not set(yaml.safe_load(path.read_text())) & GIGPO_FIELDS


def test_the_vllm_extra_is_trls_supported_range():
    parser = configparser.ConfigParser()
    parser.read(REPO / "setup.cfg")
    (ours,) = [Requirement(line) for line in parser["options.extras_require"]["vllm"].split("\n") if line.strip()]
    trls = [Requirement(r) for r in requires("trl") if r.startswith("vllm") and 'extra == "vllm"' in r]
    assert len(trls) == 1 and ours.name == "vllm"
    assert ours.specifier == trls[0].specifier, (str(ours.specifier), str(trls[0].specifier))


def test_the_reproducing_page_runs_the_whole_table():
    page = (REPO / "docs/reproducing.md").read_text()
    named = set(re.findall(r"recipes/Qwen3-\w+/\w+/config_\w+\.yaml", page))
    table = {str(p.relative_to(REPO)) for p in RECIPES if p.parts[-2] in ("gear", "grpo")}
    assert len(table) == 8 and table <= named
    assert all((REPO / path).is_file() for path in named)
    assert "training hyperparameters are not public" in page and "Estimates, not measurements" in page
    from gear_trl.benchmarks import PRESETS

    # Every preset is run, and every benchmark the loops name is a preset (`--benchmark` refuses any other name).
    looped = set(re.findall(r"for benchmark in ([\w ]+); do", page))
    looped = {name for names in looped for name in names.split()}
    assert looped == set(PRESETS), sorted(looped ^ set(PRESETS))
    for path in RECIPES:  # the step counts the page quotes are the recipes'
        recipe = yaml.safe_load(path.read_text())
        steps = recipe.get("max_steps") or 234  # one MATH epoch (tests/test_recipes.py computes it)
        assert f"{steps} (" in page or f"({steps} steps)" in page, (path, steps)
    assert "reproducing.md" in (REPO / "mkdocs.yml").read_text()
