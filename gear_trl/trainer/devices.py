"""A model split over several devices (`device_map`), which GEAR's teacher pass and divergence do not support.

One training process that sees several GPUs loads the model with TRL's default `device_map="auto"`, which spreads
its layers over all of them; vanilla TRL trains such a model (its fused LM head moves the backbone's states to the
head's device). GEAR's teacher pass, divergence and credit assume one device: the shared-prefix cache's key/value
copies, the student and teacher states, the LM head and the batch's masks would sit on different GPUs, and the first
operation mixing two of them fails part way into the first step. `check_planned_devices` refuses, before the model
loads, the settings under which the load will split it for certain (one process, several visible GPUs, a balancing
`device_map`); `check_single_device` refuses any split model once loaded (CPU or disk offload of a model too large
for its GPU can only be known then), before training, with the reason and the fix.
"""

from __future__ import annotations

import torch

from ..inputs.errors import UserInputError


def model_devices(model) -> list[str]:
    """The distinct devices of a model's `hf_device_map` (transformers sets it when loading with `device_map`),
    normalized ("0", 0 and "cuda:0" are one device), in order of first appearance; [] without a map."""
    device_map = getattr(model, "hf_device_map", None) or {}
    devices: list[str] = []
    for where in device_map.values():
        name = _device_name(where)
        if name not in devices:
            devices.append(name)
    return devices


# `device_map` values under which transformers spreads a model over every visible GPU whatever its size
BALANCING_MAPS = ("auto", "balanced", "balanced_low_0")


def _device_name(where) -> str:
    if isinstance(where, int) or (isinstance(where, str) and where.isdigit()):
        return f"cuda:{int(where)}"
    name = str(torch.device(where)) if where != "disk" else "disk"
    return "cuda:0" if name == "cuda" else name


def _split_message(devices: list[str], credit: str, why: str) -> str:
    return (
        f"The model {why} {len(devices)} devices ({', '.join(devices)}): one training process sees several GPUs, "
        'and the model is loaded with `device_map` (TRL\'s default "auto" for one process). '
        f"`credit: {credit}` runs GEAR's teacher pass and divergence on one device only. Train on one GPU: "
        "`CUDA_VISIBLE_DEVICES=0`, or `accelerate launch --gpu_ids 0` (accelerate_configs/single_gpu.yaml names GPU "
        "0); or on all of them with one process each (accelerate_configs/ddp.yaml, zero2.yaml, zero3.yaml)."
    )


def check_planned_devices(
    model_init_kwargs: dict | None, credit: str, distributed: bool, device_type: str, num_gpus: int
) -> None:
    """Refuse, before the model loads, settings under which TRL's load splits the model over several devices.

    `distributed`: several processes (DDP, DeepSpeed), where TRL loads with `device_map=None`; `device_type`: the
    training device's type ("cuda", "cpu", ...), which sets TRL's default map ("auto" on an accelerator, None on CPU);
    `num_gpus`: the GPUs this process sees. A map given as a dict is split when it names several devices; a balancing
    map ("auto", "balanced", "balanced_low_0") splits whenever there are several GPUs.
    """
    if distributed:
        return
    kwargs = model_init_kwargs or {}
    device_map = kwargs.get("device_map", None if device_type in ("cpu", "mps") else "auto")
    if isinstance(device_map, dict):
        devices = list(dict.fromkeys(_device_name(where) for where in device_map.values()))
        if len(devices) > 1:
            raise UserInputError(_split_message(devices, credit, "would be split by `device_map` over"))
    elif device_map in BALANCING_MAPS and num_gpus > 1:
        devices = [f"cuda:{i}" for i in range(num_gpus)]
        raise UserInputError(_split_message(devices, credit, f"would be spread by `device_map={device_map!r}` over"))


def check_single_device(model, credit: str) -> None:
    """Refuse a model whose `device_map` places it on several devices (GPUs, or CPU / disk offload) when `credit`
    runs GEAR's teacher."""
    devices = model_devices(model)
    if len(devices) <= 1:
        return
    raise UserInputError(_split_message(devices, credit, "is split over"))
