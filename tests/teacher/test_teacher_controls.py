"""The teacher controls of every recipe: a few rows every `teacher_control_steps` generation batches run through the
teacher without a reference (`gear/kl_floor`) and with another row's (`gear/kl_wrong_over_right`)."""

from __future__ import annotations

import copy

import pytest
import torch

from tests.utils import make_trainer, math_rows, tiny_args, weighted

pytestmark = pytest.mark.slow


def generate(trainer, seed=123, prompt=None, truth="keep"):
    """One generation batch: the dataloader's first, or `prompt` (a `math_rows` index) repeated per generation, its
    ground truth replaced by `truth` unless "keep"."""
    rows = next(iter(trainer.get_train_dataloader()))
    if prompt is not None:
        rows = [dict(math_rows()[prompt]) for _ in rows]
    if truth != "keep":
        rows = [{**row, "ground_truth": truth} for row in rows]
    torch.manual_seed(seed)
    trainer.model.train()
    return trainer._generate_and_score_completions(copy.deepcopy(rows))


def counting(trainer):
    calls = []
    real = trainer._backbone_states

    def count(*args, **kwargs):
        calls.append(args[0].shape[0])
        return real(*args, **kwargs)

    trainer._backbone_states = count
    return calls


def test_controls_give_the_noise_floor_and_the_wrong_reference_ratio(tmp_path):
    args = tiny_args(tmp_path, teacher_control_steps=2, teacher_control_rows=2)
    trainer = make_trainer(tmp_path, args=args)
    # The first generation batch of every 2 is not due: no control rows, no extra forwards.
    calls = counting(trainer)
    batch = generate(trainer, seed=7, prompt=3)
    assert batch["gear_control_kl"].isnan().all()
    plain = len(calls)
    weighted(trainer, batch)
    metrics = trainer._metrics["train"]
    assert metrics["gear/kl_wrong_over_right"][-1] != metrics["gear/kl_wrong_over_right"][-1]  # NaN
    assert metrics["gear/kl_floor"][-1] != metrics["gear/kl_floor"][-1]
    calls.clear()
    batch = generate(trainer, prompt=5)  # the second is: its one prompt's wrong reference is the first batch's answer
    assert len(calls) == plain + 2  # the rows' student forward, one teacher forward of 2 x 2 rows
    control = batch["gear_control_kl"]
    assert control.shape == (batch["completion_ids"].size(0), 3)
    rows = (~control[:, 0].isnan()).nonzero().flatten().tolist()
    assert len(rows) == 2
    # The live teacher shown the student's own prompt is the student: the floor is 0 up to rounding.
    assert control[rows, 0].abs().max() < 1e-4
    # Another row's answer moves the teacher (math_rows' answers differ from row to row).
    assert (control[rows, 1] > 0).all()
    own = trainer.compute_credit(copy.deepcopy(batch))
    mask = own.mask.float()
    expected = control[rows, 1].sum() / (own.kl * mask).sum(dim=1)[rows].sum()
    weighted(trainer, batch)
    torch.testing.assert_close(torch.tensor(metrics["gear/kl_wrong_over_right"][-1]), expected, rtol=1e-4, atol=0)
    assert abs(metrics["gear/kl_floor"][-1]) < 1e-4  # every row has a truth: the floor is the control rows'
    # ... and so is its largest KL: the control rows' own, not the sentinel of a step without reference-less rows
    assert metrics["gear/kl_floor_max"][-1] == control[rows, 2].max().item()
    assert 0 <= metrics["gear/kl_floor_max"][-1] < 1e-4


def test_controls_make_the_same_forwards_whatever_the_rows_hold(tmp_path):
    """Ranks must stay in lockstep: a batch without ground truths (or with one answer for all) runs the same
    control forwards as one whose rows all differ."""
    made = []
    for truth in ("keep", None, "7"):
        args = tiny_args(tmp_path, teacher_control_steps=1, teacher_control_rows=3, teacher_prefix_sharing=False)
        trainer = make_trainer(tmp_path, args=args)
        calls = counting(trainer)
        batch = generate(trainer, truth=truth)
        made.append(calls)
        control = batch["gear_control_kl"]
        assert (~control[:, 0].isnan()).sum() == 3
        # one prompt, one answer, nothing remembered yet: no wrong reference to show (and none without a truth)
        assert control[:, 1].isnan().all()
    assert made[0] == made[1] == made[2]


def test_control_options_are_checked():
    from gear_trl import GEARConfig

    for bad in (-1, 1.5):
        with pytest.raises(ValueError, match="teacher_control_steps"):
            GEARConfig(output_dir="unused", use_cpu=True, report_to="none", teacher_control_steps=bad)
