"""Tool-use environments for TRL's `environment_factory`: executable, stateful BFCL API classes.

Each class is a TRL environment on its own (public methods are the tools; `reset(**row)` loads the row's
`initial_config`); `BFCLEnvironment` combines the classes a BFCL multi-turn task involves. Every environment has
`state()`, `load_state()`, `state_key()` (a GiGPO anchor state) and `execute({"name", "arguments"})`, hidden from
TRL's tool discovery by `not_a_tool`. `Calculator` is not a BFCL class: it is the two-tool environment of the
synthetic calculator task (`data/calc_tools/`), whose state is the list of results computed so far.
`BFCLOfficialEnvironment` (`bfcl_official`) runs BFCL's own eight classes from bfcl-eval instead of our rewrites and
covers every multi-turn task (`gear_trl.envs.bfcl_official`).
"""

import json

from ..inputs.errors import UserInputError
from ..inputs.plugins import load_plugin
from .base import APIEnvironment, ToolError, not_a_tool, tool_names
from .bfcl import API_CLASSES, FUNCTION_OWNERS, BFCLEnvironment, environment_class, environment_name
from .bfcl_official import BFCLOfficialEnvironment
from .calculator import Calculator
from .file_system import GorillaFileSystem
from .math_api import MathAPI
from .message import MessageAPI
from .ticket import TicketAPI
from .twitter import TwitterAPI

ENVIRONMENTS = {"bfcl": BFCLEnvironment, "bfcl_official": BFCLOfficialEnvironment, "calculator": Calculator}
"""Environment factories by the name a recipe gives in `environment`."""


def get_environment_factory(name: str):
    """The environment class registered under `name`, or the one an import path names (`my_tasks.bank:BankEnv`):
    TRL's `environment_factory`. Raises `UserInputError` naming what could not be found."""
    factory = load_plugin(name, "environment", ENVIRONMENTS)
    if not callable(factory):
        raise UserInputError(
            f"environment {name!r} is a {type(factory).__name__}, not a class (or a function returning an environment)."
        )
    return factory


def get_environment_factories(spec):
    """TRL's `environment_factory` from a recipe's `environment`: one name or import path (one environment for every
    row), or a mapping `{name: name or import path}` (also as JSON text on the command line), TRL's several
    environments, where each row names its own in an `environment` column."""
    if isinstance(spec, str) and spec.lstrip().startswith("{"):
        try:
            spec = json.loads(spec)
        except ValueError as err:
            raise UserInputError(f"environment {spec!r} is not a valid JSON mapping ({err}).") from err
    if isinstance(spec, dict):
        if not spec:
            raise UserInputError("`environment` is an empty mapping: name at least one environment.")
        return {str(name): get_environment_factory(str(path)) for name, path in spec.items()}
    return get_environment_factory(spec)


def factory_class(factory) -> type:
    """The class of the environments `factory` builds: the factory itself when it is a class, else the class of one
    instance (the factory is called once; call this once and pass the class on)."""
    return factory if isinstance(factory, type) else type(factory())


def supplies_reward(factory) -> bool:
    """Whether the environments `factory` (or an environment class) builds own their reward: their class defines
    `get_reward`, which TRL adds as a reward of weight 1 named after the class."""
    return callable(getattr(factory_class(factory), "get_reward", None))


__all__ = [
    "API_CLASSES",
    "ENVIRONMENTS",
    "FUNCTION_OWNERS",
    "APIEnvironment",
    "BFCLEnvironment",
    "BFCLOfficialEnvironment",
    "Calculator",
    "GorillaFileSystem",
    "MathAPI",
    "MessageAPI",
    "TicketAPI",
    "ToolError",
    "TwitterAPI",
    "environment_class",
    "environment_name",
    "factory_class",
    "get_environment_factories",
    "get_environment_factory",
    "not_a_tool",
    "supplies_reward",
    "tool_names",
]
