"""The current folder on `sys.path` for console scripts: below both `errors` (whose entry-point wrapper calls it)
and `plugins` (which loads what it makes importable), so neither imports the other for it."""

from __future__ import annotations

import importlib
import os
import sys


def import_from_current_folder() -> None:
    """Put the current folder first on `sys.path`, as `python -m` does, so that plug-ins named by import path
    (`my_rewards:exact_answer`) import from the folder a console script (`gear-trl-train`) runs in. A console script's
    `sys.path[0]` is the folder of the script itself (the environment's `bin/`), not the current one. Nothing changes
    when the current folder is already there (`python -m gear_trl.train`)."""
    try:
        here = os.getcwd()
    except OSError:  # the folder was removed under the process: nothing to import from
        return
    if not any(os.path.abspath(entry or os.curdir) == here for entry in sys.path):
        sys.path.insert(0, here)
        importlib.invalidate_caches()
