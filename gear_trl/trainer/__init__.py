"""The trainer layer: `GEARTrainer` (glue between TRL's `GRPOTrainer` and the layers below), `GEARConfig`, and what a
run needs around them: the credit-report callback, GEAR's divergence inside TRL's fused LM head, the Hub check and
per-row data checks (a run's other pre-load checks are `gear_trl.inputs.preflight`, below both this layer and
evaluation), checkpoints and resume, SIGINT/SIGTERM, and the
frozen and EMA teachers' weights.

`from gear_trl.trainer import GEARTrainer, GEARConfig` works as it did when this was one module; the other names
live in their modules (`gear_trl.trainer.gear_trainer`, `gear_trl.trainer.callbacks`, ...).
"""

from .gear_config import GEARConfig
from .gear_trainer import GEARTrainer

__all__ = ["GEARConfig", "GEARTrainer"]
