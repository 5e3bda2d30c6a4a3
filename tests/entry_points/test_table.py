"""The paper's table from evaluation reports (issue 52, item 6): per benchmark and arm the mean over training seeds,
each arm's seed-paired difference from the baseline with a 95% t-interval, and a refusal, naming every problem at
once, of reports that differ in chat mode, preset or sampling."""

from __future__ import annotations

import configparser
import json
import math
import statistics
from pathlib import Path

import pytest

from gear_trl.inputs.errors import UserInputError
from gear_trl.table import main, paired_interval, t_quantile

REPO = Path(__file__).resolve().parents[2]
SAMPLING = {"temperature": 0.6, "top_p": 0.95, "top_k": 20, "max_new_tokens": 32768, "num_samples": 64}


def report(path: Path, model: str, preset: str, accuracy: float, **changes) -> str:
    """A report as `gear_trl.evaluate` writes it with the chat mode, preset and sampling at the top level."""
    body = {
        "model": model,
        "dataset": "HuggingFaceH4/aime_2024",
        "split": "train",
        "preset": preset,
        "chat_mode": "non-thinking",
        "sampling": dict(SAMPLING),
        "provenance": {"backend": "vllm", "packages": {}, "git_commit": "abc", "model_revision": None},
        "n": 30,
        "accuracy": accuracy,
        "config": {"benchmark": preset},
        "per_sample": [],
    }
    for key, value in changes.items():
        if key == "sampling":
            body["sampling"].update(value)
        else:
            body[key] = value
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(body))
    return str(path)


GRPO = {1: 0.30, 2: 0.36, 3: 0.33}
GEAR = {1: 0.34, 2: 0.37, 3: 0.38}


def arms(tmp_path: Path, **changes) -> list[str]:
    argv = ["--baseline", "grpo"]
    for arm, scores in (("grpo", GRPO), ("gear", GEAR)):
        paths = [
            report(tmp_path / f"{arm}-seed-{s}-aime24.json", f"outputs/Qwen3-4B-{arm}-math-seed-{s}", "aime24", v)
            for s, v in scores.items()
        ]
        argv += ["--arm", arm, *paths]
    return argv


def test_means_and_paired_intervals_by_hand(tmp_path, capsys):
    table = main([*arms(tmp_path), "--json", str(tmp_path / "t.json"), "--output", str(tmp_path / "t.md")])
    row = table["benchmarks"]["aime24"]
    assert row["arms"]["grpo"]["mean"] == pytest.approx(statistics.fmean(GRPO.values()))
    assert row["arms"]["gear"] == {"mean": pytest.approx(0.3633333), "n_seeds": 3, "seeds": [1, 2, 3]}
    differences = [GEAR[s] - GRPO[s] for s in (1, 2, 3)]  # 0.04, 0.01, 0.05
    half = 4.302653 * statistics.stdev(differences) / math.sqrt(3)  # t(0.975, 2)
    cell = row["paired"]["gear"]
    assert cell["mean"] == pytest.approx(statistics.fmean(differences))
    assert (cell["ci_low"], cell["ci_high"]) == (
        pytest.approx(cell["mean"] - half, abs=1e-5),
        pytest.approx(cell["mean"] + half, abs=1e-5),
    )
    printed = capsys.readouterr().out
    assert "| aime24 | 0.330 (3) | 0.363 (3) | +0.033 [-0.018, +0.085] (3) |" in printed
    assert "Chat mode: non-thinking." in printed
    assert "Scored with backend(s) vllm at gear_trl commit(s) abc." in printed
    assert (tmp_path / "t.md").read_text().strip() == printed.strip()
    assert json.loads((tmp_path / "t.json").read_text())["benchmarks"]["aime24"]["paired"]["gear"]["seeds"] == [
        1,
        2,
        3,
    ]


def test_pairs_only_the_seeds_both_arms_ran(tmp_path, capsys):
    argv = arms(tmp_path)
    argv.append(report(tmp_path / "gear-seed-9.json", "outputs/Qwen3-4B-gear-math-seed-9", "aime24", 0.9))
    table = main(argv)
    assert table["benchmarks"]["aime24"]["arms"]["gear"]["n_seeds"] == 4
    assert table["benchmarks"]["aime24"]["paired"]["gear"]["seeds"] == [1, 2, 3]


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"chat_mode": "thinking"}, "differ in chat mode"),
        ({"sampling": {"temperature": 1.0}}, "aime24: the reports differ in sampling"),
        ({"sampling": {"num_samples": 4}}, "aime24: the reports differ in sampling"),
    ],
)
def test_refuses_reports_that_differ(tmp_path, changes, message):
    argv = arms(tmp_path)
    report(Path(argv[-1]), "outputs/Qwen3-4B-gear-math-seed-3", "aime24", 0.38, **changes)
    with pytest.raises(UserInputError, match=message):
        main(argv)


def test_refuses_a_preset_mismatch_and_lists_every_problem_at_once(tmp_path):
    argv = arms(tmp_path)
    # the same data scored without the preset (its own sampling flags), and a report without a seed in its paths
    report(Path(argv[-1]), "outputs/Qwen3-4B-gear-math-seed-3", None, 0.38)
    argv.append(report(tmp_path / "extra.json", "outputs/unseeded", "aime24", 0.5))
    argv.append(report(tmp_path / "dup-seed-1.json", "outputs/Qwen3-4B-gear-math-seed-1", "aime24", 0.5))
    with pytest.raises(UserInputError) as caught:
        main(argv)
    text = str(caught.value)
    assert "the reports differ in preset (aime24: " in text and "None: " in text
    assert "no training seed" in text and "arm 'gear' has 2 reports for seed 1" in text


def test_old_reports_are_read_from_their_config(tmp_path):
    """Reports written before the top-level keys: chat mode from `enable_thinking`, preset from `benchmark`."""
    paths = {}
    for arm, scores in (("grpo", GRPO), ("gear", GEAR)):
        paths[arm] = []
        for seed, value in scores.items():
            path = tmp_path / f"{arm}-seed-{seed}.json"
            config = {"benchmark": "MATH-500", "chat_template_kwargs": {"enable_thinking": False}, **SAMPLING}
            path.write_text(
                json.dumps({"model": f"m-{arm}", "dataset": "d", "split": "test", "accuracy": value, "config": config})
            )
            paths[arm].append(str(path))
    table = main(["--baseline", "grpo", "--arm", "grpo", *paths["grpo"], "--arm", "gear", *paths["gear"]])
    assert list(table["benchmarks"]) == ["math500"] and table["chat_mode"] == "non-thinking"
    thinking = json.loads(Path(paths["gear"][0]).read_text())
    thinking["config"]["chat_template_kwargs"] = {}
    Path(paths["gear"][0]).write_text(json.dumps(thinking))
    with pytest.raises(UserInputError, match="chat mode"):
        main(["--baseline", "grpo", "--arm", "grpo", *paths["grpo"], "--arm", "gear", *paths["gear"]])


def test_cli_errors_are_one_message(tmp_path, capsys):
    from gear_trl.table import cli

    with pytest.raises(SystemExit) as caught:
        cli(["--baseline", "ppo", "--arm", "gear", str(tmp_path / "missing.json")])
    assert "--baseline 'ppo' is not one of the arms ['gear']" in str(caught.value)
    assert "missing.json: cannot be read" in str(caught.value)


def test_the_interval_helpers():
    assert t_quantile(0.975, 2) == pytest.approx(4.302653, abs=2e-4)
    assert t_quantile(0.975, 30) == pytest.approx(2.042272, abs=2e-4)
    assert math.isnan(paired_interval([0.1])["ci_low"])


def test_the_console_script_is_declared():
    parser = configparser.ConfigParser()
    parser.read(REPO / "setup.cfg")
    assert "gear-trl-table = gear_trl.table:cli" in parser["options.entry_points"]["console_scripts"]


def test_the_table_builder_does_not_import_bench():
    source = (REPO / "gear_trl/table.py").read_text()
    assert "bench" not in {
        line.split()[1].split(".")[0] for line in source.splitlines() if line.startswith(("import ", "from "))
    }


def test_the_untrained_model_is_the_start_column_held_to_the_same_mode(tmp_path, capsys):
    """The base model's report has no training seed: `--start` shows it beside the arms, and a base model scored in
    another chat mode (the Hub default, thinking) is refused like any other report."""
    base = report(tmp_path / "base-aime24.json", "Qwen/Qwen3-4B", "aime24", 0.25)
    table = main([*arms(tmp_path), "--start", base])
    assert table["benchmarks"]["aime24"]["start"] == pytest.approx(0.25)
    printed = capsys.readouterr().out
    assert "| benchmark | start (untrained) | grpo mean (seeds) |" in printed
    assert "| aime24 | 0.250 | 0.330 (3) | 0.363 (3) | +0.033 [-0.018, +0.085] (3) |" in printed
    thinking = report(tmp_path / "base-thinking.json", "Qwen/Qwen3-4B", "aime24", 0.40, chat_mode="thinking")
    with pytest.raises(UserInputError, match=r"differ in chat mode \(non-thinking: .*; thinking: .*base-thinking"):
        main([*arms(tmp_path), "--start", thinking])
    with pytest.raises(UserInputError, match=r"the untrained model \(--start\) has 2 reports"):
        main([*arms(tmp_path), "--start", base, base])


def test_paired_t_test_and_holm_on_hand_worked_values():
    from gear_trl.table import holm, paired_t_test, t_cdf

    # df = 2 has a closed form: F(t) = 1/2 + t / (2 sqrt(2 + t^2)); differences 1, 2, 3: t = 2 / (1 / sqrt 3)
    t = 2 * 3**0.5
    assert t_cdf(t, 2) == pytest.approx(0.5 + t / (2 * (2 + t * t) ** 0.5), abs=1e-6)
    assert t_cdf(-t, 2) == pytest.approx(1 - t_cdf(t, 2), abs=1e-9)
    assert paired_t_test([1.0, 2.0, 3.0]) == pytest.approx(2 * (0.5 - t / (2 * (2 + t * t) ** 0.5)), abs=1e-6)
    assert paired_t_test([0.5, 0.5]) == 0.0 and paired_t_test([0.0, 0.0]) == 1.0 and math.isnan(paired_t_test([1.0]))
    # sorted 0.005 x 4, 0.01 x 3, 0.03 x 2, 0.04 x 1 -> 0.02, 0.03, 0.06, max(0.06, 0.04)
    assert holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    adjusted = holm([0.01, math.nan, 0.3], m=3)  # a declared comparison that could not be made still counts
    assert adjusted[0] == pytest.approx(0.03) and math.isnan(adjusted[1]) and adjusted[2] == pytest.approx(0.6)
    assert holm([0.6, 0.9]) == [1.0, 1.0]


def test_the_t_distribution_stays_exact_far_in_its_tail():
    """A very consistent difference gives a huge t; its CDF must stay at most 1 and its p-value at least 0 (the
    first integration gave a CDF of 590 at t = 1e7, so a p-value of -1e3, and Holm passed it on)."""
    import math as m

    from gear_trl.table import paired_t_test, t_cdf

    for x in (0.5, 3.0, 50.0, 1e3, 1e7):
        assert t_cdf(x, 2) == pytest.approx(0.5 + x / (2 * (2 + x * x) ** 0.5), abs=1e-9)  # closed form, df = 2
        assert t_cdf(x, 1) == pytest.approx(0.5 + m.atan(x) / m.pi, abs=1e-9)  # Cauchy, df = 1
        assert 0.5 < t_cdf(x, 15) <= 1.0
    p = paired_t_test([-0.4, -0.4 + 1e-9, -0.4 - 1e-9])  # t in the hundreds of millions
    assert 0.0 <= p < 1e-6
