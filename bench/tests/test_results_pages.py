"""The two declared studies' results pages (docs/results/distill-bounds.md and pretrained-credit.md) are generated
tables over their reports: here the generators read complete reports built by the studies' own code from hand-made
runs, so the pages are known to show a finished study right before any of its declared runs is read."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench import distill_bounds as db
from bench import pretrained_credit as pc
from bench.tests.test_distill_bounds import confirm_runs, declared_for_test
from bench.tests.test_pretrained_credit import run as pc_run
from tests.utils import load_file

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture()
def blocks(monkeypatch):
    module = load_file(REPO / "docs" / "results_blocks.py", "gear_docs_results_blocks_pages")
    reports: dict = {}
    monkeypatch.setattr(module, "load", lambda key: reports[key])
    module.reports = reports
    return module


def _distill_report(k8_values=None):
    seeds = tuple(range(300, 306))
    declared = declared_for_test(seeds=seeds)
    declared["verdict"] = {"1": "one", "2": "two", "3": "three", "passes": "all", "variant_holds": "1 and 3"}
    base = [0.50, 0.55, 0.60, 0.52, 0.58, 0.54]
    calc = {"none": base, db.BLEND: [b - 0.4 + 0.01 * i for i, b in enumerate(base)],
            "gd-clip0.2-0.5": [b + 0.001 * (i % 2) for i, b in enumerate(base)], "grpo-agree-0.5": base}  # fmt: skip
    k8 = k8_values or {"none": base, db.BLEND: [b + 0.10 + 0.002 * i for i, b in enumerate(base)],
                       "gd-clip0.2-0.5": [b + 0.09 + 0.001 * i for i, b in enumerate(base)], "grpo-agree-0.5": base,
                       "sdpo-trl-fair-0.5": [b - 0.05 + 0.004 * i for i, b in enumerate(base)]}  # fmt: skip
    report = {"seeds": list(seeds), "chosen": declared["chosen"], "margin": 0.03,
              **db.confirmation(confirm_runs(calc, k8, seeds), declared)}  # fmt: skip
    return report, declared


def test_the_distill_bounds_page_shows_each_arm_the_comparisons_and_the_verdict(blocks):
    report, declared = _distill_report()
    blocks.reports.update({"distill_bounds": report, "distill_bounds.declaration": declared})
    table = blocks.distill_bounds_table()
    # calculator: the blend 0.4 below GRPO less 0.01 a seed: mean -0.4 + 0.025 = -0.375
    assert table.cell("calculator & grpo-distill-0.5 - none", "held-out - GRPO").startswith("-0.375 [")
    assert table.cell("calculator & gd-clip0.2-0.5 - none > -0.03", "held-out - GRPO").startswith("+0.001 [")
    # the fair SDPO arm minus the blend: -0.15 + 0.002 a seed, mean -0.145
    assert table.cell("independent-k8 & sdpo-trl-fair-0.5 - grpo-distill-0.5", "held-out - GRPO").startswith(
        "-0.145 ["
    )
    assert table.cell("independent-k8 & gd-clip0.2-0.5 - none", "seeds") == "300-305"
    assert table.cell("calculator & grpo-distill-0.5 - none", "collapsed seeds") == "0 of 6"  # no share series given
    assert not [row for row in table.rows if "none` - `none" in row[1]]  # GRPO is the baseline, not a row
    holm = table.cell("calculator & grpo-distill-0.5 - none", "held-out - GRPO > Holm p")
    assert holm == "< 0.001" or 0 < float(holm) < 0.05
    verdict = blocks.distill_bounds_verdict()
    assert [row[2] for row in verdict.rows] == ["yes", "yes", "yes", "yes", "yes", "yes"]
    assert verdict.cell("(3's condition)", "holds") == "yes" and verdict.cell("passes", "declared") == "all"


def test_the_distill_bounds_page_lists_a_running_cell_by_its_count_and_decides_nothing(blocks):
    report, declared = _distill_report(k8_values={"none": [0.3] * 6})
    blocks.reports.update({"distill_bounds": report, "distill_bounds.declaration": declared})
    table = blocks.distill_bounds_table()
    assert table.cell("independent-k8", "arm minus GRPO") == "under way: 6 of 30 declared runs in, none read"
    assert table.cell("independent-k8", "held-out - GRPO") == ""
    assert [row[2] for row in blocks.distill_bounds_verdict().rows] == ["pending"] * 5


def _pretrained_report(k8_complete: bool):
    seeds = range(400, 404)
    none = [0.30, 0.40, 0.50, 0.45]
    runs = {"numbered-k4": [pc_run("none", 400 + i, h) for i, h in enumerate(none)]}
    for arm, shift in (("gear", 0.0), ("grpo-distill-0.25", 0.08), ("oracle-process", 0.10)):
        runs["numbered-k4"] += [pc_run(arm, 400 + i, h + shift + 0.01 * (i % 2)) for i, h in enumerate(none)]
    cells = pc.summarize(runs, seeds, margin={"heldout": 0.05})
    checks = {"numbered-k4": {"teacher_gap": {"mean": -0.08, "ci_low": -0.09, "ci_high": -0.06},
                              "localization": {"rate": 0.89, "chance": 0.58, "ci_low": 0.85, "ci_high": 0.93}},
              "numbered-k8": {"teacher_gap": {"mean": -0.07, "ci_low": -0.08, "ci_high": -0.05}}}  # fmt: skip
    report = {"seeds": list(seeds), "cells_pending": {} if k8_complete else {"numbered-k8": 5},
              "cells": pc.with_teacher_checks(cells, checks)}  # fmt: skip
    declared = {"seeds": list(seeds), "arms": {a: {} for a in ("none", "gear", "grpo-distill-0.25", "oracle-process")},
                "equivalence_margin": {"heldout": 0.05}}  # fmt: skip
    return report, declared


def test_the_pretrained_page_shows_differences_equivalence_and_the_ceilings_share(blocks):
    report, declared = _pretrained_report(k8_complete=False)
    blocks.reports.update({"pretrained_credit": report, "pretrained_credit.declaration": declared})
    table = blocks.pretrained_credit_table()
    assert table.cell("numbered-k4 & gear", "held-out - GRPO").startswith("+0.005 [")  # 0.01 on two seeds of four
    assert table.cell("numbered-k4 & gear", "within +-0.05").startswith("yes (")  # 0.005 +- 0.01: inside the margin
    assert table.cell("numbered-k4 & grpo-distill-0.25", "within +-0.05").startswith("not shown (")
    share = table.cell("numbered-k4 & grpo-distill-0.25", "share of")
    assert share.startswith("0.81 [")  # 0.085 / 0.105: the ceiling lies above GRPO
    assert table.cell("numbered-k4 & oracle-process", "share of") == ""
    assert table.cell("numbered-k8", "arm") == "under way: 5 of 16 declared runs in, none read"
    teacher = blocks.pretrained_credit_teacher()
    assert teacher.cell("numbered-k4", "first onset") == "0.890 [0.850, 0.930]"
    assert teacher.cell("numbered-k8", "first onset") == "-"  # a cell without its localization check: a dash
    assert teacher.cell("numbered-k8", "teacher gap, all") == "-0.070 [-0.080, -0.050]"


def test_the_pretrained_page_gives_no_share_without_a_ceiling_above_grpo(blocks):
    report, declared = _pretrained_report(k8_complete=True)
    arms = report["cells"]["numbered-k4"]["arms"]
    arms["oracle-process"]["heldout"]["minus_none"] = {
        **arms["oracle-process"]["heldout"]["minus_none"],
        "ci_low": -0.01,
    }
    blocks.reports.update({"pretrained_credit": report, "pretrained_credit.declaration": declared})
    table = blocks.pretrained_credit_table()
    assert table.cell("numbered-k4 & grpo-distill-0.25", "share of") == "no ceiling above GRPO"
    assert not [row for row in table.rows if row[1].startswith("under way")]


def test_a_share_bound_the_bootstrap_left_unbounded_reads_so(blocks):
    """A report written as strict JSON holds an infinite bootstrap bound as null (bench.harness.reports.dumps)."""
    entry = {"minus_none": {"mean": 0.02}, "share_of_process_ceiling": {"mean": 0.4, "ci_low": -0.1, "ci_high": None}}
    assert blocks._share(entry) == "0.40 [-0.10, unbounded]"
    assert blocks._share({**entry, "minus_none": {"mean": -0.01}}) == "below GRPO"
