"""Exploration, not a result: can SmolLM2-135M-Instruct (`make smollm2`) do one horizon step, `a op b` with a in
10-99 and b in 1-9 (no carry), asked plainly? 30 steps drawn as data/scripts/make_horizon_data.py draws them, two
wordings, greedy and 4 samples at temperature 0.7; a completion is right when the first integer after its last `=` (or
in it, without one) is the result. Prints one line per wording and decoding.

    PYTHONPATH=. python bench/results/pretrained/probe_single_step.py
"""

from __future__ import annotations

import random
import re
import sys
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

REPO = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO / "data" / "scripts"))

from make_horizon_data import sample_steps

WORDINGS = ["What is {a} {op} {b}? Answer with the number only.", "{a} {op} {b} ="]


def first_number_after_equals(text: str) -> int | None:
    numbers = re.findall(r"-?\d+", text.split("=")[-1])
    return int(numbers[0]) if numbers else None


def main() -> None:
    model_dir = str(REPO / "data" / "smollm2-135m-instruct")
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    tokenizer.padding_side = "left"
    model = AutoModelForCausalLM.from_pretrained(model_dir).eval()
    torch.manual_seed(0)
    _, steps = sample_steps(random.Random("single:0"), "independent", 30)
    for wording in WORDINGS:
        contents = [wording.format(a=a, op=op, b=b) for a, op, b in steps]
        texts = [
            tokenizer.apply_chat_template([{"role": "user", "content": c}], add_generation_prompt=True, tokenize=False)
            for c in contents
        ]
        batch = tokenizer(texts, return_tensors="pt", padding=True, add_special_tokens=False)
        for greedy in (True, False):
            n = 1 if greedy else 4
            with torch.no_grad():
                output = model.generate(
                    **batch,
                    max_new_tokens=16,
                    do_sample=not greedy,
                    temperature=None if greedy else 0.7,
                    top_p=None,
                    top_k=None,
                    num_return_sequences=n,
                    pad_token_id=tokenizer.pad_token_id,
                )
            decoded = tokenizer.batch_decode(output[:, batch.input_ids.shape[1] :], skip_special_tokens=True)
            right = 0
            for index, text in enumerate(decoded):
                a, op, b = steps[index // n]
                right += first_number_after_equals(text) == (a + b if op == "+" else a - b)
            mode = "greedy" if greedy else "T=0.7 x4"
            print(f"{wording!r} {mode}: {right}/{len(decoded)} right; first: {[t[:30] for t in decoded[:4]]}")


if __name__ == "__main__":
    main()
