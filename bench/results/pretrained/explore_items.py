"""Exploration, not a result: how much of the item-list family (copy K words one a line, gear_trl/rewards/item_lists.py)
SmolLM2-135M-Instruct (`make smollm2`) does before any training, and what GEAR's teacher would tell it.

Per K (`--ks`, default 6 and 8), `--problems` fresh problems of `--variant` (`copy` or `numbered`) drawn as
data/scripts/make_item_list_data.py draws them (its `draw`, a seed of our own, not the committed splits). The student prompt is the generic adapter's
(`gear_trl.data.math_tasks.GENERIC`) with `--prompt-template` (default the bare question: the adapter's default appends
a `\\boxed{}` instruction this task does not use), after `--shots` worked examples as earlier chat turns (default 2:
without them, at temperature 1, the model writes the words comma-separated or wanders off); the teacher prompt is built
from it by GEAR's own code path (`gear_trl.teacher.probe.as_teacher_rows`, `teacher_reference: solution`: GEAR's
solution template with the K reference lines, appended to the last user message; `--teacher-template`
sets a recipe's own `teacher_template` instead). Per problem, `--samples` completions
of each at `--temperature` (default 1; no top-k, no top-p, TRL's sampling) and one greedy student completion,
`--max-new-tokens` tokens; log-probabilities, divergence and entropy at the same temperature, as the trainer takes
them. Per cell:

- sampled accuracy (the variant's reward: `item_list_accuracy` or `numbered_list_accuracy`) with a 95% t-interval
  over problems, per-decision accuracy (`decision_correct`), the share of groups that mix passes and fails, greedy
  accuracy;
- the teacher's sampled accuracy minus the student's on the same problems (a t-interval over problems);
- the teacher gap in nats, paired on the student's own rollouts: per rollout, the mean over its tokens of log pT - log
  pS of the token the student wrote (pT: the same model under the teacher prompt); mean and t-interval over problems
  (each problem's rollouts averaged first); and split by outcome: its mean over right rollouts and over wrong ones,
  and per mixed group the right rollouts' mean minus the wrong ones', with a t-interval over mixed groups
  (`teacher_gap_right_minus_wrong`: whether the reference separates the rollouts GRPO compares, which a mean over
  mostly wrong rollouts hides);
- localization: GEAR's divergence, segments and weights on each rollout with a wrong decision
  (`gear_trl.credit.reverse_kl_and_entropy`, then the credit mode's own function as the trainer runs it, at
  GEARConfig's defaults, the rollout's advantage taken as -1, the sign a failed rollout has in a mixed group), and how often the first onset, and
  the onset of the largest-weight segment (ties at the clip broken by the larger signal), lie on a token of the first
  wrong line (the first wrong decision's line, from its first non-space character to its newline; a missing line is
  not located). Chance: the same onset moved by a random permutation of the rollout's token positions. Rates carry
  t-intervals over rollouts, and so does each rate minus its chance (paired per rollout).

Prints one JSON line a cell and writes the report, with one example a cell, to `--out`.

    OMP_NUM_THREADS=1 PYTHONPATH=. python bench/results/pretrained/explore_items.py --problems 48 --samples 8 --seed 1
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

REPO = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO / "data" / "scripts"))
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from make_item_list_data import draw

from gear_trl.credit import reverse_kl_and_entropy
from gear_trl.credit.modes import CreditInputs, credit_mode, declared_options
from gear_trl.data.math_tasks import GENERIC
from gear_trl.rewards.item_lists import (
    decision_correct,
    item_lines,
    item_list_accuracy,
    make_problem,
    numbered_list_accuracy,
    question,
    reference_lines,
)
from gear_trl.table import paired_interval
from gear_trl.teacher.probe import as_teacher_rows, teacher_settings
from gear_trl.teacher.prompts import DEFAULT_MATH_SOLUTION_TEMPLATE
from gear_trl.trainer.gear_config import GEARConfig

REWARDS = {"copy": item_list_accuracy, "numbered": numbered_list_accuracy}


def teacher(template: str | None) -> dict:
    """GEAR's teacher settings for `teacher_reference: solution`, as a recipe gives them, with `template` as its
    `teacher_template` (None: GEAR's default solution template)."""
    chosen = DEFAULT_MATH_SOLUTION_TEMPLATE if template is None else template
    return {**teacher_settings(None), "teacher_reference": "solution", "teacher_template": chosen}


SHOT_ITEMS = (("sun", "box", "tree", "milk", "door", "hat"), ("lake", "pen", "rose", "ship", "cup"))
"""The worked examples `--shots` puts before the question, as earlier chat turns (fixed, the same for every prompt)."""
CREDIT_SETTINGS = ("credit", "onset_threshold", "entropy_threshold", "normalize", "onset_min_kl", "weight_alpha",
                   "weight_eps", "weight_norm")  # fmt: skip


def interval(values: list[float]) -> dict:
    """Mean and 95% t-interval of `values` (NaN bounds below 2 values; None for none), rounded for the report."""
    out = paired_interval(values)
    if not out["n_seeds"]:
        return {"mean": None, "ci_low": None, "ci_high": None, "n": 0}
    clean = {key: (None if out[key] != out[key] else round(out[key], 4)) for key in ("mean", "ci_low", "ci_high")}
    return {**clean, "n": out["n_seeds"]}


def prompt_ids(tokenizer, messages: list[dict]) -> list[int]:
    text = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    return tokenizer(text, add_special_tokens=False).input_ids


def stop_ids(model, tokenizer) -> set[int]:
    ids = model.generation_config.eos_token_id
    ids = set(ids if isinstance(ids, list) else [ids] if ids is not None else [])
    return ids | ({tokenizer.eos_token_id} if tokenizer.eos_token_id is not None else set())


@torch.no_grad()
def generate(
    model, tokenizer, prompts: list[list[int]], *, samples: int, greedy: bool, max_new_tokens: int, temperature: float
):
    """Per prompt, `samples` completions (token ids, cut after the first stop token) at `temperature`, or one greedy."""
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    width = max(len(p) for p in prompts)
    ids = torch.tensor([[pad] * (width - len(p)) + p for p in prompts])
    mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts])
    output = model.generate(
        input_ids=ids,
        attention_mask=mask,
        max_new_tokens=max_new_tokens,
        do_sample=not greedy,
        temperature=None if greedy else temperature,
        top_p=None,
        top_k=None,
        num_return_sequences=1 if greedy else samples,
        pad_token_id=pad,
    )[:, width:].tolist()
    stops = stop_ids(model, tokenizer)
    cut = [row[: next((i + 1 for i, t in enumerate(row) if t in stops), len(row))] for row in output]
    per = 1 if greedy else samples
    return [cut[i * per : (i + 1) * per] for i in range(len(prompts))]


@torch.no_grad()
def completion_states(model, prompt: list[int], completions: list[list[int]], pad: int):
    """[S, T, H] final hidden states predicting each completion token after `prompt`, and the [S, T] bool mask of real
    tokens (rows right-padded to the longest completion, T)."""
    width = max(len(c) for c in completions)
    ids = torch.tensor([prompt + c + [pad] * (width - len(c)) for c in completions])
    attention = torch.tensor([[1] * (len(prompt) + len(c)) + [0] * (width - len(c)) for c in completions])
    states = model.model(input_ids=ids, attention_mask=attention).last_hidden_state
    mask = torch.tensor([[True] * len(c) + [False] * (width - len(c)) for c in completions])
    return states[:, len(prompt) - 1 : len(prompt) - 1 + width], mask


def token_log_probs(
    states: torch.Tensor, weight: torch.Tensor, completions: list[list[int]], temperature: float
) -> torch.Tensor:
    """[S, T] log-probability at `temperature` of each completion token (0 past a row's end) from [S, T, H] states and
    the [V, H] head."""
    width = states.shape[1]
    ids = torch.tensor([c + [0] * (width - len(c)) for c in completions])
    return ((states @ weight.T).float() / temperature).log_softmax(-1).gather(-1, ids[..., None])[..., 0]


def char_ends(tokenizer, completion: list[int]) -> list[int]:
    """Per token, where its text ends in the decoded completion (special tokens decode to nothing)."""
    ends, last = [], 0
    for t in range(len(completion)):
        last = max(last, len(tokenizer.decode(completion[: t + 1], skip_special_tokens=True)))
        ends.append(last)
    return ends


def wrong_line_tokens(tokenizer, completion: list[int], items: list[str], variant: str) -> set[int] | None:
    """Token positions that overlap the first wrong decision's line; None when the rollout has no wrong decision or
    its first wrong line is missing (the rollout stops short)."""
    text = tokenizer.decode(completion, skip_special_tokens=True)
    decisions = decision_correct(text, items, variant)
    if all(decisions):
        return None
    k = decisions.index(False)
    lines = item_lines(text)
    if k >= len(lines):
        return None
    _, start, end = lines[k]
    ends = char_ends(tokenizer, completion)
    starts = [0, *ends[:-1]]
    return {t for t, (a, b) in enumerate(zip(starts, ends, strict=True)) if a < end and b > start}


def credit(student: torch.Tensor, teacher: torch.Tensor, weight: torch.Tensor, mask: torch.Tensor, cfg: GEARConfig,
           temperature: float):  # fmt: skip
    """GEAR's signal [S, T], segment ids [S, T] (-1 outside segments) and weights [S, T] (advantage -1 on every row)
    from [S, T, H] student and teacher states at `temperature`: `cfg.credit`'s registered credit function, as the
    trainer runs it, on the options it declares."""
    kl, entropy = reverse_kl_and_entropy(student, teacher, weight, mask, temperature=temperature)
    mode = credit_mode(cfg.credit)
    inputs = CreditInputs(kl=kl, entropy=entropy, log_ratio=None, mask=mask, base=-torch.ones(kl.shape[0]),
                          options=declared_options((*mode.options, *mode.reads), cfg))  # fmt: skip
    out = mode.compute(inputs)
    return out.signal, out.segment_ids, out.weights


def onsets(segment_ids: list[int]) -> list[int]:
    return [t for t, s in enumerate(segment_ids) if s >= 0 and (t == 0 or segment_ids[t - 1] != s)]


def shot_turns(shots: int, prompt_template: str, variant: str = "copy") -> list[dict]:
    """The first `shots` worked examples of `variant` as (user, assistant) turns, the user side as the generic adapter
    writes it."""
    turns = []
    for items in SHOT_ITEMS[:shots]:
        problem = make_problem(variant, items)
        turns += GENERIC({"prompt": question(problem), "ground_truth": ""}, prompt_template=prompt_template)["prompt"]
        turns.append({"role": "assistant", "content": reference_lines(problem)})
    return turns


def run_cell(model, tokenizer, cfg: GEARConfig, k: int, args) -> tuple[dict, dict]:
    variant, reward = args.variant, REWARDS[args.variant]
    rng = random.Random(f"explore_items:{args.seed}:{variant}:{k}")
    rows = draw(rng, variant, k, args.problems, set())
    torch.manual_seed(args.seed * 1000 + k)  # a cell's samples do not depend on --ks
    shots = shot_turns(args.shots, args.prompt_template, variant)
    students = [GENERIC(row, prompt_template=args.prompt_template) for row in rows]
    students = [{**row, "prompt": shots + row["prompt"]} for row in students]
    teachers, _ = as_teacher_rows(students, tokenizer, teacher(args.teacher_template))
    student_ids = [prompt_ids(tokenizer, row["prompt"]) for row in students]
    teacher_ids = [prompt_ids(tokenizer, row["prompt"]) for row in teachers]
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    weight = model.get_output_embeddings().weight
    options = {"samples": args.samples, "max_new_tokens": args.max_new_tokens, "temperature": args.temperature}

    sampled, teacher_sampled, greedy = [], [], []
    for start in range(0, len(rows), args.batch):
        part = slice(start, start + args.batch)
        sampled += generate(model, tokenizer, student_ids[part], greedy=False, **options)
        teacher_sampled += generate(model, tokenizer, teacher_ids[part], greedy=False, **options)
        greedy += [g[0] for g in generate(model, tokenizer, student_ids[part], greedy=True, **options)]

    def decode(completions):
        return [tokenizer.decode(c, skip_special_tokens=True) for c in completions]

    accuracy, teacher_minus_student, nats, decisions, mixed = [], [], [], [], []
    nats_right, nats_wrong, right_minus_wrong = [], [], []
    located = {"first_onset": [], "largest_segment": []}
    chance = {"first_onset": [], "largest_segment": []}
    expected_chance, wrong, unlocated = [], 0, 0
    shuffle = random.Random(f"explore_items:shuffle:{args.seed}:{k}")
    for index, row in enumerate(rows):
        items, truth = row["items"], row["ground_truth"]
        texts = decode(sampled[index])
        rewards = reward(texts, [truth] * len(texts))
        teacher_rewards = reward(decode(teacher_sampled[index]), [truth] * len(texts))
        accuracy.append(statistics.fmean(rewards))
        teacher_minus_student.append(statistics.fmean(teacher_rewards) - accuracy[-1])
        mixed.append(float(0 < sum(rewards) < len(rewards)))
        decisions += [float(d) for text in texts for d in decision_correct(text, items, variant)]

        completions = [c if c else [pad] for c in sampled[index]]  # an empty completion scores its one pad token
        s_states, mask = completion_states(model, student_ids[index], completions, pad)
        t_states, _ = completion_states(model, teacher_ids[index], completions, pad)
        t = args.temperature
        gap = (token_log_probs(t_states, weight, completions, t) - token_log_probs(s_states, weight, completions, t))
        per_rollout = ((gap * mask).sum(-1) / mask.sum(-1)).tolist()
        nats.append(statistics.fmean(per_rollout))
        right = [g for g, r in zip(per_rollout, rewards, strict=True) if r == 1.0]
        wrong_rollouts = [g for g, r in zip(per_rollout, rewards, strict=True) if r != 1.0]
        nats_right += right
        nats_wrong += wrong_rollouts
        if right and wrong_rollouts:
            right_minus_wrong.append(statistics.fmean(right) - statistics.fmean(wrong_rollouts))
        signal, segments, weights = credit(s_states, t_states, weight, mask, cfg, t)
        for row_index, completion in enumerate(completions):
            if all(decision_correct(texts[row_index], items, variant)):
                continue
            wrong += 1
            site = wrong_line_tokens(tokenizer, completion, items, variant)
            if site is None:
                unlocated += 1
                continue
            ids = segments[row_index, : len(completion)].tolist()
            starts = onsets(ids)
            largest = max(
                starts,
                key=lambda t: (weights[row_index, t].item(), signal[row_index, t].item(), -t),
                default=None,
            )
            positions = list(range(len(completion)))
            moved = positions[:]
            shuffle.shuffle(moved)
            for name, onset in (("first_onset", starts[0] if starts else None), ("largest_segment", largest)):
                located[name].append(float(onset is not None and onset in site))
                chance[name].append(float(onset is not None and moved[onset] in site))
            expected_chance.append(len(site) / len(completion))

    cell = {
        "variant": variant,
        "k": k,
        "problems": len(rows),
        "samples": args.samples,
        "sampled_accuracy": interval(accuracy),
        "sampled_decision_accuracy": round(statistics.fmean(decisions), 4),
        "mixed_group_frac": round(statistics.fmean(mixed), 4),
        "greedy_accuracy": round(
            statistics.fmean(reward(decode(greedy), [row["ground_truth"] for row in rows])), 4
        ),
        "teacher_sampled_accuracy": round(statistics.fmean(a + d for a, d in zip(accuracy, teacher_minus_student)), 4),
        "teacher_minus_student_accuracy": interval(teacher_minus_student),
        "teacher_gap_nats": interval(nats),
        "teacher_gap_nats_right": interval(nats_right),
        "teacher_gap_nats_wrong": interval(nats_wrong),
        "teacher_gap_right_minus_wrong": interval(right_minus_wrong),
        "localization": {
            "rollouts_with_wrong_decision": wrong,
            "unlocated": unlocated,
            "first_onset_on_wrong_line": interval(located["first_onset"]),
            "first_onset_chance": interval(chance["first_onset"]),
            "first_onset_minus_chance": interval(
                [a - b for a, b in zip(located["first_onset"], chance["first_onset"], strict=True)]
            ),
            "largest_segment_on_wrong_line": interval(located["largest_segment"]),
            "largest_segment_chance": interval(chance["largest_segment"]),
            "largest_segment_minus_chance": interval(
                [a - b for a, b in zip(located["largest_segment"], chance["largest_segment"], strict=True)]
            ),
            "expected_chance": round(statistics.fmean(expected_chance), 4) if expected_chance else None,
        },
    }
    example = {
        "student_prompt": students[0]["prompt"][-1]["content"],
        "teacher_prompt": teachers[0]["prompt"][-1]["content"],
        "sampled": decode(sampled[0]),
        "teacher_sampled": decode(teacher_sampled[0]),
        "greedy": decode([greedy[0]])[0],
        "truth": rows[0]["ground_truth"],
    }
    return cell, example


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=str(REPO / "data" / "smollm2-135m-instruct"))
    parser.add_argument("--variant", choices=sorted(REWARDS), default="copy")
    parser.add_argument("--ks", type=int, nargs="+", default=[6, 8])
    parser.add_argument("--problems", type=int, default=48)
    parser.add_argument("--samples", type=int, default=8)
    parser.add_argument("--max-new-tokens", type=int, default=32)
    parser.add_argument("--temperature", type=float, default=1.0, help="sampling, log-probability and divergence "
                        "temperature, as a recipe's `temperature`")  # fmt: skip
    parser.add_argument("--prompt-template", default="{question}", help="the user message; {question} is the problem")
    parser.add_argument("--shots", type=int, default=2, choices=range(len(SHOT_ITEMS) + 1),
                        help="worked examples before the question, as chat turns (without them the model writes "
                        "comma-separated prose at temperature 1)")  # fmt: skip
    parser.add_argument("--teacher-template", help="a recipe's `teacher_template` ({reference_solution} is the K "
                        "lines); default: GEAR's solution template")  # fmt: skip
    parser.add_argument("--batch", type=int, default=8, help="problems generated together")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "results" / "pretrained" / "explore_items.json")
    args = parser.parse_args(argv)

    tokenizer = AutoTokenizer.from_pretrained(args.model)
    model = AutoModelForCausalLM.from_pretrained(args.model, dtype=torch.float32).eval()
    cfg = GEARConfig(output_dir="/tmp/explore_items", use_cpu=True, report_to="none")
    cells, examples = [], {}
    for k in args.ks:
        started = time.monotonic()
        cell, examples[f"{args.variant}/k{k}"] = run_cell(model, tokenizer, cfg, k, args)
        cell["seconds"] = round(time.monotonic() - started, 1)
        cells.append(cell)
        print(json.dumps(cell), flush=True)
        report = write_report(args, cfg, cells, examples)  # after each cell: a run stopped early keeps what it did
    return report


def write_report(args, cfg: GEARConfig, cells: list[dict], examples: dict) -> dict:
    report = {
        "model": str(args.model),
        "prompt_template": args.prompt_template,
        "variant": args.variant,
        "shots": shot_turns(args.shots, args.prompt_template, args.variant),
        "teacher_template": teacher(args.teacher_template)["teacher_template"],
        "temperature": args.temperature,
        "max_new_tokens": args.max_new_tokens,
        "seed": args.seed,
        "credit": {key: getattr(cfg, key) for key in CREDIT_SETTINGS},
        "torch_threads": torch.get_num_threads(),
        "cells": cells,
        "examples": examples,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    return report


if __name__ == "__main__":
    main()
