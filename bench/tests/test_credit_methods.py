"""bench/credit_methods.py: the declared arms and cells become the right jobs, and the report's statistics (paired
differences, Holm over the declared family, the share of the process ceiling) on hand-made runs."""

from __future__ import annotations

import math

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


def test_dynamics_by_hand():
    """`dynamics`: seed means of held-out accuracy and of each series' first `OPENING` and last `WINDOW` steps, a
    step logged as None skipped, a series GRPO lacks None."""
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
