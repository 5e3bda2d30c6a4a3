"""The demo's before/after line (recipes/tiny/demo_summary.py) and the `make demo` target that feeds it."""

from __future__ import annotations

import importlib.util
import re
import shlex
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("gear_demo_summary", REPO / "recipes" / "tiny" / "demo_summary.py")
demo_summary = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(demo_summary)


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
    """The commands of the `demo` target's recipe lines in the Makefile, as argument lists (continuation lines
    joined; commands on one line split at `&`, `&&` and `;`)."""
    text = (REPO / "Makefile").read_text().replace("\\\n", " ")
    lines = re.search(r"^demo:[^\n]*install[^\n]*\n((?:\t[^\n]*\n)+)", text, re.MULTILINE).group(1)
    commands = []
    for line in lines.splitlines():
        current, lexer = [], shlex.shlex(line.strip().lstrip("@"), posix=True, punctuation_chars="&;")
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
            if arg.startswith("--"):  # a flag without a value (--no-progress) maps to True
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
    summary = next(cmd for cmd in demo_commands() if cmd[1].endswith("demo_summary.py"))
    assert summary[2:] == [start["--output"], end["--output"]]
