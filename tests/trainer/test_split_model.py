"""A model split over several devices (one process that sees several GPUs, `device_map="auto"`) is refused before
training when GEAR's teacher runs: its teacher pass, divergence and credit mix devices part way into the first step.
The check reads the model's `hf_device_map`, so it runs here without two GPUs (the map is set by hand; the two-GPU
reproduction is in docs/development.md)."""

from pathlib import Path

import pytest
import yaml
from transformers import AutoModelForCausalLM

from gear_trl.inputs.errors import UserInputError
from gear_trl.trainer.devices import check_planned_devices, check_single_device, model_devices
from tests.utils import TINY, make_trainer, tiny_args

# what `device_map="auto"` gives the tiny model on two GPUs (its embedding and layer 0 on one, the rest on the other)
SPLIT = {"model.embed_tokens": 0, "model.layers.0": 0, "model.layers.1": 1, "model.norm": 1, "lm_head": 1}


def split_model(device_map=SPLIT):
    model = AutoModelForCausalLM.from_pretrained(TINY)
    model.hf_device_map = dict(device_map)
    return model


@pytest.mark.parametrize(
    ("device_map", "devices"),
    [
        (None, []),
        ({"": 0}, ["cuda:0"]),
        ({"model": "cuda:0", "lm_head": 0}, ["cuda:0"]),  # one GPU, named two ways
        ({"model": "cuda", "lm_head": "0"}, ["cuda:0"]),
        (SPLIT, ["cuda:0", "cuda:1"]),
        ({"model": 0, "lm_head": "cpu"}, ["cuda:0", "cpu"]),  # CPU offload mixes devices too
        ({"model.layers": 0, "model.norm": "disk"}, ["cuda:0", "disk"]),
    ],
)
def test_model_devices(device_map, devices):
    model = split_model(device_map) if device_map is not None else AutoModelForCausalLM.from_pretrained(TINY)
    assert model_devices(model) == devices


def test_a_split_model_is_refused_before_training(tmp_path):
    with pytest.raises(UserInputError, match=r"split over 2 devices \(cuda:0, cuda:1\).*credit: gear.*--gpu_ids 0"):
        make_trainer(tmp_path, model=split_model())


def test_a_split_model_trains_without_the_teacher(tmp_path):
    trainer = make_trainer(tmp_path, model=split_model(), args=tiny_args(tmp_path, credit="none"))
    assert model_devices(trainer.model) == ["cuda:0", "cuda:1"]  # vanilla TRL trains it; GEAR does not object
    check_single_device(AutoModelForCausalLM.from_pretrained(TINY), "gear")  # one device: no error


def test_single_gpu_config_names_one_gpu():
    config = yaml.safe_load((Path(__file__).parents[2] / "accelerate_configs/single_gpu.yaml").read_text())
    assert config["num_processes"] == 1
    assert str(config["gpu_ids"]) == "0"  # accelerate then sets CUDA_VISIBLE_DEVICES=0: TRL sees one GPU


@pytest.mark.parametrize(
    ("kwargs", "distributed", "device_type", "num_gpus", "refused"),
    [
        ({}, False, "cuda", 2, r"spread by `device_map='auto'` over 2 devices \(cuda:0, cuda:1\)"),  # TRL's default
        ({"device_map": "balanced"}, False, "cuda", 3, r"over 3 devices \(cuda:0, cuda:1, cuda:2\)"),
        ({"device_map": {"model": 0, "lm_head": "cpu"}}, False, "cuda", 1, r"split by `device_map` over 2 devices"),
        ({}, False, "cuda", 1, None),  # one GPU: "auto" keeps a model that fits on it
        ({}, True, "cuda", 8, None),  # DDP / DeepSpeed: TRL loads with device_map=None, one GPU per process
        ({}, False, "cpu", 2, None),  # use_cpu: TRL's default map is None
        ({"device_map": {"": 0}}, False, "cuda", 2, None),
        ({"device_map": "sequential"}, False, "cuda", 2, None),  # fills GPU 0 first: known only once loaded
    ],
)
def test_a_split_is_refused_before_the_model_loads(kwargs, distributed, device_type, num_gpus, refused):
    if refused is None:
        check_planned_devices(kwargs, "gear", distributed, device_type, num_gpus)
    else:
        with pytest.raises(UserInputError, match=refused + r".*credit: gear.*--gpu_ids 0"):
            check_planned_devices(kwargs, "gear", distributed, device_type, num_gpus)


def test_preflight_refuses_a_two_gpu_single_process_run_with_the_teacher(tmp_path, monkeypatch):
    """Through the training entry point's preflight (no model, no data loaded): the same recipe passes under
    `credit: none`, which vanilla TRL trains split."""
    import torch

    from gear_trl.train import preflight
    from tests.entry_points.test_cli import args_for

    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    script_args, training_args, model_args = args_for(tmp_path, "--credit", "gear")
    real = type(training_args).device.fget  # still run: it sets up the process state preflight reads
    monkeypatch.setattr(type(training_args), "device", property(lambda self: (real(self), torch.device("cuda"))[1]))
    with pytest.raises(UserInputError, match=r"spread by `device_map='auto'` over 2 devices"):
        preflight(script_args, training_args, model_args)
    script_args, training_args, model_args = args_for(tmp_path, "--credit", "none")
    preflight(script_args, training_args, model_args)
