"""Task plug-ins by import path: a recipe names a built-in environment, reward or dataset adapter by its short name,
or one of the user's own by `package.module:Name` (TRL's `package.module.name` form is accepted too). A name that
cannot be loaded raises `gear_trl.inputs.errors.UserInputError`.
"""

from __future__ import annotations

import difflib
import importlib
from typing import Any

from .errors import UserInputError
from .paths import import_from_current_folder  # noqa: F401  (re-exported: plug-ins are loaded from here)


def is_import_path(spec: str) -> bool:
    """Whether `spec` is written as an import path (`pkg.mod:Name` or `pkg.mod.Name`) rather than a short name."""
    return ":" in spec or "." in spec


def load_plugin(spec: str, what: str, known: dict[str, Any] | None = None) -> Any:
    """The object `spec` names: `known[spec]` for a built-in short name, else the attribute of an importable module.

    `what` names the recipe field in errors (e.g. "environment"). Raises `UserInputError` naming the module or the
    attribute that could not be found, and the built-in names.
    """
    known = known or {}
    if spec in known:
        return known[spec]
    builtins = f"built-in names: {sorted(known)}" if known else "no built-in names"
    if not isinstance(spec, str) or not is_import_path(spec):
        close = difflib.get_close_matches(spec, sorted(known), n=1) if isinstance(spec, str) else []
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise UserInputError(
            f"Unknown {what} {spec!r}{hint}; {builtins}, or an import path of your own such as "
            "`my_package.module:Name`."
        )
    if ":" in spec:
        module_name, _, attribute = spec.partition(":")
    else:
        module_name, _, attribute = spec.rpartition(".")
    if not module_name or not attribute:
        raise UserInputError(f"{what} {spec!r}: write an import path as `package.module:Name`.")
    try:
        module = importlib.import_module(module_name)
    except ImportError as err:
        raise UserInputError(
            f"{what} {spec!r}: cannot import module {module_name!r} ({type(err).__name__}: {err}). Install its package "
            "or run from the folder that holds it (or add that folder to PYTHONPATH)."
        ) from err
    obj = module
    for part in attribute.split("."):
        if not hasattr(obj, part):
            public = sorted(name for name in dir(module) if not name.startswith("_"))
            raise UserInputError(
                f"{what} {spec!r}: module {module_name!r} has no attribute {attribute!r} (it defines {public[:20]})."
            )
        obj = getattr(obj, part)
    return obj
