r"""Math rewards, in TRL's reward-function signature.

    reward(completions, ground_truth, **kwargs) -> list[float | None]

`completions` are strings, or (conversational datasets) lists of messages whose last message's `content` is the
answer; `ground_truth` is the dataset column of that name, as written by `gear_trl.data.prepare_dataset`. A `None`
reward tells TRL to leave that completion out of this reward's mean.
"""

from __future__ import annotations

import threading
from typing import Any

from math_verify import ExprExtractionConfig, LatexExtractionConfig, parse, verify

from gear_trl.data.math_tasks import boxed_spans, last_boxed

MATH_VERIFY_TIMEOUT_S = 5
"""Per-call time limit for math_verify's parsing and comparison, enforced only in the main thread."""

_GOLD_EXTRACTION = [LatexExtractionConfig(), ExprExtractionConfig()]


def _timeout() -> int | None:
    # math_verify enforces time limits with signal.alarm, which raises outside the main thread (for example when
    # rewards run in a thread pool); there the limit is dropped instead.
    return MATH_VERIFY_TIMEOUT_S if threading.current_thread() is threading.main_thread() else None


def completion_text(completion: Any) -> str:
    """The text of a completion: the string itself, or the `content` of the last message of a conversation."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, (list, tuple)) and completion:
        last = completion[-1]
        content = last.get("content") if isinstance(last, dict) else None
        return content if isinstance(content, str) else ""
    return ""


def is_correct(text: str, ground_truth: str) -> bool:
    r"""Whether the final answer in `text` equals `ground_truth` mathematically (`0.5` = `\frac{1}{2}`).

    The final answer is the last `\boxed{...}`; without one, math_verify looks for an answer in the whole text.
    Garbage on either side is simply not correct: this never raises.
    """
    timeout = _timeout()
    try:
        gold = parse(f"${ground_truth}$", extraction_config=_GOLD_EXTRACTION, parsing_timeout=timeout)
        boxed = last_boxed(text)
        if not gold:  # a ground truth math_verify cannot read can still be matched literally
            return boxed is not None and "".join(boxed.split()) == "".join(ground_truth.split())
        # Only the last box is the answer: math_verify would otherwise read `\boxed{3} ... \boxed{4}` as {3, 4}.
        answer = parse(text if boxed is None else f"\\boxed{{{boxed}}}", parsing_timeout=timeout)
        return bool(answer) and verify(gold, answer, timeout_seconds=timeout)
    except Exception:  # noqa: BLE001 -- math_verify and sympy raise a zoo of exception types on odd input
        return False


def accuracy_reward(completions: list[Any], ground_truth: list[str | None], **kwargs: Any) -> list[float | None]:
    """1.0 where the completion's final answer equals the ground truth, else 0.0; None where there is no ground
    truth (None or empty), so the completion does not count toward this reward."""
    rewards: list[float | None] = []
    for completion, truth in zip(completions, ground_truth, strict=True):
        if truth is None or not str(truth).strip():
            rewards.append(None)
        else:
            rewards.append(float(is_correct(completion_text(completion), str(truth).strip())))
    return rewards


def format_reward(completions: list[Any], **kwargs: Any) -> list[float]:
    r"""1.0 where the completion gives exactly one non-empty `\boxed{...}` answer, else 0.0."""
    rewards = []
    for completion in completions:
        text = completion_text(completion)
        spans = boxed_spans(text)
        rewards.append(float(len(spans) == 1 and bool(text[spans[0][0] : spans[0][1]].strip())))
    return rewards
