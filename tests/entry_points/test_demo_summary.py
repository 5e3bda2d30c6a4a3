"""The tool demo's before/after line (recipes/tiny/demo_summary.py) and the `make demo-tools` target that feeds it."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest

from tests.utils import load_file

REPO = Path(__file__).resolve().parents[2]
demo_summary = load_file(REPO / "recipes" / "tiny" / "demo_summary.py", "gear_demo_summary")


def report(accuracy, **config):
    config = {"temperature": 1.0, "seed": 0, "limit": 100, **config}
    return {"dataset": "data/calc_tools", "split": "test", "n": 100, "num_samples": 2, "accuracy": accuracy,
            "config": config}  # fmt: skip


def test_summary_prints_start_and_end_side_by_side():
    line = demo_summary.summary(report(0.395), report(0.46))
    assert line == (
        "held-out sampled (temperature 1) accuracy (100 test problems of data/calc_tools x 2 samples): "
        "start 0.395 -> end 0.460 (+0.065)"
    )


@pytest.mark.parametrize("key,value", [("temperature", 0.0), ("seed", 1), ("limit", 50)])
def test_reports_decoded_differently_are_refused(key, value):
    with pytest.raises(ValueError, match=key):
        demo_summary.summary(report(0.4), report(0.5, **{key: value}))


def demo_commands() -> list[list[str]]:
    """The commands of the `demo-tools` target's recipe lines in the Makefile, as argument lists (continuation lines
    joined; commands on one line split at `&`, `&&` and `;`)."""
    text = (REPO / "Makefile").read_text().replace("\\\n", " ")
    lines = re.search(r"^demo-tools:[^\n]*install[^\n]*\n((?:\t[^\n]*\n)+)", text, re.MULTILINE).group(1)
    return split_commands(lines)


def split_commands(lines: str, punctuation: str = "&;") -> list[list[str]]:
    """Shell lines as argument lists, one per command: split at `&`, `&&` and `;`, a leading `@` dropped, empty
    commands left out."""
    commands = []
    for line in lines.splitlines():
        current, lexer = [], shlex.shlex(line.strip().lstrip("@"), posix=True, punctuation_chars=punctuation)
        lexer.whitespace_split = True
        for token in lexer:
            if token in ("&", "&&", ";"):
                commands.append(current)
                current = []
            else:
                current.append(token)
        commands.append(current)
    return [command for command in commands if command]


def test_make_demo_scores_start_and_trained_model_on_the_same_held_out_rows():
    evaluations = [cmd for cmd in demo_commands() if cmd[1:3] == ["-m", "gear_trl.evaluate"]]
    trains = [cmd for cmd in demo_commands() if cmd[1:3] == ["-m", "gear_trl.train"]]
    assert len(trains) == 1 and len(evaluations) == 2

    def options(cmd):
        parsed, args = {}, cmd[3:]
        for i, arg in enumerate(args):
            if arg.startswith("--"):  # a flag without a value (--no_progress) maps to True
                value = args[i + 1] if i + 1 < len(args) and not args[i + 1].startswith("--") else True
                parsed[arg] = value
        return parsed

    start, end = (options(cmd) for cmd in evaluations)
    train = options(trains[0])
    assert end["--model"] == train["--output_dir"]
    import yaml

    recipe = yaml.safe_load((REPO / train["--config"]).read_text())
    assert start["--model"] == recipe["model_name_or_path"]
    assert start["--split"] == end["--split"] == recipe["dataset_test_split"]  # held-out, never trained on
    assert start["--dataset"] == end["--dataset"] == recipe["dataset_name"]
    same = {key: value for key, value in start.items() if key not in ("--model", "--output")}
    assert same == {key: value for key, value in end.items() if key not in ("--model", "--output")}
    summary = next(cmd for cmd in demo_commands() if len(cmd) > 1 and cmd[1].endswith("demo_summary.py"))
    assert summary[2:4] == [start["--output"], end["--output"]]
    assert options(summary)["--run"] == train["--output_dir"]
    # The credit report is of the trained model, under the same recipe, and the summary points at it.
    inspect = options(next(cmd for cmd in demo_commands() if cmd[1:3] == ["-m", "gear_trl.inspect_credit"]))
    assert inspect["--model"] == train["--output_dir"] and inspect["--config"] == train["--config"]
    assert inspect["--split"] == recipe["dataset_test_split"]
    assert options(summary)["--credit"] == inspect["--out"]
    assert train["--logging_steps"] == "1"  # one point of the reward curve per step


def write_run(tmp_path, rewards_by_checkpoint):
    """A training output_dir with checkpoints whose trainer_state.json log the given (step, reward) pairs."""
    for step, history in rewards_by_checkpoint.items():
        checkpoint = tmp_path / f"checkpoint-{step}"
        checkpoint.mkdir()
        log = [{"step": s, "reward": r, "loss": 0.0} for s, r in history] + [{"step": step, "train_runtime": 1.0}]
        (checkpoint / "trainer_state.json").write_text(json.dumps({"log_history": log}))
    return tmp_path


def test_reward_history_reads_the_newest_checkpoint_by_step_number(tmp_path):
    # checkpoint-10 sorts before checkpoint-9 as text; the newest is the one with the larger step
    run = write_run(tmp_path, {9: [(1, 0.0)], 10: [(1, 0.1), (2, 0.2), (10, 0.9)]})
    (tmp_path / "checkpoint-10-tmp").mkdir()  # not a checkpoint
    assert demo_summary.reward_history(run) == [(1, 0.1), (2, 0.2), (10, 0.9)]


def test_reward_history_without_checkpoint_says_so(tmp_path):
    with pytest.raises(FileNotFoundError, match="trainer_state.json"):
        demo_summary.reward_history(tmp_path)


def test_window_means_of_first_and_last_steps():
    history = [(step, float(step)) for step in range(1, 21)]
    assert demo_summary.window_means(history) == (3.0, 18.0, 5)
    assert demo_summary.window_means([(1, 0.2), (2, 0.6), (3, 1.0)]) == (0.2, 1.0, 1)


def test_report_lines_name_the_curve_credit_report_and_model(tmp_path):
    (tmp_path / "run").mkdir()
    run = write_run(tmp_path / "run", {4: [(s, s / 10) for s in range(1, 5)]})
    credit = tmp_path / "credit"
    credit.mkdir()
    (credit / "credit_test.html").write_text("<html></html>")
    (credit / "credit_test.png").write_bytes(b"")
    lines = demo_summary.report_lines(report(0.395), report(0.46), run, credit)
    assert lines[0].endswith("start 0.395 -> end 0.460 (+0.065)")
    assert "0.150 -> 0.350" in lines[1] and str(run / "reward.png") in lines[1]
    assert (run / "reward.png").stat().st_size > 1000  # a real picture was drawn
    assert str(credit / "credit_test.html") in lines[2] and str(credit / "credit_test.png") in lines[2]
    assert str(run / "README.md") in lines[3]
    credit_empty = tmp_path / "empty"
    credit_empty.mkdir()
    with pytest.raises(FileNotFoundError, match="credit_"):
        demo_summary.report_lines(report(0.4), report(0.4), None, credit_empty)
