import os

# Tests never reach the Hugging Face Hub: models and tokenizers come from the repository (data/tiny-qwen3) or are
# built in a temporary directory. Set before any test module imports huggingface_hub.
os.environ["HF_HUB_OFFLINE"] = "1"


import pytest


@pytest.fixture
def never_load_a_model(monkeypatch):
    """Fails a test whose command built the trainer (and loaded its model): for inputs preflight must refuse first.
    A test module takes it with `pytestmark = pytest.mark.usefixtures("never_load_a_model")`."""
    from gear_trl.trainer.gear_trainer import GEARTrainer

    def fail(*args, **kwargs):
        raise AssertionError("the trainer (and its model) was built although the input was wrong")

    monkeypatch.setattr(GEARTrainer, "__init__", fail)
