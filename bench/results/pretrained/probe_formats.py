"""Which prompt format lets SmolLM2-135M-Instruct (`make smollm2`) copy a list of K words? A format scan for issue 72
item 2, on training prompts of data/item_lists/copy/k8 (their first K words), not a calibration on fresh prompts.

Each format states the K words and asks for them back; a sample is scored strictly (its non-empty lines are exactly
the K words) and leniently (each line lower-cased, a leading `1.`, `1)`, `-` or `*` and end punctuation removed), with
the share of the K positions right (lenient). No worked example, the model's own chat template (its default system
prompt), `--prompts` prompts x 4 samples at `--temperature`, 40 new tokens.

    python bench/results/pretrained/probe_formats.py --ks 4 6 8 --temperature 0.7 > probe_formats.txt
"""

from __future__ import annotations

import argparse
import json
import random
import re
from pathlib import Path

FORMATS = {
    "plain": lambda it: "Write these words one per line, in the same order: " + ", ".join(it) + ".",
    "dashes": lambda it: "Repeat these words exactly, one per line:\n" + "\n".join("- " + w for w in it),
    "numbered": lambda it: (
        "Repeat this numbered list exactly:\n" + "\n".join(f"{i + 1}. {w}" for i, w in enumerate(it))
    ),
    "numbered-copy": lambda it: (
        "Copy this numbered list exactly:\n" + "\n".join(f"{i + 1}. {w}" for i, w in enumerate(it))
    ),
}


def lenient(line: str) -> str:
    line = re.sub(r"^(\d+[.)]|[-*])\s*", "", line.strip().lower())
    return line.strip(" .,;:")


def score(text: str, items: list[str]) -> tuple[float, float, float]:
    """(strict, lenient, share of positions right leniently) of one completion's text."""
    lines = [line for line in text.split("<|im_end|>")[0].split("\n") if line.strip()]
    loose = [lenient(line) for line in lines]
    right = sum(a == b for a, b in zip(loose, items)) / len(items)
    return float([line.strip() for line in lines] == items), float(loose == items), right


def main() -> None:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="data/smollm2-135m-instruct")
    parser.add_argument("--data", default="data/item_lists/copy/k8/train.jsonl")
    parser.add_argument("--ks", nargs="+", type=int, default=[4, 6, 8])
    parser.add_argument("--formats", nargs="+", default=list(FORMATS), choices=list(FORMATS))
    parser.add_argument("--prompts", type=int, default=24)
    parser.add_argument("--temperature", type=float, default=0.7)
    args = parser.parse_args()
    torch.set_num_threads(1)
    tok = AutoTokenizer.from_pretrained(args.model)
    tok.padding_side = "left"
    model = AutoModelForCausalLM.from_pretrained(args.model)
    base = [json.loads(line) for line in Path(args.data).read_text().splitlines()]
    random.Random(1).shuffle(base)
    for k in args.ks:
        rows = [r["items"][:k] for r in base[: args.prompts]]
        for name in args.formats:
            torch.manual_seed(0)
            texts = [tok.apply_chat_template([{"role": "user", "content": FORMATS[name](items)}], tokenize=False,
                                             add_generation_prompt=True) for items in rows]  # fmt: skip
            enc = tok(texts, return_tensors="pt", padding=True)
            out = model.generate(**enc, max_new_tokens=40, do_sample=True, temperature=args.temperature,
                                 num_return_sequences=4, pad_token_id=tok.pad_token_id)  # fmt: skip
            scores = [score(tok.decode(o[enc["input_ids"].shape[1] :]), rows[i // 4]) for i, o in enumerate(out)]
            n = len(scores)
            strict, loose, right = (sum(s[j] for s in scores) / n for j in range(3))
            print(f"K={k} {name:14s} T={args.temperature}: strict {strict:.2f}  lenient {loose:.2f}  "
                  f"positions right {right:.2f}  ({args.prompts} prompts x 4)", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
