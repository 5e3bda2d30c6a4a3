"""Deprecated: moved to `gear_trl.teacher.probe` (this module is that one, with a DeprecationWarning at import)."""

import sys
import warnings

from ..teacher import probe as _moved

warnings.warn("gear_trl.trainer.teacher_probe moved to gear_trl.teacher.probe.", DeprecationWarning, stacklevel=2)
sys.modules[__name__] = _moved
