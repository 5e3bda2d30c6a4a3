import os

# Tests never reach the Hugging Face Hub: models and tokenizers come from the repository (data/tiny-qwen3) or are
# built in a temporary directory. Set before any test module imports huggingface_hub.
os.environ["HF_HUB_OFFLINE"] = "1"
