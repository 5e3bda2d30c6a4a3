"""Deprecated: moved to `gear_trl.teacher.kinds` (this module is that one, with a DeprecationWarning at import)."""

import sys
import warnings

from ..teacher import kinds as _moved

warnings.warn("gear_trl.trainer.teacher_kinds moved to gear_trl.teacher.kinds.", DeprecationWarning, stacklevel=2)
sys.modules[__name__] = _moved
