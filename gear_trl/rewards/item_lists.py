r"""The item-list task family (`data/item_lists/`, made by `data/scripts/make_item_list_data.py`): its reward and labels.

A problem is K items (short English words) stated in the prompt; the answer is those K items, one a line, in order.
It is a family whose answer sits in the prompt, for a small pretrained instruct model (SmolLM2-135M-Instruct) that
cannot do the horizon family's arithmetic (bench/results/pretrained/EXPLORE.md). Two variants:

- `copy`: "Write these words one per line, in the same order: cat, river, lamp." -> `cat` / `river` / `lamp`.
  Reward `item_list_accuracy`: 1 when the completion's non-empty lines, stripped, are exactly the K items in order,
  else 0, so an introduction, a numbered list or an extra line fails.
- `numbered`: "Repeat this numbered list exactly:" then `1. cat` / `2. river` / `3. lamp` on their own lines ->
  the same list. Reward `numbered_list_accuracy`: 1 when the completion has exactly K non-empty lines and line k,
  stripped, is item k after an optional list marker (its own number and `.` or `)`, or `-` or `*`), with end
  punctuation (`.,;:!`) and case ignored. SmolLM2-135M-Instruct returns such a list without worked examples, which it
  does not for `copy` (bench/results/pretrained/probe_formats.txt), and writes `1. Cat` or `cat.` as often as `1. cat`:
  the reading is the probe's "lenient" one, so a line's wording is judged, not its typography.

Each line is a decision. The reference solution is the K lines the variant asks for (`reference_lines`); the ground
truth is the K items joined by commas (`"cat,river,lamp"`) in both. A failed rollout's first wrong character is where
its first wrong line departs from its item (`first_wrong_char`), and decision k is right when the completion's k-th
non-empty line reads as item k (`decision_correct`); both take the variant (`variant=`, default `copy`), and
:func:`labels` binds them to one. All functions here read text the model wrote: they return a value or None, never
raise on it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import partial
from types import SimpleNamespace
from typing import Any

from .math_rewards import completion_text

VARIANTS = ("copy", "numbered")

COPY_PREFIX = "Write these words one per line, in the same order: "
NUMBERED_PREFIX = "Repeat this numbered list exactly:"

_ITEM = re.compile(r"[a-z]+")
_NUMBERED_LINE = re.compile(r"(\d+)\. ([a-z]+)")
_END_PUNCTUATION = ".,;:!"


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


def numbered(items) -> list[str]:
    """`["cat", "river"]` -> `["1. cat", "2. river"]`."""
    return [f"{k}. {item}" for k, item in enumerate(items, start=1)]


def question(problem: ItemListProblem) -> str:
    """The problem as the prompt states it (`item_list_problem` reads it back)."""
    if problem.variant == "numbered":
        return "\n".join([NUMBERED_PREFIX, *numbered(problem.items)])
    return COPY_PREFIX + ", ".join(problem.items) + "."


def item_list_problem(prompt: Any) -> ItemListProblem | None:
    """The problem stated in a prompt (text, or messages whose last user message states it); None when it states
    none. `copy`: reads the line holding its prefix; `numbered`: the lines `1. w`, `2. w`, ... right after the line
    holding its prefix, up to the first line that does not continue them. So a template the data adapter or the teacher
    appends on later lines (after a blank line, or in other words) is ignored."""
    if isinstance(prompt, (list, tuple)):
        users = [m.get("content") for m in prompt if isinstance(m, dict) and m.get("role") == "user"]
        prompt = users[-1] if users and isinstance(users[-1], str) else ""
    if not isinstance(prompt, str):
        return None
    lines = prompt.splitlines()
    for index, line in enumerate(lines):
        if line.rstrip().endswith(NUMBERED_PREFIX):
            items = []
            for follower in lines[index + 1 :]:
                found = _NUMBERED_LINE.fullmatch(follower.strip())
                if found is None or int(found.group(1)) != len(items) + 1:
                    break
                items.append(found.group(2))
            return ItemListProblem("numbered", tuple(items)) if items else None
    for line in lines:
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
    """The reference solution: the K items, one a line (`numbered`: each after its number, `1. cat`)."""
    return "\n".join(numbered(problem.items) if problem.variant == "numbered" else problem.items)


def decision_spans(problem: ItemListProblem) -> list[tuple[int, int]]:
    """Character spans [start, end) of each decision (an item, without its number or newline) in
    `reference_lines(problem)`."""
    spans, offset = [], 0
    lines = numbered(problem.items) if problem.variant == "numbered" else problem.items
    for item, line in zip(problem.items, lines, strict=True):
        start = offset + len(line) - len(item)
        spans.append((start, start + len(item)))
        offset += len(line) + 1
    return spans


def _check_variant(variant: str) -> None:
    if variant not in VARIANTS:
        raise ValueError(f"variant must be one of {VARIANTS}; got {variant!r}.")


def line_item(line: str, k: int, variant: str = "copy") -> tuple[str, int]:
    """What a stripped completion line says as decision k (0-based) of `variant`, and where that text starts in the
    line: `copy` the line itself; `numbered` the line without a leading marker (`k+1.` or `k+1)` and spaces, or `-` /
    `*` and spaces) and without end punctuation, lower-cased."""
    if variant != "numbered":
        return line, 0
    marker = re.match(rf"(?:{k + 1}[.)]|[-*])\s*", line)
    start = marker.end() if marker else 0
    return line[start:].rstrip(_END_PUNCTUATION).rstrip().lower(), start


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


def decision_correct(completion: Any, items: list[str], variant: str = "copy") -> list[bool]:
    """Per decision k (of len(items)): does the completion's k-th non-empty line, stripped, read as item k
    (`line_item`)? A missing line is a wrong decision; lines after the K-th are not decisions (the reward fails them)."""
    _check_variant(variant)
    lines = item_lines(completion_text(completion))
    return [k < len(lines) and line_item(lines[k][0], k, variant)[0] == want for k, want in enumerate(items)]


def decision_of_char(completion: Any, k: int) -> list[int]:
    """Per character of the completion's text, the index of the decision (< k) whose line holds it (from its first
    non-space character to its newline), or -1 (blank lines, leading spaces, lines after the k-th)."""
    text = completion_text(completion)
    out = [-1] * len(text)
    for index, (_, start, end) in enumerate(item_lines(text)[:k]):
        out[start:end] = [index] * (end - start)
    return out


def first_wrong_char(completion: Any, reference: str, variant: str = "copy") -> int | None:
    """The index of the first character where the completion departs from the reference solution, line by line (the
    reward's reading: blank lines and spaces at a line's ends are not departures; `numbered`: `line_item`'s reading of
    both lines): in its first wrong non-empty line, the first character of its item text that differs from the
    reference's item, or the end of that text where it is a strict prefix of it; the first character of a line beyond
    the reference's last; len(text) when the completion stops before the reference ends (the missing text is the
    error, its end the site). None when it never departs."""
    _check_variant(variant)
    if not isinstance(reference, str):
        return None
    text = completion_text(completion)
    wanted = [line_item(line.strip(), k, variant)[0] for k, line in enumerate(ln for ln in reference.splitlines()
                                                                             if ln.strip())]  # fmt: skip
    lines = item_lines(text)
    for k, (line, start, _) in enumerate(lines):
        if k >= len(wanted):
            return start
        said, offset = line_item(line, k, variant)
        if said != wanted[k]:
            same = next((i for i, (a, b) in enumerate(zip(said, wanted[k])) if a != b), min(len(said), len(wanted[k])))
            return start + offset + same
    return len(text) if len(lines) < len(wanted) else None


def labels(variant: str) -> SimpleNamespace:
    """The label functions of `variant`, with the names and signatures the horizon family's have
    (`reference_lines`, `decision_correct`, `first_wrong_char`, `decision_of_char`), for readers that take either
    family's labels (bench/harness/oracles.py `task_problem`)."""
    _check_variant(variant)
    return SimpleNamespace(
        variant=variant,
        reference_lines=reference_lines,
        decision_correct=partial(decision_correct, variant=variant),
        first_wrong_char=partial(first_wrong_char, variant=variant),
        decision_of_char=decision_of_char,
    )


def _list_reward(completions: list, ground_truth: list, variant: str) -> list[float | None]:
    """Per completion: 1.0 when it has exactly K non-empty lines and each reads as its item under `variant`
    (`decision_correct`), else 0.0; None where the ground truth is missing or not such a list (left out of the
    reward's mean, as TRL does with None)."""
    out = []
    for completion, truth in zip(completions, ground_truth, strict=True):
        items = parse_ground_truth(truth)
        if items is None:
            out.append(None)
            continue
        lines = item_lines(completion_text(completion))
        out.append(float(len(lines) == len(items) and all(decision_correct(completion, items, variant))))
    return out


def item_list_accuracy(completions: list, ground_truth: list, **kwargs) -> list[float | None]:
    """The `copy` variant's reward: 1.0 when the completion's non-empty lines, stripped, are exactly the K items of
    `ground_truth` ("cat,river,lamp") in order, else 0.0; None where the ground truth is missing or not such a list."""
    return _list_reward(completions, ground_truth, "copy")


def numbered_list_accuracy(completions: list, ground_truth: list, **kwargs) -> list[float | None]:
    """The `numbered` variant's reward: 1.0 when the completion has exactly K non-empty lines and line k reads as item
    k of `ground_truth` ("cat,river,lamp"): after an optional marker (its own number and `.` or `)`, or `-` / `*`),
    end punctuation and case ignored (`line_item`); else 0.0; None where the ground truth is missing or not such a
    list."""
    return _list_reward(completions, ground_truth, "numbered")
