"""The KL GEAR reads when the teacher has nothing to say: the noise floor behind `onset_min_kl`.

A row whose teacher prompt equals its student prompt should have KL 0 at every token; what the divergence pass returns
instead is numerical noise, which max-normalization would turn into segments. Two sources are measured here, on the
tiny model of `data/tiny-qwen3` (random weights, vocabulary 2,264), in float32 and bfloat16 on CPU:

    padding   the same prompt + completion run alone and left-padded by k tokens inside a batch (every real batch
              pads its rows to the longest prompt; the teacher batch's padding differs from the student's)
    rounding  the divergence's logits rounded to the head's dtype before the float32 softmax (the divergence pass
              before the fix of `_lm_head`) against float32 logits from the same bf16 weights (after it)

and, for the rounding at Qwen3's vocabulary of 151,936 tokens, the same bf16 hidden-state pairs through a random
bf16 head of that size (scaled so that logits have standard deviation ~3, as a trained model's do). For scale, the
signal: the KL of real student/teacher pairs (a sampled completion of an arithmetic prompt; the teacher prompt carries
the reference answer with the default math template) on the untrained tiny model and on the warm start whose teacher
uses the reference best (`data/tiny-qwen3-arith-hint70`), with the share of completions whose largest KL lies below
each candidate floor.

    python -m bench.noise_floor           # ~1 min on 1 core

Prints a table (KL per model token, nats: mean, 99th percentile, max) and writes bench/results/noise_floor/noise_floor.json.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch

REPO_ROOT = Path(__file__).resolve().parent.parent

from transformers import AutoModelForCausalLM, AutoTokenizer

from gear_trl.credit import reverse_kl_and_entropy
from gear_trl.trainer.gear_config import DEFAULT_MATH_TEACHER_TEMPLATE

MODEL = REPO_ROOT / "data" / "tiny-qwen3"
DATA = REPO_ROOT / "data" / "math" / "gsm8k_style" / "test.jsonl"
ARITH = REPO_ROOT / "data" / "arith" / "test.jsonl"
PADDINGS = (1, 7, 31)
FLOORS = (1e-5, 1e-4, 1e-3, 1e-2)


def rows(tokenizer, count: int) -> list[tuple[list[int], list[int]]]:
    """(prompt ids, completion ids) pairs from the GSM8K-style test file: question, worked answer."""
    lines = DATA.read_text().splitlines()[:count]
    out = []
    for line in lines:
        row = json.loads(line)
        prompt = tokenizer.apply_chat_template(
            [{"role": "user", "content": row["question"]}], add_generation_prompt=True, tokenize=False
        )
        out.append((tokenizer(prompt)["input_ids"], tokenizer(row["answer"])["input_ids"]))
    return out


@torch.no_grad()
def completion_states(model, prompt: list[int], completion: list[int], pad: int, pad_id: int) -> torch.Tensor:
    """[1, T, H] final states predicting the completion tokens, the row left-padded by `pad` tokens."""
    ids = torch.tensor([[pad_id] * pad + prompt + completion])
    mask = torch.tensor([[0] * pad + [1] * (len(prompt) + len(completion))])
    states = model.model(input_ids=ids, attention_mask=mask).last_hidden_state
    return states[:, -len(completion) - 1 : -1]


@torch.no_grad()
def rounded_kl(student: torch.Tensor, teacher: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """[N] reverse KL from logits rounded to the head's dtype (the pass before the fix), in float64 afterwards."""
    log_ps = (student.to(weight.dtype) @ weight.T).double().log_softmax(-1)
    log_pt = (teacher.to(weight.dtype) @ weight.T).double().log_softmax(-1)
    return (log_ps.exp() * (log_ps - log_pt)).sum(-1).clamp_min(0).float()


@torch.no_grad()
def signal(model_dir: Path, count: int) -> dict[str, float]:
    """KL of sampled completions under their teacher prompt, in float32: per-token summary and the share of
    completions whose largest KL is below each of `FLOORS`."""
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir).eval()
    weight = model.get_output_embeddings().weight
    kls, row_max = [], []
    for line in ARITH.read_text().splitlines()[:count]:
        row = json.loads(line)
        student, teacher = (
            tokenizer(
                tokenizer.apply_chat_template(
                    [{"role": "user", "content": text}], add_generation_prompt=True, tokenize=False
                )
            )["input_ids"]
            for text in (
                row["prompt"],
                row["prompt"] + DEFAULT_MATH_TEACHER_TEMPLATE.format(ground_truth=row["ground_truth"]),
            )
        )
        generated = model.generate(
            torch.tensor([student]), do_sample=True, max_new_tokens=48, pad_token_id=tokenizer.pad_token_id
        )[0, len(student) :].tolist()
        s_states = completion_states(model, student, generated, 0, tokenizer.pad_token_id)
        t_states = completion_states(model, teacher, generated, 0, tokenizer.pad_token_id)
        kl, _ = reverse_kl_and_entropy(s_states, t_states, weight, torch.ones(1, len(generated), dtype=torch.bool))
        kls.append(kl[0])
        row_max.append(kl.max().item())
    out = summary(torch.cat(kls))
    for floor in FLOORS:
        out[f"rows_below_{floor:g}"] = sum(m < floor for m in row_max) / len(row_max)
    return out


def summary(kl: torch.Tensor) -> dict[str, float]:
    kl = kl.double().flatten()
    return {"mean": kl.mean().item(), "p99": kl.quantile(0.99).item(), "max": kl.max().item()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=16)
    parser.add_argument(
        "--out", type=Path, default=REPO_ROOT / "bench" / "results" / "noise_floor" / "noise_floor.json"
    )
    args = parser.parse_args()
    torch.manual_seed(0)
    tokenizer = AutoTokenizer.from_pretrained(MODEL)
    data = rows(tokenizer, args.rows)
    results = {}
    pairs = {}
    for dtype in (torch.float32, torch.bfloat16):
        model = AutoModelForCausalLM.from_pretrained(MODEL, dtype=dtype).eval()
        weight = model.get_output_embeddings().weight
        students, teachers = [], []
        for prompt, completion in data:
            alone = completion_states(model, prompt, completion, 0, tokenizer.pad_token_id)
            for pad in PADDINGS:
                students.append(alone[0])
                teachers.append(completion_states(model, prompt, completion, pad, tokenizer.pad_token_id)[0])
        student, teacher = torch.cat(students), torch.cat(teachers)
        pairs[dtype] = (student, teacher)
        mask = torch.ones(1, student.shape[0], dtype=torch.bool)
        kl, _ = reverse_kl_and_entropy(student[None], teacher[None], weight, mask)
        name = str(dtype).removeprefix("torch.")
        results[f"padding {name}, float32 logits"] = summary(kl)
        if dtype != torch.float32:
            results[f"padding {name}, logits rounded to {name}"] = summary(rounded_kl(student, teacher, weight))

    # Qwen3's vocabulary: the bf16 pairs through a random bf16 head of 151,936 rows.
    student, teacher = pairs[torch.bfloat16]
    generator = torch.Generator().manual_seed(0)
    scale = 3.0 / student.float().norm(dim=-1).mean().item()
    head = (scale * torch.randn(151_936, student.shape[-1], generator=generator)).bfloat16()
    sample = slice(0, min(256, student.shape[0]))
    student, teacher = student[sample], teacher[sample]
    mask = torch.ones(1, student.shape[0], dtype=torch.bool)
    kl, _ = reverse_kl_and_entropy(student[None], teacher[None], head, mask, chunk_size=32)
    results["padding bfloat16, V=151,936 head, float32 logits"] = summary(kl)
    results["padding bfloat16, V=151,936 head, logits rounded to bfloat16"] = summary(
        rounded_kl(student, teacher, head)
    )

    floors = {}
    for model_dir in (MODEL, REPO_ROOT / "data" / "tiny-qwen3-arith-hint70"):
        floors[model_dir.name] = stats = signal(model_dir, args.rows)
        results[f"signal: student/teacher, {model_dir.name}"] = {k: stats[k] for k in ("mean", "p99", "max")}

    print(f"{'case':<62} {'mean':>10} {'p99':>10} {'max':>10}")
    for case, stats in results.items():
        print(f"{case:<62} {stats['mean']:>10.2e} {stats['p99']:>10.2e} {stats['max']:>10.2e}")
    print("\nshare of completions whose largest KL is below the floor:")
    for name, stats in floors.items():
        print(f"  {name:<28} " + "  ".join(f"{f:g}: {stats[f'rows_below_{f:g}']:.2f}" for f in FLOORS))
    record = {"paddings": PADDINGS, "rows": args.rows, "results": results, "signal_rows_below_floor": floors}
    args.out.write_text(json.dumps(record, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
