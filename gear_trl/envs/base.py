"""Shared machinery of the BFCL API environments: tool wrapping, state (de)serialization, call execution.

Every API class (`GorillaFileSystem`, `MathAPI`, ...) is a TRL environment on its own: TRL's `environment_factory`
turns each public method into a tool (schema from type hints and the Google-style docstring) and calls
`reset(**row)` before every rollout. Plumbing that must stay public for the trainer and the reward (`state`,
`state_key`, `load_state`, `execute`) is marked `@not_a_tool`, which hides it from TRL's tool discovery.

Tool methods are written to return a JSON-able value (usually the dict BFCL's documentation gives as the response)
or raise `ToolError`; `APIEnvironment.__init_subclass__` wraps them so that the model always gets a string:
the JSON of the value, or `"Error: <message>"` for any exception. A tool call never ends the rollout.
"""

from __future__ import annotations

import copy
import functools
import inspect
import json
import types
from collections.abc import Callable
from typing import Any, ClassVar


class ToolError(Exception):
    """A failure the model should read as the tool result (bad path, not logged in, ...)."""


class not_a_tool:
    """Marks a public method as environment plumbing, not a tool.

    TRL lists tools with `inspect.getmembers(type(env), predicate=inspect.isfunction)` and skips only `reset`,
    `get_reward` and names starting with `_`. Accessed on the class this descriptor returns itself (not a
    function, so TRL skips it); accessed on an instance it returns the ordinary bound method.
    """

    def __init__(self, func: Callable):
        self.__func__ = func
        functools.update_wrapper(self, func)

    def __get__(self, instance: Any, owner: type | None = None) -> Any:
        if instance is None:
            return self
        return types.MethodType(self.__func__, instance)


def tool_result(value: Any) -> str:
    """The text a tool returns to the model: strings as they are, anything else as JSON."""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False)


def error_text(exc: BaseException) -> str:
    """`"Error: <message>"` for a tool failure; argument-binding errors keep Python's message."""
    message = str(exc) or type(exc).__name__
    return f"Error: {message}"


def _as_tool(func: Callable) -> Callable:
    """Wrap a tool method: JSON-dump its return value, turn every exception into `"Error: ..."`."""

    @functools.wraps(func)
    def tool(self, *args, **kwargs):
        try:  # a wrong argument name raises TypeError here, and is reported like any other failure
            return tool_result(func(self, *args, **kwargs))
        except Exception as exc:  # noqa: BLE001 - every failure is reported to the model, never raised
            return error_text(exc)

    tool.__is_tool__ = True
    return tool


def parse_json_field(value: Any, default: Any) -> Any:
    """A dataset column that holds JSON as a string (or already parsed); `default` when empty."""
    if value is None or value == "":
        return default
    if isinstance(value, str):
        return json.loads(value)
    return value


def canonical_json(value: Any) -> str:
    """Sorted-key, compact JSON: equal states give equal strings."""
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


class APIEnvironment:
    """Base of the BFCL API environments.

    Subclasses define `class_name` (BFCL's name, the key in `initial_config`), `default_state` (the state used for
    keys a configuration leaves out) and their tool methods. The whole state is JSON-native and lives in
    `self._state`, so `state()` is a deep copy and `load_state(state())` restores it exactly.
    """

    class_name: ClassVar[str] = ""
    default_state: ClassVar[dict[str, Any]] = {}
    unscored_keys: ClassVar[tuple[str, ...]] = ()
    """State keys left out of the reward's comparison (navigation state such as the working directory)."""

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        for name, member in list(vars(cls).items()):
            is_tool = inspect.isfunction(member) and not name.startswith("_") and name not in ("reset", "get_reward")
            if is_tool and not getattr(member, "__is_tool__", False):
                setattr(cls, name, _as_tool(member))

    def __init__(self, config: dict[str, Any] | None = None):
        self._state: dict[str, Any] = {}
        self.load_state(config or {})

    def reset(self, **row) -> None:
        """Load this class's entry of the row's `initial_config` (JSON string); defaults when absent."""
        initial_config = parse_json_field(row.get("initial_config"), {})
        self.load_state(initial_config.get(self.class_name, {}))

    @not_a_tool
    def load_state(self, config: dict[str, Any]) -> None:
        """Replace the state by `config`; keys it lacks take their `default_state` value."""
        state = copy.deepcopy(self.default_state)
        state.update(copy.deepcopy({key: value for key, value in config.items() if key in self.default_state}))
        self._state = self._normalize(state)

    @not_a_tool
    def state(self) -> dict[str, Any]:
        """A deep copy of the full state, JSON-native; `load_state` of it restores the environment."""
        return copy.deepcopy(self._state)

    @not_a_tool
    def scored_state(self) -> dict[str, Any]:
        """The state the reward compares: `state()` without `unscored_keys`."""
        return {key: value for key, value in self.state().items() if key not in self.unscored_keys}

    @not_a_tool
    def state_key(self) -> str:
        """Canonical JSON of the full state: a GiGPO anchor state."""
        return canonical_json(self._state)

    @not_a_tool
    def execute(self, call: dict[str, Any]) -> str:
        """Run one `{"name": str, "arguments": dict}` call; the tool's text result (errors as `"Error: ..."`)."""
        try:
            name, arguments = _split_call(call)
            if name not in tool_names(type(self)):
                raise ToolError(f"No such function: {name!r}.")
            return getattr(self, name)(**arguments)
        except Exception as exc:  # noqa: BLE001
            return error_text(exc)

    def _normalize(self, state: dict[str, Any]) -> dict[str, Any]:
        """Bring a loaded state to the canonical in-memory form (subclasses override)."""
        return state


def _split_call(call: Any) -> tuple[str, dict[str, Any]]:
    """`(name, arguments)` of a `{"name", "arguments"}` call; arguments may be a JSON string."""
    if not isinstance(call, dict) or not isinstance(call.get("name"), str):
        raise ToolError(f"Malformed call: {call!r}.")
    arguments = call.get("arguments") or {}
    if isinstance(arguments, str):
        arguments = json.loads(arguments)
    if not isinstance(arguments, dict):
        raise ToolError(f"Arguments of {call['name']!r} must be an object, got {arguments!r}.")
    return call["name"], arguments


def tool_names(cls: type) -> list[str]:
    """The tool methods of an environment class, in TRL's (alphabetical) order: its public functions but `reset`,
    `get_reward` (TRL's own exclusions), `state_key` (which GEARTrainer hides) and those marked `not_a_tool`."""
    return [
        name
        for name, _ in inspect.getmembers(cls, predicate=inspect.isfunction)
        if name not in ("reset", "get_reward", "state_key") and not name.startswith("_")
    ]
