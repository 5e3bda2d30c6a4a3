"""gear_trl.credit.reverse_kl_and_entropy against a naive full-logit reference."""

import math
from pathlib import Path

import pytest
import torch

from gear_trl.credit import reverse_kl_and_entropy
from gear_trl.trainer.gear_config import GEARConfig

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


def test_sampled_signed_is_sampled_without_the_clamp(inputs):
    student, teacher, weight, bias, mask = inputs
    token_ids = torch.arange(B * T).view(B, T) % V
    common = {"lm_head_bias": bias, "token_ids": token_ids, "temperature": 0.9}
    signed, _ = reverse_kl_and_entropy(student, teacher, weight, mask, divergence="sampled_signed", **common)
    clamped, _ = reverse_kl_and_entropy(student, teacher, weight, mask, divergence="sampled", **common)
    log_ps = ((student @ weight.T + bias) / 0.9).log_softmax(-1).gather(-1, token_ids[..., None])[..., 0]
    log_pt = ((teacher @ weight.T + bias) / 0.9).log_softmax(-1).gather(-1, token_ids[..., None])[..., 0]
    close(signed, (log_ps - log_pt) * mask)
    assert (signed < 0).any()
    close(clamped, signed.clamp_min(0))


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


# Precision against float64. The pass works in float32 on logits shifted by each row's max; these cases are where
# float32 loses digits: KL close to 0 (student and teacher nearly identical), large logits, temperature != 1, and a
# realistic vocabulary (long row dots and sums).


def reference64(student, teacher, weight, mask, temperature=1.0, bias=None, token_ids=None):
    """float64 KL (full, or sampled when token_ids is given) and entropy from materialized logits."""
    bias = 0.0 if bias is None else bias.double()
    log_ps = torch.log_softmax((student.double() @ weight.double().T + bias) / temperature, dim=-1)
    log_pt = torch.log_softmax((teacher.double() @ weight.double().T + bias) / temperature, dim=-1)
    entropy = -(log_ps.exp() * log_ps).sum(-1)
    if token_ids is None:
        kl = (log_ps.exp() * (log_ps - log_pt)).sum(-1)
    else:
        y = token_ids.unsqueeze(-1)
        kl = (log_ps.gather(-1, y) - log_pt.gather(-1, y)).squeeze(-1).clamp_min(0.0)
    return kl * mask, entropy * mask


def assert_kl_close(kl, ref_kl):
    """float32 KL within 2e-6 + 1e-5 x KL of float64: small KLs keep their size, not just their sign."""
    error = (kl.double() - ref_kl).abs()
    assert bool((error <= 2e-6 + 1e-5 * ref_kl.abs()).all()), (error.max(), ref_kl)


def precision_case(vocab, hidden, positions, *, logit_scale, teacher_noise, seed=0):
    """Student states giving logits with standard deviation ~logit_scale; the teacher's differ by teacher_noise."""
    generator = torch.Generator().manual_seed(seed)
    weight = torch.randn(vocab, hidden, generator=generator) / hidden**0.5
    student = logit_scale * torch.randn(1, positions, hidden, generator=generator)
    teacher = student + teacher_noise * logit_scale * torch.randn(1, positions, hidden, generator=generator)
    return student, teacher, weight, torch.ones(1, positions, dtype=torch.bool)


@pytest.mark.parametrize(
    "logit_scale, teacher_noise, temperature, kl_range",
    [
        (1.0, 1e-2, 1.0, (1e-6, 1e-3)),  # near-identical, moderate logits
        (1.0, 1e-3, 1.0, (1e-8, 1e-5)),  # KL ~1e-6 and below
        (8.0, 1e-3, 1.0, (1e-9, 1e-3)),  # large logits (|z| up to ~40), nearly identical
        (8.0, 1e-1, 1.0, (1e-6, 10.0)),  # large logits, clearly different
        (6.0, 1e-3, 0.7, (1e-9, 1e-3)),  # temperature below 1 sharpens: |z / tau| up to ~45
        (3.0, 1e-2, 1.5, (1e-7, 1e-2)),
    ],
)
def test_full_precision_against_float64(logit_scale, teacher_noise, temperature, kl_range):
    student, teacher, weight, mask = precision_case(2000, 32, 24, logit_scale=logit_scale, teacher_noise=teacher_noise)
    bias = 0.5 * torch.randn(2000, generator=torch.Generator().manual_seed(1))
    kl, entropy = reverse_kl_and_entropy(
        student, teacher, weight, mask, temperature=temperature, lm_head_bias=bias, chunk_size=5
    )
    ref_kl, ref_entropy = reference64(student, teacher, weight, mask, temperature, bias)
    assert kl_range[0] <= ref_kl.min() and ref_kl.max() <= kl_range[1], (ref_kl.min(), ref_kl.max())
    # float32 measured here: KL errors <= 7e-7 absolute (2e-6 at KL ~0.5), entropy <= 2e-6.
    assert_kl_close(kl, ref_kl)
    assert (entropy.double() - ref_entropy).abs().max() < 1e-5


def test_full_precision_at_realistic_vocabulary():
    # Qwen3's vocabulary: row dots and sums over 151,936 entries.
    student, teacher, weight, mask = precision_case(151_936, 32, 6, logit_scale=5.0, teacher_noise=1e-2)
    kl, entropy = reverse_kl_and_entropy(student, teacher, weight, mask, chunk_size=4)
    ref_kl, ref_entropy = reference64(student, teacher, weight, mask)
    assert_kl_close(kl, ref_kl)
    # Measured 8e-6 with two threads and 3.2e-5 with one (entropies 2.5-5 nats: float32 sums over 151,936 terms,
    # whose order follows the thread count); the old log-softmax form with bmm row dots was off by 9e-4 here.
    assert (entropy.double() - ref_entropy).abs().max() < 1e-4
    # Nearly identical distributions: KL ~1e-7 must not drown in rounding.
    _, teacher, _, _ = precision_case(151_936, 32, 6, logit_scale=5.0, teacher_noise=1e-4)
    kl, _ = reverse_kl_and_entropy(student, teacher, weight, mask, chunk_size=4)
    ref_kl, _ = reference64(student, teacher, weight, mask)
    assert ref_kl.max() < 1e-6
    assert_kl_close(kl, ref_kl)


def test_sampled_precision_with_temperature_and_bias():
    student, teacher, weight, mask = precision_case(500, 16, 12, logit_scale=6.0, teacher_noise=0.1)
    bias = torch.randn(500, generator=torch.Generator().manual_seed(2))
    token_ids = torch.randint(0, 500, (1, 12), generator=torch.Generator().manual_seed(3))
    kl, entropy = reverse_kl_and_entropy(
        student,
        teacher,
        weight,
        mask,
        temperature=0.7,
        lm_head_bias=bias,
        chunk_size=5,
        divergence="sampled",
        token_ids=token_ids,
    )
    ref_kl, ref_entropy = reference64(student, teacher, weight, mask, 0.7, bias, token_ids=token_ids)
    assert (kl.double() - ref_kl).abs().max() < 1e-5
    assert (entropy.double() - ref_entropy).abs().max() < 1e-5


@pytest.mark.parametrize("dtype", [torch.float64, torch.float16])
def test_other_head_dtypes(inputs, dtype):
    # float64 goes through a temporary, 2-byte dtypes through the float32 exp buffer; outputs are float32 either way.
    student, teacher, weight, bias, mask = inputs
    kl, entropy = reverse_kl_and_entropy(
        student.to(dtype), teacher.to(dtype), weight.to(dtype), mask, lm_head_bias=bias.to(dtype), temperature=0.8
    )
    assert kl.dtype == entropy.dtype == torch.float32
    ref_kl, ref_entropy = reference(student, teacher, weight, mask, 0.8, bias)
    tolerance = 1e-5 if dtype == torch.float64 else 2e-2
    torch.testing.assert_close(entropy, ref_entropy, atol=tolerance, rtol=tolerance)
    torch.testing.assert_close(kl, ref_kl, atol=tolerance, rtol=tolerance)


# --- lm_head_statistics: the row-level function the divergence and the fused log-probability pass share -------------


def test_lm_head_statistics_hand_worked():
    """V = 2, W = I: the rows are the logits. Student (0, log 3) -> pS = (1/4, 3/4); teacher (0, 0) -> pT = (1/2, 1/2);
    second row: student (log 2, 0) -> pS = (2/3, 1/3), teacher = student."""
    from gear_trl.credit import lm_head_statistics

    student = torch.tensor([[0.0, math.log(3.0)], [math.log(2.0), 0.0]])
    teacher = torch.tensor([[0.0, 0.0], [math.log(2.0), 0.0]])
    stats = lm_head_statistics(student, torch.eye(2), teacher_rows=teacher, targets=torch.tensor([1, 1]))
    close(stats.log_z, torch.tensor([math.log(4.0), math.log(3.0)]))
    close(stats.target_log_prob, torch.tensor([math.log(0.75), math.log(1 / 3)]))
    h0 = -(0.25 * math.log(0.25) + 0.75 * math.log(0.75))
    h1 = -(2 / 3 * math.log(2 / 3) + 1 / 3 * math.log(1 / 3))
    close(stats.entropy, torch.tensor([h0, h1]))
    close(stats.kl, torch.tensor([0.25 * math.log(0.5) + 0.75 * math.log(1.5), 0.0]))
    # Temperature 2 halves the logits: row 0 becomes (0, log sqrt 3) -> log_z = log(1 + sqrt 3).
    hot = lm_head_statistics(student, torch.eye(2), temperature=2.0, chunk_size=1)
    close(hot.log_z[0], torch.tensor(math.log(1 + math.sqrt(3.0))))
    assert hot.kl is None and hot.target_log_prob is None


@pytest.mark.parametrize("chunk_size", [1, 3, 100])
def test_lm_head_statistics_match_materialized_logits(inputs, chunk_size):
    from gear_trl.credit import lm_head_statistics

    student, teacher, weight, bias, mask = inputs
    rows_s, rows_t = student[mask], teacher[mask]
    targets = torch.arange(rows_s.shape[0]) % V
    stats = lm_head_statistics(
        rows_s, weight, teacher_rows=rows_t, targets=targets, temperature=0.7, lm_head_bias=bias, chunk_size=chunk_size
    )
    zs = (rows_s @ weight.T + bias) / 0.7
    close(stats.log_z, zs.logsumexp(-1))
    close(stats.target_log_prob, zs.log_softmax(-1).gather(-1, targets[:, None])[:, 0])
    ref_kl, ref_entropy = reference(student, teacher, weight, mask, 0.7, bias)
    close(stats.kl, ref_kl[mask])
    close(stats.entropy, ref_entropy[mask])
    alone = lm_head_statistics(rows_s, weight, targets=targets, temperature=0.7, lm_head_bias=bias, chunk_size=2)
    close(alone.log_z, stats.log_z)
    close(alone.entropy, stats.entropy)
    close(alone.target_log_prob, stats.target_log_prob)


# --- bfloat16: the pass's logits are float32 (never rounded to the head's dtype), measured on the tiny models -------

MODELS = Path(__file__).resolve().parents[2] / "data"


def _chat_ids(tokenizer, text):
    prompt = tokenizer.apply_chat_template(
        [{"role": "user", "content": text}], add_generation_prompt=True, tokenize=False
    )
    return tokenizer(prompt)["input_ids"]


@torch.no_grad()
def _completion_states(model, prompt, completion, pad, pad_id):
    """[1, T, H] final states predicting `completion` after `prompt`, the row left-padded by `pad` tokens."""
    ids = torch.tensor([[pad_id] * pad + prompt + completion])
    mask = torch.tensor([[0] * pad + [1] * (len(prompt) + len(completion))])
    return model.model(input_ids=ids, attention_mask=mask).last_hidden_state[:, -len(completion) - 1 : -1]


def _bf16_model(name):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(MODELS / name)
    return tokenizer, AutoModelForCausalLM.from_pretrained(MODELS / name, dtype=torch.bfloat16).eval()


def test_bf16_left_padding_noise_stays_below_the_floor_at_qwen3_vocabulary():
    """The same rows run alone and left-padded by 1, 7 and 31 tokens (bf16 forwards on CPU): their states differ by
    rounding only, and through a bf16 head of Qwen3's 151,936 tokens the KL must stay far below the floor. Logits
    rounded to bf16 before the softmax (the pass before float32 outputs) reached 1.3e-3 here (bench/noise_floor.py)."""
    tokenizer, model = _bf16_model("tiny-qwen3")
    prompt = _chat_ids(tokenizer, "Lena saves $7 every week for 2 weeks, then spends $7 on a gift. How many are left?")
    completion = tokenizer("Lena saves 7 * 2 = 14 dollars.\nAfter the gift, 14 - 7 = 7 dollars are left.\n#### 7")[
        "input_ids"
    ]
    alone = _completion_states(model, prompt, completion, 0, tokenizer.pad_token_id)
    padded = [_completion_states(model, prompt, completion, pad, tokenizer.pad_token_id) for pad in (1, 7, 31)]
    student, teacher = torch.cat([alone] * len(padded), dim=1), torch.cat(padded, dim=1)
    assert not torch.equal(student, teacher)  # the padding does move the states
    generator = torch.Generator().manual_seed(0)
    scale = 3.0 / student.float().norm(dim=-1).mean().item()  # logits with standard deviation ~3
    head = (scale * torch.randn(151_936, student.shape[-1], generator=generator)).bfloat16()
    mask = torch.ones(student.shape[:2], dtype=torch.bool)
    kl, _ = reverse_kl_and_entropy(student, teacher, head, mask, chunk_size=32)
    floor = GEARConfig.__dataclass_fields__["onset_min_kl"].default
    assert kl.max() < floor / 4, kl.max()


def test_bf16_student_teacher_pair_matches_float64():
    """A real pair: the warm start whose teacher uses the reference best, student prompt vs teacher prompt (reference
    answer in it, left-padded by 3), on a wrong completion. KL (6e-5 to 12 nats here) and entropy within 1e-2 relative
    of float64 from the same bf16 states and head; bf16-rounded logits were off by 14% (KL) and 2.9% (entropy)."""
    from gear_trl.trainer.gear_config import DEFAULT_MATH_TEACHER_TEMPLATE

    tokenizer, model = _bf16_model("tiny-qwen3-arith-hint70")
    question = "What is 34 - 9 - 1?"
    student_prompt = _chat_ids(tokenizer, question)
    teacher_prompt = _chat_ids(tokenizer, question + DEFAULT_MATH_TEACHER_TEMPLATE.format(ground_truth="24"))
    completion = tokenizer("<think>\n\n</think>\n\n34 - 9 = 25. 25 - 1 = 23. The answer is \\boxed{23}.<|im_end|>")[
        "input_ids"
    ]
    student = _completion_states(model, student_prompt, completion, 0, tokenizer.pad_token_id)
    teacher = _completion_states(model, teacher_prompt, completion, 3, tokenizer.pad_token_id)
    head = model.get_output_embeddings().weight
    kl, entropy = reverse_kl_and_entropy(student, teacher, head, torch.ones(student.shape[:2], dtype=torch.bool))
    assert kl.dtype == entropy.dtype == torch.float32
    ref_kl, ref_entropy = reference64(student, teacher, head, torch.ones(student.shape[:2]))
    assert ref_kl.max() > 1.0  # the teacher does disagree somewhere
    assert ((kl.double() - ref_kl).abs() <= 1e-2 * ref_kl).all(), ((kl.double() - ref_kl).abs() / ref_kl).max()
    assert ((entropy.double() - ref_entropy).abs() <= 1e-2 * ref_entropy).all()


def test_a_teacher_with_its_own_head(inputs):
    """A frozen or averaged teacher is a model of its own: its logits come from its own head and bias."""
    student, teacher, weight, bias, mask = inputs
    generator = torch.Generator().manual_seed(5)
    teacher_weight = weight + 0.3 * torch.randn(V, H, generator=generator)
    teacher_bias = torch.randn(V, generator=generator)
    kl, entropy = reverse_kl_and_entropy(
        student,
        teacher,
        weight,
        mask,
        lm_head_bias=bias,
        temperature=0.8,
        chunk_size=3,
        teacher_lm_head_weight=teacher_weight,
        teacher_lm_head_bias=teacher_bias,
    )
    log_ps = ((student @ weight.T + bias) / 0.8).log_softmax(-1)
    log_pt = ((teacher @ teacher_weight.T + teacher_bias) / 0.8).log_softmax(-1)
    close(kl, (log_ps.exp() * (log_ps - log_pt)).sum(-1) * mask)
    close(entropy, reference(student, teacher, weight, mask, 0.8, bias)[1])
    same, _ = reverse_kl_and_entropy(student, teacher, weight, mask, lm_head_bias=bias, temperature=0.8)
    assert not torch.allclose(kl, same)


@pytest.mark.parametrize("divergence", ["full", "topk", "sampled"])
def test_log_ratio_out_is_the_sampled_tokens_teacher_minus_student_log_prob(inputs, divergence):
    # `credit: gear-signed` reads this beside the KL of any `divergence`, from the same logits.
    student, teacher, weight, bias, mask = inputs
    token_ids = (torch.arange(B * T).view(B, T) * 3) % V
    common = {"lm_head_bias": bias, "token_ids": token_ids, "temperature": 0.9, "chunk_size": 3, "top_k": 4}
    log_ratio = torch.full((B, T), 7.0)
    kl, _ = reverse_kl_and_entropy(
        student, teacher, weight, mask, divergence=divergence, log_ratio_out=log_ratio, **common
    )
    plain, _ = reverse_kl_and_entropy(student, teacher, weight, mask, divergence=divergence, **common)
    log_ps = ((student @ weight.T + bias) / 0.9).log_softmax(-1).gather(-1, token_ids[..., None])[..., 0]
    log_pt = ((teacher @ weight.T + bias) / 0.9).log_softmax(-1).gather(-1, token_ids[..., None])[..., 0]
    close(log_ratio, (log_pt - log_ps) * mask)
    assert (log_ratio > 0).any() and (log_ratio < 0).any()
    close(kl, plain)
    with pytest.raises(ValueError, match="token_ids"):
        reverse_kl_and_entropy(student, teacher, weight, mask, log_ratio_out=log_ratio)


@pytest.mark.parametrize("vocab", [V, 9000])  # below and above _SMALL_VOCAB: the in-place and the per-row dot
def test_agreement_out_is_the_teachers_probability_and_its_expectation_under_the_student(vocab):
    # `distillation_signal: agreement` reads pT(y_t) and sum_v pS(v) pT(v) from the same logits as the KL.
    generator = torch.Generator().manual_seed(3)
    student, teacher = torch.randn(2, B, T, H, generator=generator)
    weight, bias = torch.randn(vocab, H, generator=generator), torch.randn(vocab, generator=generator)
    mask = torch.tensor([[1, 1, 1, 0, 0], [0, 1, 1, 1, 1]], dtype=torch.bool)
    token_ids = (torch.arange(B * T).view(B, T) * 7) % vocab
    common = {"lm_head_bias": bias, "token_ids": token_ids, "temperature": 0.7, "chunk_size": 3}
    agreement = torch.full((2, B, T), 5.0)
    kl, entropy = reverse_kl_and_entropy(student, teacher, weight, mask, agreement_out=agreement, **common)
    plain_kl, plain_entropy = reverse_kl_and_entropy(student, teacher, weight, mask, **common)
    ps = ((student @ weight.T + bias) / 0.7).softmax(-1)
    pt = ((teacher @ weight.T + bias) / 0.7).softmax(-1)
    close(agreement[0], pt.gather(-1, token_ids[..., None])[..., 0] * mask)
    close(agreement[1], (ps * pt).sum(-1) * mask)
    close(kl, plain_kl)  # asking for it changes nothing else
    close(entropy, plain_entropy)
    assert (agreement[1][mask] > 0).all() and (agreement[1][mask] < 1).all()


def test_agreement_out_needs_the_full_divergence_and_its_shape(inputs):
    student, teacher, weight, _, mask = inputs
    token_ids = torch.zeros(B, T, dtype=torch.long)
    with pytest.raises(ValueError, match="divergence='full'"):
        reverse_kl_and_entropy(
            student, teacher, weight, mask, divergence="sampled", token_ids=token_ids,
            agreement_out=torch.zeros(2, B, T),
        )  # fmt: skip
    with pytest.raises(ValueError, match=r"agreement_out must be \[2, 2, 5\]"):
        reverse_kl_and_entropy(student, teacher, weight, mask, token_ids=token_ids, agreement_out=torch.zeros(B, T))
    with pytest.raises(ValueError, match="token_ids"):
        reverse_kl_and_entropy(student, teacher, weight, mask, agreement_out=torch.zeros(2, B, T))
