"""Tool-use environments for TRL's `environment_factory`: executable, stateful BFCL API classes.

Each class is a TRL environment on its own (public methods are the tools; `reset(**row)` loads the row's
`initial_config`); `BFCLEnvironment` combines the classes a BFCL multi-turn task involves. Every environment has
`state()`, `load_state()`, `state_key()` (a GiGPO anchor state) and `execute({"name", "arguments"})`, hidden from
TRL's tool discovery by `not_a_tool`. `Calculator` is not a BFCL class: it is the two-tool environment of the
synthetic calculator task (`data/calc_tools/`), whose state is the list of results computed so far.
`BFCLOfficialEnvironment` (`bfcl_official`) runs BFCL's own eight classes from bfcl-eval instead of our rewrites and
covers every multi-turn task (`gear_trl.envs.bfcl_official`).
"""

from ..plugins import UserInputError, load_plugin
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
    "get_environment_factory",
    "not_a_tool",
    "tool_names",
]
