"""Smoke test of bench/overhead.py: its core runs on the tiny shape and writes a complete report (no speed checks)."""

from __future__ import annotations

import importlib
import json
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench" / "overhead.py"

pytestmark = pytest.mark.slow


def load_bench():
    return importlib.import_module("bench.overhead")


def test_overhead_benchmark_reports_every_configuration(tmp_path):
    bench = load_bench()
    argv = ["--shape", "tiny", "--reps", "1", "--warmup", "0", "--completion-length", "16", "--out-dir", str(tmp_path)]
    bench.main(argv, log=lambda *args: None)

    report = json.loads((tmp_path / "cpu.json").read_text())
    assert (tmp_path / "cpu.md").read_text().startswith("# GEAR overhead")
    results = report["shapes"]["tiny"]["results"]
    for name in bench.TRAINER_CONFIGS:
        assert "error" not in results[name], (name, results[name])
        assert results[name]["step_s"]["median"] > 0, name
        assert results[name]["phases_s"]["loss"]["median"] > 0, name
        assert results[name]["phases_s"]["rewards"]["median"] > 0, name
    for name in bench.TRAINER_CONFIGS:
        if name.startswith("sdpo/") or (name.startswith("gear/") and name != "gear/none"):
            assert results[name]["phases_s"]["teacher"]["median"] > 0, name
    for name in ("grpo", "gear/none", "gear/gear"):  # TRL's LM-head forward, or GEAR's fused one in its place
        assert results[name]["phases_s"]["lm_head_forward"]["median"] > 0, name
        assert results[name]["cpu"]["user_s"]["median"] > 0, name
    for name in bench.PSEUDO_CONFIGS:
        assert results[name]["step_s"]["median"] > 0, name
    assert {t["target"] for t in report["targets"]} >= {
        "step_time",
        "extra_peak_memory",
        "gigpo_fraction",
        "end_to_end_step_time",
    }


def test_long_prompt_shape_reports_prefix_sharing_and_end_to_end_ratios(tmp_path):
    bench = load_bench()
    argv = ["--shape", "long_prompt", "--reps", "1", "--warmup", "0", "--completion-length", "8"]
    bench.main([*argv, "--prompt-tokens", "256", "--out-dir", str(tmp_path)], log=lambda *args: None)
    report = json.loads((tmp_path / "cpu.json").read_text())
    shape = report["shapes"]["long_prompt"]
    assert 240 <= shape["prompt_tokens"][0] <= 256
    assert set(shape["results"]) == {"grpo", "gear/gear", bench.NO_SHARING, "hf_generate"}
    assert shape["results"]["hf_generate"]["mean_generated_tokens"] == 8  # generation of the timed length
    targets = {t["target"]: t for t in report["targets"]}
    assert targets["teacher_prefix_sharing"]["threshold"] == 0.4 and targets["teacher_prefix_sharing"]["value"] > 0
    assert targets["step_time"]["threshold"] == 1.15
    assert targets["end_to_end_step_time"]["value"] > 0


def test_cuda_shape_is_qwen3_4b_in_bf16():
    """The --device cuda model cannot run here; check its geometry on the meta device."""
    bench = load_bench()
    args = bench.parse_args(["--device", "cuda"])
    (shape,) = bench.make_shapes(args)
    assert (shape.name, shape.batch, shape.length) == ("qwen3-4b", 8, 4096)
    described = bench.describe_model(shape)
    assert described["dtype"] == "torch.bfloat16"
    assert (described["hidden_size"], described["layers"], described["vocab_size"]) == (2560, 36, 151_936)
    assert 4.0e9 < described["parameters"] < 4.05e9


def test_divergence_memory_target_counts_what_the_teacher_pass_allocates_not_grpos_activations():
    load_bench()
    from bench.overhead_report import evaluate_targets

    def shape(local_teacher_mb):
        gear = {
            "step_ratio_to_grpo": 1.0,
            "step_ratio_to_grpo_paired": {"median": 1.0},
            "step_ratio_to_grpo_min": 1.0,
            "step_s": {"median": 1.0},
            # 200 MB in use when the LM-head chunks start (GRPO's forward activations), the pass adds 5 MB
            "extra_peak_mb": {"step": 1000.0, "teacher": 205.0},
        }
        if local_teacher_mb is not None:
            gear["phase_local_peak_mb"] = {"teacher": local_teacher_mb}
        return {"results": {"grpo": {"step_s": {"median": 1.0}, "extra_peak_mb": {"step": 1000.0}}, "gear/gear": gear}}

    def divergence_target(local_teacher_mb):
        targets = evaluate_targets({"long_prompt": shape(local_teacher_mb)}, "cpu")
        (target,) = [t for t in targets if t["target"] == "divergence_pass_memory"]
        return target

    assert divergence_target(5.0)["value"] == pytest.approx(0.005) and divergence_target(5.0)["holds"]
    assert "205 MB" in divergence_target(5.0)["description"]  # the step-start reading is still shown
    # a report from before the parts were timed keeps its step-start reading
    assert divergence_target(None)["value"] == pytest.approx(0.205) and not divergence_target(None)["holds"]
    # with the chunks inside the loss's LM-head forward (no teacher_lm_head phase), that forward's own peak counts
    fused = shape(5.0)
    fused["results"]["gear/gear"]["phase_local_peak_mb"]["lm_head_forward"] = 120.0
    (target,) = [t for t in evaluate_targets({"vocab": fused}, "cpu") if t["target"] == "divergence_pass_memory"]
    assert target["value"] == pytest.approx(0.12) and not target["holds"]


def test_long_prompt_runs_on_qwen3_head_geometry_unless_the_tiny_model_is_asked_for():
    bench = load_bench()
    from bench.overhead_shapes import build_model_config

    (shape,) = bench.make_shapes(bench.parse_args(["--shape", "long_prompt"]))
    config = build_model_config(shape)
    assert (config.head_dim, config.num_attention_heads // config.num_key_value_heads) == (128, 4)
    assert config.vocab_size == 2264 and shape.prompt_tokens == 2048
    (tiny,) = bench.make_shapes(bench.parse_args(["--shape", "long_prompt", "--tiny-model"]))
    assert tiny.model == "tiny" and build_model_config(tiny).head_dim == 16


def test_suffix_bias_builds_qwen3_4b_with_random_weights_offline():
    """`bench/suffix_bias.py --model qwen3-4b-random`, the GPU run's model, is Qwen3-4B's geometry in the asked dtype
    (built on the meta device here)."""
    import torch

    suffix_bias = importlib.import_module("bench.suffix_bias")
    model = suffix_bias.load_model(suffix_bias.RANDOM_4B, "meta", torch.bfloat16)
    assert model.config.num_hidden_layers == 36 and model.config.vocab_size == 151_936
    assert next(model.parameters()).dtype == torch.bfloat16
    assert 4.0e9 < sum(p.numel() for p in model.parameters()) < 4.05e9


def test_the_committed_cuda_report_gives_the_figures_the_docs_quote():
    """docs/results/performance.md, NOTES.md, the README and the GPU recipes' comment quote these figures."""
    load_bench()
    from bench.overhead_report import readme_table

    results = Path(__file__).resolve().parents[2] / "bench" / "results" / "overhead"
    report = json.loads((results / "cuda.json").read_text())
    assert report["meta"]["machine"].startswith("NVIDIA H100") and report["meta"]["divergence_chunk_size"] == 64
    full = report["shapes"]["qwen3-4b"]
    assert full["shape"]["length"] == 4096
    gear, grpo = full["results"]["gear/gear"], full["results"]["grpo"]
    assert round(gear["step_ratio_to_grpo"], 2) == 1.35
    assert round(gear["extra_peak_mb"]["step"] / grpo["extra_peak_mb"]["step"] - 1, 3) == 0.011
    assert full["results"]["sdpo/full_logits"]["error"].startswith("out of memory")
    ratios = {}
    for chunk in (64, 512, 2048):
        run = json.loads((results / f"cuda_chunk{chunk}.json").read_text())
        assert run["meta"]["divergence_chunk_size"] == chunk
        ratios[chunk] = round(run["shapes"]["qwen3-4b"]["results"]["gear/gear"]["step_ratio_to_grpo"], 2)
    assert ratios == {64: 1.34, 512: 1.27, 2048: 1.27}
    table = readme_table(report)
    assert "| SDPO `full_logits` step, extra peak | out of memory |" in table
    assert "**1.35x**" in table


def test_gpu_checks_script_parses_and_runs_only_what_the_repository_has():
    """bench/gpu_checks.sh runs on a lent GPU machine only; here: bash can parse it, and every script and file it
    names exists."""
    import re
    import subprocess

    script = BENCH.parent / "gpu_checks.sh"
    assert subprocess.run(["bash", "-n", str(script)], check=False).returncode == 0
    text = script.read_text()
    named = set(re.findall(r"\b((?:bench|recipes|data)/[\w./-]+\w)", text))
    assert {"bench/bf16_credit.py", "bench/suffix_bias.py", "bench/overhead.py"} <= named
    root = BENCH.parent.parent
    missing = [path for path in named if not (root / path).exists() and "*" not in path]
    assert not missing, missing
