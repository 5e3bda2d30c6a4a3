"""Issue 73: `distillation_gate`, `distillation_bound`, `distillation_clip` and the back-off, as the configuration
checks them and as a real step applies them; with every new option at its default the blend is bitwise what it was."""

from __future__ import annotations

import pytest
import torch

from gear_trl import GEARConfig
from gear_trl.credit import distill_advantages
from tests.utils import make_trainer, tiny_args


def config(**kw):
    return GEARConfig(output_dir="/tmp/x", use_cpu=True, bf16=False, report_to="none", **kw)


def test_the_new_options_default_to_the_old_blend():
    c = config(credit="none", distillation_weight=0.5)
    assert (c.distillation_gate, c.distillation_bound, c.distillation_clip, c.distillation_backoff) == (
        "none", None, None, False)  # fmt: skip


@pytest.mark.parametrize(
    "kw,match",
    [
        ({"distillation_weight": 0.5, "distillation_gate": "mix"}, r"`distillation_gate` must be one of"),
        ({"distillation_weight": 0.5, "distillation_bound": 0}, r"`distillation_bound` must be a positive"),
        ({"distillation_weight": 0.5, "distillation_clip": -0.2}, r"`distillation_clip` must be a positive"),
        ({"distillation_weight": 0.5, "distillation_clip": float("inf")}, r"`distillation_clip` must be a positive"),
        ({"distillation_weight": 0.5, "distillation_backoff_floor": 0}, r"`distillation_backoff_floor` must be in"),
        (
            {"distillation_weight": 0.2, "distillation_backoff": True, "distillation_backoff_floor": 0.3},
            r"above `distillation_weight: 0.2`",
        ),
        # settings that would do nothing are refused, as `distillation_signal: agreement` with weight 0 is
        ({"distillation_gate": "mixed"}, r"`distillation_gate: mixed` shapes the distillation term.*which is 0"),
        (
            {"distillation_bound": 1.0, "distillation_backoff": True},
            r"`distillation_bound: 1.0`, `distillation_backoff: True` shape the distillation term",
        ),
    ],
)
def test_bad_values_and_idle_settings_are_refused_naming_the_field(kw, match):
    with pytest.raises(ValueError, match=match):
        config(credit="none", **kw)


def test_every_problem_is_named_at_once():
    with pytest.raises(ValueError) as err:
        config(credit="none", distillation_weight=0.5, distillation_gate="x", distillation_clip=0)
    assert "`distillation_gate`" in str(err.value) and "`distillation_clip`" in str(err.value)


def test_a_fixed_or_ema_distillation_teacher_is_the_teacher_option():
    """The distillation term reads the one teacher pass, whose weights `teacher` chooses: with `credit: none` it is
    the distillation teacher alone (frozen at the start: `base`; an average of the policy: `ema`)."""
    for kind in ("base", "ema", "periodic"):
        c = config(credit="none", distillation_weight=0.5, teacher=kind, distillation_gate="mixed")
        assert c.uses_teacher and c.teacher == kind


# -- a real step on the tiny model ------------------------------------------------------------------------------------


def two_groups(prompts, completions, **kwargs):
    """Groups of 2: the first rollouts' group all passed (no outcome signal), the second's mixed."""
    return [[1.0, 1.0, 0.0, 1.0][i % 4] for i in range(len(completions))]


def step(tmp_path, **kw):
    from tests.trainer.test_trainer import first_batch, generate

    args = tiny_args(tmp_path, credit="none", num_generations=2, distillation_weight=0.5, **kw)
    trainer = make_trainer(tmp_path, args=args, reward_funcs=[two_groups])
    batch = generate(trainer, first_batch(trainer))
    return trainer, batch, trainer.compute_credit(dict(batch))


@pytest.mark.slow
def test_defaults_give_bitwise_the_blend_of_before(tmp_path):
    """With every new option at its default the loss's advantages are exactly the blend computed before issue 73:
    distill_advantages(A, delta, mask, w, rows with a teacher and a score), no extra batch key, no gather."""
    trainer, batch, trace = step(tmp_path)
    assert "gear_group_signal" not in batch and "gear_group_scale" not in batch
    before = distill_advantages(trace.advantages, trace.log_ratio, trace.mask, 0.5,
                                trace.has_ground_truth & batch["gear_scorable"])  # fmt: skip
    assert torch.equal(trace.distilled, before)
    assert trace.dense is trace.log_ratio  # the term itself, not a copy
    assert trainer.distillation_monitor is not None  # on whenever distillation is


@pytest.mark.slow
def test_the_mixed_gate_leaves_a_group_without_outcome_signal_alone(tmp_path):
    _, batch, trace = step(tmp_path, distillation_gate="mixed")
    assert batch["gear_group_signal"].tolist() == [False, False, True, True]
    assert trace.distill_rows.tolist() == [False, False, True, True]
    mask = trace.mask
    assert (trace.distilled[:2][mask[:2]] == 0).all()  # GRPO's 0, left alone
    assert (trace.log_ratio[:2][mask[:2]] != 0).any()  # which the plain blend would have moved
    torch.testing.assert_close(trace.distilled, distill_advantages(trace.advantages, trace.log_ratio, mask, 0.5,
                                                                   trace.distill_rows))  # fmt: skip


@pytest.mark.slow
def test_the_failed_gate_distils_the_failed_rows_of_mixed_groups_only(tmp_path):
    _, _, trace = step(tmp_path, distillation_gate="failed")
    assert trace.distill_rows.tolist() == [False, False, True, False]  # row 2 failed (reward 0) in a mixed group


@pytest.mark.slow
def test_the_bound_holds_the_weighted_term_under_the_groups_advantage_scale(tmp_path):
    _, batch, trace = step(tmp_path, distillation_bound=0.5, distillation_clip=5.0)
    scale = batch["gear_group_scale"]
    # group 1 all passed: scale 0, no distillation; group 2: GRPO's |A| of a 1-vs-0 pair, the same on both rows
    assert scale[:2].tolist() == [0.0, 0.0] and scale[2] == scale[3] > 0
    mask = trace.mask
    term = 0.5 * trace.dense
    assert (term[mask].abs() <= (0.5 * scale[:, None].expand_as(mask))[mask] + 1e-6).all()
    assert (trace.dense[:2][mask[:2]] == 0).all()


@pytest.mark.slow
def test_the_monitors_metrics_are_logged_with_the_rest(tmp_path):
    args = tiny_args(tmp_path, credit="none", num_generations=2, distillation_weight=0.5, distillation_gate="mixed")
    trainer = make_trainer(tmp_path, args=args, reward_funcs=[two_groups])
    trainer.train()
    logged = [entry for entry in trainer.state.log_history if "gear/distill_weight" in entry]
    assert len(logged) == 2 and all(entry["gear/distill_weight"] == 0.5 for entry in logged)
    assert all(entry["gear/collapse_warning"] == 0.0 for entry in logged)
    assert len(trainer.distillation_monitor.reward) == 2  # it read both steps' rewards
    plain = make_trainer(tmp_path, args=tiny_args(tmp_path, credit="none"))
    assert plain.distillation_monitor is None


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["base", "ema"])
def test_grpo_plus_distillation_from_a_fixed_or_averaged_teacher_trains(tmp_path, kind):
    """`credit: none` with `teacher: base` (frozen at the start) or `ema`: the distillation term reads a teacher model
    of its own, not the live policy; after two steps the policy has moved and the base teacher has not."""
    args = tiny_args(tmp_path, credit="none", num_generations=2, distillation_weight=0.5, teacher=kind,
                     distillation_gate="mixed")  # fmt: skip
    trainer = make_trainer(tmp_path, args=args, reward_funcs=[two_groups])
    teacher = trainer.teacher.model
    assert teacher is not None and teacher is not trainer.model
    start = {n: p.detach().clone() for n, p in teacher.named_parameters()}
    trainer.train()
    moved = any(not torch.equal(p, trainer.teacher.model.get_parameter(n)) for n, p in start.items())
    policy = dict(trainer.model.named_parameters())
    assert any(not torch.equal(start[n], policy[n].detach()) for n in start if n in policy)  # the policy trained
    assert moved == (kind == "ema")  # base stays the initial policy; ema follows it
