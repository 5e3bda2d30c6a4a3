"""Which prompt format lets SmolLM2-135M-Instruct (`make smollm2`) copy a list of K words? A format scan for issue 72
item 2, on training prompts of data/item_lists/copy/k8 (their first K words), not a calibration on fresh prompts.

Each format states the K words and asks for them back; a sample is scored strictly (its non-empty lines are exactly
the K words) and leniently (each line lower-cased, a leading `1.`, `1)`, `-` or `*` and end punctuation removed), with
the share of the K positions right (lenient). No worked example, the model's own chat template (its default system
prompt), `--prompts` prompts x 4 samples at `--temperature`, 40 new tokens. With `--teacher-gap`, also each sample's
mean per-token log-probability under a teacher prompt (the same question followed by `TEACHER_HINT` and the reference
written as the format lists it) minus under its own prompt, averaged per prompt, with a 95% normal interval over
prompts: a quick reading of whether the reference helps, not GEAR's teacher path (explore_items.py is that).

    python bench/results/pretrained/probe_formats.py --ks 4 6 8 --temperature 0.7 > probe_formats.txt
"""

from __future__ import annotations

import argparse
import json
import random
import re
import statistics
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


TEACHER_HINT = "\n\nReference answer:\n"


def reference(name: str, items: list[str]) -> str:
    """The right answer written as format `name` asks for it (numbered formats numbered, the others one word a line)."""
    if name.startswith("numbered"):
        return "\n".join(f"{i + 1}. {w}" for i, w in enumerate(items))
    return "\n".join(items)


def completion_log_probs(model, prompt_ids: list[int], completions: list[list[int]], pad_id: int) -> list[float]:
    """Mean log-probability per completion token of each completion (token ids) after `prompt_ids`."""
    import torch

    width = max(len(c) for c in completions)
    ids = torch.full((len(completions), len(prompt_ids) + width), pad_id)
    mask = torch.zeros(len(completions), width)
    for i, c in enumerate(completions):
        ids[i, : len(prompt_ids)] = torch.tensor(prompt_ids)
        ids[i, len(prompt_ids) : len(prompt_ids) + len(c)] = torch.tensor(c)
        mask[i, : len(c)] = 1
    with torch.no_grad():
        logits = model(ids).logits[:, len(prompt_ids) - 1 : -1].float()
    picked = logits.log_softmax(-1).gather(-1, ids[:, len(prompt_ids) :, None])[..., 0]
    return ((picked * mask).sum(-1) / mask.sum(-1).clamp_min(1)).tolist()


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
    parser.add_argument("--teacher-gap", action="store_true", help="Also the teacher's nats gap on the samples.")
    parser.add_argument("--teacher-style", choices=("hint", "turn"), default="hint",
                        help="hint: the reference after the question; turn: the question answered with the reference "
                        "as an earlier chat turn, then asked again")  # fmt: skip
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
            width = enc["input_ids"].shape[1]
            scores = [score(tok.decode(o[width:]), rows[i // 4]) for i, o in enumerate(out)]
            n = len(scores)
            strict, loose, right = (sum(s[j] for s in scores) / n for j in range(3))
            gap_text = ""
            if args.teacher_gap:
                gaps, right_gaps, wrong_gaps = [], [], []
                for p, items in enumerate(rows):
                    done = [o[width:].tolist() for o in out[4 * p : 4 * p + 4]]
                    done = [c[: c.index(tok.pad_token_id) + 1] if tok.pad_token_id in c else c for c in done]
                    student = tok(texts[p], add_special_tokens=False)["input_ids"]
                    if args.teacher_style == "turn":  # the reference as the model's own earlier answer
                        chat = [{"role": "user", "content": FORMATS[name](items)},
                                {"role": "assistant", "content": reference(name, items)},
                                {"role": "user", "content": FORMATS[name](items)}]  # fmt: skip
                    else:
                        chat = [
                            {"role": "user", "content": FORMATS[name](items) + TEACHER_HINT + reference(name, items)}
                        ]
                    teacher_text = tok.apply_chat_template(chat, tokenize=False, add_generation_prompt=True)
                    teacher = tok(teacher_text, add_special_tokens=False)["input_ids"]
                    t_lp = completion_log_probs(model, teacher, done, tok.pad_token_id)
                    s_lp = completion_log_probs(model, student, done, tok.pad_token_id)
                    gaps.append(statistics.fmean(a - b for a, b in zip(t_lp, s_lp)))
                    for j, (a, b) in enumerate(zip(t_lp, s_lp)):  # per sample, by whether it is right (leniently)
                        (right_gaps if scores[4 * p + j][1] else wrong_gaps).append(a - b)
                mean, half = statistics.fmean(gaps), 1.96 * statistics.stdev(gaps) / len(gaps) ** 0.5
                gap_text = f"  teacher gap {mean:+.3f} nats [{mean - half:+.3f}, {mean + half:+.3f}]"
                for label, part in (("right", right_gaps), ("wrong", wrong_gaps)):
                    if part:
                        gap_text += f"; on {label} samples {statistics.fmean(part):+.3f} ({len(part)})"
            print(f"K={k} {name:14s} T={args.temperature}: strict {strict:.2f}  lenient {loose:.2f}  "
                  f"positions right {right:.2f}  ({args.prompts} prompts x 4){gap_text}", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
