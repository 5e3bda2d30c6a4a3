"""A model split over several devices (`device_map`), which GEAR's teacher pass and divergence do not support.

One training process that sees several GPUs loads the model with TRL's default `device_map="auto"`, which spreads
its layers over all of them; vanilla TRL trains such a model (its fused LM head moves the backbone's states to the
head's device). GEAR's teacher pass, divergence and credit assume one device: the shared-prefix cache's key/value
copies, the student and teacher states, the LM head and the batch's masks would sit on different GPUs, and the first
operation mixing two of them fails part way into the first step. `check_single_device` refuses such a model before
training, with the reason and the fix.
"""

from __future__ import annotations

import torch

from ..plugins import UserInputError


def model_devices(model) -> list[str]:
    """The distinct devices of a model's `hf_device_map` (transformers sets it when loading with `device_map`),
    normalized ("0", 0 and "cuda:0" are one device), in order of first appearance; [] without a map."""
    device_map = getattr(model, "hf_device_map", None) or {}
    devices: list[str] = []
    for where in device_map.values():
        if isinstance(where, int) or (isinstance(where, str) and where.isdigit()):
            name = f"cuda:{int(where)}"
        else:
            name = str(torch.device(where)) if where != "disk" else "disk"
        if name == "cuda":
            name = "cuda:0"
        if name not in devices:
            devices.append(name)
    return devices


def check_single_device(model, credit: str) -> None:
    """Refuse a model whose `device_map` places it on several devices (GPUs, or CPU / disk offload) when `credit`
    runs GEAR's teacher."""
    devices = model_devices(model)
    if len(devices) <= 1:
        return
    raise UserInputError(
        f"The model is split over {len(devices)} devices ({', '.join(devices)}): one training process sees several "
        'GPUs, and the model was loaded with `device_map` (TRL\'s default "auto" for one process). '
        f"`credit: {credit}` runs GEAR's teacher pass and divergence on one device only. Train on one GPU: "
        "`CUDA_VISIBLE_DEVICES=0`, or `accelerate launch --gpu_ids 0` (accelerate_configs/single_gpu.yaml names GPU "
        "0); or on all of them with one process each (accelerate_configs/ddp.yaml, zero2.yaml, zero3.yaml)."
    )
