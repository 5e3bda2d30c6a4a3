"""Issue 75's cuts to GEAR's host-side work change no value: each rewritten function against a plain reference (a
Python loop, or the boolean indexing it replaced) on random inputs, compared exactly (`torch.equal`), not within a
tolerance."""

from __future__ import annotations

import pytest
import torch

from gear_trl.credit import divergence, segments, weights
from gear_trl.credit.segments import SegmentInputs
from gear_trl.trainer.fused_head import FusedDivergence

SEEDS = range(6)


def _random(seed: int, batch: int = 4, length: int = 23):
    g = torch.Generator().manual_seed(seed)
    mask = torch.rand(batch, length, generator=g) > 0.3
    mask[0] = False  # an empty row
    dn = torch.where(mask, torch.rand(batch, length, generator=g), 0.0)
    return g, mask, dn


def _group_max_loop(values, segment_ids):
    out = torch.zeros_like(values)
    for b in range(values.shape[0]):
        for s in segment_ids[b].unique().tolist():
            if s >= 0:
                inside = segment_ids[b] == s
                out[b][inside] = values[b][inside].max()
    return out


@pytest.mark.parametrize("seed", SEEDS)
def test_group_max_without_boolean_selection_is_the_loop(seed):
    g, mask, dn = _random(seed)
    starts = mask & (torch.rand(mask.shape, generator=g) > 0.7)
    starts[:, 0] |= mask[:, 0]
    segment_ids = segments._ids_from_starts(starts, mask)
    assert torch.equal(segments._group_max(dn, segment_ids), _group_max_loop(dn, segment_ids))


@pytest.mark.parametrize("seed", SEEDS)
def test_segments_between_breaks_is_the_position_by_position_scan(seed):
    """The whole-tensor path (no boolean selection now) against the scan one position at a time."""
    g, mask, dn = _random(seed)
    inputs = SegmentInputs(
        dn=dn,
        hn=torch.where(mask, torch.rand(mask.shape, generator=g), 0.0),
        mask=mask,
        new_turn=segments._new_turn_flags(mask, torch.rand(mask.shape, generator=g) > 0.8),
        onset_threshold=0.6,
        entropy_threshold=0.5,
        fixed_segment_len=4,
        max_segment_len=None,
        above_floor=torch.rand(mask.shape, generator=g) > 0.2,
    )
    breaks = inputs.mask & (inputs.new_turn | (inputs.hn >= inputs.entropy_threshold))
    fast = segments._segments_between_breaks(inputs, breaks)
    loop = segments._scan_segments_loop(inputs, breaks)
    assert torch.equal(fast[0], loop[0]) and torch.equal(fast[1], loop[1])


@pytest.mark.parametrize("turns", [False, True])
def test_one_stacked_copy_to_the_host_gives_what_the_per_tensor_casts_give(turns):
    g = torch.Generator().manual_seed(1)
    kl = torch.rand(3, 9, generator=g, dtype=torch.float64) * 5  # rounded to float32 on the way, as before
    entropy = torch.rand(3, 9, generator=g).to(torch.bfloat16)
    mask = torch.randint(0, 3, (3, 9), generator=g)  # 0/1/2 flags: any non-zero is True
    starts = torch.rand(3, 9, generator=g) > 0.7 if turns else None
    flags = [mask] + ([starts] if turns else [])
    got = segments._stacked_to_host([kl, entropy], flags)
    expected = [kl.to("cpu", torch.float32), entropy.to("cpu", torch.float32)]
    expected += [t.to("cpu", torch.bool) for t in flags]
    assert len(got) == len(expected)
    for a, b in zip(got, expected, strict=True):
        assert a.dtype == b.dtype and torch.equal(a, b)


def _step_means_loop(w, mask_f, step_index):
    out = torch.zeros_like(w)
    for b in range(w.shape[0]):
        for s in step_index[b].unique().tolist():
            if s >= 0:
                inside = step_index[b] == s
                out[b][inside] = (w[b] * mask_f[b])[inside].sum() / mask_f[b][inside].sum().clamp_min(1)
    return out


@pytest.mark.parametrize("seed", SEEDS)
def test_step_means_without_counting_the_steps_first_are_the_loop(seed):
    g, mask, _ = _random(seed)
    w = torch.rand(mask.shape, generator=g) + 0.5
    step_index = weights.step_index_from_mask(mask)
    got = weights._step_means(w, mask.float(), step_index)
    inside = step_index >= 0
    assert torch.allclose(got[inside], _step_means_loop(w, mask.float(), step_index)[inside], rtol=0, atol=1e-6)


def _reverse_kl_boolean(student, teacher, weight, mask, token_ids, **kwargs):
    """reverse_kl_and_entropy as it was: boolean indexing at every gather and scatter."""
    stats = divergence.lm_head_statistics(
        student[mask], weight, teacher_rows=teacher[mask], targets=token_ids[mask], log_ratio=True, **kwargs
    )
    kl, entropy, ratio = (torch.zeros(mask.shape) for _ in range(3))
    kl[mask], entropy[mask], ratio[mask] = stats.kl, stats.entropy, stats.log_ratio
    return kl, entropy, ratio


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("chunk_size", [1, 5, 64])
def test_reverse_kl_with_one_index_is_the_boolean_indexing(seed, chunk_size):
    g, mask, _ = _random(seed, batch=3, length=11)
    student = torch.randn(3, 11, 8, generator=g)
    teacher = student + 0.5 * torch.randn(3, 11, 8, generator=g)
    weight = torch.randn(300, 8, generator=g)
    ids = torch.randint(0, 300, (3, 11), generator=g)
    strided = torch.randn(3, 13, 8, generator=g)[:, 1:-1]  # a strided [B, T, H], as completion_states gives
    strided.copy_(student)
    ratio = torch.zeros(3, 11)
    kl, entropy = divergence.reverse_kl_and_entropy(
        strided, teacher, weight, mask, chunk_size=chunk_size, token_ids=ids, log_ratio_out=ratio, temperature=0.8
    )
    ref = _reverse_kl_boolean(student, teacher, weight, mask, ids, chunk_size=chunk_size, temperature=0.8)
    assert torch.equal(kl, ref[0]) and torch.equal(entropy, ref[1]) and torch.equal(ratio, ref[2])


def test_head_statistics_without_the_log_partition_give_the_rest_unchanged():
    g = torch.Generator().manual_seed(2)
    rows, teacher = torch.randn(20, 6, generator=g), torch.randn(20, 6, generator=g)
    weight = torch.randn(50, 6, generator=g)
    kwargs = {"teacher_rows": teacher, "targets": torch.randint(0, 50, (20,), generator=g), "chunk_size": 3}
    full = divergence.lm_head_statistics(rows, weight, **kwargs)
    lean = divergence.lm_head_statistics(rows, weight, log_partition=False, **kwargs)
    assert lean.log_z is None and full.log_z.shape == (20,)
    for name in ("entropy", "target_log_prob", "kl"):
        assert torch.equal(getattr(full, name), getattr(lean, name)), name
    # the log-partition itself, against a plain logsumexp of every row's logits
    assert torch.allclose(full.log_z, (rows @ weight.T).logsumexp(dim=-1), atol=1e-5)


@pytest.mark.parametrize("seed", SEEDS)
def test_fused_scatter_at_the_positions_is_the_boolean_assignment(seed):
    g, mask, _ = _random(seed)
    request = FusedDivergence(teacher_hidden=torch.randn(*mask.shape, 4, generator=g), mask=mask, chunk_size=8)
    values = torch.randn(int(mask.sum()), generator=g)
    got, expected = torch.zeros(mask.shape), torch.zeros(mask.shape)
    request.scatter(values, got)
    expected[mask] = values
    assert torch.equal(got, expected)
    assert torch.equal(request.teacher_hidden[request.positions()], request.teacher_hidden[mask])
    total = mask.shape[0] * (mask.shape[1] + 3)
    rows = request.rows(total)
    i, t = mask.nonzero(as_tuple=True)
    assert torch.equal(rows, i * (mask.shape[1] + 3) + 3 + t)


def _head_statistics_per_chunk(student, weight, teacher, targets, chunk_size, divergence):
    """lm_head_statistics as it was before the per-row buffers: every statistic's arithmetic chunk by chunk (no
    scale, bias, soft-cap; the paired path), its [n] results joined at the end."""
    parts = {"entropy": [], "target_log_prob": [], "kl": [], "log_ratio": []}
    full = divergence == "full"
    for start in range(0, student.shape[0], chunk_size):
        n = min(chunk_size, student.shape[0] - start)
        z = torch.cat((student[start : start + n], teacher[start : start + n])) @ weight.t()
        zs, zt = z[:n], z[n:]
        shifted = zs if divergence == "topk" else z
        shifted.sub_(shifted.amax(dim=-1, keepdim=True))
        es = zs.exp()
        ss = es.sum(dim=-1)
        lse_s = ss.log()
        y = targets[start : start + n].unsqueeze(-1)
        target_log_prob = zs.gather(-1, y).squeeze(-1) - lse_s
        dot_ss = divergence_row_dot(es, zs, zs if full else None)
        parts["entropy"].append(lse_s - dot_ss / ss)
        zt_y = zt.gather(-1, y).squeeze(-1)
        if full:
            cross = (dot_ss - divergence_row_dot(es, zt, es)) / ss
            lse_t = zt.exp_().sum(dim=-1).log()
            kl = cross - (lse_s - lse_t)
        elif divergence == "topk":
            support = zs.topk(7, dim=-1).indices
            log_ps_k, log_pt_k = zs.gather(-1, support), zt.gather(-1, support)
            log_ps_k = log_ps_k - log_ps_k.logsumexp(dim=-1, keepdim=True)
            log_pt_k = log_pt_k - log_pt_k.logsumexp(dim=-1, keepdim=True)
            kl = (log_ps_k.exp() * (log_ps_k - log_pt_k)).sum(dim=-1)
            lse_t = zt.logsumexp(dim=-1)
        else:
            delta = (zs.gather(-1, y) - zt.gather(-1, y)).squeeze(-1)
            lse_t = zt.exp_().sum(dim=-1).log_()
            kl = delta - (lse_s - lse_t)
        parts["target_log_prob"].append(target_log_prob)
        parts["log_ratio"].append((zt_y - lse_t) - target_log_prob)
        parts["kl"].append(kl if divergence == "sampled_signed" else kl.clamp_min(0.0))
    return {name: torch.cat(chunks) for name, chunks in parts.items()}


def divergence_row_dot(a, b, spare):
    return divergence._row_dot(a, b, spare=spare)


@pytest.mark.parametrize("divergence_", ["full", "topk", "sampled", "sampled_signed"])
@pytest.mark.parametrize("chunk_size", [1, 5, 16, 64])
@pytest.mark.parametrize("vocab", [300, 9000])  # 9000: one BLAS dot per row on CPU
@pytest.mark.parametrize("row_dots", ["cpu", "bmm"])
def test_head_statistics_joined_after_the_loop_are_the_chunk_by_chunk_arithmetic(
    monkeypatch, divergence_, chunk_size, vocab, row_dots
):
    """The per-row buffers and the arithmetic over all rows after the loop give every statistic bit for bit."""
    if row_dots == "bmm":
        monkeypatch.setattr(divergence, "_PER_ROW_DOT_DEVICES", ())
    g = torch.Generator().manual_seed(chunk_size)
    student = torch.randn(37, 16, generator=g)
    teacher = student + 0.4 * torch.randn(37, 16, generator=g)
    weight = torch.randn(vocab, 16, generator=g) * 0.5
    targets = torch.randint(0, vocab, (37,), generator=g)
    stats = divergence.lm_head_statistics(
        student,
        weight,
        teacher_rows=teacher,
        targets=targets,
        chunk_size=chunk_size,
        divergence=divergence_,
        top_k=7,
        log_ratio=True,
        log_partition=False,
    )
    expected = _head_statistics_per_chunk(student, weight, teacher, targets, chunk_size, divergence_)
    for name, value in expected.items():
        assert torch.equal(getattr(stats, name), value), name


@pytest.mark.parametrize("seed", SEEDS)
def test_first_masked_token_of_each_row_without_turns_is_the_loop(seed):
    _, mask, _ = _random(seed)
    expected = torch.zeros_like(mask)
    for b in range(mask.shape[0]):
        found = mask[b].nonzero()
        if len(found):
            expected[b, found[0, 0]] = True
    assert torch.equal(segments._new_turn_flags(mask, None), expected)


@pytest.mark.parametrize("how", ["max", "minmax"])
def test_kl_and_entropy_normalized_together_are_each_normalized_alone(how):
    g, mask, dn = _random(3)
    entropy = torch.where(mask, 3 * torch.rand(mask.shape, generator=g), 0.0)
    together = segments._normalize(torch.stack([dn, entropy]), mask, how)
    for k, x in enumerate((dn, entropy)):  # the per-[B, T] normalization as it was written
        has_tokens = mask.any(dim=1, keepdim=True)
        row_max = torch.where(has_tokens, x.masked_fill(~mask, float("-inf")).amax(dim=1, keepdim=True), 0.0)
        if how == "max":
            alone = x / (row_max + segments._NORM_EPS)
        else:
            row_min = torch.where(has_tokens, x.masked_fill(~mask, float("inf")).amin(dim=1, keepdim=True), 0.0)
            alone = (x - row_min) / (row_max - row_min + segments._NORM_EPS)
        assert torch.equal(together[k], alone.masked_fill(~mask, 0.0))


@pytest.mark.parametrize("alpha, lam", [(1.0, 1.0), (1.0, 0.6), (0.7, 1.0), (2.0, 0.3)])
def test_weights_with_alpha_or_lambda_one_are_the_whole_formula(alpha, lam):
    """alpha = 1 and lam = 1 skip a multiply by 1 and an add of 0: the same weights as the formula written out."""
    g, mask, dn = _random(4)
    advantages = torch.randn(mask.shape[0], generator=g)
    got = weights.weights_from_signal(dn, mask, advantages, alpha=alpha, eps=0.4, lam=lam)
    sign = advantages.sign().unsqueeze(1)
    formula = ((1 - lam) + lam * torch.exp(-sign * alpha * dn).clamp(0.6, 1.4)) * mask.float()
    mean = formula.sum(dim=1, keepdim=True) / mask.float().sum(dim=1, keepdim=True).clamp_min(1)
    assert torch.equal(got, formula / torch.where(mean > 0, mean, 1.0))
