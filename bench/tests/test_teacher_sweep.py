"""bench/teacher_sweep.py: its statistics and localization figures on hand-worked numbers, and the docs' teacher sweep
page (docs/results/teacher-sweep.md, filled by docs/hooks.py) is its section generated from the committed results."""

from __future__ import annotations

import importlib
import json
import math
from pathlib import Path

import pytest

from tests.utils import load_file

REPO_ROOT = Path(__file__).resolve().parents[2]
BENCH = REPO_ROOT / "bench" / "teacher_sweep.py"
RESULTS = REPO_ROOT / "bench" / "results" / "teacher_sweep" / "teacher_sweep.json"


@pytest.fixture(scope="module")
def sweep():
    return importlib.import_module("bench.teacher_sweep")


@pytest.mark.parametrize(("df", "expected"), [(1, 12.7062), (2, 4.3027), (4, 2.7764), (9, 2.2622), (30, 2.0423)])
def test_t_quantile_matches_the_table(sweep, df, expected):
    assert sweep.t_quantile(0.975, df) == pytest.approx(expected, abs=2e-4)


def test_paired_interval_on_hand_worked_differences(sweep):
    # mean 0.3, sd sqrt(0.025) = 0.158114, se 0.0707107, t(0.975, 4) = 2.776445: half-width 0.196324
    cell = sweep.paired_interval([0.1, 0.2, 0.3, 0.4, 0.5])
    assert cell["mean"] == pytest.approx(0.3)
    assert cell["ci_low"] == pytest.approx(0.103676, abs=1e-5)
    assert cell["ci_high"] == pytest.approx(0.496324, abs=1e-5)
    assert cell["n_seeds"] == 5
    one = sweep.paired_interval([0.2])
    assert one["mean"] == 0.2 and math.isnan(one["ci_low"]) and one["n_seeds"] == 1


def test_paired_differences_match_seeds(sweep):
    runs = [
        {"label": label, "seed": seed, "reward": reward, "eval": {"sampled_accuracy": acc}}
        for label, seed, reward, acc in (
            ("none", 0, [0.0, 0.2], 0.10), ("gear", 0, [0.0, 0.4], 0.20),
            ("none", 1, [0.0, 0.3], 0.30), ("gear", 1, [0.0, 0.3], 0.20),
            ("gear", 2, [0.0, 0.9], 0.90),  # no GRPO run for seed 2: left out
        )
    ]  # fmt: skip
    cells = sweep.paired(runs, "gear", "none", window=1)
    assert cells["reward_last"]["values"] == pytest.approx([0.2, 0.0])
    assert cells["sampled_accuracy"]["values"] == pytest.approx([0.1, -0.1])
    assert cells["reward_last"]["n_seeds"] == 2


def test_localization_figures(sweep):
    # Rollout 1 failed (advantage -1), error at token 2 where a segment opens; weights 1, 1, 2, 1 (mean of the rest 1):
    # blame ratio 2. Rollout 2 passed (advantage +1), weights 0.5, 1.5, 1, 1. Rollout 3 failed, error not located.
    rollouts = [
        (["a", "b", "c", "d"], {"mask": [1, 1, 1, 1], "segment_ids": [-1, -1, 0, 0], "weights": [1, 1, 2, 1],
                                "advantage": -1.0, "reward": 0.0, "error": 2}),
        (["a", "b", "c", "d"], {"mask": [1, 1, 1, 1], "segment_ids": [0, 0, -1, -1], "weights": [0.5, 1.5, 1, 1],
                                "advantage": 1.0, "reward": 1.0, "error": None}),
        (["a", "b"], {"mask": [1, 1], "segment_ids": [-1, -1], "weights": [1, 1], "advantage": 0.0, "reward": 0.0,
                      "error": None}),
    ]  # fmt: skip
    loc = sweep.localization(rollouts, lambda tokens, row: row["error"])
    assert (loc["failed"], loc["located"]) == (2, 1)
    assert loc["onset_rate"] == 1.0
    assert loc["blame_ratio"] == pytest.approx(2.0)
    # moved: rollout 1: 0.5 * (1) = 0.5, rollout 2: 0.5 * (0.5 + 0.5) = 0.5; over |A| x tokens = 8
    assert loc["moved_share"] == pytest.approx(1.0 / 8)
    assert loc["first_onset_by_error"] == 1.0  # rollout 1's first segment opens at its error


def test_first_onset_by_error_counts_late_and_missing_onsets_as_misses(sweep):
    def failed(segment_ids, error):
        n = len(segment_ids)
        row = {"mask": [1] * n, "segment_ids": segment_ids, "weights": [1] * n, "advantage": -1.0, "reward": 0.0}
        return ["t"] * n, {**row, "error": error}

    rollouts = [
        failed([0, 0, -1, 1], 2),  # an early onset, before the error: the error keeps its blame
        failed([-1, -1, -1, 0], 1),  # the first onset after the error: a cut at it would spare the error
        failed([-1, -1, -1, -1], 0),  # no onset at all
        failed([-1, 0, 0, 0], 1),  # at the error
    ]
    loc = sweep.localization(rollouts, lambda tokens, row: row["error"])
    assert loc["first_onset_by_error"] == pytest.approx(2 / 4)


def test_a_blame_ratio_over_zero_weights_is_unbounded_not_an_error(sweep):
    # an oracle that weights only the error token: the rest are 0, the ratio infinite; 0 at the error too: ratio 0
    only = {"mask": [1, 1, 1], "segment_ids": [-1, -1, -1], "weights": [0, 0, 3], "advantage": -1.0, "reward": 0.0}
    none = {**only, "weights": [0, 0, 0]}
    site = lambda tokens, row: 2
    assert sweep.localization([(["a", "b", "c"], only)], site)["blame_ratio"] == math.inf
    assert sweep.localization([(["a", "b", "c"], none)], site)["blame_ratio"] == 0.0


def test_verdicts(sweep):
    assert sweep.verdict({"mean": 0.1, "ci_low": 0.01, "ci_high": 0.2}) == "GEAR better"
    assert sweep.verdict({"mean": -0.1, "ci_low": -0.2, "ci_high": -0.01}) == "GEAR worse"
    assert sweep.verdict({"mean": 0.1, "ci_low": -0.1, "ci_high": 0.3}) == "no difference resolved"


def test_the_docs_page_is_the_section_generated_from_the_committed_results(sweep):
    report = json.loads(RESULTS.read_text())
    hooks = load_file(REPO_ROOT / "docs" / "hooks.py", "gear_docs_hooks")
    page = hooks.render((REPO_ROOT / "docs" / "results" / "teacher-sweep.md").read_text(), "results/teacher-sweep.md")
    section = sweep.readme_section(report)
    assert sweep.tables(report) in page
    for finding in (line for line in section.splitlines() if line.startswith("- ")):
        assert finding in page
    assert len(report["teachers"]) >= 3
    for teacher in report["teachers"]:
        for key in ("name", "teacher_accuracy", "student_sampled_accuracy", "localization", "diagnostic"):
            assert key in teacher
        for metric in ("reward_last", "sampled_accuracy"):
            cell = report["paired"][teacher["name"]][metric]
            assert cell["n_seeds"] >= 5 and cell["ci_low"] <= cell["mean"] <= cell["ci_high"]


def test_teacher_warm_starts_are_shipped(sweep):
    """Every teacher's warm start is committed, under 20 MB, and differs from the testbed's only in its weights (same
    shape, tokenizer and chat template): the sweep varies the teacher, nothing else."""
    reference = REPO_ROOT / "data" / "tiny-qwen3-arith"
    assert [t["hint_frac"] for t in sweep.TEACHERS] == sorted(t["hint_frac"] for t in sweep.TEACHERS)
    for teacher in sweep.TEACHERS:
        model_dir = REPO_ROOT / teacher["model"]
        assert sum(f.stat().st_size for f in model_dir.iterdir() if f.is_file()) < 20 * 2**20
        for name in ("config.json", "tokenizer.json", "chat_template.jinja"):
            assert (model_dir / name).read_bytes() == (reference / name).read_bytes(), (teacher["name"], name)
