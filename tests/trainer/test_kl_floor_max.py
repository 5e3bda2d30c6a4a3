"""`gear/kl_floor_max` beside `gear/kl_floor`: the largest KL of the rows without a reference (their teacher prompt is
the student's, so any KL they get is numerical noise), which `onset_min_kl` must stay above. A hand-worked batch."""

import math

import torch

from gear_trl.trainer.gear_trainer import CreditTrace
from tests.utils import make_trainer


def trace(kl, mask, has_truth):
    zeros = torch.zeros_like(kl)
    return CreditTrace(
        completion_ids=torch.zeros(kl.shape, dtype=torch.long),
        mask=mask,
        kl=kl,
        entropy=zeros,
        signal=zeros,
        segment_ids=torch.full(kl.shape, -1),
        weights=mask.float(),
        advantages=zeros,
        has_ground_truth=has_truth,
        below_floor=torch.zeros(kl.shape[0], dtype=torch.bool),
    )


def test_kl_floor_max_is_the_largest_kl_of_rows_without_a_reference(tmp_path):
    trainer = make_trainer(tmp_path)
    kl = torch.tensor(
        [
            [0.5, 0.2, 0.0],  # a reference: not noise
            [4e-4, 9e-4, 0.0],  # no reference: its largest KL is 9e-4
            [2e-4, 1e-4, 3.0],  # no reference, its largest masked KL 2e-4 (3.0 is off the mask)
        ]
    )
    mask = torch.tensor([[1, 1, 0], [1, 1, 0], [1, 1, 0]], dtype=torch.bool)
    has_truth = torch.tensor([True, False, False])
    n = torch.zeros(3, dtype=torch.bool)
    trainer._log_gear_metrics("train", trace(kl, mask, has_truth), n, n)
    metrics = trainer._metrics["train"]
    assert metrics["gear/kl_floor"][-1] == torch.tensor((4e-4 + 9e-4 + 2e-4 + 1e-4) / 4).item()  # the mean ...
    assert metrics["gear/kl_floor_max"][-1] == torch.tensor(9e-4).item()  # ... and the largest
    assert metrics["gear/kl_max"][-1] == torch.tensor(0.5).item()

    # every row has a reference: NaN, as gear/kl_floor
    trainer._log_gear_metrics("train", trace(kl, mask, torch.ones(3, dtype=torch.bool)), n, n)
    assert math.isnan(metrics["gear/kl_floor_max"][-1]) and math.isnan(metrics["gear/kl_floor"][-1])


def test_kl_floor_max_takes_the_control_rows_largest_kl(tmp_path):
    """A step whose every row has a reference gets its floor from the control rows (the teacher shown the student's
    prompt, `teacher_control_steps`): their largest KL is the step's `gear/kl_floor_max`, not a sentinel."""
    trainer = make_trainer(tmp_path)
    kl = torch.tensor([[0.5, 0.2, 0.0], [0.1, 0.3, 0.0]])
    mask = torch.tensor([[1, 1, 0], [1, 1, 0]], dtype=torch.bool)
    nan = float("nan")
    # control columns: no-reference KL sum, wrong-reference KL sum, no-reference largest KL
    control = torch.tensor([[3e-4, 0.9, 2e-4], [nan, nan, nan]])
    n = torch.zeros(2, dtype=torch.bool)
    trainer._log_gear_metrics("train", trace(kl, mask, torch.ones(2, dtype=torch.bool)), n, n, control)
    metrics = trainer._metrics["train"]
    assert metrics["gear/kl_floor"][-1] == torch.tensor(3e-4 / 2).item()  # the control row's 2 tokens
    assert metrics["gear/kl_floor_max"][-1] == torch.tensor(2e-4).item()

    # a reference-less row and a control row: the larger of the two rows' largest
    control = torch.tensor([[3e-4, nan, 5e-4], [nan, nan, nan]])
    kl = torch.tensor([[0.5, 0.2, 0.0], [1e-4, 4e-4, 0.0]])
    trainer._log_gear_metrics("train", trace(kl, mask, torch.tensor([True, False])), n, n, control)
    assert metrics["gear/kl_floor_max"][-1] == torch.tensor(5e-4).item()
