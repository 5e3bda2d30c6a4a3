"""Every reward source goes through one guard, the environments' own `get_reward` included, and completions no
source scored are counted and warned about instead of training at loss 0 in silence (issue 54, item 4)."""

from __future__ import annotations

import copy
import logging
import math
import warnings

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from gear_trl import GEARTrainer
from tests.utils import TINY, math_rows, tiny_args


class NanEnv:
    """An environment owning its reward, which is NaN: nothing for the model to call."""

    def reset(self, **row):
        return None

    def get_reward(self) -> float:
        return math.nan


def nothing(completions, **kwargs):
    """A reward function that scores nothing."""
    return [None] * len(completions)


def half(completions, **kwargs):
    """Scores the first half of the batch only."""
    return [1.0 if i < len(completions) // 2 else None for i in range(len(completions))]


def _trainer(tmp_path, reward_funcs, **kwargs):
    return GEARTrainer(
        model=AutoModelForCausalLM.from_pretrained(TINY),
        reward_funcs=reward_funcs,
        args=tiny_args(tmp_path, credit="none"),
        train_dataset=math_rows(),
        processing_class=AutoTokenizer.from_pretrained(TINY),
        **kwargs,
    )


def _score(trainer):
    rows = next(iter(trainer.get_train_dataloader()))
    torch.manual_seed(0)
    trainer.model.train()
    return trainer._generate_and_score_completions(copy.deepcopy(rows))


def test_an_environments_nan_reward_is_guarded_and_an_unscored_step_is_reported(tmp_path, caplog):
    trainer = _trainer(tmp_path, [nothing], environment_factory=NanEnv)
    assert trainer.reward_func_names == ["nothing", "NanEnv"]
    with warnings.catch_warnings(record=True) as caught, caplog.at_level(logging.WARNING):
        warnings.simplefilter("always")
        batch = _score(trainer)
    metrics = trainer._metrics["train"]
    # the environment's NaN is counted under its own name, as a reward function's is
    assert metrics["rewards/NanEnv/non_finite_frac"] == [1.0]
    assert any("Reward function 'NanEnv' returned 4 non-finite" in str(w.message) for w in caught)
    # and the step in which nothing was scored says so, instead of a silent loss 0
    assert metrics["rewards/unscorable_frac"] == [1.0]
    assert "No reward source (nothing, NanEnv) returned a usable value" in caplog.text
    assert torch.all(batch["advantages"] == 0)


def test_partly_unscored_batches_are_counted_and_warned_about_once(tmp_path, caplog):
    trainer = _trainer(tmp_path, [half])
    with caplog.at_level(logging.WARNING, logger="gear_trl.trainer.gear_trainer"):
        _score(trainer)
        _score(trainer)
    assert trainer._metrics["train"]["rewards/unscorable_frac"] == [0.5, 0.5]
    assert caplog.text.count("got no usable value (None or non-finite) from any reward source (half)") == 1
