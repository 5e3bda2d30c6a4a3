"""gear_trl.credit.reverse_kl_and_entropy against a naive full-logit reference."""

import math

import pytest
import torch

from gear_trl.credit import reverse_kl_and_entropy

B, T, H, V = 2, 5, 8, 11


@pytest.fixture
def inputs():
    generator = torch.Generator().manual_seed(0)
    student = torch.randn(B, T, H, generator=generator)
    teacher = torch.randn(B, T, H, generator=generator)
    weight = torch.randn(V, H, generator=generator)
    bias = torch.randn(V, generator=generator)
    mask = torch.tensor([[1, 1, 1, 0, 0], [0, 1, 1, 1, 1]], dtype=torch.bool)
    return student, teacher, weight, bias, mask


def reference(student, teacher, weight, mask, temperature=1.0, bias=None):
    """Materializes [B, T, V] logits: fine for tiny shapes only."""
    zs = student @ weight.T + (0 if bias is None else bias)
    zt = teacher @ weight.T + (0 if bias is None else bias)
    log_ps = torch.log_softmax(zs / temperature, dim=-1)
    log_pt = torch.log_softmax(zt / temperature, dim=-1)
    kl = (log_ps.exp() * (log_ps - log_pt)).sum(-1)
    entropy = -(log_ps.exp() * log_ps).sum(-1)
    return kl * mask, entropy * mask


def close(actual, expected):
    torch.testing.assert_close(actual, expected, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("chunk_size", [1, 2, 3, 7, 100])
def test_full_matches_reference_for_any_chunk_size(inputs, chunk_size):
    student, teacher, weight, _, mask = inputs
    kl, entropy = reverse_kl_and_entropy(student, teacher, weight, mask, chunk_size=chunk_size)
    ref_kl, ref_entropy = reference(student, teacher, weight, mask)
    assert kl.dtype == entropy.dtype == torch.float32
    assert kl.shape == entropy.shape == (B, T)
    close(kl, ref_kl)
    close(entropy, ref_entropy)
    assert bool((kl[~mask] == 0).all()) and bool((entropy[~mask] == 0).all())
    assert bool((kl[mask] > 0).all())


@pytest.mark.parametrize("temperature", [0.5, 1.0, 2.0])
def test_temperature_and_bias(inputs, temperature):
    student, teacher, weight, bias, mask = inputs
    kl, entropy = reverse_kl_and_entropy(
        student, teacher, weight, mask, temperature=temperature, lm_head_bias=bias, chunk_size=4
    )
    ref_kl, ref_entropy = reference(student, teacher, weight, mask, temperature, bias)
    close(kl, ref_kl)
    close(entropy, ref_entropy)


def test_higher_temperature_raises_entropy(inputs):
    student, teacher, weight, _, mask = inputs
    _, cold = reverse_kl_and_entropy(student, teacher, weight, mask, temperature=0.5)
    _, hot = reverse_kl_and_entropy(student, teacher, weight, mask, temperature=2.0)
    assert bool((hot[mask] > cold[mask]).all())


def test_identical_student_and_teacher_have_zero_kl(inputs):
    student, _, weight, _, mask = inputs
    for divergence in ("full", "topk"):
        kl, _ = reverse_kl_and_entropy(student, student.clone(), weight, mask, divergence=divergence, top_k=3)
        close(kl, torch.zeros(B, T))
    token_ids = torch.zeros(B, T, dtype=torch.long)
    kl, _ = reverse_kl_and_entropy(student, student.clone(), weight, mask, divergence="sampled", token_ids=token_ids)
    close(kl, torch.zeros(B, T))


def test_uniform_logits_have_entropy_log_v(inputs):
    student, teacher, _, _, mask = inputs
    kl, entropy = reverse_kl_and_entropy(student, teacher, torch.zeros(V, H), mask, chunk_size=3)
    close(entropy, mask * math.log(V))
    close(kl, torch.zeros(B, T))


@pytest.mark.parametrize("top_k", [V, V + 5])
def test_topk_over_whole_vocabulary_equals_full(inputs, top_k):
    student, teacher, weight, _, mask = inputs
    full = reverse_kl_and_entropy(student, teacher, weight, mask)
    topk = reverse_kl_and_entropy(student, teacher, weight, mask, divergence="topk", top_k=top_k, chunk_size=3)
    close(topk[0], full[0])
    close(topk[1], full[1])


def test_topk_matches_hand_restriction(inputs):
    student, teacher, weight, _, mask = inputs
    kl, entropy = reverse_kl_and_entropy(student, teacher, weight, mask, divergence="topk", top_k=3, chunk_size=2)
    zs, zt = student @ weight.T, teacher @ weight.T
    support = zs.topk(3, dim=-1).indices
    log_ps = torch.log_softmax(zs.gather(-1, support), dim=-1)
    log_pt = torch.log_softmax(zt.gather(-1, support), dim=-1)
    close(kl, (log_ps.exp() * (log_ps - log_pt)).sum(-1) * mask)
    close(entropy, reference(student, teacher, weight, mask)[1])
    # A single-token support renormalizes both to probability 1: KL 0.
    kl_1, _ = reverse_kl_and_entropy(student, teacher, weight, mask, divergence="topk", top_k=1)
    close(kl_1, torch.zeros(B, T))


def test_sampled_matches_hand_computation():
    # One position, V = 3: student logits (log 1, log 2, log 1) -> pS = (.25, .5, .25);
    # teacher logits (log 1, log 1, log 2) -> pT = (.25, .25, .5).
    weight = torch.eye(3)
    student = torch.log(torch.tensor([[[1.0, 2.0, 1.0], [1.0, 2.0, 1.0]]]))
    teacher = torch.log(torch.tensor([[[1.0, 1.0, 2.0], [1.0, 1.0, 2.0]]]))
    mask = torch.ones(1, 2, dtype=torch.bool)
    token_ids = torch.tensor([[1, 2]])
    kl, entropy = reverse_kl_and_entropy(student, teacher, weight, mask, divergence="sampled", token_ids=token_ids)
    # y = 1: log(.5 / .25) = log 2; y = 2: log(.25 / .5) < 0, clamped to 0.
    close(kl, torch.tensor([[math.log(2.0), 0.0]]))
    expected_entropy = -(0.25 * math.log(0.25) * 2 + 0.5 * math.log(0.5))
    close(entropy, torch.full((1, 2), expected_entropy))


def test_sampled_requires_token_ids(inputs):
    student, teacher, weight, _, mask = inputs
    with pytest.raises(ValueError, match="token_ids"):
        reverse_kl_and_entropy(student, teacher, weight, mask, divergence="sampled")
    with pytest.raises(ValueError, match="token_ids"):
        reverse_kl_and_entropy(
            student, teacher, weight, mask, divergence="sampled", token_ids=torch.zeros(B, T + 1, dtype=torch.long)
        )


def test_no_grad_and_empty_mask(inputs):
    student, teacher, weight, _, _ = inputs
    student.requires_grad_(True)
    kl, entropy = reverse_kl_and_entropy(student, teacher, weight, torch.zeros(B, T, dtype=torch.bool))
    assert not kl.requires_grad and not entropy.requires_grad
    assert kl.abs().sum() == 0 and entropy.abs().sum() == 0


def test_low_precision_weights_give_float32_outputs(inputs):
    student, teacher, weight, _, mask = inputs
    kl, entropy = reverse_kl_and_entropy(student.bfloat16(), teacher.bfloat16(), weight.bfloat16(), mask)
    assert kl.dtype == entropy.dtype == torch.float32
    ref_kl, ref_entropy = reference(student, teacher, weight, mask)
    torch.testing.assert_close(entropy, ref_entropy, atol=0.1, rtol=0.05)
    torch.testing.assert_close(kl, ref_kl, atol=0.3, rtol=0.1)


@pytest.mark.parametrize(
    "overrides, message",
    [
        ({"teacher_hidden": torch.zeros(B, T, H + 1)}, "teacher_hidden"),
        ({"lm_head_weight": torch.zeros(V, H + 1)}, "lm_head_weight"),
        ({"mask": torch.ones(B, T + 1, dtype=torch.bool)}, "mask"),
        ({"lm_head_bias": torch.zeros(V + 1)}, "lm_head_bias"),
        ({"temperature": 0.0}, "temperature"),
        ({"chunk_size": 0}, "chunk_size"),
        ({"divergence": "forward"}, "divergence"),
        ({"divergence": "topk", "top_k": 0}, "top_k"),
    ],
)
def test_invalid_arguments(inputs, overrides, message):
    student, teacher, weight, _, mask = inputs
    arguments = {"student_hidden": student, "teacher_hidden": teacher, "lm_head_weight": weight, "mask": mask}
    arguments.update(overrides)
    with pytest.raises(ValueError, match=message):
        reverse_kl_and_entropy(
            arguments.pop("student_hidden"),
            arguments.pop("teacher_hidden"),
            arguments.pop("lm_head_weight"),
            arguments.pop("mask"),
            **arguments,
        )
