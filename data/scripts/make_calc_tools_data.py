r"""Generate the synthetic multi-turn calculator task under `data/calc_tools/` and its SFT warm-start data.

Each problem chains one to three additions or subtractions of two-digit numbers ("Compute 84 + 17 - 39 with the
calculator tools."). The model has two tools, `add(a, b)` and `subtract(a, b)` (`gear_trl.envs.Calculator`), must
make one call per operation, left to right, read each result, feed it into the next call, and finally answer in
`\boxed{}`:

    assistant: <tool_call> {"name": "add", "arguments": {"a": 84, "b": 17}} </tool_call>
    tool:      {"result": 101}
    assistant: <tool_call> {"name": "subtract", "arguments": {"a": 101, "b": 39}} </tool_call>
    tool:      {"result": 62}
    assistant: The answer is \boxed{62}.

One wrong call (a miscopied number, the wrong tool, the original operand instead of the last result) spoils the
answer, and the reward (`gear_trl.rewards.calculator.calculator_answer_reward`) is 1 only for the right answer
computed by the tools. The calculator's state is the list of results so far, so rollouts that have made the same
calls share a GiGPO anchor state.

Outputs (a pure function of `--seed` and the tokenizer; the test split is drawn first, so `--n-train` / `--n-sft` do
not change it):

- `data/calc_tools/train.jsonl`, `data/calc_tools/test.jsonl`: rows in the tool-use schema (`data/README.md`,
  "BFCL (tool use)"; adapter `tool_use`): `id`, `category` (`calc_tools`), `prompt` (one user message), `tools` (JSON
  schemas of the calculator's tools, exactly as TRL derives them from `Calculator`), `ground_truth` (JSON list of the
  reference calls, shown to GEAR's teacher and run by the reward), `answer` (the final result as a string, for
  readers; the reward recomputes it), `initial_config` (`""`: a fresh calculator) and `involved_classes`
  (`["Calculator"]`). Test problems never occur in train (nor in the SFT data).
- `data/calc_tools/sft.jsonl`: conversations for TRL's `SFTTrainer`, `{"messages": [...], "tools": JSON str}`: the
  user message, then per call an assistant message `{"role": "assistant", "content": "", "tool_calls": [{"type":
  "function", "function": {"name", "arguments"}}]}` and a `{"role": "tool", "name", "content"}` message holding what
  the calculator returned, then the final assistant answer. A fraction (`--teacher-frac`, default 0.3) of rows are
  *teacher-style*: the user message carries `TEACHER_TEMPLATE` with the reference calls written as the chat template
  writes tool calls, appended exactly as GEARTrainer builds the teacher prompt (`gear_trl.teacher.prompts.teacher_prompt`
  with `gear_trl.teacher.prompts.tool_calls_text`), so the model learns to make use of them. The SFT problems are the train
  problems, then fresh ones (never test ones) up to `--n-sft`. `load_dataset("data/calc_tools")` ignores `sft.jsonl`,
  so it gives the train and test splits only.

    python data/scripts/make_calc_tools_data.py

`--task calc_long` writes the long-horizon variant under `data/calc_long/` instead: chains of four to six
operations (one tool call each, on the last result, then `\boxed{}`), category and ids `calc_long`, and 70% of SFT
rows teacher-style, so that the warm start learns to follow the reference calls (with 30% the calculator's teacher
did worse than the student, `data/README.md`). As for `calc_tools`, `sft.jsonl` (15 MB) is not committed: the
command writes it in seconds, with the committed train and test files.

    python data/scripts/make_calc_tools_data.py --task calc_long

`--teacher-reference steps` adds a column `reference_solution` to every row: the reference calls as lines
`48 add 44 = 92` (`reference_steps`), each keyed on the result it starts from, and the teacher-style SFT rows show
those lines in `STEPS_TEMPLATE` instead of the calls (for GEAR's `teacher_reference: solution`, which the `tool_use`
adapter supports). `--teacher-reference stated` changes the completions too: the assistant states each step
before its call, as a line `92 subtract 40` (`stated_step`), and `reference_solution` holds the same lines, so a
teacher can copy its next step by matching the number it has just written (shown in `STATED_TEMPLATE`). Both were
tried on `calc_long` (data/README.md, "Long chains"); the committed files use the calls.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
if str(REPO_ROOT) not in sys.path:  # run as a script from anywhere
    sys.path.insert(0, str(REPO_ROOT))

from data.scripts.make_arith_data import expression, partial_results  # the arithmetic task's problems, written as text
from gear_trl.teacher.prompts import teacher_prompt, tool_calls_text, training_chat_template
from gear_trl.envs.base import tool_names
from gear_trl.envs.calculator import Calculator

QUESTION_TEMPLATES = [
    "Compute {expr} with the calculator tools.",
    "Use the calculator tools to work out {expr}.",
    "What is {expr}? Use the calculator tools.",
]
INSTRUCTION = " Make one tool call per operation, from left to right, then give the final answer in \\boxed{}."
TEACHER_TEMPLATE = (
    "\n\nReference tool calls for this request:\n{ground_truth}\nUse them only to check your own choices; make the "
    "calls yourself."
)
"""GEAR's `teacher_template` for this task; `recipes/tiny/config_calc_tools.yaml` sets the same string."""
STEPS_TEMPLATE = (
    "\n\nReference steps for this request, one tool call each (last result, tool, number = result):\n"
    "{reference_solution}\nUse them only to check your own choices; make the calls yourself."
)
"""The teacher template for rows written with `--teacher-reference steps` (GEAR's `teacher_reference: solution`):
the row's `reference_solution`, one line per call keyed on the result it starts from, in place of the calls."""
STATED_TEMPLATE = (
    "\n\nReference steps for this request, one tool call each:\n{reference_solution}\nUse them only to check your own "
    "choices; make the calls yourself."
)
"""The teacher template for rows written with `--teacher-reference stated`: the steps as the assistant states them."""
TEACHER_REFERENCES = ("calls", "steps", "stated")
FINAL_ANSWER = "The answer is \\boxed{{{answer}}}."
LOW, HIGH = 10, 99
"""Operands are two-digit numbers."""
MAX_RESULT = 999
"""Every intermediate result lies in [0, MAX_RESULT]."""
OPERATIONS = {"+": "add", "-": "subtract"}
TASKS = {
    "calc_tools": {"out_dir": REPO_ROOT / "data" / "calc_tools", "n_sft": 6000, "teacher_frac": 0.3,
                   "n_ops_weights": "0.2,0.5,0.3"},
    "calc_long": {"out_dir": REPO_ROOT / "data" / "calc_long", "n_sft": 6000, "teacher_frac": 0.7,
                  "n_ops_weights": "0,0,0,1,1,1"},
}  # fmt: skip
"""Per task (`--task`, also the rows' `category` and id prefix), the defaults of `--out-dir`, `--n-sft`,
`--teacher-frac` and `--n-ops-weights` (relative frequency of 1, 2, 3, ... operations)."""

Problem = tuple[tuple[int, ...], tuple[str, ...]]
"""(operands, operators): ((84, 17, 39), ("+", "-")) is 84 + 17 - 39."""


def calculator_tools() -> list[dict]:
    """The calculator's tool schemas, as TRL renders an environment's methods (`transformers.utils.get_json_schema`
    of each tool, in TRL's alphabetical order)."""
    from transformers.utils import get_json_schema

    env = Calculator()
    return [get_json_schema(getattr(env, name)) for name in tool_names(Calculator)]


def sample_problem(rng: random.Random, n_ops_weights: list[float]) -> Problem:
    """1 to len(n_ops_weights) operations of two-digit numbers, resampled until every partial result is in range."""
    n_ops = rng.choices(range(1, len(n_ops_weights) + 1), weights=n_ops_weights)[0]
    while True:
        operands = tuple(rng.randint(LOW, HIGH) for _ in range(n_ops + 1))
        operators = tuple(rng.choice("+-") for _ in range(n_ops))
        if all(0 <= value <= MAX_RESULT for value in partial_results(operands, operators)):
            return operands, operators


def reference_calls(operands: tuple[int, ...], operators: tuple[str, ...]) -> list[dict]:
    """One call per operation, left to right, each on the previous result: `[{"name", "arguments": {"a", "b"}}]`."""
    calls, left = [], operands[0]
    for operator, operand, result in zip(operators, operands[1:], partial_results(operands, operators), strict=True):
        calls.append({"name": OPERATIONS[operator], "arguments": {"a": left, "b": operand}})
        left = result
    return calls


def reference_steps(operands: tuple[int, ...], operators: tuple[str, ...]) -> str:
    """The reference calls as lines `a name b = result`, each starting from the last result: `48 add 44 = 92`,
    `92 subtract 40 = 52`, ... (`--teacher-reference steps`: the name follows the number the model has just read back
    from the calculator, where in the tool-call rendering it precedes it)."""
    calls = reference_calls(operands, operators)
    results = partial_results(operands, operators)
    return "\n".join(
        f"{call['arguments']['a']} {call['name']} {call['arguments']['b']} = {result}"
        for call, result in zip(calls, results, strict=True)
    )


def stated_step(call: dict) -> str:
    """How the assistant states a call before making it (`--teacher-reference stated`): `92 subtract 40`."""
    return f"{call['arguments']['a']} {call['name']} {call['arguments']['b']}"


def reference_format(row: dict) -> str:
    """Which `--teacher-reference` wrote a task row: `calls` (no `reference_solution`), `steps` (lines with results,
    `92 add 40 = 132`) or `stated` (lines as the assistant states them, `92 add 40`)."""
    reference = row.get("reference_solution")
    if not reference:
        return "calls"
    return "steps" if " = " in reference else "stated"


def draw_problems(rng: random.Random, n: int, exclude: set[Problem], n_ops_weights: list[float]) -> list[Problem]:
    """`n` distinct problems, none in `exclude` (which is extended with them)."""
    problems = []
    while len(problems) < n:
        problem = sample_problem(rng, n_ops_weights)
        if problem not in exclude:
            exclude.add(problem)
            problems.append(problem)
    return problems


def task_row(
    problem: Problem,
    rng: random.Random,
    split: str,
    index: int,
    tools_json: str,
    category: str = "calc_tools",
    reference: str = "calls",
) -> dict:
    """A tool-use-schema row (see the module docstring); with `reference="steps"` also `reference_solution`, the
    calls as `reference_steps` writes them."""
    operands, operators = problem
    question = rng.choice(QUESTION_TEMPLATES).format(expr=expression(operands, operators)) + INSTRUCTION
    row = {
        "id": f"{category}_{split}_{index}",
        "category": category,
        "prompt": [{"role": "user", "content": question}],
        "tools": tools_json,
        "ground_truth": json.dumps(reference_calls(operands, operators)),
        "answer": str(partial_results(operands, operators)[-1]),
        "initial_config": "",
        "involved_classes": json.dumps([Calculator.class_name]),
    }
    if reference == "steps":
        row["reference_solution"] = reference_steps(operands, operators)
    elif reference == "stated":
        row["reference_solution"] = "\n".join(stated_step(call) for call in reference_calls(operands, operators))
    return row


def conversation(calls: list[dict], stated: bool = False) -> list[dict]:
    """The assistant/tool messages of the reference solution, with the tool results the calculator returns; with
    `stated`, each call's message states it first (`stated_step`) as its text."""
    env = Calculator()
    env.reset()
    messages = []
    for call in calls:
        result = env.execute(call)
        if result.startswith("Error"):
            raise RuntimeError(f"Reference call {call} failed: {result}")
        content = stated_step(call) if stated else ""
        messages.append(
            {"role": "assistant", "content": content, "tool_calls": [{"type": "function", "function": call}]}
        )
        messages.append({"role": "tool", "name": call["name"], "content": result})
    messages.append({"role": "assistant", "content": FINAL_ANSWER.format(answer=env.last_result())})
    return messages


def teacher_messages(row: dict, render_calls) -> list[dict]:
    """The teacher prompt GEARTrainer builds for a task row: with a `reference_solution` (`--teacher-reference
    steps` or `stated`, trained with `teacher_reference: solution` and `teacher_template: STEPS_TEMPLATE` or
    `STATED_TEMPLATE`), that text in its template; otherwise the reference calls as `render_calls` writes them (the
    chat template's tool calls) in `TEACHER_TEMPLATE`."""
    messages = [dict(message) for message in row["prompt"]]
    calls = render_calls(json.loads(row["ground_truth"]))
    template = {"steps": STEPS_TEMPLATE, "stated": STATED_TEMPLATE}.get(reference_format(row))
    if template is not None:
        return teacher_prompt(messages, calls, template, row["reference_solution"])
    return teacher_prompt(messages, calls, TEACHER_TEMPLATE)


def sft_row(row: dict, teacher_style: bool, render_calls) -> dict:
    """The user message exactly as the RL trainer builds it (the teacher prompt for teacher-style rows), then the
    reference conversation (its steps stated, in every row of a `stated` task); `tools` as in the task row."""
    messages = teacher_messages(row, render_calls) if teacher_style else [dict(message) for message in row["prompt"]]
    reply = conversation(json.loads(row["ground_truth"]), stated=reference_format(row) == "stated")
    return {"messages": [*messages, *reply], "tools": row["tools"]}


def write_jsonl(path: Path, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as handle:
        for row in rows:
            handle.write(json.dumps(row) + "\n")


def parse_weights(text: str) -> list[float]:
    weights = [float(part) for part in text.split(",")]
    if not weights or any(w < 0 for w in weights) or not any(weights):
        raise argparse.ArgumentTypeError(f"Expected comma-separated non-negative weights, got {text!r}.")
    return weights


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--task", choices=sorted(TASKS), default="calc_tools",
                        help="Task whose defaults apply: calc_tools (1-3 operations) or calc_long (4-6).")  # fmt: skip
    parser.add_argument("--out-dir", type=Path, help="Output folder (default: data/<task>).")
    parser.add_argument("--sft-out", type=Path, help="SFT file (default: <out-dir>/sft.jsonl).")
    parser.add_argument("--tokenizer-dir", type=Path, default=REPO_ROOT / "data" / "tiny-qwen3",
                        help="Tokenizer whose chat template writes the teacher's reference calls.")  # fmt: skip
    parser.add_argument("--seed", type=int, default=1234)
    parser.add_argument("--n-train", type=int, default=1500)
    parser.add_argument("--n-test", type=int, default=200)
    parser.add_argument("--n-sft", type=int, help="SFT rows: the train problems, then fresh ones (default 6000).")
    parser.add_argument("--teacher-frac", type=float,
                        help="Fraction of teacher-style SFT rows (default: calc_tools 0.3, calc_long 0.7).")  # fmt: skip
    parser.add_argument("--n-ops-weights", type=parse_weights,
                        help="Relative frequency of 1, 2, 3, ... operations per problem (default: calc_tools "
                        "0.2,0.5,0.3, calc_long 0,0,0,1,1,1).")  # fmt: skip
    parser.add_argument("--teacher-reference", choices=TEACHER_REFERENCES, default="calls",
                        help="What the teacher sees: the reference calls as the chat template writes them (calls), "
                        "rows with a `reference_solution` of `reference_steps` lines (steps), or completions that "
                        "state each step before its call, with the same lines as `reference_solution` "
                        "(stated).")  # fmt: skip
    args = parser.parse_args(argv)
    for key, value in TASKS[args.task].items():
        if getattr(args, key) is None:
            setattr(args, key, parse_weights(value) if key == "n_ops_weights" else value)
    sft_out = args.sft_out or args.out_dir / "sft.jsonl"

    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(args.tokenizer_dir)
    chat_template = training_chat_template(tokenizer)

    def render_calls(calls: list[dict]) -> str:  # what GEARTrainer._render_ground_truth writes for the teacher
        return tool_calls_text(tokenizer, calls, chat_template)

    tools_json = json.dumps(calculator_tools())
    rng = random.Random(args.seed)
    seen: set[Problem] = set()
    test = draw_problems(rng, args.n_test, seen, args.n_ops_weights)
    test_rows = [
        task_row(problem, rng, "test", i, tools_json, args.task, args.teacher_reference)
        for i, problem in enumerate(test)
    ]
    train = draw_problems(rng, args.n_train, seen, args.n_ops_weights)
    train_rows = [
        task_row(problem, rng, "train", i, tools_json, args.task, args.teacher_reference)
        for i, problem in enumerate(train)
    ]
    extra = draw_problems(rng, max(0, args.n_sft - args.n_train), seen, args.n_ops_weights)
    extra_rows = [
        task_row(problem, rng, "sft", i, tools_json, args.task, args.teacher_reference)
        for i, problem in enumerate(extra)
    ]

    sft_task_rows = (train_rows + extra_rows)[: args.n_sft]
    n_teacher = round(args.teacher_frac * len(sft_task_rows))
    teacher_rows = set(rng.sample(range(len(sft_task_rows)), n_teacher))
    sft = [sft_row(row, index in teacher_rows, render_calls) for index, row in enumerate(sft_task_rows)]
    rng.shuffle(sft)

    write_jsonl(args.out_dir / "train.jsonl", train_rows)
    write_jsonl(args.out_dir / "test.jsonl", test_rows)
    write_jsonl(sft_out, sft)
    print(
        f"wrote {len(train_rows)} train and {len(test_rows)} test rows to {args.out_dir}, "
        f"{len(sft)} SFT rows ({n_teacher} teacher-style) to {sft_out}"
    )


if __name__ == "__main__":
    main()
