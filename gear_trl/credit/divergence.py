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
        raise ValueError(
            f"agreement_out needs divergence='full' (the whole teacher distribution); got {divergence!r}."
        )
    if agreement_out is not None and agreement_out.shape != (2, batch, length):
        raise ValueError(f"agreement_out must be [2, {batch}, {length}]; got shape {tuple(agreement_out.shape)}.")
    if log_ratio_out is not None and log_ratio_out.shape != (batch, length):
        raise ValueError(f"log_ratio_out must be [{batch}, {length}]; got shape {tuple(log_ratio_out.shape)}.")
    if sampled and (token_ids is None or token_ids.shape != (batch, length)):
        got = None if token_ids is None else tuple(token_ids.shape)
        raise ValueError(f"divergence={divergence!r} needs token_ids of shape [{batch}, {length}]; got {got}.")

    device = student_hidden.device
    if mask.dtype != torch.bool or mask.device != device:
        mask = mask.to(device=device, dtype=torch.bool)
    # One host-device synchronization: the masked positions, read by every gather and by the one scatter below
    # (boolean indexing would find them again at each, and wait for the device each time). No flattened copy of a
    # strided [B, T, H] either: rows and columns index it as it is.
    row, column = mask.nonzero().unbind(1)
    if sampled and token_ids.device != device:
        token_ids = token_ids.to(device)
    _, stacked = _head_statistics(
        student_hidden[row, column],
        lm_head_weight,
        teacher_rows=teacher_hidden[row, column],
        targets=token_ids[row, column] if sampled else None,
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
    # `stacked`'s first rows are kl, entropy, then log_ratio and (teacher_prob, agreement) when asked for
    # (_OUTPUTS' order): all of them go to their [B, T] places in one scatter.
    wanted = 2 + (log_ratio_out is not None) + 2 * (agreement_out is not None)
    out = torch.zeros((wanted, batch, length), dtype=torch.float32, device=device)
    out[:, row, column] = stacked if stacked.shape[0] == wanted else stacked[:wanted]
    kl_out, entropy_out, *extra = out.unbind()
    if log_ratio_out is not None:
        log_ratio_out.copy_(extra[0])
    if agreement_out is not None:
        agreement_out.copy_(out[wanted - 2 :])
    return kl_out, entropy_out


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
    return _head_statistics(
        student_rows,
        lm_head_weight,
        teacher_rows=teacher_rows,
        targets=targets,
        temperature=temperature,
        chunk_size=chunk_size,
        lm_head_bias=lm_head_bias,
        divergence=divergence,
        top_k=top_k,
        logit_scale=logit_scale,
        final_logit_softcapping=final_logit_softcapping,
        teacher_lm_head_weight=teacher_lm_head_weight,
        teacher_lm_head_bias=teacher_lm_head_bias,
        log_ratio=log_ratio,
        agreement=agreement,
        log_partition=log_partition,
    )[0]


_OUTPUTS = ("kl", "entropy", "log_ratio", "teacher_prob", "agreement", "target_log_prob", "log_z")
"""The order of `_head_statistics`' stacked outputs (those asked for): `reverse_kl_and_entropy` scatters its first
rows."""


def _head_statistics(
    student_rows: torch.Tensor,
    lm_head_weight: torch.Tensor,
    *,
    teacher_rows: torch.Tensor | None,
    targets: torch.Tensor | None,
    temperature: float,
    chunk_size: int,
    lm_head_bias: torch.Tensor | None,
    divergence: str,
    top_k: int,
    logit_scale: float,
    final_logit_softcapping: float | None,
    teacher_lm_head_weight: torch.Tensor | None,
    teacher_lm_head_bias: torch.Tensor | None,
    log_ratio: bool,
    agreement: bool,
    log_partition: bool,
) -> tuple[HeadStatistics, torch.Tensor]:
    """`lm_head_statistics`, and its outputs as the rows of one [k, N] float32 tensor, in `_OUTPUTS`' order.

    Operators per chunk, since each is a kernel launch and host time on a GPU (bench/host_cost.py counts them): the
    chunk's views (logits, exp, their [n, 1, V] / [n, V, 1] forms for `bmm`) are made once per chunk size, each
    per-row intermediate (sums, log-sums, row dots, gathered logits) is written into its slot of an [N] buffer
    (`out=`), and the exactly rounded arithmetic that joins them (`-`, `/`, `*`, the clamp) runs once over all N rows
    after the loop: the same operations on the same values as chunk by chunk, hence the same numbers. The
    transcendental ones (`exp`, `log`) stay per chunk, on the chunk's own tensors (a CPU's vectorized and scalar
    `log` may differ in the last bit, and which elements take which depends on the tensor's length).
    """
    rows, vocab = student_rows.shape[0], lm_head_weight.shape[0]
    device = student_rows.device
    pair = teacher_rows is not None
    with_ratio = log_ratio and pair and targets is not None
    agree = agreement and pair and targets is not None and divergence == "full"
    full = divergence == "full"
    sampled = pair and divergence not in ("full", "topk")
    asked = {
        "kl": pair,
        "entropy": True,
        "log_ratio": with_ratio,
        "teacher_prob": agree,
        "agreement": agree,
        "target_log_prob": targets is not None,
        "log_z": log_partition,
    }
    names = [name for name in _OUTPUTS if asked[name]]
    stacked = torch.empty(len(names), rows, dtype=torch.float32, device=device)
    out = dict(zip(names, stacked.unbind(), strict=True))
    result = HeadStatistics(**{field: out.get(field) for field in HeadStatistics._fields}), stacked
    if rows == 0:
        return result

    # z = s * logits / tau: the factor scales each chunk's [2n, H] rows and the bias (in float32), never a [chunk, V]
    # tensor. With soft-capping only s goes in there, since the tanh comes before 1 / tau; the cap is then applied in
    # place to the chunk's logits.
    softcap = final_logit_softcapping
    scale = logit_scale if softcap is not None else logit_scale / temperature

    def scaled_bias(bias, weight):
        if bias is not None and scale != 1.0:
            bias = bias.float() * scale
        return None if bias is None else bias.to(weight.dtype if weight.dtype == torch.float64 else torch.float32)

    def head_input(hidden, weight):  # the rows as the head's matmul takes them (a fresh tensor where scaled)
        if scale != 1.0:
            hidden = torch.mul(hidden if hidden.dtype == torch.float32 else hidden.float(), scale)
        return hidden if hidden.dtype == weight.dtype else hidden.to(weight.dtype)

    bias = scaled_bias(lm_head_bias, lm_head_weight)
    own_head = pair and teacher_lm_head_weight is not None  # the teacher's logits come from its own head
    teacher_bias = scaled_bias(teacher_lm_head_bias, teacher_lm_head_weight) if own_head else None
    weight_t = lm_head_weight.t()
    teacher_weight_t = teacher_lm_head_weight.t() if own_head else None

    # Extra memory: [2 x chunk, V] float32 logits (student and teacher side by side; [chunk, V] without a teacher)
    # and the student's exp [chunk, V], allocated once and reused by every chunk (fresh tensors per chunk cost page
    # faults on CPU).
    chunk = min(chunk_size, rows)
    logits_buf = torch.empty((2 if pair else 1) * chunk, vocab, dtype=torch.float32, device=device)
    exp_buf = torch.empty(chunk, vocab, dtype=torch.float32, device=device)
    batched = device.type not in _PER_ROW_DOT_DEVICES  # row dots by `bmm` (see _row_dot)

    # Per-row intermediates, [N] each, filled chunk by chunk: ss = sum exp(zs), lse_s = log ss, the row dots <es, zs>
    # (and <es, zt>, <es, exp zt>), st = sum exp(zt), lse_t, and the target's shifted logits zs_y, zt_y.
    needed = ["ss", "lse_s", "dot_ss"] + (["zs_y"] if targets is not None else [])
    if pair:
        needed += ["dot_st", "st"] if full else ["st"] if sampled else []
        needed += ["lse_t"] if full or sampled or with_ratio else []
        needed += ["zt_y"] if with_ratio or agree or sampled else []
        needed += ["dot_pt"] if agree else []
    per_row = dict(
        zip(needed, torch.empty(len(needed), rows, dtype=torch.float32, device=device).unbind(), strict=True)
    )
    # Each chunk's slot of them, as the operators writing it take it: [n] (sums, logs; row dots off the bmm branch),
    # [n, 1] (gathers), [n, 1, 1] (bmm). Only the forms used are made.
    dots = [name for name in ("dot_ss", "dot_st", "dot_pt") if name in per_row]
    flat_names = ["ss", "lse_s", "st", "lse_t"] + ([] if batched else dots) + (["zt_y"] if agree else [])
    flat = {name: per_row[name].split(chunk) for name in flat_names if name in per_row}
    column = {name: per_row[name].unsqueeze(1).split(chunk) for name in ("zs_y", "zt_y") if name in per_row}
    cube = {name: per_row[name].view(rows, 1, 1).split(chunk) for name in dots} if batched else {}
    chunk_outs = ["teacher_prob", "log_z"] + (["kl"] if divergence == "topk" else [])  # the rest joined after the loop
    outs = {name: out[name].split(chunk) for name in chunk_outs if name in out}

    views: dict[int, tuple] = {}

    def views_of(n: int) -> tuple:
        """The [n]-row chunk's logits z ([2n, V] with a teacher: student rows, then teacher rows), zs, zt, the
        student's exp es, and for `bmm` es [n, 1, V], zs and zt [n, V, 1]; made once per chunk size (at most two)."""
        if n not in views:
            z = logits_buf if n == chunk else logits_buf[: (2 if pair else 1) * n]
            zs, zt = (z[:n], z[n:]) if pair else (z, None)
            es = exp_buf if n == chunk else exp_buf[:n]
            forms = (es.unsqueeze(1), zs.unsqueeze(2), zt.unsqueeze(2) if pair and full else None) if batched else None
            views[n] = (z, zs, zt, es, forms)
        return views[n]

    def row_dot(c, name, a, b, spare, form_a, form_b):
        if batched:
            return _row_dot(a, b, batched=(form_a, form_b, cube[name][c]))  # into per_row[name]
        return _row_dot(a, b, spare=spare, out=flat[name][c])

    students = student_rows.split(chunk)
    teachers = teacher_rows.split(chunk) if pair else [None] * len(students)
    ys = targets.unsqueeze(-1).split(chunk) if targets is not None else [None] * len(students)
    for c, (s_rows, t_rows, y) in enumerate(zip(students, teachers, ys, strict=True)):
        n = s_rows.shape[0]
        z, zs, zt, es, forms = views_of(n)
        if own_head:
            _lm_head(head_input(s_rows, lm_head_weight), lm_head_weight, bias, zs, exp_buf, weight_t)
            weight = teacher_lm_head_weight
            _lm_head(head_input(t_rows, weight), weight, teacher_bias, zt, exp_buf, teacher_weight_t)
        else:
            hidden = torch.cat((s_rows, t_rows)) if pair else s_rows
            _lm_head(head_input(hidden, lm_head_weight), lm_head_weight, bias, z, exp_buf, weight_t)
        if softcap is not None:
            z.div_(softcap).tanh_().mul_(softcap / temperature)
        # Subtract each row's max: from here on zs = zS - max zS (and zt = zT - max zT). Softmax, KL and entropy are
        # unchanged, and every term below stays small (|z| ~ 30-50 would otherwise cost fp32 digits). "topk"
        # renormalizes over the support: its teacher needs no shift.
        shifted = z if pair and divergence != "topk" else zs
        peak = shifted.amax(dim=-1, keepdim=True)
        shifted.sub_(peak)
        torch.exp(zs, out=es)  # unnormalized pS = es / ss
        torch.log(torch.sum(es, dim=-1, out=flat["ss"][c]), out=flat["lse_s"][c])  # lse(zs)
        if log_partition:
            torch.add(peak[:n, 0], flat["lse_s"][c], out=outs["log_z"][c])
        if targets is not None:  # the target's logit, before the row dot may overwrite zs
            torch.gather(zs, -1, y, out=column["zs_y"][c])
        # H = lse(zS) - <pS, zS>, on the shifted logits; zs is not read again after this dot in "full".
        row_dot(c, "dot_ss", es, zs, zs if full or not pair else None, *(forms[:2] if batched else (None, None)))
        if not pair:
            continue
        if "zt_y" in column:  # before zt is overwritten
            torch.gather(zt, -1, y, out=column["zt_y"][c])
        if full:
            # KL(pS || pT) = <pS, zS - zT> - lse(zS) + lse(zT); zt is exponentiated in place once its dot is taken.
            row_dot(c, "dot_st", es, zt, None if agree else es, *((forms[0], forms[2]) if batched else (None, None)))
            torch.log(torch.sum(zt.exp_(), dim=-1, out=flat["st"][c]), out=flat["lse_t"][c])
            if agree:  # <pS, pT> = <es, exp(zt)> / (ss * st); exp(zt) is in zt now
                row_dot(c, "dot_pt", es, zt, zt, *((forms[0], forms[2]) if batched else (None, None)))
                torch.sub(flat["zt_y"][c], flat["lse_t"][c], out=outs["teacher_prob"][c]).exp_()
        elif divergence == "topk":
            support = zs.topk(min(top_k, vocab), dim=-1).indices
            log_ps_k = zs.gather(-1, support)
            log_pt_k = zt.gather(-1, support)
            log_ps_k = log_ps_k - log_ps_k.logsumexp(dim=-1, keepdim=True)
            log_pt_k = log_pt_k - log_pt_k.logsumexp(dim=-1, keepdim=True)
            torch.sum(log_ps_k.exp() * (log_ps_k - log_pt_k), dim=-1, out=outs["kl"][c])
            if with_ratio:
                torch.logsumexp(zt, dim=-1, out=flat["lse_t"][c])
        else:
            # log pS(y) - log pT(y) = (zs_y - lse(zs)) - (zt_y - lse(zt)), joined below.
            torch.log(torch.sum(zt.exp_(), dim=-1, out=flat["st"][c]), out=flat["lse_t"][c])

    # The arithmetic that joins the per-row intermediates, over all N rows at once (exactly rounded operations: the
    # same values as chunk by chunk). H = lse_s - <es, zs> / ss.
    ss, lse_s = per_row["ss"], per_row["lse_s"]
    entropy = torch.div(per_row["dot_ss"], ss, out=out["entropy"])
    torch.sub(lse_s, entropy, out=entropy)
    if targets is not None:  # log pS(y) = zs_y - lse(zs)
        torch.sub(per_row["zs_y"], lse_s, out=out["target_log_prob"])
    if not pair:
        return result
    kl = out["kl"]
    if full:  # (<es, zs> - <es, zt>) / ss - (lse_s - lse_t)
        torch.sub(per_row["dot_ss"], per_row["dot_st"], out=kl).div_(ss).sub_(lse_s - per_row["lse_t"])
    elif sampled:  # (zs_y - zt_y) - (lse_s - lse_t)
        torch.sub(per_row["zs_y"], per_row["zt_y"], out=kl).sub_(lse_s - per_row["lse_t"])
    if divergence != SIGNED_LOG_RATIO:
        # Exact KL is >= 0 but rounding can dip below; the sampled estimate is clamped by definition (spec step 2).
        kl.clamp_min_(0.0)
    if with_ratio:  # log pT(y) - log pS(y) = (zt_y - lse_t) - (zs_y - lse_s)
        torch.sub(per_row["zt_y"], per_row["lse_t"], out=out["log_ratio"]).sub_(out["target_log_prob"])
    if agree:
        torch.div(per_row["dot_pt"], ss * per_row["st"], out=out["agreement"])
    return result


def _lm_head(
    hidden: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None,
    out: torch.Tensor,
    scratch: torch.Tensor,
    weight_t: torch.Tensor | None = None,
) -> torch.Tensor:
    """[N, H] rows in the head's dtype -> float32 logits written into ``out`` [N, V].

    A 2-byte head (bf16, fp16) gives its logits in float32 without rounding them to its own dtype first: at Qwen3's
    151,936 tokens that rounding alone lifts the KL of two identical distributions to 2e-4..2e-3 nats, noise that
    max-normalization turns into onsets. On CUDA the matmul writes float32 itself (``out_dtype``, as TRL's
    ``chunked_logprob`` does); elsewhere the head is upcast a vocabulary tile at a time into ``scratch`` (a float32
    buffer of N x V elements), never as a whole [V, H] copy. ``bias`` is float32 (float64 with a float64 head).
    ``weight_t``: ``weight.t()``, made once by a caller that calls this per chunk (one operator fewer each time).
    """
    if weight_t is None:
        weight_t = weight.t()
    if weight.dtype == torch.float32:
        if bias is None:
            return torch.mm(hidden, weight_t, out=out)
        return torch.addmm(bias, hidden, weight_t, out=out)
    if weight.element_size() != 2:
        target = torch.mm(hidden, weight_t) if bias is None else torch.addmm(bias, hidden, weight_t)
        return out.copy_(target)
    if _MM_OUT_DTYPE and out.device.type in _OUT_DTYPE_DEVICES:
        torch.mm(hidden, weight_t, out_dtype=torch.float32, out=out)
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


def _row_dot(
    a: torch.Tensor,
    b: torch.Tensor,
    spare: torch.Tensor | None = None,
    *,
    out: torch.Tensor | None = None,
    batched: tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None = None,
) -> torch.Tensor:
    """Row-wise dot product of two [N, V] tensors (N >= 1), without an [N, V] temporary.

    ``spare``, if given, is one of the two, free to be overwritten. On CPU: one BLAS dot per row, since a batched
    [1, V] x [V, 1] matmul (``bmm``) was 5-8x slower there and less accurate (bench/results/overhead/NOTES.md, "Divergence
    pass"); below ``_SMALL_VOCAB`` columns, where the per-row calls cost more than the arithmetic, an in-place product
    into ``spare`` and a row sum. Elsewhere one ``bmm``. ``out``: an [N] float32 tensor to write the dots into.
    ``batched``: for the ``bmm``, ``a`` as [N, 1, V], ``b`` as [N, V, 1] and an [N, 1, 1] float32 output, views a
    caller made once and the ``bmm`` takes as they are (no view operators per call); that output is returned.
    """
    if a.device.type not in _PER_ROW_DOT_DEVICES:
        if batched is not None:
            return torch.bmm(batched[0], batched[1], out=batched[2])
        dots = torch.bmm(a.unsqueeze(1), b.unsqueeze(2)).view(-1)
        return dots if out is None else out.copy_(dots)
    if spare is not None and a.shape[1] < _SMALL_VOCAB:
        return torch.sum(torch.mul(a, b, out=spare), dim=-1, out=out)
    return torch.stack([torch.dot(x, y) for x, y in zip(a.unbind(), b.unbind())], out=out)
