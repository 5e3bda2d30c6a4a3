"""bench/copy_probe.py: which characters and tokens of a reference rollout it scores, and under which field."""

import json
from pathlib import Path

import pytest

from tests.utils import load_file

REPO_ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def probe():
    return load_file(REPO_ROOT / "bench" / "copy_probe.py", "gear_bench_copy_probe")


CALL = '<tool_call>\n{"name": "subtract", "arguments": {"a": 100, "b": 21}}\n</tool_call><|im_end|>'
RESULT = '\n<|im_start|>user\n<tool_response>\n{"result": 79}\n</tool_response><|im_end|>\n<|im_start|>assistant\n'
ANSWER = "The answer is \\boxed{79}.<|im_end|>"


def test_fields_cover_each_value_and_nothing_else(probe):
    text = CALL
    fields = probe.field_of_chars(text)
    spans = {}
    for index, field in enumerate(fields):
        if field != "other":
            spans.setdefault(field, "")
            spans[field] += text[index]
    assert spans == {"name": "subtract", "a": "100", "b": "21"}
    assert probe.field_of_chars(ANSWER).count("answer") == 2  # "79" of \boxed{79}


def test_only_the_models_turns_are_written(probe):
    text = CALL + RESULT + ANSWER
    written = probe.assistant_chars(text)
    kept = "".join(c for c, w in zip(text, written, strict=True) if w)
    assert kept == CALL + ANSWER  # the tool result and the turn markers around it are the environment's
    assert probe.assistant_chars("") == []
    unfinished = '<tool_call>\n{"name": "add"'
    assert all(probe.assistant_chars(unfinished))  # a turn without its end marker is still the model's


def test_a_token_takes_its_first_named_field_and_unwritten_tokens_none(probe):
    text = '{"name": "add", "arguments": {"a": 7, "b": 42}}' + "\n<|im_start|>user\n5"
    char_fields = probe.field_of_chars(text)
    written = [True] * text.index("\n<|im_start|>") + [False] * len("\n<|im_start|>user\n5")
    start = text.index('"add')
    offsets = [(0, 1), (start, start + 4), (text.index("42"), text.index("42") + 2), (len(text) - 1, len(text))]
    assert probe.token_fields(offsets, char_fields, written) == ["other", "name", "b", None]


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
        assert all(0.0 <= table[field]["argmax_acc"] <= 1.0 for field in table)
    assert result["fields"]["student"]["name"]["tokens"] == result["fields"]["teacher"]["name"]["tokens"]
