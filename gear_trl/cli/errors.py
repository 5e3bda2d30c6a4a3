"""Deprecated: moved to `gear_trl.inputs.errors` (this module is that one, with a DeprecationWarning at import)."""

import sys
import warnings

from ..inputs import errors as _moved

warnings.warn("gear_trl.cli.errors moved to gear_trl.inputs.errors.", DeprecationWarning, stacklevel=2)
sys.modules[__name__] = _moved
