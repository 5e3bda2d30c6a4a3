"""gear_trl: GEAR and GiGPO credit assignment for RL fine-tuning of LLM agents with TRL."""

__version__ = "0.1.0"

from .trainer.gear_config import GEARConfig
from .trainer.gear_trainer import GEARTrainer

__all__ = ["GEARConfig", "GEARTrainer", "__version__"]
