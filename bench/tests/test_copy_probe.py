"""bench/copy_probe.py: which characters and tokens of a reference rollout it scores, and under which field."""

import importlib
import json
from pathlib import Path

import pytest

from tests.utils import load_file

REPO_ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def probe():
    return importlib.import_module("bench.copy_probe")


def test_fields_cover_each_value_and_nothing_else(probe):
    text = '<tool_call>\n{"name": "subtract", "arguments": {"a": 100, "b": 21}}\n</tool_call><|im_end|>'
    spans = {}
    for character, field in zip(text, probe.field_of_chars(text), strict=True):
        if field != "other":
            spans[field] = spans.get(field, "") + character
    assert spans == {"name": "subtract", "a": "100", "b": "21"}
    assert probe.field_of_chars("The answer is \\boxed{79}.").count("answer") == 2  # "79" of \boxed{79}


def test_a_token_takes_the_first_named_field_it_covers(probe):
    pieces = ['{"', "name", '":', ' "', "sub", "tract", '",', ' {"', "a", '":', " 1", "00", ",", ' "b": 4', "2", "}}"]
    assert probe.token_fields(pieces) == [
        "other", "other", "other", "other", "name", "name", "other", "other", "other", "other", "a", "a", "other",
        "b", "b", "other",
    ]  # fmt: skip


def test_a_value_starts_at_its_first_token(probe):
    fields = ["other", "name", "name", "other", "a", "a", "other", "b", "other", "answer"]
    assert probe.first_tokens(fields) == [False, True, False, False, True, False, False, True, False, True]


def test_teacher_forced_report_on_the_tiny_calculator(probe, tmp_path):
    """End to end on two held-out chains: every field scored under both prompts, shares in [0, 1], the JSON written."""
    out = tmp_path / "probe.json"
    result = probe.main(
        ["--model", str(REPO_ROOT / "data" / "tiny-qwen3-calc-long"), "--rows", "2", "--output", str(out)]
    )
    assert json.loads(out.read_text()) == result and result["rows"] == 2
    for prompt in ("student", "teacher"):
        table = result["fields"][prompt]
        assert set(table) == set(probe.FIELDS)
        assert all(table[field]["tokens"] > 0 for field in ("name", "a", "b", "answer", "other"))
        assert all(0.0 <= table[field]["argmax_acc"] <= 1.0 for field in table if table[field]["tokens"])
    assert result["fields"]["student"]["name"]["tokens"] == result["fields"]["teacher"]["name"]["tokens"]
    rows = [json.loads(line) for line in (REPO_ROOT / "data" / "calc_long" / "test.jsonl").read_text().splitlines()]
    calls = sum(len(json.loads(row["ground_truth"])) for row in rows[:2])
    for prompt in ("student", "teacher"):  # one value per call and field, one answer per chain
        table = result["fields"][prompt]
        assert [table[field]["values"] for field in ("name", "a", "b", "answer")] == [calls, calls, calls, 2]
        assert table["other"]["values"] == 0 and table["other"]["first_token_acc"] is None
        assert table["stated"]["tokens"] == 0  # the calls task states no steps
        assert all(0.0 <= table[field]["first_token_acc"] <= 1.0 for field in ("name", "a", "b", "answer"))


def test_stated_steps_are_scored_as_their_own_field(probe, tmp_path):
    """On a task written with `--teacher-reference stated`, the probe renders completions that state each step and
    scores the tool named there: one value per call, under both prompts."""
    script = load_file(REPO_ROOT / "data" / "scripts" / "make_calc_tools_data.py", "make_calc_tools_data_probe")
    script.main(["--task", "calc_long", "--out-dir", str(tmp_path), "--n-sft", "1", "--teacher-reference", "stated"])
    text = '<|im_start|>assistant\n100 subtract 21\n<tool_call>\n{"name": "subtract"}'
    assert "".join(c for c, f in zip(text, probe.field_of_chars(text), strict=True) if f == "stated") == "subtract"
    model = str(REPO_ROOT / "data" / "tiny-qwen3-calc-long")
    result = probe.main(["--model", model, "--task-dir", str(tmp_path), "--rows", "2"])
    rows = [json.loads(line) for line in (tmp_path / "test.jsonl").read_text().splitlines()]
    calls = sum(len(json.loads(row["ground_truth"])) for row in rows[:2])
    for prompt in ("student", "teacher"):
        assert result["fields"][prompt]["stated"]["values"] == calls
