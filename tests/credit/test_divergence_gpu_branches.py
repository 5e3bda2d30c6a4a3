"""The divergence's GPU branches off a GPU: `_lm_head`'s float32-output matmul of a 2-byte head (`torch.mm(...,
out_dtype=torch.float32)`, which PyTorch implements on CUDA and for meta tensors only) and `_row_dot`'s one `bmm`.

On meta tensors the CUDA branch's call runs through PyTorch's own argument and shape checks. On CPU a dispatch mode
stands in for the CUDA kernel (float32 products of the bf16 values, as CUDA's float32 accumulation gives): the whole
divergence then takes both GPU branches and must give what the CPU branches give."""

from __future__ import annotations

from collections import Counter

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from gear_trl.credit import divergence, reverse_kl_and_entropy


class CudaKernelsOnCpu(TorchDispatchMode):
    """`aten::mm.dtype_out` on CPU (PyTorch has no CPU kernel for it); counts it and `bmm` (either overload)."""

    def __init__(self):
        super().__init__()
        self.calls = Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is torch.ops.aten.mm.dtype_out:
            self.calls["mm.dtype_out"] += 1
            a, b, dtype = args
            assert a.dtype == b.dtype and a.element_size() == 2 and dtype == torch.float32
            return kwargs["out"].copy_(torch.mm(a.to(dtype), b.to(dtype)))
        if func in (torch.ops.aten.bmm.default, torch.ops.aten.bmm.out):  # the divergence's loop writes with `out=`
            self.calls["bmm"] += 1
        return func(*args, **kwargs)


@pytest.mark.skipif(not divergence._MM_OUT_DTYPE, reason="torch < 2.8 has no out_dtype matmul")
@pytest.mark.parametrize("with_bias", [False, True])
def test_out_dtype_matmul_branch_passes_torchs_checks_on_meta_tensors(monkeypatch, with_bias):
    monkeypatch.setattr(divergence, "_OUT_DTYPE_DEVICES", ("meta",))
    hidden = torch.empty(3, 8, dtype=torch.bfloat16, device="meta")
    weight = torch.empty(50, 8, dtype=torch.bfloat16, device="meta")
    out = torch.empty(3, 50, dtype=torch.float32, device="meta")
    bias = torch.empty(50, dtype=torch.float32, device="meta") if with_bias else None
    with CudaKernelsOnCpu() as mode:
        logits = divergence._lm_head(hidden, weight, bias, out, torch.empty(0, device="meta"))
    assert mode.calls["mm.dtype_out"] == 1  # the branch ran, not the CPU tiles
    assert logits.shape == (3, 50) and logits.dtype == torch.float32 and logits.device.type == "meta"


def test_bmm_row_dot_on_meta_tensors():
    a = torch.empty(4, 10, device="meta")
    with CudaKernelsOnCpu() as mode:
        dots = divergence._row_dot(a, a, spare=a)
    assert mode.calls["bmm"] == 1 and dots.shape == (4,)


@pytest.mark.parametrize("signal", ["full", "topk", "sampled", "sampled_signed"])
def test_gpu_branches_give_the_cpu_branches_results(monkeypatch, signal):
    generator = torch.Generator().manual_seed(0)
    batch, length, width, vocab = 2, 6, 16, 9000  # above _SMALL_VOCAB: the CPU path takes one BLAS dot per row
    student = torch.randn(batch, length, width, generator=generator)
    teacher = student + 0.3 * torch.randn(batch, length, width, generator=generator)
    weight = torch.randn(vocab, width, generator=generator).to(torch.bfloat16)
    bias = torch.randn(vocab, generator=generator).to(torch.bfloat16)
    mask = torch.rand(batch, length, generator=generator) > 0.3
    tokens = torch.randint(vocab, (batch, length), generator=generator)

    def run():
        ratio = torch.zeros(batch, length)
        kl, entropy = reverse_kl_and_entropy(
            student,
            teacher,
            weight,
            mask,
            temperature=0.7,
            chunk_size=4,
            lm_head_bias=bias,
            divergence=signal,
            token_ids=tokens,
            log_ratio_out=ratio,
        )
        return kl, entropy, ratio

    with CudaKernelsOnCpu() as mode:
        on_cpu = run()
    assert mode.calls == Counter()  # the CPU branches: tiles and per-row dots
    monkeypatch.setattr(divergence, "_OUT_DTYPE_DEVICES", ("cpu",))
    monkeypatch.setattr(divergence, "_PER_ROW_DOT_DEVICES", ())
    with CudaKernelsOnCpu() as mode:
        on_gpu_branches = run()
    assert mode.calls["mm.dtype_out"] > 0 and mode.calls["bmm"] > 0
    for cpu, gpu in zip(on_cpu, on_gpu_branches, strict=True):
        torch.testing.assert_close(gpu, cpu, atol=2e-5, rtol=1e-5)
    assert on_cpu[0][mask].abs().max() > 0.01  # distributions that differ
