"""Hidden states GEAR holds on to own exactly their storage: no slice pins a whole [b, prompt + completion, H]."""

import copy

import pytest
import torch

import gear_trl.trainer.gear_trainer as trainer_module
from gear_trl.trainer.gear_trainer import completion_states
from tests.utils import make_trainer, tiny_args


def owns_its_storage(tensor: torch.Tensor) -> bool:
    return tensor.untyped_storage().nbytes() == tensor.numel() * tensor.element_size()


@pytest.mark.parametrize("rows", [1, 3])  # one row: the slice is contiguous, yet it still shares the whole storage
def test_completion_states_by_hand(rows):
    hidden = torch.arange(rows * 5 * 2, dtype=torch.float32).view(rows, 5, 2)
    sliced = hidden[:, -3:-1]
    assert not owns_its_storage(sliced)  # what the trainer used to keep
    kept = completion_states(hidden, 2)
    # positions 2 and 3 predict tokens 3 and 4, the last two
    assert torch.equal(kept, hidden[:, 2:4])
    assert kept.shape == (rows, 2, 2) and kept.is_contiguous()
    assert owns_its_storage(kept)
    hidden.zero_()
    assert kept.abs().sum() > 0  # a copy, not a view


@pytest.mark.slow
def test_student_and_teacher_passes_keep_only_completion_states(tmp_path, monkeypatch):
    """With `steps_per_generation: 2` GRPO runs its own no-grad student pass over 8 rollouts in 2 chunks of 4, and the
    full teacher pass runs 2 chunks: every state either keeps must own its storage."""
    kept = []

    def spy(hidden, keep):
        states = completion_states(hidden, keep)
        kept.append((hidden.shape, states))
        return states

    monkeypatch.setattr(trainer_module, "completion_states", spy)
    args = tiny_args(tmp_path, steps_per_generation=2, teacher_prefix_sharing=False)
    trainer = make_trainer(tmp_path, args=args)
    assert trainer._grpo_runs_student_pass()
    rows = next(iter(trainer.get_train_dataloader()))
    torch.manual_seed(0)
    trainer.model.train()
    batch = trainer._generate_and_score_completions(copy.deepcopy(rows))
    length = batch["completion_ids"].size(1)
    assert len(kept) == 4, [shape for shape, _ in kept]  # 2 student chunks, 2 teacher chunks
    for full_shape, states in kept:
        assert full_shape[1] > length + 1  # the backbone ran prompt + completion ...
        assert states.shape == (4, length, full_shape[2])  # ... and only the completion's states are kept
        assert owns_its_storage(states)
