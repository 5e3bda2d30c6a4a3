"""Deprecated: `CreditTrace` lives in `gear_trl.credit.credit_trace`."""

import warnings

from ..credit.credit_trace import CreditTrace

__all__ = ["CreditTrace"]

warnings.warn("gear_trl.trainer.credit_trace moved to gear_trl.credit.credit_trace.", DeprecationWarning, stacklevel=2)
