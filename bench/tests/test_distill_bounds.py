"""bench/distill_bounds.py: the stage-1 arms run the credit-methods harness's jobs, controls are read from that
study where it ran them, and the reading (collapse block, gain kept, PLAN.md's rule) on hand-made runs."""

from __future__ import annotations

import json
import math

import pytest

from bench import credit_methods as cm
from bench import distill_bounds as db


def run(label, seed, heldout, reward=0.5, share=None, entropy=None, warned=None, greedy=None, cell="calculator"):
    out = {
        "label": label,
        "seed": seed,
        "cell": cell,
        "reward": [reward] * 20,
        "eval": {"sampled_accuracy": heldout, "greedy_accuracy": greedy if greedy is not None else heldout},
    }
    if share is not None:
        out["distill_share"] = [0.1] * 5 + [share] * 15
    if entropy is not None:
        out["entropy"] = [entropy] * 20
    if warned is not None:
        out["collapse_warning"] = [0.0] * 19 + [1.0 if warned else 0.0]
    return out


def test_jobs_are_the_credit_methods_harness_with_this_folder(tmp_path):
    for cell in db.CELLS:
        for arm in ("none", db.BLEND):  # a control's spec is the credit-methods study's, so its runs can be reused
            assert cm.spec_of(db.job_for(cell, arm, 3, tmp_path)) == cm.spec_of(cm.job_for(cell, arm, 3, tmp_path))
    job = db.job_for("calculator", "gd-mixed-0.5", 2, tmp_path)
    assert job["overrides"][-4:] == ["--distillation_weight", "0.5", "--distillation_gate", "mixed"]
    assert job["mode"] == "none" and cm.kept_path(job) == db.RUNS_DIR / "calculator" / "gd-mixed-0.5__seed2.json"
    assert "runs_dir" not in cm.spec_of(job)  # where a run is kept is not what it was made with


def test_cached_imports_a_control_with_the_same_spec_only(tmp_path, monkeypatch):
    mine, theirs = tmp_path / "mine", tmp_path / "theirs"
    monkeypatch.setattr(db, "RUNS_DIR", mine)
    monkeypatch.setattr(cm, "RUNS_DIR", theirs)
    job = db.job_for("calculator", "none", 1, tmp_path)
    assert db.cached(job) is None
    kept = theirs / "calculator" / "none__seed1.json"
    kept.parent.mkdir(parents=True)
    kept.write_text(json.dumps({**run("none", 1, 0.3), "spec": {"other": True}}))
    assert db.cached(job) is None  # another spec is another run
    kept.write_text(json.dumps({**run("none", 1, 0.3), "spec": cm.spec_of(job)}))
    got = db.cached(job)
    assert got["eval"]["sampled_accuracy"] == 0.3 and got["imported_from"].endswith("none__seed1.json")
    assert json.loads((mine / "calculator" / "none__seed1.json").read_text())["imported_from"] == got["imported_from"]


def test_collapse_block_reads_final_windows():
    runs = [run("grpo-distill-0.5", 0, 0.1, share=0.9, entropy=0.2, warned=True),
            run("grpo-distill-0.5", 1, 0.3, share=0.2, entropy=0.4, warned=False),
            run("grpo-distill-0.5", 9, 0.3, share=1.0)]  # not a stage-1 seed  # fmt: skip
    gated = run("grpo-distill-0.5", 2, 0.0, share=0.0)  # a gate shuts the term once every group fails: share 0
    gated["reward"] = [0.3] * 5 + [0.0] * 15  # ... and the final window's reward is 0
    runs.append(gated)
    block = db.collapse_block(runs, "grpo-distill-0.5", range(8))
    assert block["distill_share"] == pytest.approx(1.1 / 3)  # (0.9 + 0.2 + 0.0) / 3: only the last 15 steps
    assert block["entropy"] == pytest.approx(0.3)
    assert block["collapsed_seeds"] == [0] and block["warned_seeds"] == [0] and block["n_seeds"] == 3
    assert block["dead_seeds"] == [2]  # dead, though its share never rose
    grpo = db.collapse_block([run("none", 0, 0.2)], "none", range(8))  # GRPO logs no share: nothing to read
    assert grpo["distill_share"] is None and grpo["collapsed_seeds"] == [] and grpo["entropy"] is None
    assert grpo["dead_seeds"] == []


def test_minus_none_and_gain_kept_by_hand():
    cell = "independent-k8"
    runs = [run("none", s, h, cell=cell) for s, h in enumerate([0.20, 0.30, 0.25])]
    runs += [run(db.BLEND, s, h, cell=cell) for s, h in enumerate([0.30, 0.36, 0.33])]  # gains 0.10, 0.06, 0.08
    runs += [run("gd-mixed-0.5", s, h, cell=cell, greedy=g) for s, (h, g) in enumerate([(0.28, 0.3), (0.34, 0.3),
                                                                                        (0.29, 0.3)])]  # fmt: skip
    diff = db.minus_none(runs, "gd-mixed-0.5", range(8))
    assert diff["heldout"]["mean"] == pytest.approx((0.08 + 0.04 + 0.04) / 3) and diff["heldout"]["n_seeds"] == 3
    assert diff["greedy"]["mean"] == pytest.approx((0.1 + 0.0 + 0.05) / 3)
    kept = db.gain_kept(runs, "gd-mixed-0.5", range(8))
    assert kept["mean"] == pytest.approx(0.16 / 0.24) and kept["n_seeds"] == 3
    flat = [r for r in runs if r["label"] != db.BLEND] + [run(db.BLEND, s, 0.2, cell=cell) for s in range(3)]
    assert db.gain_kept(flat, "gd-mixed-0.5", range(8)) is None  # the blend gained nothing here: nothing to keep


def test_plan_rule():
    def calc(held, collapsed=(), n=8):
        return {
            "minus_none": {"heldout": {"mean": held, "n_seeds": n}},
            "collapse": {"collapsed_seeds": list(collapsed)},
        }

    def indep(ratio, n=8):
        return {"minus_none": {"heldout": {"n_seeds": n}}, "gain_kept": None if ratio is None else {"mean": ratio}}

    assert db.qualifies(calc(-0.3, n=2), indep(0.9)) is None  # two seeds of eight: not read yet
    assert db.qualifies(calc(-0.01), indep(0.9, n=5)) is None

    assert db.qualifies(calc(-0.01), indep(0.9)) is True
    assert db.qualifies(calc(-0.01), indep(0.5)) is False
    assert db.qualifies(calc(-0.05), indep(0.9)) is False  # below GRPO by more than the margin
    assert db.qualifies(calc(0.02, collapsed=[3]), indep(0.9)) is False  # a collapsed seed fails it outright
    assert db.qualifies(calc(-0.05), None) is False  # the calculator half decides alone when it fails
    assert db.qualifies(calc(0.0), None) is None and db.qualifies(None, indep(0.9)) is None
    assert db.qualifies(calc(0.0), indep(None)) is None
    assert db.qualifies(calc(math.nan), indep(0.9)) is None

    # the amendment: where the blend gains nothing that holds, a variant is read against the blend itself
    def behind(diff, n=8):
        return {"minus_none": {"heldout": {"n_seeds": n}}, "gain_kept": None, "minus_blend": {"mean": diff}}

    assert db.qualifies(calc(-0.01), behind(0.01), blend_holds=False) is True
    assert db.qualifies(calc(-0.01), behind(-0.045), blend_holds=False) is False
    assert db.qualifies(calc(-0.01), behind(0.01), blend_holds=None) is None  # the blend's gain not yet read
    assert db.qualifies(calc(-0.05), behind(0.01), blend_holds=False) is False


def test_the_blend_gain_holds_only_with_its_interval_above_zero_on_all_seeds():
    def arms(ci_low, n=8):
        return {db.BLEND: {"minus_none": {"heldout": {"mean": 0.02, "ci_low": ci_low, "n_seeds": n}}}}

    assert db.blend_gain_holds(arms(0.01)) is True
    assert db.blend_gain_holds(arms(-0.025)) is False
    assert db.blend_gain_holds(arms(0.01, n=5)) is None and db.blend_gain_holds({}) is None


def test_minus_blend_by_hand():
    cell = "independent-k8"
    runs = [run(db.BLEND, s, h, cell=cell) for s, h in enumerate([0.30, 0.36, 0.33])]
    runs += [run("gd-clip0.2-0.5", s, h, cell=cell) for s, h in enumerate([0.32, 0.30, 0.36])]
    diff = db.minus_blend(runs, "gd-clip0.2-0.5", range(8))
    assert diff["mean"] == pytest.approx((0.02 - 0.06 + 0.03) / 3) and diff["n_seeds"] == 3


def test_stage1_report_and_table():
    runs = {"calculator": [run("none", s, 0.3) for s in range(3)]
            + [run(db.BLEND, s, 0.0, share=1.0, warned=True) for s in range(3)]
            + [run("gd-mixed-0.5", s, 0.3 + 0.01 * s, share=0.1) for s in range(3)]}  # fmt: skip
    report = db.stage1(runs)
    arms = report["cells"]["calculator"]["arms"]
    assert arms[db.BLEND]["collapse"]["collapsed_seeds"] == [0, 1, 2]
    assert arms[db.BLEND]["minus_none"]["heldout"]["mean"] == pytest.approx(-0.3)
    assert report["qualifies"]["gd-mixed-0.5"] is None  # independent-k8 not run yet
    assert report["cells"]["independent-k8"]["arms"] == {}
    table = db.markdown({"title": "t", "what": "w", **report})
    assert "| calculator | grpo-distill-0.5 | -0.300" in table and "[0, 1, 2]" in table


def declared_for_test(seeds=(300, 301, 302), chosen="gd-clip0.2-0.5"):
    arms = {"calculator": ["none", db.BLEND, chosen, "grpo-agree-0.5"],
            "independent-k8": ["none", db.BLEND, chosen, "grpo-agree-0.5", "sdpo-trl-fair-0.5"]}  # fmt: skip
    return {"seeds": list(seeds), "chosen": chosen, "margin": 0.03, "keep": 0.8, "arms": arms,
            "settings": {a: db.ARMS[a] for cell in arms.values() for a in cell}}  # fmt: skip


def confirm_runs(calc: dict, k8: dict, seeds=(300, 301, 302)) -> dict:
    """Per arm a list of per-seed held-out values (`none` first), as runs of both cells."""
    out = {"calculator": [], "independent-k8": []}
    for cell, table in (("calculator", calc), ("independent-k8", k8)):
        for arm, values in table.items():
            out[cell] += [run(arm, s, v, cell=cell) for s, v in zip(seeds, values, strict=True)]
    return out


def test_the_confirmation_reads_nothing_of_a_cell_before_its_runs_are_all_in():
    declared = declared_for_test()
    calc = {"none": [0.5, 0.6, 0.55], db.BLEND: [0.1, 0.2, 0.15], "gd-clip0.2-0.5": [0.5, 0.61, 0.55],
            "grpo-agree-0.5": [0.5, 0.6, 0.5]}  # fmt: skip
    runs = confirm_runs(calc, {"none": [0.3, 0.3, 0.3]})
    report = db.confirmation(runs, declared)
    assert report["cells_pending"] == {"independent-k8": {"runs_in": 3, "runs_declared": 15}}
    assert list(report["cells"]) == ["calculator"] and report["verdict"] is None
    # the calculator family alone: 3 arms minus none and the non-inferiority test, Holm over those 4
    rec = report["cells"]["calculator"]["arms"][db.BLEND]["heldout"]["minus_none"]
    assert rec["mean"] == pytest.approx(-0.4) and rec["n_seeds"] == 3
    assert rec["p_holm"] == pytest.approx(min(1.0, 4 * rec["p"]))  # the smallest p of four is multiplied by 4
    assert report["comparisons"]["heldout"]["calculator"]["chosen_not_below_none"]["margin"] == 0.03


def test_the_declared_verdict_by_hand():
    declared = declared_for_test(seeds=tuple(range(300, 306)))
    seeds = tuple(range(300, 306))
    base = [0.50, 0.55, 0.60, 0.52, 0.58, 0.54]
    calc = {"none": base, db.BLEND: [b - 0.4 + 0.01 * i for i, b in enumerate(base)],
            "gd-clip0.2-0.5": [b + 0.001 * (i % 2) for i, b in enumerate(base)],  # the variant sits on GRPO
            "grpo-agree-0.5": base}  # fmt: skip
    k8 = {"none": base, db.BLEND: [b + 0.10 + 0.002 * i for i, b in enumerate(base)],  # a gain that holds
          "gd-clip0.2-0.5": [b + 0.09 + 0.001 * i for i, b in enumerate(base)], "grpo-agree-0.5": base,
          "sdpo-trl-fair-0.5": base}  # fmt: skip
    report = db.confirmation(confirm_runs(calc, k8, seeds), declared)
    v = report["verdict"]
    assert v["1_not_below_grpo_on_calculator"] and v["2_blend_collapses_on_calculator"]
    assert v["blend_gain_holds_on_independent_k8"] and v["3_keeps_the_independent_k8_gain"] and v["passes"]
    assert report["cells"]["independent-k8"]["gain_kept"]["mean"] == pytest.approx(0.555 / 0.63)  # (6 x 0.09 + 0.015) / (6 x 0.10 + 0.03)
    # the variant keeps too little of the gain: 3 fails
    k8_low = {**k8, "gd-clip0.2-0.5": [b + 0.04 + 0.001 * i for i, b in enumerate(base)]}
    low = db.confirmation(confirm_runs(calc, k8_low, seeds), declared)["verdict"]
    assert not low["3_keeps_the_independent_k8_gain"] and not low["passes"] and not low["variant_holds"]
    # no blend gain to keep: the variant is read against the blend (non-inferiority at the margin)
    k8_flat = {**k8, db.BLEND: [b + 0.001 * (i % 3) for i, b in enumerate(base)],
               "gd-clip0.2-0.5": [b + 0.002 * (i % 2) for i, b in enumerate(base)]}  # fmt: skip
    flat = db.confirmation(confirm_runs(calc, k8_flat, seeds), declared)["verdict"]
    assert not flat["blend_gain_holds_on_independent_k8"] and flat["3_keeps_the_independent_k8_gain"]
    # the variant collapses with the blend on calculator: 1 fails
    calc_bad = {**calc, "gd-clip0.2-0.5": calc[db.BLEND]}
    assert not db.confirmation(confirm_runs(calc_bad, k8, seeds), declared)["verdict"]["1_not_below_grpo_on_calculator"]


def test_declared_seeds_refuse_to_run_when_the_code_drifts(monkeypatch, tmp_path):
    declared = declared_for_test()
    assert db.declaration_drift(declared) == []
    drifted = {**declared, "chosen": "gd-unknown", "settings": {**declared["settings"], "none": {"credit": "gear"}}}
    assert len(db.declaration_drift(drifted)) == 2
    path = tmp_path / "declaration.json"
    path.write_text(json.dumps(drifted))
    monkeypatch.setattr(db, "DECLARATION_PATH", path)
    with pytest.raises(SystemExit):
        db.main(["--cell", "calculator", "--seeds", "300"])
    with pytest.raises(SystemExit):  # undeclared seeds stay refused
        db.main(["--cell", "calculator", "--seeds", "350"])


def test_the_confirmation_table_lists_pending_cells_and_the_verdict():
    declared = declared_for_test()
    base = {"none": [0.5, 0.6, 0.55], db.BLEND: [0.1, 0.2, 0.15], "gd-clip0.2-0.5": [0.5, 0.61, 0.55],
            "grpo-agree-0.5": [0.5, 0.6, 0.5]}  # fmt: skip
    report = {"title": "t", "declaration": "d.json", "seeds": [300, 301, 302],
              **db.confirmation(confirm_runs(base, {"none": [0.3] * 3}), declared)}  # fmt: skip
    text = db.confirmation_markdown(report)
    assert "Seeds 300-302" in text and "independent-k8 3/15" in text and "| calculator | grpo-distill-0.5 | -0.400" in text
    assert "Verdict" not in text  # nothing decided while a cell is pending


def test_the_plot_draws_complete_cells_only(tmp_path):
    declared = declared_for_test()
    calc = {"none": [0.5, 0.6, 0.55], db.BLEND: [0.1, 0.2, 0.15], "gd-clip0.2-0.5": [0.5, 0.61, 0.55],
            "grpo-agree-0.5": [0.5, 0.6, 0.5]}  # fmt: skip
    pending = {"chosen": declared["chosen"], "margin": 0.03, "seeds": [300, 301, 302],
               **db.confirmation(confirm_runs({"none": [0.5] * 3}, {"none": [0.3] * 3}), declared)}  # fmt: skip
    assert db.plot(pending, tmp_path / "none.png") == [] and not (tmp_path / "none.png").exists()
    report = {**pending, **db.confirmation(confirm_runs(calc, {"none": [0.3] * 3}), declared)}
    assert db.plot(report, tmp_path / "p.png") == ["calculator"]
    assert (tmp_path / "p.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
