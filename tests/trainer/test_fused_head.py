"""gear_trl.trainer.fused_head: inside the swap, TRL's fused LM head returns what TRL's own function returns (values and
gradients) and GEAR's divergence equals the separate pass; outside it, or where it cannot apply, TRL's is untouched."""

import pytest
import torch
import trl.trainer.utils as trl_utils
from trl.kernels.chunked_logprob import ChunkedLogProbFunction

from gear_trl.credit import reverse_kl_and_entropy
from gear_trl.trainer.fused_head import FusedDivergence, divergence_in_log_probs

B, P, T, H = 3, 4, 5, 8  # rows, prompt tokens, completion tokens, hidden size; TRL scores B x (P + T - 1) rows


def case(vocab=37, seed=0, dtype=torch.float32):
    generator = torch.Generator().manual_seed(seed)
    hidden = torch.randn(B, P + T - 1, H, generator=generator)
    teacher = torch.randn(B, T, H, generator=generator)
    weight = torch.randn(vocab, H, generator=generator) / 2
    bias = torch.randn(vocab, generator=generator) / 4
    targets = torch.randint(0, vocab, (B, P + T - 1), generator=generator)
    mask = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 0, 0, 0], [0, 0, 0, 0, 0]], dtype=torch.bool)
    return hidden.to(dtype), teacher.to(dtype), weight.to(dtype), bias.to(dtype), targets, mask


def run(function, hidden, weight, bias, targets, options, outputs=("log_probs", "entropy")):
    """TRL's call (as `add_fused_lm_head` makes it) and the gradients of a loss using both outputs."""
    hidden = hidden.reshape(-1, hidden.shape[-1]).detach().requires_grad_()
    weight = weight.detach().requires_grad_()
    bias = bias.detach().requires_grad_()
    log_probs, entropy, *_ = function.apply(hidden, weight, bias, targets.reshape(-1), *options, outputs)
    grad_out = torch.linspace(-1, 1, log_probs.numel()).to(log_probs.dtype)
    loss = (log_probs * grad_out).sum() + (0.3 * entropy).sum() if entropy is not None else log_probs @ grad_out
    loss.backward()
    return log_probs.detach(), None if entropy is None else entropy.detach(), hidden.grad, weight.grad, bias.grad


@pytest.mark.parametrize(
    ("temperature", "softcap", "logit_scale", "divergence"),
    [(1.0, None, 1.0, "full"), (0.7, None, 1.0, "full"), (0.9, 2.0, 1.5, "full"), (1.0, None, 1.0, "topk"),
     (0.8, None, 1.0, "sampled")],
)  # fmt: skip
@pytest.mark.parametrize("vocab", [37, 9001])  # below and above divergence._SMALL_VOCAB (two row-dot methods)
def test_fused_log_probs_equal_trls_and_the_divergence_the_separate_passes(
    temperature, softcap, logit_scale, divergence, vocab
):
    hidden, teacher, weight, bias, targets, mask = case(vocab)
    options = (temperature, 16, softcap, logit_scale)  # TRL's vocabulary tile of 16: several tiles per row
    expected = run(ChunkedLogProbFunction, hidden, weight, bias, targets, options)
    request = FusedDivergence(teacher, mask, chunk_size=4, divergence=divergence, top_k=5)
    with divergence_in_log_probs(request):
        fused = run(trl_utils._ChunkedLogProbFunction, hidden, weight, bias, targets, options)
    assert request.skipped is None
    for name, got, want in zip(("log_probs", "entropy", "d hidden", "d weight", "d bias"), fused, expected):
        torch.testing.assert_close(got, want, atol=2e-5, rtol=1e-4, msg=name)

    # GEAR's divergence: the separate pass on the states of the completion positions.
    student = hidden[:, -T:]
    completion_ids = targets[:, -T:]
    kl, entropy = reverse_kl_and_entropy(
        student, teacher, weight, mask, temperature=temperature, chunk_size=3, lm_head_bias=bias,
        divergence=divergence, top_k=5, token_ids=completion_ids, logit_scale=logit_scale,
        final_logit_softcapping=softcap,
    )  # fmt: skip
    torch.testing.assert_close(request.kl, kl, atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(request.entropy, entropy, atol=1e-5, rtol=1e-4)
    assert (request.kl[~mask] == 0).all() and (request.entropy[~mask] == 0).all()
    assert request.kl[mask].gt(0).all() or divergence == "sampled"  # sampled is clamped at 0 by definition
    # The mask's positions are the last T of each row's next-token positions: one column off and they would differ.
    shifted, _ = reverse_kl_and_entropy(hidden[:, -T - 1 : -1], teacher, weight, mask, temperature=temperature,
                                        lm_head_bias=bias, logit_scale=logit_scale, final_logit_softcapping=softcap)  # fmt: skip
    if divergence == "full":
        assert not torch.allclose(shifted, request.kl, atol=1e-3)


def test_fused_log_probs_in_bfloat16_follow_trl():
    hidden, teacher, weight, bias, targets, mask = case(dtype=torch.bfloat16)
    options = (1.0, 16, None, 1.0)
    expected = run(ChunkedLogProbFunction, hidden, weight, bias, targets, options)
    request = FusedDivergence(teacher, mask, chunk_size=4)
    with divergence_in_log_probs(request):
        fused = run(trl_utils._ChunkedLogProbFunction, hidden, weight, bias, targets, options)
    assert request.skipped is None
    for got, want in zip(fused, expected):
        torch.testing.assert_close(got.float(), want.float(), atol=0.05, rtol=0.02)
    assert fused[2].dtype == torch.bfloat16  # TRL's backward casts the gradients back


def test_the_swap_is_undone_and_unsupported_calls_go_to_trl():
    hidden, teacher, weight, bias, targets, mask = case()
    options = (1.0, 16, None, 1.0)
    expected = run(ChunkedLogProbFunction, hidden, weight, bias, targets, options, outputs=("log_probs", "is_top1"))
    request = FusedDivergence(teacher, mask, chunk_size=4)
    with divergence_in_log_probs(request):
        got = run(trl_utils._ChunkedLogProbFunction, hidden, weight, bias, targets, options, ("log_probs", "is_top1"))
    assert trl_utils._ChunkedLogProbFunction is ChunkedLogProbFunction
    assert request.kl is None and "is_top1" in request.skipped
    torch.testing.assert_close(got[0], expected[0])

    # A layout that is not B x (L - 1) rows is refused, not misread.
    request = FusedDivergence(teacher, mask, chunk_size=4)
    with divergence_in_log_probs(request):
        run(trl_utils._ChunkedLogProbFunction, hidden[:, :-1, :][:2], weight, bias, targets[:, :-1][:2], options)
    assert request.kl is None and "batch of 3 x 5" in request.skipped

    # A forward that never reaches the fused head says so; an error inside the block still restores TRL's function.
    request = FusedDivergence(teacher, mask, chunk_size=4)
    with pytest.raises(RuntimeError), divergence_in_log_probs(request):
        raise RuntimeError("model failed")
    assert trl_utils._ChunkedLogProbFunction is ChunkedLogProbFunction
    with divergence_in_log_probs(request):
        pass
    assert request.skipped == "the forward did not use TRL's fused LM head"


def test_a_second_projection_in_the_same_forward_goes_to_trl():
    hidden, teacher, weight, bias, targets, mask = case()
    options = (1.0, 16, None, 1.0)
    request = FusedDivergence(teacher, mask, chunk_size=4)
    with divergence_in_log_probs(request):
        run(trl_utils._ChunkedLogProbFunction, hidden, weight, bias, targets, options)
        first = request.kl.clone()
        run(trl_utils._ChunkedLogProbFunction, hidden * 2, weight, bias, targets, options)
    torch.testing.assert_close(request.kl, first)
    assert "second" in request.skipped


@pytest.mark.parametrize("vocab", [37, 9001])
def test_the_fused_pass_gives_the_separate_passes_agreement(vocab):
    # `distillation_signal: agreement`: pT(y_t) and sum_v pS(v) pT(v) from TRL's forward, as the separate pass has them.
    hidden, teacher, weight, bias, targets, mask = case(vocab, seed=2)
    options = (0.8, 16, None, 1.0)
    expected = run(ChunkedLogProbFunction, hidden, weight, bias, targets, options)
    request = FusedDivergence(teacher, mask, chunk_size=4, with_log_ratio=True, with_agreement=True)
    with divergence_in_log_probs(request):
        fused = run(trl_utils._ChunkedLogProbFunction, hidden, weight, bias, targets, options)
    assert request.skipped is None
    for got, want in zip(fused, expected):  # TRL's outputs and gradients untouched
        torch.testing.assert_close(got, want, atol=2e-5, rtol=1e-4)
    agreement = torch.zeros(2, B, T)
    log_ratio = torch.zeros(B, T)
    reverse_kl_and_entropy(hidden[:, -T:], teacher, weight, mask, temperature=0.8, lm_head_bias=bias,
                           token_ids=targets[:, -T:], log_ratio_out=log_ratio, agreement_out=agreement)  # fmt: skip
    torch.testing.assert_close(request.agreement, agreement, atol=1e-6, rtol=1e-4)
    torch.testing.assert_close(request.log_ratio, log_ratio, atol=1e-5, rtol=1e-4)
    assert request.agreement[1][mask].gt(0).all() and (request.agreement[:, ~mask] == 0).all()
