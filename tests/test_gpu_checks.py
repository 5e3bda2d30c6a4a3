"""bench/gpu_checks.sh's recipe-shape step (issue 52, item 7), driven on CPU at a tiny geometry so that it cannot
rot: the Qwen3-4B math and tool-use recipes as shipped, 2 steps each under GRPO and GEAR through gear_trl.train, and
the one summary table the script ends with."""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "bench/gpu_checks.sh"


@pytest.fixture(scope="module")
def shape():
    return importlib.import_module("bench.recipe_shape")


@pytest.fixture(scope="module")
def cpu_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("gpu_checks")
    env = {**os.environ, "PYTHON": sys.executable, "PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1"}
    done = subprocess.run(
        ["bash", str(SCRIPT), str(out), "--device", "cpu"],
        check=False,
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    return out, done


def test_the_script_runs_the_recipe_shape_on_cpu_and_ends_with_one_summary_table(cpu_run):
    out, done = cpu_run
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    log = (out / "gpu_checks.log").read_text()
    assert "steps 1-5 need CUDA: skipped (--device cpu)" in log
    summary = log[log.rindex("== summary") :]
    lines = summary.splitlines()
    assert lines[1].split() == ["check", "status", "seconds", "figures"]
    assert lines[2].startswith("6. recipe shape") and " ok " in lines[2]
    runs = [line for line in lines if line.startswith("  ")]
    assert [line.split()[:2] for line in runs] == [
        ["math", "grpo"], ["math", "gear"], ["tool_use", "grpo"], ["tool_use", "gear"]
    ]  # fmt: skip
    for line in runs:
        assert " ok " in line and "step " in line and " GB" in line
        assert ("teacher " in line) == (" gear " in line)  # the teacher pass's share: GEAR's runs only


def test_each_run_is_the_shipped_recipe(cpu_run):
    out, _ = cpu_run
    rows = json.loads((out / "recipe_shape/recipe_shape.json").read_text())
    assert len(rows) == 4
    for row in rows:
        assert row["status"] == "ok" and len(row["step_seconds"]) == 2
        assert row["lora_r"] == 64 and row["gradient_checkpointing"] is True
        assert row["teacher"] == ("live" if row["method"] == "gear" else None)
        shares = [s for s in row["teacher_time_frac"] if s is not None]
        assert (len(shares) == 2 and all(0 < s < 1 for s in shares)) if row["method"] == "gear" else not shares
        # the recipe's accumulation as shipped: 4 micro-batches a step for math, 2 for tool use (2 rollouts each here)
        assert row["completions_per_step"] == {"math": 8, "tool_use": 4}[row["task"]]


def test_the_gpu_overrides_keep_the_recipes_choices(shape, tmp_path):
    """On the GPU only the model, local data, completion length, vLLM switch, steps and bookkeeping change: LoRA,
    bf16, gradient checkpointing, the teacher and the batch geometry are the recipe's."""
    kept = {"lora_r", "lora_alpha", "bf16", "dtype", "gradient_checkpointing", "teacher", "credit", "onset_threshold",
            "per_device_train_batch_size", "gradient_accumulation_steps", "num_generations", "divergence_chunk_size"}  # fmt: skip
    for task, method in shape.RUNS:
        argv = shape.run_argv(task, method, tmp_path / "model", tmp_path / "run", "cuda", 256, False)
        assert argv[:2] == ["--config", str(REPO / f"recipes/Qwen3-4B/{method}/config_{task}.yaml")]
        overridden = {arg[2:] for arg in argv if arg.startswith("--")}
        assert not overridden & kept, overridden & kept
        assert argv[argv.index("--max_completion_length") + 1] == "256"


def test_vllm_runs_colocated_when_it_imports_and_says_so_when_not(shape):
    plan, note = shape.plan_runs("cuda", "auto", has_vllm=False)
    assert len(plan) == 4 and note == shape.VLLM_SKIPPED and "skipped" in note
    plan, note = shape.plan_runs("cuda", "auto", has_vllm=True)
    assert plan[-1] == ("math", "gear", "vllm-colocate", True) and note is None
    assert shape.plan_runs("cpu", "auto", has_vllm=True) == (plan[:4], None)


def test_the_script_keeps_within_eight_minutes():
    """Steps 1-5 have their own limits; step 6 gets what is left of 470 s and starts no run it cannot finish."""
    text = SCRIPT.read_text()
    assert "budget=$((470 - SECONDS))" in text and '--budget-s "$budget"' in text
    assert "timeout $((budget + 30))" in text
