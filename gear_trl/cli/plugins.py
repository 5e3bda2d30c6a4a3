"""Deprecated: moved to `gear_trl.inputs.plugins` (this module is that one, with a DeprecationWarning at import)."""

import sys
import warnings

from ..inputs import plugins as _moved

warnings.warn("gear_trl.cli.plugins moved to gear_trl.inputs.plugins.", DeprecationWarning, stacklevel=2)
sys.modules[__name__] = _moved
