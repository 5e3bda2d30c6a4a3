"""Does GEAR's credit land where the calculator rollouts go wrong?

Samples rollouts of the tool-use testbed's warm start exactly as training does (`gear_trl.inspect_credit.sample_credit`:
GRPO groups, live teacher with the reference calls), and for every failed rollout finds the *error site*: the first
model token whose text departs from the reference (a miscopied digit in a call's arguments, a wrong tool name, a
wrong final answer). It then asks whether GEAR marks that token:

- `onset`: a segment opens exactly at the error token;
- `in_segment`: the error token lies inside a segment;
- `top_kl`: the error token has the rollout's largest reverse KL (student vs teacher);
- `weight`: the token's GEAR weight (above 1 = more blame for a failed rollout with a negative advantage);

and which tokens carry the rollout's largest KL instead (`top_kl_tokens`), and how often they come before the error.

The same shares for a random model token of the rollout are printed beside them, as the chance level.

Beside these label-based figures it records the label-free diagnostics the trainer logs (`gear_trl.credit.diagnostics`:
`kl_failed_over_passed`, `onsets_in_failed_frac` against its chance level `failed_tokens_frac`), computed on the same
rollouts, so the two can be compared across teachers. `--task arith` does the same for the arithmetic testbed's warm
start (the error site: the first character where the rollout departs from the reference solution "a + b = c" line by
line); `--shuffle-truth` gives every problem the ground truth of another problem, a teacher that knows nothing about
this rollout's errors (the control). Writes `bench/results/credit_sites/<task>[_shuffled].json`.

    python -m bench.credit_sites                     # 64 problems x 8 samples: about 2 minutes on 2 CPU cores
    python -m bench.credit_sites --task arith --shuffle-truth
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import statistics
from collections import Counter
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent

RECIPES = {"tools": "recipes/tiny/config_calc_tools.yaml", "arith": "recipes/tiny/config_arith.yaml"}
RECIPE = RECIPES["tools"]


def expected_turns(ground_truth: str) -> list[str]:
    """The text each assistant turn of the reference solution must contain: one call JSON per reference call (as
    the chat template writes `tool_calls`), then the boxed final answer."""
    from gear_trl.rewards.calculator import run_chain

    calls = json.loads(ground_truth)
    env, _ = run_chain(calls)
    return [json.dumps({"name": c["name"], "arguments": c["arguments"]}) for c in calls] + [
        f"\\boxed{{{env.last_result()}}}"
    ]


def turns_of(tokens: list[str], mask: list[bool]) -> list[list[int]]:
    """Token indices of each assistant turn (maximal runs of model tokens)."""
    turns, current = [], []
    for index, is_model in enumerate(mask):
        if is_model:
            current.append(index)
        elif current:
            turns.append(current)
            current = []
    if current:
        turns.append(current)
    return turns


def error_site(tokens: list[str], row: dict) -> int | None:
    """The first model token whose text departs from the reference solution; None when it cannot be located (a
    turn without the expected anchor text, e.g. a call written as plain text)."""
    expected = expected_turns(row["ground_truth"])
    for turn_index, indices in enumerate(turns_of(tokens, row["mask"])):
        if turn_index >= len(expected):
            return indices[0]  # a turn too many
        text, offsets = "", []
        for index in indices:
            offsets.append(len(text))
            text += tokens[index]
        want = expected[turn_index]
        anchor = "{" if turn_index < len(expected) - 1 else "\\boxed{"
        start = text.find(anchor)
        if start < 0:
            return None
        got = text[start : start + len(want)]
        if got == want:
            continue
        wrong_char = start + next((k for k, (a, b) in enumerate(zip(got, want)) if a != b), min(len(got), len(want)))
        token = max(k for k, offset in enumerate(offsets) if offset <= wrong_char)
        return indices[token]
    return None


def calc_reference(prompt: str) -> str | None:
    """The calculator tasks' reference calls for a prompt ("Compute 84 + 17 - 39 with the calculator tools."), as
    JSON: one call per operation, left to right, each on the previous result (data/scripts/make_calc_tools_data.py);
    None without an expression. The question is the prompt's last expression (the tool schemas come before it)."""
    found = re.findall(r"\d+(?: [+-] \d+)+", prompt)
    if not found:
        return None
    terms = found[-1].split()
    left, calls = int(terms[0]), []
    for operator, operand in zip(terms[1::2], terms[2::2], strict=True):
        name = "add" if operator == "+" else "subtract"
        calls.append({"name": name, "arguments": {"a": left, "b": int(operand)}})
        left = left + int(operand) if operator == "+" else left - int(operand)
    return json.dumps(calls)


def calc_error_site(tokens: list[str], row: dict) -> int | None:
    """`error_site` against the row's `ground_truth`, or, in a row without one (the oracle reads the trainer's batch,
    which carries the prompt only), against the reference calls derived from its `prompt`."""
    truth = row.get("ground_truth") or calc_reference(row.get("prompt") or "")
    if truth is None:
        return None
    return error_site(tokens, {**row, "ground_truth": truth})


def arith_reference(prompt: str) -> str | None:
    """The arithmetic task's reference solution for a prompt ("Compute 47 + 38 - 12."): one line per operation, then
    the boxed answer, as the warm start was taught (data/make_arith_data.py); None without an expression."""
    found = re.search(r"\d+(?: [+-] \d+)+", prompt)
    if found is None:
        return None
    terms = found.group(0).split()
    left, lines = int(terms[0]), []
    for operator, operand in zip(terms[1::2], terms[2::2], strict=True):
        result = left + int(operand) if operator == "+" else left - int(operand)
        lines.append(f"{left} {operator} {operand} = {result}")
        left = result
    return "\n".join([*lines, f"The answer is \\boxed{{{left}}}."])


def arith_error_site(tokens: list[str], row: dict) -> int | None:
    """The model token holding the first character where the rollout departs from the reference solution; None when
    it does not depart (a right answer written differently), does not write the first operand, or the prompt has no
    expression."""
    want = arith_reference(row["prompt"])
    if want is None:
        return None
    indices = [k for k, m in enumerate(row["mask"]) if m]
    text, offsets = "", []
    for index in indices:
        offsets.append(len(text))
        text += tokens[index]
    # The solution starts at its first operand (after Qwen3's empty "<think>\n\n</think>\n\n" block)
    start = text.find(want.split(" ", 1)[0])
    if start < 0:
        return None
    wrong_char = next((start + k for k, (a, b) in enumerate(zip(text[start:], want)) if a != b), None)
    if wrong_char is None:
        return None
    return indices[max(k for k, offset in enumerate(offsets) if offset <= wrong_char)]


def label_free(rows: list[dict]) -> dict:
    """The trainer's label-free diagnostics (gear/kl_failed_over_passed, ...) over these rollouts, summed over them
    as the trainer sums over ranks; failed and passed by the sign of the rollout's advantage."""
    import torch

    from gear_trl.credit import failure_contrast, failure_contrast_sums

    sums = sum(
        failure_contrast_sums(
            torch.tensor([row["kl"]]),
            torch.tensor([row["mask"]]),
            torch.tensor([row["segment_ids"]]),
            torch.tensor([row["advantage"]]),
            torch.tensor([row["has_ground_truth"]]),
        )
        for row in rows
    )
    return failure_contrast(sums)


def is_onset(segment_ids: list[int], index: int) -> bool:
    return segment_ids[index] >= 0 and (index == 0 or segment_ids[index - 1] != segment_ids[index])


def site_stats(tokens: list[str], row: dict, index: int) -> dict:
    model = [k for k, m in enumerate(row["mask"]) if m]
    kl = row["kl"]
    return {
        "onset": is_onset(row["segment_ids"], index),
        "in_segment": row["segment_ids"][index] >= 0,
        "top_kl": kl[index] >= max(kl[k] for k in model),
        "weight": row["weights"][index],
        "kl_rank": sorted(model, key=lambda k: -kl[k]).index(index) / max(1, len(model) - 1),
    }


def share(values: list[bool]) -> float | None:
    return sum(values) / len(values) if values else None


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default=None, help="Policy to inspect (default: the recipe's warm start).")
    parser.add_argument("--problems", type=int, default=64, help="Test problems, each sampled num_generations times.")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--task", choices=sorted(RECIPES), default="tools")
    parser.add_argument(
        "--shuffle-truth", action="store_true", help="Teacher sees another problem's ground truth (the control)."
    )
    parser.add_argument("--out", default=None, help="Default: bench/results/credit_sites/<task>[_shuffled].json.")
    args = parser.parse_args(argv)
    recipe = RECIPES[args.task]
    name = f"credit_sites_{args.task}" + ("_shuffled" if args.shuffle_truth else "")
    args.out = args.out or str(
        REPO_ROOT / "bench" / "results" / "credit_sites" / f"{name.removeprefix('credit_sites_')}.json"
    )
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    os.chdir(REPO_ROOT)

    from gear_trl.inspect_credit import sample_credit
    from gear_trl.train import build_trainer, load_splits, parse_args

    argv = ["--config", recipe, "--credit", "gear", "--output_dir", "outputs/credit_sites", "--report_to", "none",
            "--seed", str(args.seed), "--per_device_train_batch_size", "32"]  # fmt: skip
    if args.model:
        argv += ["--model_name_or_path", args.model]
    script_args, training_args, model_args = parse_args(argv)
    script_args.dataset_train_split = "test"
    dataset, _ = load_splits(script_args, training_args)
    column = training_args.ground_truth_column
    truths = list(dataset[column])
    if args.shuffle_truth:  # rotate by one: the teacher sees the next problem's reference, the reward the right one
        dataset = dataset.add_column("teacher_truth", truths[1:] + truths[:1])
    trainer = build_trainer(script_args, training_args, model_args, dataset)
    if args.shuffle_truth:  # the rewards were bound to `column` when built; only the teacher reads this one
        trainer.args.ground_truth_column = "teacher_truth"
    generations = trainer.num_generations
    rollouts = sample_credit(trainer, dataset, args.problems * generations)

    rng = random.Random(args.seed)
    at_error, at_random, unlocated = [], [], 0
    for k, (tokens, row) in enumerate(rollouts):
        # sample_credit samples the first problems in order, each `generations` times; the error site is found
        # against the problem's own reference even when the teacher saw another one's
        row["ground_truth"] = truths[k // generations]
        if row.get("reward") != 0.0:
            continue
        index = error_site(tokens, row) if args.task == "tools" else arith_error_site(tokens, row)
        if index is None:
            unlocated += 1
            continue
        entry = site_stats(tokens, row, index)
        model = [k for k, m in enumerate(row["mask"]) if m]
        top = max(model, key=lambda k: row["kl"][k])
        entry.update(advantage=row["advantage"], token=tokens[index], top_kl_token=tokens[top],
                     top_kl_before_error=top < index)  # fmt: skip
        at_error.append(entry)
        at_random.append(site_stats(tokens, row, rng.choice([k for k, m in enumerate(row["mask"]) if m])))

    def summary(entries: list[dict], with_weight: bool = True) -> dict:
        blamed = [e["weight"] for e in entries if e.get("advantage", -1) < 0]
        return {
            "n": len(entries),
            "onset": share([e["onset"] for e in entries]),
            "in_segment": share([e["in_segment"] for e in entries]),
            "top_kl": share([e["top_kl"] for e in entries]),
            "mean_kl_rank": statistics.fmean(e["kl_rank"] for e in entries) if entries else None,
            "mean_weight_negative_advantage": statistics.fmean(blamed) if blamed and with_weight else None,
        }

    rewards = [row.get("reward") or 0.0 for _, row in rollouts]
    report = {
        "recipe": recipe,
        "shuffle_truth": args.shuffle_truth,
        "model": args.model or model_args.model_name_or_path,
        "rollouts": len(rollouts),
        "mean_reward": statistics.fmean(rewards),
        "failed": sum(r == 0.0 for r in rewards),
        "failed_unlocated": unlocated,
        "error_site": summary(at_error),
        "random_model_token": summary([{**e, "advantage": a["advantage"]} for e, a in zip(at_random, at_error)]),
        "error_tokens": sorted({e["token"] for e in at_error}),
        "top_kl_before_error": share([e["top_kl_before_error"] for e in at_error]),
        "top_kl_tokens": dict(Counter(e["top_kl_token"] for e in at_error).most_common(8)),
        "label_free": label_free([row for _, row in rollouts]),
        "config": {"problems": args.problems, "num_generations": generations, "seed": args.seed},
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(report, indent=1))
    for key in ("error_site", "random_model_token", "label_free"):
        print(key, {k: (round(v, 3) if isinstance(v, float) else v) for k, v in report[key].items()})
    print(f"{report['rollouts']} rollouts, mean reward {report['mean_reward']:.3f}, {report['failed']} failed "
          f"({unlocated} without a located error site) -> {args.out}")  # fmt: skip
    return report


if __name__ == "__main__":
    main()
