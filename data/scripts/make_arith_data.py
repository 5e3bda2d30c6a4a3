r"""Generate the synthetic chained-arithmetic task under `data/arith/` and its SFT warm-start data.

Each problem adds to or subtracts from a two-digit number one or two more operands, by default single digits
(`--later-low`/`--later-high`; "Compute 84 + 1 - 2."), and is solved one operation per line:

    84 + 1 = 85
    85 - 2 = 83
    The answer is \boxed{83}.

A single wrong step spoils the final answer, which is what makes a partly trained model useful for RL: some samples
are right, some go wrong at an identifiable token, and a teacher that sees the answer disagrees there.

Outputs (a pure function of `--seed`; the test split is drawn first, so `--n-train` / `--n-sft` do not change it):

- `data/arith/train.jsonl`, `data/arith/test.jsonl`: the RL task in the `generic` schema
  `{"prompt": str, "ground_truth": str, "reference_solution": str}`, the last the canonical worked solution (the
  lines above, the assistant message of the SFT rows), which the generic adapter keeps for GEAR's teacher
  (`teacher_reference: solution`); test problems never occur in train (nor in the SFT data).
- `data/arith/sft.jsonl`: conversational SFT rows `{"messages": [user, assistant]}`. The user message is exactly
  what the RL trainer shows (`gear_trl.data.math_tasks.GENERIC` with its default prompt template); a fraction
  (`--teacher-frac`, default 0.3) of rows are *teacher-style*: the user message also carries
  `DEFAULT_MATH_TEACHER_TEMPLATE` with the ground truth, appended by the same function the trainer uses
  (`gear_trl.teacher.prompts.teacher_prompt`), so the model learns to make use of a reference answer. Another fraction
  (`--solution-frac`, default 0) carries the worked solution instead, with `DEFAULT_MATH_SOLUTION_TEMPLATE` (the
  teacher prompt of `teacher_reference: solution`). The SFT problems are the train problems, then fresh problems
  (never test ones) up to `--n-sft`. `load_dataset("data/arith")` ignores `sft.jsonl` (its name matches no split
  keyword), so it gives the train and test splits only.

    python data/scripts/make_arith_data.py
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

from gear_trl.data.math_tasks import GENERIC
from gear_trl.teacher.prompts import teacher_prompt
from gear_trl.trainer.gear_config import DEFAULT_MATH_SOLUTION_TEMPLATE, DEFAULT_MATH_TEACHER_TEMPLATE

QUESTION_TEMPLATES = ["Compute {expr}.", "What is {expr}?", "Calculate {expr}."]
LOW, HIGH = 10, 99
"""Operands are two-digit numbers."""
MAX_RESULT = 999
"""Every intermediate result lies in [0, MAX_RESULT]."""

Problem = tuple[tuple[int, ...], tuple[str, ...]]
"""(operands, operators): ((47, 38, 12), ("+", "-")) is 47 + 38 - 12."""


def sample_problem(rng: random.Random, three_term_frac: float, later: tuple[int, int] = (LOW, HIGH)) -> Problem:
    """Two or three operands joined by + / -, resampled until every intermediate result is in range. The first
    operand has two digits; the later ones are drawn from `later` (inclusive)."""
    n_terms = 3 if rng.random() < three_term_frac else 2
    while True:
        operands = (rng.randint(LOW, HIGH), *(rng.randint(*later) for _ in range(n_terms - 1)))
        operators = tuple(rng.choice("+-") for _ in range(n_terms - 1))
        if all(0 <= value <= MAX_RESULT for value in partial_results(operands, operators)):
            return operands, operators


def partial_results(operands: tuple[int, ...], operators: tuple[str, ...]) -> list[int]:
    """Left-to-right results after each operation; the last one is the answer."""
    value, results = operands[0], []
    for operator, operand in zip(operators, operands[1:], strict=True):
        value = value + operand if operator == "+" else value - operand
        results.append(value)
    return results


def expression(operands: tuple[int, ...], operators: tuple[str, ...]) -> str:
    parts = [str(operands[0])]
    for operator, operand in zip(operators, operands[1:], strict=True):
        parts += [operator, str(operand)]
    return " ".join(parts)


def solution(operands: tuple[int, ...], operators: tuple[str, ...]) -> str:
    r"""One line per operation, then the boxed answer: "47 + 38 = 85\n85 - 12 = 73\nThe answer is \boxed{73}."."""
    lines, left = [], operands[0]
    for operator, operand, result in zip(operators, operands[1:], partial_results(operands, operators), strict=True):
        lines.append(f"{left} {operator} {operand} = {result}")
        left = result
    lines.append(f"The answer is \\boxed{{{left}}}.")
    return "\n".join(lines)


def draw_problems(
    rng: random.Random, n: int, exclude: set[Problem], three_term_frac: float, later: tuple[int, int]
) -> list[Problem]:
    """`n` distinct problems, none in `exclude` (which is extended with them)."""
    problems = []
    while len(problems) < n:
        problem = sample_problem(rng, three_term_frac, later)
        if problem not in exclude:
            exclude.add(problem)
            problems.append(problem)
    return problems


def task_row(problem: Problem, rng: random.Random) -> dict[str, str]:
    """A generic-schema row: the question (one of a few phrasings), the answer as a number string and the worked
    solution."""
    operands, operators = problem
    question = rng.choice(QUESTION_TEMPLATES).format(expr=expression(operands, operators))
    return {
        "prompt": question,
        "ground_truth": str(partial_results(operands, operators)[-1]),
        "reference_solution": solution(operands, operators),
    }


TEACHER_STYLES = {
    "answer": DEFAULT_MATH_TEACHER_TEMPLATE,
    "solution": DEFAULT_MATH_SOLUTION_TEMPLATE,
}
"""SFT teacher styles: the template appended to the user message (`{ground_truth}` or `{reference_solution}`)."""


def sft_row(row: dict[str, str], problem: Problem, teacher_style: str | None) -> dict[str, list[dict[str, str]]]:
    """The user message exactly as the RL trainer builds it (the generic adapter; for a teacher style, the teacher
    prompt with the reference answer or solution), then the worked solution."""
    messages = GENERIC(row)["prompt"]
    if teacher_style is not None:
        template = TEACHER_STYLES[teacher_style]
        messages = teacher_prompt(messages, row["ground_truth"], template, row["reference_solution"])
    return {"messages": [*messages, {"role": "assistant", "content": solution(*problem)}]}


def write_jsonl(path: Path, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as handle:
        for row in rows:
            handle.write(json.dumps(row) + "\n")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out-dir", type=Path, default=REPO_ROOT / "data" / "arith")
    parser.add_argument("--sft-out", type=Path, default=REPO_ROOT / "data" / "arith" / "sft.jsonl")
    parser.add_argument("--seed", type=int, default=1234)
    parser.add_argument("--n-train", type=int, default=2000)
    parser.add_argument("--n-test", type=int, default=200)
    parser.add_argument("--n-sft", type=int, default=10000, help="SFT rows: the train problems, then fresh ones.")
    parser.add_argument("--teacher-frac", type=float, default=0.3,
                        help="Fraction of teacher-style SFT rows with the reference answer.")  # fmt: skip
    parser.add_argument("--solution-frac", type=float, default=0.0,
                        help="Fraction of teacher-style SFT rows with the reference solution.")  # fmt: skip
    parser.add_argument("--three-term-frac", type=float, default=0.7, help="Fraction of three-operand problems.")
    parser.add_argument("--later-low", type=int, default=1, help="Smallest second/third operand.")
    parser.add_argument("--later-high", type=int, default=9, help="Largest second/third operand.")
    args = parser.parse_args(argv)

    later = (args.later_low, args.later_high)
    rng = random.Random(args.seed)
    seen: set[Problem] = set()
    test = draw_problems(rng, args.n_test, seen, args.three_term_frac, later)
    test_rows = [task_row(problem, rng) for problem in test]
    train = draw_problems(rng, args.n_train, seen, args.three_term_frac, later)
    train_rows = [task_row(problem, rng) for problem in train]
    extra = draw_problems(rng, max(0, args.n_sft - args.n_train), seen, args.three_term_frac, later)
    extra_rows = [task_row(problem, rng) for problem in extra]

    sft_problems = (train + extra)[: args.n_sft]
    sft_task_rows = (train_rows + extra_rows)[: args.n_sft]
    n_teacher = round(args.teacher_frac * len(sft_problems))
    n_solution = round(args.solution_frac * len(sft_problems))
    if n_teacher + n_solution > len(sft_problems):
        parser.error("--teacher-frac + --solution-frac must be at most 1")
    # One draw for both styles (the first n_teacher indices get the answer), so --solution-frac 0 draws as before.
    drawn = rng.sample(range(len(sft_problems)), n_teacher + n_solution)
    styles = {index: "answer" for index in drawn[:n_teacher]} | {index: "solution" for index in drawn[n_teacher:]}
    sft = [
        sft_row(row, problem, styles.get(index))
        for index, (row, problem) in enumerate(zip(sft_task_rows, sft_problems, strict=True))
    ]
    rng.shuffle(sft)

    write_jsonl(args.out_dir / "train.jsonl", train_rows)
    write_jsonl(args.out_dir / "test.jsonl", test_rows)
    write_jsonl(args.sft_out, sft)
    print(
        f"wrote {len(train_rows)} train and {len(test_rows)} test rows to {args.out_dir}, "
        f"{len(sft)} SFT rows ({n_teacher} with the reference answer, {n_solution} with the reference solution) "
        f"to {args.sft_out}"
    )


if __name__ == "__main__":
    main()
