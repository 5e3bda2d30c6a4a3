r"""The horizon task family (`data/horizon/`, made by `data/scripts/make_horizon_data.py`): its reward and its labels.

A problem is K decisions, each one line `a op b = r` whose result `r` is the decision (a few tokens) and whose operands,
operator and `=` are execution tokens copied from the prompt or the line before:

- `independent`: "Work out each line: 23 + 5, 41 - 3, 67 + 8." Each line's operands come from the prompt, so a wrong
  result changes nothing that later lines must write.
- `chained`: "Start from 23 and apply in turn: + 5, - 3, + 8." Each line starts from the previous line's result, so an
  early error propagates and the later lines stay consistent with it.

The reference solution is the K lines, one per decision (`reference_lines`), and nothing else; the ground truth is
the K reference results joined by commas (`"28,38,75"`). The reward is binary: 1 when the completion writes exactly K
equation lines whose results are the reference's, else 0. Every task has exactly one right completion, so the first
wrong token of any rollout is the first character where it departs from the reference solution (`first_wrong_char`),
and each decision's correctness is whether its line's result is the reference's (`decision_correct`: in `chained`, a
line that computes right from a wrong carried value is still a wrong decision, as the task scores it; `step_correct`
judges each line given the ones before it instead, so that line is a right step). All functions
here read text the model wrote: they return a value or None, never raise on it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from .math_rewards import completion_text

VARIANTS = ("independent", "chained")

INDEPENDENT_PREFIX = "Work out each line: "
CHAINED_PREFIX = "Start from "
CHAINED_MIDDLE = " and apply in turn: "

# At most 18 digits a number: a longer one is no equation line (and `int` never meets Python's 4300-digit limit).
_EQUATION = re.compile(
    r"^[ \t]*(-?\d{1,18})[ \t]*([+-])[ \t]*(\d{1,18})[ \t]*=[ \t]*(-?\d{1,18})[ \t]*$", re.MULTILINE
)
_PAIR = re.compile(r"(\d+) ([+-]) (\d+)")
_STEP = re.compile(r"([+-]) (\d+)")


@dataclass(frozen=True)
class HorizonProblem:
    """One problem: `variant`, the start value (`chained`; None for `independent`) and the K steps as
    (left operand, operator, right operand) in the reference (for `chained` each left operand is the previous result)."""

    variant: str
    steps: tuple[tuple[int, str, int], ...]

    @property
    def k(self) -> int:
        return len(self.steps)

    @property
    def results(self) -> list[int]:
        return [a + b if op == "+" else a - b for a, op, b in self.steps]


def make_problem(variant: str, start: int | None, ops: list[tuple[str, int]] | list[tuple[int, str, int]]):
    """`independent`: ops are (a, op, b) triples; `chained`: (op, b) pairs applied in turn from `start`."""
    if variant == "independent":
        return HorizonProblem(variant, tuple((int(a), op, int(b)) for a, op, b in ops))
    if variant == "chained":
        steps, value = [], int(start)
        for op, b in ops:
            steps.append((value, op, int(b)))
            value = value + int(b) if op == "+" else value - int(b)
        return HorizonProblem(variant, tuple(steps))
    raise ValueError(f"variant must be one of {VARIANTS}; got {variant!r}.")


def question(problem: HorizonProblem) -> str:
    """The problem as the prompt states it (`horizon_problem` reads it back)."""
    if problem.variant == "independent":
        return INDEPENDENT_PREFIX + ", ".join(f"{a} {op} {b}" for a, op, b in problem.steps) + "."
    start = problem.steps[0][0]
    return f"{CHAINED_PREFIX}{start}{CHAINED_MIDDLE}" + ", ".join(f"{op} {b}" for _, op, b in problem.steps) + "."


def horizon_problem(prompt: Any) -> HorizonProblem | None:
    """The problem stated in a prompt (text, or messages whose last user message states it); None when it states
    none. Reads the first line of the user message, so a template the data adapter appends after it is ignored."""
    if isinstance(prompt, (list, tuple)):
        users = [m.get("content") for m in prompt if isinstance(m, dict) and m.get("role") == "user"]
        prompt = users[-1] if users and isinstance(users[-1], str) else ""
    if not isinstance(prompt, str):
        return None
    for line in prompt.splitlines():
        start = line.find(INDEPENDENT_PREFIX)
        if start >= 0:
            body = line[start + len(INDEPENDENT_PREFIX) :].rstrip(". ")
            pairs = [_PAIR.fullmatch(part.strip()) for part in body.split(",")]
            if pairs and all(pairs):
                return make_problem("independent", None, [(m[1], m[2], m[3]) for m in pairs])
            return None
        start = line.find(CHAINED_PREFIX)
        middle = line.find(CHAINED_MIDDLE)
        if start >= 0 and middle > start:
            first = line[start + len(CHAINED_PREFIX) : middle]
            body = line[middle + len(CHAINED_MIDDLE) :].rstrip(". ")
            steps = [_STEP.fullmatch(part.strip()) for part in body.split(",")]
            if first.isdigit() and steps and all(steps):
                return make_problem("chained", int(first), [(m[1], m[2]) for m in steps])
            return None
    return None


def reference_lines(problem: HorizonProblem) -> str:
    """The reference solution: one line `a op b = r` per decision, joined by newlines."""
    return "\n".join(f"{a} {op} {b} = {r}" for (a, op, b), r in zip(problem.steps, problem.results, strict=True))


def decision_spans(problem: HorizonProblem) -> list[tuple[int, int]]:
    """Character spans [start, end) of each decision (a line's result) in `reference_lines(problem)`."""
    spans, offset = [], 0
    for line in reference_lines(problem).split("\n"):
        head = line.rindex("= ") + 2
        spans.append((offset + head, offset + len(line)))
        offset += len(line) + 1
    return spans


def equation_lines(text: str) -> list[tuple[int, int, int]]:
    """The equation lines a completion writes, in order: (result, line start, line end) in characters, the end
    including the newline where there is one."""
    out = []
    for match in _EQUATION.finditer(text):
        end = match.end() + 1 if text[match.end() : match.end() + 1] == "\n" else match.end()
        out.append((int(match[4]), match.start(), end))
    return out


def parse_ground_truth(ground_truth: Any) -> list[int] | None:
    """`"28,38,75"` -> [28, 38, 75]; None when it is not a comma-separated list of integers."""
    try:
        values = [int(part) for part in str(ground_truth).split(",")]
    except (TypeError, ValueError):
        return None
    return values or None


def decision_correct(completion: Any, results: list[int]) -> list[bool]:
    """Per decision k (of len(results)): did the completion's k-th equation line write the reference result?
    A missing line is a wrong decision; lines after the K-th are not decisions (the reward fails them)."""
    lines = equation_lines(completion_text(completion))
    return [k < len(lines) and lines[k][0] == want for k, want in enumerate(results)]


def step_correct(completion: Any, problem: HorizonProblem) -> list[bool]:
    """Per decision k: is the completion's k-th equation line a right step from what it was given? Its operator and
    right operand are the prompt's k-th, its left operand the prompt's (`independent`; for `chained`, the start value
    on the first line) or the result the completion wrote on the line before (`chained`), and its result is what
    they make. In `chained` a line that computes right from a wrong carried value is a right step here (a wrong
    decision for `decision_correct` and the reward): the step's own correctness, not the value it inherits. A
    missing line is a wrong step."""
    text = completion_text(completion)
    lines = [(int(m[1]), m[2], int(m[3]), int(m[4])) for m in _EQUATION.finditer(text)]
    out, carried = [], None
    for k, (a_ref, op_ref, b_ref) in enumerate(problem.steps):
        if k >= len(lines):
            out.append(False)
            continue
        a, op, b, r = lines[k]
        want_a = carried if problem.variant == "chained" and k > 0 else a_ref
        out.append(a == want_a and op == op_ref and b == b_ref and r == (a + b if op == "+" else a - b))
        carried = r
    return out


def decision_of_char(completion: Any, k: int) -> list[int]:
    """Per character of the completion's text, the index of the decision (< k) whose equation line holds it, or -1
    (text outside the first k equation lines)."""
    text = completion_text(completion)
    out = [-1] * len(text)
    for index, (_, start, end) in enumerate(equation_lines(text)[:k]):
        out[start:end] = [index] * (end - start)
    return out


def first_wrong_char(completion: Any, reference: str) -> int | None:
    """The index of the first character where the completion departs from the reference solution, counted from where
    it starts writing it (after a chat template's empty think block, say); len(text) when it stops before the
    reference ends (the missing text is the error, its end the site). None when it never departs (it did not fail on
    the reference's text), or never writes the reference's first operand."""
    text = completion_text(completion)
    first = reference.split(" ", 1)[0]
    start = text.find(first)
    if start < 0:
        return None
    body = text[start:]
    for index, (a, b) in enumerate(zip(body, reference)):
        if a != b:
            return start + index
    if len(body) < len(reference):
        return len(text)
    if body[len(reference) :].strip():  # more than the reference: the first extra character
        extra = len(reference) + (len(body[len(reference) :]) - len(body[len(reference) :].lstrip()))
        return start + extra
    return None


def horizon_accuracy(completions: list, ground_truth: list, **kwargs) -> list[float | None]:
    """1.0 when the completion writes exactly K equation lines (`a op b = r`, one a line; other lines ignored) whose
    results are the K reference results of `ground_truth` ("28,38,75"), else 0.0; None where the ground truth is
    missing or not such a list (left out of the reward's mean, as TRL does with None)."""
    out = []
    for completion, truth in zip(completions, ground_truth, strict=True):
        results = parse_ground_truth(truth) if truth is not None else None
        if results is None:
            out.append(None)
            continue
        lines = equation_lines(completion_text(completion))
        out.append(float(len(lines) == len(results) and all(line[0] == r for line, r in zip(lines, results))))
    return out
