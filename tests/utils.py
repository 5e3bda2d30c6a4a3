"""Helpers shared by the trainer tests."""

import torch


def weighted(trainer, batch):
    """The batch as the loss sees it: with num_iterations=1 GEAR's weights are computed inside the loss's forward
    (the student's hidden states are read from it), so run the loss once."""
    if "gear_teacher_hidden" in batch:
        trainer.current_gradient_accumulation_steps = 1
        with torch.no_grad():
            trainer.compute_loss(trainer.model, batch)
    return batch
