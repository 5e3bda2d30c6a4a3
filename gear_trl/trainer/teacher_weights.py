"""Deprecated: moved to `gear_trl.teacher.weights` (this module is that one, with a DeprecationWarning at import)."""

import sys
import warnings

from ..teacher import weights as _moved

warnings.warn("gear_trl.trainer.teacher_weights moved to gear_trl.teacher.weights.", DeprecationWarning, stacklevel=2)
sys.modules[__name__] = _moved
