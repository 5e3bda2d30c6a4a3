"""Model plumbing `GEARTrainer` relies on: which tokens are the model's, where its states are kept, how its head
transforms logits, and the hooks and dropout it switches. Pure helpers, no trainer state."""

from __future__ import annotations

from collections import Counter
from contextlib import contextmanager

import torch
from accelerate.utils import is_peft_model


def model_token_mask(batch) -> torch.Tensor:
    """Model-written, non-padding completion tokens, [B, T] bool."""
    mask = batch["completion_mask"].bool()
    if "tool_mask" in batch:
        mask = mask & batch["tool_mask"].bool()
    return mask


def completion_states(hidden: torch.Tensor, keep: int) -> torch.Tensor:
    """The states [B, keep, H] that predict the last `keep` tokens, out of a backbone's [B, L, H], as a copy.

    A slice would share the whole tensor's storage and keep every prompt position alive as long as it is held: in
    TRL's chunked passes, every chunk's [b, prompt + completion, H] until the batch is done (GBs at agent prompt
    lengths). Detached: these states feed no-grad statistics only.
    """
    return hidden[:, -keep - 1 : -1].detach().clone(memory_format=torch.contiguous_format)


@contextmanager
def checkpointing_paused(model: torch.nn.Module):
    """Gradient checkpointing off for the block, by the modules' own `gradient_checkpointing` flags.

    TRL's `disable_gradient_checkpointing` calls `gradient_checkpointing_enable` on the way out, which registers one
    more `enable_input_require_grads` forward hook on the input embeddings every time (and a PEFT model never removes
    them): once per backbone call of every teacher pass, that is a pile of hooks growing without bound over a run.
    Flipping the flags changes nothing else and adds nothing. (No-grad passes need checkpointing off because a
    checkpointed layer in training mode drops `past_key_values`, which the shared-prefix teacher pass relies on.)
    """
    switched = [m for m in model.modules() if getattr(m, "gradient_checkpointing", False) is True]
    for module in switched:
        module.gradient_checkpointing = False
    try:
        yield
    finally:
        for module in switched:
            module.gradient_checkpointing = True


@contextmanager
def no_new_input_grad_hooks(model: torch.nn.Module):
    """Remove, after the block, forward hooks the block added to the input embeddings that duplicate one already
    there (same function): TRL's generation step pauses checkpointing through `gradient_checkpointing_enable`, which
    re-registers `enable_input_require_grads`' hook each time (two a step), and the earlier one is never removed."""
    embeddings = model.get_input_embeddings()
    before = dict(embeddings._forward_hooks)
    owners = [m for m in model.modules() if hasattr(m, "_require_grads_hooks")]
    handles = {id(m): (m._require_grads_hooks, getattr(m, "_require_grads_hook", None)) for m in owners}
    try:
        yield
    finally:
        # Only duplicates of hooks still there (a model whose checkpointing switch removes its hooks keeps the new).
        kept = [key for key in before if key in embeddings._forward_hooks]
        kinds = {_hook_kind(before[key]) for key in kept}
        for key, hook in list(embeddings._forward_hooks.items()):
            if key not in before and _hook_kind(hook) in kinds:
                del embeddings._forward_hooks[key]
                embeddings._forward_hooks_with_kwargs.pop(key, None)
                embeddings._forward_hooks_always_called.pop(key, None)
        if len(kept) == len(before):  # the handles transformers keeps must stay the live ones
            for module in owners:
                module._require_grads_hooks, first = handles[id(module)]
                if first is not None:
                    module._require_grads_hook = first


def _hook_kind(hook) -> str:
    return f"{getattr(hook, '__module__', '')}.{getattr(hook, '__qualname__', type(hook).__name__)}"


def turn_starts(mask: torch.Tensor) -> torch.Tensor:
    """True at the first model token of each run of model tokens (each assistant turn), [B, T] bool."""
    previous = torch.zeros_like(mask)
    previous[:, 1:] = mask[:, :-1]
    return mask & ~previous


def lm_head_transform(config) -> tuple[float, float | None]:
    """The model's own logit transformation, as TRL's fused LM head reads it: `(scale, softcap)` with logits
    `softcap * tanh(scale * z / softcap)` (no tanh when softcap is None). Cohere scales by `logit_scale`, Falcon-H1 by
    `lm_head_multiplier`, Granite divides by `logits_scaling`, Gemma 2/3 soft-cap with `final_logit_softcapping`."""
    config = config.get_text_config()
    scale = getattr(config, "logit_scale", None)
    if scale is None:
        scale = getattr(config, "output_multiplier", None)
    if scale is None:
        scale = getattr(config, "lm_head_multiplier", None)
    if scale is None and getattr(config, "logits_scaling", None) is not None:
        scale = config.logits_scaling if config.model_type == "hyperclovax" else 1.0 / config.logits_scaling
    return (1.0 if scale is None else float(scale)), getattr(config, "final_logit_softcapping", None)


def switch_off_dropout(model) -> Counter:
    """Set every dropout probability in `model` to 0 (`nn.Dropout` modules, PEFT's `lora_dropout` among them, and the
    `attention_dropout` attribute attention layers read in training mode); counts what was on, by kind."""
    switched_off = Counter()
    for name, module in model.named_modules():
        if isinstance(module, torch.nn.Dropout) and module.p > 0:
            kind = next((part for part in reversed(name.split(".")) if "dropout" in part), type(module).__name__)
            switched_off[f"{kind} p={module.p}"] += 1
            module.p = 0.0
        rate = getattr(module, "attention_dropout", None)
        if isinstance(rate, float) and rate > 0:
            switched_off[f"attention_dropout p={rate}"] += 1
            module.attention_dropout = 0.0
    return switched_off


def is_loaded_peft_model(model) -> bool:
    return isinstance(model, torch.nn.Module) and is_peft_model(model)  # `model` may still be a name or path
