"""The statistics plan (issue 52, item 6): bench/power.py sizes the seed count of a comparison from the paired spreads
and effects the committed CPU studies measured, and docs/reproducing.md carries its table and the plan."""

from __future__ import annotations

import importlib
import json
import math
import re
import statistics
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PAGE = REPO / "docs/reproducing.md"


@pytest.fixture(scope="module")
def power():
    return importlib.import_module("bench.power")


@pytest.fixture(scope="module")
def rows():
    return json.loads((REPO / "bench/results/power/power.json").read_text())


def test_seeds_needed_matches_the_exact_paired_t_test(power):
    """d/s = 0.5 needs 34 pairs and d/s = 1 needs 10 for 80% power at alpha 0.05 (exact noncentral-t figures, as
    G*Power gives them); a smaller spread needs fewer seeds; a zero effect can never be resolved."""
    assert power.seeds_needed(0.5, 1.0) == 34
    assert power.seeds_needed(0.03, 0.03) == 10
    assert power.seeds_needed(0.03, 0.02) < power.seeds_needed(0.03, 0.04)
    assert power.seeds_needed(-0.03, 0.04) == power.seeds_needed(0.03, 0.04)
    assert power.seeds_needed(0.0, 0.04) is None
    with pytest.raises(ValueError, match="standard deviation"):
        power.seeds_needed(0.03, 0.0)


def test_the_committed_plan_is_the_studies_own_figures(power, rows):
    """Every input of power.json is recomputed from the study JSONs it names; a few seed counts are recomputed."""
    assert len(rows) == 2 * len(power.COMPARISONS)
    by_name = {c.name: c for c in power.COMPARISONS}
    metrics = {label: key for key, label in power.METRICS.items()}
    for row in rows:
        comparison = by_name[row["comparison"]]
        values = [
            v for path, keys in comparison.sources for v in power.cell_values(path, keys, metrics[row["metric"]])
        ]
        assert row["n_measured"] == len(values) and row["sources"] == [p for p, _ in comparison.sources]
        assert row["effect"] == pytest.approx(statistics.fmean(values))
        assert row["paired_sd"] == pytest.approx(statistics.stdev(values))
    for row in rows[:2]:  # the t-quantile search is ~0.1 s a step; two rows keep the test short
        assert row["seeds_for_target"] == power.seeds_needed(power.TARGET_EFFECT, row["paired_sd"])
        assert row["seeds_for_effect"] == power.seeds_needed(row["effect"], row["paired_sd"])
    # the paper's GEAR on every CPU task, pooled replications of the options that gained
    assert {r["n_measured"] for r in rows if r["comparison"].startswith("GEAR (paper)")} == {8}
    assert max(r["n_measured"] for r in rows) == 48


def test_the_page_carries_the_plan_and_its_figures(power, rows):
    page = PAGE.read_text()
    assert power.markdown(rows) in page
    held = [r for r in rows if r["metric"] == "held-out accuracy"]
    sds = [r["paired_sd"] for r in held]
    effects = [r["effect"] for r in held]
    assert f"{min(sds):.3f}-{max(sds):.3f} in held-out accuracy" in page
    assert f"({min(effects):+.3f} to {max(effects):+.3f})" in page
    paper = [r for r in held if r["comparison"].startswith("GEAR (paper)")]
    assert f"less than {max(abs(r['effect']) for r in paper):.3f}" in page
    counts = sorted(r["seeds_for_effect"] for r in paper)
    assert f"which {counts[0]} to {counts[-1]} seed pairs would resolve" in page
    target = [r["seeds_for_target"] for r in rows]
    assert f"an effect of 0.03 needs {min(target)} to {max(target)} pairs" in page
    start = int(re.search(r"starting with (\d+) seeds per arm", page).group(1))
    assert start >= min(target)  # the first seeds cover the smallest spreads measured
    assert "python -m bench.power --effect 0.03 --sd s" in page


def test_the_page_builds_the_table_with_the_command_it_names():
    page = PAGE.read_text()
    section = page[page.index("## 6. The table") : page.index("## Statistics plan")]
    command = section[section.index("gear-trl-table --baseline grpo") : section.index("--output results/table")]
    assert "--arm grpo results/Qwen3-$size-grpo-$task-seed-*.json" in command
    # the base model's reports are the files the evaluation loop writes for it, one per benchmark of the task
    assert "--start results/Qwen3-$size-$task-start-*.json" in command
    loop = page[page.index("## 5. Evaluation") : page.index("## 6. The table")]
    assert "name=Qwen3-$size-$task-start" in loop and "--output results/$1-$3.json" in loop
    # the seed-named output folders of the training loop are those the table reads its seeds from
    from gear_trl.table import DEFAULT_SEED_PATTERN

    assert re.search(DEFAULT_SEED_PATTERN, "outputs/Qwen3-4B-gear-math-seed-3").group(1) == "3"
    training = page[page.index("## 4. Training") : page.index("## 5. Evaluation")]
    assert "run=Qwen3-$size-$method-$task-seed-$seed" in training and "--output_dir outputs/$run" in training
    # tests/entry_points/test_reproducing_flow.py runs the three loops end to end


def test_the_power_command_for_ones_own_spread(power, capsys):
    assert power.main(["--effect", "0.5", "--sd", "1"]) == [{"effect": 0.5, "paired_sd": 1.0, "seeds": 34}]
    assert "34 seed pairs" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        power.main(["--effect", "0.5"])
    assert math.isfinite(power.TARGET_EFFECT)
