"""Hand-worked examples for gear_trl.credit.segments.

Divergences are chosen with a row maximum of 1.0 so that Dn equals kl up to the
1e-8 normalization epsilon; entropies are 0 unless a test is about entropy.
"""

import pytest
import torch

from gear_trl.credit import CREDIT_MODES, SEGMENT_MODES, register_segmenter, segment_signal
from gear_trl.credit.segments import segment_stats


def row(*values, dtype=torch.float32):
    return torch.tensor([list(values)], dtype=dtype)


def ones_mask(length):
    return torch.ones(1, length, dtype=torch.bool)


def check(result, signal, segment_ids):
    got_signal, got_ids = result
    torch.testing.assert_close(got_signal, torch.tensor(signal, dtype=torch.float32), atol=1e-6, rtol=0)
    assert got_ids.dtype == torch.long
    assert got_ids.tolist() == segment_ids


# Onset at t1 opens a segment; the larger divergence at t3 lies inside it and
# only continues it; high entropy at t4 closes it; t6 opens a second segment that
# high entropy at t7 closes again.
KL_A = row(0.02, 0.40, 0.05, 1.00, 0.03, 0.01, 0.60, 0.04)
ENTROPY_A = row(0.10, 0.20, 0.30, 0.20, 0.90, 0.10, 0.20, 1.00)


def test_gear_onset_entropy_extent_and_second_onset():
    check(
        segment_signal(KL_A, ENTROPY_A, ones_mask(8), mode="gear"),
        [[0.02, 0.40, 0.40, 0.40, 0.03, 0.01, 0.60, 0.04]],
        [[-1, 0, 0, 0, -1, -1, 1, -1]],
    )


def test_gear_token_that_closes_a_segment_may_open_the_next():
    kl = row(0.50, 0.02, 1.00, 0.03)
    entropy = row(0.1, 0.2, 0.9, 0.1)  # Hn at t2 is 1.0, the rest < 0.5
    check(
        segment_signal(kl, entropy, ones_mask(4), mode="gear"),
        [[0.5, 0.5, 1.0, 1.0]],
        [[0, 0, 1, 1]],
    )


def test_gear_no_entropy_runs_from_onset_to_next_onset():
    check(
        segment_signal(KL_A, ENTROPY_A, ones_mask(8), mode="gear-no-entropy"),
        [[0.02, 0.40, 0.40, 1.00, 1.00, 1.00, 0.60, 0.60]],
        [[-1, 0, 0, 1, 1, 1, 2, 2]],
    )


def test_gear_plus_gigpo_segments_like_gear():
    expected = segment_signal(KL_A, ENTROPY_A, ones_mask(8), mode="gear")
    got = segment_signal(KL_A, ENTROPY_A, ones_mask(8), mode="gear-gigpo")
    assert torch.equal(got[0], expected[0]) and torch.equal(got[1], expected[1])


def test_turn_start_closes_segment():
    kl = row(0.50, 0.02, 0.03, 0.04, 0.05, 1.00, 0.01, 0.02)
    turn_starts = row(1, 0, 0, 0, 1, 0, 0, 0, dtype=torch.bool)
    check(
        segment_signal(kl, torch.zeros(1, 8), ones_mask(8), mode="gear", turn_starts=turn_starts),
        [[0.50, 0.50, 0.50, 0.50, 0.05, 1.00, 1.00, 1.00]],
        [[0, 0, 0, 0, -1, 1, 1, 1]],
    )


def test_gear_no_entropy_turn_end_closes_segment():
    kl = row(0.02, 0.50, 0.03, 0.04, 1.00, 0.01)
    turn_starts = row(1, 0, 0, 1, 0, 0, dtype=torch.bool)
    check(
        segment_signal(kl, torch.zeros(1, 6), ones_mask(6), mode="gear-no-entropy", turn_starts=turn_starts),
        [[0.02, 0.50, 0.50, 0.04, 1.00, 1.00]],
        [[-1, 0, 0, -1, 1, 1]],
    )


# Tool-result tokens t3, t4 are masked out; their large values must affect
# neither the normalization nor the scan.
TOOL_MASK = row(1, 1, 1, 0, 0, 1, 1, 1, dtype=torch.bool)
TOOL_KL = row(1.00, 0.02, 0.03, 9.0, 9.0, 0.04, 0.02, 0.01)
TOOL_ENTROPY = row(0.0, 0.0, 0.0, 5.0, 5.0, 0.0, 0.0, 0.0)


def test_masked_tool_tokens_are_skipped_without_closing():
    check(
        segment_signal(TOOL_KL, TOOL_ENTROPY, TOOL_MASK, mode="gear"),
        [[1.0, 1.0, 1.0, 0.0, 0.0, 1.0, 1.0, 1.0]],
        [[0, 0, 0, -1, -1, 0, 0, 0]],
    )


@pytest.mark.parametrize("flag_at", [5, 3])  # on the first model token, or on a tool token before it
def test_turn_start_after_tool_tokens_closes_segment(flag_at):
    turn_starts = torch.zeros(1, 8, dtype=torch.bool)
    turn_starts[0, 0] = turn_starts[0, flag_at] = True
    check(
        segment_signal(TOOL_KL, TOOL_ENTROPY, TOOL_MASK, mode="gear", turn_starts=turn_starts),
        [[1.0, 1.0, 1.0, 0.0, 0.0, 0.04, 0.02, 0.01]],
        [[0, 0, 0, -1, -1, -1, -1, -1]],
    )


def test_max_segment_len_closes_and_judges_afresh():
    # Cap 2: t2 ends seg 0 and, being an onset itself, opens seg 1; t4 ends seg 1
    # and, below threshold, stays outside; t5 opens seg 2.
    kl = row(0.50, 0.02, 0.70, 0.03, 0.04, 1.00)
    for mode in ("gear", "gear-no-entropy"):
        check(
            segment_signal(kl, torch.zeros(1, 6), ones_mask(6), mode=mode, max_segment_len=2),
            [[0.50, 0.50, 0.70, 0.70, 0.04, 1.00]],
            [[0, 0, 1, 1, -1, 2]],
        )


def test_max_segment_len_counts_model_tokens_only():
    kl = row(1.00, 0.02, 0.03, 0.04, 0.05)
    mask = row(1, 0, 1, 1, 1, dtype=torch.bool)
    check(
        segment_signal(kl, torch.zeros(1, 5), mask, mode="gear", max_segment_len=3),
        [[1.0, 0.0, 1.0, 1.0, 0.05]],
        [[0, -1, 0, 0, -1]],
    )


def test_turn_mode_one_segment_per_turn():
    kl = row(0.20, 1.00, 0.10, 9.0, 9.0, 0.30, 0.05, 0.40)
    turn_starts = row(1, 0, 0, 0, 0, 1, 0, 0, dtype=torch.bool)
    check(
        segment_signal(kl, torch.zeros(1, 8), TOOL_MASK, mode="turn", turn_starts=turn_starts),
        [[1.0, 1.0, 1.0, 0.0, 0.0, 0.4, 0.4, 0.4]],
        [[0, 0, 0, -1, -1, 1, 1, 1]],
    )
    check(
        segment_signal(kl, torch.zeros(1, 8), TOOL_MASK, mode="turn"),
        [[1.0, 1.0, 1.0, 0.0, 0.0, 1.0, 1.0, 1.0]],
        [[0, 0, 0, -1, -1, 0, 0, 0]],
    )


def test_fixed_windows_count_model_tokens_and_restart_at_turns():
    # Turn 0 holds model tokens t0-t3, t5 (t4 is a tool token): windows {t0,t1,t2}
    # and {t3,t5}. Turn 1 starts at t6: windows {t6,t7,t8} and {t9}.
    kl = row(0.10, 0.30, 0.20, 0.05, 9.0, 0.60, 1.00, 0.20, 0.30, 0.40)
    mask = row(1, 1, 1, 1, 0, 1, 1, 1, 1, 1, dtype=torch.bool)
    turn_starts = row(1, 0, 0, 0, 0, 0, 1, 0, 0, 0, dtype=torch.bool)
    check(
        segment_signal(kl, torch.zeros(1, 10), mask, mode="fixed", turn_starts=turn_starts, fixed_segment_len=3),
        [[0.3, 0.3, 0.3, 0.6, 0.0, 0.6, 1.0, 1.0, 1.0, 0.4]],
        [[0, 0, 0, 1, -1, 1, 2, 2, 2, 3]],
    )


def test_token_mode_is_normalized_divergence_without_segments():
    kl = row(0.5, 2.0, 1.0, 7.0)
    mask = row(1, 1, 1, 0, dtype=torch.bool)
    check(
        segment_signal(kl, torch.zeros(1, 4), mask, mode="token"),
        [[0.25, 1.0, 0.5, 0.0]],
        [[-1, -1, -1, -1]],
    )


@pytest.mark.parametrize("mode", ["none", "gigpo"])
def test_none_mode_has_no_signal(mode):
    check(
        segment_signal(KL_A, ENTROPY_A, ones_mask(8), mode=mode),
        [[0.0] * 8],
        [[-1] * 8],
    )


def test_normalize_max_and_minmax():
    kl = row(1.0, 2.0, 3.0, 5.0, 0.0)
    mask = row(1, 1, 1, 1, 0, dtype=torch.bool)
    check(segment_signal(kl, torch.zeros(1, 5), mask, mode="token"), [[0.2, 0.4, 0.6, 1.0, 0.0]], [[-1] * 5])
    check(
        segment_signal(kl, torch.zeros(1, 5), mask, mode="token", normalize="minmax"),
        [[0.0, 0.25, 0.5, 1.0, 0.0]],
        [[-1] * 5],
    )


def test_minmax_normalizes_entropy_too():
    # Entropy 1.0-1.4: under "max", Hn >= 0.71 closes after every token; under
    # "minmax", only t2 (Hn = 1) reaches the threshold.
    kl = row(1.00, 0.00, 0.03, 0.04)  # min 0, so Dn is kl under both
    entropy = row(1.0, 1.1, 1.4, 1.0)
    check(segment_signal(kl, entropy, ones_mask(4), mode="gear"), [[1.0, 0.0, 0.03, 0.04]], [[0, -1, -1, -1]])
    check(
        segment_signal(kl, entropy, ones_mask(4), mode="gear", normalize="minmax"),
        [[1.0, 1.0, 0.03, 0.04]],
        [[0, 0, -1, -1]],
    )


def test_batch_rows_are_independent_and_fully_masked_row_is_empty():
    kl = torch.tensor([[0.5, 0.02, 1.0, 0.01], [0.1, 0.2, 4.0, 0.3], [3.0, 3.0, 3.0, 3.0]])
    mask = torch.tensor([[1, 1, 1, 1], [1, 1, 1, 1], [0, 0, 0, 0]])  # 0/1 masks are accepted
    signal, ids = segment_signal(kl, torch.zeros(3, 4), mask, mode="gear-no-entropy")
    check(
        (signal, ids),
        [[0.5, 0.5, 1.0, 1.0], [0.025, 0.05, 1.0, 1.0], [0.0] * 4],
        [[0, 0, 1, 1], [-1, -1, 0, 0], [-1] * 4],
    )


def test_unknown_mode_lists_valid_modes():
    with pytest.raises(ValueError, match="Unknown credit mode 'gea'") as error:
        segment_signal(KL_A, ENTROPY_A, ones_mask(8), mode="gea")
    for mode in CREDIT_MODES:
        assert mode in str(error.value)


def test_shape_and_option_errors():
    with pytest.raises(ValueError, match="entropy"):
        segment_signal(KL_A, torch.zeros(1, 7), ones_mask(8), mode="gear")
    with pytest.raises(ValueError, match="turn_starts"):
        segment_signal(KL_A, ENTROPY_A, ones_mask(8), mode="gear", turn_starts=torch.zeros(2, 8, dtype=torch.bool))
    with pytest.raises(ValueError, match=r"kl must be \[B, T\]"):
        segment_signal(KL_A[0], ENTROPY_A[0], ones_mask(8)[0], mode="gear")
    with pytest.raises(ValueError, match="normalize"):
        segment_signal(KL_A, ENTROPY_A, ones_mask(8), mode="gear", normalize="sum")
    with pytest.raises(ValueError, match="max_segment_len"):
        segment_signal(KL_A, ENTROPY_A, ones_mask(8), mode="gear", max_segment_len=0)


def test_register_segmenter_adds_a_mode():
    @register_segmenter("test_whole_row")
    def whole_row(inputs):
        ids = torch.where(inputs.mask, 0, -1)
        return torch.where(inputs.mask, 1.0, 0.0), ids

    try:
        check(segment_signal(KL_A, ENTROPY_A, ones_mask(8), mode="test_whole_row"), [[1.0] * 8], [[0] * 8])
        with pytest.raises(ValueError, match="already registered"):
            register_segmenter("test_whole_row")(whole_row)
    finally:
        del SEGMENT_MODES["test_whole_row"]


def test_segment_stats():
    ids = torch.tensor([[-1, 0, 0, 0, -1, -1, 1, -1], [-1, -1, -1, -1, -1, -1, -1, -1]])
    mask = torch.tensor([[1] * 8, [1, 1, 1, 1, 0, 0, 0, 0]], dtype=torch.bool)
    stats = segment_stats(ids, mask)
    assert stats == pytest.approx({"onset_rate": 2 / 12, "segment_len_mean": 2.0, "in_segment_frac": 4 / 12})
    empty = segment_stats(torch.full((1, 3), -1), torch.zeros(1, 3, dtype=torch.bool))
    assert empty == {"onset_rate": 0.0, "segment_len_mean": 0.0, "in_segment_frac": 0.0}


def naive_gear(dn, hn, mask, turn_starts, onset, entropy_threshold, max_len, use_entropy):
    """Token-by-token statement of spec step 4 on Python lists (one row)."""
    signal, ids = [0.0] * len(dn), [-1] * len(dn)
    open_, anchor, length, count, pending_turn, seen = False, 0.0, 0, 0, False, False
    for t in range(len(dn)):
        pending_turn = pending_turn or turn_starts[t]
        if not mask[t]:
            continue
        new_turn, pending_turn = pending_turn or not seen, False
        seen = True
        breaks = hn[t] >= entropy_threshold if use_entropy else dn[t] >= onset
        if open_ and (new_turn or breaks or (max_len is not None and length >= max_len)):
            open_ = False
        if open_:
            length += 1
        elif dn[t] >= onset:
            open_, anchor, length, count = True, dn[t], 1, count + 1
        signal[t], ids[t] = (anchor, count - 1) if open_ else (dn[t], -1)
    return signal, ids


@pytest.mark.parametrize("max_segment_len", [None, 3])
@pytest.mark.parametrize("mode", ["gear", "gear-no-entropy"])
def test_scan_matches_naive_reference_on_random_rows(mode, max_segment_len):
    generator = torch.Generator().manual_seed(1)
    kl = torch.rand(6, 40, generator=generator) ** 3  # skewed: few onsets
    entropy = torch.rand(6, 40, generator=generator)
    mask = torch.rand(6, 40, generator=generator) > 0.2
    turn_starts = torch.rand(6, 40, generator=generator) > 0.9
    signal, ids = segment_signal(
        kl, entropy, mask, mode=mode, turn_starts=turn_starts, max_segment_len=max_segment_len, onset_threshold=0.3
    )
    dn = kl / (kl.masked_fill(~mask, 0).amax(dim=1, keepdim=True) + 1e-8)
    hn = entropy / (entropy.masked_fill(~mask, 0).amax(dim=1, keepdim=True) + 1e-8)
    for b in range(6):
        expected_signal, expected_ids = naive_gear(
            dn[b].tolist(),
            hn[b].tolist(),
            mask[b].tolist(),
            turn_starts[b].tolist(),
            0.3,
            0.5,
            max_segment_len,
            mode == "gear",
        )
        assert ids[b].tolist() == expected_ids
        torch.testing.assert_close(signal[b], torch.tensor(expected_signal) * mask[b], atol=1e-6, rtol=0)


def test_scan_handles_a_large_batch():
    generator = torch.Generator().manual_seed(0)
    kl = torch.rand(64, 2048, generator=generator)
    entropy = torch.rand(64, 2048, generator=generator)
    mask = torch.rand(64, 2048, generator=generator) > 0.1
    signal, ids = segment_signal(kl, entropy, mask, mode="gear", max_segment_len=64)
    assert signal.shape == ids.shape == (64, 2048)
    assert bool(((ids >= 0) <= mask).all())


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("mode", ["gear", "gear-no-entropy"])
def test_uncapped_scan_in_whole_tensor_ops_equals_the_position_loop(mode, seed):
    from gear_trl.credit.segments import SegmentInputs, _new_turn_flags, _normalize, _scan_segments_loop

    generator = torch.Generator().manual_seed(seed)
    batch, length = 16, 97
    density = [0.05, 0.3, 0.7][seed % 3]  # few, some, many onsets
    kl = (torch.rand(batch, length, generator=generator) < density) * torch.rand(batch, length, generator=generator)
    mask = torch.rand(batch, length, generator=generator) > 0.25
    mask[0] = False  # an empty row
    mask[1, :30] = False  # a row whose first tokens are not the model's
    turn_starts = torch.rand(batch, length, generator=generator) > 0.95
    entropy = torch.rand(batch, length, generator=generator)
    inputs = SegmentInputs(  # as segment_signal builds them
        dn=_normalize(kl, mask, "max"),
        hn=_normalize(entropy, mask, "max"),
        mask=mask,
        new_turn=_new_turn_flags(mask, turn_starts),
        onset_threshold=0.4,
        entropy_threshold=0.7,
        fixed_segment_len=32,
        max_segment_len=None,
    )
    signal, ids = segment_signal(
        kl, entropy, mask, mode=mode, turn_starts=turn_starts, onset_threshold=0.4, entropy_threshold=0.7
    )
    onset = inputs.dn >= 0.4
    breaks = mask & (inputs.new_turn | (inputs.hn >= 0.7 if mode == "gear" else onset))
    loop_signal, loop_ids = _scan_segments_loop(inputs, breaks)
    assert torch.equal(ids, loop_ids)
    assert torch.equal(signal, loop_signal)
    assert (ids >= 0).any() and (ids < 0).any()


# --- the noise floor: onset_min_kl (nats) is absolute ----------------------------------------------------------------


def test_token_below_the_floor_is_no_onset_whatever_its_normalized_kl():
    # Row max 0.005: Dn = (1, 0.16, 0.4, 0.02). Without a floor t0, t1 and t2 are onsets (Dn >= 0.1), three segments
    # in gear-no-entropy; with the floor at 1e-3, t1 (KL 8e-4) is not one and continues t0's segment.
    kl = row(0.005, 0.0008, 0.002, 0.0001)
    entropy = row(0.0, 0.0, 0.0, 0.0)
    dn = [v / (0.005 + 1e-8) for v in (0.005, 0.0008, 0.002)]  # the normalization's epsilon matters at this scale
    check(
        segment_signal(kl, entropy, ones_mask(4), mode="gear-no-entropy"),
        [[dn[0], dn[1], dn[2], dn[2]]],
        [[0, 1, 2, 2]],
    )
    check(
        segment_signal(kl, entropy, ones_mask(4), mode="gear-no-entropy", onset_min_kl=1e-3),
        [[dn[0], dn[0], dn[2], dn[2]]],
        [[0, 0, 1, 1]],
    )
    # gear: an onset outside a segment needs the floor too. t0 is cut off by high entropy at t1, which is then
    # judged afresh: Dn 0.16 would reopen a segment, but its KL is below the floor.
    entropy = row(0.1, 1.0, 0.1, 0.1)
    check(
        segment_signal(kl, entropy, ones_mask(4), mode="gear", onset_min_kl=1e-3),
        [[dn[0], dn[1], dn[2], dn[2]]],
        [[0, -1, 1, 1]],
    )


@pytest.mark.parametrize("mode", ["token", "turn", "fixed", "gear", "gear-no-entropy"])
def test_completion_below_the_floor_has_no_signal_and_weights_one(mode):
    # Row 0: largest KL 5e-4 < 1e-3, pure noise; max-normalized it would be all onsets. Row 1 has a real peak.
    kl = torch.tensor([[5e-4, 4e-4, 5e-4, 1e-4], [0.02, 0.5, 0.01, 0.0]])
    entropy = torch.zeros(2, 4)
    mask = torch.tensor([[1, 1, 1, 1], [1, 1, 1, 0]], dtype=torch.bool)
    loud, _ = segment_signal(kl, entropy, mask, mode=mode)
    assert loud[0].max() > 0.9  # without a floor the noise is a full-strength signal
    signal, ids = segment_signal(kl, entropy, mask, mode=mode, onset_min_kl=1e-3)
    assert signal[0].tolist() == [0.0] * 4 and ids[0].tolist() == [-1] * 4
    torch.testing.assert_close(signal[1], loud[1])
    from gear_trl.credit import gear_token_weights

    weights = gear_token_weights(kl, entropy, mask, torch.tensor([-1.0, -1.0]), mode=mode, onset_min_kl=1e-3)
    assert weights[0].tolist() == [1.0] * 4
    if mode not in ("turn", "fixed"):  # one segment per row there: equal weights, 1 after the mean
        assert weights[1, :3].max() > 1.0


def test_below_noise_floor():
    from gear_trl.credit import below_noise_floor

    kl = torch.tensor([[5e-4, 9e-4, 0.3], [1e-3, 0.0, 0.0], [0.0, 0.0, 0.0], [0.5, 0.0, 0.0]])
    mask = torch.tensor([[1, 1, 0], [1, 1, 1], [0, 0, 0], [0, 1, 1]], dtype=torch.bool)
    # row 0: 0.3 is masked out; row 1: exactly at the floor is not below; row 2: no model tokens; row 3: 0.5 masked.
    assert below_noise_floor(kl, mask, 1e-3).tolist() == [True, False, False, True]
    assert below_noise_floor(kl, mask, 0.0).tolist() == [False] * 4
    with pytest.raises(ValueError, match="onset_min_kl"):
        segment_signal(kl, kl, mask, mode="gear", onset_min_kl=-1.0)
