r"""Math task adapters: rows of GSM8K-, MATH- or generic-format datasets to GEAR training examples.

Every adapter turns a row into

    {"prompt": [{"role": "system", ...}?, {"role": "user", "content": ...}], <ground_truth_column>: str | None,
     "reference_solution": str | None}

The ground truth is the bare final answer (`"1234"`, `"\frac{3}{4}"`) that the accuracy reward and the teacher
prompt both read. A row whose answer cannot be extracted keeps `None` rather than being dropped, so the trainer can
count it (`gear/no_ground_truth_frac`). The reference solution is the worked solution where the format has one (a
GSM8K answer without its `####` line, a MATH `solution`, a `solution` column next to AIME's answer, a generic row's
`reference_solution`), for the teacher's `{reference_solution}` (`teacher_reference: solution`); None otherwise.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

MATH_PROMPT_TEMPLATE = "{question}\n\nPlease reason step by step, and put your final answer within \\boxed{{}}."
"""User-message text; `{question}` is replaced by the problem. Pass `prompt_template` to override."""


def prompt_template_problem(template: Any, field: str = "prompt_template") -> str | None:
    """Why `template` cannot be a prompt template (it must be text with one `{question}` field and no other, literal
    braces written `{{` `}}`), naming `field`; None when it can."""
    if not isinstance(template, str):
        return f"`{field}` must be text with a {{question}} field; got {type(template).__name__}."
    try:
        import string

        names = [name for _, name, _, _ in string.Formatter().parse(template) if name is not None]
    except ValueError as err:
        return f"`{field}` {template!r} is not a format string ({err}); write literal braces as {{{{ and }}}}."
    if names.count("question") != 1 or set(names) != {"question"}:
        return (
            f"`{field}` {template!r} must contain the field {{question}} exactly once and no other field (found "
            f"{names}); write literal braces as {{{{ and }}}}."
        )
    return None

_BOX_COMMANDS = ("\\boxed", "\\fbox")
REFERENCE_SOLUTION_COLUMN = "reference_solution"
"""Output column of the worked solution (and the input column `generic` rows may carry it in)."""


def boxed_spans(text: str) -> list[tuple[int, int]]:
    r"""(start, end) of the content of every complete `\boxed{...}` / `\fbox{...}` in `text`, in order.

    Braces nest (`\boxed{\frac{1}{2}}` gives `\frac{1}{2}`); a box whose braces never close is not counted.
    """
    spans = []
    for match in re.finditer(r"\\(?:boxed|fbox)\s*\{", text):
        depth, start = 1, match.end()
        for i in range(start, len(text)):
            if text[i] == "{":
                depth += 1
            elif text[i] == "}":
                depth -= 1
                if depth == 0:
                    spans.append((start, i))
                    break
    # A box inside another box (`\boxed{\boxed{1}}`) is part of the outer answer, not an answer of its own.
    return [(s, e) for s, e in spans if not any(s0 < s and e <= e0 for s0, e0 in spans)]


def last_boxed(text: str) -> str | None:
    r"""The content of the last complete `\boxed{...}` in `text`, stripped, or None if there is none."""
    spans = boxed_spans(text)
    if not spans:
        return None
    start, end = spans[-1]
    return text[start:end].strip()


def gsm8k_ground_truth(answer: Any) -> str | None:
    """The number after the last `####` of a GSM8K answer, without thousands separators or spaces."""
    if not isinstance(answer, str) or "####" not in answer:
        return None
    final = answer.rsplit("####", 1)[1]
    final = re.sub(r"[\s,$]", "", final)
    return final or None


def math_ground_truth(solution: Any) -> str | None:
    r"""The content of the last `\boxed{...}` of a MATH solution."""
    if not isinstance(solution, str):
        return None
    return last_boxed(solution) or None


def gsm8k_solution(answer: Any) -> str | None:
    """A GSM8K answer's worked solution: the text before its last `####` line, stripped; None if there is none."""
    if not isinstance(answer, str) or "####" not in answer:
        return None
    return answer.rsplit("####", 1)[0].strip() or None


def generic_ground_truth(ground_truth: Any) -> str | None:
    """The ground truth as given, as a stripped string; None if missing or empty."""
    if ground_truth is None:
        return None
    text = str(ground_truth).strip()
    return text or None


def with_system_prompt(messages: list[dict], system_prompt: str | None) -> list[dict]:
    """`messages` with their system message replaced by (or, without one, preceded by) `system_prompt`."""
    if system_prompt is None:
        return messages
    if messages and messages[0]["role"] == "system":
        messages = messages[1:]
    return [{"role": "system", "content": system_prompt}, *messages]


@dataclass(frozen=True)
class MathAdapter:
    """How to read one dataset format: which column holds the question, which the answer, and how to get the ground
    truth from the answer."""

    name: str
    question_column: str
    answer_column: str
    extract_ground_truth: Callable[[Any], str | None]
    solution_column: str | None = None
    """Optional input column of the worked solution (a row without it, or with an empty value, has none)."""
    extract_solution: Callable[[Any], str | None] = generic_ground_truth

    @property
    def columns(self) -> tuple[str, str]:
        return (self.question_column, self.answer_column)

    def matches(self, column_names: list[str]) -> bool:
        return all(column in column_names for column in self.columns)

    def __call__(
        self,
        row: dict[str, Any],
        *,
        ground_truth_column: str = "ground_truth",
        system_prompt: str | None = None,
        prompt_template: str = MATH_PROMPT_TEMPLATE,
    ) -> dict[str, Any]:
        """One row to `{"prompt": messages, ground_truth_column: str | None, "reference_solution": str | None}`.

        A string question is formatted with `prompt_template` and becomes the user message. A question that is
        already a list of messages is kept as is; `system_prompt`, when given, replaces its system message or is
        prepended.
        """
        question = row[self.question_column]
        if isinstance(question, str):
            messages = [{"role": "user", "content": prompt_template.format(question=question)}]
        else:
            messages = [dict(message) for message in question]
        messages = with_system_prompt(messages, system_prompt)
        solution = row.get(self.solution_column) if self.solution_column else None
        return {
            "prompt": messages,
            ground_truth_column: self.extract_ground_truth(row[self.answer_column]),
            REFERENCE_SOLUTION_COLUMN: self.extract_solution(solution),
        }


GSM8K = MathAdapter("gsm8k", "question", "answer", gsm8k_ground_truth, "answer", gsm8k_solution)
MATH = MathAdapter("math", "problem", "solution", math_ground_truth, "solution")
AIME = MathAdapter("aime", "problem", "answer", generic_ground_truth, "solution")
"""AIME-style sets (e.g. HuggingFaceH4/aime_2024, split `train`): the `answer` column is the final answer itself; a
`solution` column, when there is one, is the reference solution."""
GENERIC = MathAdapter("generic", "prompt", "ground_truth", generic_ground_truth, REFERENCE_SOLUTION_COLUMN)


def pattern_ground_truth(pattern: str) -> Callable[[Any], str | None]:
    """An extractor taking the last match of the regular expression `pattern` in an answer (its first group when it
    has one, else the whole match), stripped; None when it does not match. `"Answer:\\s*(.+)"` reads the line after
    "Answer:"."""
    compiled = re.compile(pattern)

    def extract(answer: Any) -> str | None:
        if answer is None:
            return None
        matches = list(compiled.finditer(str(answer)))
        if not matches:
            return None
        match = matches[-1]
        text = match.group(1) if compiled.groups else match.group(0)
        return (text or "").strip() or None

    return extract


def column_adapter(question_column: str, answer_column: str, answer_pattern: str | None = None) -> MathAdapter:
    """`dataset_format: columns`: the question from `question_column`, the ground truth from `answer_column`, as it is
    or (with `answer_pattern`) the last match of that regular expression in it."""
    extract = generic_ground_truth if answer_pattern is None else pattern_ground_truth(answer_pattern)
    return MathAdapter("columns", question_column, answer_column, extract)


@dataclass(frozen=True)
class FunctionAdapter:
    """A user's own adapter function by import path (`dataset_format: my_tasks.data:to_example`): `func(row)` returns
    `{"prompt": messages or text, "ground_truth": ..., <any other column the environment or rewards read>}`."""

    name: str
    func: Callable[[dict[str, Any]], dict[str, Any]]
    columns: tuple[str, ...] = ()

    def matches(self, column_names: list[str]) -> bool:
        return True

    def __call__(
        self,
        row: dict[str, Any],
        *,
        ground_truth_column: str = "ground_truth",
        system_prompt: str | None = None,
        **_: Any,
    ) -> dict[str, Any]:
        example = self.func(dict(row))
        if not isinstance(example, dict) or "prompt" not in example:
            raise TypeError(
                f"dataset_format {self.name!r} returned {type(example).__name__}; it must return a dict with `prompt` "
                "(and `ground_truth`)."
            )
        example = dict(example)
        prompt = example["prompt"]
        messages = [{"role": "user", "content": prompt}] if isinstance(prompt, str) else [dict(m) for m in prompt]
        example["prompt"] = with_system_prompt(messages, system_prompt)
        if ground_truth_column != "ground_truth" and "ground_truth" in example:
            example[ground_truth_column] = example.pop("ground_truth")
        example.setdefault(ground_truth_column, None)
        return example
