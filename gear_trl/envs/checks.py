"""Checks of a user's environment class, made before the model loads, so that a mistake costs seconds, not a model
load and a generation.

TRL's `environment_factory` turns every public method of an environment into a tool except `reset` and `get_reward`,
building each tool's JSON schema from its type hints and Google-style docstring (`transformers.utils.get_json_schema`)
only when the first prompt is rendered, and calls `reset(**row)` with every dataset column before each rollout,
appending what it returns (a string) to the last user message. Here:

- `hide_plumbing`: `state_key` (GiGPO's anchor state) is never offered to the model as a tool;
- `check_environment`: every tool's schema builds, `reset` takes the row's columns, `reset` on the first row returns
  None or a string, and the tools a dataset's `tools` column advertises exist in the environment.

Each failure is a `UserInputError` naming the class, the method and the fix.
"""

from __future__ import annotations

import inspect
import json
from typing import Any

from ..plugins import UserInputError
from .base import not_a_tool, tool_names

PLUMBING = ("state_key",)
"""Methods an environment may define that are never tools (TRL itself skips `reset` and `get_reward`)."""

_SCHEMA_HELP = (
    "every argument of a tool needs a type hint and an `Args:` entry in a Google-style docstring (and the docstring a "
    "description line); a helper that is not a tool should start with `_` or carry `@gear_trl.envs.not_a_tool`"
)


def hide_plumbing(cls: type) -> type:
    """Mark `cls`'s plumbing methods (`PLUMBING`) `not_a_tool`, in place, so TRL does not list them as tools; an
    instance still calls them as ordinary methods. Returns `cls`."""
    for name in PLUMBING:
        member = inspect.getattr_static(cls, name, None)
        if inspect.isfunction(member):
            setattr(cls, name, not_a_tool(member))
    return cls


def check_environment(factory, dataset=None, *, what: str = "environment", reset_first_row: bool = True) -> list[str]:
    """Build one environment with `factory`, hide its plumbing and check it against `dataset` (a `datasets.Dataset`
    of prepared rows, or None when the environment supplies the prompts); returns its tool names in TRL's order.
    `reset_first_row`: call `reset` on the first row (or with no row when there is no dataset) and check its return.

    Raises `UserInputError` for a tool whose schema TRL cannot build, a `reset` that cannot take the dataset's
    columns or returns something other than None or a string on the first row, and a `tools` column naming tools the
    environment does not have.
    """
    if isinstance(factory, type):
        hide_plumbing(factory)
    try:
        environment = factory()
    except Exception as err:  # a user constructor: name it, whatever it raised
        raise UserInputError(f"{what}: building it with no arguments failed ({type(err).__name__}: {err}).") from err
    cls = hide_plumbing(type(environment))
    name = cls.__name__
    reset = inspect.getattr_static(cls, "reset", None)
    if not callable(reset) and not isinstance(reset, (staticmethod, classmethod)):
        raise UserInputError(
            f"{what} {name} has no `reset` method: TRL calls `reset(**row)` before every rollout. Add "
            "`def reset(self, **row) -> str | None`."
        )
    tools = tool_names(cls)
    from transformers.utils import get_json_schema

    for tool in tools:
        try:
            get_json_schema(getattr(environment, tool))
        except Exception as err:  # DocstringParsingException, TypeHintParsingException, ...
            raise UserInputError(
                f"{what} {name}.{tool}: TRL cannot build its tool schema ({type(err).__name__}: {err}); {_SCHEMA_HELP}."
            ) from err
    columns = list(getattr(dataset, "column_names", None) or [])
    _check_reset_signature(environment.reset, name, columns, what)
    first_row = _first_row(dataset)
    if reset_first_row and (first_row is not None or dataset is None):
        try:
            observation = environment.reset(**(first_row or {}))
        except Exception as err:
            raise UserInputError(
                f"{what} {name}.reset(**row) failed on the first row ({type(err).__name__}: {err}); it is called with "
                f"every dataset column ({columns})."
            ) from err
        if observation is not None and not isinstance(observation, (str, list)):
            raise UserInputError(
                f"{what} {name}.reset returned a {type(observation).__name__} on the first row; it must return None or "
                "a string, which TRL appends to the prompt's last user message (keep state on `self`)."
            )
    if "tools" in columns:
        _check_tools_column(dataset, tools, name, what)
    return tools


def _check_reset_signature(reset, name: str, columns: list[str], what: str) -> None:
    try:
        parameters = inspect.signature(reset).parameters.values()
    except (TypeError, ValueError):
        return
    shown = ", ".join(["self", *(str(p) for p in parameters)])
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters):
        return
    accepted = {p.name for p in parameters if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
    required = [
        p.name
        for p in parameters
        if p.default is inspect.Parameter.empty and p.kind is not inspect.Parameter.VAR_POSITIONAL
    ]
    unexpected = [column for column in columns if column not in accepted]
    missing = [parameter for parameter in required if parameter not in columns]
    if unexpected or missing:
        problem = f"it does not take {unexpected}" if unexpected else f"it requires {missing}, which are not columns"
        raise UserInputError(
            f"{what} {name}.reset({shown}): TRL calls it as `reset(**row)` with every dataset column "
            f"({columns}), but {problem}. Write it as `def reset(self, **row)` and read the columns it needs from `row`."
        )


def _first_row(dataset) -> dict[str, Any] | None:
    if dataset is None or not hasattr(dataset, "column_names") or not hasattr(dataset, "__len__"):
        return None
    return dict(dataset[0]) if len(dataset) else None


def _check_tools_column(dataset, tools: list[str], name: str, what: str) -> None:
    advertised: set[str] = set()
    for value in {v if isinstance(v, str) else json.dumps(v, default=str) for v in dataset["tools"] if v}:
        try:
            schemas = json.loads(value) if value else []
        except ValueError:
            continue  # an unreadable row is reported where rows are read (the rollout's tool metrics)
        for schema in schemas if isinstance(schemas, list) else []:
            function = schema.get("function", schema) if isinstance(schema, dict) else None
            if isinstance(function, dict) and isinstance(function.get("name"), str):
                advertised.add(function["name"])
    absent = sorted(advertised - set(tools))
    if absent:
        raise UserInputError(
            f"The dataset's `tools` column advertises {absent}, which {what} {name} does not have (its tools: "
            f"{tools}): the model would be shown tools that cannot run. Rename them in the data or the environment, "
            "or drop the `tools` column (the environment's own tools are then shown)."
        )
