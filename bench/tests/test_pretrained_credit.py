"""bench/pretrained_credit.py (issue 72's study): its jobs, its refusal of undeclared seeds, and its report on
hand-made runs (paired differences, Holm over the declared family, the equivalence test, the ceiling's share)."""

from __future__ import annotations

import json
import math

import pytest

from bench import credit_methods as cm
from bench import pretrained_credit as pc
from bench.harness import stats


def run(label, seed, heldout, greedy=None, reward=0.5, cell="numbered-k4"):
    return {
        "label": label,
        "seed": seed,
        "cell": cell,
        "reward": [0.1] * 5 + [reward] * pc.WINDOW,
        "eval": {"sampled_accuracy": heldout, "greedy_accuracy": heldout if greedy is None else greedy},
    }


def test_jobs_follow_the_declared_budget_and_keep_runs_here(tmp_path):
    declared = {"seeds": [400, 401], "max_steps": 12}
    job = pc.job_for("numbered-k8", "rlsd-reference", 400, tmp_path, declared)
    assert job["max_steps"] == 12
    # RLSD's reference schedule follows the run's length: the teacher synced at half of it, the blend decayed over it
    assert job["overrides"][-4:] == ["--teacher_sync_steps", "6", "--rlsd_lambda_decay_steps", "12"]
    assert "--dataset_name" in job["overrides"] and "data/item_lists/numbered/k8" in job["overrides"]
    assert cm.kept_path(job) == pc.RUNS_DIR / "numbered-k8" / "rlsd-reference__seed400.json"
    pilot = pc.job_for("numbered-k8", "none", 3, tmp_path, declared)  # not a declared seed: the recipe's budget
    assert pilot["max_steps"] == cm._recipe(pc.RECIPE)["max_steps"]
    assert pc.job_for("numbered-k8", "none", 3, tmp_path, declared, steps=8)["max_steps"] == 8  # a pilot's own
    with pytest.raises(ValueError, match="declared"):
        pc.job_for("numbered-k8", "none", 400, tmp_path, declared, steps=8)
    sdpo = pc.job_for("numbered-k4", "sdpo-trl-0.5", 400, tmp_path, declared)
    assert sdpo["sdpo"] == {"privileged_context": "solution", "distillation_weight": 0.5}
    assert pc.job_for("numbered-k4", "oracle-process", 400, tmp_path, declared)["oracle"] == "process"
    # held-out prompts are built as the runs were trained: the recipe's template, not the math default
    assert job["eval"]["prompt_template"] == "{question}" and job["eval"]["reward"] == "numbered_list_accuracy"


def test_the_held_out_scoring_passes_the_cells_prompt_template(monkeypatch, tmp_path):
    from bench.harness import runs

    seen = []
    monkeypatch.setattr("gear_trl.evaluate.main", lambda argv: seen.append(argv) or {"n": 1})
    spec = pc.CELLS["numbered-k8"]["eval"]
    runs.evaluate_model("m", spec, temperature=0.7, num_samples=2, limit=None, output=str(tmp_path / "o.json"))
    (argv,) = seen
    assert argv[argv.index("--prompt_template") + 1] == "{question}"


def test_undeclared_seeds_are_refused(monkeypatch, tmp_path):
    monkeypatch.setattr(pc, "DECLARATION_PATH", tmp_path / "declaration.json")
    with pytest.raises(SystemExit):
        pc.main(["--cell", "numbered-k4"])  # no declaration, no seeds named
    with pytest.raises(SystemExit):
        pc.main(["--cell", "numbered-k4", "--seeds", "400"])  # not an exploration seed, and nothing declared


def test_summarize_by_hand():
    none = [0.30, 0.40, 0.50, 0.35]
    gear = [0.32, 0.41, 0.53, 0.36]  # +0.02, +0.01, +0.03, +0.01
    ceiling = [0.50, 0.55, 0.70, 0.50]  # +0.20, +0.15, +0.20, +0.15
    runs = [run("none", s, h) for s, h in enumerate(none)]
    runs += [run("gear", s, h) for s, h in enumerate(gear)]
    runs += [run("oracle-process", s, h) for s, h in enumerate(ceiling)]
    runs += [run("grpo-distill-0.25", s, h - 0.1, reward=0.2) for s, h in enumerate(none)]
    cells = pc.summarize({"numbered-k4": runs}, range(4), margin={"heldout": 0.05})
    gear_held = cells["numbered-k4"]["arms"]["gear"]["heldout"]
    assert gear_held["minus_none"]["mean"] == pytest.approx(0.0175) and gear_held["minus_none"]["n_seeds"] == 4
    # Holm over the two comparisons of the family (the ceiling is not in it)
    ps = [gear_held["minus_none"]["p"], cells["numbered-k4"]["arms"]["grpo-distill-0.25"]["heldout"]["minus_none"]["p"]]
    assert [gear_held["minus_none"]["p_holm"]] == [stats.holm(ps)[0]]
    assert "p_holm" not in cells["numbered-k4"]["arms"]["oracle-process"]["heldout"]["minus_none"]
    # the ceiling's share: 0.07 / 0.70 of its gain
    assert gear_held["share_of_process_ceiling"]["mean"] == pytest.approx(0.07 / 0.70)
    assert gear_held["equivalence"]["equivalent"] is True  # 90% interval well inside +-0.05
    distill = cells["numbered-k4"]["arms"]["grpo-distill-0.25"]
    assert distill["heldout"]["minus_none"]["mean"] == pytest.approx(-0.1)
    assert distill["heldout"]["equivalence"]["equivalent"] is False
    assert distill["reward"]["minus_none"]["mean"] == pytest.approx(-0.3)
    assert "equivalence" not in distill["reward"]  # no margin declared for the reward


def test_metric_windows_and_missing_values():
    r = run("none", 0, 0.4, greedy=0.6, reward=0.8)
    assert pc.metric(r, "heldout") == 0.4 and pc.metric(r, "greedy") == 0.6
    assert pc.metric(r, "reward") == pytest.approx(0.8)  # the last WINDOW logged steps only
    assert math.isnan(pc.metric({"eval": None, "reward": [None]}, "reward"))
    assert math.isnan(pc.metric({"eval": {}}, "heldout"))


def test_teacher_checks_read_the_probe():
    probe = {
        "cells": [
            {
                "variant": "numbered",
                "k": 4,
                "teacher_gap_nats": {"mean": 0.05, "ci_low": 0.02, "ci_high": 0.07},
                "teacher_gap_right_minus_wrong": {"mean": 0.16, "ci_low": 0.14, "ci_high": 0.19, "n": 30},
                "teacher_minus_student_accuracy": {"mean": 0.44, "ci_low": 0.37, "ci_high": 0.52, "n": 48},
                "localization": {
                    "first_onset_on_wrong_line": {"mean": 0.4, "ci_low": 0.3, "ci_high": 0.5},
                    "first_onset_chance": {"mean": 0.1},
                    "first_onset_minus_chance": {"mean": 0.3, "ci_low": 0.2, "ci_high": 0.4},
                },
            }
        ]
    }
    checks = pc.teacher_checks(probe)
    assert checks == {
        "numbered-k4": {
            "teacher_gap": {"mean": 0.05, "ci_low": 0.02, "ci_high": 0.07},
            "teacher_gap_right_minus_wrong": {"mean": 0.16, "ci_low": 0.14, "ci_high": 0.19},
            "teacher_minus_student_accuracy": {"mean": 0.44, "ci_low": 0.37, "ci_high": 0.52},
            "localization": {"rate": 0.4, "chance": 0.1, "ci_low": 0.3, "ci_high": 0.5},
            "localization_minus_chance": {"mean": 0.3, "ci_low": 0.2, "ci_high": 0.4},
        }
    }
    assert pc.teacher_checks(None) == {}
    committed = pc.teacher_checks(json.loads(pc.PROBES[0].read_text()))  # the committed probe's cells all read
    assert committed and all(c["teacher_gap"]["mean"] is not None for c in committed.values())


def test_the_report_puts_each_cells_teacher_checks_beside_its_arms():
    """Issue 72's report shape: `cells` -> cell -> `teacher_gap` / `localization` next to `arms`, for a cell with
    runs and for one whose runs are all pending; a probe cell the study does not run stays out."""
    checks = {"numbered-k4": {"teacher_gap": {"mean": 0.1}, "localization": {"rate": 0.4}},
              "numbered-k6": {"teacher_gap": {"mean": 0.2}}}  # fmt: skip
    arms = {"numbered-k4": {"arms": {"gear": {"heldout": {}}}}}
    cells = pc.with_teacher_checks(arms, checks)
    assert cells["numbered-k4"]["arms"] == {"gear": {"heldout": {}}}
    assert cells["numbered-k4"]["teacher_gap"] == {"mean": 0.1} and cells["numbered-k4"]["localization"]["rate"] == 0.4
    assert "numbered-k6" not in cells and "numbered-k8" not in cells  # no checks for it here, no runs
    assert "teacher_gap" not in arms["numbered-k4"]  # the summary passed in is not changed


def test_a_declared_seed_refuses_to_run_once_the_code_drifts_from_the_declaration(monkeypatch, tmp_path):
    """The committed declaration matches the script; a changed arm or held-out size stops declared seeds."""
    committed = json.loads(pc.DECLARATION_PATH.read_text()) if pc.DECLARATION_PATH.exists() else None
    if committed is not None:
        assert pc.declaration_drift(committed) == []
    declared = {"seeds": [400], "max_steps": 8, "arms": pc.ARMS, "cells": {c: {} for c in pc.CELLS},
                "recipe": pc.RECIPE, "eval": {"problems": pc.EVAL_LIMIT, "temperature": 0.7}}  # fmt: skip
    assert pc.declaration_drift(declared) == []
    changed = {**declared, "arms": {**pc.ARMS, "gear": {"credit": "gear"}}, "eval": {"problems": 200, "temperature": 0.7}}
    assert len(pc.declaration_drift(changed)) == 2
    path = tmp_path / "declaration.json"
    path.write_text(json.dumps(changed))
    monkeypatch.setattr(pc, "DECLARATION_PATH", path)
    with pytest.raises(SystemExit):
        pc.main(["--cell", "numbered-k4", "--seeds", "400"])


def test_exploration_arms_run_on_exploration_seeds_only_and_stay_outside_the_family(tmp_path):
    declared = {"seeds": [400], "max_steps": 8}
    job = pc.job_for("numbered-k4", "oracle-prefix-keep-close", 3, tmp_path, declared, steps=8)
    assert job["oracle"] == "prefix" and job["oracle_options"] == {"keep_close": True}
    with pytest.raises(ValueError, match="exploration arm"):
        pc.job_for("numbered-k4", "oracle-first-error", 400, tmp_path, declared)
    assert not set(pc.EXPLORE_ARMS) & set(pc.ARMS)  # never declared


def test_the_plot_draws_the_cells_with_runs(tmp_path):
    none = [0.30, 0.40, 0.50]
    runs = [run("none", s, h) for s, h in enumerate(none)] + [run("gear", s, h + 0.02) for s, h in enumerate(none)]
    runs += [run("oracle-process", s, h + 0.1) for s, h in enumerate(none)]
    cells = pc.with_teacher_checks(pc.summarize({"numbered-k4": runs}, range(3)),
                                   {"numbered-k8": {"teacher_gap": {"mean": 0.1}}})  # a pending cell: checks only
    report = {"seeds": [0, 1, 2], "cells": cells}
    assert pc.plot(report, tmp_path / "p.png") == ["numbered-k4"]
    assert (tmp_path / "p.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert pc.plot({"seeds": [0], "cells": {"numbered-k8": {"arms": {}}}}, tmp_path / "q.png") == []
    assert not (tmp_path / "q.png").exists()
