"""Hybrid models (Mamba, linear-attention, conv layers beside attention) take the full teacher pass.

A shared key/value prefix stands for a prompt only in attention layers; a Mamba layer handed one crashed
(`IndexError` in `get_conv_state`, TRL's `test_train[tiny-NemotronHForCausalLM-nano]` under GEAR).
"""

import pytest
import torch
import transformers
from transformers import AutoConfig, AutoTokenizer, TrainerCallback

from gear_trl.teacher.teacher import prefix_sharing_supported
from tests.utils import TINY, make_trainer, tiny_args

NOT_SHARED = [
    "NemotronHConfig",  # Mamba-2 + attention + MLP/MoE layers
    "JambaConfig",  # Mamba + attention
    "Qwen3NextConfig",  # gated DeltaNet (linear attention) + attention
    "FalconH1Config",  # attention and Mamba-2 in parallel in every layer
    "GraniteMoeHybridConfig",  # Granite 4
    "BambaConfig",
    "Zamba2Config",
    "Gemma3TextConfig",  # sliding-window attention keeps only a window of the prefix
    "Llama4TextConfig",  # chunked attention, likewise
]


@pytest.mark.parametrize("name", NOT_SHARED)
def test_models_with_layers_other_than_full_attention_do_not_share(name):
    assert not prefix_sharing_supported(getattr(transformers, name)())


def test_attention_only_models_share():
    assert prefix_sharing_supported(AutoConfig.from_pretrained(TINY))
    assert prefix_sharing_supported(transformers.Qwen3Config(num_hidden_layers=36))
    assert prefix_sharing_supported(transformers.LlamaConfig())


def tiny_nemotron_h(tokenizer):
    """A random NemotronH with one Mamba-2 layer, one attention layer and one MLP layer (torch path, no kernels)."""
    config = transformers.NemotronHConfig(
        vocab_size=len(tokenizer),
        hidden_size=64,
        layers_block_type=["linear_attention", "full_attention", "mlp"],
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=16,
        intermediate_size=128,
        ssm_state_size=16,
        mamba_num_heads=8,
        mamba_head_dim=16,
        n_groups=1,
        chunk_size=16,
        use_mamba_kernels=False,
        tie_word_embeddings=False,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        bos_token_id=None,
    )
    torch.manual_seed(0)
    return transformers.NemotronHForCausalLM(config)


class _SharedFrac(TrainerCallback):
    def __init__(self):
        self.values = []

    def on_log(self, args, state, control, logs=None, **kwargs):
        if "gear/teacher_prefix_shared_frac" in (logs or {}):
            self.values.append(logs["gear/teacher_prefix_shared_frac"])


@pytest.mark.slow
def test_tiny_nemotron_h_trains_with_prefix_sharing_on(tmp_path):
    model = tiny_nemotron_h(AutoTokenizer.from_pretrained(TINY))
    assert not prefix_sharing_supported(model.config)
    # Sharing on, and allowed whatever it saves: an attention-only model would share every batch here.
    args = tiny_args(tmp_path, teacher_prefix_sharing=True, teacher_prefix_sharing_max_ratio=1.0)
    logged = _SharedFrac()
    trainer = make_trainer(tmp_path, args=args, model=model, callbacks=[logged])
    before = {n: p.detach().clone() for n, p in trainer.model.named_parameters()}
    trainer.train()
    assert logged.values == [0.0, 0.0]
    mamba_in = "model.layers.0.mixer.in_proj.weight"
    assert mamba_in in before and not torch.equal(trainer.model.get_parameter(mamba_in), before[mamba_in])
