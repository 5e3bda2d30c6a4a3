"""bench/credit_methods.py: the declared arms and cells become the right jobs, and the report's statistics (paired
differences, Holm over the declared family, the share of the process ceiling) on hand-made runs."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from bench import credit_methods as study


def run(cell, arm, seed, heldout, reward):
    return {
        "cell": cell,
        "label": arm,
        "seed": seed,
        "eval": {"sampled_accuracy": heldout},
        "reward": [0.0] * 5 + [reward] * 15,
    }


def test_the_declared_arms_become_jobs_with_their_settings(tmp_path):
    assert study.arms_of("independent-k8") == [
        "none", "grpo-distill-0.25", "grpo-distill-0.5", "gear-distill-0.25", "gear-distill-0.5", "gear", "sdpo-trl",
        "sdpo-trl-solution", "rlsd-reference", "oracle-process",
    ]  # fmt: skip
    assert study.arms_of("calculator") == [
        "none", "grpo-distill-0.25", "grpo-distill-0.5", "gear-distill-0.25", "gear-distill-0.5", "gear",
        "rlsd-reference", "gigpo", "gear-gigpo",
    ]  # fmt: skip
    assert study.family_size() == 36  # the declaration's Holm family (amendments 1 and 3)
    assert "sdpo-trl" not in study.arms_of("independent-k4") and "sdpo-trl-solution" not in study.arms_of("chained-k4")
    grpo_sd = study.job_for("independent-k8", "grpo-distill-0.25", 100, tmp_path)
    assert grpo_sd["mode"] == "none" and grpo_sd["max_steps"] == 60
    args = grpo_sd["overrides"]
    assert args[args.index("--distillation_weight") + 1] == "0.25"
    assert args[args.index("--teacher_reference") + 1] == "solution"
    assert args[args.index("--dataset_name") + 1] == "data/horizon/independent/k8"
    rlsd = study.job_for("chained-k4", "rlsd-reference", 100, tmp_path)
    assert rlsd["max_steps"] == 40 and rlsd["mode"] == "rlsd"
    for flag, value in (
        ("--teacher", "periodic"),
        ("--teacher_sync_steps", "20"),
        ("--rlsd_lambda_decay_steps", "60"),
    ):
        assert rlsd["overrides"][rlsd["overrides"].index(flag) + 1] == value
    sdpo = study.job_for("independent-k8", "sdpo-trl-solution", 100, tmp_path)
    assert sdpo["sdpo"] == {"privileged_context": "solution"} and "--teacher_reference" not in sdpo["overrides"]
    assert study.job_for("independent-k8", "oracle-process", 100, tmp_path)["oracle"] == "process"
    calc = study.job_for("calculator", "gear-distill-0.5", 100, tmp_path)
    assert calc["eval"]["environment"] == "calculator" and "--teacher_reference" not in calc["overrides"]
    assert study.spec_of(sdpo) != study.spec_of(study.job_for("independent-k8", "sdpo-trl", 100, tmp_path))


def test_confirmatory_seeds_are_declared_and_fresh():
    assert study.CONFIRMATORY == list(range(100, 116))
    assert not set(study.CONFIRMATORY) & set(study.EXPLORATION)
    with pytest.raises(SystemExit):
        study.main(["--cell", "independent-k8", "--seeds", "60"])  # neither declared nor exploration


def test_summary_by_hand():
    """Two seeds. held-out: none 0.10, 0.20; gear-distill-0.25 0.20, 0.40 (diffs 0.10, 0.20); grpo-distill-0.25
    0.15, 0.25 (diffs 0.05, 0.05); oracle-process 0.30, 0.40 (diffs 0.20, 0.20: its interval is a point above 0)."""
    cell = "independent-k8"
    runs = [
        run(cell, "none", 1, 0.10, 0.1), run(cell, "none", 2, 0.20, 0.2),
        run(cell, "gear-distill-0.25", 1, 0.20, 0.3), run(cell, "gear-distill-0.25", 2, 0.40, 0.2),
        run(cell, "grpo-distill-0.25", 1, 0.15, 0.1), run(cell, "grpo-distill-0.25", 2, 0.25, 0.2),
        run(cell, "oracle-process", 1, 0.30, 0.1), run(cell, "oracle-process", 2, 0.40, 0.2),
    ]  # fmt: skip
    out = study.summarize({cell: runs}, {1, 2}, family_size=36)[cell]
    gear = out["arms"]["gear-distill-0.25"]["heldout"]
    assert gear["minus_none"]["mean"] == pytest.approx(0.15) and gear["minus_none"]["n_seeds"] == 2
    # ratio of means 0.15 / 0.20; every bootstrap resample lies in [0.10 / 0.20, 0.20 / 0.20]
    share = gear["share_of_process_ceiling"]
    assert share["mean"] == pytest.approx(0.75) and 0.5 <= share["ci_low"] <= share["ci_high"] <= 1.0
    # reward: last 15 logged steps; diffs 0.2 and 0.0
    assert out["arms"]["gear-distill-0.25"]["reward"]["minus_none"]["mean"] == pytest.approx(0.1)
    attribution = out["attribution"]["distillation_weight=0.25"]["heldout"]
    assert attribution["mean"] == pytest.approx(0.10) and attribution["n_seeds"] == 2  # (0.05, 0.15)
    # grpo-distill's two equal differences: no spread, p = 0; Holm over the declared 36 keeps it 0
    grpo = out["arms"]["grpo-distill-0.25"]["heldout"]["minus_none"]
    assert grpo["p"] == 0.0 and grpo["p_holm"] == 0.0
    # an arm with no runs: nothing to compare, its p NaN and NaN after Holm, counted in the family all the same
    missing = out["arms"]["gear"]["heldout"]["minus_none"]
    assert missing["n_seeds"] == 0 and math.isnan(missing["p_holm"])
    assert gear["minus_none"]["p_holm"] == pytest.approx(min(1.0, 36 * gear["minus_none"]["p"]), rel=1e-6) or (
        gear["minus_none"]["p_holm"] >= gear["minus_none"]["p"]
    )
    assert (
        "oracle-process" in out["arms"]
        and out["arms"]["oracle-process"]["heldout"]["share_of_process_ceiling"] is None
    )
    table = study.markdown({"title": "t", "cells": {cell: out}})
    assert (
        "| independent-k8 | gear-distill-0.25 | +0.150" in table and "gear-distill-0.25 - grpo-distill-0.25" in table
    )


def test_the_declaration_order_check_reads_git_history(tmp_path, monkeypatch):
    """`--check-declaration` (and `--report-only` before it writes) on a hand-made history: a run committed before the
    declaration, an item-6 run before amendment 2, a later cell's confirmatory run before amendment 4, and a whole
    `calculator` committed before amendment 5 are named; runs after their amendment, and an uncommitted run, are not."""
    import os
    import subprocess

    root = tmp_path / "credit_methods"
    root.mkdir()
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    assert study.declaration_order(root) is None  # no history yet: nothing to check
    text = "# Declaration\n\n## Amendment 1 (before any run)\n"

    def commit(when: int, *paths: str, declaration: str | None = None) -> None:
        for name in paths:
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            (root / name).write_text("{}")
        if declaration is not None:
            (root / "declaration.md").write_text(declaration)
        stamp = f"@{when} +0000"
        env = {**os.environ, "GIT_AUTHOR_DATE": stamp, "GIT_COMMITTER_DATE": stamp, "GIT_AUTHOR_NAME": "t",
               "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}  # fmt: skip
        subprocess.run(["git", "add", "-A"], cwd=root, check=True)
        subprocess.run(["git", "commit", "-qm", f"at {when}"], cwd=root, env=env, check=True)

    calculator = [f"runs/calculator/{arm}__seed{seed}.json" for arm in study.arms_of("calculator")
                  for seed in study.CONFIRMATORY]  # fmt: skip
    commit(500, "runs/independent-k8/none__seed3.json")  # an exploration run before the declaration
    assert study.declaration_order(root) is None  # no declaration committed: nothing to check against
    commit(1000, declaration=text)
    commit(1500, "runs/independent-k8/none__seed100.json")
    commit(1700, "runs/chained-k4/none__seed100.json", "runs/independent-k8/grpo-agree-0.5__seed200.json")
    text += "\n## Amendment 2 (item 6)\n\n## Amendment 3 (cuts)\n\n## Amendment 4 (k8 read)\n"
    commit(2000, declaration=text)
    commit(2500, "runs/independent-k8/grpo-agree-0.5__seed201.json", *calculator)
    commit(3000, declaration=text + "\n## Amendment 5 (the weight)\n")
    commit(3500, "runs/chained-k4/gear__seed101.json")
    (root / "runs" / "chained-k4" / "gear__seed102.json").write_text("{}")  # not committed: not judged
    assert study.declaration_order(root) == [
        "runs/chained-k4/none__seed100.json was committed before amendment 4",
        "runs/independent-k8/grpo-agree-0.5__seed200.json was committed before amendment 2",
        "runs/independent-k8/none__seed3.json was committed before the declaration",
        "calculator's last confirmatory run is not younger than amendment 5",
    ]
    monkeypatch.setattr(study, "RESULTS", root)
    with pytest.raises(SystemExit):
        study.main(["--check-declaration"], log=lambda *a: None)
    # the same runs, each committed after what governs it: the order holds
    root = tmp_path / "in_order"
    root.mkdir()
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    commit(1000, declaration=text)
    commit(1500, "runs/independent-k8/none__seed3.json", "runs/independent-k8/none__seed100.json")
    commit(2000, declaration=text + "\n## Amendment 5 (the weight)\n")
    commit(2500, "runs/chained-k4/none__seed100.json", "runs/independent-k8/grpo-agree-0.5__seed200.json", *calculator)
    assert study.declaration_order(root) == []
    monkeypatch.setattr(study, "RESULTS", root)
    assert study.main(["--check-declaration"], log=lambda *a: None) == {}


def test_report_only_writes_the_reports_from_kept_runs_and_lists_them(tmp_path, monkeypatch):
    import json

    from bench.harness import index

    results = tmp_path / "credit_methods"
    (results / "runs" / "independent-k8").mkdir(parents=True)
    (results / "manifest.json").write_text(json.dumps({"files": {}}))
    (results / "runs" / "independent-k4").mkdir(parents=True)
    for arm in study.arms_of("independent-k8"):  # every declared run of independent-k8
        for seed in study.CONFIRMATORY:
            heldout = (0.2 if arm == "gear" else 0.1) + (seed % 3) / 1000
            kept = run("independent-k8", arm, seed, heldout, 0.1)
            (results / "runs" / "independent-k8" / f"{arm}__seed{seed}.json").write_text(json.dumps(kept))
    partial = run("independent-k4", "none", 100, 0.5, 0.1)  # one run of another cell
    (results / "runs" / "independent-k4" / "none__seed100.json").write_text(json.dumps(partial))
    monkeypatch.setattr(study, "RESULTS", results)
    monkeypatch.setattr(study, "RUNS_DIR", results / "runs")
    monkeypatch.setattr(index, "main", lambda argv: 0)
    out = study.main(["--report-only"], log=lambda *a: None)
    # no exploration run kept: no exploration report; item 6's report holds its run counts only
    assert list(out) == ["credit_methods", "credit_methods_item6"]
    report = json.loads((results / "credit_methods.json").read_text())
    gear = report["cells"]["independent-k8"]["arms"]["gear"]["heldout"]["minus_none"]
    assert gear["mean"] == pytest.approx(0.1) and gear["n_seeds"] == 16 and report["seeds"] == study.CONFIRMATORY
    # a cell not complete is not read: listed as pending with how many of its declared runs are in, no figure of it
    assert report["cells_pending"] == {"independent-k4": 1, "chained-k4": 0, "calculator": 0}
    assert "independent-k4" not in report["cells"] and report["runs_declared"]["independent-k4"] == 8 * 16
    assert "independent-k4 | under way: 1 of 128 declared runs in" in (results / "credit_methods.md").read_text()
    item6 = json.loads((results / "credit_methods_item6.json").read_text())
    assert item6["cells"] == {} and item6["cells_pending"] == {c: 0 for c in study.ITEM6["cells"]}
    assert set(json.loads((results / "manifest.json").read_text())["files"]) == {
        "credit_methods.json", "credit_methods.md", "credit_methods.png", "credit_methods_item6.json",
        "credit_methods_item6.md", "credit_methods_findings.png",
    }  # fmt: skip
    for name in ("credit_methods", "credit_methods_findings"):
        assert (results / f"{name}.png").read_bytes()[:4] == b"\x89PNG"
    assert not (results / "credit_methods_item6.png").exists()  # no complete cell: nothing drawn


def test_the_findings_plot_draws_both_reports_complete_cells(tmp_path):
    cell = "independent-k8"
    declared = [run(cell, a, s, 0.1 + 0.01 * (a == "gear"), 0.1) for a in study.arms_of(cell) for s in (100, 101, 102)]
    item6 = [run(cell, a, s, 0.1 + (s % 2) / 100, 0.1) for a in study.ITEM6["arms"] for s in (200, 201, 202)]
    reports = ({"seeds": [100, 115], "cells": study.summarize({cell: declared}, {100, 101, 102})},
               {"seeds": [200, 215], "cells": study.summarize_item6({cell: item6})})  # fmt: skip
    drawn = study.findings_plot(*reports, tmp_path / "page.png")
    assert drawn == [cell, f"{cell}, seeds 200-215"] and (tmp_path / "page.png").stat().st_size > 1000
    assert study.findings_plot({"seeds": [100], "cells": {}}, {"seeds": [200], "cells": {}}, tmp_path / "page.png") == []
    assert not (tmp_path / "page.png").exists()  # no complete cell: an old figure is not left behind
    # a cell without a ceiling arm (calculator) is drawn too, its title saying there is no ceiling
    calc = [run("calculator", a, s, 0.3 + s / 1000, 0.3) for a in study.arms_of("calculator") for s in (100, 101)]
    both = {"seeds": [100, 115], "cells": study.summarize({cell: declared, "calculator": calc}, {100, 101, 102})}
    assert study.findings_plot(both, reports[1], tmp_path / "page.png")[:2] == [cell, "calculator"]


def test_exploration_arms_stay_out_of_the_declared_study(tmp_path):
    # issue 51 item 6's candidates run on exploration seeds only: never in a cell's declared arms or the Holm family
    assert "grpo-agree-0.5" not in study.arms_of("independent-k8") and study.family_size() == 36
    job = study.job_for("independent-k8", "grpo-agree-0.5", 3, tmp_path)
    args = job["overrides"]
    assert job["mode"] == "none" and args[args.index("--distillation_signal") + 1] == "agreement"
    cell = "independent-k8"
    runs = [run(cell, "none", s, 0.1, 0.1) for s in (1, 2)] + [run(cell, "grpo-agree-0.5", s, 0.2, 0.1) for s in (1, 2)]
    assert "grpo-agree-0.5" not in study.summarize({cell: runs}, {1, 2})[cell]["arms"]
    explored = study.summarize({cell: runs}, {1, 2}, explore=True)[cell]["arms"]["grpo-agree-0.5"]
    assert explored["heldout"]["minus_none"]["mean"] == pytest.approx(0.1)


def test_exploration_runs_with_the_horizon_studys_inputs_are_read_from_it(tmp_path, monkeypatch):
    """`none` and `oracle-process` on exploration seeds 0-7 are the horizon study's committed runs (same inputs, and
    the runs are deterministic); a confirmatory seed, or an arm it never ran, is trained."""
    import json

    monkeypatch.setattr(study, "RUNS_DIR", tmp_path / "runs")
    horizon = json.loads(study.HORIZON_RUNS.read_text())["runs"]["independent-k8"]  # seeds 0-7
    for arm, label in (("none", "none"), ("oracle-process", "oracle-process"), ("gear-distill-0.5", "gear-distill")):
        kept = study.cached(study.job_for("independent-k8", arm, 5, tmp_path))
        source = next(r for r in horizon if r["label"] == label and r["seed"] == 5)
        assert kept["label"] == arm and kept["reward"] == source["reward"] and kept["eval"] == source["eval"]
        assert "horizon.json (independent-k8, " + label in kept["imported_from"]
        assert study.cached(study.job_for("independent-k8", arm, 5, tmp_path)) == kept  # now kept here
    assert study.cached(study.job_for("independent-k8", "none", 100, tmp_path)) is None  # confirmatory: never imported
    later = study.cached(study.job_for("independent-k8", "none", 40, tmp_path))  # seeds 32-47: a replication's
    assert "replication_distill_0.25_seeds_32_to_47/horizon.json" in later["imported_from"]
    assert study.cached(study.job_for("independent-k4", "none", 9, tmp_path)) is None  # K = 4 ran seeds 0-7 only
    assert study.cached(study.job_for("independent-k8", "grpo-distill-0.25", 5, tmp_path)) is None


def test_collected_runs_come_in_the_declarations_cell_order(tmp_path, monkeypatch):
    """The reports list cells as the declaration orders them (`CELLS`), not as their folders sort."""
    import json

    monkeypatch.setattr(study, "RUNS_DIR", tmp_path)
    for cell in ("independent-k4", "calculator", "independent-k8"):  # alphabetical: calculator, k4, k8
        (tmp_path / cell).mkdir()
        (tmp_path / cell / "none__seed100.json").write_text(json.dumps(run(cell, "none", 100, 0.1, 0.1)))
    assert list(study.collect({100})) == ["independent-k8", "independent-k4", "calculator"]
    assert list(study.collect({101})) == []


def test_item6_confirmation_by_hand(tmp_path):
    """Amendment 2: family C (agree - none, agree - grpo-distill-0.5 per cell, Holm over 6) and 'reaches 80%'."""
    assert study.ITEM6_SEEDS == list(range(200, 216)) and not set(study.ITEM6_SEEDS) & set(study.CONFIRMATORY)
    cell = "independent-k8"
    runs = []
    for seed in study.ITEM6_SEEDS:
        wobble = (seed % 4) / 400  # differences vary a little across seeds
        runs += [run(cell, "none", seed, 0.10, 0.1), run(cell, "oracle-process", seed, 0.20 + wobble, 0.2),
                 run(cell, "grpo-agree-0.5", seed, 0.19 + wobble, 0.2),
                 run(cell, "grpo-distill-0.5", seed, 0.15, 0.15)]  # fmt: skip
    arms, seeds = study.ITEM6["arms"], study.ITEM6_SEEDS
    assert study.complete(runs, arms, seeds) and not study.complete(runs[:-1], arms, seeds)
    out = study.summarize_item6({cell: runs})[cell]
    agree = out["arms"]["grpo-agree-0.5"]["heldout"]
    assert agree["minus_none"]["mean"] == pytest.approx(0.09375) and agree["minus_none"]["n_seeds"] == 16
    assert agree["share_of_process_ceiling"]["mean"] == pytest.approx(0.09375 / 0.10375)
    attribution = out["attribution"]["distillation_signal"]["heldout"]
    assert attribution["mean"] == pytest.approx(0.04375) and attribution["p_holm"] <= 6 * attribution["p"] + 1e-12
    assert out["reaches_80"] is True
    # the control is not in family C against none: it has no Holm-adjusted p
    assert "p_holm" not in out["arms"]["grpo-distill-0.5"]["heldout"]["minus_none"]
    with pytest.raises(SystemExit):  # item 6's seeds run its own arms and cells, on their own
        study.main(["--cell", "calculator", "--seeds", "200"])
    with pytest.raises(SystemExit):
        study.main(["--cell", "independent-k8", "--arms", "gear", "--seeds", "200"])
    with pytest.raises(SystemExit):
        study.main(["--cell", "independent-k8", "--seeds", "100", "200"])


_GEAR_DISTILL = ("gear-distill-0.25", "gear-distill-0.5")


def test_the_results_page_blocks_say_what_complete_cells_show(monkeypatch):
    """docs/results_blocks.py's credit-methods blocks on hand-made reports: a complete cell's rows and findings
    (attribution, item 6's verdict against the ceiling and the control), a pending cell's run count only."""
    from tests.utils import load_file

    blocks = load_file(Path(__file__).resolve().parents[1] / "docs" / "results_blocks.py", "cm_blocks_test")
    cell = "independent-k8"
    declared_runs = []
    for seed in study.CONFIRMATORY:
        for arm in study.arms_of(cell):
            gain = {"gear-distill-0.5": 0.05, "grpo-distill-0.5": 0.01, "oracle-process": 0.06,
                    "rlsd-reference": -0.01}.get(arm, 0.0)  # fmt: skip
            declared_runs.append(run(cell, arm, seed, 0.1 + gain + (seed % 3) / 1000 * (arm != "none"), 0.1))
    item6_runs = []
    for seed in study.ITEM6_SEEDS:
        wobble = (seed % 4) / 400
        item6_runs += [run(cell, "none", seed, 0.10, 0.1), run(cell, "oracle-process", seed, 0.20 + wobble, 0.2),
                       run(cell, "grpo-agree-0.5", seed, 0.19 + wobble, 0.2), run(cell, "grpo-distill-0.5", seed, 0.15, 0.15)]  # fmt: skip
    reports = {
        "credit_methods": {"seeds": study.CONFIRMATORY, "runs_declared": {cell: 160, "calculator": 144},
                           "cells_pending": {"calculator": 7},
                           "cells": study.summarize({cell: declared_runs}, set(study.CONFIRMATORY), family_size=36)},
        "credit_methods.item6": {"seeds": study.ITEM6_SEEDS, "runs_declared": {cell: 64, "chained-k4": 64},
                                 "cells_pending": {"chained-k4": 0}, "cells": study.summarize_item6({cell: item6_runs})},
    }  # fmt: skip
    explored = [r for r in item6_runs if r["label"] in ("none", "oracle-process", "grpo-agree-0.5") and r["seed"] < 208]
    for r in explored:  # the exploration seeds' copy of the setting, a larger gain
        heldout = r["eval"]["sampled_accuracy"] + 0.02 * (r["label"] == "grpo-agree-0.5")
        declared_runs.append(dict(r, seed=r["seed"] - 200, eval={"sampled_accuracy": heldout}))
    reports["credit_methods.exploration"] = {"seeds": list(range(48)), "cells": study.summarize(
        {cell: [r for r in declared_runs if r["seed"] < 8]}, set(range(8)), explore=True)}  # fmt: skip
    monkeypatch.setattr(blocks, "load", reports.__getitem__)
    table = blocks.credit_methods_table()
    assert "| `independent-k8` | `gear-distill-0.5` - `grpo-distill-0.5` | 100-115 | +0.040 [" in table
    assert "| `independent-k8` | `grpo-agree-0.5` | 200-215 | +0.094 [" in table
    assert "| `calculator` | under way: 7 of 144 declared runs in, none read | 100-115 |" in table
    rlsd = next(line for line in table.splitlines() if "| `rlsd-reference` |" in line)
    assert rlsd.endswith("| below GRPO |")  # no share printed for an arm whose mean is below GRPO
    findings = blocks.credit_methods_findings()
    assert "`grpo-agree-0.5` reaches 80% of the process ceiling" in findings
    assert "0.90 [" in findings  # its share of the ceiling, 0.09375 / 0.10375
    assert "w = 0.5: +0.040 [" in findings and "holds, above" in findings
    assert "w = 0.25: +0.000 [" in findings and "no difference resolved" in findings
    assert "`calculator` (7 of 144)" in findings and "`chained-k4`, item 6 (0 of 64)" in findings
    assert "On the 8 exploration seeds it was found on it gained +0.114 [" in findings and "measured again" in findings
    assert blocks.config_agreement().startswith("at `independent-k8` (seeds 200-215) GRPO with it at 0.5 gained +0.094")
    assert blocks.config_agreement().endswith("; still running: `chained-k4`. It stays an option")
    assert blocks.credit_methods_item6_lead() == "`grpo-agree-0.5` reaches 80% of the ceiling in 1 of 1 cells read (2 declared)"
    assert "GEAR's weights add to the distillation on this cell." in findings
    attribution = blocks.config_attribution()
    assert attribution.startswith("At `independent-k8` (seeds 100-115) GEAR + distillation minus GRPO + distillation")
    assert "GEAR's weights add to the distillation on this cell. Still running: `calculator`." in attribution
    assert "the other arms over GRPO (held-out):** GEAR at the paper's values +0.001 [" in findings
    assert "RLSD's reference schedule" in findings and "TRL's `SDPOTrainer` as it ships" in findings
    readme = blocks.readme_credit_methods()
    assert readme.startswith("1 of 2 cells read: GEAR's weights add to the same distillation in 1")
    assert "; best: `gear-distill-0.5` +0.051 [" in readme and ", 0.84 of the ceiling" in readme  # 0.051 / 0.061
    assert len(readme.split()) <= 30

    # the same cell where GEAR's weights add nothing: the gain is the distillation's, said so
    def lifted(r):  # grpo-distill-0.5 within a seed-dependent hair of gear-distill-0.5
        lift = (0.04 + (r["seed"] % 2 - 0.5) / 500) * (r["label"] == "grpo-distill-0.5")
        return dict(r, eval={"sampled_accuracy": r["eval"]["sampled_accuracy"] + lift})

    flat = [lifted(r) for r in declared_runs if r["seed"] in study.CONFIRMATORY]
    reports["credit_methods"]["cells"] = study.summarize({cell: flat}, set(study.CONFIRMATORY), family_size=36)
    findings = blocks.credit_methods_findings()
    assert "w = 0.5: +0.000 [-0.001, +0.001] (Holm p 1.000, no difference resolved)" in findings
    assert "On this cell the gain is the distillation's." in findings
    assert blocks.readme_credit_methods().startswith(
        "1 of 2 cells read: GEAR's weights add nothing resolved to the same distillation; best: `"
    )
    # a second cell where nothing beats GRPO: the row counts the cells instead of naming one cell's best arm
    flat_k4 = [dict(r, cell="independent-k4", eval={"sampled_accuracy": 0.1 + (r["seed"] % 3) / 1000})
               for r in flat if r["label"] in study.arms_of("independent-k4")]  # fmt: skip
    reports["credit_methods"]["runs_declared"]["independent-k4"] = 128
    reports["credit_methods"]["cells"] = study.summarize(
        {cell: flat, "independent-k4": flat_k4}, set(study.CONFIRMATORY), family_size=36)
    readme = blocks.readme_credit_methods()
    assert readme == ("2 of 3 cells read: GEAR's weights add nothing resolved to the same distillation; "
                      "GRPO + distillation beats GRPO in 1")  # fmt: skip
    assert len(readme.split()) <= 30
    findings = blocks.credit_methods_findings()
    assert "- **What the declaration decides so far:** 2 of 3 cells done (at 0.25 GEAR's weights add in 0" in findings
    # at K = 4 the ceiling ties GRPO: no share is printed, and the findings say the cell leaves little to gain
    k4_line = next(line for line in findings.splitlines() if line.startswith("- **`independent-k4`, whose gain"))
    assert "The process ceiling itself is not resolved above GRPO here (+0.000 [" in k4_line
    k8_line = next(line for line in findings.splitlines() if line.startswith("- **`independent-k8`, whose gain"))
    assert "not resolved above GRPO" not in k8_line
    table = blocks.credit_methods_table().splitlines()
    assert next(r for r in table if "| `independent-k4` | `gear` |" in r).endswith("| no ceiling above GRPO |")
    assert next(r for r in table if "| `independent-k4` | `oracle-process` |" in r).endswith("|  |")
    assert next(r for r in table if "| `independent-k8` | `grpo-distill-0.5` |" in r).endswith("] |")
    assert ". At `independent-k4` (seeds 100-115)" in blocks.config_attribution()  # each cell its own sentence
    assert "Self-distillation costs" not in findings
    # where a blend falls below GRPO (Holm p < 0.05), the cell's answer says so, GEAR + distillation's figure too
    costly = [dict(r, eval={"sampled_accuracy": r["eval"]["sampled_accuracy"]
                            - (0.03 + (r["seed"] % 2) / 500) * (r["label"] in ("grpo-distill-0.5", *_GEAR_DISTILL))})
              for r in flat_k4]  # fmt: skip
    reports["credit_methods"]["cells"] = study.summarize(
        {cell: flat, "independent-k4": costly}, set(study.CONFIRMATORY), family_size=36)
    findings = blocks.credit_methods_findings()
    k4_line = next(line for line in findings.splitlines() if line.startswith("- **`independent-k4`, whose gain"))
    assert ("Neither part resolved a gain on this cell. Self-distillation costs held-out accuracy here: "
            "`grpo-distill-0.5`; `gear-distill-0.25` -0.031 [") in k4_line  # fmt: skip
    assert "; `gear-distill-0.5` -0.031 [" in k4_line and k4_line.count("`grpo-distill-0.5` -0.031 [") == 1
    assert " below GRPO. The process ceiling itself" in k4_line
    k8_line = next(line for line in findings.splitlines() if line.startswith("- **`independent-k8`, whose gain"))
    assert "Self-distillation costs" not in k8_line
    assert blocks.readme_credit_methods().endswith("; GRPO + distillation beats GRPO in 1, loses in 1")


def test_a_complete_cell_without_a_ceiling_arm_renders(monkeypatch):
    """`calculator` has no `oracle-process` (no per-decision labels): once whole, its rows say there is no ceiling
    instead of failing on the missing arm, its findings say nothing of a ceiling, and with no cell pending the
    findings give the declaration's decision."""
    from tests.utils import load_file

    blocks = load_file(Path(__file__).resolve().parents[1] / "docs" / "results_blocks.py", "cm_blocks_calculator")
    cell = "calculator"
    assert "oracle-process" not in study.arms_of(cell)
    runs_ = [run(cell, arm, seed, 0.3 + (seed % 3) / 1000 * (arm != "none"), 0.3)
             for seed in study.CONFIRMATORY for arm in study.arms_of(cell)]  # fmt: skip
    reports = {
        "credit_methods": {"seeds": study.CONFIRMATORY, "runs_declared": {cell: 144}, "cells_pending": {},
                           "cells": study.summarize({cell: runs_}, set(study.CONFIRMATORY), family_size=36)},
        "credit_methods.item6": {"seeds": study.ITEM6_SEEDS, "runs_declared": {}, "cells_pending": {}, "cells": {}},
    }  # fmt: skip
    monkeypatch.setattr(blocks, "load", reports.__getitem__)
    rows = [r for r in blocks.credit_methods_table().splitlines() if r.startswith("| `calculator` |")]
    assert len(rows) == len(study.arms_of(cell)) - 1 + 2  # every arm but `none`, and both attributions
    arm_rows = [r for r in rows if "` - `" not in r]
    assert all(r.endswith("| no ceiling (no per-decision labels) |") for r in arm_rows), arm_rows
    findings = blocks.credit_methods_findings()
    assert "ceiling" not in next(line for line in findings.splitlines() if "`calculator`, whose gain" in line)
    assert "GiGPO +0.001 [" in findings and "GEAR + GiGPO +0.001 [" in findings
    assert "- **What the declaration decided:** 1 of 1 cells done" in findings and "decides" not in findings
    assert "Still running" not in findings and "Still running" not in blocks.config_attribution()


def test_item6_blocks_say_when_a_cell_has_no_ceiling_above_grpo(monkeypatch):
    """Amendment 2's outcome 2: where `oracle-process` does not beat GRPO there is no share to report, and the
    configuration page and the findings say so instead of printing a ratio of noise."""
    from tests.utils import load_file

    blocks = load_file(Path(__file__).resolve().parents[1] / "docs" / "results_blocks.py", "cm_blocks_noceiling")
    cell = "independent-k4"
    item6_runs = []
    for seed in study.ITEM6_SEEDS:
        wobble = (seed % 4 - 1.5) / 400  # the ceiling straddles GRPO
        item6_runs += [run(cell, "none", seed, 0.50, 0.5), run(cell, "oracle-process", seed, 0.50 + wobble, 0.5),
                       run(cell, "grpo-agree-0.5", seed, 0.51 + wobble, 0.5), run(cell, "grpo-distill-0.5", seed, 0.50, 0.5)]  # fmt: skip
    item6 = {"seeds": study.ITEM6_SEEDS, "runs_declared": {cell: 64}, "cells_pending": {},
             "cells": study.summarize_item6({cell: item6_runs})}  # fmt: skip
    assert item6["cells"][cell]["arms"]["grpo-agree-0.5"]["heldout"]["share_of_process_ceiling"] is None
    reports = {"credit_methods": {"seeds": study.CONFIRMATORY, "runs_declared": {}, "cells_pending": {}, "cells": {}},
               "credit_methods.item6": item6, "credit_methods.exploration": {"cells": {}}}  # fmt: skip
    monkeypatch.setattr(blocks, "load", reports.__getitem__)
    assert ", with no process ceiling above GRPO there to share, and " in blocks.config_agreement()
    assert blocks.config_agreement().endswith(
        ". It reaches 80% of the ceiling in 0 of 1 cells, so item 6 is not met and it stays an option, not a recommendation")
    findings = blocks.credit_methods_findings()
    assert "`grpo-agree-0.5` does not reach 80% of the process ceiling" in findings
    assert "no share (the ceiling's interval does not lie above 0)" in findings
    assert "the share's interval is wide" not in findings

    # a ceiling just above GRPO: the share exists, but a ratio over a small gain is wide, and the page says why
    for r in item6_runs:
        if r["label"] == "oracle-process":
            r["eval"] = {"sampled_accuracy": 0.504 + (r["seed"] % 4 - 1.5) / 1000}
        if r["label"] == "grpo-agree-0.5":
            r["eval"] = {"sampled_accuracy": 0.505 + (r["seed"] % 3 - 1) / 200}
    item6["cells"] = study.summarize_item6({cell: item6_runs})
    share = item6["cells"][cell]["arms"]["grpo-agree-0.5"]["heldout"]["share_of_process_ceiling"]
    assert share and share["ci_high"] - share["ci_low"] > 1
    assert "(the ceiling is small here, so the share's interval is wide)" in blocks.credit_methods_findings()
    assert "- **Item 6 (amendment 2), decided:** 1 of 1 cells done" in blocks.credit_methods_findings()
    assert blocks.credit_methods_item6_lead() == (
        "`grpo-agree-0.5` reaches 80% of the ceiling in 1 of 1 cells: not met, so nothing is recommended from it")
    # reaching 80% in two cells: the configuration page names it the recommendation, the defaults unchanged
    reached = dict(item6["cells"][cell], reaches_80=True)
    item6["cells"] = {cell: reached, "independent-k8": reached}
    assert blocks.config_agreement().endswith(". Item 6 is met, so it is the setting the docs recommend for "
                                              "reference-teacher runs (the defaults stay the paper's)")  # fmt: skip
    item6["runs_declared"]["independent-k8"] = 64
    assert blocks.credit_methods_item6_lead() == "`grpo-agree-0.5` reaches 80% of the ceiling in 2 of 2 cells: met"


def test_the_declared_outcomes_are_decided_only_when_no_pending_cell_could_change_them():
    """The declaration's outcomes 1-3 and amendment 2's, each needing two cells, on hand-made complete cells: an
    outcome is named once the remaining cells cannot change it, and "not decided" before."""
    from tests.utils import load_file

    blocks = load_file(Path(__file__).resolve().parents[1] / "docs" / "results_blocks.py", "cm_blocks_outcomes")

    def rec(mean, p):
        return {"mean": mean, "ci_low": mean - 0.01, "ci_high": mean + 0.01, "p_holm": p}

    def cell(adds_p, distill_p):  # the same at both weights
        return {"attribution": {f"distillation_weight={w}": {"heldout": rec(0.02, adds_p)} for w in ("0.25", "0.5")},
                "arms": {f"grpo-distill-{w}": {"heldout": {"minus_none": rec(0.04, distill_p)}} for w in ("0.25", "0.5")}}  # fmt: skip

    def declared(cells, pending):
        return {"cells": dict(enumerate(cells)), "cells_pending": dict.fromkeys(range(len(cells), len(cells) + pending), 0)}  # fmt: skip

    null, real = 0.9, 0.01
    assert blocks._declared_outcome(declared([cell(null, real)], 3)).endswith("not decided yet; every outcome needs two cells")  # fmt: skip
    assert "outcome 1, GEAR's weights add to the distillation at 0.25 and 0.5" in blocks._declared_outcome(
        declared([cell(real, real), cell(real, null)], 2))
    # one cell left, GEAR's weights held in one: a second could still come, so nothing is decided
    assert blocks._declared_outcome(declared([cell(null, real), cell(null, real), cell(real, null)], 1)).endswith(
        "not decided yet; every outcome needs two cells")
    # held in none with one left: attribution cannot reach two; distillation held in two
    out = blocks._declared_outcome(declared([cell(null, real), cell(null, real), cell(null, null)], 1))
    assert out.endswith("outcome 2, the gain is the distillation's; the recommendation is GRPO + distillation at 0.25 and 0.5")  # fmt: skip
    assert "at 0.25 GEAR's weights add in 0 and GRPO + distillation holds over GRPO in 2" in out
    assert "whether GRPO + distillation does is not decided yet" in blocks._declared_outcome(
        declared([cell(null, real), cell(null, null), cell(null, null)], 1))
    assert blocks._declared_outcome(declared([cell(null, real)] + [cell(null, null)] * 3, 0)).endswith(
        "outcome 3, no setting is recommended; the recipes keep the paper's defaults")
    # a complete cell whose unadjusted p is below 0.05 could still come to hold as the pending cells enter Holm
    close = cell(null, null)
    close["attribution"]["distillation_weight=0.25"]["heldout"]["p"] = 0.01
    assert blocks._declared_outcome(declared([close, cell(null, real), cell(null, null)], 1)).endswith(
        "not decided yet; every outcome needs two cells")
    close["attribution"]["distillation_weight=0.25"]["heldout"]["mean"] = -0.02  # below 0: it cannot "add"
    assert "GEAR's weights cannot hold on two cells" in blocks._declared_outcome(
        declared([close, cell(null, real), cell(null, null)], 1))
    close = cell(null, null)
    close["arms"]["grpo-distill-0.5"]["heldout"]["minus_none"]["p"] = 0.01
    assert "whether GRPO + distillation does is not decided yet" in blocks._declared_outcome(
        declared([close, cell(null, real), cell(null, null)], 1))
    # with every cell in, Holm is final: the unadjusted p no longer keeps an outcome open
    assert blocks._declared_outcome(declared([close, cell(null, real), cell(null, null), cell(null, null)], 0)).endswith(
        "outcome 3, no setting is recommended; the recipes keep the paper's defaults")
    # a held difference below 0 is not "adds"
    below = cell(real, real)
    below["attribution"]["distillation_weight=0.5"]["heldout"]["mean"] = -0.02
    below["attribution"]["distillation_weight=0.25"]["heldout"]["mean"] = -0.02
    assert "outcome 2" in blocks._declared_outcome(declared([below, below], 0))

    def item6_cell(reaches, share, gain_p, versus_p=0.9):
        arm = {"heldout": {"minus_none": rec(0.05, gain_p), "share_of_process_ceiling": rec(0.9, 0) if share else None}}
        versus = {"heldout": rec(0.02, versus_p)}
        return {"reaches_80": reaches, "arms": {"grpo-agree-0.5": arm}, "attribution": {"distillation_signal": versus}}

    met = blocks._item6_outcome(declared([item6_cell(True, True, real), item6_cell(True, True, real)], 1))
    assert met.startswith("2 of 3 cells done: reaches 80% in 2, a ceiling above GRPO in 2, holds over GRPO in 2")
    assert met.endswith("item 6 is met; `grpo-agree-0.5` becomes the recommendation for reference-teacher runs")
    assert blocks._item6_outcome(declared([item6_cell(False, True, null)], 2)).endswith("not decided yet")
    no_ceiling = declared([item6_cell(True, True, real), item6_cell(False, False, real), item6_cell(False, False, null)], 0)  # fmt: skip
    assert "item 6 is not met (no second cell can reach 80%), but the gain over GRPO holds in two cells" in (
        blocks._item6_outcome(no_ceiling))
    assert blocks._item6_outcome(declared([item6_cell(False, False, real), item6_cell(False, False, null)], 1)).endswith(
        "item 6 is not met (no second cell can reach 80%); the recommendation is not decided yet")
    assert blocks._item6_outcome(declared([item6_cell(False, False, null)] * 3, 0)).endswith(
        "nothing is recommended. At `0`, `1`, `2` no difference between the two terms was resolved")
    # every cell read: outcome 3 says, per cell, whether the agreement term beats the log-ratio at the same weight
    decided = blocks._item6_outcome(declared([item6_cell(False, True, real, real), item6_cell(False, False, null),
                                              item6_cell(True, True, real, real)], 0))  # fmt: skip
    assert decided.endswith("no recommendation follows from item 6. Against SDPO's log-ratio at the same weight the "
                            "agreement term holds above at `0`, `2`: there the gain over self-distillation is the "
                            "agreement term's; at `1` no difference between the two terms was resolved")  # fmt: skip
    # while a cell is pending, outcome 3 is not said yet
    assert "log-ratio" not in blocks._item6_outcome(declared([item6_cell(False, True, real, real)], 2))
    # short of a ceiling that exists (as at independent-k8): outcome 2 is for cells without one, so it does not apply
    short = blocks._item6_outcome(declared([item6_cell(False, True, real), item6_cell(False, False, real)], 1))
    assert short.endswith("item 6 is not met, and since it falls short of a ceiling above GRPO at `0`, amendment 2's "
                          "outcome 2 (no ceiling elsewhere) does not apply; no recommendation follows from item 6")  # fmt: skip


def _cell(adds: dict, distill: dict) -> dict:
    """A report cell with, per weight, the attribution's and GRPO + distillation's held-out (mean, p_holm)."""
    return {
        "attribution": {f"distillation_weight={w}": {"heldout": {"mean": m, "p_holm": p}} for w, (m, p) in adds.items()},
        "arms": {f"grpo-distill-{w}": {"heldout": {"minus_none": {"mean": m, "p_holm": p}}} for w, (m, p) in distill.items()},
    }  # fmt: skip


def test_the_recommended_setting_follows_the_declared_outcomes_and_amendment_5():
    """Outcome 1 before 2; among qualifying weights, more cells held, then the higher average over every cell
    (losing cells included); outcome 3 recommends nothing."""
    null, gain, loss = (0.0, 1.0), (0.05, 0.01), (-0.04, 0.01)
    # outcome 2 at both weights on two cells each: tie on cells, 0.5 averages (0.05 + 0.05 - 0.04 + 0) / 4 = 0.015,
    # 0.25 averages (0.05 + 0.05 + 0 + 0) / 4 = 0.025: 0.25 is recommended
    cells = {c: _cell({"0.25": null, "0.5": null}, d) for c, d in {
        "a": {"0.25": gain, "0.5": gain}, "b": {"0.25": gain, "0.5": gain},
        "c": {"0.25": null, "0.5": loss}, "d": {"0.25": null, "0.5": null}}.items()}  # fmt: skip
    out = study.recommendation(cells)
    assert (out["outcome"], out["arm"]) == (2, "grpo-distill-0.25")
    assert out["held"] == {"0.25": 2, "0.5": 2} and out["mean"]["0.5"] == pytest.approx(0.015)
    # a third cell held at 0.5 wins over the higher average at 0.25
    cells["d"] = _cell({"0.25": null, "0.5": null}, {"0.25": null, "0.5": gain})
    assert study.recommendation(cells)["arm"] == "grpo-distill-0.5"
    # GEAR's weights adding on two cells is outcome 1, whatever GRPO + distillation does
    cells["a"]["attribution"]["distillation_weight=0.5"]["heldout"] = {"mean": 0.02, "p_holm": 0.03}
    cells["b"]["attribution"]["distillation_weight=0.5"]["heldout"] = {"mean": 0.02, "p_holm": 0.04}
    assert study.recommendation(cells)["arm"] == "gear-distill-0.5" and study.recommendation(cells)["outcome"] == 1
    # holding below 0 is not holding: nothing qualifies, outcome 3
    nothing = {c: _cell({"0.25": loss, "0.5": null}, {"0.25": loss, "0.5": gain if c == "a" else null}) for c in "abcd"}
    verdict = study.recommendation(nothing)
    assert (verdict["outcome"], verdict["arm"]) == (3, None)


def test_family_d_compares_the_field_arms_with_the_recommended_one_by_hand():
    """Two seeds. held-out: grpo-distill-0.25 0.50, 0.60; rlsd-reference 0.40, 0.60 (diffs -0.10, 0.00) in both
    cells; sdpo-trl only in the first, 0.55, 0.65 (diffs +0.05, +0.05: no spread, p 0, and so Holm p 0 and beats).
    Holm within the three comparisons only: the two rlsd p's (equal) are multiplied by 2 and 2 at most."""
    runs = {}
    for cell in ("independent-k8", "chained-k4"):
        runs[cell] = [run(cell, "grpo-distill-0.25", 1, 0.50, 0.5), run(cell, "grpo-distill-0.25", 2, 0.60, 0.5),
                      run(cell, "rlsd-reference", 1, 0.40, 0.4), run(cell, "rlsd-reference", 2, 0.60, 0.5)]  # fmt: skip
    runs["independent-k8"] += [run("independent-k8", "sdpo-trl", 1, 0.55, 0.5),
                               run("independent-k8", "sdpo-trl", 2, 0.65, 0.5)]  # fmt: skip
    out = study.followup(runs, "grpo-distill-0.25", {1, 2})
    assert set(out) == {"independent-k8", "chained-k4"} and set(out["chained-k4"]) == {"rlsd-reference"}
    sdpo, rlsd = out["independent-k8"]["sdpo-trl"], out["independent-k8"]["rlsd-reference"]
    assert sdpo["minus"] == "grpo-distill-0.25"
    assert sdpo["heldout"]["mean"] == pytest.approx(0.05) and sdpo["heldout"]["p_holm"] == 0.0
    assert sdpo["heldout"]["beats"] is True
    assert rlsd["heldout"]["mean"] == pytest.approx(-0.05) and not rlsd["heldout"]["beats"]
    p = rlsd["heldout"]["p"]  # ranks 2 and 3 of 3: the step-down gives max(2p, p) = 2p for both
    assert rlsd["heldout"]["p_holm"] == pytest.approx(min(1.0, 2 * p))
    # the reward differences: -0.1 on seed 1, 0 on seed 2 for rlsd; the family is Holm'd on its own
    assert rlsd["reward"]["mean"] == pytest.approx(-0.05) and "p_holm" in rlsd["reward"]
    table = study.markdown({"title": "t", "cells": {}, "followup": out})
    assert "| independent-k8 | sdpo-trl - grpo-distill-0.25 (family D) | +0.050" in table


def test_the_page_names_the_recommended_arm_and_outcome_4(monkeypatch):
    """With every cell in: the declared outcome names amendment 5's pick when both weights qualify, and the findings
    say where a field implementation beats the recommended arm (outcome 4) or that none does."""
    from tests.utils import load_file

    blocks = load_file(Path(__file__).resolve().parents[1] / "docs" / "results_blocks.py", "cm_blocks_outcome4")
    null, gain = (0.0, 1.0), (0.05, 0.01)
    cells = {c: _cell({"0.25": null, "0.5": null}, {"0.25": gain, "0.5": gain if c == "a" else (0.06, 0.01)})
             for c in "ab"}  # fmt: skip
    for data in cells.values():  # _declared_outcome reads p (unadjusted) too, and the blocks format intervals
        for rec in [*(e["heldout"] for e in data["attribution"].values()),
                    *(e["heldout"]["minus_none"] for e in data["arms"].values())]:  # fmt: skip
            rec.update(ci_low=rec["mean"] - 0.01, ci_high=rec["mean"] + 0.01, p=rec["p_holm"])
    picked = study.recommendation(cells)
    assert picked["arm"] == "grpo-distill-0.5"  # 2 cells each; 0.5 averages 0.055 against 0.05
    declared = {"cells": cells, "cells_pending": {}, "recommendation": picked}
    assert blocks._declared_outcome(declared).endswith(
        "recommendation is GRPO + distillation at 0.25 and 0.5 (both weights qualify; amendment 5 picks "
        "`grpo-distill-0.5`: more cells held, then the higher average)")

    def record(mean, p_holm):
        return {"mean": mean, "ci_low": mean - 0.02, "ci_high": mean + 0.02, "p_holm": p_holm,
                "beats": p_holm < 0.05 and mean > 0}  # fmt: skip

    declared["followup"] = {"a": {"rlsd-reference": {"minus": "grpo-distill-0.5", "heldout": record(-0.03, 0.2)}},
                            "b": {"rlsd-reference": {"minus": "grpo-distill-0.5", "heldout": record(0.04, 0.01)}}}  # fmt: skip
    text = blocks._field_versus_recommended(declared)
    assert "outcome 4, the field's implementation is the better choice where it beats it: RLSD's reference schedule at `b` +0.040" in text  # fmt: skip
    assert "No difference above 0 resolved for RLSD's reference schedule at `a` -0.030" in text
    declared["followup"]["b"]["rlsd-reference"]["heldout"] = record(0.04, 0.2)
    assert blocks._field_versus_recommended(declared).endswith("so outcome 4 does not apply")


def test_the_recommendation_block_follows_the_declared_record(monkeypatch):
    """docs' `config.recommendation`: not decided while a cell runs; outcome 2 names the weight, where it gains, loses
    and ties, and the recipes that ship it; outcome 3 says nothing is recommended and where each weight held."""
    from tests.utils import load_file

    blocks = load_file(Path(__file__).resolve().parents[1] / "docs" / "results_blocks.py", "cm_blocks_recommend")
    null, gain, loss = (0.0, 1.0), (0.05, 0.01), (-0.04, 0.01)
    cells = {c: _cell({"0.25": null, "0.5": null}, {"0.25": d, "0.5": null})
             for c, d in {"a": gain, "b": gain, "c": loss, "d": null}.items()}  # fmt: skip
    for data in cells.values():
        for rec in [*(e["heldout"] for e in data["attribution"].values()),
                    *(e["heldout"]["minus_none"] for e in data["arms"].values())]:  # fmt: skip
            rec.update(ci_low=rec["mean"] - 0.01, ci_high=rec["mean"] + 0.01, n_seeds=16)
    declared = {"cells": cells, "cells_pending": {}, "runs_declared": {c: 144 for c in cells},
                "recommendation": study.recommendation(cells)}  # fmt: skip
    monkeypatch.setattr(blocks, "load", {"credit_methods": declared}.__getitem__)
    text = blocks.config_recommendation()
    assert text.startswith("**Recommended: GRPO + self-distillation, `credit: none` with `distillation_weight: 0.25`**")
    assert "it gains on 2 of 4 cells (`a` +0.050 [+0.040, +0.060]; `b` +0.050 [+0.040, +0.060]; Holm p < 0.05" in text
    assert ", loses on 1 (`c` -0.040 [-0.050, -0.030]), ties on 1 (`d` +0.000 [-0.010, +0.010]);" in text
    assert "; there is no evidence that GEAR's weights add to self-distillation (they add on 0 of 4 cells" in text
    assert blocks.DISTILL_RECIPES in text and "Outcome 4" not in text
    # a field implementation beating the recommended arm in a cell (family D) is named as the better choice there
    declared["followup"] = {"c": {"rlsd-reference": {"minus": "grpo-distill-0.25", "heldout": {
        "mean": 0.03, "ci_low": 0.01, "ci_high": 0.05, "p_holm": 0.01, "beats": True}}}}  # fmt: skip
    assert blocks.config_recommendation().endswith(
        ". Outcome 4: the field's implementation is the better choice where it beats it: RLSD's reference schedule at "
        "`c` +0.030 [+0.010, +0.050] (Holm p 0.010)")
    # nothing holds on two cells: outcome 3
    cells["b"]["arms"]["grpo-distill-0.25"]["heldout"]["minus_none"]["p_holm"] = 0.2
    declared["recommendation"] = study.recommendation(cells)
    text = blocks.config_recommendation()
    assert text.startswith("No setting is recommended (the declaration's outcome 3)")
    assert "(at 0.25 in 1 (`a`); at 0.5 in 0 (none))" in text and "The recipes keep the paper's GEAR" in text
    # a cell still running: not decided, whatever the others say
    declared["cells_pending"] = {"d": 40}
    assert blocks.config_recommendation() == ("Not decided yet (still running: `d`, 40 of 144 runs in). Until every "
                                              "declared cell is in, nothing is recommended over the paper's GEAR, and "
                                              "the recipes keep it")  # fmt: skip


def test_the_demo_says_whose_gain_its_setting_is(monkeypatch):
    """README's and Getting started's line under `make demo`: the demo's `gear-distill-0.25` against GRPO with the same
    distillation at `independent-k8`, and what follows: GEAR's weights add, the gain is the distillation's, or neither."""
    from tests.utils import load_file

    blocks = load_file(Path(__file__).resolve().parents[1] / "docs" / "results_blocks.py", "cm_blocks_demo")
    cell = _cell({"0.25": (-0.006, 1.0)}, {"0.25": (0.054, 0.001)})
    for rec in (cell["attribution"]["distillation_weight=0.25"]["heldout"],
                cell["arms"]["grpo-distill-0.25"]["heldout"]["minus_none"]):  # fmt: skip
        rec.update(ci_low=rec["mean"] - 0.01, ci_high=rec["mean"] + 0.01, n_seeds=16)
    declared = {"cells": {"independent-k8": cell}}
    monkeypatch.setattr(blocks, "load", {"credit_methods": declared}.__getitem__)
    assert blocks.readme_demo_attribution() == (
        "GEAR + distillation minus GRPO with the same distillation (`credit: none`, `distillation_weight: 0.25`) is "
        "-0.006 [-0.016, +0.004] held-out on 16 fresh seeds (Holm p 1.000): no difference resolved, and GRPO with that "
        "distillation gains +0.054 [+0.044, +0.064] over GRPO: the gain is the distillation's, not GEAR's weighting")
    cell["arms"]["grpo-distill-0.25"]["heldout"]["minus_none"]["p_holm"] = 0.3
    assert blocks.readme_demo_attribution().endswith("(Holm p 1.000): no difference resolved")
    cell["attribution"]["distillation_weight=0.25"]["heldout"].update(mean=0.02, p_holm=0.01)
    assert blocks.readme_demo_attribution().endswith("(Holm p 0.010): GEAR's weights add to the distillation")
    declared["cells"] = {}
    assert blocks.readme_demo_attribution() == "the credit-methods study has not yet read this cell"
    # the line speaks of the demo's own arm: the Makefile's default is the one the block reads
    makefile = (Path(__file__).resolve().parents[1] / "Makefile").read_text()
    assert "\nDEMO_ARM ?= gear-distill-0.25\n" in makefile and "--distillation_weight 0.25\n" in makefile


def test_dynamics_by_hand(monkeypatch):
    """`dynamics`: seed means of held-out accuracy and of each series' first `OPENING` and last `WINDOW` steps, a
    step logged as None skipped, a series GRPO lacks None; the page's block quotes those means and skips GRPO."""
    from tests.utils import load_file

    cell = "calculator"
    runs_ = []
    for seed, heldout, start in ((100, 0.1, 0.2), (101, 0.3, 0.4)):
        distilled = run(cell, "grpo-distill-0.5", seed, heldout, 0.1)
        distilled["reward"] = [start] * 5 + [None] + [0.1] * 14
        distilled["distill_share"] = [0.1] * 5 + [0.5] * 15
        runs_ += [distilled, run(cell, "none", seed, 0.5, 0.4)]
    out = study.dynamics(runs_, {100, 101, 102})
    assert set(out) == {"none", "grpo-distill-0.5"}
    mine, grpo = out["grpo-distill-0.5"], out["none"]
    assert mine["n_seeds"] == 2 and mine["heldout"] == pytest.approx(0.2)
    assert mine["reward"] == pytest.approx({"first": 0.3, "last": 0.1})  # the None step is skipped, not a zero
    assert mine["distill_share"] == pytest.approx({"first": 0.1, "last": 0.5})
    assert grpo["distill_share"] == {"first": None, "last": None} and grpo["reward"]["first"] == 0.0
    blocks = load_file(Path(__file__).resolve().parents[1] / "docs" / "results_blocks.py", "cm_blocks_dynamics")
    report = {"dynamics": {"opening": study.OPENING, "window": study.WINDOW, "cells": {cell: out}}}
    monkeypatch.setattr(blocks, "load", {"credit_methods": report}.__getitem__)
    assert blocks.credit_methods_dynamics() == (
        "`grpo-distill-0.5`, means of 2 seeds, the share and reward over the first 5 logged steps, then the last 15: "
        "`calculator`: held-out 0.20 (GRPO 0.50), share 0.10 to 0.50, training reward 0.30 to 0.10 (GRPO's 0.00 to 0.40)"
    )


def test_equivalence_by_hand():
    """Issue 73 item 5. independent-k8, seeds 1-4: none 0.10; grpo-distill-w 0.14 (gain 0.04, margin 0.02 at both
    weights); gear-distill-0.25 - grpo-distill-0.25 = 0.001, -0.001, 0.002, 0.000 (well inside +-0.02: equivalent);
    gear-distill-0.5 - grpo-distill-0.5 = 0.03 on every seed (outside: not equivalent, its one-sided p 1)."""
    cell, rows = "independent-k8", []
    for i, seed in enumerate((1, 2, 3, 4)):
        rows += [run(cell, "none", seed, 0.10, 0.1), run(cell, "grpo-distill-0.25", seed, 0.14, 0.2),
                 run(cell, "grpo-distill-0.5", seed, 0.14, 0.2),
                 run(cell, "gear-distill-0.25", seed, 0.14 + (0.001, -0.001, 0.002, 0.0)[i], 0.2),
                 run(cell, "gear-distill-0.5", seed, 0.17, 0.2)]  # fmt: skip
    out = study.equivalence({cell: rows}, {1, 2, 3, 4})
    assert out["margin"]["heldout"] == {"0.25": pytest.approx(0.02), "0.5": pytest.approx(0.02)}
    assert out["margin"]["reward"] == {"0.25": pytest.approx(0.05), "0.5": pytest.approx(0.05)}
    near = out["cells"][cell]["distillation_weight=0.25"]["heldout"]
    assert near["mean"] == pytest.approx(0.0005) and near["n_seeds"] == 4 and near["equivalent"]
    assert -0.02 < near["ci_low"] < near["ci_high"] < 0.02 and near["p_holm"] >= near["p"]
    far = out["cells"][cell]["distillation_weight=0.5"]["heldout"]
    assert far["p"] == 1.0 and not far["equivalent"]
    # no anchor cell, or a distillation that does not gain there: no margin to take, nothing reported
    assert study.equivalence({"chained-k4": rows}, {1, 2, 3, 4}) == {}
    flat = [dict(r, eval={"sampled_accuracy": 0.1}) if r["label"].startswith("grpo") else r for r in rows]
    assert study.equivalence({cell: flat}, {1, 2, 3, 4}) == {}


def test_the_committed_equivalence_is_what_the_committed_runs_give():
    import json

    committed = json.loads((study.RESULTS / "credit_methods.json").read_text())["equivalence"]
    fresh = json.loads(json.dumps(study.equivalence(study.collect(study.CONFIRMATORY), set(study.CONFIRMATORY))))
    assert committed == fresh
    assert committed["margin"]["chosen"].startswith("after the study was read")


def test_the_equivalence_block_says_the_margin_was_chosen_after_reading_and_names_each_miss(monkeypatch):
    from tests.utils import load_file

    blocks = load_file(Path(__file__).resolve().parents[1] / "docs" / "results_blocks.py", "cm_eq_blocks_test")
    cell, rows = "independent-k8", []
    for i, seed in enumerate((1, 2, 3, 4)):
        rows += [run(cell, "none", seed, 0.10, 0.1), run(cell, "grpo-distill-0.25", seed, 0.14, 0.2),
                 run(cell, "grpo-distill-0.5", seed, 0.14, 0.2),
                 run(cell, "gear-distill-0.25", seed, 0.14 + (0.001, -0.001, 0.002, 0.0)[i], 0.2),
                 run(cell, "gear-distill-0.5", seed, 0.10 + (0.0, 0.002, 0.001, 0.003)[i], 0.2)]  # fmt: skip
    report = {"equivalence": study.equivalence({cell: rows}, {1, 2, 3, 4})}
    monkeypatch.setattr(blocks, "load", lambda key: report)
    text = blocks.credit_methods_equivalence()
    assert "chosen **after** the study was read" in text and "+-0.020 at w = 0.25" in text
    assert "w = 0.25: +0.001, 90% [" in text and "equivalent (TOST Holm p" in text
    # at 0.5 GEAR's weights lose 0.0385 with a tight interval: below 0, not equivalent, named as such
    assert "in 1 of 2 comparisons; not shown at `independent-k8` at w = 0.5 (its 90% interval lies below 0" in text
    report["equivalence"] = {}
    assert blocks.credit_methods_equivalence().startswith("Not computed yet")
