"""BFCLEnvironment: several BFCL API classes behind one TRL environment, configured per dataset row.

A BFCL multi-turn task involves one to three API classes (e.g. `GorillaFileSystem` and `TwitterAPI`). TRL builds
the tool list once, from the methods of the environment *class*, so `BFCLEnvironment` carries a tool method for
every function of every implemented class; `reset(**row)` decides which classes exist for the row:

    >>> env = BFCLEnvironment()
    >>> env.reset(initial_config=row["initial_config"], involved_classes=row["involved_classes"])
    >>> env.cd(folder="document")            # a JSON string, or "Error: ..." text
    >>> env.state_key()                      # canonical JSON of the full state: a GiGPO anchor state

A tool whose class is not involved in the row, or (when the row has a `tools` column) that is not among the row's
tools (BFCL removes some functions from some tasks, `excluded_function`), answers with an error text instead of
acting. Function names are unique across the implemented classes (BFCL already prefixes the clashing ones:
`message_login`, `ticket_login`, `posting_get_login_status`, ...); the `FUNCTION_OWNERS` table below is built at
import and refuses a duplicate, so adding a class with a clashing name fails loudly instead of shadowing a tool.

TRL renders every tool of the environment class into every prompt (68 functions: thousands of tokens).
`environment_class("GorillaFileSystem+MathAPI")` is a subclass exposing only those classes' tools, for TRL's
multi-environment mode (`environment_factory` as a dict, routed by an `environment` column; see its docstring).
"""

import functools
from typing import Any

from .base import APIEnvironment, _split_call, canonical_json, error_text, not_a_tool, parse_json_field, tool_names
from .file_system import GorillaFileSystem
from .math_api import MathAPI
from .message import MessageAPI
from .ticket import TicketAPI
from .twitter import TwitterAPI

API_CLASSES: dict[str, type[APIEnvironment]] = {
    cls.class_name: cls for cls in (GorillaFileSystem, MathAPI, MessageAPI, TicketAPI, TwitterAPI)
}
"""The implemented BFCL API classes, by BFCL class name (the keys of `initial_config`)."""


def _function_owners() -> dict[str, str]:
    owners: dict[str, str] = {}
    for class_name, cls in API_CLASSES.items():
        for name in tool_names(cls):
            if name in owners:
                raise RuntimeError(f"Function {name!r} is defined by both {owners[name]} and {class_name}.")
            owners[name] = class_name
    return owners


FUNCTION_OWNERS: dict[str, str] = _function_owners()
"""Function name -> the API class that defines it."""


class BFCLEnvironment:
    """The BFCL API classes of one task, as one TRL environment (see the module docstring)."""

    def __init__(self):
        self._apis: dict[str, APIEnvironment] = {}
        self._allowed: set[str] | None = None

    @classmethod
    def from_config(cls, initial_config: Any, involved_classes: Any = None, tools: Any = None) -> "BFCLEnvironment":
        """A reset environment for a configuration, class list and optional tool list (objects or JSON strings)."""
        env = cls()
        env.reset(initial_config=initial_config, involved_classes=involved_classes, tools=tools)
        return env

    def reset(self, **row) -> None:
        """Build the row's API instances from `initial_config` and `involved_classes` (JSON strings).

        `involved_classes` defaults to the classes configured in `initial_config`. A `tools` column (JSON list of
        OpenAI-style schemas), when present, limits the callable functions to those listed.
        """
        config = parse_json_field(row.get("initial_config"), {})
        involved = parse_json_field(row.get("involved_classes"), None) or sorted(config)
        unknown = sorted(set(involved) - set(API_CLASSES))
        if unknown:
            raise ValueError(f"API classes {unknown} are not implemented; implemented: {sorted(API_CLASSES)}.")
        self._apis = {name: API_CLASSES[name](config.get(name, {})) for name in sorted(involved)}
        tools = parse_json_field(row.get("tools"), None)
        self._allowed = {tool["function"]["name"] for tool in tools} if tools else None

    @property
    def involved_classes(self) -> list[str]:
        """The API classes of the current row, sorted."""
        return list(self._apis)

    @not_a_tool
    def state(self) -> dict[str, Any]:
        """`{class name: state}` of the involved classes; in the format of `initial_config`."""
        return {name: api.state() for name, api in self._apis.items()}

    @not_a_tool
    def scored_state(self) -> dict[str, Any]:
        """`{class name: state}` without navigation state: what the multi-turn reward compares."""
        return {name: api.scored_state() for name, api in self._apis.items()}

    @not_a_tool
    def state_key(self) -> str:
        """Canonical (sorted-key) JSON of the full state, working directory included: a GiGPO anchor state."""
        return canonical_json(self.state())

    @not_a_tool
    def load_state(self, state: dict[str, Any]) -> None:
        """Restore a `state()` (or any `initial_config`): its keys become the involved classes; no tool filter."""
        self.reset(initial_config=state, involved_classes=sorted(state))

    @not_a_tool
    def execute(self, call: dict[str, Any]) -> str:
        """Run one `{"name": str, "arguments": dict}` call; the tool's text result (errors as `"Error: ..."`)."""
        try:
            name, arguments = _split_call(call)
        except Exception as exc:  # noqa: BLE001
            return error_text(exc)
        return self._dispatch(name, (), arguments)

    def _dispatch(self, name: str, args: tuple, kwargs: dict[str, Any]) -> str:
        owner = FUNCTION_OWNERS.get(name)
        if owner is None:
            return f"Error: No such function: {name!r}."
        if owner not in self._apis:
            return f"Error: {name} belongs to {owner}, which is not available in this task."
        if self._allowed is not None and name not in self._allowed:
            return f"Error: {name} is not available in this task."
        return getattr(self._apis[owner], name)(*args, **kwargs)


def _delegate(class_name: str, name: str, func: Any) -> Any:
    """A `BFCLEnvironment` method that forwards to `class_name.name`, with that tool's signature and docstring."""

    def tool(self, *args, **kwargs):
        return self._dispatch(name, args, kwargs)

    functools.update_wrapper(tool, func)  # signature (via __wrapped__), annotations, docstring for TRL's schema
    tool.__qualname__ = f"BFCLEnvironment.{name}"
    tool.__module__ = __name__
    tool.__doc__ = f"{class_name}: {func.__doc__}"
    return tool


# TRL enumerates the tools with `inspect.getmembers(type(env), inspect.isfunction)`, so they must be class attributes.
for _name, _owner in FUNCTION_OWNERS.items():
    setattr(BFCLEnvironment, _name, _delegate(_owner, _name, getattr(API_CLASSES[_owner], _name)))
del _name, _owner


def environment_name(involved_classes: Any) -> str:
    """The name of a class combination, e.g. `"GorillaFileSystem+MathAPI"` (a list or a JSON string list)."""
    return "+".join(sorted(parse_json_field(involved_classes, [])))


@functools.cache
def environment_class(name: str) -> type[BFCLEnvironment]:
    """A `BFCLEnvironment` subclass exposing only the tools of the classes in `name` (see `environment_name`).

    TRL renders every tool of the environment class into every prompt: all 68 functions cost thousands of prompt
    tokens. With TRL's multi-environment mode, each row gets only its own classes' tools:

        >>> factories = {n: environment_class(n) for n in set(map(environment_name, ds["involved_classes"]))}
        >>> ds = ds.map(lambda row: {"environment": environment_name(row["involved_classes"])})
        >>> GRPOTrainer(..., train_dataset=ds, environment_factory=factories)
    """
    classes = set(name.split("+")) if name else set()
    unknown = sorted(classes - set(API_CLASSES))
    if unknown:
        raise ValueError(f"API classes {unknown} are not implemented; implemented: {sorted(API_CLASSES)}.")
    # An attribute set to None is not a function, so TRL's `inspect.getmembers(..., inspect.isfunction)` skips it.
    hidden = {fn: None for fn, owner in FUNCTION_OWNERS.items() if owner not in classes}
    return type(f"BFCLEnvironment_{name.replace('+', '_')}", (BFCLEnvironment,), {"__module__": __name__, **hidden})
