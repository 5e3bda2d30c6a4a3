"""Generate the BFCL multi-turn subset `data/bfcl/multi_turn_base.jsonl`, one sample per user turn.

Reads BFCL's `multi_turn_base` questions, ground truth and multi-turn function docs out of the `bfcl-eval` wheel
(downloaded with `pip download --no-deps`, never installed), keeps the tasks whose `involved_classes` are all
implemented in `gear_trl.envs` (the first `--max-tasks` of them, in BFCL's id order), and expands each task of
T user turns into T rows of the shared tool-use schema (`data/README.md`):

    {"id": "<task id>_turn_<k>", "category": "multi_turn_base",
     "prompt": [messages]        # turns 0..k-1 (user, assistant tool_calls, tool results) then user turn k
     "tools": str,               # JSON: OpenAI-style schemas of the involved classes' functions, minus BFCL's
                                 #       `excluded_function` for the task
     "ground_truth": str,        # JSON: turn k's calls, [{"name", "arguments"}] (BFCL's call strings parsed with ast)
     "possible_answer": "",      # single-turn only
     "initial_config": str,      # JSON: the state at the start of turn k (BFCL's initial_config with turns 0..k-1's
                                 #       ground-truth calls executed in our environments), in `BFCLEnvironment.state()`
                                 #       format: BFCL's format plus GorillaFileSystem's `current_directory`
     "involved_classes": str}    # JSON list of class names

Each earlier turn appears in the prompt as its user message(s), one assistant message carrying all the turn's
ground-truth calls as structured `tool_calls` (`{"type": "function", "function": {"name", "arguments": {...}}}`,
arguments a JSON object, not a string), and one `{"role": "tool", "name", "content"}` message per call with the text
our environment returned, exactly as TRL's tool loop builds conversations. `datasets` stores the messages with its
`Json` feature, so the heterogeneous arguments round-trip unchanged.

Every ground-truth call must run without an error in our environments; the script stops if one does not.

    python data/scripts/make_bfcl_multi_turn.py
    python data/scripts/make_bfcl_multi_turn.py --wheel /tmp/bfcl/bfcl_eval-2026.3.23-py3-none-any.whl --max-tasks 50

The data is Apache-2.0, from the Berkeley Function Calling Leaderboard (Patil et al.).
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import sys
import tempfile
from pathlib import Path
from typing import Any

# Run as `python data/scripts/make_bfcl_multi_turn.py` from a checkout: gear_trl importable without installing it.
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from gear_trl.data.bfcl import (
    BFCL_EVAL_VERSION,
    bfcl_function_to_tool_schema,
    fetch_bfcl_wheel,
    read_bfcl_json,
)
from gear_trl.envs import API_CLASSES, BFCLEnvironment

CATEGORY = "multi_turn_base"

# BFCL class name -> its function-doc file in `bfcl_eval/data/multi_turn_func_doc/`.
FUNC_DOC_FILES = {
    "GorillaFileSystem": "gorilla_file_system.json",
    "MathAPI": "math_api.json",
    "MessageAPI": "message_api.json",
    "TicketAPI": "ticket_api.json",
    "TwitterAPI": "posting_api.json",
    "TradingBot": "trading_bot.json",
    "TravelAPI": "travel_booking.json",
    "VehicleControlAPI": "vehicle_control.json",
}


def _plain(value: Any) -> Any:
    """A literal from `ast.literal_eval` as JSON-native data (tuples become lists)."""
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    return value


def parse_call_string(text: str, parameter_order: dict[str, list[str]]) -> dict[str, Any]:
    """`"cd(folder='document')"` -> `{"name": "cd", "arguments": {"folder": "document"}}`.

    Positional arguments (`"sort('final_report.pdf')"`) are named by the function doc's parameter order.
    """
    node = ast.parse(text.strip(), mode="eval").body
    if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name):
        raise TypeError(f"Not a plain function call: {text!r}")
    name = node.func.id
    names = parameter_order.get(name)
    if names is None:
        raise ValueError(f"Unknown function {name!r} in {text!r}")
    if len(node.args) > len(names):
        raise ValueError(f"Too many positional arguments in {text!r}")
    arguments = {names[i]: _plain(ast.literal_eval(arg)) for i, arg in enumerate(node.args)}
    for keyword in node.keywords:
        if keyword.arg is None or keyword.arg in arguments:
            raise ValueError(f"Bad keyword argument in {text!r}")
        arguments[keyword.arg] = _plain(ast.literal_eval(keyword.value))
    return {"name": name, "arguments": arguments}


def _turn_messages(turn: Any) -> list[dict[str, Any]]:
    """The messages of one BFCL turn: a list of messages (possibly nested), or a single message."""
    if isinstance(turn, dict):
        return [dict(turn)]
    messages: list[dict[str, Any]] = []
    for item in turn or []:
        messages.extend(_turn_messages(item))
    return messages


def expand_task(task: dict[str, Any], calls_by_turn: list[list[str]], docs: dict[str, list[dict]]) -> list[dict]:
    """The per-user-turn rows of one task (see the module docstring); raises if a ground-truth call errors."""
    involved = sorted(task["involved_classes"])
    excluded = set(task.get("excluded_function") or [])
    functions = [fn for name in involved for fn in docs[name]]
    tools = [bfcl_function_to_tool_schema(fn) for fn in functions if fn["name"] not in excluded]
    parameter_order = {fn["name"]: list(fn["parameters"].get("properties", {})) for fn in functions}
    tools_json = json.dumps(tools, ensure_ascii=False)
    involved_json = json.dumps(involved)

    env = BFCLEnvironment()
    env.reset(initial_config=task["initial_config"], involved_classes=involved, tools=tools_json)
    if len(task["question"]) != len(calls_by_turn):
        raise ValueError(f"{task['id']}: {len(task['question'])} turns but {len(calls_by_turn)} ground-truth turns")

    rows, history = [], []
    for k, (turn, call_strings) in enumerate(zip(task["question"], calls_by_turn, strict=True)):
        messages = _turn_messages(turn)
        if not messages:  # BFCL's "function added" turns carry no user message; none in multi_turn_base
            continue
        calls = [parse_call_string(text, parameter_order) for text in call_strings]
        rows.append(
            {
                "id": f"{task['id']}_turn_{k}",
                "category": CATEGORY,
                "prompt": history + messages,
                "tools": tools_json,
                "ground_truth": json.dumps(calls, ensure_ascii=False),
                "possible_answer": "",
                "initial_config": json.dumps(env.state(), ensure_ascii=False),
                "involved_classes": involved_json,
            }
        )
        results = [env.execute(call) for call in calls]
        for call, result in zip(calls, results, strict=True):
            if result.startswith("Error:"):
                raise RuntimeError(f"{task['id']} turn {k}: ground-truth call {call} failed: {result}")
        history = history + messages
        if calls:
            history.append(
                {
                    "role": "assistant",
                    "content": "",
                    "tool_calls": [{"type": "function", "function": call} for call in calls],
                }
            )
            history.extend(
                {"role": "tool", "name": call["name"], "content": result}
                for call, result in zip(calls, results, strict=True)
            )
    return rows


def convert(wheel: Path, max_tasks: int) -> tuple[list[dict], list[str]]:
    """The rows of the first `max_tasks` implementable tasks (0: all), and the ids of the tasks used."""
    questions = read_bfcl_json(wheel, rf"BFCL_v\d+_{CATEGORY}\.json")
    answers = {
        a["id"]: a["ground_truth"] for a in read_bfcl_json(wheel, rf"possible_answer/BFCL_v\d+_{CATEGORY}\.json")
    }
    docs = {
        name: read_bfcl_json(wheel, "multi_turn_func_doc/" + re.escape(file_name))
        for name, file_name in FUNC_DOC_FILES.items()
    }
    tasks = sorted(questions, key=lambda q: int(q["id"].rsplit("_", 1)[1]))
    tasks = [q for q in tasks if set(q["involved_classes"]) <= set(API_CLASSES)]
    if max_tasks:
        tasks = tasks[:max_tasks]
    rows = [row for task in tasks for row in expand_task(task, answers[task["id"]], docs)]
    return rows, [task["id"] for task in tasks]


def write_jsonl(rows: list[dict], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--out", type=Path, default=Path(__file__).resolve().parents[1] / "bfcl" / f"{CATEGORY}.jsonl",
        help="Output JSONL file (default: data/bfcl/multi_turn_base.jsonl).",
    )  # fmt: skip
    parser.add_argument(
        "--max-tasks", type=int, default=50,
        help="Keep the first N tasks whose classes are all implemented, in BFCL id order (default 50; 0: all).",
    )  # fmt: skip
    parser.add_argument(
        "--wheel", type=Path, default=None,
        help=f"A downloaded bfcl_eval wheel; without it bfcl-eval=={BFCL_EVAL_VERSION} is fetched with pip.",
    )  # fmt: skip
    args = parser.parse_args(argv)

    with tempfile.TemporaryDirectory() as tmp:
        wheel = args.wheel if args.wheel is not None else fetch_bfcl_wheel(tmp)
        rows, task_ids = convert(wheel, args.max_tasks)
    write_jsonl(rows, args.out)
    print(
        f"{CATEGORY}: {len(task_ids)} tasks -> {len(rows)} rows -> {args.out} ({args.out.stat().st_size / 1e6:.2f} MB)"
    )


if __name__ == "__main__":
    main()
