r"""Generate the horizon task family under `data/horizon/` (and, optionally, its SFT warm-start rows).

K decisions per problem, K a parameter (`--ks`, default 2 4 8 16), each decision the two-digit result of a two-digit
number plus or minus a single digit that does not cross a tens boundary (`--carries` lets it), written on a line of
its own among execution tokens (the operands, the operator, `=`); the reward is binary, 1 only when every decision is
right (`gear_trl.rewards.horizon`). Two variants:

    independent   "Work out each line: 23 + 5, 48 - 3, 61 + 7."     23 + 5 = 28 / 48 - 3 = 45 / 61 + 7 = 68
    chained       "Start from 23 and apply in turn: + 5, - 3, + 4."  23 + 5 = 28 / 28 - 3 = 25 / 25 + 4 = 29

In `independent` a wrong result changes nothing that later lines must write; in `chained` each line starts from the
previous result, so an early error propagates. Every result (and, in `chained`, every running value) lies in
[10, 99], so each decision is two digit tokens of the tiny tokenizer. Without carries a decision's tens digit is its
left operand's and its units digit one of 90 sums or differences of single digits: the tiny warm start learns these
in about 150 SFT steps, where with carries it had 0.07 of its decisions right after 500 (data/README.md).

Outputs (a pure function of `--seed`; per variant and K the test split is drawn first, so `--n-train` does not
change it, and test problems never occur in train or in the SFT rows):

- `data/horizon/<variant>/k<K>/{train,test}.jsonl`, in the `generic` schema plus labels:
  `{"prompt", "ground_truth": "28,38,75" (the K results), "reference_solution": the K lines, "variant", "k",
  "steps": [[a, op, b], ...], "results": [...], "decision_spans": [[start, end], ...] (each result's characters in
  `reference_solution`)}`. The generic adapter keeps `prompt`, `ground_truth` and `reference_solution`; the labels are
  for readers, and the bench recomputes them from the prompt (`gear_trl.rewards.horizon.horizon_problem`).
- with `--sft-out`: conversational SFT rows of one variant (`--sft-variant`), K drawn uniformly from `--sft-ks`, the
  user message exactly as the RL trainer builds it; `--teacher-frac` of them carry the reference answer and
  `--solution-frac` the reference solution in the teacher's prompt (as `make_arith_data.py` does).

    python data/scripts/make_horizon_data.py
    python data/scripts/make_horizon_data.py --no-task --sft-variant chained --sft-out /tmp/hz/sft_chained.jsonl
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
from gear_trl.rewards.horizon import VARIANTS, decision_spans, make_problem, question, reference_lines
from gear_trl.trainer.gear_config import DEFAULT_MATH_SOLUTION_TEMPLATE, DEFAULT_MATH_TEACHER_TEMPLATE

LOW, HIGH = 10, 99
"""Every result and running value: two digits."""
STEP_LOW, STEP_HIGH = 1, 9
"""The right operand of every step: one digit."""


def crosses_tens(value: int, op: str, b: int) -> bool:
    """Whether `value op b` changes the tens digit (a carry or a borrow)."""
    return (value + b if op == "+" else value - b) // 10 != value // 10


def sample_steps(rng: random.Random, variant: str, k: int, carries: bool = False):
    """A problem's definition: `independent`, K (a, op, b) triples; `chained`, (start, [(op, b)] * K). Without
    `carries`, no step crosses a tens boundary (the result keeps its left operand's tens digit)."""
    if variant == "independent":
        steps = []
        while len(steps) < k:
            a, op, b = rng.randint(LOW, HIGH), rng.choice("+-"), rng.randint(STEP_LOW, STEP_HIGH)
            if LOW <= (a + b if op == "+" else a - b) <= HIGH and (carries or not crosses_tens(a, op, b)):
                steps.append((a, op, b))
        return None, tuple(steps)
    start = value = rng.randint(LOW, HIGH)
    steps = []
    while len(steps) < k:
        op, b = rng.choice("+-"), rng.randint(STEP_LOW, STEP_HIGH)
        after = value + b if op == "+" else value - b
        if LOW <= after <= HIGH and (carries or not crosses_tens(value, op, b)):
            steps.append((op, b))
            value = after
    return start, tuple(steps)


def task_row(variant: str, start, steps) -> dict:
    problem = make_problem(variant, start, list(steps))
    return {
        "prompt": question(problem),
        "ground_truth": ",".join(str(r) for r in problem.results),
        "reference_solution": reference_lines(problem),
        "variant": variant,
        "k": problem.k,
        "steps": [f"{a} {op} {b}" for a, op, b in problem.steps],  # strings: Arrow lists hold one type
        "results": problem.results,
        "decision_spans": [list(span) for span in decision_spans(problem)],
    }


def draw(rng: random.Random, variant: str, k: int, n: int, seen: set, carries: bool = False) -> list[dict]:
    rows, misses = [], 0
    while len(rows) < n:
        key = sample_steps(rng, variant, k, carries)
        if key not in seen:
            seen.add(key)
            rows.append(task_row(variant, *key))
            misses = 0
        else:
            misses += 1
            if misses > 10_000:  # e.g. K = 1 without carries has only 810 problems
                raise ValueError(f"{variant} K={k}: fewer than {len(seen) + n - len(rows)} distinct problems exist")
    return rows


TEACHER_STYLES = {"answer": DEFAULT_MATH_TEACHER_TEMPLATE, "solution": DEFAULT_MATH_SOLUTION_TEMPLATE}


def sft_row(row: dict, teacher_style: str | None) -> dict:
    """The user message as the RL trainer builds it (generic adapter; for a teacher style, the teacher prompt with the
    reference answer or solution), then the reference solution."""
    messages = GENERIC(row)["prompt"]
    if teacher_style is not None:
        messages = teacher_prompt(
            messages, row["ground_truth"], TEACHER_STYLES[teacher_style], row["reference_solution"]
        )
    return {"messages": [*messages, {"role": "assistant", "content": row["reference_solution"]}]}


def write_jsonl(path: Path, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as handle:
        for row in rows:
            handle.write(json.dumps(row) + "\n")


def generate(seed: int, ks: list[int], n_train: int, n_test: int, carries: bool = False) -> tuple[dict, dict]:
    """Per (variant, K): its train and test rows, and its test problems (which the SFT draw avoids)."""
    out, seen_all = {}, {}
    for variant in VARIANTS:
        for k in ks:
            rng = random.Random(f"{seed}:{variant}:{k}")  # a (variant, K)'s rows do not depend on --ks
            seen: set = set()
            test = draw(rng, variant, k, n_test, seen, carries)
            seen_all[(variant, k)] = set(seen)
            train = draw(rng, variant, k, n_train, seen, carries)
            out[(variant, k)] = {"train": train, "test": test}
    return out, seen_all


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out-dir", type=Path, default=REPO_ROOT / "data" / "horizon")
    parser.add_argument("--seed", type=int, default=1234)
    parser.add_argument("--ks", type=int, nargs="+", default=[2, 4, 8, 16])
    parser.add_argument("--n-train", type=int, default=1000)
    parser.add_argument("--n-test", type=int, default=200)
    parser.add_argument("--carries", action="store_true",
                        help="Let steps cross a tens boundary (carries and borrows). Off by default: the tiny warm "
                        "start did not learn carries in 525 SFT steps (data/README.md, 'Horizon task family').")  # fmt: skip
    parser.add_argument("--no-task", action="store_true", help="Write only the SFT rows.")
    parser.add_argument("--sft-out", type=Path, help="Write SFT rows of --sft-variant here.")
    parser.add_argument("--sft-variant", choices=VARIANTS, default="independent")
    parser.add_argument("--sft-ks", type=int, nargs="+", default=[1, 2, 3, 4, 5, 6, 7, 8])
    parser.add_argument("--n-sft", type=int, default=20000)
    parser.add_argument("--teacher-frac", type=float, default=0.35)
    parser.add_argument("--solution-frac", type=float, default=0.35)
    args = parser.parse_args(argv)
    if min(args.ks + args.sft_ks) < 1:
        parser.error("every K must be at least 1")
    if args.teacher_frac + args.solution_frac > 1:
        parser.error("--teacher-frac + --solution-frac must be at most 1")

    task_ks = [] if args.no_task else args.ks
    rows, seen = generate(args.seed, task_ks, args.n_train, args.n_test, args.carries)
    if args.sft_out:  # the SFT draw needs only the test problems of its Ks (a test split does not depend on n_train)
        seen |= generate(args.seed, sorted(set(args.sft_ks) - set(task_ks)), 0, args.n_test, args.carries)[1]
    if not args.no_task:
        for (variant, k), splits in rows.items():
            if k not in args.ks:
                continue
            for split, split_rows in splits.items():
                write_jsonl(args.out_dir / variant / f"k{k}" / f"{split}.jsonl", split_rows)
        print(f"wrote {args.n_train} train and {args.n_test} test rows per variant and K {args.ks} to {args.out_dir}")
    if args.sft_out:
        rng = random.Random(f"{args.seed}:sft:{args.sft_variant}")
        # never a test problem of any K; train problems may recur (the RL task's prompts, as make_arith_data does)
        test_keys = set().union(*(seen[(args.sft_variant, k)] for k in args.sft_ks))
        sft = []
        n_teacher, n_solution = round(args.teacher_frac * args.n_sft), round(args.solution_frac * args.n_sft)
        for index in range(args.n_sft):
            k = rng.choice(args.sft_ks)
            key = sample_steps(rng, args.sft_variant, k, args.carries)
            while key in test_keys:
                key = sample_steps(rng, args.sft_variant, k, args.carries)
            style = "answer" if index < n_teacher else "solution" if index < n_teacher + n_solution else None
            sft.append(sft_row(task_row(args.sft_variant, *key), style))
        rng.shuffle(sft)
        write_jsonl(args.sft_out, sft)
        print(f"wrote {len(sft)} SFT rows ({args.sft_variant}, K in {args.sft_ks}) to {args.sft_out}")


if __name__ == "__main__":
    main()
