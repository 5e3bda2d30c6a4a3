"""BFCL's single-turn categories read from the installed bfcl-eval and scored by its own checker.

The leaderboard scores a single-turn answer in one of two ways (`bfcl_eval/eval_checker/eval_runner.py`):

- AST categories (`live_simple`, `live_multiple`, `live_parallel`, `live_parallel_multiple`, `simple_java`,
  `simple_javascript`, and the non-live Python ones): the model's output is decoded into calls
  (`[{name: {param: value}}]`) and `ast_checker` compares them with the possible answer, with the language's type
  rules (Java and JavaScript arguments are strings in the language's syntax, converted by BFCL's type converters).
  An output that does not decode is wrong.
- `irrelevance`, `live_irrelevance` (no function fits) and `live_relevance` (one does, no answer is checked): only
  whether the output decodes into at least one call matters. Irrelevance is right when it does not (a decode failure
  counts as no call), relevance when it does.

This module is the glue: `load_rows` turns a category's entries into evaluation rows (the prompt, the tool schemas
the model sees with BFCL's language hints, and a `bfcl_entry` column holding what the checker needs), `decode` turns
a completion's `<tool_call>` blocks into the checker's call format, and `bfcl_ast` is the reward that runs BFCL's
checker on it. Function names with `.` are shown and checked with `_` (many chat templates refuse dots), as BFCL's
checker does for models whose config sets `underscore_to_dot`.

The decode rule follows BFCL's Qwen function-calling handler (`QwenFCHandler.decode_ast`, the format Qwen3's chat
template asks for): each `<tool_call>` block holds a JSON object `{"name": ..., "arguments": {...}}`; text outside
the blocks and `<think>` reasoning are ignored. Where the handler differs we keep `tool_call_accuracy`'s rule: a
block that is not such an object (not JSON, a name that is not a string, arguments that are not an object, an
unclosed block) makes the whole output a decode failure, where the handler drops a block that is not JSON (so a
broken block beside right calls is wrong here); a block without `arguments` is a call without arguments, where the
handler fails the whole output. Nothing a model writes makes these functions raise.
"""

from __future__ import annotations

import copy
import functools
import importlib
import json
import os
import sys
import types
from typing import Any

from ..data.bfcl import bfcl_function_to_tool_schema, bfcl_tool_name, rename_possible_answer
from ..envs.tool_calls import column_value, parse_tool_calls
from ..inputs.errors import UserInputError

AST_CATEGORIES = (
    "live_simple",
    "live_multiple",
    "live_parallel",
    "live_parallel_multiple",
    "simple_java",
    "simple_javascript",
)
"""The AST categories read here (the four non-live Python ones are in data/bfcl, scored by `tool_call_accuracy`)."""
LIVE_AST_CATEGORIES = AST_CATEGORIES[:4]
"""The categories the leaderboard's live AST column averages, weighted by their number of entries."""
RELEVANCE_CATEGORIES = ("irrelevance", "live_irrelevance", "live_relevance")
"""Scored by whether any call decodes, not by its content."""
SINGLE_TURN_CATEGORIES = AST_CATEGORIES + RELEVANCE_CATEGORIES
GROUPS = {"live": LIVE_AST_CATEGORIES}
"""`--split` names that stand for several categories."""


def _bfcl_data_dir() -> str:
    try:
        import bfcl_eval
    except ImportError as err:
        raise UserInputError(
            "BFCL's categories are read from the bfcl-eval package: pip install --no-deps bfcl-eval==2026.3.23 "
            "(`make install` or, on a GPU node, `make install-eval` does; it is not a dependency of gear_trl, whose other "
            "parts work without it)."
        ) from err
    return os.path.join(os.path.dirname(bfcl_eval.__file__), "data")


def _read_jsonl(path: str) -> list[dict]:
    with open(path, encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def categories_of(split: str) -> list[str]:
    """The categories `--split` names: one category, or a group (`live`)."""
    categories = list(GROUPS.get(split, [split]))
    unknown = [c for c in categories if c not in SINGLE_TURN_CATEGORIES]
    if unknown:
        raise UserInputError(
            f"--split {split!r}: use {' or '.join(GROUPS)} or one of the BFCL categories {list(SINGLE_TURN_CATEGORIES)}."
        )
    return categories


def language_of(category: str) -> str:
    """BFCL's language of a category (its `is_java` / `is_js` rule): `JAVA`, `JAVASCRIPT` or `PYTHON`."""
    if "javascript" in category:
        return "JAVASCRIPT"
    return "JAVA" if "java" in category else "PYTHON"


def _shown_functions(functions: list[dict], category: str) -> list[dict]:
    # BFCL's generation adds a language hint to every description and, for Java and JavaScript, turns every
    # parameter into a string that names its type (`add_language_specific_hint_to_function_doc`); the checker reads
    # the docs without them.
    from bfcl_eval.utils import add_language_specific_hint_to_function_doc

    entry = {"id": f"{category}_0", "function": copy.deepcopy(functions)}
    return add_language_specific_hint_to_function_doc([entry])[0]["function"]


def _renamed(function: dict) -> dict:
    return {**function, "name": bfcl_tool_name(function["name"])}


def load_rows(category: str, limit: int | None = None) -> list[dict]:
    """The entries of one BFCL single-turn category as evaluation rows, in BFCL's order (the first `limit`):
    `{id, category, prompt, tools, ground_truth, bfcl_entry}`. `tools` are the OpenAI-style schemas shown to the
    model (JSON); `bfcl_entry` (JSON) holds the category, the function docs and the possible answer (None for the
    relevance categories) with names as shown; `ground_truth` the possible answer, for the report."""
    (category,) = categories_of(category)
    data = _bfcl_data_dir()
    entries = _read_jsonl(os.path.join(data, f"BFCL_v4_{category}.json"))[: limit if limit is not None else None]
    answers = {}
    if category not in RELEVANCE_CATEGORIES:
        answers = {
            row["id"]: row["ground_truth"]
            for row in _read_jsonl(os.path.join(data, "possible_answer", f"BFCL_v4_{category}.json"))
        }
    rows = []
    for entry in entries:
        functions = entry["function"]
        tools = [bfcl_function_to_tool_schema(f) for f in _shown_functions(functions, category)]
        answer = rename_possible_answer(answers[entry["id"]]) if answers else None
        rows.append(
            {
                "id": entry["id"],
                "category": category,
                "prompt": [{"role": m["role"], "content": m["content"]} for turn in entry["question"] for m in turn],
                "tools": json.dumps(tools, ensure_ascii=False),
                "ground_truth": json.dumps(answer, ensure_ascii=False) if answer is not None else "",
                "bfcl_entry": json.dumps(
                    {
                        "id": entry["id"],
                        "category": category,
                        "function": [_renamed(f) for f in functions],
                        "possible_answer": answer,
                    },
                    ensure_ascii=False,
                ),
            }
        )
    return rows


def decode(completion: Any) -> list[dict] | None:
    """The calls of a completion in the checker's format, `[{name: {param: value}}]`, or None where it does not
    decode (a `<tool_call>` block that is not a JSON object with a string name and object arguments). `[]` when it
    holds no call. A completion is text or a list of messages (an assistant's `tool_calls` as TRL parses them, else
    its `content`'s blocks; see `gear_trl.envs.tool_calls.parse_tool_calls`); anything else holds no call."""
    calls = parse_tool_calls(completion)
    if any(call["name"] is None for call in calls):
        return None
    return [{call["name"]: call["arguments"]} for call in calls]


@functools.cache
def _checker() -> types.ModuleType:
    # ast_checker.py imports bfcl_eval.constants.model_config for MODEL_CONFIG_MAPPING, read only for function names
    # with "." (which we rename away), and that module imports every vendor's client, which a --no-deps install
    # lacks. Where it cannot be imported an empty stand-in serves for the import, then is taken out again.
    name = "bfcl_eval.constants.model_config"
    _bfcl_data_dir()
    try:
        importlib.import_module(name)
    except ImportError:
        saved = sys.modules.pop(name, None)
        stand_in = types.ModuleType(name)
        stand_in.MODEL_CONFIG_MAPPING = {}
        sys.modules[name] = stand_in
        try:
            return importlib.import_module("bfcl_eval.eval_checker.ast_eval.ast_checker")
        finally:
            del sys.modules[name]
            if saved is not None:
                sys.modules[name] = saved
    return importlib.import_module("bfcl_eval.eval_checker.ast_eval.ast_checker")


def check(entry: dict, calls: list[dict] | None) -> tuple[bool, str]:
    """BFCL's verdict on decoded `calls` (None: a decode failure) for an entry of `load_rows`'s `bfcl_entry`:
    (right, error type or "")."""
    category = entry["category"]
    has_call = bool(calls)  # BFCL's is_empty_output: [] is no call (a decoded call is never the empty {})
    if category in RELEVANCE_CATEGORIES:
        if "irrelevance" in category:
            return (not has_call, "" if not has_call else "irrelevance_error:decoder_success")
        return (has_call, "" if has_call else "relevance_error:decoder_failed")
    if calls is None:
        return False, "ast_decoder:decoder_failed"
    from bfcl_eval.constants.enums import Language

    verdict = _checker().ast_checker(
        entry["function"], calls, entry["possible_answer"], Language[language_of(category)], category, "gear_trl"
    )
    return bool(verdict["valid"]), "" if verdict["valid"] else verdict.get("error_type", "")


def bfcl_ast(completions: list[Any], bfcl_entry: list[Any] | None = None, **kwargs: Any) -> list[float | None]:
    """1.0 where BFCL's checker accepts a completion for its row's `bfcl_entry` (see `check`), else 0.0; None for a
    row without one. The checker raising on what a model wrote (a Java collection type it does not implement, a
    value it cannot convert) scores 0.0; a missing bfcl-eval is a UserInputError, not a row of zeros."""
    if bfcl_entry is not None:
        _checker()  # imported outside the per-row guard below
    rewards: list[float | None] = []
    for i, completion in enumerate(completions):
        raw = column_value(bfcl_entry, i) if bfcl_entry is not None else None
        if raw is None or raw == "":
            rewards.append(None)
            continue
        try:
            entry = json.loads(raw) if isinstance(raw, str) else raw
            rewards.append(float(check(entry, decode(completion))[0]))
        except Exception:  # noqa: BLE001 - what the model wrote is untrusted; the checker's failure is a wrong answer
            rewards.append(0.0)
    return rewards


def _mean(values: list[float | None]) -> float | None:
    return None if any(v is None for v in values) else sum(values) / len(values)


def leaderboard_columns(accuracy: dict[str, float | None]) -> dict[str, float | None]:
    """The leaderboard's score columns from our presets' `accuracy` values (`{preset name: accuracy}`, as in each
    `gear_trl.evaluate` report), as bfcl-eval's `generate_leaderboard_csv` averages its categories:

    - `non_live`: the unweighted mean of simple (itself the mean of Python, Java and JavaScript simple), multiple,
      parallel and parallel_multiple;
    - `live`: `bfcl_live`'s accuracy, the mean over the entries of the four live AST categories (the leaderboard
      weighs them by their number of entries);
    - `irrelevance`: the unweighted mean of non-live and live irrelevance; `relevance`: live relevance;
    - `multi_turn`: `bfcl_multi_turn`'s accuracy, the unweighted mean of its four categories.

    A column is None when one of its presets is missing (BFCL shows N/A). The overall score also needs the agentic
    categories (web_search, memory), which have no preset, so it is not given."""
    get = accuracy.get
    simple = _mean([get("bfcl_simple"), get("bfcl_java"), get("bfcl_javascript")])
    return {
        "non_live": _mean([simple, get("bfcl_multiple"), get("bfcl_parallel"), get("bfcl_parallel_multiple")]),
        "live": get("bfcl_live"),
        "irrelevance": _mean([get("bfcl_irrelevance"), get("bfcl_live_irrelevance")]),
        "relevance": get("bfcl_live_relevance"),
        "multi_turn": get("bfcl_multi_turn"),
    }
