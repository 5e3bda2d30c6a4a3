"""Who writes the user's turns of an interactive evaluation (`gear_trl.evaluate --user_simulator`).

Benchmarks such as ToolSandbox and ACEBench's agent category hand the agent only a goal the user holds; the user's
later messages depend on what the agent said, so a second model plays the user. A user simulator is any object with

    next_turn(messages: list[dict], row: dict, turn: int) -> str | dict | list[dict] | None

`messages` is the conversation so far as the agent saw it (system, user, assistant with `tool_calls`, tool results),
`row` the dataset row (every column: the hidden goal, ground truth, ...), `turn` the number of user turns the
conversation already holds (the row's prompt is turn 0). It returns the next user message (a string, a
`{"role": "user", "content": str}` message, or a list of them), or `None` / a text holding `STOP` to end the episode.
It may also define

- `next_turns(requests: list[tuple[messages, row, turn]]) -> list[...]`: the same for many conversations at once (one
  batched generation instead of one per conversation); the loop prefers it;
- `required_columns: tuple[str, ...]`: the row columns it reads, checked on every row before any model loads;
- `setup(generator=..., tokenizer=..., model=..., device=...)`: called once before the first episode, with the
  agent's generation backend (`gear_trl.evaluation.generation`), to load or share a model.

`--user_simulator` names one: `scripted` and `llm` (the two below) or an import path `pkg.module:factory`, called with
`--user_simulator_kwargs` (a JSON object) as keyword arguments. What a simulator returns is checked: anything but the
forms above, or an exception, ends that episode and is counted (`user_simulator_failures`), never the evaluation.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

from ..envs.rollout import encodable_text
from ..inputs.errors import UserInputError
from ..inputs.plugins import load_plugin

STOP = "###STOP###"
"""The stop marker: a user message holding it ends the episode (the message itself is not sent). Our choice, written
the way tau-bench's user prompts write theirs so that models prompted for either know it; ToolSandbox's user ends
with an `end_conversation` tool call, ACEBench's with the words "finish conversation", which a simulator of one's own
maps to `None`."""

DEFAULT_MAX_USER_TURNS = 8
"""User turns per episode, the row's prompt included, before the loop ends it (`--max_user_turns`). Our choice: enough for
the short clarify-then-confirm dialogues of ToolSandbox and ACEBench's agent tasks, small enough that a simulator that
never stops costs a bounded number of generations."""

DEFAULT_PROMPT = (
    "You are role-playing a person who is talking to an AI assistant. You want the following:\n\n{goal}\n\n"
    "Write only your own next message to the assistant, in the first person, one short message at a time. Share a "
    "detail of what you want only when the assistant needs it, and never make up facts that are not stated above. "
    "When the assistant has done what you want, or clearly cannot, reply with " + STOP + " and nothing else."
)
"""`LLMUserSimulator`'s system prompt (written for gear_trl); `{goal}` is the row's goal column."""

_THINK = re.compile(r"<think>.*?(</think>|$)", re.DOTALL)
_CALLS = re.compile(r"<tool_call>.*?(</tool_call>|$)", re.DOTALL)


class UserSimulatorError(ValueError):
    """A simulator's answer that is neither a user message nor a stop."""


@runtime_checkable
class UserSimulator(Protocol):
    """Plays the user of an interactive evaluation; see the module docstring."""

    def next_turn(self, messages: list[dict], row: dict, turn: int) -> str | dict | list[dict] | None: ...


def user_messages(value: Any) -> list[dict] | None:
    """A simulator's answer as the user messages to append, or None to stop; raises `UserSimulatorError` on anything
    else (a non-string content, another role, an empty text, an empty list)."""
    if value is None:
        return None
    if isinstance(value, str):
        value = {"role": "user", "content": value}
    if isinstance(value, dict):
        value = [value]
    if not isinstance(value, list) or not value:
        raise UserSimulatorError(f"expected a user message, a list of them or None, got {type(value).__name__}")
    messages = []
    for message in value:
        if (
            not isinstance(message, dict)
            or message.get("role") != "user"
            or not isinstance(message.get("content"), str)
        ):
            raise UserSimulatorError(f"not a user message with text content: {str(message)[:200]!r}")
        if STOP in message["content"]:
            return None
        if not message["content"].strip():
            raise UserSimulatorError("an empty user message")
        messages.append({"role": "user", "content": encodable_text(message["content"])})
    return messages


class ScriptedUserSimulator:
    """Replays the data's user turns: turn `t` (t >= 1) is `row[column][t - 1]` (a string, a message or a list of
    messages), and the episode stops after the last. A row with an empty list has one user turn, its prompt: what
    evaluation without a simulator does. `column` holds a list or its JSON text."""

    def __init__(self, column: str = "user_turns"):
        self.column = column
        self.required_columns = (column,)

    def turns(self, row: dict) -> list:
        value = row.get(self.column)
        if isinstance(value, str):
            value = json.loads(value) if value.strip() else []
        return list(value or [])

    def next_turn(self, messages: list[dict], row: dict, turn: int):
        turns = self.turns(row)
        return turns[turn - 1] if 1 <= turn <= len(turns) else None


class LLMUserSimulator:
    """A causal LM plays the user, generated with the evaluation's own backend (`gear_trl.evaluation.generation`).

    It sees the conversation from the user's side: a system message, `system_prompt` with the row's `goal_column`
    filled in, then the dialogue with the roles swapped (the agent's replies as `user` messages, the user's earlier
    messages as its own `assistant` turns), without tool calls, tool results or `<think>` blocks, which a person
    talking to the assistant would not see. Its reply (its `<think>` block removed) is the next user message;
    `STOP` in it ends the episode, and so does `max_turns` user turns.

    Args:
        model: a model folder or Hub id to play the user; None: the agent's own model, through the agent's
            generator (with this simulator's sampling), so no second copy is loaded.
        goal_column: the row column holding the user's hidden goal (checked on every row before a model loads).
        system_prompt: with a `{goal}` field (default `DEFAULT_PROMPT`).
        max_turns: user turns, the row's prompt included, after which it stops (None: the loop's cap only).
        max_new_tokens, temperature, top_p, top_k, seed: its sampling (greedy by default: a reproducible user).
        chat_template_kwargs: for its chat template (default `{"enable_thinking": False}`: a user writes no
            reasoning; templates without the switch ignore it).
        opening: what the user reads as the agent's first line when it writes the first turn itself (a row whose
            prompt has no user message).
        dtype, device, batch_size: for a `model` of its own.
    """

    def __init__(
        self,
        model: str | None = None,
        goal_column: str = "user_goal",
        system_prompt: str = DEFAULT_PROMPT,
        max_turns: int | None = None,
        max_new_tokens: int = 256,
        temperature: float = 0.0,
        top_p: float = 1.0,
        top_k: int = 0,
        seed: int | None = 0,
        chat_template_kwargs: dict | None = None,
        opening: str = "Hello! What can I do for you today?",
        dtype: str = "auto",
        device: str | None = None,
        batch_size: int = 16,
    ):
        from .generation import Sampling

        if "{goal}" not in system_prompt:
            raise UserInputError("LLMUserSimulator: `system_prompt` needs a {goal} field for the row's goal.")
        if max_turns is not None and max_turns < 1:
            raise UserInputError(f"LLMUserSimulator: `max_turns` must be at least 1, got {max_turns}.")
        if model is not None:
            from ..inputs.preflight import check_model_source

            check_model_source(model, "--user_simulator_kwargs model")
        self.model_path, self.goal_column, self.system_prompt = model, goal_column, system_prompt
        self.max_turns, self.opening = max_turns, opening
        self.sampling = Sampling(max_new_tokens, temperature, top_p, top_k, seed)
        self.chat_template_kwargs = {"enable_thinking": False, **(chat_template_kwargs or {})}
        self.dtype, self.device, self.batch_size = dtype, device, batch_size
        self.required_columns = (goal_column,)
        self.generator = self.tokenizer = None

    def setup(self, generator=None, tokenizer=None, model=None, device=None) -> None:
        """Share the agent's generator (no `model` of its own) or load the simulator's model."""
        from .generation import TransformersGenerator

        if self.model_path is None:
            if generator is None:
                raise ValueError("LLMUserSimulator without a model of its own needs the agent's generator.")
            self.generator, self.tokenizer = generator, tokenizer
            return
        import torch

        from .generation import load_model

        # evaluate's own default: a simulator of its own beside a vLLM agent must not fall back to the CPU
        device = self.device or device or ("cuda" if torch.cuda.is_available() else "cpu")
        sim_model, self.tokenizer = load_model(self.model_path, dtype=self.dtype, device=device)
        self.generator = TransformersGenerator(sim_model, self.tokenizer, self.sampling, batch_size=self.batch_size)

    def user_view(self, messages: list[dict], row: dict) -> list[dict]:
        """The conversation as the simulated user reads it (see the class docstring)."""
        view = [{"role": "system", "content": self.system_prompt.format(goal=row[self.goal_column])}]
        for message in messages:
            role, content = message.get("role"), message.get("content")
            if not isinstance(content, str) or role not in ("user", "assistant"):
                continue  # tool results and the agent's system prompt are not the user's to read
            if role == "assistant":
                content = _CALLS.sub("", _THINK.sub("", content)).strip()
                if not content:
                    continue  # a step that only called tools: the user saw nothing
                if view[-1]["role"] == "user":  # the agent's turn spoke over several steps: one message to the user
                    view[-1]["content"] += "\n\n" + content
                    continue
            view.append({"role": "assistant" if role == "user" else "user", "content": content})
        if len(view) == 1:
            view.append({"role": "user", "content": self.opening})  # the user opens the dialogue
        elif view[-1]["role"] != "user":  # the agent said nothing visible; the user still answers its silence
            view.append({"role": "user", "content": ""})
        return view

    def next_turns(self, requests: Sequence[tuple[list[dict], dict, int]]) -> list[str | None]:
        if self.generator is None:
            raise ValueError("LLMUserSimulator.setup() was not called.")
        answers: list[str | None] = [None] * len(requests)
        asking = [k for k, (_, _, turn) in enumerate(requests) if self.max_turns is None or turn < self.max_turns]
        if not asking:
            return answers
        from .generation import prompt_ids

        prompts = []
        for k in asking:
            messages, row, _ = requests[k]
            view = {"prompt": self.user_view(messages, row)}
            prompts.append(prompt_ids(self.tokenizer, view, self.chat_template_kwargs))
        outputs = self._generate(prompts)
        for k, samples in zip(asking, outputs, strict=True):
            answers[k] = _THINK.sub("", samples[0][1]).strip()
        return answers

    def next_turn(self, messages: list[dict], row: dict, turn: int) -> str | None:
        return self.next_turns([(messages, row, turn)])[0]

    def _generate(self, prompts: list[list[int]]):
        # The agent's generator is shared: lend it this simulator's sampling for the call, then give its own back.
        own = self.generator.sampling
        self.generator.sampling = self.sampling
        try:
            return self.generator.generate(prompts, 1)
        finally:
            self.generator.sampling = own


USER_SIMULATORS = {"scripted": ScriptedUserSimulator, "llm": LLMUserSimulator}
"""The built-in `--user_simulator` names."""


def load_user_simulator(spec: str, kwargs: dict | None = None):
    """The simulator `spec` names (a built-in name or `pkg.module:factory`), built with `kwargs`; `UserInputError`
    naming the option for a path that does not import, arguments the factory refuses, or an object without
    `next_turn`/`next_turns`."""
    if kwargs is not None and not isinstance(kwargs, dict):
        raise UserInputError('--user_simulator_kwargs must be a JSON object, e.g. \'{"goal_column": "goal"}\'.')
    factory = load_plugin(spec, "--user_simulator", USER_SIMULATORS)
    if not callable(factory):
        raise UserInputError(f"--user_simulator {spec!r} is not callable: name a class or a factory function.")
    try:
        simulator = factory(**(kwargs or {}))
    except UserInputError:
        raise
    except Exception as err:
        raise UserInputError(
            f"--user_simulator {spec!r}: building it with {kwargs or {}} failed ({type(err).__name__}: {err})."
        ) from err
    if not callable(getattr(simulator, "next_turn", None)) and not callable(getattr(simulator, "next_turns", None)):
        raise UserInputError(
            f"--user_simulator {spec!r} built a {type(simulator).__name__} without a next_turn(messages, row, turn) "
            "method (gear_trl.evaluation.user_sim.UserSimulator)."
        )
    return simulator


def check_rows(simulator, rows: Sequence[dict], spec: str = "the user simulator") -> None:
    """Refuse rows that lack a column the simulator reads (`required_columns`), or hold nothing in it, naming the
    column and the first such row."""
    for column in getattr(simulator, "required_columns", ()) or ():
        if not rows:
            return
        if column not in rows[0]:
            raise UserInputError(
                f"--user_simulator {spec} reads the column {column!r}, which the rows do not have; columns present: "
                f"{sorted(rows[0])}. Add it to the data, or name another column in --user_simulator_kwargs."
            )
        empty = next((i for i, row in enumerate(rows) if row.get(column) is None or row.get(column) == ""), None)
        if empty is not None:
            raise UserInputError(f"--user_simulator {spec}: row {empty} has no value in the column {column!r}.")


def ask(simulator, requests: list[tuple[list[dict], dict, int]]) -> list[tuple[list[dict] | None, str | None]]:
    """Per request `(user messages or None to stop, error text or None)`: the simulator's answers checked by
    `user_messages`. An exception or a malformed answer becomes an error text for that request (for all of a
    batched call that raised), never an exception here."""
    if not requests:
        return []
    batched = getattr(simulator, "next_turns", None)
    if callable(batched):
        try:
            answers = list(batched(requests))
            if len(answers) != len(requests):
                raise UserSimulatorError(f"next_turns gave {len(answers)} answers for {len(requests)} conversations")
        except Exception as err:  # noqa: BLE001 - untrusted: the episodes end, counted
            return [(None, f"{type(err).__name__}: {err}")] * len(requests)
        outcomes = []
        for answer in answers:
            outcomes.append(_checked(lambda answer=answer: answer))
        return outcomes
    return [_checked(lambda r=r: simulator.next_turn(*r)) for r in requests]


def _checked(call) -> tuple[list[dict] | None, str | None]:
    try:
        return user_messages(call()), None
    except Exception as err:  # noqa: BLE001 - untrusted: the episode ends, counted
        return None, f"{type(err).__name__}: {err}"
