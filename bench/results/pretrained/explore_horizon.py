"""Exploration, not a result: how much of the horizon task family (K-step arithmetic, gear_trl/rewards/horizon.py)
SmolLM2-135M-Instruct (`make smollm2`) does before any training, at K = 2, 3, 4.

For each variant (independent, chained) and K, `--problems` fresh problems drawn the way
data/scripts/make_horizon_data.py draws them (its `sample_steps`, a seed of our own, no carries), the student prompt
being the data's question plus, with `--instruction`, a line saying the format (and one worked example). Per problem:
`--samples` completions at `--temperature` (default 1, TRL's), scored by the reward `horizon_accuracy` and the
per-decision accuracy `decision_correct`, with whether the group mixes passes and fails; one greedy completion; and one
greedy completion of the teacher (the question with GEAR's `teacher_reference: solution` template and the reference
lines appended). Prints one JSON line a cell and writes them, with one example a cell, to `--out`.

    PYTHONPATH=. python bench/results/pretrained/explore_horizon.py --out bench/results/pretrained/explore_horizon.json
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

REPO = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO / "data" / "scripts"))

from make_horizon_data import sample_steps

from gear_trl.rewards.horizon import (
    decision_correct,
    horizon_accuracy,
    make_problem,
    question,
    reference_lines,
)
from gear_trl.trainer.gear_config import DEFAULT_MATH_SOLUTION_TEMPLATE

INSTRUCTIONS = {
    "none": "",
    "format": "\nWrite one line per step in the form a + b = c, and nothing else.",
    "example": (
        "\nWrite one line per step and nothing else. For example, for "
        '"Work out each line: 10 + 3, 25 - 4." write:\n10 + 3 = 13\n25 - 4 = 21'
    ),
}
"""What `--instruction` appends to the question: nothing, a format line, or a format line with one worked example (the
same fixed independent-variant problem for every prompt)."""


def problems(variant: str, k: int, n: int, seed: int):
    rng = random.Random(f"explore:{seed}:{variant}:{k}")
    out = []
    for _ in range(n):
        start, steps = sample_steps(rng, variant, k)
        out.append(make_problem(variant, start, steps))
    return out


def generate(
    model, tokenizer, contents: list[str], *, samples: int, greedy: bool, max_new_tokens: int, temperature: float = 1.0
) -> list[str]:
    """Completions (text) for each user message: `samples` each at `temperature` (no top-k, no top-p), or one
    greedy."""
    texts = [
        tokenizer.apply_chat_template([{"role": "user", "content": c}], add_generation_prompt=True, tokenize=False)
        for c in contents
    ]
    tokenizer.padding_side = "left"
    batch = tokenizer(texts, return_tensors="pt", padding=True, add_special_tokens=False)
    with torch.no_grad():
        output = model.generate(
            **batch,
            max_new_tokens=max_new_tokens,
            do_sample=not greedy,
            temperature=None if greedy else temperature,
            top_p=None,
            top_k=None,
            num_return_sequences=1 if greedy else samples,
            pad_token_id=tokenizer.pad_token_id,
        )
    return tokenizer.batch_decode(output[:, batch.input_ids.shape[1] :], skip_special_tokens=True)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=str(REPO / "data" / "smollm2-135m-instruct"))
    parser.add_argument("--problems", type=int, default=30)
    parser.add_argument("--samples", type=int, default=4)
    parser.add_argument("--ks", type=int, nargs="+", default=[2, 3, 4])
    parser.add_argument("--variants", nargs="+", default=["independent", "chained"])
    parser.add_argument("--instruction", choices=sorted(INSTRUCTIONS), default="none", help="appended to the question")
    parser.add_argument("--max_new_tokens", type=int, default=64)
    parser.add_argument("--temperature", type=float, default=1.0, help="of the sampled completions")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)

    torch.manual_seed(args.seed)
    tokenizer = AutoTokenizer.from_pretrained(args.model)
    model = AutoModelForCausalLM.from_pretrained(args.model, dtype=torch.float32).eval()
    cells, examples = [], {}
    for variant in args.variants:
        for k in args.ks:
            started = time.monotonic()
            batch = problems(variant, k, args.problems, args.seed)
            students = [question(p) + INSTRUCTIONS[args.instruction] for p in batch]
            teachers = [
                s + DEFAULT_MATH_SOLUTION_TEMPLATE.format(reference_solution=reference_lines(p))
                for s, p in zip(students, batch, strict=True)
            ]
            truths = [",".join(map(str, p.results)) for p in batch]
            sampled = generate(
                model,
                tokenizer,
                students,
                samples=args.samples,
                greedy=False,
                max_new_tokens=args.max_new_tokens,
                temperature=args.temperature,
            )
            greedy = generate(model, tokenizer, students, samples=1, greedy=True, max_new_tokens=args.max_new_tokens)
            teacher = generate(model, tokenizer, teachers, samples=1, greedy=True, max_new_tokens=args.max_new_tokens)
            rewards = horizon_accuracy(sampled, [t for t in truths for _ in range(args.samples)])
            groups = [rewards[i * args.samples : (i + 1) * args.samples] for i in range(len(batch))]
            decisions = [
                d for i, text in enumerate(sampled) for d in decision_correct(text, batch[i // args.samples].results)
            ]
            cell = {
                "variant": variant,
                "k": k,
                "problems": len(batch),
                "samples": args.samples,
                "sampled_accuracy": sum(rewards) / len(rewards),
                "sampled_decision_accuracy": sum(decisions) / len(decisions),
                "mixed_group_frac": sum(0 < sum(g) < len(g) for g in groups) / len(groups),
                "greedy_accuracy": sum(horizon_accuracy(greedy, truths)) / len(batch),
                "teacher_greedy_accuracy": sum(horizon_accuracy(teacher, truths)) / len(batch),
                "seconds": round(time.monotonic() - started, 1),
            }
            cells.append(cell)
            examples[f"{variant}/k{k}"] = {
                "student": students[0],
                "sampled": sampled[: args.samples],
                "greedy": greedy[0],
                "teacher": teacher[0],
                "truth": truths[0],
            }
            print(json.dumps(cell), flush=True)
    report = {
        "model": args.model,
        "instruction": INSTRUCTIONS[args.instruction],
        "teacher_template": DEFAULT_MATH_SOLUTION_TEMPLATE,
        "max_new_tokens": args.max_new_tokens,
        "temperature": args.temperature,
        "seed": args.seed,
        "cells": cells,
        "examples": examples,
    }
    if args.out:
        args.out.write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
