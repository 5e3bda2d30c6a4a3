"""Deprecated: moved to `gear_trl.teacher.teacher` (this module is that one, with a DeprecationWarning at import)."""

import sys
import warnings

from ..teacher import teacher as _moved

warnings.warn("gear_trl.trainer.teacher moved to gear_trl.teacher.teacher.", DeprecationWarning, stacklevel=2)
sys.modules[__name__] = _moved
