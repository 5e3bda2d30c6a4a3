"""Make data/bfcl_tiny/: BFCL multi-turn samples small enough for the tiny CPU model (2,048-token context).

Keeps the file-system-only samples of data/bfcl/multi_turn_base.jsonl whose earlier conversation is short, and cuts
each row's tool list down to the functions its ground truth calls plus a few common ones (pwd, ls, cat), so a prompt
fits the tiny model. Everything else (initial_config, ground truth) is unchanged.

    python data/scripts/make_bfcl_tiny.py
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

ALWAYS = ("pwd", "ls", "cat", "cd")


def trim(row: dict) -> dict | None:
    if json.loads(row["involved_classes"]) != ["GorillaFileSystem"]:
        return None
    if len(row["prompt"]) > 3:  # keep the earlier conversation short
        return None
    needed = {call["name"] for call in json.loads(row["ground_truth"])} | set(ALWAYS)
    tools = [tool for tool in json.loads(row["tools"]) if tool["function"]["name"] in needed]
    for tool in tools:  # the shared class blurb repeats in every description; the tool's own sentence is enough
        description = tool["function"]["description"]
        tool["function"]["description"] = description.split("Tool description: ")[-1]
    return {**row, "tools": json.dumps(tools)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--source", default="data/bfcl/multi_turn_base.jsonl")
    parser.add_argument("--out", default="data/bfcl_tiny")
    parser.add_argument("--test-size", type=int, default=4)
    args = parser.parse_args()
    rows = [json.loads(line) for line in Path(args.source).read_text().splitlines() if line.strip()]
    kept = [r for r in (trim(row) for row in rows) if r is not None]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    splits = {"test": kept[: args.test_size], "train": kept[args.test_size :]}
    for split, part in splits.items():
        with open(out / f"{split}.jsonl", "w") as handle:
            handle.writelines(json.dumps(row, ensure_ascii=False) + "\n" for row in part)
        print(f"{split}: {len(part)} rows -> {out / f'{split}.jsonl'}")


if __name__ == "__main__":
    main()
