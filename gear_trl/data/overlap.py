"""Prompts a training split shares with an evaluation split: a run that trains on its benchmark's tasks measures
memorisation, not learning (issue 32).

Rows are compared by their request text, read from the raw columns so that two datasets of different formats
compare (`prompt` messages, or the first of `prompt`, `question`, `problem`, `query` given as a string), with case and
runs of whitespace ignored. Equal text after that is a shared prompt; near-duplicates (a reworded question) are not
found.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

TEXT_COLUMNS = ("prompt", "question", "problem", "query")
"""Columns a request is read from, in this order (the first present one)."""

_SPACE = re.compile(r"\s+")


def request_text(row: dict[str, Any]) -> str | None:
    """The normalized request of a raw row: its user messages' text (a conversational `prompt`) or the first string
    column of `TEXT_COLUMNS`; None when the row has none."""
    for column in TEXT_COLUMNS:
        value = row.get(column)
        if isinstance(value, list):
            parts = [m.get("content") for m in value if isinstance(m, dict) and m.get("role", "user") == "user"]
            value = "\n".join(p for p in parts if isinstance(p, str))
        if isinstance(value, str) and value.strip():
            return _SPACE.sub(" ", value).strip().casefold()
    return None


def request_texts(rows: Iterable[dict[str, Any]]) -> set[str]:
    return {text for row in rows if (text := request_text(row)) is not None}


def shared_requests(train: Iterable[dict[str, Any]], held_out: Iterable[dict[str, Any]]) -> list[str]:
    """The normalized requests found in both, sorted."""
    return sorted(request_texts(train) & request_texts(held_out))


def overlap_message(train_name: str, held_out_name: str, shared: list[str], held_out_rows: int) -> str:
    example = shared[0][:120] + ("..." if len(shared[0]) > 120 else "")
    return (
        f"the training split {train_name} shares {len(shared)} prompt(s) with {held_out_name} ({held_out_rows} rows), "
        f"e.g. {example!r}: scores on {held_out_name} would measure memorisation. Train on data disjoint from what "
        "the model is scored on."
    )
