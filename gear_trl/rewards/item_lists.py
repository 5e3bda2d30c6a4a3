r"""The item-list task family (`data/item_lists/`, made by `data/scripts/make_item_list_data.py`): its reward and labels.

A problem is K items (short English words) stated in the prompt; the answer is those K items, one a line, in order.
It is a family whose answer sits in the prompt, for a small pretrained instruct model (SmolLM2-135M-Instruct) that
cannot do the horizon family's arithmetic (bench/results/pretrained/EXPLORE.md). One variant so far:

- `copy`: "Write these words one per line, in the same order: cat, river, lamp." -> `cat` / `river` / `lamp`.

Each line is a decision. The reference solution is the K items joined by newlines (`reference_lines`); the ground truth
is the K items joined by commas (`"cat,river,lamp"`). The reward (`item_list_accuracy`) is binary: 1 when the
completion's non-empty lines, stripped, are exactly the K items in order, else 0, so an introduction, a numbered list or
an extra line fails. Every problem has one right completion up to blank lines and spaces at a line's ends, so a failed
rollout's first wrong character is where its first wrong line departs from its item (`first_wrong_char`), and decision
k is right when the completion's k-th non-empty line is item k (`decision_correct`). All functions here read text the
model wrote: they return a value or None, never raise on it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from .math_rewards import completion_text

VARIANTS = ("copy",)

COPY_PREFIX = "Write these words one per line, in the same order: "

_ITEM = re.compile(r"[a-z]+")


@dataclass(frozen=True)
class ItemListProblem:
    """One problem: `variant` and the K items, in the order the answer writes them."""

    variant: str
    items: tuple[str, ...]

    @property
    def k(self) -> int:
        return len(self.items)


def make_problem(variant: str, items) -> ItemListProblem:
    """A problem of `variant` over `items` (lowercase words)."""
    if variant not in VARIANTS:
        raise ValueError(f"variant must be one of {VARIANTS}; got {variant!r}.")
    items = tuple(items)
    if not items or not all(isinstance(item, str) and _ITEM.fullmatch(item) for item in items):
        raise ValueError(f"items must be one or more lowercase words; got {items!r}.")
    return ItemListProblem(variant, items)


def question(problem: ItemListProblem) -> str:
    """The problem as the prompt states it (`item_list_problem` reads it back)."""
    return COPY_PREFIX + ", ".join(problem.items) + "."


def item_list_problem(prompt: Any) -> ItemListProblem | None:
    """The problem stated in a prompt (text, or messages whose last user message states it); None when it states
    none. Reads the line holding the prefix, so a template the data adapter appends on later lines is ignored."""
    if isinstance(prompt, (list, tuple)):
        users = [m.get("content") for m in prompt if isinstance(m, dict) and m.get("role") == "user"]
        prompt = users[-1] if users and isinstance(users[-1], str) else ""
    if not isinstance(prompt, str):
        return None
    for line in prompt.splitlines():
        start = line.find(COPY_PREFIX)
        if start < 0:
            continue
        body = line[start + len(COPY_PREFIX) :].rstrip()
        if not body.endswith("."):
            return None
        items = [part.strip() for part in body[:-1].split(",")]
        if all(_ITEM.fullmatch(item) for item in items):
            return ItemListProblem("copy", tuple(items))
        return None
    return None


def reference_lines(problem: ItemListProblem) -> str:
    """The reference solution: the K items, one a line."""
    return "\n".join(problem.items)


def decision_spans(problem: ItemListProblem) -> list[tuple[int, int]]:
    """Character spans [start, end) of each decision (an item, without its newline) in `reference_lines(problem)`."""
    spans, offset = [], 0
    for item in problem.items:
        spans.append((offset, offset + len(item)))
        offset += len(item) + 1
    return spans


def parse_ground_truth(ground_truth: Any) -> list[str] | None:
    """`"cat,river,lamp"` -> ["cat", "river", "lamp"]; None when it is not text or has an empty item."""
    if not isinstance(ground_truth, str):
        return None
    items = [part.strip() for part in ground_truth.split(",")]
    return items if all(items) else None


def item_lines(text: str) -> list[tuple[str, int, int]]:
    """The non-empty lines of a completion's text, in order: (the line stripped, where its stripped text starts, where
    the line ends, including its newline where it has one), in characters."""
    out, offset = [], 0
    for line in text.splitlines(keepends=True):
        stripped = line.strip()
        if stripped:
            out.append((stripped, offset + len(line) - len(line.lstrip()), offset + len(line)))
        offset += len(line)
    return out


def decision_correct(completion: Any, items: list[str]) -> list[bool]:
    """Per decision k (of len(items)): is the completion's k-th non-empty line, stripped, item k? A missing line is a
    wrong decision; lines after the K-th are not decisions (the reward fails them)."""
    lines = item_lines(completion_text(completion))
    return [k < len(lines) and lines[k][0] == want for k, want in enumerate(items)]


def decision_of_char(completion: Any, k: int) -> list[int]:
    """Per character of the completion's text, the index of the decision (< k) whose line holds it (from its first
    non-space character to its newline), or -1 (blank lines, leading spaces, lines after the k-th)."""
    text = completion_text(completion)
    out = [-1] * len(text)
    for index, (_, start, end) in enumerate(item_lines(text)[:k]):
        out[start:end] = [index] * (end - start)
    return out


def first_wrong_char(completion: Any, reference: str) -> int | None:
    """The index of the first character where the completion departs from the reference solution, line by line (the
    reward's reading: blank lines and spaces at a line's ends are not departures): in its first wrong non-empty line,
    the first character that differs from the reference line, or the end of its text where it is a strict prefix of
    it; the first character of a line beyond the reference's last; len(text) when the completion stops before the
    reference ends (the missing text is the error, its end the site). None when it never departs."""
    if not isinstance(reference, str):
        return None
    text = completion_text(completion)
    wanted = [line.strip() for line in reference.splitlines() if line.strip()]
    lines = item_lines(text)
    for k, (line, start, _) in enumerate(lines):
        if k >= len(wanted):
            return start
        if line != wanted[k]:
            same = next((i for i, (a, b) in enumerate(zip(line, wanted[k])) if a != b), min(len(line), len(wanted[k])))
            return start + same
    return len(text) if len(lines) < len(wanted) else None


def item_list_accuracy(completions: list, ground_truth: list, **kwargs) -> list[float | None]:
    """1.0 when the completion's non-empty lines, stripped, are exactly the K items of `ground_truth` ("cat,river,
    lamp") in order, else 0.0; None where the ground truth is missing or not such a list (left out of the reward's
    mean, as TRL does with None)."""
    out = []
    for completion, truth in zip(completions, ground_truth, strict=True):
        items = parse_ground_truth(truth)
        if items is None:
            out.append(None)
            continue
        lines = [line for line, _, _ in item_lines(completion_text(completion))]
        out.append(float(lines == items))
    return out
