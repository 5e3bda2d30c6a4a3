"""`teacher: periodic`: a frozen copy of the trained weights re-synced from the policy every `teacher_sync_steps`
optimizer steps (RLSD's published setup), and RLSD's lambda warmup."""

from __future__ import annotations

import pytest
import torch
from transformers import AutoModelForCausalLM

from gear_trl import GEARConfig
from gear_trl.credit import rlsd_lambda
from gear_trl.teacher.kinds import teacher_kind
from gear_trl.teacher.weights import TEACHER_STATE_FILE

PERIODIC_ADAPTER = teacher_kind("periodic").adapter
from tests.utils import TINY, make_trainer, tiny_args


def snapshot(named):
    return {name: p.detach().clone() for name, p in named}


def test_rlsd_lambda_warms_up_then_decays_as_rlsds_trainer_schedules_it():
    assert [rlsd_lambda(0.5, s, None, 4) for s in (0, 1, 2, 4, 100)] == [0.0, 0.125, 0.25, 0.5, 0.5]
    # the decay starts after the warmup: 4 warmup steps, then 0.5 -> 0 over 10
    assert rlsd_lambda(0.5, 9, 10, 4) == pytest.approx(0.25) and rlsd_lambda(0.5, 14, 10, 4) == 0.0
    # RLSD's published script: no warmup, decay over 60 steps
    assert rlsd_lambda(0.5, 30, 60, 0) == pytest.approx(0.25) and rlsd_lambda(0.5, 60, 60) == 0.0


def test_periodic_options_are_checked_before_the_model_loads():
    def make(**kwargs):
        return GEARConfig(output_dir="unused", use_cpu=True, bf16=False, report_to="none", **kwargs)

    assert make(teacher="periodic").teacher_sync_steps == 20
    for bad in (0, -1, 2.5):
        with pytest.raises(ValueError, match="teacher_sync_steps"):
            make(teacher="periodic", teacher_sync_steps=bad)
    with pytest.raises(ValueError, match="rlsd_lambda_warmup_steps"):
        make(credit="rlsd", rlsd_lambda_warmup_steps=0)


@pytest.mark.slow
def test_periodic_teacher_under_full_finetuning_resyncs_every_n_steps_and_resumes(tmp_path):
    model = AutoModelForCausalLM.from_pretrained(TINY)
    theta0 = snapshot(model.named_parameters())
    args = tiny_args(
        tmp_path, teacher="periodic", teacher_sync_steps=2, max_steps=3, save_strategy="steps", save_steps=1
    )
    trainer = make_trainer(tmp_path, args=args, model=model)
    teachers = []
    from transformers import TrainerCallback

    class Watch(TrainerCallback):  # after TeacherWeightsCallback: the teacher each step ends with
        def on_step_end(self, args, state, control, **kwargs):
            teachers.append(
                (snapshot(trainer.model.named_parameters()), snapshot(trainer.teacher.model.named_parameters()))
            )

    trainer.add_callback(Watch())
    trainer.train()
    (_, t1), (theta2, t2), (theta3, t3) = teachers
    # each re-sync is logged: the steps that re-synced and the step whose policy the teacher holds
    logged = [entry for entry in trainer.state.log_history if "gear/teacher_resync" in entry]
    assert [(e["step"], e["gear/teacher_resync"], e["gear/teacher_synced_at"]) for e in logged] == [
        (1, 0.0, 0.0),
        (2, 1.0, 2.0),
        (3, 0.0, 2.0),
    ]
    assert all(torch.equal(t1[n], p) for n, p in theta0.items()), "steps 1-2 read the initial policy"
    assert all(torch.equal(t2[n], p) for n, p in theta2.items()), "synced after step 2"
    assert all(torch.equal(t3[n], p) for n, p in theta2.items()), "step 3 still reads step 2's policy"
    assert any(not torch.equal(theta3[n], p) for n, p in theta2.items()), "the student trained on"
    # Every checkpoint holds the teacher it had; a resume from step 3 reads step 2's weights, not the initial ones.
    from safetensors.torch import load_file

    saved = load_file(tmp_path / "out" / "checkpoint-3" / TEACHER_STATE_FILE)
    assert all(torch.equal(saved[n], p) for n, p in theta2.items())
    fresh = make_trainer(tmp_path, args=args, model=AutoModelForCausalLM.from_pretrained(TINY))
    fresh.teacher.restore(str(tmp_path / "out" / "checkpoint-3"))
    assert all(torch.equal(p, theta2[n]) for n, p in fresh.teacher.model.named_parameters())
    fresh.args.max_steps = 4
    fresh.train(resume_from_checkpoint=str(tmp_path / "out" / "checkpoint-3"))  # step 4 syncs again
    assert [e["gear/teacher_synced_at"] for e in fresh.state.log_history if "gear/teacher_resync" in e][-1] == 4.0
    theta4 = dict(fresh.model.named_parameters())
    assert all(torch.equal(p, theta4[n]) for n, p in fresh.teacher.model.named_parameters())
    # The teacher pass reads the copy.
    ids = torch.tensor([[5, 6, 7, 8, 9]])
    with fresh.teacher.weights():
        states = fresh._backbone_states(ids, torch.ones_like(ids))
    torch.testing.assert_close(states, fresh._backbone_states(ids, torch.ones_like(ids)))


@pytest.mark.slow
def test_periodic_teacher_under_peft_syncs_the_adapter_only(tmp_path):
    from peft import LoraConfig

    args = tiny_args(tmp_path, teacher="periodic", teacher_sync_steps=2, max_steps=1)
    lora = LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], init_lora_weights=False)
    trainer = make_trainer(tmp_path, args=args, peft_config=lora)
    assert trainer.teacher.model is None and PERIODIC_ADAPTER in trainer.model.peft_config
    named = dict(trainer.model.named_parameters())
    copy = {n: p for n, p in named.items() if f".{PERIODIC_ADAPTER}." in n}
    assert copy and not any(p.requires_grad for p in copy.values())
    trained = {n: p for n, p in named.items() if p.requires_grad}
    initial = snapshot(trained.items())
    frozen = snapshot((n, p) for n, p in named.items() if "lora" not in n)
    trainer.train()  # step 1 of 2: no sync yet
    twin = {n: named[n.replace(".default.", f".{PERIODIC_ADAPTER}.")] for n in trained}
    assert all(torch.equal(twin[n], initial[n]) for n in trained)
    assert any(not torch.equal(trained[n], initial[n]) for n in trained)
    trainer.teacher.after_optimizer_step(2)
    assert all(torch.equal(twin[n], trained[n]) for n in trained)
    assert all(torch.equal(named[n], p) for n, p in frozen.items()), "base weights are neither trained nor synced"
    ids = torch.tensor([[5, 6, 7, 8, 9]])
    live = trainer._backbone_states(ids, torch.ones_like(ids))
    with trainer.teacher.weights():
        torch.testing.assert_close(trainer._backbone_states(ids, torch.ones_like(ids)), live)
