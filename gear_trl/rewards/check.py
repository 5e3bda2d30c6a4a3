"""Catch a reward that cannot tell completions apart, in the first batches of training.

A reward that returns the same value for every completion gives GRPO nothing to learn from: each group's advantage
is 0. The commonest cause is a reward written for text that receives messages: with conversational data TRL passes
each completion as a list of messages (`[{"role": "assistant", "content": "..."}]`), so `answer in completion`
compares the answer with dictionaries and is always False, and the run trains at reward 0 in silence.

The rule (docs/rewards.md#the-constant-reward-warning):

- A reward is watched over its first `CONSTANT_REWARD_BATCHES` calls made by a trainer (calls that carry TRL's
  `trainer_state`; a reward called by hand or by `gear-trl-evaluate` is not watched). When every value it returned
  over them is one and the same number (None, "not scored", is left out; at least two values), one warning names it
  and the value. Only the main process warns, on its own share of the batches.
- The warning adds the shape of the completions and how to read their text when the completions were message lists,
  the reward names a `completions` parameter, and it never read a field of any message (`message["content"]`,
  `.get`, `.items()`, iteration over a message...) over those calls. To know that, the watched calls receive copies
  of the messages that record such reads; a reward that tests or searches the list itself (`answer in completion`,
  `completion == answer`) or prints it (`str(completion)`) reads no field.

`constant_reward_message` is the decision, a pure function; `ConstantRewardWatch` keeps one reward's record between
calls and is wired into every reward by `gear_trl.rewards.guard.guard_reward_func`, which `GEARTrainer` applies to
each reward source.
"""

from __future__ import annotations

import inspect
import warnings
from collections.abc import Callable

CONSTANT_REWARD_BATCHES = 2
"""A reward is judged on its first this many calls in training (generation batches: one per optimizer step by
default, as TRL's `steps_per_generation` is `gradient_accumulation_steps`). Our choice: one batch of a weak model can
honestly score all zeros; two in a row with one value is worth a warning."""

READ_THE_TEXT = 'completion[-1]["content"]'


def is_message_list(completion) -> bool:
    """Whether one completion is a conversation: a non-empty list of mappings (TRL's conversational completions)."""
    return isinstance(completion, list) and bool(completion) and all(isinstance(m, dict) for m in completion)


def message_shape(completion, max_messages: int = 4) -> str:
    """`completion`'s structure, its text elided: `[{'role': 'assistant', 'content': '...'}]`; a role is shown, a
    string field as '...', a list as [...], other values by type."""

    def field(key, value):
        if key == "role" and isinstance(value, str):
            return repr(value)
        if isinstance(value, str):
            return "'...'"
        if isinstance(value, (list, tuple)):
            return "[...]"
        if isinstance(value, dict):
            return "{...}"
        return type(value).__name__

    shown = [
        "{" + ", ".join(f"{key!r}: {field(key, value)}" for key, value in dict.items(message)) + "}"
        for message in completion[:max_messages]
    ]
    if len(completion) > max_messages:
        shown.append(f"... ({len(completion) - max_messages} more)")
    return "[" + ", ".join(shown) + "]"


def constant_reward_message(
    name: str, values: list, batches: int, shape: str | None = None, read_messages: bool = True
) -> str | None:
    """The warning for reward `name`, or None when it should not warn.

    `values`: everything it returned over its first `batches` calls (None for "not scored"); `shape`: the completions'
    structure (`message_shape`) when they were message lists, None when they were strings; `read_messages`: whether
    it read a message's fields in those calls (True when unknown). None unless at least two scored values are all
    equal; the way to read the text is added when `shape` is given and `read_messages` is False.
    """
    scored = [float(v) for v in values if v is not None]
    if len(scored) < 2 or any(v != scored[0] for v in scored):
        return None
    message = (
        f"Reward function {name!r} returned {scored[0]:g} for every one of the {len(scored)} completions it scored "
        f"in the first {batches} training batches: a reward that does not vary gives GRPO nothing to learn from "
        "(every advantage it contributes is 0)."
    )
    if shape is not None and not read_messages:
        message += (
            f" Its `completions` are message lists, shaped {shape}, and it never read a message's fields, so a test "
            "on the list itself (`answer in completion`) never sees the text. Read the text with "
            f"`{READ_THE_TEXT}` (docs/rewards.md)."
        )
    else:
        message += " Check what it compares on a few completions (docs/rewards.md)."
    return message


class _Reads:
    __slots__ = ("seen",)

    def __init__(self) -> None:
        self.seen = False


class WatchedMessage(dict):
    """A copy of one message that records, in its `_Reads`, that a field of it was read."""

    def __init__(self, message, reads: _Reads):
        super().__init__(message)
        self._reads = reads

    def _read(self):
        self._reads.seen = True

    def __getitem__(self, key):
        self._read()
        return super().__getitem__(key)

    def get(self, *args):
        self._read()
        return super().get(*args)

    def keys(self):
        self._read()
        return super().keys()

    def values(self):
        self._read()
        return super().values()

    def items(self):
        self._read()
        return super().items()

    def __iter__(self):
        self._read()
        return super().__iter__()

    def __contains__(self, key):
        self._read()
        return super().__contains__(key)

    def copy(self):
        self._read()
        return dict(super().items())

    def pop(self, *args):
        self._read()
        return super().pop(*args)


def watched_completions(completions: list, reads: _Reads) -> list:
    """`completions` with every message list's messages replaced by `WatchedMessage` copies sharing `reads`."""
    return [
        [WatchedMessage(m, reads) for m in completion] if is_message_list(completion) else completion
        for completion in completions
    ]


def names_completions(func: Callable) -> bool:
    """Whether `func` (or the function it wraps) has a parameter named `completions`."""
    try:
        return "completions" in inspect.signature(func).parameters
    except (TypeError, ValueError):
        return False


class ConstantRewardWatch:
    """One reward's record over its first `batches` calls in training; warns once at the end (module docstring)."""

    def __init__(self, name: str, func: Callable, batches: int = CONSTANT_REWARD_BATCHES):
        self.name, self.batches = name, batches
        self.names_completions = names_completions(func)
        self.calls, self.values, self.shape = 0, [], None
        self.reads = _Reads()
        self.done = False

    def before(self, kwargs: dict) -> dict:
        """The keyword arguments to call the reward with: its message lists watched while the watch lasts."""
        if self.done or "trainer_state" not in kwargs:
            return kwargs
        completions = kwargs.get("completions")
        if isinstance(completions, list) and completions and is_message_list(completions[0]):
            if self.shape is None:
                self.shape = message_shape(completions[0])
            kwargs = {**kwargs, "completions": watched_completions(completions, self.reads)}
        return kwargs

    def after(self, values: list, kwargs: dict) -> None:
        """Record what a call returned; after the last watched call, warn if `constant_reward_message` says so."""
        if self.done or "trainer_state" not in kwargs:
            return
        self.calls += 1
        self.values.extend(values)
        if self.calls < self.batches:
            return
        self.done = True
        shape = self.shape if self.names_completions else None
        message = constant_reward_message(self.name, self.values, self.calls, shape, self.reads.seen)
        self.values = []
        state = kwargs.get("trainer_state")
        if message and getattr(state, "is_world_process_zero", True):
            warnings.warn(message, stacklevel=3)
