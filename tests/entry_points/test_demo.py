"""A 20-step GEAR run of the test recipe (recipes/tiny/config_math.yaml: the random tiny model on data/math). What
`make demo-tools` runs (recipes/tiny/config_calc_tools.yaml for 20 steps, then the start and the result scored on the same
held-out problems) is checked in tests/entry_points/test_demo_summary.py; its figures are measured, not tested (README).

The random tiny model and never earns the accuracy reward, so every advantage would be 0 and
every weight 1; a reward it does vary on (the share of digits it writes) is added, as in the trainer tests, so the
run shows credit assignment at work: onsets found and weights that are not all 1.
"""

import pytest

from gear_trl import GEARTrainer
from gear_trl.rewards import get_reward_funcs
from gear_trl.train import load_splits, parse_args
from tests.utils import digit_share

pytestmark = pytest.mark.slow


def test_twenty_step_tiny_run_logs_nontrivial_gear_metrics(tmp_path):
    script_args, args, model_args = parse_args(
        ["--config", "recipes/tiny/config_math.yaml", "--output_dir", str(tmp_path), "--save_strategy", "no"]
    )
    train, _ = load_splits(script_args, args)
    trainer = GEARTrainer(
        model=model_args.model_name_or_path,
        reward_funcs=[*get_reward_funcs(script_args.reward_funcs), digit_share],
        args=args,
        train_dataset=train,
    )
    trainer.train()
    assert trainer.state.global_step == 20
    logs = [entry for entry in trainer.state.log_history if "gear/weight_std" in entry]
    assert len(logs) == 20, "gear/ metrics are logged at every logging step"
    assert all(entry["gear/kl_mean"] > 0 for entry in logs)
    assert all(entry["gear/onset_rate"] > 0 for entry in logs), "segment onsets must be found"
    assert max(entry["gear/weight_std"] for entry in logs) > 0.01, "weights must not all be 1"
    assert min(entry["gear/weight_min"] for entry in logs) < 1.0 < max(entry["gear/weight_max"] for entry in logs)
    assert all(abs(entry["gear/weight_mean"] - 1.0) < 1e-3 for entry in logs), "mean-preserving weights"
