"""Generate the single-turn BFCL tool-use subsets under `data/bfcl/`.

Reads the Berkeley Function Calling Leaderboard questions and possible answers for the single-turn Python
categories out of the `bfcl-eval` wheel (downloaded with `pip download --no-deps`, never installed) and writes one
`data/bfcl/<category>.jsonl` per category in the shared tool-use schema (see `data/README.md`, section "BFCL (tool
use)"):

    {"id", "category", "prompt", "tools", "ground_truth", "possible_answer", "initial_config", "involved_classes"}

Every reference call written to `ground_truth` is checked against its own possible answer with the reward's checker
before anything is written. The output is a pure function of the wheel and the arguments.

    python data/scripts/make_bfcl_data.py                          # all four categories, every row
    python data/scripts/make_bfcl_data.py --wheel bfcl_eval-2026.3.23-py3-none-any.whl --max-per-category 50

The data is Apache-2.0, from the Berkeley Function Calling Leaderboard (Patil et al.).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

# Run as `python data/scripts/make_bfcl_data.py` from a checkout: make the package importable without installing it.
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from gear_trl.data.bfcl import (
    BFCL_EVAL_VERSION,
    bfcl_function_to_tool_schema,
    fetch_bfcl_wheel,
    read_bfcl_json,
    reference_calls,
    rename_possible_answer,
)
from gear_trl.rewards.tool_call import check_calls

# Category -> regex for its file name relative to `bfcl_eval/data/` (and `possible_answer/`). BFCL v3 called the
# simple category `BFCL_v3_simple.json`; v4 has `BFCL_v4_simple_python.json` beside the Java and JavaScript ones.
CATEGORY_FILES = {
    "simple": r"BFCL_v\d+_simple(_python)?\.json",
    "multiple": r"BFCL_v\d+_multiple\.json",
    "parallel": r"BFCL_v\d+_parallel\.json",
    "parallel_multiple": r"BFCL_v\d+_parallel_multiple\.json",
}


def convert_row(question: dict[str, Any], answer: dict[str, Any], category: str) -> dict[str, str | list]:
    """One BFCL question and its possible answer as a row of the shared tool-use schema."""
    tools = [bfcl_function_to_tool_schema(fn) for fn in question["function"]]
    names = [tool["function"]["name"] for tool in tools]
    if len(set(names)) != len(names):
        raise ValueError(f"{question['id']}: tool names collide after mapping '.' to '_': {names}")
    possible_answer = rename_possible_answer(answer["ground_truth"])
    calls = reference_calls(possible_answer, tools)
    if not check_calls(calls, possible_answer, tools):
        raise ValueError(f"{question['id']}: the reference calls {calls} do not pass their own possible answer.")
    # `question` is a list of turns, each a list of messages; a single-turn row has one turn.
    prompt = [
        {"role": message["role"], "content": message["content"]} for turn in question["question"] for message in turn
    ]
    return {
        "id": question["id"],
        "category": category,
        "prompt": prompt,
        "tools": json.dumps(tools, ensure_ascii=False),
        "ground_truth": json.dumps(calls, ensure_ascii=False),
        "possible_answer": json.dumps(possible_answer, ensure_ascii=False),
        "initial_config": "",
        "involved_classes": "[]",
    }


def convert_category(wheel: Path, category: str, max_rows: int) -> list[dict[str, str | list]]:
    """The rows of `category`, in BFCL's order; the first `max_rows` of them when `max_rows` > 0."""
    questions = read_bfcl_json(wheel, CATEGORY_FILES[category])
    answers = {row["id"]: row for row in read_bfcl_json(wheel, "possible_answer/" + CATEGORY_FILES[category])}
    missing = [question["id"] for question in questions if question["id"] not in answers]
    if missing:
        raise ValueError(f"{category}: no possible answer for {missing[:5]} ({len(missing)} in all).")
    if max_rows > 0:
        questions = questions[:max_rows]
    return [convert_row(question, answers[question["id"]], category) for question in questions]


def write_jsonl(rows: list[dict[str, Any]], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--categories", nargs="+", choices=list(CATEGORY_FILES), default=list(CATEGORY_FILES),
        help="BFCL single-turn categories to write (default: all).",
    )  # fmt: skip
    parser.add_argument(
        "--out", type=Path, default=Path(__file__).resolve().parents[1] / "bfcl",
        help="Output folder; one <category>.jsonl is written per category (default: data/bfcl).",
    )  # fmt: skip
    parser.add_argument(
        "--max-per-category", type=int, default=0,
        help="Keep only the first N rows of each category (default 0: keep all).",
    )  # fmt: skip
    parser.add_argument(
        "--wheel", type=Path, default=None,
        help=f"A downloaded bfcl_eval wheel; without it bfcl-eval=={BFCL_EVAL_VERSION} is fetched with pip.",
    )  # fmt: skip
    args = parser.parse_args(argv)

    with tempfile.TemporaryDirectory() as tmp:
        wheel = args.wheel if args.wheel is not None else fetch_bfcl_wheel(tmp)
        for category in args.categories:
            rows = convert_category(wheel, category, args.max_per_category)
            path = args.out / f"{category}.jsonl"
            write_jsonl(rows, path)
            print(f"{category}: {len(rows)} rows -> {path} ({path.stat().st_size / 1e6:.2f} MB)")


if __name__ == "__main__":
    main()
