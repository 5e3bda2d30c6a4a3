"""Gradient checkpointing with GEAR's no-grad teacher passes: no hooks pile up, checkpointing stays on for the loss."""

import pytest
import torch
from peft import LoraConfig
from transformers import AutoModelForCausalLM, TrainerCallback
from utils import TINY, make_trainer, tiny_args

from gear_trl.trainer.gear_trainer import checkpointing_paused, no_new_input_grad_hooks


class _HookCount(TrainerCallback):
    """Forward hooks on the input embeddings, and whether checkpointing is on, after every optimizer step."""

    def __init__(self):
        self.trainer = None
        self.hooks, self.checkpointing, self.shared = [], [], []

    def on_step_end(self, args, state, control, **kwargs):
        embeddings = self.trainer.model.get_input_embeddings()
        self.hooks.append(len(embeddings._forward_hooks))
        self.checkpointing.append(self.trainer._causal_lm().is_gradient_checkpointing)

    def on_log(self, args, state, control, logs=None, **kwargs):
        if "gear/teacher_prefix_shared_frac" in (logs or {}):
            self.shared.append(logs["gear/teacher_prefix_shared_frac"])


@pytest.mark.slow
@pytest.mark.parametrize("sharing", [True, False], ids=["shared-prefix", "full"])
def test_teacher_passes_add_no_input_grad_hooks(tmp_path, sharing):
    """Every Qwen3 recipe trains LoRA on all linear layers with gradient checkpointing. Each no-grad pass used to
    switch checkpointing off and on through `gradient_checkpointing_enable`, which registers one more
    `enable_input_require_grads` hook every time (6, 10, 14 after steps 1-3): the count must stay flat."""
    args = tiny_args(tmp_path, gradient_checkpointing=True, max_steps=3, teacher_prefix_sharing=sharing)
    counter = _HookCount()
    peft = LoraConfig(r=4, lora_alpha=8, target_modules="all-linear", lora_dropout=0.0)
    trainer = make_trainer(tmp_path, args=args, peft_config=peft, callbacks=[counter])
    counter.trainer = trainer
    before = {n: p.detach().clone() for n, p in trainer.model.named_parameters() if p.requires_grad}
    trainer.train()
    assert len(counter.hooks) == 3
    assert counter.hooks == [counter.hooks[0]] * 3, f"input-embedding hooks per step: {counter.hooks}"
    assert counter.hooks[0] <= 2  # TRL's (PEFT + checkpointing) and the Trainer's own at the start of `train`
    assert counter.checkpointing == [True] * 3
    # The teacher pass was shared as configured, and the adapters still trained through the checkpointed layers.
    assert counter.shared == [float(sharing)] * 3
    moved = [n for n, p in trainer.model.named_parameters() if p.requires_grad and not torch.equal(p, before[n])]
    assert len(moved) == len(before)


def test_checkpointing_paused_restores_flags_and_adds_nothing():
    model = AutoModelForCausalLM.from_pretrained(TINY)
    model.gradient_checkpointing_enable()
    model.train()
    embeddings = model.get_input_embeddings()
    hooks = dict(embeddings._forward_hooks)
    layers = [m for m in model.modules() if hasattr(m, "gradient_checkpointing")]
    with checkpointing_paused(model):
        assert not model.is_gradient_checkpointing
        # A checkpointed layer in training mode drops the cache; paused, the cache is filled.
        out = model(input_ids=torch.tensor([[1, 2, 3]]), use_cache=True)
        assert out.past_key_values is not None and out.past_key_values.get_seq_length() == 3
    assert all(m.gradient_checkpointing for m in layers)
    assert dict(embeddings._forward_hooks) == hooks


def test_duplicate_input_grad_hooks_are_removed_and_the_live_one_kept():
    model = AutoModelForCausalLM.from_pretrained(TINY)
    model.enable_input_require_grads()
    embeddings = model.get_input_embeddings()
    with no_new_input_grad_hooks(model):  # TRL's pause and re-enable: one more hook of the same function
        model.enable_input_require_grads()
    assert len(embeddings._forward_hooks) == 1
    with no_new_input_grad_hooks(model):  # a switch that removes its hook before adding one keeps the new one
        model.disable_input_require_grads()
        model.enable_input_require_grads()
    assert len(embeddings._forward_hooks) == 1
    model.disable_input_require_grads()  # the handles transformers keeps point at the live hook
    assert len(embeddings._forward_hooks) == 0
