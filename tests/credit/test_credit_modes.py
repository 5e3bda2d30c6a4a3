"""The credit-mode registry (gear_trl/credit/modes.py): records read by the configuration and the trainer, a new mode
added by one record and one function, and GRPO plus self-distillation (`credit: none` with `distillation_weight`)."""

from __future__ import annotations

import copy
from types import SimpleNamespace

import pytest
import torch
from transformers import AutoModelForCausalLM

from gear_trl import GEARConfig
from gear_trl.credit import assign_credit, distill_advantages, distillation_share, modes
from gear_trl.credit.divergence import SIGNED_LOG_RATIO
from gear_trl.credit.modes import (
    CreditInputs,
    CreditMode,
    Distillation,
    DistillationTerm,
    credit_mode,
    register_credit_mode,
)
from gear_trl.teacher.kinds import TeacherKind, register_teacher_kind, teacher_kind
from tests.utils import TINY, make_trainer, tiny_args


def inputs(kl, base, mask=None, **config):
    kl = torch.tensor(kl, dtype=torch.float32)
    mask = torch.ones_like(kl, dtype=torch.bool) if mask is None else torch.tensor(mask)
    defaults = {"rlsd_lambda": 0.5, "rlsd_eps": 0.2, "rlsd_lambda_decay_steps": None, "rlsd_lambda_warmup_steps": None,
                    "rlsd_negative_only": False}  # fmt: skip
    return CreditInputs(
        kl=kl,
        entropy=torch.zeros_like(kl),
        log_ratio=None,
        mask=mask,
        base=torch.tensor(base, dtype=torch.float32),
        options=SimpleNamespace(**{**defaults, **config}),
    )


def test_uniform_credit_is_one_on_model_tokens_and_nothing_else():
    out = modes.uniform(inputs([[0.3, 0.1, 0.0]], [1.0], mask=[[True, True, False]]))
    assert out.weights.tolist() == [[1.0, 1.0, 0.0]]
    assert out.segment_ids.tolist() == [[-1, -1, -1]] and out.signal.abs().sum() == 0 and out.advantages is None


def test_rlsd_credit_by_hand_with_its_own_metrics():
    """kl holds log pS - log pT, so delta = -kl. Row 0 passed (A = +1), row 1 failed (A = -1); lam 0.5, eps 0.2:
    w = 0.5 + 0.5 * clip(exp(sign(A) * delta), 0.8, 1.2)."""
    out = modes.rlsd(inputs([[-1.0, 0.0, 0.1], [-1.0, 0.0, 0.1]], [1.0, -1.0]))
    # row 0: delta = (1, 0, -0.1): exp = (2.718 -> 1.2, 1, 0.905); row 1: exp(-delta) = (0.368 -> 0.8, 1, 1.105)
    expected = [[0.5 + 0.6, 1.0, 0.5 + 0.5 * 0.904837], [0.5 + 0.4, 1.0, 0.5 + 0.5 * 1.105171]]
    torch.testing.assert_close(out.weights, torch.tensor(expected), atol=1e-5, rtol=0)
    torch.testing.assert_close(out.signal, torch.tensor([[1.0, 0.0, -0.1], [1.0, 0.0, -0.1]]))
    assert out.stats["rlsd_lambda"] == (0.5, 1.0)
    clipped, tokens = out.stats["rlsd_clip_frac"]
    assert (clipped.item(), tokens.item()) == (2.0, 6.0)  # the first token of each row sits at a bound


def test_records_are_what_the_configuration_reads():
    assert credit_mode("gear").onsets and credit_mode("gear").prefix_weights
    assert credit_mode("gear-gigpo").per_step and not credit_mode("gear-gigpo").prefix_weights
    assert not credit_mode("none").teacher and not credit_mode("gigpo").teacher
    assert credit_mode("rlsd").signal == "log_ratio" and "onset_rate" in credit_mode("rlsd").unlogged
    assert GEARConfig(output_dir="/tmp/x", use_cpu=True, credit="rlsd").divergence_signal == SIGNED_LOG_RATIO
    for bad in ("my_mode", "My-Mode", "gear+x", "-x"):
        with pytest.raises(ValueError, match="lower case words joined by hyphens"):
            register_credit_mode(CreditMode(bad, modes.uniform))
    with pytest.raises(ValueError, match="already registered"):
        register_credit_mode(CreditMode("gear", modes.uniform))
    with pytest.raises(ValueError, match="onsets but no segmenter"):
        register_credit_mode(CreditMode("x-onsets", modes.uniform, onsets=True))


def test_teacher_kinds_are_records_too():
    assert teacher_kind("ema").adapter == "ema" and teacher_kind("ema").saves_weights
    assert teacher_kind("base").weights == "initial" and teacher_kind("base").adapter is None
    assert teacher_kind("periodic").options == ("teacher_sync_steps",)
    with pytest.raises(ValueError, match="a `follow` function goes with `weights: following`"):
        register_teacher_kind(TeacherKind("still", "following"))


def test_a_users_mode_is_named_by_import_path():
    args = GEARConfig(output_dir="/tmp/x", use_cpu=True, credit="tests.credit_plugin:LAST_TOKEN")
    try:
        assert args.credit_mode.name == "last-token" and args.uses_teacher and not args.credit_mode.onsets
        assert credit_mode("last-token") is args.credit_mode  # registered under its own name at first use
        with pytest.raises(ValueError, match="not a `gear_trl.credit.CreditMode` record"):
            GEARConfig(output_dir="/tmp/x", use_cpu=True, credit="tests.credit_plugin:NOT_A_MODE")
        with pytest.raises(ValueError, match="cannot import module 'tests.no_such_module'"):
            GEARConfig(output_dir="/tmp/x", use_cpu=True, credit="tests.no_such_module:MODE")
    finally:
        modes._REGISTRY.pop("last-token", None)


@pytest.mark.slow
def test_a_new_credit_mode_is_one_record_and_one_function(tmp_path):
    """A mode that puts all of a completion's credit on its last model token (tests/credit_plugin.py: one function,
    one record), registered and trained with: the configuration accepts it, the trainer uses its weights, and the
    documentation table lists it."""
    from tests.credit_plugin import last_token
    from tests.trainer.test_trainer import first_batch, generate

    register_credit_mode(CreditMode("last-token", last_token, summary="All credit on the last model token."))
    try:
        trainer = make_trainer(tmp_path, args=tiny_args(tmp_path, credit="last-token"))
        batch = generate(trainer, first_batch(trainer))
        trace = trainer.compute_credit(dict(batch))
        mask = trace.mask.bool()
        lengths = mask.sum(dim=1)
        for row in range(mask.size(0)):
            if lengths[row] == 0:
                continue
            last = mask[row].nonzero().max()
            assert trace.weights[row, last] == lengths[row]
            assert trace.weights[row][mask[row]].sum() == lengths[row]
        base = batch["gear_base_advantages"]
        torch.testing.assert_close(trace.advantages, base[:, None] * trace.weights)
        assert "`last-token`" in modes.modes_table()
        trainer.train()  # and it trains
        assert trainer.state.global_step == 2
    finally:
        modes._REGISTRY.pop("last-token")


def test_distillation_weight_is_refused_under_a_mode_whose_term_does_not_read_it():
    register_credit_mode(CreditMode("no-term", modes.uniform, distillation=None))
    register_credit_mode(
        CreditMode("own-term", modes.uniform, distillation=Distillation(lambda *a: None, ("normalize",)))
    )
    try:
        for name, why in (("no-term", "has no distillation term"), ("own-term", "does not read it")):
            GEARConfig(output_dir="/tmp/x", use_cpu=True, credit=name)  # at 0 it is fine
            with pytest.raises(ValueError, match=f"does nothing under `credit: {name}`, whose .*{why}"):
                GEARConfig(output_dir="/tmp/x", use_cpu=True, credit=name, distillation_weight=0.5)
    finally:
        modes._REGISTRY.pop("no-term")
        modes._REGISTRY.pop("own-term")


def pull_toward_teacher(inputs: CreditInputs, advantages, rows) -> DistillationTerm:
    """A distillation-like term of a mode's own: minus the divergence, weight 0.25 on the rows offered."""
    return DistillationTerm(dense=-inputs.kl.float(), rows=rows, weight=0.25)


def test_assign_credit_blends_a_modes_own_term_by_hand():
    """Two rows, one with a teacher: `none`'s weights 1, the fallback on row 1, then the mode's own term
    (1 - 0.25) * A + 0.25 * (-kl) on row 0's model tokens only (row 1 has no teacher; token 2 of row 0 is padding)."""
    seen = {}

    def term(inputs, advantages, rows):
        seen["options"] = vars(inputs.options)
        return pull_toward_teacher(inputs, advantages, rows)

    mode = CreditMode("by-hand", modes.uniform, distillation=Distillation(term, options=("weight_alpha",)))
    settings = SimpleNamespace(weight_alpha=2.0, onset_min_kl=0.0, rlsd_eps=0.2)
    kl = torch.tensor([[0.4, 0.8, 0.0], [1.0, 1.0, 1.0]])
    trace = assign_credit(
        mode,
        settings,
        CreditInputs(kl=kl, entropy=torch.zeros_like(kl), log_ratio=None,
                     mask=torch.tensor([[True, True, False], [True, True, True]]), base=torch.tensor([1.0, -1.0])),
        has_truth=torch.tensor([True, False]),
    )  # fmt: skip
    assert seen["options"] == {"weight_alpha": 2.0}  # only what the term declared, not the whole settings
    assert trace.weights.tolist() == [[1.0, 1.0, 0.0], [1.0, 1.0, 1.0]]
    torch.testing.assert_close(trace.distilled, torch.tensor([[0.75 - 0.1, 0.75 - 0.2, 0.0], [-1.0, -1.0, -1.0]]))
    assert trace.distill_rows.tolist() == [True, False]
    with pytest.raises(AttributeError, match="'onset_min_kl' was not declared"):
        _ = modes.declared_options(("weight_alpha",), settings).onset_min_kl


def test_a_mode_with_its_own_distillation_term_is_one_record(tmp_path):
    """A mode with a distillation-like term of its own (one record: a function and a `Distillation`): its compute
    receives only its declared options, the term only its own, and the loss's advantages are the term's blend."""
    from tests.credit_plugin import last_token
    from tests.trainer.test_trainer import first_batch, generate

    received = []

    def compute(inputs):
        received.append(set(vars(inputs.options)))
        return last_token(inputs)

    def term(inputs, advantages, rows):
        received.append(set(vars(inputs.options)))
        received.append(inputs.group_signal)
        return pull_toward_teacher(inputs, advantages, rows)

    def groups(options):  # what the term reads of each row's group: asked of the trainer through its record
        received.append(set(vars(options)))
        return ("group_signal",)

    pull = Distillation(term, ("normalize",), groups=groups)
    register_credit_mode(CreditMode("last-token-pull", compute, reads=("weight_alpha",), distillation=pull))
    try:
        # `distillation_weight` stays 0: the term, its weight and its group inputs are the mode's own
        trainer = make_trainer(tmp_path, args=tiny_args(tmp_path, credit="last-token-pull"))
        batch = generate(trainer, first_batch(trainer))
        assert received[0] == {"normalize"}  # `groups` read the term's options only
        received.clear()
        trace = trainer.compute_credit(dict(batch))
        assert received[:3] == [{"weight_alpha"}, {"normalize"}, batch["gear_group_signal"]]
        signal = batch["gear_group_signal"]
        assert signal.dtype == torch.bool and signal.shape == batch["gear_has_truth"].shape
        rows = batch["gear_has_truth"] & batch["gear_scorable"]
        assert torch.equal(trace.distill_rows, rows) and rows.any()
        mask = trace.mask.bool()
        want = distill_advantages(trace.advantages, -trace.kl, mask, 0.25, rows)
        torch.testing.assert_close(trace.distilled, want)
        assert not torch.allclose(trace.distilled, trace.advantages)
        divergence = trainer._divergence(dict(batch), trainer._student_hidden_pass(dict(batch)))
        torch.testing.assert_close(trainer._gear_advantages(dict(batch), divergence, "eval"), want)
        # its share of the loss's advantage mass is logged with the term's own weight (0.25), not distillation_weight
        mass, total = distillation_share(trace.advantages, -trace.kl, mask, 0.25, rows).tolist()
        assert trainer._metrics["eval"]["gear/distill_share"][-1] == pytest.approx(mass / total) and mass > 0
        trainer.train()
        assert trainer.state.global_step == 2
        logged = [entry["gear/distill_share"] for entry in trainer.state.log_history if "loss" in entry]
        assert len(logged) == 2 and all(share > 0 for share in logged)
    finally:
        modes._REGISTRY.pop("last-token-pull")


def sdpo_settings(**options):
    return SimpleNamespace(**{"distillation_weight": 0.5, "distillation_signal": "log_ratio",
                              "distillation_gate": "none", "distillation_clip": None, "distillation_bound": None,
                              **options})  # fmt: skip


def group_batches(advantages_per_rank, rewards, group_size, gather):
    from gear_trl.credit import GroupBatch

    return [
        GroupBatch(mask=torch.ones(len(a), 3, dtype=torch.bool), advantages=torch.tensor(a), rewards_per_func=rewards,
                   reward_weights=torch.tensor([1.0]), group_size=group_size, rank=rank, gather=gather)
        for rank, a in enumerate(advantages_per_rank)
    ]  # fmt: skip


def test_group_credit_gives_sdpos_gate_and_bound_their_group_inputs_across_ranks():
    """Two ranks of two rows, groups of 2: rows (0, 1, 2, 3) of the whole batch with rewards (1, 1, 1, 0), so the
    first group (rows 0 and 1, rank 0's) has no outcome signal and the second (rank 1's) has; rank-local GRPO
    advantages (0, 0) and (0.5, -0.5), so the groups' mean |A| are 0 and 0.5. The gather hands back every rank's
    |A| in rank order, as accelerate's does."""
    from gear_trl.credit import group_credit

    every = torch.tensor([0.0, 0.0, 0.5, 0.5])  # what the gather of every rank's |A| returns
    gathered = []

    def gather(rows):
        gathered.append(rows.clone())
        return every

    rewards = torch.tensor([[1.0], [1.0], [1.0], [0.0]])
    batches = group_batches([[0.0, 0.0], [0.5, -0.5]], rewards, 2, gather)
    settings = sdpo_settings(distillation_gate="mixed", distillation_bound=0.5)
    rank0, rank1 = (group_credit(credit_mode("none"), settings, b) for b in batches)
    assert rank0.group_signal.tolist() == [False, False] and rank1.group_signal.tolist() == [True, True]
    assert rank0.group_scale.tolist() == [0.0, 0.0] and rank1.group_scale.tolist() == [0.5, 0.5]
    assert [g.tolist() for g in gathered] == [[0.0, 0.0], [0.5, 0.5]]  # each rank sent its rows' |A|
    assert rank0.advantages is None and rank0.metrics == {}  # `none` keeps GRPO's advantages


def test_group_credit_makes_no_gather_a_configuration_does_not_ask_for():
    from gear_trl.credit import group_credit

    def gather(rows):
        raise AssertionError("no gather without distillation_bound")

    batch = group_batches([[0.5, -0.5]], torch.tensor([[1.0], [0.0]]), 2, gather)[0]
    for settings in (sdpo_settings(distillation_weight=0.0, distillation_bound=0.5), sdpo_settings()):
        out = group_credit(credit_mode("gear"), settings, batch)
        assert out.group_signal is None and out.group_scale is None
    asks_wrong = CreditMode(
        "asks-wrong", modes.uniform, distillation=Distillation(pull_toward_teacher, groups=lambda o: ("group_mean",))
    )
    with pytest.raises(ValueError, match="may ask for"):
        group_credit(asks_wrong, sdpo_settings(), batch)


@pytest.mark.slow
def test_grpo_plus_distillation_computes_gears_loss_with_every_weight_one(tmp_path):
    """`credit: none` with `distillation_weight: 0.25` runs the teacher pass and blends, and its loss is that of
    `credit: gear` with `weight_lambda: 0` (every GEAR weight 1) on the same batch; plain GRPO's loss differs."""
    from tests.trainer.test_trainer import first_batch, generate, loss_and_grads

    model = AutoModelForCausalLM.from_pretrained(TINY)
    arms = {
        "grpo+sd": {"credit": "none", "distillation_weight": 0.25},
        "gear-flat+sd": {"credit": "gear", "weight_lambda": 0.0, "distillation_weight": 0.25},
        "grpo": {"credit": "none"},
    }
    trainers = {
        k: make_trainer(tmp_path, args=tiny_args(tmp_path, **v), model=copy.deepcopy(model)) for k, v in arms.items()
    }
    rows = first_batch(trainers["grpo"])
    batches = {k: generate(t, rows) for k, t in trainers.items()}
    assert torch.equal(batches["grpo+sd"]["completion_ids"], batches["grpo"]["completion_ids"])
    assert "gear_teacher_hidden" in batches["grpo+sd"] and "gear_teacher_hidden" not in batches["grpo"]
    losses = {k: loss_and_grads(trainers[k], batches[k]) for k in arms}
    (sd_loss, sd_grads), (flat_loss, flat_grads) = losses["grpo+sd"], losses["gear-flat+sd"]
    torch.testing.assert_close(sd_loss, flat_loss, atol=1e-6, rtol=1e-5)
    for name in sd_grads:
        torch.testing.assert_close(sd_grads[name], flat_grads[name], atol=1e-6, rtol=1e-5)
    assert not torch.allclose(sd_loss, losses["grpo"][0], atol=1e-6), "the distillation must change the loss"
    metrics = trainers["grpo+sd"]._metrics["train"]
    assert metrics["gear/weight_std"][-1] == 0.0 and metrics["gear/distill_share"][-1] > 0
    card = "\n".join(trainers["grpo+sd"]._credit_card_lines())
    assert "- credit: `none`" in card and "- distillation_weight: `0.25`" in card


@pytest.mark.slow
def test_grpo_plus_agreement_blends_the_normalized_teacher_probability(tmp_path):
    """`credit: none`, `distillation_weight: 0.5`, `distillation_signal: agreement`: the loss's advantages are
    0.5 * A + 0.5 * agreement_advantages(pT(y), sum_v pS pT) on rows with a teacher, computed here from the two
    passes' materialized logits."""
    from gear_trl.credit import agreement_advantages
    from tests.trainer.test_trainer import first_batch, generate

    args = tiny_args(tmp_path, credit="none", distillation_weight=0.5, distillation_signal="agreement")
    trainer = make_trainer(tmp_path, args=args)
    batch = generate(trainer, first_batch(trainer))
    trace = trainer.compute_credit(dict(batch))
    head = trainer.model.get_output_embeddings().weight.detach()
    student = trainer._student_hidden_pass(dict(batch))
    ps = (student @ head.T / trainer.temperature).softmax(-1)
    pt = (batch["gear_teacher_hidden"] @ head.T / trainer.temperature).softmax(-1)
    mask = trace.mask.bool()
    teacher_prob = pt.gather(-1, batch["completion_ids"][..., None])[..., 0]
    expected = agreement_advantages(teacher_prob, (ps * pt).sum(-1), mask, trainer.num_generations)
    torch.testing.assert_close(trace.dense, expected, atol=1e-5, rtol=1e-4)
    rows = trace.distill_rows
    assert rows.any() and (trace.dense[mask] != 0).any()
    base = batch["gear_base_advantages"][:, None].expand_as(mask).float()
    want = torch.where(rows[:, None] & mask, 0.5 * base + 0.5 * expected, base)
    torch.testing.assert_close(trace.distilled, want, atol=1e-5, rtol=1e-4)
    trainer.train()
    assert trainer.state.global_step == 2 and trainer.state.log_history[0]["gear/distill_share"] > 0
    assert "- distillation_signal: `agreement`" in "\n".join(trainer._credit_card_lines())
