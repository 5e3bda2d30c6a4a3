"""BFCL's single-turn categories read from the installed bfcl-eval and scored by its own checker
(`gear_trl.rewards.bfcl_ast`): the ground truth of every entry, written as a model writes calls (`<tool_call>` JSON;
Java and JavaScript arguments as strings in the language's syntax), passes BFCL's checker through our decoder; a model
that calls nothing scores 0 on the AST categories and on relevance, 1 on irrelevance; changed calls fail; and every
preset runs end to end.
"""

from __future__ import annotations

import json
import re

import pytest
import torch
from transformers import AutoTokenizer

from gear_trl.evaluation.benchmarks import PRESETS
from gear_trl.evaluation.cli import main
from gear_trl.rewards import get_reward_funcs
from gear_trl.rewards.bfcl_ast import (
    AST_CATEGORIES,
    LIVE_AST_CATEGORIES,
    RELEVANCE_CATEGORIES,
    bfcl_ast,
    check,
    decode,
    load_rows,
)
from tests.utils import StandInModel

pytest.importorskip("bfcl_eval", reason="bfcl-eval is not installed; `make install` installs it (pip --no-deps)")

TINY = "data/tiny-qwen3"
SINGLE_TURN_PRESETS = [name for name, p in PRESETS.items() if p.dataset_format == "bfcl_single_turn"]

# Entries whose possible answer no call can pass, whatever the model writes (BFCL's data, not the adapter): the
# reason, read from the entry, is asserted by `test_the_entries_no_answer_passes_are_broken_in_bfcl_itself`.
UNPASSABLE = {
    "live_simple_106-63-0": "a required parameter whose allowed values are [] (nothing is allowed)",
    "live_simple_112-68-0": "a required parameter whose allowed values are [] (nothing is allowed)",
    "live_multiple_862-181-3": "the answer needs a parameter the function does not declare",
    "live_multiple_964-207-0": "the answer needs a parameter the function does not declare",
    "simple_java_36": "an `any`-typed ArrayList whose answer holds numbers or booleans (BFCL reads elements as strings)",
    "simple_java_65": "an `any`-typed ArrayList whose answer holds numbers or booleans (BFCL reads elements as strings)",
    "simple_java_64": "a HashMap answer whose value is a bare string, not a list of allowed values (the checker then "
    "allows its single characters only)",
}


# --- the ground truth as a model writes it -----------------------------------------------------------------------

_OMIT = object()


def _first(allowed, required: bool):
    """One allowed value of a possible answer's parameter (the first that is not `""`, BFCL's "may be left out"), with
    nested objects read the same way; `_OMIT` when only `""` is allowed and the parameter is optional."""
    values = [v for v in allowed if v != ""]
    if not values:
        return "" if required else _OMIT
    value = values[0]
    if isinstance(value, dict):
        return _object(value)
    if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
        return [_object(v) for v in value]
    return value


def _object(allowed_by_key: dict) -> dict:
    out = {}
    for key, allowed in allowed_by_key.items():
        value = _first(allowed if isinstance(allowed, list) else [allowed], required=False)
        if value is not _OMIT:
            out[key] = value
    return out


def _java_element(value) -> str:
    # How BFCL's parse_java_value reads an element of a collection
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return f'"{value}"'
    return str(value)


def _java(value, declared: dict) -> str:
    """`value` as a Java expression that BFCL's java_type_converter reads back as `value`."""
    kind = declared.get("type")
    nested = (declared.get("items") or {}).get("type")
    if isinstance(value, str):
        return value
    if kind == "boolean":
        return "true" if value else "false"
    if kind == "long":
        return f"{value}L"
    if kind == "float":
        return f"{value}f"
    if kind == "ArrayList":
        if not value:
            return "new ArrayList<>()"
        elements = ", ".join(
            f'"{v}"' if nested in ("String", "char") else _java(v, {"type": nested}) if nested else _java_element(v)
            for v in value
        )
        return f"new ArrayList<>(Arrays.asList({elements}))"
    if kind == "Array":
        return "new " + (nested or "Object") + "[]{" + ", ".join(_java(v, {"type": nested}) for v in value) + "}"
    if kind == "HashMap":
        puts = " ".join(f'put("{k}", {_java_element(v)});' for k, v in value.items())
        return f"new HashMap<String, String>() {{{{ {puts} }}}}"
    return str(value)


def _js(value, declared: dict) -> str:
    """`value` as a JavaScript expression that BFCL's js_type_converter reads back as `value`."""
    kind = declared.get("type")
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if kind == "Bigint":
        return f"{value}n"
    if kind == "array":
        return "[" + ", ".join(f"'{v}'" if isinstance(v, str) else _js(v, {}) for v in value) + "]"
    if kind == "dict":
        return "{" + ", ".join(f"{k}: {_js_value(v)}" for k, v in value.items()) + "}"
    return str(value)


def _js_value(value) -> str:
    if isinstance(value, dict):
        return _js(value, {"type": "dict"})
    if isinstance(value, list):
        return _js(value, {"type": "array"})
    return (
        "true"
        if value is True
        else "false"
        if value is False
        else f"'{value}'"
        if isinstance(value, str)
        else str(value)
    )


def ground_truth_text(entry: dict) -> str:
    """The entry's possible answer as a model's `<tool_call>` blocks (one allowed value per parameter)."""
    docs = {f["name"]: f["parameters"] for f in entry["function"]}
    blocks = []
    for call in entry["possible_answer"]:
        ((name, allowed_by_param),) = call.items()
        parameters = docs.get(name, {"properties": {}, "required": []})
        arguments = {}
        for param, allowed in allowed_by_param.items():
            value = _first(allowed, required=param in parameters.get("required", []))
            if value is _OMIT:
                continue
            declared = parameters["properties"].get(param, {})
            if entry["category"] == "simple_java":
                value = _java(value, declared)
            elif entry["category"] == "simple_javascript":
                value = _js(value, declared)
            arguments[param] = value
        blocks.append("<tool_call>\n" + json.dumps({"name": name, "arguments": arguments}) + "\n</tool_call>")
    return "\n".join(blocks)


def _entries(category):
    return [json.loads(row["bfcl_entry"]) for row in load_rows(category)]


# --- every entry ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("category", AST_CATEGORIES)
def test_every_ground_truth_passes_bfcls_checker_and_no_call_or_a_changed_call_fails(category):
    entries = _entries(category)
    texts = [ground_truth_text(e) for e in entries]
    verdicts = [check(e, decode(t)) for e, t in zip(entries, texts, strict=True)]
    failed = {e["id"]: error for e, (ok, error) in zip(entries, verdicts, strict=True) if not ok}
    assert set(failed) == {i for i in UNPASSABLE if i.startswith(category + "_")}, failed
    assert len(entries) == {"live_simple": 258, "live_multiple": 1053, "live_parallel": 16,
                            "live_parallel_multiple": 24, "simple_java": 100, "simple_javascript": 50}[category]  # fmt: skip
    # the reward the presets use gives the same figures, from the rows' column
    rows = load_rows(category)
    rewards = bfcl_ast(texts, [row["bfcl_entry"] for row in rows])
    assert sum(rewards) == len(entries) - len(failed)
    assert bfcl_ast(["I cannot help with that."] * len(rows), [row["bfcl_entry"] for row in rows]) == [0.0] * len(rows)

    # changed calls fail: another function name, an argument left out or given a wrong value, a broken block
    for entry, text in zip(entries, texts, strict=True):
        if entry["id"] in failed:
            continue
        calls = decode(text)
        (name, arguments), *rest = (next(iter(c.items())) for c in calls)
        renamed = [{name + "_x": arguments}, *({k: v} for k, v in rest)]
        assert not check(entry, renamed)[0], entry["id"]
        assert not check(entry, decode(text + "\n<tool_call>\n{not json}\n</tool_call>"))[0]
        if arguments:
            param = next(iter(arguments))
            wrong = {**arguments, param: "surely-not-an-allowed-value-42"}
            assert not check(entry, [{name: wrong}, *({k: v} for k, v in rest)])[0], (entry["id"], param)
        if len(calls) > 1:  # a parallel answer with one call missing
            assert not check(entry, calls[:-1])[0], entry["id"]


@pytest.mark.parametrize("category", RELEVANCE_CATEGORIES)
def test_irrelevance_is_right_without_a_call_and_relevance_with_one(category):
    rows = load_rows(category)
    entries = [row["bfcl_entry"] for row in rows]
    assert len(rows) == {"irrelevance": 240, "live_irrelevance": 884, "live_relevance": 16}[category]
    no_call = bfcl_ast(["I cannot help with that."] * len(rows), entries)
    broken = bfcl_ast(['<tool_call>\n{"name": "f", "arguments": "x"}\n</tool_call>'] * len(rows), entries)
    # a call of one of the entry's own functions (a made-up one where it has none), arguments that need not be right
    names = [([f["name"] for f in json.loads(e)["function"]] or ["lookup"])[0] for e in entries]
    calls = ["<tool_call>\n" + json.dumps({"name": n, "arguments": {"q": 1}}) + "\n</tool_call>" for n in names]
    called = bfcl_ast(calls, entries)
    irrelevance = "irrelevance" in category
    assert no_call == broken == [float(irrelevance)] * len(rows)  # a decode failure is no call, as BFCL's
    assert called == [float(not irrelevance)] * len(rows)


def test_the_entries_no_answer_passes_are_broken_in_bfcl_itself():
    for category in ("live_simple", "live_multiple", "simple_java"):
        for entry in _entries(category):
            if entry["id"] not in UNPASSABLE:
                continue
            ((name, allowed),) = entry["possible_answer"][0].items()
            (doc,) = [f for f in entry["function"] if f["name"] == name]
            declared, required = doc["parameters"]["properties"], doc["parameters"].get("required", [])
            if "[]" in UNPASSABLE[entry["id"]]:
                assert any(allowed.get(p) == [] for p in required), entry["id"]
            elif "ArrayList" in UNPASSABLE[entry["id"]]:
                lists = [p for p, d in declared.items() if d["type"] == "ArrayList" and d["items"]["type"] == "any"]
                assert any(not isinstance(v, str) for p in lists for v in allowed[p][0]), entry["id"]
            elif "HashMap" in UNPASSABLE[entry["id"]]:
                maps = [allowed[p][0] for p, d in declared.items() if d["type"] == "HashMap"]
                assert any(isinstance(v, str) for m in maps for v in m.values()), entry["id"]
            else:
                assert any(p not in declared and "" not in values for p, values in allowed.items()), entry["id"]


# --- the decoder --------------------------------------------------------------------------------------------------


def test_the_decoder_reads_tool_call_blocks_and_never_raises_on_model_text():
    block = '<tool_call>\n{"name": "f", "arguments": {"a": 1}}\n</tool_call>'
    assert decode(f"<think>maybe <tool_call>x</tool_call></think>Sure. {block}") == [{"f": {"a": 1}}]
    assert decode([{"role": "assistant", "content": block}]) == [{"f": {"a": 1}}]
    assert decode("No call here.") == []
    assert decode('<tool_call>{"name": "f"}</tool_call>') == [{"f": {}}]  # a call without arguments
    for text in ['<tool_call>{"name": "f"', "<tool_call>[1, 2]</tool_call>", '<tool_call>{"name": 3}</tool_call>',
                 '<tool_call>{"name": "f", "arguments": [1]}</tool_call>', f"{block}<tool_call>oops</tool_call>"]:  # fmt: skip
        assert decode(text) is None, text
    assert decode(None) == decode(42) == []
    parsed = [
        {"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "f", "arguments": '{"a": 1}'}}]}
    ]
    assert decode(parsed) == [{"f": {"a": 1}}]  # TRL's parsed calls
    # what a model writes never makes the reward raise: odd values for the checker's converters score 0
    entry = json.loads(load_rows("simple_java", limit=1)[0]["bfcl_entry"])
    name = entry["function"][0]["name"]
    odd = "<tool_call>\n" + json.dumps({"name": name, "arguments": {"controller": [1], "parent": {"x": None}}})
    assert bfcl_ast([odd + "\n</tool_call>", 7, None], [json.dumps(entry)] * 2 + [None]) == [0.0, 0.0, None]


def test_the_shown_tools_carry_bfcls_language_hints_and_java_arguments_are_strings():
    (row,) = load_rows("simple_java", limit=1)
    (tool,) = json.loads(row["tools"])
    assert tool["function"]["name"] == "GeometryPresentation_createPresentation"
    assert tool["function"]["description"].endswith("Note that the provided function is in Java 8 SDK syntax.")
    assert {p["type"] for p in tool["function"]["parameters"]["properties"].values()} == {"string"}
    entry = json.loads(row["bfcl_entry"])
    assert entry["function"][0]["parameters"]["properties"]["controller"]["type"] == "any"  # the checker's docs
    (row,) = load_rows("live_simple", limit=1)
    assert json.loads(row["tools"])[0]["function"]["description"].endswith("in Python 3 syntax.")


# --- the presets end to end ----------------------------------------------------------------------------------------


class Oracle(StandInModel):
    """A stand-in model answering each prompt with `answer(prompt text)`."""

    def __init__(self, tokenizer, answer):
        self.tokenizer, self.answer = tokenizer, answer

    def generate(self, input_ids, attention_mask, generation_config):
        rows = []
        for ids in input_ids.tolist():
            text = self.answer(self.tokenizer.decode(ids, skip_special_tokens=True))
            rows.append(ids + self.tokenizer(text)["input_ids"] + [self.tokenizer.eos_token_id])
        width = max(map(len, rows))
        return torch.tensor([row + [self.tokenizer.eos_token_id] * (width - len(row)) for row in rows])


def _ground_truth_oracle(categories, limit):
    by_question = {}
    for category in categories:
        for row in load_rows(category, limit=limit):
            entry = json.loads(row["bfcl_entry"])
            if entry["possible_answer"] is not None:
                text = ground_truth_text(entry)
            elif category == "live_relevance":  # a call of one of its functions: relevance checks no more
                text = "<tool_call>\n" + json.dumps({"name": entry["function"][0]["name"], "arguments": {}})
                text += "\n</tool_call>"
            else:
                text = "No function fits."
            by_question[row["prompt"][-1]["content"]] = text
    return lambda prompt: by_question[max(by_question, key=prompt.rfind)]


def _cli(tmp_path, monkeypatch, name, answer=None, *argv):
    if answer is not None:
        tokenizer = AutoTokenizer.from_pretrained(TINY)
        monkeypatch.setattr(
            "gear_trl.evaluation.cli.load_model", lambda *a, **k: (Oracle(tokenizer, answer), tokenizer)
        )
    output = tmp_path / f"{name}.json"
    main(["--model", TINY, "--benchmark", name, "--output", str(output), "--no_progress", *argv])
    return json.loads(output.read_text())


@pytest.mark.parametrize("name", SINGLE_TURN_PRESETS)
def test_every_preset_runs_the_tiny_model_and_scores_a_ground_truth_oracle_one(tmp_path, monkeypatch, name):
    preset = PRESETS[name]
    report = _cli(tmp_path, monkeypatch, name, None, "--max_samples", "2", "--max_new_tokens", "4")
    categories = list(LIVE_AST_CATEGORIES) if preset.split == "live" else [preset.split]
    assert report["n"] == 2 * len(categories) and set(report["categories"]) == set(categories)
    assert report["config"]["reward"] == ["bfcl_ast"] and report["config"]["temperature"] == 0.0
    assert report["accuracy"] in (0.0, 0.25, 0.5, 0.75, 1.0)

    oracle = _ground_truth_oracle(categories, limit=3)
    report = _cli(tmp_path, monkeypatch, name, oracle, "--max_samples", "3")
    assert report["accuracy"] == 1.0 and set(report["categories"].values()) == {1.0}
    assert re.search(r"<tool_call>|No function fits", report["per_sample"][0]["completion"])


def test_the_live_preset_reports_each_category_and_the_entry_weighted_mean(tmp_path, monkeypatch):
    # right on live_simple only: the live column is the mean over entries, each category's accuracy beside it
    simple = {row["prompt"][-1]["content"] for row in load_rows("live_simple", limit=3)}
    oracle = _ground_truth_oracle(["live_simple"], limit=3)
    report = _cli(tmp_path, monkeypatch, "bfcl_live", lambda p: oracle(p) if any(q in p for q in simple) else "?",
                  "--max_samples", "3")  # fmt: skip
    assert report["n"] == 12 and report["accuracy"] == 0.25
    assert report["categories"] == {"live_simple": 1.0, "live_multiple": 0.0, "live_parallel": 0.0,
                                    "live_parallel_multiple": 0.0}  # fmt: skip
    report = _cli(tmp_path, monkeypatch, "bfcl_live", None, "--split", "live_parallel", "--max_samples", "1",
                  "--max_new_tokens", "2")  # fmt: skip
    assert report["n"] == 1 and list(report["categories"]) == ["live_parallel"]
    with pytest.raises(Exception, match="live_simple"):
        _cli(tmp_path, monkeypatch, "bfcl_live", None, "--split", "live_simpel")
    assert get_reward_funcs(["bfcl_ast"]) == [bfcl_ast]


def test_the_leaderboard_columns_average_the_presets_as_bfcl_does():
    from gear_trl.rewards.bfcl_ast import leaderboard_columns

    accuracy = {"bfcl_simple": 0.9, "bfcl_java": 0.6, "bfcl_javascript": 0.3, "bfcl_multiple": 0.8,
                "bfcl_parallel": 0.7, "bfcl_parallel_multiple": 0.5, "bfcl_live": 0.75, "bfcl_irrelevance": 1.0,
                "bfcl_live_irrelevance": 0.5, "bfcl_live_relevance": 0.25, "bfcl_multi_turn": 0.1}  # fmt: skip
    columns = leaderboard_columns(accuracy)
    # simple = (0.9 + 0.6 + 0.3) / 3 = 0.6; non-live = (0.6 + 0.8 + 0.7 + 0.5) / 4 = 0.65
    assert columns == pytest.approx(
        {"non_live": 0.65, "live": 0.75, "irrelevance": 0.75, "relevance": 0.25, "multi_turn": 0.1}
    )
    del accuracy["bfcl_java"], accuracy["bfcl_live_irrelevance"]
    columns = leaderboard_columns(accuracy)
    assert columns["non_live"] is None and columns["irrelevance"] is None and columns["live"] == 0.75


def test_a_missing_bfcl_eval_is_named_not_scored_zero(monkeypatch):
    import importlib
    import sys

    from gear_trl.inputs.errors import UserInputError

    module = importlib.import_module("gear_trl.rewards.bfcl_ast")  # the package's `bfcl_ast` is the function

    entry = load_rows("live_simple", limit=1)[0]["bfcl_entry"]
    module._checker.cache_clear()
    monkeypatch.setitem(sys.modules, "bfcl_eval", None)  # `import bfcl_eval` raises ImportError
    try:
        with pytest.raises(UserInputError, match="pip install --no-deps bfcl-eval"):
            bfcl_ast(["x"], [entry])
    finally:
        module._checker.cache_clear()
