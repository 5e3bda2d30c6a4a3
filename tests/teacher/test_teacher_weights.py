"""Teachers other than the live policy: `teacher: base` under full fine-tuning and `teacher: ema` (gear_trl/teacher/weights.py)."""

from __future__ import annotations

import copy

import pytest
import torch
from transformers import AutoModelForCausalLM

from gear_trl.teacher.kinds import teacher_kind
from gear_trl.teacher.weights import TEACHER_STATE_FILE, ema_masters, ema_update_

EMA_ADAPTER = teacher_kind("ema").adapter
from tests.utils import TINY, make_trainer, tiny_args

pytestmark = pytest.mark.slow
LORA = {"r": 4, "lora_alpha": 8, "target_modules": ["q_proj", "v_proj"]}


def test_ema_update_by_hand():
    teacher, student = torch.tensor([1.0, 2.0, -4.0]), torch.tensor([3.0, 2.0, 0.0])
    ema_update_([(teacher, student)], 0.25)  # 0.75 * t + 0.25 * s
    assert teacher.tolist() == [1.5, 2.0, -3.0] and student.tolist() == [3.0, 2.0, 0.0]
    ema_update_([(teacher, student)], 1.0)
    assert teacher.tolist() == student.tolist()
    with pytest.raises(RuntimeError, match="partitioned unlike"):
        ema_update_([(torch.zeros(2), torch.zeros(3))], 0.5)


def snapshot(named):
    return {name: p.detach().clone() for name, p in named}


def test_base_teacher_under_full_finetuning_is_a_frozen_copy_of_the_initial_model(tmp_path):
    model = AutoModelForCausalLM.from_pretrained(TINY)
    initial = copy.deepcopy(model)
    trainer = make_trainer(tmp_path, args=tiny_args(tmp_path, teacher="base", max_steps=1), model=model)
    teacher = trainer.teacher.model
    assert teacher is not None and teacher is not trainer.model
    assert not any(p.requires_grad for p in teacher.parameters())
    trainer.train()
    student = dict(trainer.model.named_parameters())
    for name, param in initial.named_parameters():
        assert torch.equal(dict(teacher.named_parameters())[name], param), name
    assert any(not torch.equal(student[n], p) for n, p in initial.named_parameters()), "the student trained"
    # The teacher pass reads the frozen copy's backbone: its states are the initial model's.
    ids = torch.tensor([[5, 6, 7, 8, 9]])
    with trainer.teacher.weights():
        states = trainer._backbone_states(ids, torch.ones_like(ids))
    torch.testing.assert_close(states, initial.model(input_ids=ids).last_hidden_state)
    assert not torch.allclose(states, trainer._backbone_states(ids, torch.ones_like(ids)))


def test_base_teacher_shares_trls_reference_model_when_beta_is_positive(tmp_path):
    trainer = make_trainer(tmp_path, args=tiny_args(tmp_path, teacher="base", beta=0.04))
    assert trainer.ref_model is not None and trainer.teacher.model is trainer.ref_model


def test_ema_teacher_under_full_finetuning_averages_after_each_step_and_resumes(tmp_path):
    model = AutoModelForCausalLM.from_pretrained(TINY)
    theta0 = snapshot(model.named_parameters())
    args = tiny_args(tmp_path, teacher="ema", teacher_ema_decay=0.25, max_steps=1, save_strategy="steps", save_steps=1)
    trainer = make_trainer(tmp_path, args=args, model=model)
    trainer.train()
    theta1 = snapshot(trainer.model.named_parameters())
    teacher = dict(trainer.teacher.model.named_parameters())
    changed = 0
    for name, before in theta0.items():
        torch.testing.assert_close(teacher[name], 0.75 * before + 0.25 * theta1[name])
        changed += not torch.equal(before, theta1[name])
    assert changed
    # Saved with the checkpoint, restored on resume (a fresh trainer starts its teacher at the initial weights).
    from safetensors.torch import load_file

    saved = load_file(tmp_path / "out" / "checkpoint-1" / TEACHER_STATE_FILE)
    assert all(torch.equal(saved[name], teacher[name]) for name in theta0)
    fresh = make_trainer(tmp_path, args=args, model=AutoModelForCausalLM.from_pretrained(TINY))
    assert all(torch.equal(dict(fresh.teacher.model.named_parameters())[n], p) for n, p in theta0.items())
    fresh.args.max_steps = 2
    fresh.train(resume_from_checkpoint=str(tmp_path / "out" / "checkpoint-1"))  # runs step 2
    assert fresh.state.global_step == 2
    theta2 = dict(fresh.model.named_parameters())
    restored = dict(fresh.teacher.model.named_parameters())
    for name in theta0:  # the average went on from the saved teacher, not from the initial weights
        torch.testing.assert_close(restored[name], 0.75 * saved[name] + 0.25 * theta2[name])


def test_ema_teacher_under_peft_averages_the_adapter_only(tmp_path):
    from peft import LoraConfig

    args = tiny_args(tmp_path, teacher="ema", teacher_ema_decay=0.5, max_steps=1)
    trainer = make_trainer(tmp_path, args=args, peft_config=LoraConfig(**LORA, init_lora_weights=False))
    assert trainer.teacher.model is None and EMA_ADAPTER in trainer.model.peft_config
    named = dict(trainer.model.named_parameters())
    ema = {n: p for n, p in named.items() if f".{EMA_ADAPTER}." in n}
    assert ema and not any(p.requires_grad for p in ema.values())
    trained = {n: p for n, p in named.items() if p.requires_grad}
    assert trained and all(".default." in n for n in trained)
    before = snapshot(trained.items())
    torch.testing.assert_close(  # the average starts at the initial adapter
        ema[next(iter(trained)).replace(".default.", f".{EMA_ADAPTER}.")], before[next(iter(trained))]
    )
    frozen = snapshot((n, p) for n, p in named.items() if "lora" not in n)
    trainer.train()
    named = dict(trainer.model.named_parameters())
    for name, old in before.items():
        twin = named[name.replace(".default.", f".{EMA_ADAPTER}.")]
        torch.testing.assert_close(twin, 0.5 * old + 0.5 * named[name])
    assert all(torch.equal(named[n], p) for n, p in frozen.items()), "base weights are not averaged (nor trained)"
    # The teacher pass reads the averaged adapter.
    ids = torch.tensor([[5, 6, 7, 8, 9]])
    live = trainer._backbone_states(ids, torch.ones_like(ids))
    trainer.args.credit_report_steps = 0
    from trl.trainer.utils import use_adapter

    with use_adapter(trainer.model, EMA_ADAPTER):
        averaged = trainer._backbone_states(ids, torch.ones_like(ids))
    assert not torch.allclose(live, averaged)


def test_teacher_options_are_checked_before_the_model_loads():
    from gear_trl import GEARConfig

    def make(**kwargs):
        return GEARConfig(output_dir="unused", use_cpu=True, bf16=False, report_to="none", **kwargs)

    assert make(teacher="ema").teacher_ema_decay == 0.05
    for bad in (0.0, 1.5):
        with pytest.raises(ValueError, match="teacher_ema_decay"):
            make(teacher="ema", teacher_ema_decay=bad)
    with pytest.raises(ValueError, match="sync_ref_model"):
        make(teacher="base", beta=0.04, sync_ref_model=True)


def test_a_checkpoint_with_a_cut_teacher_file_is_not_resumable(tmp_path):
    import shutil

    from gear_trl.trainer.checkpoints import checkpoint_problem

    args = tiny_args(tmp_path, teacher="ema", max_steps=1, save_strategy="steps", save_steps=1)
    make_trainer(tmp_path, args=args).train()
    checkpoint = tmp_path / "out" / "checkpoint-1"
    assert (checkpoint / TEACHER_STATE_FILE).is_file() and checkpoint_problem(str(checkpoint)) is None
    cut = tmp_path / "cut" / "checkpoint-1"
    shutil.copytree(checkpoint, cut)
    data = (cut / TEACHER_STATE_FILE).read_bytes()
    (cut / TEACHER_STATE_FILE).write_bytes(data[: len(data) // 2])
    assert TEACHER_STATE_FILE in checkpoint_problem(str(cut))


def bf16_walk(steps: int, size: int = 4096):
    """A student held in bfloat16 (as DeepSpeed or a bf16 model holds it) that an optimizer moves by small steps, and
    the exact (float64) EMA at rate 0.05 of what it held after each step."""
    gen = torch.Generator().manual_seed(0)
    theta = 0.02 * torch.randn(size, generator=gen)
    exact, trained = theta.double(), theta.double()
    students = []
    for _ in range(steps):
        trained = trained + 2e-5 * torch.randn(size, generator=gen).double()
        students.append(trained.bfloat16())
        exact = exact.lerp(students[-1].double(), 0.05)
    return theta.bfloat16(), students, exact


def test_ema_of_bfloat16_weights_follows_the_float64_average():
    start, students, exact = bf16_walk(300)
    teacher = start.clone()
    masters = ema_masters([teacher])
    assert masters[0].dtype == torch.float32 and ema_masters([torch.zeros(2)]) == [None]
    for student in students:
        ema_update_([(teacher, student)], 0.05, masters)
    assert teacher.dtype == torch.bfloat16
    moved = (exact - start.double()).norm()
    # Left: rounding the float32 average to bfloat16 once (~9% of the movement). Averaged in bfloat16 the teacher is
    # 82% of the movement off and 70% of its entries never move (each step's change rounds away).
    assert (teacher.double() - exact).norm() / moved < 0.12
    assert (teacher == start).float().mean() < 0.15


def test_bfloat16_ema_teacher_keeps_a_float32_average_through_save_and_resume(tmp_path):
    model = AutoModelForCausalLM.from_pretrained(TINY, dtype=torch.bfloat16)
    args = tiny_args(tmp_path, teacher="ema", teacher_ema_decay=0.05, max_steps=1)
    trainer = make_trainer(tmp_path, args=args, model=model)
    name = "model.layers.0.mlp.down_proj.weight"
    student, teacher = (
        dict(trainer.model.named_parameters())[name],
        dict(trainer.teacher.model.named_parameters())[name],
    )
    start, students, exact = bf16_walk(300, student.numel())
    with torch.no_grad():
        teacher.copy_(start.view_as(teacher))
        for value in students:
            student.copy_(value.view_as(student))
            trainer.teacher.update_ema()
    moved = (exact - start.double()).norm()
    assert (teacher.double().flatten() - exact).norm() / moved < 0.12
    # The checkpoint holds the float32 average, and a resumed teacher goes on from it, not from its bfloat16 rounding.
    trainer.teacher.save(str(tmp_path / "ckpt"))
    from safetensors.torch import load_file

    saved = load_file(tmp_path / "ckpt" / TEACHER_STATE_FILE)[name]
    assert saved.dtype == torch.float32
    torch.testing.assert_close(saved.double().flatten(), exact, atol=1e-6, rtol=1e-4)
    fresh = make_trainer(tmp_path, args=args, model=AutoModelForCausalLM.from_pretrained(TINY, dtype=torch.bfloat16))
    fresh.teacher.restore(str(tmp_path / "ckpt"))
    assert torch.equal(fresh.teacher._ema_masters[name], saved)
    assert torch.equal(dict(fresh.teacher.model.named_parameters())[name], saved.bfloat16())


def test_frozen_copy_under_zero3_on_a_gpu_loads_the_recipes_model_without_a_device_map(tmp_path, monkeypatch):
    """On a GPU, TRL's loader defaults `device_map` to "auto", which transformers refuses under ZeRO-3; the teacher
    must also be the recipe's model (revision, cache, remote code), as TRL's reference model is."""
    import transformers
    import trl.models
    import trl.trainer.utils as trl_utils

    trainer = make_trainer(tmp_path, args=tiny_args(tmp_path, max_steps=1))  # live: no copy made yet
    loaded = copy.deepcopy(trainer.model)
    trainer.args.model_init_kwargs = {"revision": "0123abc", "cache_dir": str(tmp_path / "cache")}
    trainer.args.trust_remote_code = True
    seen = {}

    def from_pretrained(cls, path, **kwargs):
        seen.update(kwargs, path=path)
        if kwargs.get("device_map") is not None:  # transformers' own check under ZeRO-3
            raise ValueError("DeepSpeed Zero-3 is not compatible with passing a `device_map`.")
        return loaded

    class OnGPU:
        device = torch.device("cuda", 0)

    monkeypatch.setattr(trl_utils, "PartialState", OnGPU)
    monkeypatch.setattr(transformers.integrations, "is_deepspeed_zero3_enabled", lambda: True)
    monkeypatch.setattr(transformers.Qwen3ForCausalLM, "from_pretrained", classmethod(from_pretrained))
    monkeypatch.setattr(trl.models, "prepare_deepspeed", lambda model, accelerator: model)
    monkeypatch.setattr(trainer, "is_deepspeed_enabled", True)
    copied = trainer.teacher.frozen_copy()
    assert seen["device_map"] is None
    assert seen["revision"] == "0123abc" and seen["cache_dir"] == str(tmp_path / "cache")
    assert seen["trust_remote_code"] is True
    assert seen["dtype"] == trainer.model.dtype and seen["attn_implementation"] == "sdpa"
    assert copied is loaded and not any(p.requires_grad for p in copied.parameters())


def test_ema_teacher_file_is_written_on_each_node_with_save_on_each_node(tmp_path, monkeypatch):
    """Rank 1 as the main process of the second node (no filesystem shared with rank 0): with `save_on_each_node` the
    Trainer writes its checkpoint there, and so must the teacher, or resuming on that node finds no teacher file."""
    from gear_trl import GEARConfig

    args = tiny_args(tmp_path, teacher="ema", max_steps=1, save_on_each_node=True)
    trainer = make_trainer(tmp_path, args=args)
    monkeypatch.setattr(GEARConfig, "process_index", property(lambda self: 1))
    monkeypatch.setattr(GEARConfig, "local_process_index", property(lambda self: 0))
    monkeypatch.setattr(type(trainer.accelerator), "is_main_process", property(lambda self: False))
    monkeypatch.setattr(type(trainer.accelerator), "process_index", property(lambda self: 1))
    node = tmp_path / "node1" / "checkpoint-1"
    trainer.teacher.save(str(node))
    assert (node / TEACHER_STATE_FILE).is_file()
    with torch.no_grad():
        for param in trainer.teacher.model.parameters():
            param.add_(1.0)
    trainer.teacher.restore(str(node))  # resumes on rank 1 from its own node's copy
    student = dict(trainer.model.named_parameters())
    assert all(torch.equal(p, student[n]) for n, p in trainer.teacher.model.named_parameters())
    # Without `save_on_each_node` only the global main process writes (the Trainer's own rule).
    monkeypatch.setattr(trainer.args, "save_on_each_node", False)
    trainer.teacher.save(str(tmp_path / "shared" / "checkpoint-1"))
    assert not (tmp_path / "shared" / "checkpoint-1" / TEACHER_STATE_FILE).exists()
