"""Deprecated: moved to `gear_trl.teacher.prompts` (this module is that one, with a DeprecationWarning at import).

Loaded by name: the teacher imports the data room, so a static import back from here would join the two rooms."""

import importlib
import sys
import warnings

warnings.warn("gear_trl.data.teacher moved to gear_trl.teacher.prompts.", DeprecationWarning, stacklevel=2)
sys.modules[__name__] = importlib.import_module("gear_trl.teacher.prompts")
