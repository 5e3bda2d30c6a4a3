"""Where does a calculator teacher use its reference? Teacher-forced accuracy of the reference rollout, per field.

For each held-out row of a calculator task, the reference conversation (its calls, the calculator's results and the
final answer, as the tool loop builds them) is scored token by token under two prompts: the student's and the
teacher's (the task's teacher template with the reference calls, as GEARTrainer writes them). Each model token of
the reference is put in a field of the call it belongs to (`name`: the tool name; `a`, `b`: the operands; `answer`:
the digits in `\\boxed{}`; `other`: the JSON and chat syntax; the calculator's results are not the model's and not
scored), rendered with the chat template GRPOTrainer trains tool conversations with, and the report gives, per field and prompt, the share of
tokens that are the model's argmax and their mean log-probability. A teacher that copies its reference is near 1 on
every field; one that copies operands but not names is the hypothesis of data/README.md, "Long chains".

    python bench/copy_probe.py --model data/tiny-qwen3-calc-long --task-dir data/calc_long --rows 64

Teacher forcing scores each token given the *reference* prefix, so it measures the copy step by step, not whole
rollouts (a rollout also compounds its own mistakes). Prints a table; `--output` writes it as JSON.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

FIELDS = ("name", "a", "b", "answer", "other")
SPANS = {
    "name": re.compile(r'"name": "(\w+)"'),
    "a": re.compile(r'"a": (-?\d+)'),
    "b": re.compile(r'"b": (-?\d+)'),
    "answer": re.compile(r"\\boxed\{(-?\d+)\}"),
}


def field_of_chars(text: str) -> list[str]:
    """The field of each character of a rendered completion: the value spans of `SPANS`, else "other"."""
    fields = ["other"] * len(text)
    for field, pattern in SPANS.items():
        for match in pattern.finditer(text):
            for index in range(match.start(1), match.end(1)):
                fields[index] = field
    return fields


def assistant_chars(
    text: str, turn_start: str = "<|im_start|>assistant\n", turn_end: str = "<|im_end|>"
) -> list[bool]:
    """Which characters of a completion the model writes: from the start (the generation prompt opened an assistant
    turn) to each `turn_end` inclusive, and again after each `turn_start`. Tool results are not the model's."""
    mask = [False] * len(text)
    position, writing = 0, True
    while position < len(text):
        if writing:
            end = text.find(turn_end, position)
            end = len(text) if end < 0 else end + len(turn_end)
            mask[position:end] = [True] * (end - position)
            position, writing = end, False
        else:
            start = text.find(turn_start, position)
            if start < 0:
                break
            position, writing = start + len(turn_start), True
    return mask


def token_fields(offsets: list[tuple[int, int]], char_fields: list[str], written: list[bool]) -> list[str | None]:
    """A token's field: the field of its first character that is not "other" (a token spanning `"add` is `name`);
    None for a token the model does not write (tool results, the turn markers between them)."""
    out = []
    for start, end in offsets:
        if not any(written[start:end]):
            out.append(None)
            continue
        named = [char_fields[i] for i in range(start, end) if char_fields[i] != "other"]
        out.append(named[0] if named else "other")
    return out


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="data/tiny-qwen3-calc-long")
    parser.add_argument("--tokenizer", help="Tokenizer folder (default: --model's; an SFT snapshot has none).")
    parser.add_argument("--task-dir", default="data/calc_long")
    parser.add_argument("--rows", type=int, default=64, help="Held-out rows scored (the first N of test.jsonl).")
    parser.add_argument("--output", help="Write the table as JSON here.")
    args = parser.parse_args(argv)

    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from data.scripts.make_calc_tools_data import TEACHER_TEMPLATE, conversation
    from gear_trl.data.teacher import teacher_prompt, tool_calls_text, training_chat_template

    torch.set_num_threads(1)
    tokenizer = AutoTokenizer.from_pretrained(args.tokenizer or args.model)
    model = AutoModelForCausalLM.from_pretrained(args.model).eval()
    chat_template = training_chat_template(tokenizer)
    rows = [json.loads(line) for line in (REPO_ROOT / args.task_dir / "test.jsonl").read_text().splitlines()]
    rows = rows[: args.rows]

    totals = {prompt: {field: [0, 0, 0.0] for field in FIELDS} for prompt in ("student", "teacher")}
    for row in rows:
        tools = json.loads(row["tools"])
        calls = json.loads(row["ground_truth"])
        reply = conversation(calls)
        student = [dict(message) for message in row["prompt"]]
        teacher = teacher_prompt(student, tool_calls_text(tokenizer, calls, chat_template), TEACHER_TEMPLATE)
        for label, prompt in (("student", student), ("teacher", teacher)):
            render = {"tools": tools, "tokenize": False, "chat_template": chat_template}
            prompt_text = tokenizer.apply_chat_template(prompt, add_generation_prompt=True, **render)
            full_text = tokenizer.apply_chat_template([*prompt, *reply], **render)
            if not full_text.startswith(prompt_text):
                raise ValueError(f"row {row['id']}: the rendered conversation does not extend its prompt")
            completion = full_text[len(prompt_text) :]
            encoded = tokenizer(completion, add_special_tokens=False, return_offsets_mapping=True)
            prompt_ids = tokenizer(prompt_text, add_special_tokens=False)["input_ids"]
            ids = torch.tensor([prompt_ids + encoded["input_ids"]])
            with torch.no_grad():
                logits = model(ids).logits[0, len(prompt_ids) - 1 : -1].float()
            targets = torch.tensor(encoded["input_ids"])
            logprobs = torch.log_softmax(logits, dim=-1).gather(1, targets[:, None])[:, 0]
            hits = (logits.argmax(dim=-1) == targets).tolist()
            fields = token_fields(encoded["offset_mapping"], field_of_chars(completion), assistant_chars(completion))
            for field, hit, logprob in zip(fields, hits, logprobs.tolist(), strict=True):
                if field is None:
                    continue
                cell = totals[label][field]
                cell[0] += 1
                cell[1] += int(hit)
                cell[2] += logprob

    table = {
        label: {
            field: {"tokens": n, "argmax_acc": hits / n if n else None, "mean_logprob": total / n if n else None}
            for field, (n, hits, total) in fields.items()
        }
        for label, fields in totals.items()
    }
    print(f"{args.model} on {len(rows)} rows of {args.task_dir}/test.jsonl, teacher-forced on the reference rollout")
    print("field    tokens  student acc  teacher acc  student logp  teacher logp")
    for field in FIELDS:
        s, t = table["student"][field], table["teacher"][field]
        if s["tokens"]:
            print(
                f"{field:<8} {s['tokens']:>6}  {s['argmax_acc']:>11.3f}  {t['argmax_acc']:>11.3f}"
                f"  {s['mean_logprob']:>12.3f}  {t['mean_logprob']:>12.3f}"
            )
    result = {"model": args.model, "task_dir": args.task_dir, "rows": len(rows), "fields": table}
    if args.output:
        Path(args.output).write_text(json.dumps(result, indent=2) + "\n")
    return result


if __name__ == "__main__":
    main()
