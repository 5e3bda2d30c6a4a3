"""GEAR's credit in bf16 against a float64 recomputation of the same batch, at Qwen3's vocabulary (151,936).

The recipes train in bf16. This runs one batch through GEAR's credit as a bf16 run computes it (bf16 weights and
backbone; `reverse_kl_and_entropy` on the bf16 states with the bf16 head, float32 logits) and recomputes the same
batch in float64 from the same weights (the bf16 values, upcast): backbone in float64, then the reverse KL and entropy
from float64 logits over the whole vocabulary, then the same segments and weights. The difference is what bf16 costs
GEAR. A third column isolates the LM-head pass: the bf16 states through the float64 head math.

Model: a random-weight stand-in with Qwen3-4B's geometry (hidden 2,560, 32/8 heads of 128, MLP 9,728, tied
embeddings, vocabulary 151,936) but `--layers` layers, in bf16; its weights are scaled so that logits have a spread
like a trained model's (`--logit-std`). Batch: math problems of data/math/math_style (the repository's tokenizer with
TRL's Qwen3 template), each with its worked solution as the completion; the teacher prompt adds the reference answer
with GEAR's default math template; advantages +1 / -1 alternately. oneDNN is switched off for the bf16 passes (its
bf16 path on CPU is the slow one, `bench/cpu_bf16.py`); one torch thread.

    python -m bench.bf16_credit                                   # ~3 GB, a few minutes on 1 core
    python -m bench.bf16_credit --device cuda --out /tmp/b.json   # the CUDA branches (float32 logits from the
                                                                  # bf16 head in one matmul); seconds on a GPU

Prints the largest errors and writes bench/results/bf16_credit/cpu.json.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch

REPO_ROOT = Path(__file__).resolve().parent.parent

from transformers import AutoTokenizer, Qwen3Config, Qwen3ForCausalLM

from gear_trl.credit import reverse_kl_and_entropy, segment_signal, weights_from_signal
from gear_trl.data import prepare_dataset
from gear_trl.trainer.gear_config import DEFAULT_MATH_TEACHER_TEMPLATE, GEARConfig

TOKENIZER = REPO_ROOT / "data" / "tiny-qwen3"
DATA = REPO_ROOT / "data" / "math" / "math_style"


def batch(tokenizer, rows: int):
    """Left-padded student and teacher inputs [R, L], the completion [R, T] and its mask."""
    from datasets import load_dataset

    data = load_dataset(str(DATA), split="test").select(range(rows))
    prepared = prepare_dataset(data, "math")
    students, teachers, completions = [], [], []
    for raw, row in zip(data, prepared, strict=True):
        student = row["prompt"]
        teacher = [
            {
                **student[-1],
                "content": student[-1]["content"]
                + DEFAULT_MATH_TEACHER_TEMPLATE.format(ground_truth=row["ground_truth"]),
            }
        ]
        students.append(tokenizer.apply_chat_template(student, add_generation_prompt=True, tokenize=True)["input_ids"])
        teachers.append(tokenizer.apply_chat_template(teacher, add_generation_prompt=True, tokenize=True)["input_ids"])
        completions.append(tokenizer(raw["solution"] + "<|im_end|>", add_special_tokens=False)["input_ids"])
    length = max(len(c) for c in completions)
    completion = torch.full((rows, length), tokenizer.pad_token_id)
    mask = torch.zeros(rows, length, dtype=torch.bool)
    for i, ids in enumerate(completions):
        completion[i, : len(ids)] = torch.tensor(ids)
        mask[i, : len(ids)] = True

    def left_padded(prompts):
        width = max(len(p) for p in prompts) + length
        ids = torch.full((rows, width), tokenizer.pad_token_id)
        attention = torch.zeros(rows, width, dtype=torch.long)
        for i, p in enumerate(prompts):
            row = torch.cat([torch.tensor(p), completion[i]])
            ids[i, width - len(row) :] = row
            attention[i, width - len(row) : width - length] = 1
            attention[i, width - length :] = mask[i].long()
        return ids, attention

    return left_padded(students), left_padded(teachers), completion, mask


@torch.no_grad()
def states(model, ids, attention, length: int, dtype) -> torch.Tensor:
    """[R, T, H] final states predicting the completion tokens, the backbone run in `dtype`."""
    embeds = model.model.embed_tokens(ids).to(dtype)
    out = model.model(inputs_embeds=embeds, attention_mask=attention).last_hidden_state
    return out[:, -length - 1 : -1].contiguous()


@torch.no_grad()
def divergence64(student: torch.Tensor, teacher: torch.Tensor, weight: torch.Tensor, mask, tile: int = 16384):
    """Reverse KL and student entropy [R, T] in float64 over the whole vocabulary (the head upcast a tile at a
    time)."""
    rows_s, rows_t = student[mask].double(), teacher[mask].double()
    vocab = weight.shape[0]
    logits_s = torch.empty(rows_s.shape[0], vocab, dtype=torch.float64, device=student.device)
    logits_t = torch.empty_like(logits_s)
    for start in range(0, vocab, tile):
        w = weight[start : start + tile].double()
        logits_s[:, start : start + tile] = rows_s @ w.T
        logits_t[:, start : start + tile] = rows_t @ w.T
    log_ps, log_pt = logits_s.log_softmax(-1), logits_t.log_softmax(-1)
    ps = log_ps.exp()
    kl = torch.zeros(mask.shape, dtype=torch.float64, device=student.device)
    entropy = torch.zeros_like(kl)
    kl[mask] = (ps * (log_ps - log_pt)).sum(-1).clamp_min(0)
    entropy[mask] = -(ps * log_ps).sum(-1)
    return kl, entropy


def credit(kl, entropy, mask, advantages, args: GEARConfig):
    signal, _ = segment_signal(
        kl,
        entropy,
        mask,
        mode="gear",
        onset_threshold=args.onset_threshold,
        entropy_threshold=args.entropy_threshold,
        fixed_segment_len=args.fixed_segment_len,
        max_segment_len=args.max_segment_len,
        normalize=args.normalize,
    )
    return weights_from_signal(
        signal,
        mask,
        advantages,
        alpha=args.weight_alpha,
        eps=args.weight_eps,
        lam=args.weight_lambda,
        weight_norm=args.weight_norm,
    )


def errors(value: torch.Tensor, reference: torch.Tensor, mask) -> dict[str, float]:
    diff = (value.double() - reference)[mask].abs()
    scale = reference[mask].abs()
    return {
        "max_abs": diff.max().item(),
        "mean_abs": diff.mean().item(),
        "max_rel": (diff / scale.clamp_min(1e-12)).max().item(),
        "max_abs_over_max": diff.max().item() / max(scale.max().item(), 1e-30),
        "reference_max": scale.max().item(),
        "reference_mean": scale.mean().item(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--rows", type=int, default=4)
    parser.add_argument("--logit-std", type=float, default=3.0)
    parser.add_argument("--out", type=Path, default=REPO_ROOT / "bench" / "results" / "bf16_credit" / "cpu.json")
    parser.add_argument("--device", default="cpu", help="cpu, or cuda: the divergence's CUDA branches run for real")
    args = parser.parse_args()
    device = torch.device(args.device)
    torch.set_num_threads(1)
    torch.manual_seed(0)
    start = time.perf_counter()
    tokenizer = AutoTokenizer.from_pretrained(TOKENIZER)
    config = Qwen3Config(
        vocab_size=151936,
        hidden_size=2560,
        intermediate_size=9728,
        num_hidden_layers=args.layers,
        num_attention_heads=32,
        num_key_value_heads=8,
        head_dim=128,
        max_position_embeddings=40960,
        rms_norm_eps=1e-6,
        tie_word_embeddings=True,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
    )
    torch.set_default_dtype(torch.bfloat16)
    model = Qwen3ForCausalLM(config).eval()  # built on the CPU from the seed: the same weights on every device
    torch.set_default_dtype(torch.float32)
    model.to(device)
    weight = model.get_output_embeddings().weight
    with torch.no_grad():  # final states are RMS-normalized (~1 per unit): logits' spread is the head's row norms
        weight.mul_(args.logit_std / (0.02 * config.hidden_size**0.5))
    (s_ids, s_att), (t_ids, t_att), completion, mask = batch(tokenizer, args.rows)
    s_ids, s_att, t_ids, t_att, mask = (t.to(device) for t in (s_ids, s_att, t_ids, t_att, mask))
    length = completion.shape[1]
    advantages = torch.tensor([1.0, -1.0] * (args.rows // 2) + [1.0] * (args.rows % 2), device=device)
    gear = GEARConfig(output_dir="/tmp/bf16_credit", use_cpu=True, report_to="none")

    with torch.backends.mkldnn.flags(enabled=False):
        student16 = states(model, s_ids, s_att, length, torch.bfloat16)
        teacher16 = states(model, t_ids, t_att, length, torch.bfloat16)
        kl16, entropy16 = reverse_kl_and_entropy(student16, teacher16, weight, mask)
    # the LM-head pass alone: the same bf16 states, float64 head math
    kl_head64, entropy_head64 = divergence64(student16, teacher16, weight, mask)
    # float64 recomputation: the same weights (bf16 values) upcast; the embedding rows are upcast after lookup
    model.model.layers.double()
    model.model.norm.double()
    model.model.rotary_emb.double()
    student64 = states(model, s_ids, s_att, length, torch.float64)
    teacher64 = states(model, t_ids, t_att, length, torch.float64)
    kl64, entropy64 = divergence64(student64, teacher64, weight, mask)

    w16 = credit(kl16.double(), entropy16.double(), mask, advantages, gear)
    w64 = credit(kl64, entropy64, mask, advantages, gear)
    w_head = credit(kl_head64, entropy_head64, mask, advantages, gear)
    result = {
        "config": {
            "hidden": 2560,
            "vocab": 151936,
            "layers": args.layers,
            "rows": args.rows,
            "tokens": int(mask.sum()),
            "logit_std": args.logit_std,
            "torch": torch.__version__,
            "device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
        },
        "bf16_vs_float64": {
            "kl": errors(kl16, kl64, mask),
            "entropy": errors(entropy16, entropy64, mask),
            "weights": errors(w16, w64, mask),
        },
        "lm_head_pass_only": {  # bf16 states: GEAR's head pass against float64 head math
            "kl": errors(kl16, kl_head64, mask),
            "entropy": errors(entropy16, entropy_head64, mask),
            "weights": errors(w16, w_head, mask),
        },
        "seconds": time.perf_counter() - start,
    }
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    print(
        f"{result['config']['device']}: {int(mask.sum())} tokens, V=151,936, H=2,560, {args.layers} layers; "
        f"{result['seconds']:.0f} s"
    )
    for part in ("bf16_vs_float64", "lm_head_pass_only"):
        for name, e in result[part].items():
            print(
                f"{part:18s} {name:8s} max |err| {e['max_abs']:.3g} (mean {e['mean_abs']:.3g}; reference max "
                f"{e['reference_max']:.3g}, mean {e['reference_mean']:.3g}; max rel {e['max_rel']:.3g})"
            )


if __name__ == "__main__":
    main()
