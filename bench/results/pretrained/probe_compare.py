"""Exploration, not a result: a reading task with K decisions for SmolLM2-135M-Instruct (`make smollm2`), as a
candidate for issue 72's item 2 after the horizon family proved out of reach (EXPLORE.md). Each problem is K pairs of
two-digit numbers; the model writes the larger of each pair, one per line. Decision k is right when the k-th number
the completion writes is pair k's larger one; the reward is 1 when the completion writes exactly K numbers, all right.
The teacher's prompt appends "A reference solution to this problem is:" and the K answers, one per line.

30 problems a K (seeded), 4 samples at temperature 0.7, one greedy completion, one greedy teacher completion, 24 new
tokens. Prints one JSON line per K and writes them, with one example each, to `--out`.

    PYTHONPATH=. python bench/results/pretrained/probe_compare.py --out bench/results/pretrained/probe_compare.json
"""

from __future__ import annotations

import argparse
import json
import random
import re
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

REPO = Path(__file__).resolve().parents[3]


def draw(rng: random.Random, k: int) -> list[tuple[int, int]]:
    pairs = []
    while len(pairs) < k:
        a, b = rng.randint(10, 99), rng.randint(10, 99)
        if a != b:
            pairs.append((a, b))
    return pairs


def prompt(pairs: list[tuple[int, int]]) -> str:
    return "For each pair, write the larger number, one per line: " + ", ".join(f"{a} or {b}" for a, b in pairs) + "."


def decisions(text: str, answers: list[int]) -> list[bool]:
    numbers = [int(n) for n in re.findall(r"\d+", text)]
    return [k < len(numbers) and numbers[k] == want for k, want in enumerate(answers)]


def reward(text: str, answers: list[int]) -> float:
    return float(len(re.findall(r"\d+", text)) == len(answers) and all(decisions(text, answers)))


def generate(model, tokenizer, contents, *, n: int, greedy: bool, max_new_tokens: int, temperature: float):
    texts = [
        tokenizer.apply_chat_template([{"role": "user", "content": c}], add_generation_prompt=True, tokenize=False)
        for c in contents
    ]
    batch = tokenizer(texts, return_tensors="pt", padding=True, add_special_tokens=False)
    with torch.no_grad():
        output = model.generate(
            **batch,
            max_new_tokens=max_new_tokens,
            do_sample=not greedy,
            temperature=None if greedy else temperature,
            top_p=None,
            top_k=None,
            num_return_sequences=n,
            pad_token_id=tokenizer.pad_token_id,
        )
    return tokenizer.batch_decode(output[:, batch.input_ids.shape[1] :], skip_special_tokens=True)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ks", type=int, nargs="+", default=[1, 2, 3, 4])
    parser.add_argument("--problems", type=int, default=30)
    parser.add_argument("--samples", type=int, default=4)
    parser.add_argument("--temperature", type=float, default=0.7)
    parser.add_argument("--max_new_tokens", type=int, default=24)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    model_dir = str(REPO / "data" / "smollm2-135m-instruct")
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    tokenizer.padding_side = "left"
    model = AutoModelForCausalLM.from_pretrained(model_dir).eval()
    torch.manual_seed(0)
    cells, examples = [], {}
    for k in args.ks:
        rng = random.Random(f"compare:0:{k}")
        problems = [draw(rng, k) for _ in range(args.problems)]
        answers = [[max(pair) for pair in pairs] for pairs in problems]
        students = [prompt(pairs) for pairs in problems]
        teachers = [
            s + "\n\nA reference solution to this problem is:\n" + "\n".join(map(str, a))
            for s, a in zip(students, answers, strict=True)
        ]
        options = {"max_new_tokens": args.max_new_tokens, "temperature": args.temperature}
        sampled = generate(model, tokenizer, students, n=args.samples, greedy=False, **options)
        greedy = generate(model, tokenizer, students, n=1, greedy=True, **options)
        teacher = generate(model, tokenizer, teachers, n=1, greedy=True, **options)
        rewards = [reward(text, answers[i // args.samples]) for i, text in enumerate(sampled)]
        groups = [rewards[i * args.samples : (i + 1) * args.samples] for i in range(len(problems))]
        per_decision = [d for i, text in enumerate(sampled) for d in decisions(text, answers[i // args.samples])]
        cell = {
            "k": k,
            "problems": len(problems),
            "samples": args.samples,
            "sampled_accuracy": sum(rewards) / len(rewards),
            "sampled_decision_accuracy": sum(per_decision) / len(per_decision),
            "mixed_group_frac": sum(0 < sum(g) < len(g) for g in groups) / len(groups),
            "greedy_accuracy": sum(reward(t, a) for t, a in zip(greedy, answers, strict=True)) / len(problems),
            "teacher_greedy_accuracy": sum(reward(t, a) for t, a in zip(teacher, answers, strict=True))
            / len(problems),
        }
        cells.append(cell)
        examples[f"k{k}"] = {"student": students[0], "sampled": sampled[: args.samples], "greedy": greedy[0],
                             "teacher": teacher[0], "answers": answers[0]}  # fmt: skip
        print(json.dumps(cell), flush=True)
    if args.out:
        report = {"temperature": args.temperature, "max_new_tokens": args.max_new_tokens, "cells": cells,
                  "examples": examples}  # fmt: skip
        args.out.write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
