"""`make demo` (GRPO and a GEAR setting side by side on the horizon task; `make compare` is its earlier name) and
recipes/tiny/compare_summary.py, which prints its figures. The target's commands are read from `make -n`, with the
Makefile's variables expanded."""

from __future__ import annotations

import importlib
import json
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.entry_points.test_demo_summary import report, split_commands, write_run
from tests.utils import load_file

REPO = Path(__file__).resolve().parents[2]
compare_summary = load_file(REPO / "recipes" / "tiny" / "compare_summary.py", "gear_compare_summary")
horizon = importlib.import_module("bench.horizon")


def history(rewards):
    return [(step, reward) for step, reward in enumerate(rewards, start=1)]


def test_arm_lines_average_the_first_and_final_quarter_of_the_steps():
    # 8 steps: windows of 2, the first two (0.0, 0.2) and the last two (0.6, 1.0)
    lines = compare_summary.arm_lines("GRPO", report(0.2), report(0.25), history([0, 0.2, 0, 0, 0, 0, 0.6, 1.0]))
    assert lines[0] == (
        "GRPO: held-out sampled (temperature 1) accuracy (100 test problems of data/calc_tools x 2 samples): "
        "start 0.200 -> end 0.250 (+0.050)"
    )
    assert lines[1].endswith("first and last 2 logged steps: 0.100 -> 0.800")
    with pytest.raises(ValueError, match="GRPO"):
        compare_summary.arm_lines("GRPO", report(0.2), report(0.2), [])


def study(seeds, arms):
    """A study report holding, per arm, the per-seed differences from `none` of both metrics."""
    return {"config": {"budget": {"seeds": seeds}}, "variants": {"independent": {"8": {"arms": {
        arm: {"sampled_accuracy_minus_none": {"values": acc}, "reward_last_minus_none": {"values": rew}}
        for arm, (acc, rew) in arms.items()
    }}}}}  # fmt: skip


def test_study_line_pools_the_paired_differences_of_every_report_given():
    first = study([0, 1], {"gear-distill": ([0.01, 0.03], [0.0, 0.02]), "none": ([0, 0], [0, 0])})
    second = study([2, 3], {"gear-distill": ([0.05, 0.03], [0.04, 0.02])})
    line = compare_summary.study_line([first], "independent", "8", "gear-distill")
    # two seeds: mean 0.02, sd 0.01414, t(0.975, 1) = 12.706: half-width 0.127
    assert "paired over 2 seeds" in line and "held-out +0.020 [-0.107, +0.147]" in line
    line = compare_summary.study_line([first, second], "independent", "8", "gear-distill")
    # four seeds 0.01, 0.03, 0.05, 0.03: mean 0.03, sd 0.01633, t(0.975, 3) = 3.182: half-width 0.026
    assert "paired over 4 seeds" in line and "held-out +0.030 [+0.004, +0.056]" in line
    assert "final-window training reward +0.020 [-0.006, +0.046]" in line
    with pytest.raises(ValueError, match="share seeds \\[0, 1\\]"):
        compare_summary.study_line([first, first], "independent", "8", "gear-distill")
    with pytest.raises(KeyError, match="gear-signed.*it has \\['gear-distill', 'none'\\]"):
        compare_summary.study_line([first], "independent", "8", "gear-signed")
    with pytest.raises(KeyError, match="chained K = 8"):
        compare_summary.study_line([first], "chained", "8", "gear-distill")


def test_report_lines_plot_both_curves_and_the_end_difference(tmp_path):
    runs = {}
    for name, rewards in (("grpo", [0.1, 0.1, 0.2, 0.3]), ("gear", [0.1, 0.2, 0.3, 0.5])):
        (tmp_path / name).mkdir()
        runs[name] = write_run(tmp_path / name, {4: history(rewards)})
    credit = tmp_path / "credit"
    credit.mkdir()
    (credit / "credit_test.html").write_text("<html></html>")
    plot = tmp_path / "reward.png"
    lines = compare_summary.report_lines(
        report(0.2), [("GRPO", runs["grpo"], report(0.25)), ("GEAR", runs["gear"], report(0.3))], plot, credit
    )
    assert lines[1].endswith("0.100 -> 0.300") and lines[3].endswith("0.100 -> 0.500")
    assert lines[4] == "GEAR - GRPO, held-out accuracy at the end (this seed): +0.050"
    assert lines[5] == f"both training-reward curves: {plot}" and plot.stat().st_size > 1000
    assert lines[6].startswith("GEAR: per-token credit") and str(credit / "credit_test.html") in lines[6]


def compare_commands(target: str = "demo") -> list[list[str]]:
    """The `demo` target's commands, from `make -n` (variables expanded), split at `&`, `&&` and `;`."""
    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    text = subprocess.run(
        ["make", "-n", target, "PYTHON=python"], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout.replace("\\\n", " ")
    # `>` split off too, so a redirection's target is never read as a flag's value
    commands = split_commands(text, punctuation="&;>")
    return [command for command in commands if len(command) > 2]


def options(cmd):
    parsed, args = {}, cmd[3:]
    for i, arg in enumerate(args):
        if arg.startswith("--"):
            value = args[i + 1] if i + 1 < len(args) and not args[i + 1].startswith("--") else True
            parsed.setdefault(arg, []).append(value)
    return {key: values[-1] for key, values in parsed.items()}  # the last occurrence wins, as in the parsers


def test_make_demo_trains_grpo_and_the_study_arm_it_quotes_on_the_same_seed_and_rows():
    commands = compare_commands()
    trains = [options(cmd) for cmd in commands if cmd[1:3] == ["-m", "gear_trl.train"]]
    evaluations = [options(cmd) for cmd in commands if cmd[1:3] == ["-m", "gear_trl.evaluate"]]
    summary = next(cmd for cmd in commands if cmd[1].endswith("compare_summary.py"))
    assert len(trains) == 2 and len(evaluations) == 3
    grpo, gear = trains
    assert grpo["--credit"] == "none"
    # The same run but for the GEAR options: same warm start, data, seed, steps, completion length.
    assert {k: v for k, v in gear.items() if k not in horizon_arm_flags()} == {
        k: v for k, v in grpo.items() if k not in horizon_arm_flags()
    }
    assert grpo["--seed"] == gear["--seed"] == "0"
    # The study's independent K = 8 cell with its budget, and the GEAR run is the arm the summary quotes.
    arm = options(summary)["--study-arm"]
    assert [gear["--credit"], *flags_of(gear, horizon.ARMS[arm].get("overrides", []))] == [
        horizon.ARMS[arm]["credit"],
        *horizon.ARMS[arm].get("overrides", []),
    ]
    cell = options(
        ["", "", "", *horizon.cell_overrides("independent", 8, horizon.VARIANTS["independent"]["model"], arm)]
    )
    for key, value in cell.items():
        assert gear[key] == value and (key in horizon_arm_flags() or grpo[key] == value)
    assert int(gear["--max_steps"]) == horizon.VARIANTS["independent"]["max_steps"]
    assert options(summary)["--study-cell"] == "independent" and "8" in summary
    # Warm start and both trained models scored the same way on the cell's held-out rows.
    start, end_grpo, end_gear = evaluations
    assert start["--model"] == cell["--model_name_or_path"]
    assert (end_grpo["--model"], end_gear["--model"]) == (grpo["--output_dir"], gear["--output_dir"])
    same = [{k: v for k, v in e.items() if k not in ("--model", "--output")} for e in evaluations]
    assert same[0] == same[1] == same[2]
    assert start["--dataset"] == cell["--dataset_name"] and start["--split"] == "test"
    assert start["--max_new_tokens"] == cell["--max_completion_length"]
    assert start["--num_samples"] == "2" and start["--temperature"] == "1.0"
    assert summary[2] == start["--output"]
    # The summary reads each arm's run and end report, the curve needs a point a step, and a checkpoint at the end.
    arms = [summary[i + 1 : i + 4] for i, token in enumerate(summary) if token == "--arm"]
    assert [a[1:] for a in arms] == [
        [grpo["--output_dir"], end_grpo["--output"]],
        [gear["--output_dir"], end_gear["--output"]],
    ]
    assert grpo["--logging_steps"] == "1" and grpo["--save_steps"] == grpo["--max_steps"]
    inspect = options(next(cmd for cmd in commands if cmd[1:3] == ["-m", "gear_trl.inspect_credit"]))
    assert (
        inspect["--model"] == gear["--output_dir"]
        and inspect["--distillation_weight"] == gear["--distillation_weight"]
    )
    assert inspect["--dataset_name"] == cell["--dataset_name"] and options(summary)["--credit"] == inspect["--out"]


def horizon_arm_flags():
    return {"--credit", "--teacher_reference", "--distillation_weight", "--output_dir"}


def flags_of(parsed, overrides):
    """`overrides` (a flag list) with each flag's value as `parsed` has it."""
    flags = [item for item in overrides if item.startswith("--")]
    return [token for flag in flags for token in (flag, parsed[flag])]


def test_the_compare_summary_pools_the_committed_reports_it_names():
    """The Makefile's --study reports exist, and pooled they give the figure the study's own statistics give over
    the same seeds."""
    summary = next(cmd for cmd in compare_commands() if cmd[1].endswith("compare_summary.py"))
    paths = [summary[i + 1] for i, token in enumerate(summary) if token == "--study"]
    reports = [json.loads((REPO / path).read_text()) for path in paths]
    arm = options(summary)["--study-arm"]
    # every committed report of the study that holds the arm is pooled, none left out
    holding = [
        path.relative_to(REPO).as_posix()
        for path in sorted(
            [
                REPO / "bench/results/horizon/horizon.json",
                *REPO.glob("bench/results/horizon/replication_*/horizon.json"),
            ]
        )
        if arm in json.loads(path.read_text())["variants"].get("independent", {}).get("8", {}).get("arms", {})
    ]
    assert sorted(paths) == holding
    line = compare_summary.study_line(reports, "independent", "8", arm)
    values = [
        v
        for r in reports
        for v in r["variants"]["independent"]["8"]["arms"][arm]["sampled_accuracy_minus_none"]["values"]
    ]
    acc = horizon.teacher_sweep.paired_interval(values)
    assert len(reports) >= 2 and acc["n_seeds"] == sum(len(r["config"]["budget"]["seeds"]) for r in reports)
    assert f"held-out {acc['mean']:+.3f} [{acc['ci_low']:+.3f}, {acc['ci_high']:+.3f}]" in line
    # the output Getting started and the README show ends with this line, as the committed reports give it
    assert line in (REPO / "docs" / "getting-started.md").read_text() and line in (REPO / "README.md").read_text()


def test_make_compare_is_the_demo_under_its_earlier_name():
    assert compare_commands("compare") == compare_commands("demo")
