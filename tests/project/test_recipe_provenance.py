"""Honest recipes (issues 32 and 52): each Qwen3 recipe says which values follow the paper (only GEAR's structure and
its 0.1 onset threshold are public) and gives every other setting that shapes the result, TRL defaults included, as
ours with a reason; the GEAR recipes state every GEAR field their runs read; model and dataset revisions are pinned
fields; one learning rate for 4B and 8B; the baselines carry no GEAR-only field; the `vllm` extra is the range TRL
1.16 supports."""

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

REPO = Path(__file__).resolve().parents[2]
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
BOOKKEEPING = {
    "model_name_or_path", "model_revision", "dataset_name", "dataset_revision", "dataset_config", "dataset_format",
    "dataset_train_split", "dataset_test_split", "held_out_datasets", "reward_funcs", "chat_template_kwargs",
    "output_dir", "logging_steps", "save_strategy", "save_steps", "save_total_limit", "eval_strategy", "report_to",
    "log_completions", "push_to_hub", "hub_model_id", "hub_strategy",
}  # fmt: skip
"""Keys that name the run's inputs, or only log and save it: every other top-level key of a Qwen3 recipe is a
choice that carries `[paper]` or `# ours: <reason>` (the task and data are the table's cells, the revisions are pins,
and `chat_template_kwargs`'s own lines are tagged)."""
TRL_RESULT_FIELDS = {
    "epsilon", "epsilon_high", "scale_rewards", "mask_truncated_completions", "num_iterations",
    "importance_sampling_level", "top_p", "top_k", "beta", "loss_type", "temperature",
    "vllm_importance_sampling_correction", "vllm_importance_sampling_mode", "vllm_importance_sampling_clip_max",
}  # fmt: skip
"""TRL settings that change what is learned: every Qwen3 recipe states them, its defaults included."""
GEAR_RESULT_FIELDS = {
    "credit", "divergence", "normalize", "onset_threshold", "onset_min_kl", "entropy_threshold", "max_segment_len",
    "weight_alpha", "weight_eps", "weight_lambda", "weight_norm", "failed_prefix_weight", "distillation_weight",
    "teacher", "teacher_reference", "teacher_template", "max_teacher_prompt_length",
}  # fmt: skip
"""GEAR fields a `credit: gear` run reads: the GEAR recipes state each one."""
GEAR_FIELDS_NOT_READ = {
    "divergence_top_k": "read only with `divergence: topk`",
    "divergence_chunk_size": "how the divergence is chunked, not its value",
    "fixed_segment_len": "read only with `credit: fixed`",
    "distillation_signal": "read only with `distillation_weight > 0`; these recipes' is 0",
    "distillation_gate": "read only with `distillation_weight > 0`; these recipes' is 0",
    "distillation_bound": "read only with `distillation_weight > 0`; these recipes' is 0",
    "distillation_clip": "read only with `distillation_weight > 0`; these recipes' is 0",
    "distillation_backoff": "read only with `distillation_weight > 0`; these recipes' is 0",
    "distillation_backoff_floor": "read only with `distillation_weight > 0`; these recipes' is 0",
    "teacher_sync_steps": "read only with `teacher: periodic`",
    "teacher_ema_decay": "read only with `teacher: ema`",
    "teacher_sibling_fallback": "read only for rows without a ground truth; every training row has one",
    "teacher_sibling_min_reward": "read only with the sibling fallback",
    "teacher_environment_feedback": "read only in multi-turn rollouts; these recipes' rows are single-turn",
    "teacher_prefix_sharing": "how the teacher pass is batched, not its value",
    "teacher_prefix_sharing_max_ratio": "how the teacher pass is batched, not its value",
    "ground_truth_column": "where the reference is read from",
    "environment_preflight": "a check before training",
    "credit_report_steps": "reports only", "credit_report_rollouts": "reports only",
    "credit_report_choice": "reports only", "teacher_control_steps": "metrics only", "teacher_control_rows": "metrics only",
}  # fmt: skip
"""GEAR-only fields a `credit: gear` run of these recipes does not read (the `rlsd_` and `gigpo_` ones belong to other
modes), each with why."""
REASON = re.compile(r"#\s*ours: (\S+\s+){3,}\S+")
"""`# ours: ` and a reason of at least four words."""
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


@pytest.mark.parametrize("path", RECIPES, ids=lambda p: str(p.relative_to(REPO / "recipes")))
def test_each_choice_gives_its_reason(path):
    """Every key but the run's inputs and bookkeeping says `[paper]` or gives a reason after `# ours:`, and every TRL
    setting that changes the result is stated, its defaults included."""
    # a bare tag, or a parenthesis in place of the reason, is not a reason
    assert not REASON.search("warmup_steps: 10  # ours") and not REASON.search("weight_alpha: 1.0  # ours (default)")
    lines = key_lines(path)
    missing = sorted(TRL_RESULT_FIELDS - set(lines))
    assert not missing, f"{path}: TRL settings left to their defaults: {missing}"
    untagged = [
        key
        for key, line in lines.items()
        if key not in BOOKKEEPING
        and not (path.parts[-2] != "gear" and key == "credit")
        and "# [paper]" not in line
        and not REASON.search(line)
    ]
    assert not untagged, f"{path}: no `[paper]` tag and no reason after `# ours:`: {untagged}"
    nested = [line for line in path.read_text().splitlines() if line.startswith("  ") and ":" in line.split("#")[0]]
    assert all(REASON.search(line) for line in nested if not line.strip().startswith(("benchmark:", "-"))), nested


@pytest.mark.parametrize("path", [p for p in RECIPES if p.parts[-2] == "gear"], ids=str)
def test_gear_recipes_state_every_gear_field_they_read(path):
    recipe = yaml.safe_load(path.read_text())
    missing = sorted(GEAR_RESULT_FIELDS - set(recipe))
    assert not missing, f"{path}: GEAR fields left to their unlabelled defaults: {missing}"
    # a GEAR field added to GEARConfig is classified here: stated by the recipes, or not read by their runs
    own = {name for name in GEAR_FIELDS if not name.startswith(("rlsd_", "gigpo_"))}
    assert own == GEAR_RESULT_FIELDS | set(GEAR_FIELDS_NOT_READ), sorted(
        own ^ (GEAR_RESULT_FIELDS | set(GEAR_FIELDS_NOT_READ))
    )
    # the written-out values are the library's where the reason says so, so a changed default is noticed
    defaults = {field.name: field.default for field in dataclasses.fields(GEARConfig)}
    for key, line in key_lines(path).items():
        if "(library default" in line:
            assert recipe[key] == defaults[key], (key, recipe[key], defaults[key])


@pytest.mark.parametrize("path", RECIPES, ids=lambda p: str(p.relative_to(REPO / "recipes")))
def test_model_and_dataset_revisions_are_pinned_fields(path):
    """The Hub model and training set are read at a stated revision. No commit hash can be looked up here, so the
    recipes ship `main` with a comment telling the user to put the commit they ran; the fields are real (the parser
    takes them and loading passes them on)."""
    lines = key_lines(path)
    recipe = yaml.safe_load(path.read_text())
    for key, name in (("model_revision", "model_name_or_path"), ("dataset_revision", "dataset_name")):
        assert recipe.get(key), f"{path}: no `{key}`"
        assert "replace `main` with the commit hash" in lines[key] and recipe[name] in lines[key], lines[key]


def test_the_dataset_revision_reaches_the_loader(monkeypatch):
    import datasets

    from gear_trl.train import GEARScriptArguments, held_out_splits

    seen = []

    def load_dataset(path, name=None, **kwargs):
        seen.append((path, name, kwargs.get("revision")))
        return {"train": [], "test": []}

    monkeypatch.setattr(datasets, "load_dataset", load_dataset)
    args = GEARScriptArguments(dataset_name="owner/some-set", dataset_config="cfg", dataset_revision="0123abc")
    list(held_out_splits(args))
    assert seen == [("owner/some-set", "cfg", "0123abc")]


def test_one_learning_rate_for_both_sizes():
    by_run = {}
    for path in RECIPES:
        recipe = yaml.safe_load(path.read_text())
        by_run.setdefault((path.parts[-2], path.name), set()).add(recipe["learning_rate"])
        assert recipe["use_peft"] is True  # full fine-tuning would need its own rate (preflight warns)
    assert all(len(rates) == 1 for rates in by_run.values()), by_run
    assert len({rate for rates in by_run.values() for rate in rates}) == 1


@pytest.mark.parametrize("path", [p for p in RECIPES if p.parts[-2] not in ("gear", "grpo_distill")], ids=str)
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
    from gear_trl.evaluation.benchmarks import PRESETS

    # Every preset is run, and every benchmark the loops name is a preset (`--benchmark` refuses any other name).
    looped = set(re.findall(r"for benchmark in ([\w ]+); do", page))
    looped = {name for names in looped for name in names.split()}
    assert looped == set(PRESETS), sorted(looped ^ set(PRESETS))
    for path in RECIPES:  # the step counts the page quotes are the recipes'
        recipe = yaml.safe_load(path.read_text())
        steps = recipe.get("max_steps") or 234  # one MATH epoch (tests/project/test_recipes.py computes it)
        assert f"{steps} (" in page or f"({steps} steps)" in page, (path, steps)
    assert "reproducing.md" in (REPO / "mkdocs.yml").read_text()


def test_the_distillation_recipes_ship_only_as_the_study_decides():
    """Issue 51 item 8: GRPO + self-distillation recipes (`recipes/Qwen3-*/grpo_distill/`) ship when, and only when,
    the declared credit-methods study's outcome is 2, at the weight it recommends; while a cell runs, or on outcome
    3, there are none (docs/results/credit-methods.md's outcome table counts the same record)."""
    import json

    report = json.loads((REPO / "bench/results/credit_methods/credit_methods.json").read_text())
    shipped = sorted(REPO.glob("recipes/Qwen3-*/grpo_distill/config_*.yaml"))
    chosen = report.get("recommendation") if not report["cells_pending"] else None
    if not chosen or chosen["outcome"] != 2:
        assert not shipped, (chosen, shipped)
        return
    weight = float(chosen["arm"].rsplit("-", 1)[1])
    assert len(shipped) == 4
    assert {yaml.safe_load(p.read_text())["distillation_weight"] for p in shipped} == {weight}
