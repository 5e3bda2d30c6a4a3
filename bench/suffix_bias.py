"""Does attention copy the shared-prefix pass's suffix bias in every layer?

With `teacher_prefix_sharing`, each rollout's teacher states come from a forward of [last prompt token, completion]
on a copy of its prompt's key/value cache, with one additive [R, 1, Q, S] bias (`suffix_attention_bias`) for every
layer, S = prefix + suffix keys. PyTorch's memory-efficient SDPA kernel (CUDA) wants the bias's rows aligned
(`preprocess_mask` in aten/src/ATen/native/transformers/attention.cpp pads a bias whose strides are not multiples of
8 elements, 16 in older releases, then slices it back): a bias with S not a multiple of that would be padded, a copy
of the whole bias, in every layer. Allocating the bias with S rounded up to 16 and handing over a slice would avoid
it. This script measures whether the copy happens: one suffix forward of the model under the profiler, with a
bias of S keys as it is built today (S = `--keys`, odd) and the same bias as a slice of a 16-aligned one, counting
the pad and copy operators per forward and timing the forward.

    python -m bench.suffix_bias                     # CPU, the tiny model (seconds)
    python -m bench.suffix_bias --device cuda --model Qwen/Qwen3-4B --dtype bfloat16 --rows 8 --keys 1531
    python -m bench.suffix_bias --device cuda --model qwen3-4b-random --dtype bfloat16 --rows 8 --keys 1531

`--model qwen3-4b-random` builds Qwen3-4B's geometry (bench/overhead_shapes.py) with random weights, offline: the
operators attention runs depend on the shapes, not on the weights.

Prints one line per bias layout: attention calls, pad / copy operator calls, milliseconds per forward.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import torch

REPO_ROOT = Path(__file__).resolve().parent.parent

from transformers import AutoModelForCausalLM
from transformers.cache_utils import DynamicCache

from gear_trl.teacher.prompts import suffix_attention_bias

RANDOM_4B = "qwen3-4b-random"

PAD_OPS = ("aten::constant_pad_nd", "aten::pad")
COPY_OPS = ("aten::copy_", "aten::contiguous", "aten::clone")


def aligned_copy(bias: torch.Tensor, multiple: int = 16) -> torch.Tensor:
    """The same values as `bias` [R, 1, Q, S], as a slice of a tensor whose last dimension is a multiple of 16."""
    keys = bias.size(-1)
    padded = bias.new_zeros(*bias.shape[:-1], -(-keys // multiple) * multiple)
    padded[..., :keys] = bias
    return padded[..., :keys]


def profile(model, prefix_ids, suffix_ids, bias, repeats: int) -> dict:
    """Operator counts of one suffix forward (the prefix forward that fills its cache is not counted), and its mean
    time over `repeats` forwards."""
    start = prefix_ids.size(1)
    positions = torch.arange(start, start + suffix_ids.size(1), device=suffix_ids.device)[None]
    sync = torch.cuda.synchronize if bias.device.type == "cuda" else (lambda: None)

    @torch.no_grad()
    def prefix_cache():
        cache = DynamicCache()
        model.model(input_ids=prefix_ids, use_cache=True, past_key_values=cache)
        return cache

    @torch.no_grad()
    def suffix(cache):
        return model.model(
            input_ids=suffix_ids, attention_mask=bias, position_ids=positions, past_key_values=cache, use_cache=True
        )

    suffix(prefix_cache())  # warm-up
    cache = prefix_cache()
    with torch.profiler.profile() as prof:
        suffix(cache)
    counts = {}
    for event in prof.key_averages():
        counts[event.key] = counts.get(event.key, 0) + event.count
    seconds = 0.0
    for _ in range(repeats):
        cache = prefix_cache()
        sync()
        begin = time.perf_counter()
        suffix(cache)
        sync()
        seconds += time.perf_counter() - begin
    return {
        "attention": counts.get("aten::scaled_dot_product_attention", 0),
        "pads": sum(counts.get(op, 0) for op in PAD_OPS),
        "copies": sum(counts.get(op, 0) for op in COPY_OPS),
        "ms": seconds / repeats * 1e3,
    }


def load_model(name: str, device: str, dtype: torch.dtype):
    """The model `name` (a path or Hub id), or with `RANDOM_4B` Qwen3-4B's geometry with random weights, built on
    `device` in `dtype`."""
    if name != RANDOM_4B:
        model = AutoModelForCausalLM.from_pretrained(name, dtype=dtype, attn_implementation="sdpa")
        return model.to(device).eval()
    from transformers import Qwen3Config, Qwen3ForCausalLM

    from bench.overhead_shapes import QWEN3_4B

    config = Qwen3Config(attention_dropout=0.0, **QWEN3_4B)
    torch.manual_seed(0)
    with torch.device(device):
        model = Qwen3ForCausalLM._from_config(config, dtype=dtype, attn_implementation="sdpa")
    return model.eval()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default=str(REPO_ROOT / "data/tiny-qwen3"))
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--rows", type=int, default=4)
    parser.add_argument("--keys", type=int, default=203, help="S, prefix + suffix keys (odd: not 8-aligned)")
    parser.add_argument("--suffix", type=int, default=48)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()

    dtype = getattr(torch, args.dtype)
    model = load_model(args.model, args.device, dtype)
    generator = torch.Generator().manual_seed(0)
    vocab = model.config.vocab_size
    ids = torch.randint(vocab, (args.rows, args.keys), generator=generator).to(args.device)
    prefix_ids, suffix_ids = ids[:, : args.keys - args.suffix], ids[:, args.keys - args.suffix :]
    key_mask = torch.ones(args.rows, args.keys, dtype=torch.long, device=args.device)
    key_mask[0, :5] = 0  # a left-padded row, as in a real batch
    bias = suffix_attention_bias(key_mask, args.suffix, dtype)
    layers = model.config.num_hidden_layers
    print(
        f"{args.device} {args.dtype} {args.model}: {layers} layers, bias {tuple(bias.shape)}, torch {torch.__version__}"
    )
    for name, layout in (("as built (S keys)", bias), ("slice of a 16-aligned bias", aligned_copy(bias))):
        figures = profile(model, prefix_ids, suffix_ids, layout, args.repeats)
        print(
            f"  {name:28s} attention calls {figures['attention']:3d}  pad ops {figures['pads']:3d}  "
            f"copy ops {figures['copies']:4d}  {figures['ms']:8.2f} ms / forward"
        )


if __name__ == "__main__":
    main()
