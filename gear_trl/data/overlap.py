"""Prompts a training split shares with an evaluation split: a run that trains on its benchmark's tasks measures
memorisation, not learning (issue 32).

Rows are compared by their request text, read from the raw columns so that two datasets of different formats
compare (`prompt` messages, or the first of `prompt`, `question`, `problem`, `query` given as a string; a string that
is JSON-encoded messages is read as messages). Before comparing, a request is normalized (`normalize`) so that a
reformatted copy is found: Unicode compatibility forms folded (NFKC), case ignored, any JSON object or array in the
text rewritten with sorted keys (a tool call or argument block whose keys were reordered), numbers written one way
(`1,000` is `1000`, `2.50` is `2.5`, `3.0` is `3`, `007` is `7`, `.5` is `0.5`), prose punctuation (`. , ; : ! ?`,
quotes, dashes used as punctuation) dropped, runs of whitespace made one space and spaces beside any other symbol
dropped (`1 + 2` is `1+2`). Operators (`+ - * / ^ =`) and brackets are kept: `x^2+1` and `x^2-1` are different
problems. Equal text after that is a shared prompt; a reworded
question (other words for the same problem) is not found.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Iterable
from typing import Any

TEXT_COLUMNS = ("prompt", "question", "problem", "query")
"""Columns a request is read from, in this order (the first present one)."""

_SPACE = re.compile(r"\s+")
_THOUSANDS = re.compile(r"(?<![\d.,])\d{1,3}(?:,\d{3})+(?!\d|,\d)")
_DECIMAL = re.compile(r"(?<![\d.])(\d+)\.(\d+)(?!\d|\.\d)")
_BARE_FRACTION = re.compile(r"(?<![\w.])\.(\d)")
_LEADING_ZEROS = re.compile(r"(?<![\w.])0+(\d)")
_AROUND_SYMBOL = re.compile(r"\s*([^\w\s])\s*")
_PUNCTUATION = re.compile(
    r"[,;:!?\"'`\u2018\u2019\u201c\u201d\u00ab\u00bb\u00bf\u00a1\u2026\u2013\u2014]|\.(?!\d)|(?<!\d)\."
)


def _sorted_json(text: str) -> str:
    """`text` with every JSON object or array in it re-written with sorted keys and one spacing."""
    decoder, out, i = json.JSONDecoder(), [], 0
    while i < len(text):
        if text[i] in "{[":
            try:
                value, end = decoder.raw_decode(text, i)
            except ValueError:
                value, end = None, i
            if end > i and isinstance(value, (dict, list)):
                out.append(json.dumps(value, sort_keys=True, ensure_ascii=False))
                i = end
                continue
        out.append(text[i])
        i += 1
    return "".join(out)


def _numbers(text: str) -> str:
    def decimal(match: re.Match) -> str:
        fraction = match.group(2).rstrip("0")
        return match.group(1) + ("." + fraction if fraction else "")

    text = _THOUSANDS.sub(lambda match: match.group().replace(",", ""), text)
    text = _BARE_FRACTION.sub(r"0.\1", text)
    text = _DECIMAL.sub(decimal, text)
    return _LEADING_ZEROS.sub(r"\1", text)


def normalize(text: str) -> str:
    """The form two requests are compared in (see the module docstring)."""
    text = unicodedata.normalize("NFKC", text).casefold()
    text = _numbers(_sorted_json(text))
    text = _SPACE.sub(" ", _PUNCTUATION.sub(" ", text))
    return _AROUND_SYMBOL.sub(r"\1", text).strip()


def _user_text(messages: list) -> str:
    parts = [m.get("content") for m in messages if isinstance(m, dict) and m.get("role", "user") == "user"]
    return "\n".join(p for p in parts if isinstance(p, str))


def request_text(row: dict[str, Any]) -> str | None:
    """The normalized request of a raw row: its user messages' text (a conversational `prompt`, also one stored as a
    JSON string) or the first string column of `TEXT_COLUMNS`; None when the row has none."""
    for column in TEXT_COLUMNS:
        value = row.get(column)
        if isinstance(value, str) and value.lstrip().startswith("[{"):
            try:
                decoded = json.loads(value)
            except ValueError:
                decoded = None
            if isinstance(decoded, list) and decoded and all(isinstance(m, dict) and "content" in m for m in decoded):
                value = decoded
        if isinstance(value, list):
            value = _user_text(value)
        if isinstance(value, str) and value.strip():
            return normalize(value) or None
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
        f"e.g. {example!r} (as compared: case, spacing, punctuation, number formatting and JSON key order ignored): "
        f"scores on {held_out_name} would measure memorisation. Train on data disjoint from what the model is scored on."
    )
