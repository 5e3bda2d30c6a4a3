"""Deprecated: moved to `gear_trl.inputs.paths` (this module is that one, with a DeprecationWarning at import)."""

import sys
import warnings

from ..inputs import paths as _moved

warnings.warn("gear_trl.cli.paths moved to gear_trl.inputs.paths.", DeprecationWarning, stacklevel=2)
sys.modules[__name__] = _moved
