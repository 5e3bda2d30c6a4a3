"""`UserInputError`, the one error type for input a person can fix (a recipe key, a plug-in, a dataset column, an
environment class): the command-line entry points print it as a single `error: ...` line, and Python callers get a
`ValueError` naming what to change.
"""

from __future__ import annotations


class UserInputError(ValueError):
    """Input that would make a run fail or train on nothing, found before any model loads; the message names the
    field and the fix."""
