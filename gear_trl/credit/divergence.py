"""Student-teacher reverse KL and student entropy (spec GEAR.md, step 2).

Logits are never materialized for the whole batch: the LM head is applied to the
masked positions' final hidden states a chunk of positions at a time, so peak
extra memory is O(chunk_size x V) instead of O(B x T x V).
"""

from __future__ import annotations

from typing import NamedTuple

import torch

DIVERGENCES = ("full", "topk", "sampled")
"""The `divergence` options of GEARConfig."""
SIGNED_LOG_RATIO = "sampled_signed"
"""``log pS(y_t) - log pT(y_t)`` of the sampled token without the clamp at 0: `credit: rlsd`'s signal (the negative
of RLSD's delta), accepted by the functions here besides `DIVERGENCES`."""
DEFAULT_CHUNK_SIZE = 64
"""Positions per LM-head chunk: the default of both `reverse_kl_and_entropy` and `GEARConfig.divergence_chunk_size`.
Extra memory is 3 x chunk x V float32 values (117 MB at Qwen3's V = 151,936); chunks 16-256 are timed in
bench/results/overhead/NOTES.md ("Divergence pass")."""
_SMALL_VOCAB = 8192  # see _row_dot
_MIN_TILE_ROWS = 1024  # see _lm_head
_MM_OUT_DTYPE = tuple(int(part) for part in torch.__version__.split(".")[:2]) >= (2, 8)
"""`torch.mm(..., out_dtype=torch.float32)` from bf16 / fp16 inputs exists on CUDA from torch 2.8."""
_OUT_DTYPE_DEVICES = ("cuda",)
"""Device types where `_lm_head` lets the matmul write float32 logits from a 2-byte head (`out_dtype`); tests add
others to run that branch off a GPU."""
_PER_ROW_DOT_DEVICES = ("cpu",)
"""Device types where `_row_dot` takes one BLAS dot per row instead of one `bmm` (see `_row_dot`)."""


@torch.no_grad()
def reverse_kl_and_entropy(
    student_hidden: torch.Tensor,
    teacher_hidden: torch.Tensor,
    lm_head_weight: torch.Tensor,
    mask: torch.Tensor,
    *,
    temperature: float = 1.0,
    chunk_size: int = DEFAULT_CHUNK_SIZE,
    lm_head_bias: torch.Tensor | None = None,
    divergence: str = "full",
    top_k: int = 20,
    token_ids: torch.Tensor | None = None,
    logit_scale: float = 1.0,
    final_logit_softcapping: float | None = None,
    teacher_lm_head_weight: torch.Tensor | None = None,
    teacher_lm_head_bias: torch.Tensor | None = None,
    log_ratio_out: torch.Tensor | None = None,
    agreement_out: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Reverse KL ``D_t = KL(pS || pT)`` and student entropy ``H_t`` per token.

    ``pS = softmax(f(h_S W^T + b) / tau)``, ``pT = softmax(f(h_T W^T + b) / tau)``, where ``f`` is the model's own
    logit transformation: ``f(z) = c * tanh(s * z / c)`` with ``s = logit_scale`` and ``c =
    final_logit_softcapping`` (``f(z) = s * z`` without soft-capping), in that order, as the model's forward and
    TRL's log-probs apply it. The matmul takes
    hidden states scaled by ``1 / tau`` (in float32, then cast to the LM head's dtype) and writes float32 logits, a
    2-byte head included (never rounded to bf16 / fp16 first; no whole upcast copy of W); the bias is added in
    float32. With ``zS, zT`` the logits at temperature,
    ``H = lse(zS) - <pS, zS>`` and ``KL = <pS, zS - zT> - lse(zS) + lse(zT)``,
    each row shifted by its max first, so no log-probability tensor is formed.

    Args:
        student_hidden: [B, T, H], student final hidden states; position t
            predicts completion token t.
        teacher_hidden: [B, T, H], teacher final hidden states, aligned the same way.
        lm_head_weight: [V, H], the output embedding.
        mask: [B, T] bool (or 0/1); only these positions are computed.
        temperature: sampling temperature ``tau`` > 0.
        chunk_size: positions per LM-head chunk, >= 1.
        lm_head_bias: optional [V] bias of the LM head.
        divergence: ``"full"``: ``sum_v pS (log pS - log pT)`` clamped at 0;
            ``"topk"``: the same on the student's ``top_k`` tokens with both
            distributions renormalized over that set (``top_k`` is capped at V);
            ``"sampled"``: ``max(log pS(y_t) - log pT(y_t), 0)``, needs ``token_ids``;
            ``"sampled_signed"``: the same without the clamp (may be negative).
        top_k: support size for ``"topk"``, >= 1.
        token_ids: [B, T] long, the sampled tokens ``y_t``; required for ``"sampled"``.
        logit_scale: multiplier of the raw logits (Cohere ``logit_scale``, Granite ``1 / logits_scaling``).
        final_logit_softcapping: soft cap ``c`` > 0 of the scaled logits (Gemma 2/3), or None.
        teacher_lm_head_weight, teacher_lm_head_bias: the teacher's own [V, H] head and [V] bias when it is a model
            of its own (a frozen or averaged copy); None: the teacher shares the student's head.
        log_ratio_out: optional [B, T] float32 tensor, filled with ``log pT(y_t) - log pS(y_t)`` of the sampled token
            from the same logits (0 at masked-out positions; needs ``token_ids``): `credit: gear-signed`'s sign.
        agreement_out: optional [2, B, T] float32 tensor (``divergence="full"`` only, needs ``token_ids``), filled
            with ``pT(y_t)`` (index 0) and ``sum_v pS(v) pT(v)`` (index 1) from the same logits, 0 at masked-out
            positions: the teacher's probability of the sampled token and its expectation under the student
            (`distillation_signal: agreement`, `gear_trl.credit.agreement_advantages`).

    Returns:
        kl: [B, T] float32, 0 at masked-out positions.
        entropy: [B, T] float32, full-vocabulary student entropy (every
            divergence option), 0 at masked-out positions.
    """
    if student_hidden.dim() != 3:
        raise ValueError(f"student_hidden must be [B, T, H]; got shape {tuple(student_hidden.shape)}.")
    if teacher_hidden.shape != student_hidden.shape:
        raise ValueError(
            f"teacher_hidden must match student_hidden {tuple(student_hidden.shape)}; "
            f"got {tuple(teacher_hidden.shape)}."
        )
    batch, length, hidden = student_hidden.shape
    if lm_head_weight.dim() != 2 or lm_head_weight.shape[1] != hidden:
        raise ValueError(f"lm_head_weight must be [V, {hidden}]; got shape {tuple(lm_head_weight.shape)}.")
    vocab = lm_head_weight.shape[0]
    if lm_head_bias is not None and lm_head_bias.shape != (vocab,):
        raise ValueError(f"lm_head_bias must be [{vocab}]; got shape {tuple(lm_head_bias.shape)}.")
    if teacher_lm_head_weight is not None and teacher_lm_head_weight.shape != lm_head_weight.shape:
        raise ValueError(
            f"teacher_lm_head_weight must be {tuple(lm_head_weight.shape)}; got {tuple(teacher_lm_head_weight.shape)}."
        )
    if mask.shape != (batch, length):
        raise ValueError(f"mask must be [{batch}, {length}]; got shape {tuple(mask.shape)}.")
    if temperature <= 0:
        raise ValueError(f"temperature must be > 0; got {temperature}.")
    if final_logit_softcapping is not None and final_logit_softcapping <= 0:
        raise ValueError(f"final_logit_softcapping must be > 0 or None; got {final_logit_softcapping}.")
    if chunk_size < 1:
        raise ValueError(f"chunk_size must be >= 1; got {chunk_size}.")
    if divergence not in (*DIVERGENCES, SIGNED_LOG_RATIO):
        raise ValueError(f"divergence must be one of {(*DIVERGENCES, SIGNED_LOG_RATIO)}; got {divergence!r}.")
    if divergence == "topk" and top_k < 1:
        raise ValueError(f"top_k must be >= 1; got {top_k}.")
    sampled = divergence in ("sampled", SIGNED_LOG_RATIO) or log_ratio_out is not None or agreement_out is not None
    if agreement_out is not None and divergence != "full":
        raise ValueError(f"agreement_out needs divergence='full' (the whole teacher distribution); got {divergence!r}.")
    if agreement_out is not None and agreement_out.shape != (2, batch, length):
        raise ValueError(f"agreement_out must be [2, {batch}, {length}]; got shape {tuple(agreement_out.shape)}.")
    if log_ratio_out is not None and log_ratio_out.shape != (batch, length):
        raise ValueError(f"log_ratio_out must be [{batch}, {length}]; got shape {tuple(log_ratio_out.shape)}.")
    if sampled and (token_ids is None or token_ids.shape != (batch, length)):
        got = None if token_ids is None else tuple(token_ids.shape)
        raise ValueError(f"divergence={divergence!r} needs token_ids of shape [{batch}, {length}]; got {got}.")

    device = student_hidden.device
    mask = mask.to(device=device, dtype=torch.bool)
    # One host-device synchronization: the masked positions' flat indices, read by every gather and scatter below
    # (boolean indexing would find them again at each, and wait for the device each time).
    index = mask.flatten().nonzero().squeeze(1)
    row, column = index // length, index % length  # (no flattened copy of a strided [B, T, H])
    stats = lm_head_statistics(
        student_hidden[row, column],
        lm_head_weight,
        teacher_rows=teacher_hidden[row, column],
        targets=token_ids.to(device)[row, column] if sampled else None,
        temperature=temperature,
        chunk_size=chunk_size,
        lm_head_bias=lm_head_bias,
        divergence=divergence,
        top_k=top_k,
        logit_scale=logit_scale,
        final_logit_softcapping=final_logit_softcapping,
        teacher_lm_head_weight=teacher_lm_head_weight,
        teacher_lm_head_bias=teacher_lm_head_bias,
        log_ratio=log_ratio_out is not None,
        agreement=agreement_out is not None,
        log_partition=False,
    )
    kl_out = _scatter(stats.kl, index, (batch, length))
    if log_ratio_out is not None:
        log_ratio_out.zero_()
        log_ratio_out.view(-1).index_copy_(0, index.to(log_ratio_out.device), stats.log_ratio.to(log_ratio_out.device))
    if agreement_out is not None:
        agreement_out.zero_()
        rows = index.to(agreement_out.device)
        agreement_out[0].view(-1).index_copy_(0, rows, stats.teacher_prob.to(agreement_out.device))
        agreement_out[1].view(-1).index_copy_(0, rows, stats.agreement.to(agreement_out.device))
    entropy_out = _scatter(stats.entropy, index, (batch, length))
    return kl_out, entropy_out


def _scatter(values: torch.Tensor, index: torch.Tensor, shape: tuple[int, int]) -> torch.Tensor:
    """[B, T] float32 zeros with ``values`` [M] at the flat positions ``index`` [M]."""
    out = torch.zeros(shape, dtype=torch.float32, device=values.device)
    return out.view(-1).index_copy_(0, index, values).view(shape)


class HeadStatistics(NamedTuple):
    """Per-row statistics of `lm_head_statistics`, every tensor [N] float32 (None when not asked for)."""

    log_z: torch.Tensor | None
    """logsumexp of the student's logits z_S (after logit scale, soft-cap and temperature): log pS(v) = z_S(v) - log_z;
    None with `log_partition=False`."""
    entropy: torch.Tensor
    """full-vocabulary student entropy."""
    target_log_prob: torch.Tensor | None
    """log pS(targets), with `targets`."""
    kl: torch.Tensor | None
    """reverse KL (per `divergence`), with `teacher_rows`."""
    log_ratio: torch.Tensor | None = None
    """log pT(targets) - log pS(targets), with `teacher_rows`, `targets` and `log_ratio=True`."""
    teacher_prob: torch.Tensor | None = None
    """pT(targets), with `teacher_rows`, `targets`, `agreement=True` and `divergence="full"`."""
    agreement: torch.Tensor | None = None
    """sum_v pS(v) pT(v), the teacher's probability of a token the student samples, likewise."""


@torch.no_grad()
def lm_head_statistics(
    student_rows: torch.Tensor,
    lm_head_weight: torch.Tensor,
    *,
    teacher_rows: torch.Tensor | None = None,
    targets: torch.Tensor | None = None,
    temperature: float = 1.0,
    chunk_size: int = DEFAULT_CHUNK_SIZE,
    lm_head_bias: torch.Tensor | None = None,
    divergence: str = "full",
    top_k: int = 20,
    logit_scale: float = 1.0,
    final_logit_softcapping: float | None = None,
    teacher_lm_head_weight: torch.Tensor | None = None,
    teacher_lm_head_bias: torch.Tensor | None = None,
    log_ratio: bool = False,
    agreement: bool = False,
    log_partition: bool = True,
) -> HeadStatistics:
    """The student's log-partition, entropy and target log-probability, and the reverse KL to the teacher, per row.

    The rows' logits go through the LM head ``chunk_size`` rows at a time (never an [N, V] tensor), with the
    transformation and numerics of `reverse_kl_and_entropy`; this is the row-level function it and the trainer's fused
    log-probability pass (`gear_trl.trainer.fused_head`) share: the student's head runs once for GRPO's log-probabilities
    and GEAR's divergence. The keyword arguments not listed below are as in `reverse_kl_and_entropy` (not validated
    here).

    Args:
        student_rows: [N, H], final hidden states; row n predicts token ``targets[n]``.
        lm_head_weight: [V, H].
        teacher_rows: [N, H] or None, the teacher's states at the same positions; gives ``kl``.
        targets: [N] long or None, the predicted tokens; gives ``target_log_prob``, and is ``y`` for
            ``divergence="sampled"`` and ``"sampled_signed"`` (required there).
        log_ratio: also give ``log_ratio``, the sampled token's teacher-minus-student log-probability (needs
            ``teacher_rows`` and ``targets``); it reads the logits the KL reads, at one gather per row.
        agreement: also give ``teacher_prob`` and ``agreement`` (needs ``teacher_rows``, ``targets`` and
            ``divergence="full"``), at one more dot per row.
        log_partition: give ``log_z`` (a caller that needs only the divergence and entropy saves its operators).

    Returns:
        HeadStatistics of [N] float32 tensors.
    """
    rows, vocab = student_rows.shape[0], lm_head_weight.shape[0]
    device = student_rows.device
    pair = teacher_rows is not None
    with_ratio = log_ratio and pair and targets is not None
    agree = agreement and pair and targets is not None and divergence == "full"
    # Each chunk's [n] results are kept and joined once at the end (one `cat` per output, not a slice and a copy
    # per chunk and output: fewer operators, hence less host time per chunk on a GPU).
    names = ["entropy"] + (["log_z"] if log_partition else []) + (["target_log_prob"] if targets is not None else [])
    names += ["kl"] if pair else []
    names += (["log_ratio"] if with_ratio else []) + (["teacher_prob", "agreement"] if agree else [])
    parts: dict[str, list[torch.Tensor]] = {name: [] for name in names}

    def result() -> HeadStatistics:
        joined = {
            name: torch.cat(chunks) if chunks else torch.empty(0, dtype=torch.float32, device=device)
            for name, chunks in parts.items()
        }
        return HeadStatistics(**{field: joined.get(field) for field in HeadStatistics._fields})

    if rows == 0:
        return result()

    # z = s * logits / tau: the factor scales each chunk's [2n, H] rows and the bias (in float32), never a [chunk, V]
    # tensor. With soft-capping only s goes in there, since the tanh comes before 1 / tau; the cap is then applied in
    # place to the chunk's logits.
    softcap = final_logit_softcapping
    scale = logit_scale if softcap is not None else logit_scale / temperature

    def scaled_bias(bias, weight):
        if bias is not None and scale != 1.0:
            bias = bias.float() * scale
        return None if bias is None else bias.to(weight.dtype if weight.dtype == torch.float64 else torch.float32)

    bias = scaled_bias(lm_head_bias, lm_head_weight)
    own_head = pair and teacher_lm_head_weight is not None  # the teacher's logits come from its own head
    teacher_bias = scaled_bias(teacher_lm_head_bias, teacher_lm_head_weight) if own_head else None

    # Extra memory: [2 x chunk, V] float32 logits (student and teacher side by side; [chunk, V] without a teacher)
    # and the student's exp [chunk, V], allocated once and reused by every chunk (fresh tensors per chunk cost page
    # faults on CPU).
    chunk = min(chunk_size, rows)
    logits_buf = torch.empty((2 if pair else 1) * chunk, vocab, dtype=torch.float32, device=device)
    exp_buf = torch.empty(chunk, vocab, dtype=torch.float32, device=device)
    full = divergence == "full"
    for start in range(0, rows, chunk):
        n = min(chunk, rows - start)
        span = slice(start, start + n)
        hidden = torch.cat((student_rows[span], teacher_rows[span])) if pair else student_rows[span]
        if scale != 1.0:
            hidden = hidden.float().mul_(scale)
        if own_head:
            z = logits_buf[: 2 * n]
            _lm_head(hidden[:n].to(lm_head_weight.dtype), lm_head_weight, bias, z[:n], exp_buf)
            weight_t = teacher_lm_head_weight
            _lm_head(hidden[n:].to(weight_t.dtype), weight_t, teacher_bias, z[n:], exp_buf)
        else:
            z = _lm_head(hidden.to(lm_head_weight.dtype), lm_head_weight, bias, logits_buf[: hidden.shape[0]], exp_buf)
        if softcap is not None:
            z.div_(softcap).tanh_().mul_(softcap / temperature)
        zs = z[:n]
        # Subtract each row's max: from here on zs = zS - max zS (and zt = zT - max zT). Softmax, KL and entropy are
        # unchanged, and every term below stays small (|z| ~ 30-50 would otherwise cost fp32 digits). "topk"
        # renormalizes over the support: its teacher needs no shift.
        shifted = z if pair and divergence != "topk" else zs
        peak = shifted.amax(dim=-1, keepdim=True)
        shifted.sub_(peak)
        es = torch.exp(zs, out=exp_buf[:n])  # unnormalized pS = es / ss
        ss = es.sum(dim=-1)
        lse_s = ss.log()  # logsumexp(zs)
        if log_partition:
            parts["log_z"].append(peak[:n, 0] + lse_s)
        y = chunk_target_log_prob = None
        if targets is not None:
            y = targets[span].unsqueeze(-1)
            chunk_target_log_prob = zs.gather(-1, y).squeeze(-1) - lse_s
            parts["target_log_prob"].append(chunk_target_log_prob)
        # H = lse(zS) - <pS, zS>, on the shifted logits; zs is not read again after this dot in "full".
        dot_ss = _row_dot(es, zs, spare=zs if full or not pair else None)
        parts["entropy"].append(lse_s - dot_ss / ss)
        if not pair:
            continue
        zt = z[n:]
        zt_y = zt.gather(-1, y).squeeze(-1) if with_ratio or agree else None  # before zt is overwritten
        if full:
            # KL(pS || pT) = <pS, zS - zT> - lse(zS) + lse(zT); zt is exponentiated in place once its dot is taken.
            cross = (dot_ss - _row_dot(es, zt, spare=None if agree else es)) / ss  # es is read again for <pS, pT>
            st = zt.exp_().sum(dim=-1)
            lse_t = st.log()
            chunk_kl = cross - (lse_s - lse_t)
            if agree:  # <pS, pT> = <es, exp(zt)> / (ss * st); exp(zt) is in zt now
                parts["agreement"].append(_row_dot(es, zt, spare=zt) / (ss * st))
                parts["teacher_prob"].append((zt_y - lse_t).exp())
        elif divergence == "topk":
            support = zs.topk(min(top_k, vocab), dim=-1).indices
            log_ps_k = zs.gather(-1, support)
            log_pt_k = zt.gather(-1, support)
            log_ps_k = log_ps_k - log_ps_k.logsumexp(dim=-1, keepdim=True)
            log_pt_k = log_pt_k - log_pt_k.logsumexp(dim=-1, keepdim=True)
            chunk_kl = (log_ps_k.exp() * (log_ps_k - log_pt_k)).sum(dim=-1)
            lse_t = zt.logsumexp(dim=-1) if with_ratio else None
        else:
            # log pS(y) - log pT(y) = (zs_y - lse(zs)) - (zt_y - lse(zt)).
            delta = (zs.gather(-1, y) - zt.gather(-1, y)).squeeze(-1)
            lse_t = zt.exp_().sum(dim=-1).log_()
            chunk_kl = delta - (lse_s - lse_t)
        if with_ratio:
            parts["log_ratio"].append((zt_y - lse_t) - chunk_target_log_prob)
        # Exact KL is >= 0 but rounding can dip below; the sampled estimate is clamped by definition (spec step 2).
        parts["kl"].append(chunk_kl if divergence == SIGNED_LOG_RATIO else chunk_kl.clamp_min(0.0))
    return result()


def _lm_head(
    hidden: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, out: torch.Tensor, scratch: torch.Tensor
) -> torch.Tensor:
    """[N, H] rows in the head's dtype -> float32 logits written into ``out`` [N, V].

    A 2-byte head (bf16, fp16) gives its logits in float32 without rounding them to its own dtype first: at Qwen3's
    151,936 tokens that rounding alone lifts the KL of two identical distributions to 2e-4..2e-3 nats, noise that
    max-normalization turns into onsets. On CUDA the matmul writes float32 itself (``out_dtype``, as TRL's
    ``chunked_logprob`` does); elsewhere the head is upcast a vocabulary tile at a time into ``scratch`` (a float32
    buffer of N x V elements), never as a whole [V, H] copy. ``bias`` is float32 (float64 with a float64 head).
    """
    if weight.dtype == torch.float32:
        if bias is None:
            return torch.mm(hidden, weight.t(), out=out)
        return torch.addmm(bias, hidden, weight.t(), out=out)
    if weight.element_size() != 2:
        target = torch.mm(hidden, weight.t()) if bias is None else torch.addmm(bias, hidden, weight.t())
        return out.copy_(target)
    if _MM_OUT_DTYPE and out.device.type in _OUT_DTYPE_DEVICES:
        torch.mm(hidden, weight.t(), out_dtype=torch.float32, out=out)
    else:
        vocab, width = weight.shape
        rows = scratch.numel() // width
        if rows < _MIN_TILE_ROWS:  # a small chunk's scratch would mean thousands of tiny matmuls
            rows = min(vocab, _MIN_TILE_ROWS)
            scratch = torch.empty(rows * width, dtype=torch.float32, device=out.device)
        rows = min(rows, vocab)
        states = hidden.float()
        for start in range(0, vocab, rows):
            stop = min(start + rows, vocab)
            tile = scratch.view(-1)[: (stop - start) * width].view(stop - start, width)
            tile.copy_(weight[start:stop])
            torch.mm(states, tile.t(), out=out[:, start:stop])
    if bias is not None:
        out.add_(bias)
    return out


def _row_dot(a: torch.Tensor, b: torch.Tensor, spare: torch.Tensor | None = None) -> torch.Tensor:
    """Row-wise dot product of two [N, V] tensors (N >= 1), without an [N, V] temporary.

    ``spare``, if given, is one of the two, free to be overwritten. On CPU: one BLAS dot per row, since a batched
    [1, V] x [V, 1] matmul (``bmm``) was 5-8x slower there and less accurate (bench/results/overhead/NOTES.md, "Divergence
    pass"); below ``_SMALL_VOCAB`` columns, where the per-row calls cost more than the arithmetic, an in-place product
    into ``spare`` and a row sum. Elsewhere one ``bmm``.
    """
    if a.device.type not in _PER_ROW_DOT_DEVICES:
        return torch.bmm(a.unsqueeze(1), b.unsqueeze(2)).view(-1)
    if spare is not None and a.shape[1] < _SMALL_VOCAB:
        return torch.mul(a, b, out=spare).sum(dim=-1)
    return torch.stack([torch.dot(x, y) for x, y in zip(a.unbind(), b.unbind())])
