"""bench/horizon.py: the share of the ceiling, the report's schema on synthetic runs, the plot and table (no
training)."""

from __future__ import annotations

import importlib
import json
import math
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def horizon():
    from bench import horizon as module

    return module


def test_share_of_ceiling_by_hand(horizon):
    # the arm gains half the ceiling's gain on every seed: the share is 0.5 and so is every bootstrap resample
    share = horizon.share_of_ceiling({0: 0.1, 1: 0.2, 2: 0.3}, {0: 0.2, 1: 0.4, 2: 0.6}, ceiling_low=0.1)
    assert share["mean"] == pytest.approx(0.5)
    assert share["ci_low"] == pytest.approx(0.5) and share["ci_high"] == pytest.approx(0.5)
    assert share["n_seeds"] == 3
    # ratio of the means, not mean of the ratios: (0.0 + 0.3) / 2 over (0.1 + 0.5) / 2
    share = horizon.share_of_ceiling({0: 0.0, 1: 0.3, 5: 9.0}, {0: 0.1, 1: 0.5}, ceiling_low=0.05)
    assert share["mean"] == pytest.approx(0.5) and share["n_seeds"] == 2
    assert share["ci_low"] <= 0.0 + 1e-12 and share["ci_high"] >= 0.6 - 1e-12  # resamples of one seed: 0 and 0.6


def test_share_of_ceiling_is_undefined_without_a_ceiling(horizon):
    arm, ceiling = {0: 0.1, 1: 0.2}, {0: 0.2, 1: 0.4}
    assert horizon.share_of_ceiling(arm, ceiling, ceiling_low=0.0) is None  # the interval touches 0
    assert horizon.share_of_ceiling(arm, ceiling, ceiling_low=-0.1) is None
    assert horizon.share_of_ceiling(arm, ceiling, ceiling_low=math.nan) is None  # one seed: no interval
    assert horizon.share_of_ceiling({0: 0.1}, {0: 0.2}, ceiling_low=0.1) is None  # one seed shared


def run(label, seed, rewards, accuracy):
    return {"label": label, "seed": seed, "reward": rewards, "eval": {"sampled_accuracy": accuracy}}


def synthetic_cell(ceiling_gain):
    """3 seeds; window 1 (the last step's reward). none: reward 0.2 + 0.01 s, accuracy 0.30 + 0.01 s; the ceiling
    gains `ceiling_gain` (+ 0.01 s) on both; oracle-gear half of that."""
    runs = []
    for s in range(3):
        runs += [
            run("none", s, [0.1, 0.2 + 0.01 * s], 0.30 + 0.01 * s),
            run("oracle-prefix", s, [0.1, 0.2 + 0.01 * s + ceiling_gain + 0.01 * s],
                0.30 + 0.01 * s + ceiling_gain + 0.01 * s),
            run("oracle-gear", s, [0.1, 0.2 + 0.01 * s + (ceiling_gain + 0.01 * s) / 2],
                0.30 + 0.01 * s + (ceiling_gain + 0.01 * s) / 2),
        ]  # fmt: skip
    return {
        "arms": ["none", "oracle-prefix", "oracle-gear"],
        "window": 1,
        "start": {"eval": {"sampled_accuracy": 0.25, "greedy_accuracy": 0.3}},
        "probes": {},
        "runs": runs,
    }


def test_report_schema_and_share_of_ceiling_on_synthetic_runs(horizon):
    report = horizon.build_report({"chained": {4: synthetic_cell(0.1), 8: synthetic_cell(0.0)}}, window=1)
    assert set(report) == {"chained"} and set(report["chained"]) == {"4", "8"}
    body = report["chained"]["4"]
    for arm in ("none", "oracle-prefix", "oracle-gear"):
        for metric in ("reward_last", "sampled_accuracy"):
            cell = body["arms"][arm][metric]
            assert set(cell) >= {"mean", "ci_low", "ci_high", "n_seeds"} and cell["n_seeds"] == 3
    assert body["arms"]["none"]["sampled_accuracy"]["mean"] == pytest.approx(0.31)
    assert body["none_accuracy"]["start"] == 0.25
    assert body["none_accuracy"]["end"] == pytest.approx(0.31)
    gain = body["arms"]["oracle-prefix"]["reward_last_minus_none"]
    assert gain["mean"] == pytest.approx(0.11) and gain["ci_low"] > 0
    share = body["arms"]["oracle-gear"]["share_of_ceiling"]
    for metric in ("reward_last", "sampled_accuracy"):
        assert share[metric]["mean"] == pytest.approx(0.5)
        assert share[metric]["ci_low"] == pytest.approx(0.5) and share[metric]["n_seeds"] == 3
    assert "share_of_ceiling" not in body["arms"]["none"] and "share_of_ceiling" not in body["arms"]["oracle-prefix"]
    # K = 8: the ceiling gains 0.00, 0.01, 0.02: its interval reaches below 0, so no share is defined
    assert report["chained"]["8"]["arms"]["oracle-gear"]["share_of_ceiling"] == {
        "reward_last": None,
        "sampled_accuracy": None,
    }
    json.dumps(report)  # the report is JSON as written


def cell_with_a_second_ceiling(second: str) -> dict:
    """`synthetic_cell(0.1)` with `oracle-prefix` moved below GRPO (-0.05 - 0.001 s) and `second` given the gain it had
    (+0.1 + 0.01 s): oracle-gear's gain is half of `second`'s and none of the issue's ceiling's."""
    cell = synthetic_cell(0.1)
    for r in cell["runs"]:
        if r["label"] == "oracle-prefix":
            cell["runs"].append({**r, "label": second})
            r["reward"] = [0.1, 0.2 + 0.01 * r["seed"] - 0.05 - 0.001 * r["seed"]]
            r["eval"] = {"sampled_accuracy": 0.30 + 0.01 * r["seed"] - 0.05 - 0.001 * r["seed"]}
    cell["arms"].append(second)
    return cell


@pytest.mark.parametrize(
    ("second", "key", "column"),
    [
        ("oracle-process", "share_of_process_ceiling", "share of process ceiling"),
        ("oracle-prefix-raw", "share_of_raw_ceiling", "share of raw ceiling"),
    ],
)
def test_a_share_is_reported_against_a_second_ceiling_where_the_issues_is_below_grpo(horizon, second, key, column):
    """oracle-prefix below GRPO (-0.05), `second` above it (+0.1 + 0.01 s): an arm at half `second`'s gain has no
    share of the issue's ceiling and a share of 0.5 of `second`'s, in the JSON and in the table's two columns of it;
    each ceiling's own cells say so."""
    body = horizon.build_report({"independent": {8: cell_with_a_second_ceiling(second)}}, window=1)["independent"]["8"]
    arm = body["arms"]["oracle-gear"]
    assert arm["share_of_ceiling"] == {"reward_last": None, "sampled_accuracy": None}
    for metric in ("reward_last", "sampled_accuracy"):
        assert arm[key][metric]["mean"] == pytest.approx(0.5)
    assert key not in body["arms"][second]
    other = {"share_of_process_ceiling", "share_of_raw_ceiling"} - {key}
    assert not other & set(arm)  # that ceiling did not run in this cell
    table = horizon.markdown({"variants": {"independent": {"8": body}}})
    header = next(line for line in table.splitlines() if line.startswith("| arm |"))
    row = next(line for line in table.splitlines() if line.startswith("| `oracle-gear` |"))
    assert row.count("|") == header.count("|") == 16
    cells = dict(zip((c.strip() for c in header.split("|")[1:-1]), (c.strip() for c in row.split("|")[1:-1])))
    assert cells[f"{column} (reward)"] == cells[f"{column} (sampled)"] == "+0.50 [+0.50, +0.50]"
    assert table.count("(ceiling)") == 4  # each ceiling's own two cells


def test_plot_and_table_from_a_synthetic_report(horizon, tmp_path):
    report = {
        "title": "synthetic",
        "variants": horizon.build_report({"chained": {2: synthetic_cell(0.1), 4: synthetic_cell(0.05)}}, window=1),
    }
    path = tmp_path / "horizon.png"
    assert horizon.plot(report, path) == ["oracle-gear", "oracle-prefix"]
    assert path.stat().st_size > 5000
    # an arm run in the second variant only still has its legend entry
    other = synthetic_cell(0.1)
    for r in [r for r in other["runs"] if r["label"] == "oracle-gear"]:
        other["runs"].append({**r, "label": "oracle-process"})
    other["arms"].append("oracle-process")
    both = {
        **report,
        "variants": {**report["variants"], **horizon.build_report({"independent": {4: other}}, window=1)},
    }
    assert horizon.plot(both, tmp_path / "both.png") == ["oracle-gear", "oracle-prefix", "oracle-process"]
    table = horizon.markdown(report)
    assert "## chained, K = 2 (`none`: sampled accuracy 0.25 at the start, 0.31 after training)" in table
    assert "| `oracle-prefix` | 3 |" in table and "(ceiling)" in table
    assert "+0.50 [+0.50, +0.50]" in table


def test_steps_after_error_by_hand(horizon):
    prompt = [{"role": "user", "content": "Start from 23 and apply in turn: + 5, - 3, + 8."}]
    samples = [
        # wrong first line, then a right step from 29 and a wrong one: 2 lines after, 1 right step
        {"prompt": prompt, "completion": "23 + 5 = 29\n29 - 3 = 26\n26 + 8 = 35", "reward": 0.0},
        # wrong last line: nothing after it
        {"prompt": prompt, "completion": "23 + 5 = 28\n28 - 3 = 25\n25 + 8 = 34", "reward": 0.0},
        {"prompt": prompt, "completion": "23 + 5 = 28\n28 - 3 = 25\n25 + 8 = 33", "reward": 1.0},  # passed
        {"prompt": "no problem here", "completion": "1 + 1 = 3", "reward": 0.0},  # not a horizon prompt
    ]
    assert horizon.steps_after_error(samples) == {"failed": 2, "lines_after": 2, "right_steps": 1, "share": 0.5}
    assert horizon.steps_after_error([])["share"] is None


def test_overrun_share_by_hand(horizon):
    samples = [
        {"completion": "<think>\n\n</think>\n\n1 + 1 = 2\n2 + 2 = 4"},  # K = 2 lines: not past K
        {"completion": "1 + 1 = 2\n2 + 2 = 4\n3 + 3 = 6\n"},  # a third line: past K
        {"completion": [{"role": "assistant", "content": "1 + 1 = 3\n2 + 2 = 5\n7 + 1 = 8"}]},  # wrong, still past K
        {"completion": "1 + 1 = 2\nsome words\n"},  # prose is no equation line
        {"completion": None},  # nothing written
    ]
    assert horizon.overrun_share(samples, 2) == pytest.approx(2 / 5)
    assert horizon.overrun_share(samples, 3) == 0.0
    assert horizon.overrun_share([], 2) is None


def test_every_arm_has_a_known_credit_and_oracle(horizon):
    from bench.harness import oracles as horizon_oracles

    # the full budget runs every arm but the diagnostic oracles added after the first runs
    assert set(horizon.BUDGETS["full"]["arms"]) == set(horizon.ARMS) - set(
        horizon.DIAGNOSTIC_ARMS + horizon.ADDED_ARMS
    )
    assert set(horizon.DIAGNOSTIC_ARMS + horizon.ADDED_ARMS) < set(horizon.ARMS)
    # gear-distill is gear-solution with the option at the blend fixed before any run of it
    assert horizon.ARMS["gear-distill"] == {
        "credit": "gear",
        "overrides": ["--teacher_reference", "solution", "--distillation_weight", "0.5"],
    }
    # the two weights declared later differ from it in the weight only
    for weight in ("0.25", "1.0"):
        spec = horizon.ARMS[f"gear-distill-{weight}"]
        assert spec["overrides"][:-1] == horizon.ARMS["gear-distill"]["overrides"][:-1]
        assert spec["overrides"][-1] == weight and spec["credit"] == "gear"
    for arm, spec in horizon.ARMS.items():
        assert spec["credit"] in ("none", "gear", "gear-signed", "rlsd", "token", "gear_no_entropy"), arm
        assert spec.get("oracle") in (None, "from_error", "error_token", *horizon_oracles.WEIGHT_KINDS), arm
    assert horizon.cell_overrides("chained", 8, "m", "oracle-strong")[:6] == [
        "--model_name_or_path", "m", "--dataset_name", "data/horizon/chained/k8", "--max_completion_length", "112",
    ]  # fmt: skip
    assert horizon.cell_overrides("chained", 8, "m", "oracle-strong")[-6:] == horizon.headroom.ORACLE_STRONG


def test_set_adds_a_recipe_override_to_every_training_run(horizon, monkeypatch, tmp_path):
    planned = []

    class Planned(Exception):
        pass

    def capture(jobs, *args, **kwargs):
        planned.extend(jobs)
        raise Planned

    monkeypatch.setattr(horizon.jobs, "run_jobs", capture)
    common = ["--variants", "chained", "--ks", "4", "--arms", "none", "--seeds", "1001",
              "--model", "chained=data/tiny-qwen3-arith-sol35", "--work-dir", str(tmp_path)]  # fmt: skip
    with pytest.raises(Planned):
        horizon.main([*common, "--set", "learning_rate=1e-3"], log=lambda *a: None)
    (train,) = [job for job in planned if job["kind"] == "train"]
    assert train["overrides"][-2:] == ["--learning_rate", "1e-3"] and train["seed"] == 1001
    with pytest.raises(SystemExit):
        horizon.main([*common, "--set", "learning_rate"], log=lambda *a: None)


def test_each_variant_trains_its_own_number_of_steps_unless_max_steps_is_given(horizon, monkeypatch, tmp_path):
    """`independent` trains VARIANTS' 60 steps and `chained` the budget's 40; `--max-steps` and `--quick` hold for
    both; the title names the steps per variant where they differ."""
    planned = []

    class Planned(Exception):
        pass

    def capture(jobs, *args, **kwargs):
        planned[:] = jobs
        raise Planned

    monkeypatch.setattr(horizon.jobs, "run_jobs", capture)
    stand_in = "data/tiny-qwen3-arith-sol35"
    common = ["--ks", "4", "--arms", "none", "--seeds", "0", "--model", f"chained={stand_in}",
              "--model", f"independent={stand_in}", "--work-dir", str(tmp_path)]  # fmt: skip

    def steps(*argv):
        with pytest.raises(Planned):
            horizon.main([*common, *argv], log=lambda *a: None)
        return {job["task"]: job["max_steps"] for job in planned if job["kind"] == "train"}

    assert horizon.VARIANTS["independent"]["max_steps"] == 60 and "max_steps" not in horizon.VARIANTS["chained"]
    assert steps("--variants", "independent", "chained") == {"independent-k4": 60, "chained-k4": 40}
    assert steps("--variants", "independent", "chained", "--max-steps", "7") == {"independent-k4": 7, "chained-k4": 7}
    assert steps("--variants", "independent", "--quick") == {"independent-k4": 2}
    assert horizon.steps_title({"independent": 60, "chained": 40}) == "independent 60 steps, chained 40 steps"
    assert horizon.steps_title({"chained": 40}) == "40 steps"


def test_cached_only_reports_the_arms_run_at_each_k_and_lists_the_others(horizon, monkeypatch, tmp_path):
    """K = 4 has none and oracle-prefix on 2 seeds, K = 8 only none: the report is whole (not `_partial`), K = 8's
    cell lists oracle-prefix as not run; a variant with nothing run is left out and named; a seed missing from an arm
    that ran makes it partial."""

    def fake(skip=()):
        def run_jobs(jobs, *args, cached_only=False, **kwargs):
            assert cached_only
            out = {}
            for job in jobs:
                if job["task"].startswith("independent"):
                    continue  # nothing run, the start not evaluated either
                k = job["task"].rsplit("k", 1)[1]
                ran = k == "4" or job.get("label", "none") == "none"
                if job["kind"] == "start":
                    out[job["work_dir"], job["key"]] = {"eval": {"sampled_accuracy": 0.4, "greedy_accuracy": 0.7}}
                elif job["kind"] == "probe" and k == "4":
                    out[job["work_dir"], job["key"]] = {"localization": {}, "label_free": {}}
                elif job["kind"] == "train" and ran and (k, job["label"], job["seed"]) not in skip:
                    bump = 0.05 * (job["label"] != "none") + 0.01 * job["seed"]
                    out[job["work_dir"], job["key"]] = run(job["label"], job["seed"], [0.3, 0.5 + bump], 0.5 + bump)
            return out

        return run_jobs

    argv = ["--variants", "chained", "independent", "--ks", "4", "8", "--arms", "none", "oracle-prefix", "--seeds",
            "0", "1", "--model", "chained=data/tiny-qwen3-arith-sol35", "--model",
            "independent=data/tiny-qwen3-arith-sol35", "--work-dir", str(tmp_path / "work"), "--cached-only",
            "--out-dir", str(tmp_path / "out")]  # fmt: skip
    monkeypatch.setattr(horizon.jobs, "run_jobs", fake())
    logged = []
    report = horizon.main(argv, log=logged.append)
    assert (tmp_path / "out" / "horizon.json").exists() and report["jobs"]["missing"] == 0
    assert "independent" not in report["variants"]
    assert report["cells_not_run"] == ["independent-k4", "independent-k8"]
    assert any("independent-k4, independent-k8" in line for line in logged)
    assert (
        "Not run yet (no `none` run): independent-k4, independent-k8." in (tmp_path / "out" / "horizon.md").read_text()
    )
    by_k = report["variants"]["chained"]
    assert set(by_k["4"]["arms"]) == {"none", "oracle-prefix"} and "not_run" not in by_k["4"]
    assert set(by_k["8"]["arms"]) == {"none"} and by_k["8"]["not_run"] == ["oracle-prefix"]
    assert "Not run at this K: `oracle-prefix`." in (tmp_path / "out" / "horizon.md").read_text()
    monkeypatch.setattr(horizon.jobs, "run_jobs", fake(skip={("4", "oracle-prefix", 1)}))
    report = horizon.main(argv, log=lambda *a: None)
    assert report["jobs"]["missing"] == 1 and (tmp_path / "out" / "horizon_partial.json").exists()


def test_the_trained_probe_uses_gear_drop_prefix_settings_and_names_a_missing_run(horizon, tmp_path, capsys):
    probe = importlib.import_module("bench.probes.horizon_trained_probe")
    job = probe.probe_job("chained", 8, "some/model", "probe_1", tmp_path, 48)
    assert job["kind"] == "probe" and job["mode"] == "gear" and job["oracle"] is None
    overrides = job["overrides"]
    assert overrides[overrides.index("--model_name_or_path") + 1] == "some/model"
    assert overrides[overrides.index("--dataset_name") + 1] == "data/horizon/chained/k8"
    assert overrides[-4:] == ["--teacher_reference", "solution", "--failed_prefix_weight", "0.0"]
    with pytest.raises(SystemExit):
        probe.main(["--arms", "none", "--seed", "99", "--work-dir", str(tmp_path), "--out", str(tmp_path / "o.json")])
    assert "no trained model for arm 'none', seed 99" in capsys.readouterr().err


def test_the_independent_calibration_quoted_in_data_readme_is_the_committed_json():
    """data/README.md's table of the independent warm start's GRPO runs (gain over the start per seed, and the mean
    with its interval, held-out and in final-window reward) and the 60-step figures."""
    readme = (REPO_ROOT / "data" / "README.md").read_text()

    def gains(name):
        cell = json.loads((REPO_ROOT / "bench" / "results" / name).read_text())["variants"]["independent"]["4"]
        start, arm = cell["none_accuracy"]["start"], cell["arms"]["none"]
        out = {}
        for metric in ("sampled_accuracy", "reward_last"):
            x = arm[metric]
            out[metric] = f"{x['mean'] - start:+.3f} [{x['ci_low'] - start:+.3f}, {x['ci_high'] - start:+.3f}]"
            out[metric + "_seeds"] = [f"{v - start:+.3f}" for v in x["values"]]
        return out

    for name in ("horizon/calibration_independent.json", "horizon/calibration_independent_lr2e-4.json",
                 "horizon/calibration_independent_lr3e-4.json"):  # fmt: skip
        g = gains(name)
        row = next(line for line in readme.splitlines() if f"`bench/results/{name}`" in line)
        cells = [cell.strip().replace("*", "") for cell in row.split("|")]
        assert cells[2] == ", ".join(g["sampled_accuracy_seeds"]), name
        assert cells[3:5] == [g["sampled_accuracy"], g["reward_last"]], name
    g = gains("horizon/calibration_independent_60steps.json")
    flat = readme.replace("\n", " ").replace("*", "")
    assert f"{', '.join(g['sampled_accuracy_seeds'])}, {g['sampled_accuracy']}" in flat
    assert f"{', '.join(g['reward_last_seeds'])} over the start, {g['reward_last']}" in flat


def test_extend_restores_an_earlier_reports_runs_and_keeps_its_other_cells(horizon, monkeypatch, tmp_path):
    """A study whose work dir is lost goes on from its committed report: `--extend` writes the report's runs back into
    a new, empty cache (`none` and `oracle-prefix` at independent K = 4 are not trained again, only the new arm is),
    carries the figures made from their held-out samples, keeps the cell it does not plan (chained K = 4) as it was,
    and a run whose spec changed (another --max-steps) is trained, not restored."""
    trained = []

    def run_jobs(jobs, *args, cached_only=False, **kwargs):
        out = {}
        for job in jobs:
            result = horizon.headroom.cached(job)
            if result is None:
                trained.append((job["task"], job["kind"], job.get("label"), job.get("seed")))
                if job["kind"] == "start":
                    result = {"eval": {"sampled_accuracy": 0.4, "greedy_accuracy": 0.7}}
                elif job["kind"] == "probe":
                    result = {"localization": {}, "label_free": {}}
                else:
                    bump = {"none": 0.0, "oracle-prefix": 0.05, "oracle-process": 0.1}[job["label"]] + 0.01 * job[
                        "seed"
                    ]
                    result = {**run(job["label"], job["seed"], [0.3, 0.5 + bump], 0.5 + bump),
                              "spec": horizon.learning.job_spec(job), "cpu_s": 10.0}  # fmt: skip
            out[job["work_dir"], job["key"]] = result
        return out

    monkeypatch.setattr(horizon.jobs, "run_jobs", run_jobs)
    common = ["--ks", "4", "--seeds", "0", "1", "--model", "chained=data/tiny-qwen3-arith-sol35", "--model",
              "independent=data/tiny-qwen3-arith-sol35"]  # fmt: skip
    horizon.main(
        ["--variants", "chained", "independent", "--arms", "none", "oracle-prefix", *common,
         "--work-dir", str(tmp_path / "lost"), "--out-dir", str(tmp_path / "first")], log=lambda *a: None,
    )  # fmt: skip
    earlier = json.loads((tmp_path / "first" / "horizon.json").read_text())
    # figures made from held-out samples, which a report does not hold: the extended report must carry these
    cell = earlier["variants"]["independent"]["4"]
    cell["overrun"]["arms"] = {"none": {"0": 0.25, "1": 0.5}, "oracle-prefix": {"0": 0.0, "1": 0.125}}
    cell["steps_after_error"]["none_end"] = {"failed": 3, "lines_after": 4, "right_steps": 2, "share": 0.5}
    source = tmp_path / "earlier.json"
    source.write_text(json.dumps(earlier))

    trained.clear()
    report = horizon.main(
        ["--variants", "independent", "--arms", "none", "oracle-prefix", "oracle-process", *common,
         "--extend", str(source), "--work-dir", str(tmp_path / "new"), "--out-dir", str(tmp_path / "out")],
        log=lambda *a: None,
    )  # fmt: skip
    assert {(kind, label) for _, kind, label, _ in trained if kind == "train"} == {("train", "oracle-process")}
    assert len([t for t in trained if t[1] == "train"]) == 2  # the new arm's two seeds, nothing else
    cell = report["variants"]["independent"]["4"]
    assert list(cell["arms"]) == ["none", "oracle-prefix", "oracle-process"]
    gain = cell["arms"]["oracle-process"]["sampled_accuracy_minus_none"]
    assert gain["mean"] == pytest.approx(0.1) and gain["n_seeds"] == 2  # paired with the restored `none`
    restored = [r for r in report["runs"]["independent-k4"] if r.get("restored_from") == str(source)]
    assert {(r["label"], r["seed"]) for r in restored} == {("none", 0), ("none", 1), ("oracle-prefix", 0),
                                                            ("oracle-prefix", 1)}  # fmt: skip
    assert cell["overrun"]["arms"]["none"] == {"0": 0.25, "1": 0.5}
    assert cell["overrun"]["arms"]["oracle-prefix"] == {"0": 0.0, "1": 0.125}
    assert "oracle-process" not in cell["overrun"]["arms"]  # a new run without samples: none, not borrowed
    assert cell["steps_after_error"]["none_end"]["share"] == 0.5
    # the cell not planned is kept whole, runs included; config and budget name both invocations' arms and variants
    assert report["variants"]["chained"]["4"] == earlier["variants"]["chained"]["4"]
    assert report["runs"]["chained-k4"] == earlier["runs"]["chained-k4"]
    assert report["extended_from"]["cells_kept"] == ["chained-k4"]
    assert report["extended_from"]["path"] == str(source)
    assert set(report["config"]["arms"]) == {"none", "oracle-prefix", "oracle-process"}
    assert report["config"]["budget"]["variants"] == ["chained", "independent"]
    assert "## chained, K = 4" in (tmp_path / "out" / "horizon.md").read_text()

    trained.clear()  # another budget: the earlier runs' specs differ, so every run is trained
    horizon.main(
        ["--variants", "independent", "--arms", "none", *common, "--max-steps", "3", "--extend", str(source),
         "--work-dir", str(tmp_path / "other"), "--out-dir", str(tmp_path / "out3")], log=lambda *a: None,
    )  # fmt: skip
    assert sorted((label, seed) for _, kind, label, seed in trained if kind == "train") == [("none", 0), ("none", 1)]

    trained.clear()  # a path that is no report fails before anything runs, naming the option
    (tmp_path / "other.json").write_text(json.dumps({"title": "not a horizon report"}))
    for bad in (tmp_path / "missing.json", tmp_path / "other.json"):
        with pytest.raises(SystemExit):
            horizon.main(["--variants", "independent", "--arms", "none", *common, "--extend", str(bad),
                          "--work-dir", str(tmp_path / "bad"), "--out-dir", str(tmp_path / "bad")])  # fmt: skip
    assert trained == []


def test_extend_gives_a_kept_cell_the_shares_of_ceilings_added_since_it_was_written(horizon):
    """A kept cell written before a share existed (here: its `share_of_ceiling` removed) gets it from its runs."""
    cell = synthetic_cell(0.1)
    body = horizon.build_report({"chained": {4: cell}}, window=1)["chained"]["4"]
    for arm in body["arms"].values():
        arm.pop("share_of_ceiling", None)
    budget = {"variants": ["chained"], "ks": [4], "arms": cell["arms"], "seeds": [0, 1, 2], "window": 1}
    earlier = {
        "variants": {"chained": {"4": body}},
        "runs": {"chained-k4": cell["runs"]},
        "config": {"arms": {}, "variants": {"chained": {"window": 1}}, "budget": budget},
    }
    report = {
        "variants": {},
        "runs": {},
        "cells_not_run": [],
        "config": {"arms": {}, "variants": {}, "budget": {**budget, "variants": [], "ks": [], "arms": []}},
    }
    horizon.extend_report(report, json.loads(json.dumps(earlier)), "earlier.json")
    share = report["variants"]["chained"]["4"]["arms"]["oracle-gear"]["share_of_ceiling"]
    assert share["sampled_accuracy"]["mean"] == pytest.approx(0.5)
    assert report["extended_from"]["cells_kept"] == ["chained-k4"]


def test_the_replications_ran_on_fresh_seeds_with_the_studys_settings():
    """What the page's replication figures rest on (docs/results/horizon.md, generated by docs/results_blocks.py):
    each replication report at independent K = 8 ran the study's own settings on seeds no earlier report used, and
    the weight comparison reused the third replication's `none` runs (the same cached runs, so the pairing holds)."""
    results = REPO_ROOT / "bench" / "results"
    study = json.loads((results / "horizon" / "horizon.json").read_text())
    names = (
        "horizon/replication_seeds_8_to_15",
        "horizon/replication_seeds_16_to_31",
        "horizon/replication_distill_0.25_seeds_32_to_47",
    )
    reports = [json.loads((results / name / "horizon.json").read_text()) for name in names]
    weights = json.loads((results / "horizon" / "replication_distill_0.5_seeds_32_to_47" / "horizon.json").read_text())
    seen = set(study["config"]["budget"]["seeds"])
    assert seen == set(range(8))
    for name, report, seeds in zip(names, reports, (range(8, 16), range(16, 32), range(32, 48)), strict=True):
        assert report["config"]["budget"]["seeds"] == list(seeds), name
        assert not seen & set(seeds), name
        assert report["config"]["variants"]["independent"] == study["config"]["variants"]["independent"], name
        seen |= set(seeds)
    assert weights["config"]["budget"]["seeds"] == list(range(32, 48))
    none = [
        r["variants"]["independent"]["8"]["arms"]["none"]["sampled_accuracy"]["values"] for r in (reports[2], weights)
    ]
    assert none[0] == none[1]
