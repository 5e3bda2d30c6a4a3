"""Deprecated: moved to `gear_trl.inputs.flags` (this module is that one, with a DeprecationWarning at import)."""

import sys
import warnings

from ..inputs import flags as _moved

warnings.warn("gear_trl.cli.flags moved to gear_trl.inputs.flags.", DeprecationWarning, stacklevel=2)
sys.modules[__name__] = _moved
