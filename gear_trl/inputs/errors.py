"""`UserInputError`, the one error type for input a person can fix (a recipe key, a plug-in, a dataset column, an
environment class): the command-line entry points print it as a single `error: ...` line, and Python callers get a
`ValueError` naming what to change.
"""

from __future__ import annotations


class UserInputError(ValueError):
    """Input that would make a run fail or train on nothing, found before any model loads; the message names the
    field and the fix."""


def exit_on_user_error(main, argv) -> None:
    """Run an entry point's `main(argv)`, with the current folder on `sys.path` as under `python -m` (the user's
    plug-ins import from it); a `UserInputError` ends the process with one `error: ...` line (exit 1)."""
    import sys

    from .paths import import_from_current_folder

    import_from_current_folder()
    try:
        main(argv)
    except UserInputError as err:
        sys.exit(f"error: {err}")
