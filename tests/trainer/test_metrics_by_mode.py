"""Each `gear/` metric is logged only where it means something (issue 54, item 6): RLSD, whose per-token signal is a
signed log-ratio without segments, logs no KL, floor or segment metric (`gear/log_ratio_mean` instead); the sibling
teacher logs no wrong-reference ratio and no `no_ground_truth_frac`; and docs/metrics.md's table says so."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import torch

from gear_trl.credit.modes import credit_mode
from gear_trl.trainer.gear_trainer import GEARTrainer
from tests.utils import digit_share, make_trainer, tiny_args, weighted

METRICS_PAGE = Path(__file__).resolve().parents[2] / "docs" / "metrics.md"


def logged(tmp_path, **overrides) -> set[str]:
    trainer = make_trainer(tmp_path, args=tiny_args(tmp_path, **overrides), reward_funcs=[digit_share])
    rows = next(iter(trainer.get_train_dataloader()))
    torch.manual_seed(0)
    trainer.model.train()
    weighted(trainer, trainer._generate_and_score_completions(copy.deepcopy(rows)))
    return {name for name in trainer._metrics["train"] if name.startswith("gear/")}


@pytest.mark.parametrize(
    ("overrides", "absent", "present"),
    [
        ({"credit": "gear"}, set(), {"gear/kl_mean", "gear/onset_rate", "gear/kl_wrong_over_right"}),
        ({"credit": "rlsd"}, set(credit_mode("rlsd").unlogged), {"gear/log_ratio_mean", "gear/rlsd_clip_frac"}),
        (
            {"credit": "none", "distillation_weight": 0.25},
            set(credit_mode("none").unlogged),
            {"gear/kl_mean", "gear/distill_share", "gear/weight_std", "gear/kl_failed_over_passed"},
        ),
        (
            {"credit": "gear", "teacher_reference": "sibling"},
            set(GEARTrainer.SIBLING_UNLOGGED),
            {"gear/no_sibling_frac"},
        ),
    ],
)
def test_metrics_logged_by_mode_and_teacher(tmp_path, overrides, absent, present):
    names = logged(tmp_path, **overrides)
    assert present <= names, present - names
    assert not {f"gear/{name}" for name in absent} & names
    if overrides == {"credit": "gear"}:  # what the others leave out, GEAR logs
        assert {f"gear/{n}" for n in (*credit_mode("rlsd").unlogged, *GEARTrainer.SIBLING_UNLOGGED)} <= names


def test_the_metrics_page_tabulates_what_each_mode_leaves_out():
    page = METRICS_PAGE.read_text()
    section = page[page.index("### Which metrics each mode logs") :]
    table = section[: section.index("\n\n", section.index("|"))]
    for name in credit_mode("rlsd").unlogged:
        row = next(line for line in table.splitlines() if f"`gear/{name}`" in line)
        assert "rlsd: not logged" in row, row
    for name in GEARTrainer.SIBLING_UNLOGGED:
        row = next(line for line in table.splitlines() if f"`gear/{name}`" in line)
        assert "sibling: not logged" in row, row
    for name in credit_mode("none").unlogged:
        row = next(line for line in table.splitlines() if f"`gear/{name}`" in line)
        assert "none/gigpo with distillation: not logged" in row, row
