"""Where does a calculator teacher use its reference? Teacher-forced accuracy of the reference rollout, per field.

For each held-out row of a calculator task, the reference conversation (its calls, the calculator's results and the
final answer, as the tool loop builds them) is rendered with the chat template GRPOTrainer trains tool conversations
with and scored token by token under two prompts: the student's and the teacher's (the task's teacher template with
the reference calls, as GEARTrainer writes them). Only the model's turns are scored (the template's assistant mask,
what SFTTrainer's assistant-only loss covers), each token in a field (`name`: the tool name; `a`, `b`: the operands;
`answer`: the digits in `\\boxed{}`; `stated`: the tool named in a step the model states before its call, in a
task written with `--teacher-reference stated`; `other`: the JSON and chat syntax). The report gives, per field and
prompt, the share of tokens that are the model's argmax and their mean log-probability, and the same share over each
value's *first* token, where the choice is made (`"add"` and `"subtract"` part at their first token; the rest of a
name is then sure). A teacher that copies its reference is near 1 on every field; data/README.md, "Long chains", reads it.
The teacher prompt is the one the teacher-style SFT rows show (`teacher_messages` of make_calc_tools_data.py): the
rows' `reference_solution` where the task was written with `--teacher-reference steps` or `stated`, else the
reference calls.

    python -m bench.copy_probe --model data/tiny-qwen3-calc-long --task-dir data/calc_long --rows 64

Teacher forcing scores each token given the *reference* prefix, so it measures the copy step by step, not whole
rollouts (a rollout also compounds its own mistakes). Prints a table; `--output` writes it as JSON.
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]

FIELDS = ("stated", "name", "a", "b", "answer", "other")
SPANS = {
    "stated": re.compile(r"(?m)^-?\d+ (\w+) -?\d+$"),  # a step stated before its call: `92 subtract 40`
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


def token_fields(pieces: list[str]) -> list[str]:
    """The field of each token, given each token's text: the field of its first character that is not "other" in the
    joined text (a token spanning `"add` is `name`)."""
    char_fields = field_of_chars("".join(pieces))
    out, start = [], 0
    for piece in pieces:
        named = [field for field in char_fields[start : start + len(piece)] if field != "other"]
        out.append(named[0] if named else "other")
        start += len(piece)
    return out


def first_tokens(fields: list[str]) -> list[bool]:
    """Whether each token starts a value: a named field whose previous token is not of the same field."""
    return [field != "other" and (index == 0 or fields[index - 1] != field) for index, field in enumerate(fields)]


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

    from data.scripts.make_calc_tools_data import conversation, reference_format, teacher_messages
    from gear_trl.teacher.prompts import tool_calls_text, training_chat_template

    torch.set_num_threads(1)
    tokenizer = AutoTokenizer.from_pretrained(args.tokenizer or args.model)
    model = AutoModelForCausalLM.from_pretrained(args.model).eval()
    chat_template = training_chat_template(tokenizer)
    rows = [json.loads(line) for line in (REPO_ROOT / args.task_dir / "test.jsonl").read_text().splitlines()]
    rows = rows[: args.rows]

    totals = {prompt: {field: [0, 0, 0.0, 0, 0] for field in FIELDS} for prompt in ("student", "teacher")}
    for row in rows:
        tools = json.loads(row["tools"])
        calls = json.loads(row["ground_truth"])
        reply = conversation(calls, stated=reference_format(row) == "stated")
        student = [dict(message) for message in row["prompt"]]
        teacher = teacher_messages(row, lambda reference: tool_calls_text(tokenizer, reference, chat_template))
        for label, prompt in (("student", student), ("teacher", teacher)):
            rendered = tokenizer.apply_chat_template(
                [*prompt, *reply],
                tools=tools,
                chat_template=chat_template,
                tokenize=True,
                return_dict=True,
                return_assistant_tokens_mask=True,  # the model's turns: what SFTTrainer's assistant-only loss covers
            )
            ids, written = rendered["input_ids"], rendered["assistant_masks"]
            with torch.no_grad():
                logits = model(torch.tensor([ids])).logits[0, :-1].float()  # position t predicts token t + 1
            targets = torch.tensor(ids[1:])
            logprobs = torch.log_softmax(logits, dim=-1).gather(1, targets[:, None])[:, 0]
            hits = (logits.argmax(dim=-1) == targets).tolist()
            fields = token_fields(tokenizer.batch_decode([[token] for token in ids]))
            starts = first_tokens(fields)
            scored = zip(fields[1:], starts[1:], hits, logprobs.tolist(), written[1:], strict=True)
            for field, start, hit, logprob, is_written in scored:
                if not is_written:
                    continue
                cell = totals[label][field]
                cell[0] += 1
                cell[1] += int(hit)
                cell[2] += logprob
                cell[3] += int(start)
                cell[4] += int(start and hit)

    table = {
        label: {
            field: {
                "tokens": n,
                "argmax_acc": hits / n if n else None,
                "mean_logprob": total / n if n else None,
                "values": values,
                "first_token_acc": first_hits / values if values else None,
            }
            for field, (n, hits, total, values, first_hits) in fields.items()
        }
        for label, fields in totals.items()
    }
    print(f"{args.model} on {len(rows)} rows of {args.task_dir}/test.jsonl, teacher-forced on the reference rollout")
    print("field    tokens  student acc  teacher acc  student logp  teacher logp  values  student 1st  teacher 1st")
    for field in FIELDS:
        s, t = table["student"][field], table["teacher"][field]
        if s["tokens"]:
            first = (
                f"  {s['values']:>6}  {s['first_token_acc']:>11.3f}  {t['first_token_acc']:>11.3f}"
                if s["values"]
                else ""
            )
            print(
                f"{field:<8} {s['tokens']:>6}  {s['argmax_acc']:>11.3f}  {t['argmax_acc']:>11.3f}"
                f"  {s['mean_logprob']:>12.3f}  {t['mean_logprob']:>12.3f}{first}"
            )
    result = {"model": args.model, "task_dir": args.task_dir, "rows": len(rows), "fields": table}
    if args.output:
        Path(args.output).write_text(json.dumps(result, indent=2) + "\n")
    return result


if __name__ == "__main__":
    main()
