"""bench/horizon.py: the share of the ceiling, the report's schema on synthetic runs, the plot and table (no
training)."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import pytest

from tests.utils import load_file

REPO_ROOT = Path(__file__).resolve().parent.parent


def interval_text(x: dict) -> str:
    """A paired difference as the results page writes it: `+0.031 [+0.016, +0.046]`."""
    return f"{x['mean']:+.3f} [{x['ci_low']:+.3f}, {x['ci_high']:+.3f}]"


@pytest.fixture(scope="module")
def horizon():
    for path in (REPO_ROOT, REPO_ROOT / "bench"):
        if str(path) not in sys.path:
            sys.path.insert(0, str(path))
    return load_file(REPO_ROOT / "bench" / "horizon.py", "gear_bench_horizon")


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
    import horizon_oracles

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

    monkeypatch.setattr(horizon.teacher_sweep, "run_jobs", capture)
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

    monkeypatch.setattr(horizon.teacher_sweep, "run_jobs", capture)
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
    monkeypatch.setattr(horizon.teacher_sweep, "run_jobs", fake())
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
    monkeypatch.setattr(horizon.teacher_sweep, "run_jobs", fake(skip={("4", "oracle-prefix", 1)}))
    report = horizon.main(argv, log=lambda *a: None)
    assert report["jobs"]["missing"] == 1 and (tmp_path / "out" / "horizon_partial.json").exists()


def test_the_results_page_quotes_the_steps_after_error_from_the_committed_json():
    report = json.loads((REPO_ROOT / "bench" / "results" / "horizon.json").read_text())
    page = (REPO_ROOT / "docs" / "results" / "horizon.md").read_text()
    shares = report["variants"]["chained"]["4"]["steps_after_error"]
    assert f"{shares['start']['share']:.0%} of\n  them in the warm start's held-out rollouts" in page
    assert f"{shares['none_end']['share']:.0%} after GRPO's 40 steps" in page


def test_the_trained_probe_uses_gear_drop_prefix_settings_and_names_a_missing_run(horizon, tmp_path, capsys):
    probe = load_file(REPO_ROOT / "bench" / "horizon_trained_probe.py", "gear_bench_horizon_trained_probe")
    job = probe.probe_job("chained", 8, "some/model", "probe_1", tmp_path, 48)
    assert job["kind"] == "probe" and job["mode"] == "gear" and job["oracle"] is None
    overrides = job["overrides"]
    assert overrides[overrides.index("--model_name_or_path") + 1] == "some/model"
    assert overrides[overrides.index("--dataset_name") + 1] == "data/horizon/chained/k8"
    assert overrides[-4:] == ["--teacher_reference", "solution", "--failed_prefix_weight", "0.0"]
    with pytest.raises(SystemExit):
        probe.main(["--arms", "none", "--seed", "99", "--work-dir", str(tmp_path), "--out", str(tmp_path / "o.json")])
    assert "no trained model for arm 'none', seed 99" in capsys.readouterr().err


def test_the_results_pages_across_k_table_and_probe_figures_are_the_committed_json():
    report = json.loads((REPO_ROOT / "bench" / "results" / "horizon.json").read_text())
    page = (REPO_ROOT / "docs" / "results" / "horizon.md").read_text()

    def interval(cell):
        return f"{cell['mean']:+.3f} [{cell['ci_low']:+.3f}, {cell['ci_high']:+.3f}]"

    for k, body in report["variants"]["chained"].items():
        none = body["none_accuracy"]
        arms = body["arms"]
        cells = [
            f"{none['start']:.3f} -> {none['end']:.3f} [{none['end_ci_low']:.3f}, {none['end_ci_high']:.3f}]",
            f"{arms['none']['reward_last']['mean']:.3f}",
            *(
                f"{interval(arms[arm]['reward_last_minus_none'])} / {interval(arms[arm]['sampled_accuracy_minus_none'])}"
                for arm in ("oracle-prefix", "oracle-prefix-raw")
            ),
        ]
        assert f"| {k} | " + " | ".join(cells) + " |" in page, k
    probes = json.loads((REPO_ROOT / "bench" / "results" / "horizon_trained_probes.json").read_text())["models"]
    by_error = {name.split(",")[0]: f"{loc['first_onset_by_error']:.2f}" for name, loc in probes.items()}
    assert f"in {by_error['warm start']} of them at the warm start" in page.replace("\n", " ")
    assert (
        f"{by_error['none']} (`none`'s), {by_error['gear-solution']} (`gear-solution`'s) and "
        f"{by_error['gear-drop-prefix']} (`gear-drop-prefix`'s own)"
    ) in page.replace("\n", " ")


def test_the_results_pages_other_quoted_figures_are_the_committed_json():
    """The prose figures of the results page (and the README's row) read from bench/results/horizon.json."""
    chained = json.loads((REPO_ROOT / "bench" / "results" / "horizon.json").read_text())["variants"]["chained"]
    page = (REPO_ROOT / "docs" / "results" / "horizon.md").read_text().replace("\n", " ").replace("   ", " ")
    readme = (REPO_ROOT / "README.md").read_text()

    def interval(k, arm, metric):
        cell = chained[k]["arms"][arm][f"{metric}_minus_none"]
        return f"{cell['mean']:+.3f} [{cell['ci_low']:+.3f}, {cell['ci_high']:+.3f}]"

    assert f"**below GRPO: {interval('4', 'gear-drop-prefix', 'reward_last')}**" in page
    assert f"**{interval('4', 'gear-drop-prefix', 'sampled_accuracy')}** in held-out" in page
    assert interval("4", "gear-drop-prefix", "sampled_accuracy") in readme
    process = f"{interval('8', 'oracle-process', 'reward_last')} in reward, "
    assert process + f"{interval('8', 'oracle-process', 'sampled_accuracy')} held-out" in page
    process_k2 = f"K = 2: {interval('2', 'oracle-process', 'reward_last')} and "
    assert process_k2 + f"{interval('2', 'oracle-process', 'sampled_accuracy')}):" in page
    k2 = {arm: chained["2"]["arms"][arm]["reward_last_minus_none"]["mean"] for arm in ("oracle-gear", "oracle-prefix")}
    assert (
        f"({k2['oracle-gear']:+.3f} for `oracle-gear` down to {k2['oracle-prefix']:+.3f} for `oracle-prefix`)" in page
    )
    moved = ", ".join(f"{chained[k]['arms']['oracle-prefix']['localization']['moved_share']:.2f}" for k in "248")
    assert f"falls with K ({moved})" in page
    steps = {
        when: [f"{chained[k]['steps_after_error'][when]['share']:.2f}" for k in "248"]
        for when in ("start", "none_end")
    }
    assert f"{', '.join(steps['start'][:2])} and {steps['start'][2]} at the warm start" in page
    assert f"{', '.join(steps['none_end'][:2])} and {steps['none_end'][2]} after `none`'s training" in page
    share = chained["4"]["arms"]["gear-solution"]["share_of_raw_ceiling"]["reward_last"]
    assert f"{share['mean']:+.2f} [{share['ci_low']:+.2f}, {share['ci_high']:+.2f}]" in page
    for k in "248":
        held_out = f"{chained[k]['arms']['oracle-prefix']['sampled_accuracy_minus_none']['mean']:.3f}"
        assert held_out in readme, k
    # the GEAR-shaped oracles at K = 8: the bullet's held-out figures, and the README's
    gear_k8, wide_k8 = (interval("8", arm, "sampled_accuracy") for arm in ("oracle-gear", "oracle-two-sided-0.9"))
    assert f"`oracle-gear` ties GRPO ({gear_k8} held-out), `oracle-two-sided-0.5` sits just below it held-out " in page
    below = sum(v < 0 for v in chained["8"]["arms"]["oracle-two-sided-0.5"]["sampled_accuracy_minus_none"]["values"])
    assert f"({interval('8', 'oracle-two-sided-0.5', 'sampled_accuracy')}, {below} of 8 seeds below)" in page
    assert f"`oracle-gear` {gear_k8} held-out, `oracle-two-sided-0.9` {wide_k8}" in readme


def test_the_results_pages_gear_shaped_oracle_table_is_the_committed_json():
    """Each row of the table of GEAR-shaped oracles (K = 4, then 2, then 8): mass moved, blame ratio, the paired
    differences and the number of seeds below `none`, all from bench/results/horizon.json; within a K the rows are
    ordered by the mass moved. At K = 8, how often each ran past K lines as quoted."""
    report = json.loads((REPO_ROOT / "bench" / "results" / "horizon.json").read_text())
    page = (REPO_ROOT / "docs" / "results" / "horizon.md").read_text()
    oracles = ("oracle-gear", "oracle-two-sided-0.5", "oracle-strong", "oracle-two-sided-0.9", "oracle-prefix")
    for k in ("4", "2", "8"):
        arms = report["variants"]["chained"][k]["arms"]
        rows = {}
        for arm in oracles:
            body = arms[arm]
            diffs = [body[f"{metric}_minus_none"] for metric in ("reward_last", "sampled_accuracy")]
            cells = [
                f"`{arm}`",
                k,
                f"{body['localization']['moved_share']:.2f}",
                f"{body['localization']['blame_ratio']:.2f}",
                *(f"{d['mean']:+.3f} [{d['ci_low']:+.3f}, {d['ci_high']:+.3f}]" for d in diffs),
                ", ".join(str(sum(v < 0 for v in d["values"])) for d in diffs),
            ]
            row = "| " + " | ".join(cells) + " |"
            assert row in page, (k, arm)
            rows[arm] = page.index(row)
        by_position = sorted(oracles, key=rows.get)
        moved = [arms[arm]["localization"]["moved_share"] for arm in by_position]
        assert moved == sorted(moved), k
    flat = page.replace("\n  ", " ").replace("\n", " ")
    for k in ("4", "8"):
        cpu = [report["variants"]["chained"][k]["arms"][arm]["cpu_s_per_run"] for arm in oracles[:4]]
        assert f"{min(cpu):.0f}-{max(cpu):.0f} CPU-seconds a run at K = {k}" in flat
    overrun = report["variants"]["chained"]["8"]["overrun"]["arms"]
    share = {arm: sum(overrun[arm].values()) / len(overrun[arm]) for arm in (*oracles[:4], "none")}
    low, high = min(share[a] for a in oracles[:4]), max(share[a] for a in oracles[:4])
    assert f"({low:.3f}-{high:.3f} of held-out samples, `none` {share['none']:.3f})" in flat


def test_the_independent_calibration_quoted_in_data_readme_is_the_committed_json():
    """data/README.md's table of the independent warm start's GRPO runs (gain over the start per seed, and the mean
    with its interval, held-out and in final-window reward) and the 60-step figures, also on the results page."""
    readme = (REPO_ROOT / "data" / "README.md").read_text()
    page = (REPO_ROOT / "docs" / "results" / "horizon.md").read_text().replace("\n", " ")

    def gains(name):
        cell = json.loads((REPO_ROOT / "bench" / "results" / name).read_text())["variants"]["independent"]["4"]
        start, arm = cell["none_accuracy"]["start"], cell["arms"]["none"]
        out = {}
        for metric in ("sampled_accuracy", "reward_last"):
            x = arm[metric]
            out[metric] = f"{x['mean'] - start:+.3f} [{x['ci_low'] - start:+.3f}, {x['ci_high'] - start:+.3f}]"
            out[metric + "_seeds"] = [f"{v - start:+.3f}" for v in x["values"]]
        return out

    for name in ("horizon_calibration_independent.json", "horizon_calibration_independent_lr2e-4.json",
                 "horizon_calibration_independent_lr3e-4.json"):  # fmt: skip
        g = gains(name)
        row = next(line for line in readme.splitlines() if f"`bench/results/{name}`" in line)
        cells = [cell.strip().replace("*", "") for cell in row.split("|")]
        assert cells[2] == ", ".join(g["sampled_accuracy_seeds"]), name
        assert cells[3:5] == [g["sampled_accuracy"], g["reward_last"]], name
    g = gains("horizon_calibration_independent_60steps.json")
    flat = readme.replace("\n", " ").replace("*", "")
    assert f"{', '.join(g['sampled_accuracy_seeds'])}, {g['sampled_accuracy']}" in flat
    assert f"{', '.join(g['reward_last_seeds'])} over the start, {g['reward_last']}" in flat
    assert f"{g['sampled_accuracy']} held-out and {g['reward_last']} in training reward" in page


INDEPENDENT_ORACLES = (
    "oracle-gear",
    "oracle-strong",
    "oracle-two-sided-0.5",
    "oracle-process",
    "oracle-prefix-raw",
    "oracle-two-sided-0.9",
    "oracle-prefix",
)


def independent_row(arm: str, body: dict, overrun: dict, k: int | None = None) -> str:
    """A row of the results page's `independent` tables, from the report's cell of `arm` (with a K column first where
    `k` is given)."""
    diffs = [body[f"{metric}_minus_none"] for metric in ("reward_last", "sampled_accuracy")]
    moved = body["localization"]["moved_share"] if arm != "oracle-process" else None
    per_seed = list(overrun[arm].values())
    cells = [
        *([] if k is None else [str(k)]),
        f"`{arm}`",
        *(f"{d['mean']:+.3f} [{d['ci_low']:+.3f}, {d['ci_high']:+.3f}]" for d in diffs),
        ", ".join(str(sum(v < 0 for v in d["values"])) for d in diffs),
        "" if moved is None else f"{moved:.2f}",
        f"{sum(per_seed) / len(per_seed):.3f}",
    ]
    return "| " + " | ".join(cells) + " |"


def test_the_independent_table_and_figures_on_the_results_page_are_the_committed_json():
    """The results page's `independent` K = 4 rows (paired differences, seeds below `none`, mass moved, overrun) and
    the prose figures around them read from bench/results/horizon.json."""
    report = json.loads((REPO_ROOT / "bench" / "results" / "horizon.json").read_text())
    page = (REPO_ROOT / "docs" / "results" / "horizon.md").read_text()
    cell = report["variants"]["independent"]["4"]
    overrun = cell["overrun"]["arms"]
    for arm in INDEPENDENT_ORACLES:
        if arm in cell["arms"]:
            assert independent_row(arm, cell["arms"][arm], overrun) in page, arm
    flat = page.replace("\n  ", " ").replace("\n", " ")
    none = cell["none_accuracy"]
    assert (
        f"held-out sampled accuracy from {none['start']:.3f} to {none['end']:.3f} "
        f"[{none['end_ci_low']:.3f}, {none['end_ci_high']:.3f}] (+{none['end'] - none['start']:.3f}" in flat
    )
    prefix = cell["arms"]["oracle-prefix"]
    assert f"(held-out {prefix['sampled_accuracy']['mean']:.3f} against the warm start's {none['start']:.3f})" in flat
    # the seed that ran past K most fell furthest, the one that ran past least fell least
    runs = {(run["label"], run["seed"]): run["eval"]["sampled_accuracy"] for run in report["runs"]["independent-k4"]}
    gap = {int(seed): runs["oracle-prefix", int(seed)] - runs["none", int(seed)] for seed in overrun["oracle-prefix"]}
    most = max(overrun["oracle-prefix"], key=overrun["oracle-prefix"].get)
    least = min(overrun["oracle-prefix"], key=overrun["oracle-prefix"].get)
    assert min(gap.values()) == gap[int(most)] and max(gap.values()) == gap[int(least)]
    assert (
        f"({overrun['oracle-prefix'][most]:.2f} of its held-out samples) fell furthest ({gap[int(most)]:+.3f}" in flat
    )
    assert f"the one that barely did ({overrun['oracle-prefix'][least]:.2f}) least ({gap[int(least)]:+.3f})" in flat
    assert f"(blame ratio {prefix['localization']['blame_ratio']:.1f})" in flat
    moved = report["variants"]["chained"]["4"]["arms"]["oracle-prefix"]["localization"]["moved_share"]
    assert f"which moves as much mass ({moved:.2f})" in flat
    later = ("oracle-strong", "oracle-two-sided-0.5")  # the K = 4 table's arms run sessions after the others
    cpu = [cell["arms"][arm]["cpu_s_per_run"] for arm in ("none", *INDEPENDENT_ORACLES) if arm not in later]
    assert f"{min(cpu):.0f}-{max(cpu):.0f} CPU-seconds a run" in flat
    later_cpu = [r["cpu_s"] for r in report["runs"]["independent-k4"] if r["label"] in later]
    assert f"the two later arms' {min(later_cpu):.0f}-{max(later_cpu):.0f} on" in flat
    two_sided = overrun["oracle-two-sided-0.9"]
    gap2 = {seed: runs["oracle-two-sided-0.9", int(seed)] - runs["none", int(seed)] for seed in two_sided}
    most = max(two_sided, key=two_sided.get)
    assert min(gap2.values()) == gap2[most]
    assert (
        f"its seed {most} ran past K lines in {two_sided[most]:.2f} of its samples and fell furthest ({gap2[most]:+.3f}"
        in flat
    )
    shares = cell["steps_after_error"]
    assert (
        f"0.{shares['start']['share'] * 100:.0f} at the warm start, 0.{shares['none_end']['share'] * 100:.0f} after"
        in flat
    )


def test_the_independent_horizon_table_on_the_results_page_is_the_committed_json():
    """The results page's `independent` rows across K (GRPO's start and end, the ceiling's paired differences, its
    mass moved and overrun) and the other arms run at K = 2 and 8 read from bench/results/horizon.json; K = 4's
    overrun-free diagnostic arm too."""
    report = json.loads((REPO_ROOT / "bench" / "results" / "horizon.json").read_text())
    page = (REPO_ROOT / "docs" / "results" / "horizon.md").read_text()
    cells = report["variants"]["independent"]
    assert set(cells) >= {"2", "4", "8"}
    for k, cell in cells.items():
        none, prefix = cell["none_accuracy"], cell["arms"]["oracle-prefix"]
        diffs = [prefix[f"{metric}_minus_none"] for metric in ("reward_last", "sampled_accuracy")]
        overrun = cell["overrun"]["arms"]
        share = {arm: sum(overrun[arm].values()) / len(overrun[arm]) for arm in ("none", "oracle-prefix")}
        row = [
            k,
            f"{none['start']:.3f} -> {none['end']:.3f} [{none['end_ci_low']:.3f}, {none['end_ci_high']:.3f}]",
            f"{cell['arms']['none']['reward_last']['mean']:.3f}",
            " / ".join(f"{d['mean']:+.3f} [{d['ci_low']:+.3f}, {d['ci_high']:+.3f}]" for d in diffs),
            ", ".join(str(sum(v < 0 for v in d["values"])) for d in diffs),
            f"{prefix['localization']['moved_share']:.2f}",
            f"{share['oracle-prefix']:.3f} ({share['none']:.3f})",
        ]
        assert "| " + " | ".join(row) + " |" in page, k
        if k != "4":
            for arm in INDEPENDENT_ORACLES[:-1]:
                if arm in cell["arms"]:
                    assert independent_row(arm, cell["arms"][arm], overrun, k=int(k)) in page, (k, arm)
    flat = page.replace("\n  ", " ").replace("\n", " ")
    # K = 8's range is of the runs that section quotes (`none`, `oracle-prefix`: an earlier machine); the arms added
    # at K = 8 later quote their own cost
    shaped = ("oracle-gear", "oracle-strong", "oracle-two-sided-0.5", "oracle-two-sided-0.9")  # K = 2: later
    cpu = {
        "2": [body["cpu_s_per_run"] for arm, body in cells["2"]["arms"].items() if arm not in shaped],
        "8": [cells["8"]["arms"][arm]["cpu_s_per_run"] for arm in ("none", "oracle-prefix")],
    }
    assert (
        f"{min(cpu['2']):.0f}-{max(cpu['2']):.0f} CPU-seconds a run at K = 2, "
        f"{min(cpu['8']):.0f}-{max(cpu['8']):.0f} at K = 8)" in flat
    )
    later = [r["cpu_s"] for r in report["runs"]["independent-k2"] if r["label"] in shaped]
    assert f"at {min(later):.0f}-{max(later):.0f} CPU-seconds a run on a later session's machine" in flat
    held_out = [cells["2"]["arms"][arm]["sampled_accuracy_minus_none"] for arm in shaped]
    both = [cells["2"]["arms"][a][f"{m}_minus_none"] for a in shaped for m in ("reward_last", "sampled_accuracy")]
    assert all(h["ci_low"] <= 0 <= h["ci_high"] for h in both)  # "every interval ... holds zero in both metrics"
    means = sorted(h["mean"] for h in held_out)
    assert f"(means from {means[-1]:+.3f} to {means[0]:+.3f} held-out)" in flat
    process = cells["2"]["arms"].get("oracle-process")
    if process:
        at_or_above = sum(v >= 0 for v in process["reward_last_minus_none"]["values"])
        assert f"(at or above `none` on {at_or_above} of 8 seeds)" in flat
    four = cells["4"]
    if "oracle-prefix-keep-close" in four["arms"]:
        keep, prefix = (four["arms"][arm]["sampled_accuracy"]["values"] for arm in ("oracle-prefix-keep-close",
                                                                                     "oracle-prefix"))  # fmt: skip
        assert independent_row("oracle-prefix-keep-close", four["arms"]["oracle-prefix-keep-close"],
                               four["overrun"]["arms"], k=4) in page  # fmt: skip
        gain = [a - b for a, b in zip(keep, prefix, strict=True)]
        assert all(g > 0 for g in gain)
        flat = page.replace("\n  ", " ").replace("\n", " ")
        assert f"above `oracle-prefix` on all 8 seeds, by {sum(gain) / len(gain):+.3f} held-out in the mean" in flat
    eight = cells["8"]
    runs = {(run["label"], run["seed"]): run["eval"]["sampled_accuracy"] for run in report["runs"]["independent-k8"]}
    gap = {seed: runs["oracle-prefix", seed] - runs["none", seed] for seed in range(8)}
    worst = min(gap, key=gap.get)
    assert eight["overrun"]["arms"]["oracle-prefix"][str(worst)] == 0
    flat = page.replace("\n  ", " ").replace("\n", " ")
    assert f"(seed {worst}, {gap[worst]:+.3f}) never did" in flat
    overrun = eight["overrun"]["arms"]["oracle-prefix"]
    most = max(overrun, key=overrun.get)
    assert f"(the most, seed {most}, in {overrun[most]:.2f} of its samples)" in flat
    none, prefix = eight["none_accuracy"], eight["arms"]["oracle-prefix"]
    assert (
        f"held-out {prefix['sampled_accuracy']['mean']:.3f} at the end against the start's {none['start']:.3f}, "
        f"final-window reward {prefix['reward_last']['mean']:.3f}" in flat
    )


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

    monkeypatch.setattr(horizon.teacher_sweep, "run_jobs", run_jobs)
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


LATER_DISTILL_ARMS = ("gear-distill-0.25", "gear-distill-1.0")


def test_the_independent_k8_ceiling_section_is_the_committed_json():
    """The results page's `independent` K = 8 section: a row per arm run there besides `none` and `oracle-prefix`,
    each GEAR-shaped arm's share of `oracle-process`'s gain with its localization, and the cost of those runs."""
    report = json.loads((REPO_ROOT / "bench" / "results" / "horizon.json").read_text())
    page = (REPO_ROOT / "docs" / "results" / "horizon.md").read_text()
    cell = report["variants"]["independent"]["8"]
    process = cell["arms"]["oracle-process"]
    assert all(process[f"{m}_minus_none"]["ci_low"] > 0 for m in ("reward_last", "sampled_accuracy"))
    # the two later distillation weights have their own section (test_the_distillation_weights_section_...)
    added = [arm for arm in cell["arms"] if arm not in ("none", "oracle-prefix", *LATER_DISTILL_ARMS)]
    for arm in added:
        assert independent_row(arm, cell["arms"][arm], cell["overrun"]["arms"], k=8) in page, arm

    def share(value):
        return "n/a" if value is None else f"{value['mean']:+.2f} [{value['ci_low']:+.2f}, {value['ci_high']:+.2f}]"

    def num(value):
        return "n/a" if value is None else f"{value:.2f}"

    for arm in added:
        body = cell["arms"][arm]
        if arm == "oracle-process" or not body.get("localization"):
            continue
        loc, shares = body["localization"], body["share_of_process_ceiling"]
        row = [
            f"`{arm}`",
            share(shares["reward_last"]),
            share(shares["sampled_accuracy"]),
            f"{num(loc['onset_rate'])} ({num(loc['onset_rate_random'])})",
            num(loc["first_onset_by_error"]),
            f"{num(loc['blame_ratio'])} ({num(loc['blame_ratio_random'])})",
        ]
        assert "| " + " | ".join(row) + " |" in page, arm
    cpu = [cell["arms"][arm]["cpu_s_per_run"] for arm in added]
    flat = page.replace("\n  ", " ").replace("\n", " ")
    # the prose around the tables
    none = cell["none_accuracy"]
    assert f"where GRPO itself goes from {none['start']:.3f} to {none['end']:.3f}" in flat
    solution, signed = (cell["arms"][arm] for arm in ("gear-solution", "gear-signed"))
    loc = solution["localization"]
    assert (
        f"token in {loc['onset_rate']:.2f} of them, {loc['onset_rate_random']:.2f} at a random token, and its first "
        f"onset falls at or before the error in {loc['first_onset_by_error']:.2f}), but GEAR's weights put "
        f"{loc['blame_ratio']:.2f} times the mean weight on the error and move {loc['moved_share']:.2f} of the" in flat
    )
    loc = signed["localization"]
    assert f"(blame ratio {loc['blame_ratio']:.2f}, {loc['moved_share']:.2f} of the mass moved)" in flat
    reward, held_out = (signed[f"{m}_minus_none"] for m in ("reward_last", "sampled_accuracy"))
    assert f"({sum(v > 0 for v in reward['values'])} of 8 seeds above)" in flat
    assert (
        f"({sum(v > 0 for v in held_out['values'])} of 8 above; the interval's lower end is "
        f"{held_out['ci_low']:+.5f})" in flat
    )
    assert f"on another machine, at {min(cpu):.0f}-{max(cpu):.0f} CPU-seconds a run" in flat
    # gear-distill's bullet: its seeds above GRPO and its held-out interval and share
    distill = cell["arms"]["gear-distill"]
    reward, held_out = (distill[f"{m}_minus_none"] for m in ("reward_last", "sampled_accuracy"))
    held_share = distill["share_of_process_ceiling"]["sampled_accuracy"]
    assert (
        f"({sum(v > 0 for v in reward['values'])} of 8 seeds above), **{held_out['mean']:+.3f} "
        f"[{held_out['ci_low']:+.3f}, {held_out['ci_high']:+.3f}] held-out** "
        f"({sum(v > 0 for v in held_out['values'])} of 8 above), {held_share['mean']:+.2f} "
        f"[{held_share['ci_low']:+.2f}, {held_share['ci_high']:+.2f}] of `oracle-process`'s held-out gain" in flat
    )
    # the two options' shares of the ceiling in the conclusion, and of oracle-prefix-raw's gain in its bullet
    process_shares = [
        cell["arms"][a]["share_of_process_ceiling"]["sampled_accuracy"]["mean"]
        for a in ("gear-signed", "gear-distill")
    ]
    assert "about a third of it held-out on seeds 0-7 ({:+.2f} and {:+.2f})".format(*process_shares) in flat
    raw = cell["arms"]["oracle-prefix-raw"]["sampled_accuracy_minus_none"]
    assert (
        f"**{raw['mean']:+.3f} [{raw['ci_low']:+.3f}, {raw['ci_high']:+.3f}]** ({sum(v > 0 for v in raw['values'])} of 8 seeds above)"
        in flat
    )
    raw_shares = [
        cell["arms"][a]["share_of_raw_ceiling"]["sampled_accuracy"]["mean"] for a in ("gear-signed", "gear-distill")
    ]
    assert "`gear-distill` recover {:.2f} and {:.2f} of this oracle's held-out gain".format(*raw_shares) in flat


@pytest.mark.parametrize("arm", ["gear-signed", "gear-distill"])
def test_the_replications_on_the_results_page_are_the_committed_json(horizon, arm):
    """The replications of `gear-signed` and `gear-distill` at independent K = 8 ran on seeds the study's report does
    not hold, and each one's page rows (seeds 0-7, 8-15, and the 16 pooled) are the two committed reports' paired
    differences."""
    results = REPO_ROOT / "bench" / "results"
    study = json.loads((results / "horizon.json").read_text())
    replication = json.loads((results / "horizon_replication" / "horizon.json").read_text())
    page = (REPO_ROOT / "docs" / "results" / "horizon.md").read_text()
    assert replication["config"]["budget"]["seeds"] == list(range(8, 16))
    assert not set(replication["config"]["budget"]["seeds"]) & set(range(8))
    assert replication["config"]["variants"]["independent"] == study["config"]["variants"]["independent"]
    bodies = {
        "0-7": study["variants"]["independent"]["8"]["arms"][arm],
        "8-15": replication["variants"]["independent"]["8"]["arms"][arm],
    }
    metrics = ("reward_last", "sampled_accuracy")

    def row(name, diffs):
        above = ", ".join(str(sum(v > 0 for v in d["values"])) for d in diffs)
        return f"| {name} | {interval_text(diffs[0])} | {interval_text(diffs[1])} | {above} |"

    for name, body in bodies.items():
        assert row(name, [body[f"{m}_minus_none"] for m in metrics]) in page, name
    pooled = [
        horizon.teacher_sweep.paired_interval([v for b in bodies.values() for v in b[f"{m}_minus_none"]["values"]])
        for m in metrics
    ]
    assert all(p["n_seeds"] == 16 for p in pooled)
    assert row("0-15 pooled", pooled) in page
    none = study["variants"]["independent"]["8"]["arms"]["none"]["sampled_accuracy"]["values"]
    flat = page.replace("\n  ", " ").replace("\n", " ")
    assert f"({max(none) - min(none):.2f} between the best and the worst of `none`'s seeds 0-7)" in flat


def test_the_second_replication_on_the_results_page_is_the_committed_json(horizon):
    """The second replication (seeds 16-31, declared before it ran) and its page: each arm's rows for the three sets
    of seeds and the 32 pooled, the arms against each other, the collapsed `none` run of seed 25 and the look without
    it, all read from the three committed reports."""
    results = REPO_ROOT / "bench" / "results"
    reports = [
        json.loads((results / path / "horizon.json").read_text())
        for path in (".", "horizon_replication", "horizon_replication_2")
    ]
    second = reports[2]
    page = (REPO_ROOT / "docs" / "results" / "horizon.md").read_text()
    flat = page.replace("\n  ", " ").replace("\n", " ")
    seeds = second["config"]["budget"]["seeds"]
    assert seeds == list(range(16, 32))
    assert second["config"]["variants"]["independent"] == reports[0]["config"]["variants"]["independent"]
    cells = [r["variants"]["independent"]["8"]["arms"] for r in reports]
    metrics = ("reward_last", "sampled_accuracy")
    paired = horizon.teacher_sweep.paired_interval

    def row(arm, name, diffs):
        above = ", ".join(str(sum(v > 0 for v in d["values"])) for d in diffs)
        return f"| `{arm}` | {name} | {interval_text(diffs[0])} | {interval_text(diffs[1])} | {above} |"

    def values(arm, metric, cell_list=cells):
        return [v for cell in cell_list for v in cell[arm][f"{metric}_minus_none"]["values"]]

    for arm in ("gear-signed", "gear-distill"):
        for name, cell in zip(("0-7", "8-15", "16-31"), cells, strict=True):
            assert row(arm, name, [cell[arm][f"{m}_minus_none"] for m in metrics]) in page, (arm, name)
        pooled = [paired(values(arm, m)) for m in metrics]
        assert all(p["n_seeds"] == 32 for p in pooled)
        assert row(arm, "0-31 pooled", pooled) in page, arm
    # the declared test: the held-out interval on seeds 16-31 above zero, for neither arm
    low = {arm: cells[2][arm]["sampled_accuracy_minus_none"]["ci_low"] for arm in ("gear-distill", "gear-signed")}
    assert all(v <= 0 for v in low.values())
    assert "`gear-distill`'s held-out interval ends at {:.3f}, `gear-signed`'s at {:.3f}".format(*low.values()) in flat
    # the two arms against each other over the 32 seeds
    against = [
        paired([a - b for a, b in zip(values("gear-distill", m), values("gear-signed", m), strict=True)])
        for m in metrics
    ]
    assert (
        f"`gear-distill` - `gear-signed` is {interval_text(against[1])} held-out and {interval_text(against[0])}"
        in flat
    )
    # seed 25: GRPO collapsed, and the look without it
    at = seeds.index(25)
    runs = {r["label"]: r for r in second["runs"]["independent-k8"] if r["seed"] == 25}
    assert runs["none"]["eval"]["sampled_accuracy"] == runs["none"]["eval"]["greedy_accuracy"] == 0.0
    start = second["variants"]["independent"]["8"]["start"]["greedy_accuracy"]
    assert f"(the warm start's greedy accuracy is {start:.3f})" in flat
    diffs = [cells[2][a]["sampled_accuracy_minus_none"]["values"][at] for a in ("gear-signed", "gear-distill")]
    assert "largest differences on these seeds (+{:.3f}, +{:.3f})".format(*diffs) in flat
    assert all(
        d == max(cells[2][a]["sampled_accuracy_minus_none"]["values"])
        for d, a in zip(diffs, ("gear-signed", "gear-distill"), strict=True)
    )
    assert (
        "ended at {} and {}".format(*(runs[a]["eval"]["sampled_accuracy"] for a in ("gear-signed", "gear-distill")))
        in flat
    )
    without = {
        arm: [
            paired([v for i, v in enumerate(cells[2][arm][f"{m}_minus_none"]["values"]) if i != at]) for m in metrics
        ]
        for arm in ("gear-distill", "gear-signed")
    }
    d, g = without["gear-distill"], without["gear-signed"]
    assert (
        f"`gear-distill` {interval_text(d[1])} held-out and {interval_text(d[0])} in training reward, `gear-signed` {interval_text(g[1])} and {interval_text(g[0])}"
        in flat
    )


def test_the_k16_paragraph_is_the_committed_start_scores():
    """Why K = 16 is not a cell: both warm starts' scores there, as committed in bench/results/horizon_k16_start.json
    with the study's start settings (the budget 12 K + 16, the same sampling)."""
    scores = json.loads((REPO_ROOT / "bench" / "results" / "horizon_k16_start.json").read_text())["variants"]
    flat = (REPO_ROOT / "docs" / "results" / "horizon.md").read_text().replace("\n", " ")
    for variant, body in scores.items():
        assert body["dataset"] == f"data/horizon/{variant}/k16" and body["n"] * body["num_samples"] == 400
        assert body["accuracy"] == 0.0 and body["pass_at_k"] == 0.0
    assert "Both warm starts score 0.000 at K = 16 (200 test problems x 2 samples each" in flat
    independent, chained = scores["independent"], scores["chained"]
    assert f"only {independent['finished_frac']:.3f} of its samples end within the 12 K + 16 = 208-token" in flat
    assert f"writes {independent['lines_before_break']['median']:.0f} well-formed lines" in flat
    assert (
        f"ending {chained['finished_frac']:.2f} of them (median {chained['lines_before_break']['median']:.0f}" in flat
    )


def test_the_distillation_weights_section_is_the_committed_json(horizon):
    """The rows of `distillation_weight` 0.25, 0.5 and 1.0 at independent K = 8 (seeds 0-7): each against `none` and
    against `gear-distill` paired by seed, the seeds above `none`, the declared verdict and the cost, all from
    bench/results/horizon.json."""
    report = json.loads((REPO_ROOT / "bench" / "results" / "horizon.json").read_text())
    flat = (REPO_ROOT / "docs" / "results" / "horizon.md").read_text().replace("\n  ", " ").replace("\n", " ")
    arms = report["variants"]["independent"]["8"]["arms"]
    paired = horizon.teacher_sweep.paired_interval

    def against_blend(arm):
        ours, blend = (arms[a]["sampled_accuracy_minus_none"]["values"] for a in (arm, "gear-distill"))
        return paired([a - b for a, b in zip(ours, blend, strict=True)])

    for arm, weight in (("gear-distill-0.25", "0.25"), ("gear-distill", "0.5"), ("gear-distill-1.0", "1.0")):
        diffs = [arms[arm][f"{m}_minus_none"] for m in ("reward_last", "sampled_accuracy")]
        assert all(d["n_seeds"] == 8 for d in diffs)
        versus = "(itself)" if arm == "gear-distill" else interval_text(against_blend(arm))
        above = ", ".join(str(sum(v > 0 for v in d["values"])) for d in diffs)
        row = f"| `{arm}` | {weight} | {interval_text(diffs[0])} | {interval_text(diffs[1])} | {versus} | {above} |"
        assert row in flat, arm
    light, pure = against_blend("gear-distill-0.25"), against_blend("gear-distill-1.0")
    # the declared rule: a candidate only with a held-out interval above gear-distill's
    assert light["ci_low"] <= 0 and pure["ci_high"] < 0
    assert f"0.25's held-out gain over `gear-distill` is {interval_text(light)}, an interval across zero" in flat
    below = sum(v < 0 for v in pure["values"])
    assert f"below `gear-distill` on {below} of 8 seeds" in flat
    share = arms["gear-distill-0.25"]["share_of_process_ceiling"]["sampled_accuracy"]
    assert (
        f"{share['mean']:+.2f} [{share['ci_low']:+.2f}, {share['ci_high']:+.2f}] of `oracle-process`'s held-out"
        in flat
    )
    means = [
        arms[a]["sampled_accuracy_minus_none"]["mean"]
        for a in ("gear-distill-0.25", "gear-distill", "gear-distill-1.0")
    ]
    assert "falls as the weight rises ({:+.3f}, {:+.3f}, {:+.3f} held-out)".format(*means) in flat
    cpu = [arms[a]["cpu_s_per_run"] for a in LATER_DISTILL_ARMS]
    assert f"(16 runs, {min(cpu):.0f}-{max(cpu):.0f} CPU-seconds each" in flat
    # the conclusion and the README quote the same two rows
    readme = (REPO_ROOT / "README.md").read_text()
    light, pure = (interval_text(arms[a]["sampled_accuracy_minus_none"]) for a in LATER_DISTILL_ARMS)
    assert f"at `distillation_weight` 0.25 the held-out gain on seeds 0-7 is {light}" in flat
    assert f"ties GRPO ({pure})" in flat
    assert f"`distillation_weight` 0.25 {light} held-out" in readme and f"distillation alone) {pure}" in readme
    options = (REPO_ROOT / "docs" / "configuration.md").read_text().replace("\n", " ")
    versus = interval_text(against_blend("gear-distill-0.25"))
    assert f"0.25 gains {light} held-out over GRPO, not resolved above 0.5 ({versus} paired);" in options
    assert f"ends level with GRPO ({pure}) and below 0.5" in options


def test_the_third_replication_on_the_results_page_is_the_committed_json(horizon):
    """The replication of `gear-distill-0.25` against GRPO (seeds 32-47, declared before it ran): its seeds are new to
    the study, its page rows (seeds 0-7, 32-47, and the 24 pooled) are the committed reports' paired differences,
    and the verdict the page states is the declared criterion's, the held-out interval on seeds 32-47 above zero."""
    results = REPO_ROOT / "bench" / "results"
    study = json.loads((results / "horizon.json").read_text())
    earlier = [
        json.loads((results / p / "horizon.json").read_text())
        for p in ("horizon_replication", "horizon_replication_2")
    ]
    third = json.loads((results / "horizon_replication_3" / "horizon.json").read_text())
    flat = (REPO_ROOT / "docs" / "results" / "horizon.md").read_text().replace("\n  ", " ").replace("\n", " ")
    seeds = third["config"]["budget"]["seeds"]
    assert seeds == list(range(32, 48))
    used = [*range(8), *(s for r in earlier for s in r["config"]["budget"]["seeds"])]
    assert not set(seeds) & set(used)
    assert third["config"]["variants"]["independent"] == study["config"]["variants"]["independent"]
    arm = "gear-distill-0.25"
    bodies = [r["variants"]["independent"]["8"]["arms"][arm] for r in (study, third)]
    metrics = ("reward_last", "sampled_accuracy")
    paired = horizon.teacher_sweep.paired_interval

    def row(name, diffs):
        above = ", ".join(str(sum(v > 0 for v in d["values"])) for d in diffs)
        return f"| `{arm}` | {name} | {interval_text(diffs[0])} | {interval_text(diffs[1])} | {above} |"

    pooled = [paired([v for b in bodies for v in b[f"{m}_minus_none"]["values"]]) for m in metrics]
    for name, diffs in (
        ("0-7", [bodies[0][f"{m}_minus_none"] for m in metrics]),
        ("32-47", [bodies[1][f"{m}_minus_none"] for m in metrics]),
        ("0-7 and 32-47 pooled", pooled),
    ):
        assert row(name, diffs) in flat, name
    test = bodies[1]["sampled_accuracy_minus_none"]
    assert test["n_seeds"] == 16
    if test["ci_low"] > 0:
        assert "**By the declared criterion it replicated**" in flat
    else:
        assert "**By the declared criterion it did not replicate**" in flat
        assert f"the held-out interval on seeds 32-47 ends at {test['ci_low']:+.3f}" in flat
    cpu = bodies[1]["cpu_s_per_run"], third["variants"]["independent"]["8"]["arms"]["none"]["cpu_s_per_run"]
    assert f"32 runs, {min(cpu):.0f}-{max(cpu):.0f} CPU-seconds a run on average per arm" in flat
    # the one seed below GRPO, and the range of GRPO's own ends (no collapse as at seed 25 of the second replication)
    worst = min(test["values"])
    assert f"the sixteenth, seed {seeds[test['values'].index(worst)]}, {worst:+.3f}" in flat
    ends = third["variants"]["independent"]["8"]["arms"]["none"]["sampled_accuracy"]["values"]
    assert f"held-out {min(ends):.3f}-{max(ends):.3f} at the end" in flat and min(ends) > 0.1
    # `make demo` trains the arm at seed 0: the page and Getting started say where that seed falls among the 24
    first = bodies[0]["sampled_accuracy_minus_none"]["values"][0]
    both = [v for b in bodies for v in b["sampled_accuracy_minus_none"]["values"]]
    assert study["config"]["budget"]["seeds"][0] == 0 and len(both) == 24
    assert f"which at seed 0 ends level with GRPO ({first:+.3f} held-out)" in flat
    started = (REPO_ROOT / "docs" / "getting-started.md").read_text().replace("\n", " ")
    ahead = sum(v > 0 for v in both)
    assert first <= 0 and f"one of the {24 - ahead} seeds in 24 where GEAR does not end ahead held-out" in started
    assert f"over 24 seeds the setting is ahead held-out on {ahead}, by {interval_text(pooled[1])}" in started
    # what the declaration fixed for a pass: configuration.md names the weight with these figures
    options = (REPO_ROOT / "docs" / "configuration.md").read_text().replace("\n", " ")
    if test["ci_low"] > 0:
        above = sum(v > 0 for v in test["values"])
        assert "the study supports where decisions are many and independent: `distillation_weight: 0.25`**" in options
        figures = f"{interval_text(test)} ({above} of 16 seeds above), {interval_text(pooled[1])} pooled"
        assert f"held-out gain over GRPO is {figures}" in options


def test_the_study_cost_paragraph_is_the_committed_reports(horizon):
    """The page's total cost of the study: each arm's CPU-seconds a run times its seeds, summed over the study's
    report, the three replications and the weight comparison, split into the arms the issue names, the diagnostic
    and added arms, and the replications."""
    results = REPO_ROOT / "bench" / "results"
    flat = (REPO_ROOT / "docs" / "results" / "horizon.md").read_text().replace("\n", " ")
    named = {
        "none",
        *("oracle-gear", "oracle-strong", "oracle-prefix", "oracle-two-sided-0.5", "oracle-two-sided-0.9"),
        *("oracle-process", "gear-answer", "gear-solution", "gear-signed", "rlsd", "token", "gear_no_entropy"),
    }

    def runs(path, keep=lambda arm: True):
        """Each run of the report as (variant, K, arm, seed) -> CPU-seconds (its arm's mean a run): a run two
        reports share (the same cached run) counts once."""
        report = json.loads(path.read_text())
        seeds = report["config"]["budget"]["seeds"]
        return {
            (variant, k, arm, seed): body["cpu_s_per_run"]
            for variant, ks in report["variants"].items()
            for k, cell in ks.items()
            for arm, body in cell["arms"].items()
            if keep(arm)
            for seed in seeds
        }

    study = results / "horizon.json"
    replications = sorted(results.glob("horizon_replication*/horizon.json"))
    assert len(replications) == 4  # three replications and the weight comparison on the third's seeds
    later = {key: cost for path in replications for key, cost in runs(path).items()}
    parts = {
        "all": {**runs(study), **later},
        "named": runs(study, lambda arm: arm in named),
        "other": runs(study, lambda arm: arm not in named),
        "replications": later,
    }
    assert {a for a in horizon.ARMS if a not in named} >= {*horizon.DIAGNOSTIC_ARMS, *horizon.ADDED_ARMS}
    count = {k: len(v) for k, v in parts.items()}
    hours = {k: sum(v.values()) / 3600 for k, v in parts.items()}
    assert count["all"] == count["named"] + count["other"] + count["replications"]
    assert f"{count['all']} runs, {hours['all']:.1f} CPU-hours, four times the issue's 8" in flat
    assert round(hours["all"] / 8) == 4
    assert f"are {count['named']} runs and {hours['named']:.1f} CPU-hours on their own" in flat
    assert f"8 CPU-hours would have allowed {8 * 3600 / count['named']:.0f} CPU-seconds a run" in flat
    costs = list(parts["all"].values())
    assert f"a run here costs {min(costs):.0f}-{max(costs):.0f} (one thread" in flat
    assert f"({count['other']} runs, {hours['other']:.1f} CPU-hours)" in flat
    assert (
        f"the three replications and the weight comparison on the third's seeds ({count['replications']} runs, "
        f"{hours['replications']:.1f} CPU-hours)" in flat
    )


def test_the_weight_comparison_on_fresh_seeds_is_the_committed_json(horizon):
    """0.25 against 0.5 (`gear-distill-0.25` - `gear-distill`), declared before it ran: `gear-distill` on the third
    replication's seeds 32-47, paired by seed with that replication's runs of 0.25 (the same `none` runs, cached, so
    both reports' `none` figures agree); the page's rows and verdict are the committed reports'."""
    results = REPO_ROOT / "bench" / "results"
    study = json.loads((results / "horizon.json").read_text())
    third = json.loads((results / "horizon_replication_3" / "horizon.json").read_text())
    weights = json.loads((results / "horizon_replication_3_weights" / "horizon.json").read_text())
    flat = (REPO_ROOT / "docs" / "results" / "horizon.md").read_text().replace("\n  ", " ").replace("\n", " ")
    assert weights["config"]["budget"]["seeds"] == third["config"]["budget"]["seeds"] == list(range(32, 48))
    assert weights["config"]["variants"]["independent"] == third["config"]["variants"]["independent"]
    cells = [r["variants"]["independent"]["8"]["arms"] for r in (study, third, weights)]
    assert cells[2]["none"]["sampled_accuracy"]["values"] == cells[1]["none"]["sampled_accuracy"]["values"]
    paired = horizon.teacher_sweep.paired_interval
    metrics = ("reward_last", "sampled_accuracy")

    def light_minus_blend(light, blend, metric):
        a, b = light["gear-distill-0.25"][metric]["values"], blend["gear-distill"][metric]["values"]
        return [x - y for x, y in zip(a, b, strict=True)]

    sets = {
        "0-7": [light_minus_blend(cells[0], cells[0], m) for m in metrics],
        "32-47": [light_minus_blend(cells[1], cells[2], m) for m in metrics],
    }
    sets["0-7 and 32-47 pooled"] = [sets["0-7"][i] + sets["32-47"][i] for i in range(2)]
    for name, (reward, held_out) in sets.items():
        above = f"{sum(v > 0 for v in reward)}, {sum(v > 0 for v in held_out)}"
        row = f"| {name} | {interval_text(paired(reward))} | {interval_text(paired(held_out))} | {above} |"
        assert row in flat, name
    blend = [cells[2]["gear-distill"][f"{m}_minus_none"] for m in metrics]
    above = ", ".join(str(sum(v > 0 for v in d["values"])) for d in blend)
    assert (
        f"| `gear-distill` - `none`, 32-47 | {interval_text(blend[0])} | {interval_text(blend[1])} | {above} |" in flat
    )
    test = paired(sets["32-47"][1])
    options = (REPO_ROOT / "docs" / "configuration.md").read_text().replace("\n", " ")
    if test["ci_low"] > 0:
        verdict = "**0.25 is resolved above 0.5 on fresh seeds**"
    elif test["ci_high"] < 0:
        verdict = "**0.5 is above 0.25 on fresh seeds**"
    else:
        verdict = "**Not resolved on fresh seeds either**"
    assert verdict in flat and f"0.25 - 0.5 on seeds 32-47 is {interval_text(test)} held-out" in flat
    assert f"0.25 - 0.5 on seeds 32-47 is {interval_text(test)} held-out" in options
    # 0.5's own gain pooled over every seed it ran on (0-47): the study and the two replications, and these seeds
    reports = [
        study,
        *(
            json.loads((results / p / "horizon.json").read_text())
            for p in ("horizon_replication", "horizon_replication_2")
        ),
        weights,
    ]
    pooled = paired(
        [
            v
            for r in reports
            for v in r["variants"]["independent"]["8"]["arms"]["gear-distill"]["sampled_accuracy_minus_none"]["values"]
        ]
    )
    assert sorted(s for r in reports for s in r["config"]["budget"]["seeds"]) == list(range(48))
    assert f"pooled over its 48 seeds (0-47) its held-out gain is {interval_text(pooled)}" in flat
    declared = f"not a test declared for it; {interval_text(pooled)} over its 48 seeds"
    assert f"{interval_text(blend[1])} over GRPO too ({declared})" in options
