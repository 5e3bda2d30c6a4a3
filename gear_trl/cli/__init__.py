"""Deprecated: moved to `gear_trl.inputs` (the user-input error type, plug-in loading, the flag parser, paths).

`gear_trl.cli` was never the command line; its modules (`errors`, `flags`, `paths`, `plugins`) are shims that
re-export `gear_trl.inputs.<module>` with a DeprecationWarning at import.
"""

import warnings

warnings.warn("gear_trl.cli moved to gear_trl.inputs.", DeprecationWarning, stacklevel=2)
