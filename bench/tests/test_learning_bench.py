"""bench/learning.py: a two-run smoke test of the whole pipeline (train, save, evaluate, JSON/PNG/table), and the
committed full results are the tables of the docs' learning page (docs/results/learning.md, filled by docs/hooks.py)."""

from __future__ import annotations

import importlib
import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from tests.utils import load_file

REPO_ROOT = Path(__file__).resolve().parents[2]
BENCH = REPO_ROOT / "bench" / "learning.py"
RESULTS = REPO_ROOT / "bench" / "results" / "learning"


def learning_page() -> str:
    hooks = load_file(REPO_ROOT / "docs" / "hooks.py", "gear_docs_hooks")
    return hooks.render((REPO_ROOT / "docs" / "results" / "learning.md").read_text(), "results/learning.md")


def load_bench():
    return importlib.import_module("bench.learning")


def run_bench(argv: list[str]) -> subprocess.CompletedProcess:
    """The study as users run it, `python -m bench.learning` from the repository root, with no PYTHONPATH set."""
    return subprocess.run(
        [sys.executable, "-m", "bench.learning", *argv],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=900,
        check=True,
    )


@pytest.mark.slow
def test_learning_benchmark_runs_and_reports(tmp_path):
    argv = [
        "--quick", "--modes", "none", "gear", "--max-steps", "2", "--eval-limit", "4", "--workers", "2",
        "--work-dir", str(tmp_path / "work"), "--out-dir", str(tmp_path / "out"),
        "--set", "per_device_train_batch_size=8", "num_generations=4", "max_completion_length=16",
    ]  # fmt: skip
    run_bench(argv)

    report = json.loads((tmp_path / "out" / "math_quick.json").read_text())
    assert list(report["summary"]) == ["none", "gear"]
    assert (tmp_path / "out" / "math_quick.png").stat().st_size > 10_000
    assert (tmp_path / "out" / "math_quick.md").read_text().count("\n| `") == 2
    for run in report["runs"]:
        assert run["steps"] == 2 and len(run["reward"]) == 2
        assert run["eval"]["n"] == 4 and 0.0 <= run["eval"]["greedy_accuracy"] <= 1.0
        assert run["eval"]["train_n"] == 4  # the recipe's max_train_samples problems, capped by --eval-limit
    gear = next(run for run in report["runs"] if run["mode"] == "gear")
    none = next(run for run in report["runs"] if run["mode"] == "none")
    assert all(value is not None for value in gear["weight_std"])  # GEAR logs its weights; GRPO has none
    assert all(value is None for value in none["weight_std"])
    assert gear["distill_share"] == [None, None]  # recorded for every run; a number only with distillation_weight
    assert report["start"]["eval"]["n"] == 4
    assert report["summary"]["gear"]["greedy_accuracy"]["values"] == [gear["eval"]["greedy_accuracy"]]

    # A second invocation finds every run cached and trains nothing (no result file is rewritten).
    cached = sorted((tmp_path / "work").glob("*/result.json"))
    assert len(cached) == 3  # the start checkpoint and the two runs
    stamps = [path.stat().st_mtime_ns for path in cached]
    again = run_bench(argv)
    assert "(3 cached)" in again.stdout
    assert [path.stat().st_mtime_ns for path in cached] == stamps
    assert json.loads((tmp_path / "out" / "math_quick.json").read_text())["runs"] == report["runs"]


def test_summary_statistics_are_over_seeds():
    bench = load_bench()
    runs = [
        {"mode": "gear", "seed": s, "reward": rewards, "weight_std": [0.1] * 4, "train_s": 1.0,
         "eval": {"greedy_accuracy": acc, "sampled_accuracy": acc / 2, "pass_at_k": acc}}
        for s, rewards, acc in ((0, [0.0, 0.2, 0.4, 0.6], 0.3), (1, [0.2, 0.2, 0.2, 0.2], 0.5))
    ]  # fmt: skip
    summary = bench.summarize(runs, ["none", "gear"], window=2)
    assert list(summary) == ["gear"]  # modes without runs are left out
    row = summary["gear"]
    assert row["reward_first"]["values"] == pytest.approx([0.1, 0.2])
    assert row["reward_last"]["values"] == pytest.approx([0.5, 0.2])
    assert row["reward_gain"]["mean"] == pytest.approx((0.4 + 0.0) / 2)
    assert row["greedy_accuracy"]["mean"] == pytest.approx(0.4)
    assert row["greedy_accuracy"]["std"] == pytest.approx(math.sqrt(0.02))  # sample sd of 0.3 and 0.5


def test_committed_results_are_the_docs_table():
    path = RESULTS / "math.json"
    assert path.exists(), "run `python -m bench.learning` and commit bench/results/learning/math.{json,png,md}"
    bench = load_bench()
    report = json.loads(path.read_text())
    assert len(report["config"]["seeds"]) >= 3
    assert set(report["summary"]) == set(bench.TASKS["math"]["modes"])
    for mode, row in report["summary"].items():
        assert len(row["greedy_accuracy"]["values"]) == len(report["config"]["seeds"]), mode
    assert bench.markdown_table(report) in learning_page()


def test_committed_tools_results_are_the_docs_table():
    path = RESULTS / "tools.json"
    assert path.exists(), "run `python -m bench.learning --task tools` and commit bench/results/learning/tools.*"
    bench = load_bench()
    report = json.loads(path.read_text())
    assert report["task"] == "tools" and len(report["config"]["seeds"]) >= 3
    assert list(report["summary"]) == bench.TASKS["tools"]["modes"]
    for mode, row in report["summary"].items():
        assert len(row["sampled_accuracy"]["values"]) == len(report["config"]["seeds"]), mode
    assert report["start"]["eval"]["n"] == 200  # the whole held-out split
    assert bench.markdown_table(report) in learning_page()


def test_variants_are_labelled_arms_with_their_own_settings():
    bench = load_bench()
    assert bench.parse_arm("gear+gigpo") == ("gear+gigpo", "gear+gigpo", [])
    label, mode, overrides = bench.parse_arm("gear:weight_alpha=3, weight_eps=0.9")
    assert (mode, overrides) == ("gear", ["--weight_alpha", "3", "--weight_eps", "0.9"])
    assert bench.run_key(label, 2) != bench.run_key("gear", 2)
    assert bench.run_key("gear+gigpo", 0) == "gear_plus_gigpo__seed0"
    with pytest.raises(ValueError, match="'alpha'"):
        bench.parse_arm("gear:alpha")


def test_cached_run_is_reused_only_for_the_same_settings():
    bench = load_bench()
    job = {"kind": "train", "recipe": "r.yaml", "recipe_sha": "abc", "mode": "gear", "seed": 0, "max_steps": 120,
           "overrides": [], "eval_limit": None, "train_eval": None}  # fmt: skip
    assert bench.job_spec(job) == bench.job_spec(dict(job))
    changes = ({"max_steps": 60}, {"overrides": ["--weight_alpha", "3"]}, {"eval_limit": 48}, {"seed": 1},
               {"recipe_sha": "def"}, {"train_eval": {"split": "train", "limit": 128}})  # fmt: skip
    for change in changes:
        assert bench.job_spec({**job, **change}) != bench.job_spec(job), change
    start = {"kind": "start", "model": "data/tiny-qwen3-arith", "eval_limit": None, "train_eval": None}
    assert bench.job_spec(start) == {"model": "data/tiny-qwen3-arith", "eval_limit": None, "train_eval": None}


def test_final_window_and_recipe_cache_key():
    """The final window is a run's last quarter (at least one step), for every study; a recipe's cache key follows
    its values, not its text: a reordered or commented recipe keeps its cached runs, a changed value does not."""
    import yaml

    bench = load_bench()
    assert [bench.final_window(n) for n in (2, 4, 40, 60, 61)] == [1, 1, 10, 15, 15]
    base = bench.recipe_values_sha(yaml.safe_load("learning_rate: 1.0e-4\nmax_steps: 40\n"))
    assert bench.recipe_values_sha(yaml.safe_load("# the study's\nmax_steps: 40\nlearning_rate: 1.0e-4\n")) == base
    assert bench.recipe_values_sha(yaml.safe_load("learning_rate: 2.0e-4\nmax_steps: 40\n")) != base
    assert len(base) == 12 and int(base, 16) >= 0
