"""Deprecated: moved to `gear_trl.inputs.preflight` (this module is that one, with a DeprecationWarning at import)."""

import sys
import warnings

from ..inputs import preflight as _moved

warnings.warn("gear_trl.trainer.preflight moved to gear_trl.inputs.preflight.", DeprecationWarning, stacklevel=2)
sys.modules[__name__] = _moved
