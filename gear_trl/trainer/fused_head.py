"""GEAR's divergence inside GRPO's log-probability pass, so that the student's LM head runs once.

TRL's GRPOTrainer gets the loss's log-probabilities from a fused LM head (`trl.trainer.utils.add_fused_lm_head`): the
model's forward runs the backbone, then `ChunkedLogProbFunction` projects the hidden states through the head tile by
tile. GEAR's reverse KL and entropy need the same student logits. For one forward, `divergence_in_log_probs` puts in
TRL's place a function whose forward computes what TRL's does (log-probabilities and entropy, by
`gear_trl.credit.lm_head_statistics`) and, on the rows GEAR scores, the KL to the teacher from the same student logits;
its backward is TRL's own, unchanged.

It does so only where TRL folds its tiles with torch ops (CPU, any device without Triton): there TRL's fold allocates
a fresh [tokens, 32,768] float32 tile per operation, and the shared pass costs less than TRL's forward alone. With
Triton (CUDA, XPU) TRL's fold is one kernel, which a torch forward would not beat; nor does it when the LM head runs in
another dtype than its weight (autocast), which would mean casting the whole head per chunk. In those cases, or if TRL
asks for more outputs than log-probabilities and entropy, nothing is swapped and the trainer computes the divergence
in a pass of its own (`reverse_kl_and_entropy`) from the hidden states the same forward produced. Every condition is
fixed by the device, the dtypes and TRL's code, never by a batch's data, so all ranks take the same path.
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass, field

import torch
import trl.trainer.utils as trl_utils
from trl.kernels.chunked_logprob import OPTIONAL_OUTPUTS, ChunkedLogProbFunction, _use_triton

from ..credit import lm_head_statistics

SUPPORTED_OUTPUTS = frozenset({"log_probs", "entropy"})


@dataclass
class FusedDivergence:
    """One loss forward's request: the teacher's states and GEAR's mask in, KL and entropy out.

    teacher_hidden: [B, T, H], the teacher's final states at the completion positions (as `reverse_kl_and_entropy`).
    mask: [B, T] bool, the positions GEAR scores. kl, entropy: [B, T] float32 after the forward (0 off the mask), or
    None when the forward did not go through the swapped function (`skipped` says why). With `with_log_ratio`,
    log_ratio: [B, T] float32, the sampled token's log pT - log pS (`reverse_kl_and_entropy`'s `log_ratio_out`).
    With `with_agreement`, agreement: [2, B, T] float32, pT(y_t) and sum_v pS(v) pT(v) (its `agreement_out`).
    """

    teacher_hidden: torch.Tensor
    mask: torch.Tensor
    chunk_size: int
    divergence: str = "full"
    top_k: int = 20
    teacher_has_own_head: bool = False  # a teacher model of its own (`teacher: base` / `ema` without PEFT)
    with_log_ratio: bool = False
    with_agreement: bool = False
    kl: torch.Tensor | None = None
    entropy: torch.Tensor | None = None
    log_ratio: torch.Tensor | None = None
    agreement: torch.Tensor | None = None
    skipped: str | None = None
    _positions: tuple[torch.Tensor, torch.Tensor] | None = field(default=None, repr=False)

    def unsupported(self, hidden: torch.Tensor, weight: torch.Tensor, outputs) -> str | None:
        """Why this forward cannot compute the divergence with TRL's log-probabilities, or None if it can."""
        if self.kl is not None:
            return "the forward projected a second batch of hidden states"
        if self.teacher_has_own_head:
            return "the teacher is a model of its own, with its own LM head"
        if _use_triton(hidden.device):
            return f"TRL folds the LM-head tiles with Triton on {hidden.device.type}"
        device = hidden.device.type
        compute_dtype = torch.get_autocast_dtype(device) if torch.is_autocast_enabled(device) else hidden.dtype
        if compute_dtype != weight.dtype:
            return f"the LM head runs in {compute_dtype} on {weight.dtype} weights"
        extra = set(outputs) - SUPPORTED_OUTPUTS
        if extra:
            return f"TRL asks for {sorted(extra)}"
        batch, length = self.mask.shape
        if hidden.dim() != 2 or hidden.shape[0] % batch or hidden.shape[0] // batch < length:
            return f"TRL projected {tuple(hidden.shape)} hidden states for a batch of {batch} x {length} completions"
        return None

    def rows(self, total: int) -> torch.Tensor:
        """[M] indices of the mask's positions among TRL's `total` rows: the batch's [B, L - 1] next-token positions
        flattened, where completion token t of row i is predicted at column L - 1 - T + t."""
        batch, length = self.mask.shape
        columns = total // batch
        i, t = self.positions()
        return i * columns + (columns - length) + t

    def positions(self) -> tuple[torch.Tensor, torch.Tensor]:
        """The mask's positions, ([M] rows, [M] columns) in row-major order, found once (one host-device
        synchronization) and read by every gather and scatter of the forward."""
        if self._positions is None:
            self._positions = self.mask.nonzero(as_tuple=True)
        return self._positions

    def scatter(self, values: torch.Tensor, out: torch.Tensor) -> None:
        """Write [M] `values` at the mask's positions of `out` [B, T] (as `out[mask] = values`)."""
        out[self.positions()] = values


class _LogProbsWithDivergence(torch.autograd.Function):
    """TRL's `ChunkedLogProbFunction` (same arguments, outputs and backward) plus GEAR's divergence as a side result."""

    @staticmethod
    def forward(
        ctx,
        hidden: torch.Tensor,  # [N, H]
        weight: torch.Tensor,  # [V, H]
        bias: torch.Tensor | None,  # [V]
        targets: torch.Tensor,  # [N]
        temperature: float,
        chunk_size: int,
        final_logit_softcapping: float | None,
        logit_scale: float,
        outputs: tuple[str, ...],
        request: FusedDivergence,
    ):
        ctx.set_materialize_grads(False)
        total = hidden.shape[0]
        scored = request.rows(total)
        others = torch.ones(total, dtype=torch.bool, device=hidden.device)
        others[scored] = False
        others = others.nonzero(as_tuple=True)[0]
        states = hidden.detach()
        common = {
            "temperature": temperature,
            "chunk_size": request.chunk_size,
            "lm_head_bias": bias,
            "divergence": request.divergence,
            "top_k": request.top_k,
            "logit_scale": logit_scale,
            "final_logit_softcapping": final_logit_softcapping,
        }
        paired = lm_head_statistics(
            states[scored],
            weight,
            teacher_rows=request.teacher_hidden[request.positions()],
            targets=targets[scored],
            log_ratio=request.with_log_ratio,
            agreement=request.with_agreement,
            **common,
        )
        alone = lm_head_statistics(states[others], weight, targets=targets[others], **common)
        log_z = torch.empty(total, dtype=torch.float32, device=hidden.device)
        entropy = torch.empty_like(log_z)
        log_probs = torch.empty_like(log_z)
        for index, stats in ((scored, paired), (others, alone)):
            log_z[index] = stats.log_z
            entropy[index] = stats.entropy
            log_probs[index] = stats.target_log_prob
        request.kl = torch.zeros(request.mask.shape, dtype=torch.float32, device=hidden.device)
        request.entropy = torch.zeros_like(request.kl)
        request.scatter(paired.kl, request.kl)
        request.scatter(paired.entropy, request.entropy)
        if request.with_log_ratio:
            request.log_ratio = torch.zeros_like(request.kl)
            request.scatter(paired.log_ratio, request.log_ratio)
        if request.with_agreement:
            request.agreement = torch.zeros((2, *request.mask.shape), dtype=torch.float32, device=hidden.device)
            request.scatter(paired.teacher_prob, request.agreement[0])
            request.scatter(paired.agreement, request.agreement[1])

        # What TRL's backward reads (`ChunkedLogProbFunction.forward` saves the same).
        ctx.save_for_backward(hidden, weight, bias, targets, log_z, entropy if "entropy" in outputs else log_z)
        ctx.compute_dtype = weight.dtype
        ctx.chunk_size = chunk_size
        ctx.kernel_args = {
            "logit_scale": logit_scale,
            "softcap": final_logit_softcapping or 1.0,
            "inv_t": 1 / temperature,
            "HAS_SOFTCAP": final_logit_softcapping is not None,
        }
        return log_probs, entropy if "entropy" in outputs else None, None, None, None

    @staticmethod
    def backward(ctx, *grads):
        return (*ChunkedLogProbFunction.backward(ctx, *grads), None)


class _Swapped:
    """Stands where `trl.trainer.utils` looks up `_ChunkedLogProbFunction` during one forward."""

    def __init__(self, original, request: FusedDivergence):
        self.original = original
        self.request = request

    def apply(
        self,
        hidden,
        weight,
        bias,
        targets,
        temperature,
        chunk_size,
        final_logit_softcapping=None,
        logit_scale=1.0,
        outputs=OPTIONAL_OUTPUTS,  # TRL's default: every optional output (which the swap then leaves to TRL)
    ):
        args = (hidden, weight, bias, targets, temperature, chunk_size, final_logit_softcapping, logit_scale, outputs)
        reason = self.request.unsupported(hidden, weight, outputs)
        if reason is not None:
            self.request.skipped = reason
            return self.original.apply(*args)
        return _LogProbsWithDivergence.apply(*args, self.request)


@contextmanager
def divergence_in_log_probs(request: FusedDivergence):
    """Within the block, TRL's fused LM head also fills `request.kl` and `request.entropy` (see the module's text)."""
    original = getattr(trl_utils, "_ChunkedLogProbFunction", None)
    if original is not ChunkedLogProbFunction:
        request.skipped = "this TRL version's fused LM head has another structure"
        yield request
        return
    trl_utils._ChunkedLogProbFunction = _Swapped(original, request)
    try:
        yield request
    finally:
        trl_utils._ChunkedLogProbFunction = original
    if request.kl is None and request.skipped is None:
        request.skipped = "the forward did not use TRL's fused LM head"
