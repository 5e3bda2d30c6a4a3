"""Teacher prompts: the student's prompt with the ground truth written into it.

The teacher sees exactly the student's completion tokens after a different prompt, so only the prompt is built here;
the trainer appends the completion. Kept free of trainer state so it can be tested on its own.
"""

from __future__ import annotations

import copy
import json
import math
from dataclasses import dataclass
from typing import Any

import torch

ELLIPSIS = "…"

DEFAULT_TOOL_TEACHER_TEMPLATE = (
    "\n\nReference tool calls for this request:\n{ground_truth}\nUse them only to check your own choices; make the "
    "calls yourself."
)
"""The teacher hint of rows whose ground truth is reference tool calls (`reference_calls`) when `teacher_template` is
left at its (math) default: the calls are written as the chat template writes tool calls, so a hint about `\\boxed{}`
answers would mislead. A row whose ground truth is an answer keeps the answer hint, tools in its prompt or not."""
DEFAULT_TOOL_SOLUTION_TEMPLATE = (
    "\n\nReference steps for this request:\n{reference_solution}\nUse them only to check your own choices; make the "
    "calls yourself."
)
"""The same for `teacher_reference: solution` with the template left at its (math solution) default: the row's
`reference_solution` (the calls written as steps, say) under a tool-call hint instead of a math one."""

DEFAULT_MATH_TEACHER_TEMPLATE = (
    "\n\nA reference answer to this problem is: {ground_truth}\n"
    "Use it only to check your own reasoning; solve the problem step by step and give the final answer in \\boxed{{}}."
)
DEFAULT_MATH_SOLUTION_TEMPLATE = (
    "\n\nA reference solution to this problem is:\n{reference_solution}\n"
    "Use it only to check your own reasoning; solve the problem step by step and give the final answer in \\boxed{{}}."
)
"""The teacher template `teacher_reference: solution` uses in place of the default one."""


def reference_calls(ground_truth: Any) -> list[dict] | None:
    """The ground truth as a list of tool calls (`{"name", "arguments"}` dicts; one call alone, or JSON text of
    either, counts too), or None when it is something else, such as an answer."""
    calls = ground_truth
    if isinstance(ground_truth, str):
        if not ground_truth.lstrip().startswith(("[", "{")):
            return None
        try:
            calls = json.loads(ground_truth)
        except (ValueError, RecursionError):
            return None
    if isinstance(calls, dict) and "name" in calls:
        calls = [calls]
    if isinstance(calls, list) and calls and all(isinstance(c, dict) and "name" in c for c in calls):
        return calls
    return None


FEEDBACK_TEMPLATE = "\n\nThe environment's last message in this attempt:\n{feedback}"
"""Appended to a teacher hint with `teacher_environment_feedback` (not in any paper; after SDPO's environment feedback)."""
MAX_FEEDBACK_CHARS = 2000
"""Longest feedback shown, its tail kept (our choice: about 500 tokens, enough for an error message or a final state)."""


def final_observation(completion: Any) -> str | None:
    """The environment's last message in a multi-turn rollout (the content of its last tool message, its last
    `MAX_FEEDBACK_CHARS` characters), or None for a rollout without one."""
    if not isinstance(completion, (list, tuple)):
        return None
    for message in reversed(completion):
        if isinstance(message, dict) and message.get("role") == "tool":
            content = message.get("content")
            if isinstance(content, list):  # structured content: its text parts
                content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
            text = str(content or "").strip()
            if not text:
                return None
            return text if len(text) <= MAX_FEEDBACK_CHARS else ELLIPSIS + text[-MAX_FEEDBACK_CHARS:]
    return None


def has_ground_truth(value: Any) -> bool:
    """A ground truth is usable unless it is None, NaN-like, or empty after stripping."""
    if value is None:
        return False
    if isinstance(value, float) and math.isnan(value):  # NaN from pandas-backed datasets
        return False
    if isinstance(value, (list, tuple, dict)):
        return len(value) > 0
    return bool(str(value).strip())


def shows_sibling(teacher_reference: str, ground_truth: Any) -> bool:
    """The one decision about what a row's teacher is shown when siblings are in play (`teacher_reads_siblings`): a
    successful sibling's answer (True) under `teacher_reference: sibling`, or, with `teacher_sibling_fallback`, where
    the row has no ground truth; its ground truth otherwise (False)."""
    return teacher_reference == "sibling" or not has_ground_truth(ground_truth)


def _last_user_index(messages: list[dict]) -> int:
    for index in range(len(messages) - 1, -1, -1):
        if messages[index].get("role") == "user":
            return index
    raise ValueError("A conversational prompt needs at least one user message to carry the ground truth.")


def with_question(prompt: str | list[dict], question: str) -> str | list[dict]:
    """Replace the question side of a prompt: the plain prompt, or the last user message's text."""
    if isinstance(prompt, str):
        return question
    messages = copy.deepcopy(prompt)
    messages[_last_user_index(messages)]["content"] = question
    return messages


def question_of(prompt: str | list[dict]) -> str:
    """The question side of a prompt (the text that truncation may shorten)."""
    if isinstance(prompt, str):
        return prompt
    content = prompt[_last_user_index(prompt)]["content"]
    if not isinstance(content, str):
        raise TypeError("Teacher prompts support text-only user messages (got structured content).")
    return content


def teacher_hint(template: str, ground_truth: Any, reference_solution: Any = None) -> str:
    """`template` filled in: `{ground_truth}` is the final answer, `{reference_solution}` the worked solution, or the
    final answer when there is none."""
    solution = reference_solution if has_ground_truth(reference_solution) else ground_truth
    return template.format(ground_truth=ground_truth, reference_solution=solution)


def teacher_prompt(
    prompt: str | list[dict], ground_truth: Any, template: str, reference_solution: Any = None
) -> str | list[dict]:
    """The prompt with `teacher_hint(template, ground_truth, reference_solution)` appended to its question side."""
    return with_question(prompt, question_of(prompt) + teacher_hint(template, ground_truth, reference_solution))


@dataclass
class TeacherPrompts:
    """Tokenized teacher prompts for one batch (one entry per completion)."""

    input_ids: list[list[int]]
    has_ground_truth: list[bool]
    truncated: list[bool]
    answer_only: list[bool] | None = None
    """With reference solutions asked for: rows with a ground truth but no solution, whose template got the answer."""


class TeacherPromptBuilder:
    """Builds and tokenizes teacher prompts the same way the trainer tokenizes student prompts.

    `tokenize(prompt, tools)` must return the token ids of a prompt (rendered with those tool schemas, or None) with
    the generation prompt appended, exactly as the student's prompt is tokenized, so that the completion tokens that
    follow line up for both.
    """

    def __init__(
        self, tokenize, tokenizer, template: str, max_length: int | None = None, tool_template: str | None = None
    ):
        self.tokenize = tokenize
        self.tokenizer = tokenizer
        self.template = template
        self.max_length = max_length
        self.tool_template = tool_template
        """Used instead of `template` for rows whose ground truth is tool calls (None: `template` for every row)."""

    def __call__(
        self,
        prompts: list,
        ground_truths: list,
        tools: list | None = None,
        render=None,
        solutions: list | None = None,
        feedbacks: list | None = None,
    ) -> TeacherPrompts:
        """`tools[i]`: tool schemas of prompt i (or None); `render`, when given, turns a ground truth into the text
        the template receives (e.g. tool calls written as the chat template writes them); `solutions[i]`, when
        given, is row i's reference solution for `{reference_solution}` (None or empty: the ground truth instead,
        flagged in `answer_only`); `feedbacks[i]`, when given and not None, the environment's last message in row
        i's rollout, appended to its hint (`FEEDBACK_TEMPLATE`) on rows with a ground truth."""
        ids, usable, truncated = [], [], []
        tools = tools if tools is not None else [None] * len(prompts)
        row_solutions = solutions if solutions is not None else [None] * len(prompts)
        row_feedbacks = feedbacks if feedbacks is not None else [None] * len(prompts)
        # GRPO repeats each prompt num_generations times in a row: build each distinct teacher prompt once.
        built: dict[str, tuple[list[int], bool, bool]] = {}
        rows = zip(prompts, ground_truths, tools, row_solutions, row_feedbacks, strict=True)
        for prompt, truth, row_tools, solution, feedback in rows:
            key = json.dumps([prompt, truth, row_tools, solution, feedback], sort_keys=True, default=str)
            if key not in built:
                built[key] = self._build(prompt, truth, row_tools, render, solution, feedback)
            row_ids, row_usable, row_truncated = built[key]
            ids.append(list(row_ids))
            usable.append(row_usable)
            truncated.append(row_truncated)
        answer_only = None
        if solutions is not None:
            answer_only = [ok and not has_ground_truth(s) for ok, s in zip(usable, solutions, strict=True)]
        return TeacherPrompts(ids, usable, truncated, answer_only)

    def _build(self, prompt, truth, tools, render, solution=None, feedback=None) -> tuple[list[int], bool, bool]:
        if not has_ground_truth(truth):
            # Same prompt as the student: its divergence is computed (every rank runs the same passes) and then
            # discarded by the trainer, which gives the row plain GRPO weights.
            return self.tokenize(prompt, tools), False, False
        text = render(truth) if render is not None else truth
        # The hint follows what the ground truth is: tools in a prompt do not make an answer a list of calls.
        calls = self.tool_template is not None and reference_calls(truth) is not None
        template = self.tool_template if calls else self.template
        if feedback:  # literal text inside the template: its braces escaped
            template += FEEDBACK_TEMPLATE.format(feedback=str(feedback).replace("{", "{{").replace("}", "}}"))
        row_ids, was_truncated = self._fit(prompt, text, tools, template, solution)
        return row_ids, True, was_truncated

    def _fit(self, prompt, truth_text, tools, template: str, solution=None) -> tuple[list[int], bool]:
        full = teacher_prompt(prompt, truth_text, template, solution)
        row_ids = self.tokenize(full, tools)
        if self.max_length is None or len(row_ids) <= self.max_length:
            return row_ids, False
        # Shorten the question from its start (its end usually states what is asked) and keep the ground truth.
        question = question_of(prompt)
        question_ids = self.tokenizer(question, add_special_tokens=False)["input_ids"]
        hint = teacher_hint(template, truth_text, solution)
        keep = len(question_ids)
        for _ in range(4):  # re-tokenization at the cut can shift counts by a token or two
            keep -= len(row_ids) - self.max_length + 1
            if keep <= 0:
                shortened = ""
            else:
                shortened = ELLIPSIS + self.tokenizer.decode(question_ids[-keep:])
            row_ids = self.tokenize(with_question(prompt, shortened + hint), tools)
            if len(row_ids) <= self.max_length or keep <= 0:
                break
        if len(row_ids) > self.max_length:
            # Even without the question it is too long (long history or ground truth): keep the tail, which holds
            # the ground truth and the generation prompt that the completion must follow.
            row_ids = row_ids[-self.max_length :]
        return row_ids, True


def sibling_choice(
    rewards: list[float], group_size: int, min_reward: float
) -> tuple[list[int | None], list[bool], list[bool]]:
    """Which rollout's answer each rollout's teacher is shown under `teacher_reference: sibling`.

    `rewards` [N]: the total reward of every rollout of a generation batch, whose groups are `group_size` consecutive
    rows (GRPO's order). Row i's sibling is the other rollout of its group with the highest reward at or above
    `min_reward`, ties to the first; a row is never its own reference. Returns `(choice, no_success, lone)`, each
    [N]: the sibling's index or None; whether the row's group has no success at all; whether the row is its group's
    only success (it has no other success to be shown).
    """
    choice, no_success, lone = [], [], []
    for i, reward in enumerate(rewards):
        start = i - i % group_size
        others = [
            j for j in range(start, min(start + group_size, len(rewards))) if j != i and rewards[j] >= min_reward
        ]
        best = max(others, key=lambda j: (rewards[j], -j), default=None)
        choice.append(best)
        succeeded = reward >= min_reward
        no_success.append(best is None and not succeeded)
        lone.append(best is None and succeeded)
    return choice, no_success, lone


def prefix_sharing_plan(prompt_ids: list[list[int]], max_rows: int) -> list[list[tuple[list[int], list[int]]]]:
    """Group a batch's rows by identical teacher prompt, for computing each prompt's key/value cache once.

    Returns units in batch order; a unit is a list of `(prompt ids, rows with that prompt)` whose rows add up to at
    most `max_rows` (a prompt with more rows than that is a unit of its own). The trainer runs one prefix forward per
    unit over its distinct prompts and then the unit's rows, `max_rows` at a time, on their prompt's cache, so the
    keys and values held at once stay within `max_rows` prompts plus `max_rows` full rows.
    """
    if max_rows < 1:
        raise ValueError(f"max_rows must be positive, got {max_rows}.")
    rows_of: dict[tuple[int, ...], list[int]] = {}
    for row, ids in enumerate(prompt_ids):
        rows_of.setdefault(tuple(ids), []).append(row)
    units: list[list[tuple[list[int], list[int]]]] = []
    filled = max_rows
    for ids, rows in rows_of.items():
        if filled + len(rows) > max_rows:
            units.append([])
            filled = 0
        units[-1].append((list(ids), rows))
        filled += len(rows)
    return units


def prefix_sharing_forwards(units: list[list[tuple[list[int], list[int]]]], max_rows: int) -> int:
    """Backbone forwards the trainer runs for a `prefix_sharing_plan`: one prefix pass per unit, then its rows in
    passes of at most `max_rows`."""
    return sum(1 + -(-sum(len(rows) for _, rows in unit) // max_rows) for unit in units)


def prefix_sharing_tokens(units: list[list[tuple[list[int], list[int]]]], completion_length: int) -> tuple[int, int]:
    """Token positions the teacher's backbone runs for a `prefix_sharing_plan`: `(full, shared)`.

    full: every row's prompt (left-padded to the longest of the batch) and its completion, as the full path runs them;
    shared: each unit's prompts but their last token (left-padded to the unit's longest), then every row's
    `completion_length` tokens. Attention still reads each row's whole prompt, so the time saved is less than the
    tokens saved; the point is to skip sharing where it saves little and adds a forward per unit.
    """
    rows = sum(len(unit_rows) for unit in units for _, unit_rows in unit)
    longest = max((len(ids) for unit in units for ids, _ in unit), default=0)
    full = rows * (longest + completion_length)
    prefixes = sum(len(unit) * max(max(len(ids) for ids, _ in unit) - 1, 1) for unit in units)
    return full, prefixes + rows * completion_length


def suffix_attention_bias(key_mask: torch.Tensor, query_length: int, dtype: torch.dtype) -> torch.Tensor:
    """Additive attention bias for queries that are the last `query_length` of their keys (a pass on a cache).

    key_mask: [R, S] bool or 0/1, the keys each row may attend to (cached prefix, then the queries' own tokens);
    returns [R, 1, Q, S] of `dtype`, 0 where query q (key position S - Q + q) may attend to key k (k <= S - Q + q and
    key_mask[r, k]) and the dtype's most negative finite value elsewhere.

    Built once per pass and handed to the model as a ready 4-D mask: every attention layer then reads the same
    tensor, where a 2-D mask makes transformers build a boolean mask that PyTorch's SDPA turns into an additive one
    again in every layer (on CPU a quarter of a long-prompt teacher pass).
    """
    rows, keys = key_mask.shape
    query_pos = torch.arange(keys - query_length, keys, device=key_mask.device)
    causal = torch.arange(keys, device=key_mask.device)[None, :] <= query_pos[:, None]  # [Q, S]
    allowed = causal[None, None] & key_mask.bool()[:, None, None, :]
    bias = torch.zeros(rows, 1, query_length, keys, dtype=dtype, device=key_mask.device)
    return bias.masked_fill_(~allowed, torch.finfo(dtype).min)


def training_chat_template(tokenizer) -> str | None:
    """The chat template GRPOTrainer renders tool conversations with (`trainer.chat_template` when it has tools):
    TRL's prefix-preserving training template when the tokenizer's own is not prefix-preserving (Qwen3's is not),
    else None (the tokenizer's own). For writing reference calls outside a trainer (SFT data, evaluation)."""
    from trl.chat_template_utils import get_training_chat_template, is_chat_template_prefix_preserving

    return None if is_chat_template_prefix_preserving(tokenizer) else get_training_chat_template(tokenizer)


def tool_calls_text(processing_class, calls: list[dict], chat_template: str | None = None) -> str:
    """Reference tool calls written exactly as the chat template writes an assistant's tool calls.

    Renders one assistant turn with the calls and one without, and keeps what differs, so the text matches the
    model's own tool-call format (e.g. Qwen3's `<tool_call>` blocks) without knowing the template.
    """
    tool_calls = [
        {"type": "function", "function": {"name": call["name"], "arguments": call.get("arguments", {})}}
        for call in calls
    ]
    user = {"role": "user", "content": "."}

    def render(message):
        return processing_class.apply_chat_template(
            [user, message], tokenize=False, chat_template=chat_template, add_generation_prompt=False
        )

    # Compare token ids rather than characters, so the cut never splits a marker such as `<tool_call>`.
    tokenizer = getattr(processing_class, "tokenizer", processing_class)
    with_calls = tokenizer(
        render({"role": "assistant", "content": "", "tool_calls": tool_calls}), add_special_tokens=False
    )["input_ids"]
    without = tokenizer(render({"role": "assistant", "content": ""}), add_special_tokens=False)["input_ids"]
    start = 0
    while start < min(len(with_calls), len(without)) and with_calls[start] == without[start]:
        start += 1
    end = 0
    while end < min(len(with_calls), len(without)) - start and with_calls[-1 - end] == without[-1 - end]:
        end += 1
    return tokenizer.decode(with_calls[start : len(with_calls) - end]).strip()
