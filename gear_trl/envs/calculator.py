"""Calculator: a two-tool integer calculator whose state is the list of results computed so far.

The environment of the synthetic calculator task (`data/calc_tools/`, by `data/scripts/make_calc_tools_data.py`): the
model must compute "84 + 17 - 9" one operation per tool call, `add(a=84, b=17)` then `subtract(a=101, b=9)`, and
give the last result as its answer. Unlike BFCL's stateless `MathAPI`, every successful call appends its result to
the state, so `state_key()` tells rollouts apart by what they have computed: rollouts whose calls produced the same
results share a GiGPO anchor state, and one wrong call moves a rollout off the reference chain for good.

    >>> env = Calculator()
    >>> env.reset()
    >>> env.add(a=84, b=17)
    '{"result": 101}'
    >>> env.subtract(a=101, b=9)
    '{"result": 92}'
    >>> env.state_key()
    '{"results":[101,92]}'

Arguments must be integers (a float with an integral value, `101.0`, is read as `101`); anything else is an error
text that leaves the state unchanged.
"""

from __future__ import annotations

from typing import Any, ClassVar

from .base import APIEnvironment, ToolError, not_a_tool

MAX_ABS_VALUE = 10**9
"""Bound on arguments and results, so that a careless call cannot build huge numbers."""


def _integer(value: Any, what: str) -> int:
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ToolError(f"{what} must be an integer, got {value!r}.")
    if abs(value) > MAX_ABS_VALUE:
        raise ToolError(f"{what} is too large: {value!r}.")
    return value


class Calculator(APIEnvironment):
    """Integer addition and subtraction; the state is every result computed so far, in order."""

    class_name = "Calculator"
    default_state: ClassVar[dict[str, Any]] = {"results": []}

    def _record(self, value: int) -> dict[str, int]:
        if abs(value) > MAX_ABS_VALUE:
            raise ToolError(f"The result is too large: {value!r}.")
        self._state["results"].append(value)
        return {"result": value}

    def add(self, a: int, b: int) -> str:
        """Add two integers.

        Args:
            a: The first number.
            b: The second number.
        """
        return self._record(_integer(a, "a") + _integer(b, "b"))

    def subtract(self, a: int, b: int) -> str:
        """Subtract one integer from another.

        Args:
            a: The number to subtract from.
            b: The number to subtract.
        """
        return self._record(_integer(a, "a") - _integer(b, "b"))

    @not_a_tool
    def last_result(self) -> int | None:
        """The last result computed, or None before any successful call."""
        results = self._state["results"]
        return results[-1] if results else None
