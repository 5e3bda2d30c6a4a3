"""Segment construction for GEAR credit assignment (spec GEAR.md, steps 3 and 4).

A segmenter is a pure function registered under a name with ``@register_segmenter``:
it turns the normalized divergence ``Dn`` and entropy ``Hn`` of each completion into
the per-token signal ``s_t`` and the segment each token belongs to. A credit mode
(:mod:`gear_trl.credit.modes`) names the segmenter it uses.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

MODE_SEGMENTERS: dict[str, str] = {}
"""Credit mode -> the segmenter it uses ("none" for a mode without segments); filled by
`gear_trl.credit.modes.register_credit_mode`, so that a mode's name may stand for its segmenter here."""

NORMALIZATIONS = ("max", "minmax")

_NORM_EPS = 1e-8


@dataclass(frozen=True)
class SegmentInputs:
    """What every segmenter receives; all tensors are [B, T] on the CPU.

    Attributes:
        dn: float32, normalized divergence, 0 at masked-out positions.
        hn: float32, normalized entropy, 0 at masked-out positions.
        mask: bool, True at model-written tokens.
        new_turn: bool, True at the first masked token of each assistant turn
            (always True at the first masked token of a row).
        onset_threshold, entropy_threshold, fixed_segment_len, max_segment_len:
            the options of :func:`segment_signal`.
        above_floor: bool, True where the raw KL is at or above ``onset_min_kl``; None when there is no floor.
            Only such tokens may be onsets (:func:`onsets`).
    """

    dn: torch.Tensor
    hn: torch.Tensor
    mask: torch.Tensor
    new_turn: torch.Tensor
    onset_threshold: float
    entropy_threshold: float
    fixed_segment_len: int
    max_segment_len: int | None
    above_floor: torch.Tensor | None = None


def onsets(inputs: SegmentInputs) -> torch.Tensor:
    """[B, T] bool: the model tokens that may open a segment, ``Dn >= onset_threshold`` and ``KL >= onset_min_kl``."""
    onset = inputs.mask & (inputs.dn >= inputs.onset_threshold)
    return onset if inputs.above_floor is None else onset & inputs.above_floor


Segmenter = Callable[[SegmentInputs], tuple[torch.Tensor, torch.Tensor]]

SEGMENT_MODES: dict[str, Segmenter] = {}


def register_segmenter(mode: str) -> Callable[[Segmenter], Segmenter]:
    """Register a segmenter under a credit-mode name.

    The decorated function takes a :class:`SegmentInputs` and returns
    ``(signal [B,T] float32, segment_ids [B,T] long)``, with signal 0 and id -1 at
    masked-out positions, and ids numbered 0, 1, 2, ... left to right per row.
    """

    def decorator(fn: Segmenter) -> Segmenter:
        if mode in SEGMENT_MODES:
            raise ValueError(f"A segmenter is already registered for mode {mode!r}.")
        SEGMENT_MODES[mode] = fn
        return fn

    return decorator


def resolve_mode(mode: str) -> str:
    """Map a segmenter's or a credit mode's name to the segmenter that produces its signal (a credit mode without
    segments, e.g. ``gigpo`` or ``rlsd``, to ``"none"``).

    Raises:
        ValueError: if ``mode`` is neither a segmenter nor a registered credit mode.
    """
    if mode in SEGMENT_MODES:
        return mode
    if mode not in MODE_SEGMENTERS:
        raise ValueError(
            f"Unknown credit mode {mode!r}; credit modes are: {', '.join(MODE_SEGMENTERS)}; segmenters are: "
            f"{', '.join(SEGMENT_MODES)}."
        )
    return MODE_SEGMENTERS[mode]


def segment_signal(
    kl: torch.Tensor,
    entropy: torch.Tensor,
    mask: torch.Tensor,
    *,
    mode: str,
    onset_threshold: float = 0.1,
    entropy_threshold: float = 0.5,
    turn_starts: torch.Tensor | None = None,
    fixed_segment_len: int = 32,
    max_segment_len: int | None = None,
    normalize: str = "max",
    onset_min_kl: float = 0.0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-token GEAR signal ``s_t`` and segment membership.

    The divergence and entropy are normalized per completion over its masked
    tokens (``normalize="max"``: ``x / (max x + 1e-8)``; ``"minmax"``:
    ``(x - min x) / (max x - min x + 1e-8)``), then the segmenter registered for
    ``mode`` builds segments and the signal:

    - ``none``: signal 0, no segments. ``token``: ``s_t = Dn_t``, no segments.
    - ``turn``: one segment per assistant turn; ``fixed``: windows of
      ``fixed_segment_len`` model tokens restarting at each turn; both carry the
      max ``Dn`` of their segment.
    - ``gear-no-entropy``: an onset (``Dn >= onset_threshold``) opens a segment
      that runs to the next onset (exclusive) or the turn end; ``s_t`` = onset Dn.
    - ``gear``: an onset outside a segment opens one (anchor = its Dn); the
      segment closes before a token with ``Hn >= entropy_threshold`` or a new
      turn, which is then judged afresh. An onset-level token inside an open
      segment continues it and inherits the anchor (our reading of the spec:
      peaks mark onsets, entropy alone sets the extent).
    - ``max_segment_len`` caps both GEAR modes; the token after a full segment
      is judged afresh. Tokens outside segments keep their own Dn.

    Masked-out tokens inside a row (e.g. tool results between two assistant
    turns) are skipped: they neither extend nor close a segment, but a turn
    start after them does close it.

    The noise floor ``onset_min_kl`` (nats) is absolute, applied before and
    after normalization: a token whose raw KL is below it is never an onset,
    whatever its ``Dn``, and a completion whose largest KL is below it
    (:func:`below_noise_floor`) gets signal 0 and no segments in every mode,
    hence weights 1: max-normalization would otherwise blow rounding noise up
    to onsets.

    Args:
        kl: [B, T] float, reverse KL ``D_t`` per completion token.
        entropy: [B, T] float, student entropy ``H_t``.
        mask: [B, T] bool (or 0/1), True at model-written, non-padding tokens.
        mode: a registered segmenter, or a credit mode (its segmenter is used: ``"gigpo"``
            behaves as ``"none"`` and ``"gear-gigpo"`` as ``"gear"``).
        onset_threshold: ``Dn`` at or above which a token opens a segment.
        entropy_threshold: ``Hn`` at or above which a token closes a segment
            (``"gear"`` only).
        turn_starts: [B, T] bool, True at the first model token of each assistant
            turn; None means each row is one turn. A flag on a masked-out
            position takes effect at the next masked token.
        fixed_segment_len: window length, in model tokens, for ``"fixed"``.
        max_segment_len: cap on segment length for ``"gear"`` and
            ``"gear-no-entropy"``; None means unbounded.
        normalize: ``"max"`` or ``"minmax"``.
        onset_min_kl: the noise floor in nats, >= 0; 0 means none.

    Returns:
        signal: [B, T] float32, ``s_t``; 0 at masked-out positions.
        segment_ids: [B, T] long, -1 outside segments, else 0, 1, 2, ... numbered
            per row left to right.
    """
    name = resolve_mode(mode)
    if kl.dim() != 2:
        raise ValueError(f"kl must be [B, T]; got shape {tuple(kl.shape)}.")
    shape = kl.shape
    for arg, value in (("entropy", entropy), ("mask", mask), ("turn_starts", turn_starts)):
        if value is not None and value.shape != shape:
            raise ValueError(f"{arg} must have the shape of kl {tuple(shape)}; got {tuple(value.shape)}.")
    if normalize not in NORMALIZATIONS:
        raise ValueError(f"normalize must be one of {NORMALIZATIONS}; got {normalize!r}.")
    if fixed_segment_len < 1:
        raise ValueError(f"fixed_segment_len must be >= 1; got {fixed_segment_len}.")
    if max_segment_len is not None and max_segment_len < 1:
        raise ValueError(f"max_segment_len must be >= 1 or None; got {max_segment_len}.")
    if onset_min_kl < 0:
        raise ValueError(f"onset_min_kl must be >= 0; got {onset_min_kl}.")

    device = kl.device
    kl, entropy, mask, turn_starts = _to_host(kl, entropy, mask, turn_starts)
    dn, hn = _normalize(torch.stack([kl, entropy]), mask, normalize).unbind()  # both in one pass
    inputs = SegmentInputs(
        dn=dn,
        hn=hn,
        mask=mask,
        new_turn=_new_turn_flags(mask, turn_starts),
        onset_threshold=onset_threshold,
        entropy_threshold=entropy_threshold,
        fixed_segment_len=fixed_segment_len,
        max_segment_len=max_segment_len,
        above_floor=kl >= onset_min_kl if onset_min_kl > 0 else None,
    )
    signal, segment_ids = SEGMENT_MODES[name](inputs)
    if onset_min_kl > 0:
        quiet = below_noise_floor(kl, mask, onset_min_kl)[:, None]
        signal = signal.masked_fill(quiet, 0.0)
        segment_ids = segment_ids.masked_fill(quiet, -1)
    return signal.to(device), segment_ids.to(device)


def _to_host(kl, entropy, mask, turn_starts):
    """The segmenters' inputs on the CPU: kl and entropy float32, mask and turn_starts bool (None stays None).

    From another device they come over in one copy (`_stacked_to_host`: one host-device synchronization, not one
    per tensor).
    """
    tensors = [kl, entropy, mask] + ([] if turn_starts is None else [turn_starts])
    if any(t.device.type != "cpu" for t in tensors) and len({t.device for t in tensors}) == 1:
        kl, entropy, mask, *turns = _stacked_to_host(tensors[:2], tensors[2:])
        return kl, entropy, mask, turns[0] if turns else None
    return (
        _as(kl, torch.float32, "cpu"),
        _as(entropy, torch.float32, "cpu"),
        _as(mask, torch.bool, "cpu"),
        None if turn_starts is None else _as(turn_starts, torch.bool, "cpu"),
    )


def _as(tensor: torch.Tensor, dtype: torch.dtype, device=None) -> torch.Tensor:
    """``tensor.detach().to(device, dtype)`` without the operators where they would change nothing (each is host time
    on a GPU): the same values, the tensor itself where it already is that."""
    if tensor.requires_grad:
        tensor = tensor.detach()
    if tensor.dtype != dtype or (device is not None and tensor.device != torch.device(device)):
        tensor = tensor.to(tensor.device if device is None else device, dtype)
    return tensor


def _stacked_to_host(values: list[torch.Tensor], flags: list[torch.Tensor]) -> list[torch.Tensor]:
    """``values`` as float32 and ``flags`` as bool, on the CPU, by one copy of one stacked [k, B, T] float32 tensor:
    the flags go in as 0/1 after their own cast to bool, so every element arrives as the per-tensor casts
    (``.to("cpu", torch.float32)``, ``.to("cpu", torch.bool)``) would give it."""
    stacked = [_as(t, torch.float32) for t in values] + [_as(t, torch.bool).float() for t in flags]
    host = list(torch.stack(stacked).to("cpu").unbind())
    return host[: len(values)] + [t.to(torch.bool) for t in host[len(values) :]]


def below_noise_floor(kl: torch.Tensor, mask: torch.Tensor, onset_min_kl: float) -> torch.Tensor:
    """[B] bool: completions with model tokens whose largest KL is below ``onset_min_kl`` (nats).

    Args:
        kl: [B, T] float, reverse KL per completion token.
        mask: [B, T] bool (or 0/1), model-written tokens.
        onset_min_kl: the floor; 0 gives all False.
    """
    mask = _as(mask, torch.bool, kl.device)
    row_max = torch.where(mask, kl, float("-inf")).amax(dim=1) if kl.shape[1] else kl.new_full(kl.shape[:1], -1.0)
    return mask.any(dim=1) & (row_max < onset_min_kl)


def segment_stats(segment_ids: torch.Tensor, mask: torch.Tensor) -> dict[str, float]:
    """Summary of a batch's segments, for logging.

    Args:
        segment_ids: [B, T] long, as returned by :func:`segment_signal`.
        mask: [B, T] bool (or 0/1), True at model-written tokens.

    Returns:
        ``onset_rate`` (segments per masked token), ``segment_len_mean`` (tokens
        per segment), ``in_segment_frac`` (fraction of masked tokens inside a
        segment), as Python floats; 0.0 where the denominator is 0.
    """
    mask = mask.bool()
    n_masked = int(mask.sum())
    # Ids are contiguous from 0 per row, so the largest id + 1 counts the segments.
    n_segments = int((segment_ids.amax(dim=1) + 1).clamp_min(0).sum()) if segment_ids.numel() else 0
    n_in_segment = int(((segment_ids >= 0) & mask).sum())
    return {
        "onset_rate": n_segments / n_masked if n_masked else 0.0,
        "segment_len_mean": n_in_segment / n_segments if n_segments else 0.0,
        "in_segment_frac": n_in_segment / n_masked if n_masked else 0.0,
    }


def _normalize(x: torch.Tensor, mask: torch.Tensor, how: str) -> torch.Tensor:
    """Per-row normalization over masked tokens: x [..., B, T] float32 (each [B, T] on its own, e.g. the KL and the
    entropy stacked), mask [B, T] bool; the shape of x, 0 where masked out."""
    has_tokens = mask.any(dim=-1, keepdim=True)
    unmasked = ~mask
    # Fully masked rows would give +-inf extremes; any finite stand-in works since
    # every position of such a row is zeroed below.
    row_max = torch.where(has_tokens, x.masked_fill(unmasked, float("-inf")).amax(dim=-1, keepdim=True), 0.0)
    if how == "max":
        out = x / (row_max + _NORM_EPS)
    else:
        row_min = torch.where(has_tokens, x.masked_fill(unmasked, float("inf")).amin(dim=-1, keepdim=True), 0.0)
        out = (x - row_min) / (row_max - row_min + _NORM_EPS)
    return out.masked_fill(unmasked, 0.0)


def _new_turn_flags(mask: torch.Tensor, turn_starts: torch.Tensor | None) -> torch.Tensor:
    """[B, T] bool: True at the first masked token of each assistant turn."""
    if turn_starts is None:  # one turn per row: its first masked token, the one whose count of masked tokens is 1
        return mask & (mask.cumsum(dim=1) == 1)
    positions = torch.arange(mask.shape[1]).expand_as(mask)
    # Index of the latest masked token at or before t (-1 if none).
    last_masked = torch.where(mask, positions, -1).cummax(dim=1).values
    prev_masked = torch.cat([torch.full_like(last_masked[:, :1], -1), last_masked[:, :-1]], dim=1)
    first_of_row = mask & (prev_masked < 0)
    # A masked token starts a turn when a turn-start flag lies after the previous
    # masked token (inclusive of itself), so flags on skipped positions carry over.
    turn_count = turn_starts.long().cumsum(dim=1)
    count_at_prev = torch.where(prev_masked >= 0, turn_count.gather(1, prev_masked.clamp_min(0)), 0)
    return first_of_row | (mask & (turn_count > count_at_prev))


def _ids_from_starts(starts: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """[B, T] long segment ids from segment-start flags; -1 where masked out."""
    return torch.where(mask, starts.long().cumsum(dim=1) - 1, -1)


def _group_max(values: torch.Tensor, segment_ids: torch.Tensor) -> torch.Tensor:
    """Replace each in-segment value by its segment's max; [B, T] float32, 0 outside."""
    batch, length = values.shape
    inside = segment_ids >= 0
    # One slot per (row, segment); ids never exceed T - 1. A token outside segments lands in its row's slot 0 with
    # -inf, which leaves that slot's max as it is (no boolean selection: nothing waits for a device).
    slot = (torch.arange(batch, device=values.device).unsqueeze(1) * length + segment_ids.clamp_min(0)).flatten()
    maxima = torch.full((batch * length,), float("-inf"), device=values.device)
    maxima.scatter_reduce_(0, slot, torch.where(inside, values, float("-inf")).flatten(), reduce="amax")
    return torch.where(inside, maxima[slot].view(batch, length), 0.0)


def _scan_segments(inputs: SegmentInputs, breaks: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Left-to-right onset/anchor scan shared by the GEAR modes.

    A masked token with ``Dn >= onset_threshold`` outside a segment opens one and
    sets the anchor to its ``Dn``. An open segment closes before a masked token
    that ``breaks`` flags or that would exceed ``max_segment_len``; that token is
    then judged afresh. In-segment tokens carry the anchor, others their own Dn.

    Args:
        inputs: the segmenter inputs.
        breaks: [B, T] bool, masked tokens that close an open segment.

    Returns:
        ``(signal, segment_ids)`` as in :func:`segment_signal`.
    """
    if inputs.max_segment_len is None:
        return _segments_between_breaks(inputs, breaks)
    return _scan_segments_loop(inputs, breaks)


def _segments_between_breaks(inputs: SegmentInputs, breaks: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """`_scan_segments` without a length cap, in whole-tensor operations ([B, T] in, [B, T] out).

    Without a cap, a segment can only close at a break, and the token after it is judged afresh, so the masked tokens
    from one break to the next (a region: the tokens with the same count of breaks so far) hold at most one segment,
    from the region's first onset to its end.
    """
    batch, length = inputs.mask.shape
    onset = onsets(inputs)
    region = breaks.long().cumsum(dim=1)  # 0 before a row's first break, then 1, 2, ...
    slot = torch.arange(batch).unsqueeze(1) * (length + 1) + region  # one slot per (row, region)
    positions = torch.arange(length).expand(batch, length)
    first_onset = torch.full((batch * (length + 1),), length)
    # Every token scatters, a non-onset as `length` (no onset), which leaves the minimum as it is.
    first_onset.scatter_reduce_(0, slot.flatten(), torch.where(onset, positions, length).flatten(), reduce="amin")
    start = first_onset[slot]  # [B, T]: the first onset of each token's region (length if none)
    inside = inputs.mask & (positions >= start)
    anchor = inputs.dn.gather(1, start.clamp_max(length - 1))
    opens = onset & (positions == start)
    segment_ids = torch.where(inside, opens.long().cumsum(dim=1) - 1, -1)
    return torch.where(inside, anchor, inputs.dn), segment_ids


def _scan_segments_loop(inputs: SegmentInputs, breaks: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """`_scan_segments` one position at a time (~12 small ops per position): needed for `max_segment_len`, whose
    closing depends on the scan's own state."""
    batch = inputs.mask.shape[0]
    onset = onsets(inputs)
    # Unbounded segments never reach the cap.
    cap = inputs.max_segment_len if inputs.max_segment_len is not None else inputs.mask.shape[1] + 1

    in_segment = torch.zeros(batch, dtype=torch.bool)
    anchor = torch.zeros(batch)
    length = torch.zeros(batch, dtype=torch.long)
    count = torch.zeros(batch, dtype=torch.long)
    signal_cols, id_cols = [], []
    for m, brk, on, dn in zip(inputs.mask.T, breaks.T, onset.T, inputs.dn.T, strict=True):
        # Masked-out tokens leave the state untouched.
        stays = in_segment & m & ~brk & (length < cap)
        opens = m & ~stays & on
        in_segment = torch.where(m, stays | opens, in_segment)
        anchor = torch.where(opens, dn, anchor)
        length = torch.where(opens, 1, length + stays.long())
        count = count + opens.long()
        inside = m & in_segment
        signal_cols.append(torch.where(inside, anchor, dn))
        id_cols.append(torch.where(inside, count - 1, -1))
    return torch.stack(signal_cols, dim=1), torch.stack(id_cols, dim=1)


@register_segmenter("none")
def _segment_none(inputs: SegmentInputs) -> tuple[torch.Tensor, torch.Tensor]:
    """Plain GRPO: signal 0 everywhere, no segments."""
    return torch.zeros_like(inputs.dn), torch.full_like(inputs.mask, -1, dtype=torch.long)


@register_segmenter("token")
def _segment_token(inputs: SegmentInputs) -> tuple[torch.Tensor, torch.Tensor]:
    """Token-level credit: each token's own Dn, no segments."""
    return inputs.dn.clone(), torch.full_like(inputs.mask, -1, dtype=torch.long)


@register_segmenter("turn")
def _segment_turn(inputs: SegmentInputs) -> tuple[torch.Tensor, torch.Tensor]:
    """Turn-level credit: one segment per assistant turn, signal = max Dn over it."""
    segment_ids = _ids_from_starts(inputs.new_turn, inputs.mask)
    return _group_max(inputs.dn, segment_ids), segment_ids


@register_segmenter("fixed")
def _segment_fixed(inputs: SegmentInputs) -> tuple[torch.Tensor, torch.Tensor]:
    """Windows of ``fixed_segment_len`` model tokens, restarting at each turn start;
    signal = max Dn over the window."""
    masked_before = inputs.mask.long().cumsum(dim=1) - inputs.mask.long()
    # Masked tokens before the current turn: masked_before at the turn's first
    # token, carried forward (masked_before never decreases, so cummax carries it).
    turn_offset = torch.where(inputs.new_turn, masked_before, 0).cummax(dim=1).values
    rank_in_turn = masked_before - turn_offset
    starts = inputs.mask & (rank_in_turn % inputs.fixed_segment_len == 0)
    segment_ids = _ids_from_starts(starts, inputs.mask)
    return _group_max(inputs.dn, segment_ids), segment_ids


@register_segmenter("gear-no-entropy")
def _segment_gear_no_entropy(inputs: SegmentInputs) -> tuple[torch.Tensor, torch.Tensor]:
    """Ablation without entropy: a segment runs from an onset to the next onset
    (exclusive), the turn end, or ``max_segment_len`` tokens; signal = onset Dn.
    Tokens before a turn's first onset are outside segments with their own Dn."""
    return _scan_segments(inputs, breaks=inputs.mask & (inputs.new_turn | onsets(inputs)))


@register_segmenter("gear")
def _segment_gear(inputs: SegmentInputs) -> tuple[torch.Tensor, torch.Tensor]:
    """GEAR (spec step 4): an onset (``Dn >= onset_threshold``) outside a segment
    opens one with anchor ``Dn``; it extends until a token with
    ``Hn >= entropy_threshold``, a new assistant turn, or ``max_segment_len``
    tokens, which closes it before that token, and that token is judged afresh.

    Reading of the spec: an onset-level token inside an open segment does not
    start a new segment; it continues the current one and inherits its anchor,
    since only entropy (or a turn boundary) determines segment extent.
    """
    high_entropy = inputs.hn >= inputs.entropy_threshold
    return _scan_segments(inputs, breaks=inputs.mask & (inputs.new_turn | high_entropy))
