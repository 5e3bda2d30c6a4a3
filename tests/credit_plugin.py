"""A user's own credit mode, named by import path in tests (`credit: tests.credit_plugin:LAST_TOKEN`)."""

from __future__ import annotations

import torch

from gear_trl.credit import CreditInputs, CreditMode, CreditOutputs


def last_token(inputs: CreditInputs) -> CreditOutputs:
    """All of a completion's credit on its last model token: weight = the number of model tokens there, 0 elsewhere
    (mean 1 over the model tokens)."""
    mask = inputs.mask.bool()
    last = mask.long().cumsum(dim=1) == mask.long().sum(dim=1, keepdim=True)
    weights = (last & mask).float() * mask.float().sum(dim=1, keepdim=True)
    return CreditOutputs(torch.zeros_like(weights), torch.full_like(mask, -1, dtype=torch.long), weights)


LAST_TOKEN = CreditMode("last-token", last_token, summary="All credit on the last model token.")
NOT_A_MODE = last_token
