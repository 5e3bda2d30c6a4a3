"""bench/gpu_checks.sh's recipe-shape step (issue 52, item 7), driven on CPU at a tiny geometry so that it cannot
rot: the Qwen3-4B math and tool-use recipes as shipped, 2 steps each under GRPO and GEAR through gear_trl.train, and
the one summary table the script ends with; since issue 75 the runs go in GRPO/GEAR pairs that a budget cut drops
whole, the summary is also gpu_checks.json, and no weights are kept."""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
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


def test_the_script_gives_step_six_its_measured_share_and_keeps_logs_not_weights():
    """Step 6 gets what is left of TOTAL_S, and at least STEP6_S (its model build and four runs as measured on the
    H200); its runs start no pair it cannot finish; the trained models and the random 4B model are deleted."""
    text = SCRIPT.read_text()
    assert "TOTAL_S=${GPU_CHECKS_TOTAL_S:-540}" in text and "STEP6_S=${GPU_CHECKS_STEP6_S:-350}" in text
    assert "budget=$((TOTAL_S - SECONDS))" in text and '[ "$budget" -lt "$STEP6_S" ] && budget=$STEP6_S' in text
    assert '--budget-s "$budget"' in text and "timeout $((budget + 30))" in text
    assert 'drop_weights "$out/train"' in text and 'drop_weights "$out/recipe_shape"' in text


def test_the_cpu_run_keeps_no_weights_and_writes_a_json_summary_beside_the_log(cpu_run):
    out, done = cpu_run
    assert done.returncode == 0
    weights = [p for p in out.rglob("*") if p.suffix in (".safetensors", ".bin", ".pt", ".pth")]
    assert not weights, weights
    assert not list((out / "recipe_shape").glob("model-*"))
    summary = json.loads((out / "gpu_checks.json").read_text())
    assert (out / "gpu_checks.log").exists()
    assert [s["check"] for s in summary["steps"]] == ["6. recipe shape"]
    assert summary["steps"][0]["status"] == "ok" and summary["steps"][0]["exit_code"] == 0
    assert [(r["task"], r["method"]) for r in summary["runs"]] == [
        ("math", "grpo"), ("math", "gear"), ("tool_use", "grpo"), ("tool_use", "gear")
    ]  # fmt: skip
    assert [(p["task"], p["complete"]) for p in summary["pairs"]] == [("math", True), ("tool_use", True)]
    for pair in summary["pairs"]:
        assert pair["gear_over_grpo_last_step"] > 0
    assert summary["seconds"] >= summary["steps"][0]["seconds"]


def _fake_schedule(shape, budget: float, run_s: float, took: float, plan=None):
    """schedule() with a fake clock: every run takes `took` seconds."""
    clock = {"t": 0.0}

    def run(task, method, backend, vllm):
        clock["t"] += took
        return {"task": task, "method": method, "backend": backend, "status": "ok"}

    plan = plan if plan is not None else shape.plan_runs("cuda", "auto", has_vllm=False)[0]
    return shape.schedule(plan, lambda: budget - clock["t"], run, run_s)


def test_a_budget_cut_drops_a_whole_pair_never_half_of_one(shape):
    # room for three runs: the math pair runs, the tool-use pair is dropped whole (step 6 at ce4f9b3 ran 3 of 4)
    rows = _fake_schedule(shape, budget=250, run_s=80, took=80)
    assert [(r["task"], r["method"], r["status"] == "ok") for r in rows] == [
        ("math", "grpo", True), ("math", "gear", True), ("tool_use", "grpo", False), ("tool_use", "gear", False)
    ]  # fmt: skip
    assert all("not run: budget" in r["status"] and "pair" in r["status"] for r in rows[2:])
    # each run back to back with its pair, in the plan's order, when the budget holds all four
    rows = _fake_schedule(shape, budget=330, run_s=80, took=80)
    assert [r["status"] for r in rows] == ["ok"] * 4
    # a pair that would overrun is not started even if one of its runs would fit
    rows = _fake_schedule(shape, budget=150, run_s=80, took=80)
    assert [r["status"] == "ok" for r in rows] == [False] * 4


def test_the_vllm_run_stands_alone_after_the_pairs(shape):
    plan = shape.plan_runs("cuda", "auto", has_vllm=True)[0]
    rows = _fake_schedule(shape, budget=4 * 80 + shape.VLLM_RUN_S, run_s=80, took=80, plan=plan)
    assert [r["status"] for r in rows] == ["ok"] * 5 and rows[-1]["backend"] == "vllm-colocate"
    rows = _fake_schedule(shape, budget=4 * 80 + 100, run_s=80, took=80, plan=plan)
    assert [r["status"] == "ok" for r in rows] == [True] * 4 + [False]
