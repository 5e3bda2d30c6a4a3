r"""Warm-start a tiny Qwen3 on the arithmetic task (`data/arith/`) with TRL's `SFTTrainer`, on CPU, into
`data/tiny-qwen3-arith/` (or, with `--task calc_tools`, on the multi-turn calculator task).

The model is built from the committed tokenizer in `data/tiny-qwen3/` (`gear_trl.testing.tiny`), trained on
`data/arith/sft.jsonl` with the loss on assistant tokens only (TRL swaps in its Qwen3 training template, which has
`{% generation %}` markers), and stopped early on purpose: it should be *partly* right, so that GRPO/GEAR has room to
improve it and a teacher that sees the ground truth disagrees with it where it goes wrong.

At the end the script samples completions for the test split the way the RL trainer does (chat template with
`add_generation_prompt=True`, no chat-template kwargs, at most `--max-new-tokens` new tokens) and scores them with
`gear_trl.rewards.math_rewards.accuracy_reward`:

- greedy: greedy decoding on the plain prompt;
- sampled: sampling at temperature 1.0 on the plain prompt (what GRPO sees);
- teacher: sampling at temperature 1.0 on the teacher prompt (the ground truth appended with
  `DEFAULT_MATH_TEACHER_TEMPLATE`, as `gear_trl.teacher.prompts.teacher_prompt` builds it);
- teacher with the solution (test rows with a `reference_solution`): the same with the worked solution appended with
  `DEFAULT_MATH_SOLUTION_TEMPLATE`, the teacher prompt of `teacher_reference: solution`.

    python data/scripts/make_arith_data.py
    python data/scripts/make_warm_start.py

`--task calc_tools` warm-starts on the multi-turn calculator task instead (`data/calc_tools/`, made by
`data/scripts/make_calc_tools_data.py`): SFT on `data/calc_tools/sft.jsonl` (conversations with tool calls and results,
the loss on the assistant turns only), 768-token sequences, saved to `data/tiny-qwen3-calc/`. Its evaluation runs
multi-turn rollouts on the test split through GRPOTrainer's own tool loop (`gear_trl.evaluate.evaluate_multi_turn`:
the model's calls executed in `gear_trl.envs.Calculator`, the results fed back) and scores them with
`gear_trl.rewards.calculator.calculator_answer_reward`; the teacher prompt carries the reference calls with the
task's teacher template. The other defaults (model size, steps, learning rate) are the arithmetic task's.
`--no-eval` skips the final evaluation; `--evaluate-only DIR` trains nothing and scores a saved model (a snapshot,
say) the same way.

    python data/scripts/make_calc_tools_data.py
    python data/scripts/make_warm_start.py --task calc_tools [--max-steps N]

`--task calc_long` is the long-horizon variant (`data/calc_long/`: chains of 4 to 6 calls): 1,024-token sequences,
rollouts of at most 512 tokens and 8 tool rounds, saved to `data/tiny-qwen3-calc-long/`. `--init-from` starts SFT
from a saved model instead of fresh weights (the long variant starts from `data/tiny-qwen3-calc/`, which already
writes the calls).
"""

from __future__ import annotations

import argparse
import copy
import functools
import json
import os
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[2]
if str(REPO_ROOT) not in sys.path:  # run as a script from anywhere
    sys.path.insert(0, str(REPO_ROOT))

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import torch
from datasets import load_dataset
from transformers import AutoTokenizer, GenerationConfig, TrainerCallback, set_seed
from trl import SFTConfig, SFTTrainer

from gear_trl.data.math_tasks import GENERIC
from gear_trl.teacher.prompts import teacher_prompt
from gear_trl.rewards.math_rewards import accuracy_reward, boxed_spans
from gear_trl.testing.tiny import EOS_TOKEN, PAD_TOKEN, build_tiny_qwen3
from gear_trl.trainer.gear_config import DEFAULT_MATH_SOLUTION_TEMPLATE, DEFAULT_MATH_TEACHER_TEMPLATE

DEFAULT_TOKENIZER_DIR = REPO_ROOT / "data" / "tiny-qwen3"
DEFAULT_SFT_FILE = REPO_ROOT / "data" / "arith" / "sft.jsonl"
DEFAULT_TASK_DIR = REPO_ROOT / "data" / "arith"
DEFAULT_OUTPUT_DIR = REPO_ROOT / "data" / "tiny-qwen3-arith"
TASKS = {
    "arith": {
        "sft_file": DEFAULT_SFT_FILE,
        "task_dir": DEFAULT_TASK_DIR,
        "output_dir": DEFAULT_OUTPUT_DIR,
        "max_length": 256,
        "max_new_tokens": 48,
        "max_tool_calling_iterations": 4,
    },
    "calc_tools": {
        "sft_file": REPO_ROOT / "data" / "calc_tools" / "sft.jsonl",
        "task_dir": REPO_ROOT / "data" / "calc_tools",
        "output_dir": REPO_ROOT / "data" / "tiny-qwen3-calc",
        "max_length": 768,
        "max_new_tokens": 256,  # the whole multi-turn completion, tool results included (max_completion_length)
        "max_tool_calling_iterations": 4,
    },
    "calc_long": {
        "sft_file": REPO_ROOT / "data" / "calc_long" / "sft.jsonl",
        "task_dir": REPO_ROOT / "data" / "calc_long",
        "output_dir": REPO_ROOT / "data" / "tiny-qwen3-calc-long",
        "max_length": 1024,  # SFT rows are 568-925 tokens, teacher-style ones included
        "max_new_tokens": 512,  # reference completions of 6 calls, results and answer: under 400 tokens
        "max_tool_calling_iterations": 8,  # 4-6 calls, room for a failed call or two
    },
}
for _variant in ("independent", "chained"):  # the horizon family (data/horizon/), scored at its main K
    TASKS[f"horizon-{_variant}"] = {
        # written by `make_horizon_data.py --no-task --sft-variant VARIANT --sft-out outputs/horizon/sft_VARIANT.jsonl`
        "sft_file": REPO_ROOT / "outputs" / "horizon" / f"sft_{_variant}.jsonl",
        "task_dir": REPO_ROOT / "data" / "horizon" / _variant / "k4",
        "output_dir": REPO_ROOT / "data" / f"tiny-qwen3-horizon-{_variant}",
        "max_length": 384,  # SFT rows of K <= 8 with a teacher's reference solution: under 300 tokens
        "max_new_tokens": 64,  # K = 4 lines of 11-12 tokens, the empty think block and the end token
        "max_tool_calling_iterations": 4,
    }
"""Per task, the defaults of `--sft-file`, `--task-dir`, `--output-dir`, `--max-length`, `--max-new-tokens` and
`--max-tool-calling-iterations` (rounds of the calculator tasks' evaluation, as their recipes set them)."""
TASK_REWARDS = {"horizon-independent": "horizon_accuracy", "horizon-chained": "horizon_accuracy"}
"""The reward a task's evaluation scores with, where it is not `accuracy`."""
CALC_TASKS = ("calc_tools", "calc_long")


# ---------------------------------------------------------------------------------------------------------------------
# Evaluation: the prompts the RL trainer shows, scored with the accuracy reward
# ---------------------------------------------------------------------------------------------------------------------


TEACHER_TEMPLATES = {"answer": DEFAULT_MATH_TEACHER_TEMPLATE, "solution": DEFAULT_MATH_SOLUTION_TEMPLATE}
"""`teacher_reference` -> the default math teacher template the trainer uses with it."""


def rl_prompt(row: dict[str, str], teacher: bool = False, reference: str = "answer") -> list[dict[str, str]]:
    """The conversational prompt the RL trainer builds for a generic-schema row; with `teacher`, the teacher prompt
    (the ground truth, or with `reference="solution"` the row's worked solution, appended with the default math
    teacher template for that reference)."""
    example = GENERIC(row)
    messages = example["prompt"]
    if teacher:
        template = TEACHER_TEMPLATES[reference]
        messages = teacher_prompt(messages, row["ground_truth"], template, example["reference_solution"])
    return messages


@torch.no_grad()
def generate_completions(
    model,
    tokenizer,
    prompts: list[list[dict[str, str]]],
    *,
    do_sample: bool,
    temperature: float = 1.0,
    max_new_tokens: int = 48,
    batch_size: int = 64,
    seed: int = 0,
) -> list[str]:
    """Completions (special tokens skipped, as TRL decodes them) for conversational `prompts`, rendered with the chat
    template and `add_generation_prompt=True`, left-padded in batches."""
    was_training = model.training
    model.eval()
    padding_side = tokenizer.padding_side
    tokenizer.padding_side = "left"
    texts = [tokenizer.apply_chat_template(p, add_generation_prompt=True, tokenize=False) for p in prompts]
    generator_state = torch.random.get_rng_state()
    torch.manual_seed(seed)
    completions: list[str] = []
    try:
        for start in range(0, len(texts), batch_size):
            batch = tokenizer(texts[start : start + batch_size], return_tensors="pt", padding=True,
                              add_special_tokens=False)  # fmt: skip
            generation_config = GenerationConfig(
                max_new_tokens=max_new_tokens,
                do_sample=do_sample,
                temperature=temperature if do_sample else None,
                top_k=0 if do_sample else None,  # plain sampling at `temperature`, as GRPO's default
                top_p=1.0 if do_sample else None,
                eos_token_id=tokenizer.convert_tokens_to_ids(EOS_TOKEN),
                pad_token_id=tokenizer.convert_tokens_to_ids(PAD_TOKEN),
            )
            output = model.generate(**batch, generation_config=generation_config)
            new_tokens = output[:, batch["input_ids"].shape[1] :]
            completions += tokenizer.batch_decode(new_tokens, skip_special_tokens=True)
    finally:
        torch.random.set_rng_state(generator_state)
        tokenizer.padding_side = padding_side
        model.train(was_training)
    return completions


def evaluate(
    model,
    tokenizer,
    rows: list[dict[str, str]],
    *,
    do_sample: bool,
    teacher: bool = False,
    reference: str = "answer",
    max_new_tokens: int = 48,
    seed: int = 0,
    reward=accuracy_reward,
) -> dict[str, Any]:
    """Accuracy (mean of `reward`, by default `accuracy_reward`) and the fraction of completions with a `\\boxed{}`
    on `rows`."""
    prompts = [rl_prompt(row, teacher=teacher, reference=reference) for row in rows]
    completions = generate_completions(
        model, tokenizer, prompts, do_sample=do_sample, max_new_tokens=max_new_tokens, seed=seed
    )
    rewards = reward(completions, [row["ground_truth"] for row in rows])
    return {
        "accuracy": sum(rewards) / len(rewards),
        "boxed": sum(bool(boxed_spans(c)) for c in completions) / len(completions),
        "completions": completions,
    }


def evaluate_all(
    model, tokenizer, rows, max_new_tokens: int = 48, seed: int = 0, reward=accuracy_reward
) -> dict[str, dict[str, Any]]:
    """The accuracies: greedy, sampled (T = 1) and sampled with the teacher prompt (T = 1), and when the rows carry
    worked solutions, sampled with the solution in the teacher prompt."""
    kwargs = {"max_new_tokens": max_new_tokens, "seed": seed, "reward": reward}
    results = {
        "greedy": evaluate(model, tokenizer, rows, do_sample=False, **kwargs),
        "sampled": evaluate(model, tokenizer, rows, do_sample=True, **kwargs),
        "teacher_sampled": evaluate(model, tokenizer, rows, do_sample=True, teacher=True, **kwargs),
    }
    if all(row.get("reference_solution") for row in rows):
        results["teacher_solution_sampled"] = evaluate(
            model, tokenizer, rows, do_sample=True, teacher=True, reference="solution", **kwargs
        )
    return results


def summary(results: dict[str, dict[str, Any]]) -> str:
    return ", ".join(f"{name} acc {r['accuracy']:.3f} (boxed {r['boxed']:.2f})" for name, r in results.items())


# ---------------------------------------------------------------------------------------------------------------------
# Evaluation of the calculator task: multi-turn tool rollouts, scored with the calculator reward
# ---------------------------------------------------------------------------------------------------------------------


def calc_script():
    """`data/scripts/make_calc_tools_data.py` (a script, loaded from its file), whose `teacher_messages` builds the
    calculator tasks' teacher prompts."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("make_calc_tools_data", Path(__file__).with_name(
        "make_calc_tools_data.py"))  # fmt: skip
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def calc_rows(rows: list[dict[str, Any]], tokenizer, teacher: bool = False) -> list[dict[str, Any]]:
    """Calculator rows as the RL trainer prepares them (the `tool_use` adapter); with `teacher`, each prompt is the
    teacher prompt, as in the teacher-style SFT rows: the row's `reference_solution` when it has one
    (`--teacher-reference steps`), else the reference calls as the trainer's chat template writes them, appended
    with the task's template."""
    from gear_trl.teacher.prompts import tool_calls_text, training_chat_template
    from gear_trl.data.tool_use import TOOL_USE

    prepared = [TOOL_USE(row) for row in rows]
    if teacher:
        template = training_chat_template(tokenizer)
        script = calc_script()
        for row in prepared:
            row["prompt"] = script.teacher_messages(row, lambda calls: tool_calls_text(tokenizer, calls, template))
    return prepared


def evaluate_calc(
    model,
    tokenizer,
    rows,
    *,
    do_sample: bool,
    teacher: bool = False,
    max_new_tokens: int = 256,
    seed: int = 0,
    max_tool_calling_iterations: int = 4,
) -> dict[str, Any]:
    """Accuracy (mean `calculator_answer_reward`) of multi-turn rollouts on `rows` (TRL's tool loop, through
    `gear_trl.evaluate.evaluate_multi_turn`), the fraction of rollouts whose last message has a `\\boxed{}`, and
    the mean number of tool calls per rollout."""
    from gear_trl.evaluate import evaluate_multi_turn
    from gear_trl.rewards.calculator import calculator_answer_reward, final_text

    report = evaluate_multi_turn(
        model,
        tokenizer,
        calc_rows(rows, tokenizer, teacher=teacher),
        [calculator_answer_reward],
        "calculator",
        batch_size=32,
        max_new_tokens=max_new_tokens,
        max_tool_calling_iterations=max_tool_calling_iterations,
        temperature=1.0 if do_sample else 0.0,
        seed=seed,
        progress=False,
    )
    completions = [sample["completion"] for sample in report["per_sample"]]
    return {
        "accuracy": report["accuracy"],
        "boxed": sum(bool(boxed_spans(final_text(c))) for c in completions) / len(completions),
        "tool_calls": report["tool_calls"],
        "completions": completions,
    }


def evaluate_all_calc(
    model, tokenizer, rows, max_new_tokens: int = 256, seed: int = 0, max_tool_calling_iterations: int = 4
) -> dict[str, dict[str, Any]]:
    """The three accuracies of the calculator task: greedy, sampled (T = 1) and sampled with the teacher prompt."""
    kwargs = {
        "max_new_tokens": max_new_tokens,
        "seed": seed,
        "max_tool_calling_iterations": max_tool_calling_iterations,
    }
    return {
        "greedy": evaluate_calc(model, tokenizer, rows, do_sample=False, **kwargs),
        "sampled": evaluate_calc(model, tokenizer, rows, do_sample=True, **kwargs),
        "teacher_sampled": evaluate_calc(model, tokenizer, rows, do_sample=True, teacher=True, **kwargs),
    }


class EvalCallback(TrainerCallback):
    """Greedy and sampled accuracy on a few test rows every `every` steps (progress only; off by default).

    It evaluates a copy of the model (the calculator evaluation wraps the model it scores in a GRPO trainer, which
    patches its forward) with the random states saved and restored around it (the evaluations reseed), so a run with
    `--eval-every` trains exactly as one without."""

    def __init__(self, tokenizer, rows, every: int, max_new_tokens: int, evaluate_fn=None):
        self.tokenizer, self.rows, self.every, self.max_new_tokens = tokenizer, rows, every, max_new_tokens
        self.evaluate = evaluate_fn or evaluate

    def on_step_end(self, args, state, control, model=None, **kwargs):
        if not self.every or state.global_step % self.every:
            return
        import numpy as np

        python_state, numpy_state = random.getstate(), np.random.get_state()
        with torch.random.fork_rng():
            probe = copy.deepcopy(model).eval()
            greedy = self.evaluate(probe, self.tokenizer, self.rows, do_sample=False,
                                   max_new_tokens=self.max_new_tokens)  # fmt: skip
            sampled = self.evaluate(probe, self.tokenizer, self.rows, do_sample=True,
                                    max_new_tokens=self.max_new_tokens)  # fmt: skip
        random.setstate(python_state)
        np.random.set_state(numpy_state)
        print(f"[eval] step {state.global_step}: greedy {greedy['accuracy']:.3f}, sampled {sampled['accuracy']:.3f}",
              flush=True)  # fmt: skip


class StopAndSnapshotCallback(TrainerCallback):
    """Stops training after `stop_at` steps (the learning-rate schedule stays that of `max_steps`), and saves the
    model's weights every `every` steps to `snapshot_dir/step-N` (for choosing where to stop: the calculator task
    goes from 0 to nearly 1 accuracy within ~100 steps). Neither touches the random state, so a run stopped at step N
    reproduces the snapshot at step N of a longer run."""

    def __init__(self, stop_at: int | None, every: int = 0, snapshot_dir: Path | None = None):
        self.stop_at, self.every, self.snapshot_dir = stop_at, every, snapshot_dir

    def on_step_end(self, args, state, control, model=None, **kwargs):
        if self.every and self.snapshot_dir is not None and state.global_step % self.every == 0:
            model.save_pretrained(self.snapshot_dir / f"step-{state.global_step}")
        if self.stop_at is not None and state.global_step >= self.stop_at:
            control.should_training_stop = True


class ProgressCallback(TrainerCallback):
    def __init__(self):
        self.start = time.time()

    def on_log(self, args, state, control, logs=None, **kwargs):
        if logs and "loss" in logs:
            print(f"[train] step {state.global_step}/{state.max_steps} loss {logs['loss']:.4f} "
                  f"lr {logs.get('learning_rate', 0):.2e} ({time.time() - self.start:.0f}s)", flush=True)  # fmt: skip


# ---------------------------------------------------------------------------------------------------------------------
# Training
# ---------------------------------------------------------------------------------------------------------------------


def read_jsonl(path: Path) -> list[dict]:
    with open(path) as handle:
        return [json.loads(line) for line in handle if line.strip()]


def directory_size(path: Path) -> int:
    return sum(f.stat().st_size for f in path.iterdir() if f.is_file())


def save_model(model, tokenizer_dir: Path, output_dir: Path) -> None:
    """Save a warm-started model for generation (cache on, Qwen3's eos and pad) with the committed tokenizer."""
    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
    eos_id = tokenizer.convert_tokens_to_ids(EOS_TOKEN)
    pad_id = tokenizer.convert_tokens_to_ids(PAD_TOKEN)
    model.config.use_cache = True
    model.generation_config = GenerationConfig(bos_token_id=pad_id, eos_token_id=eos_id, pad_token_id=pad_id)
    output_dir.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(output_dir)
    # The committed tokenizer, unchanged (SFTTrainer keeps its training template aside; the saved one is Qwen3's).
    tokenizer.save_pretrained(output_dir)
    size = directory_size(output_dir)
    print(f"saved to {output_dir} ({size / 2**20:.1f} MiB)")
    assert size < 20 * 2**20, "the warm-started model must stay under 20 MB"


def task_reward(task: str):
    from gear_trl.rewards import get_reward_funcs

    return get_reward_funcs([TASK_REWARDS.get(task, "accuracy")])[0]


def report_evaluation(model, tokenizer, test_rows: list[dict], args: argparse.Namespace) -> None:
    """Print the task's accuracies on the first `args.n_eval` test rows (on the calculator tasks also the tool calls
    per rollout), with an example completion of each."""
    start = time.time()
    is_calc = args.task in CALC_TASKS
    evaluate_all_fn = functools.partial(evaluate_all, reward=task_reward(args.task))
    if is_calc:
        evaluate_all_fn = functools.partial(evaluate_all_calc,
                                            max_tool_calling_iterations=args.max_tool_calling_iterations)  # fmt: skip
    results = evaluate_all_fn(model, tokenizer, test_rows[: args.n_eval], max_new_tokens=args.max_new_tokens)
    print(
        f"evaluation on {min(args.n_eval, len(test_rows))} test rows ({time.time() - start:.0f}s): {summary(results)}"
    )
    for name in results:
        if is_calc:
            print(f"  {name}: {results[name]['tool_calls']:.2f} tool calls per rollout")
        print(f"  e.g. {name}: {results[name]['completions'][0]!r}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--task", choices=sorted(TASKS), default="arith",
                        help="Task whose defaults apply: arith (data/arith), calc_tools (data/calc_tools) or "
                        "calc_long (data/calc_long).")  # fmt: skip
    parser.add_argument("--init-from", type=Path,
                        help="Start SFT from this saved model (the tokenizer must be --tokenizer-dir's) instead of "
                        "fresh weights; the model-shape options are then ignored.")  # fmt: skip
    parser.add_argument("--tokenizer-dir", type=Path, default=DEFAULT_TOKENIZER_DIR)
    parser.add_argument("--sft-file", type=Path, help="SFT conversations (default: the task's sft.jsonl).")
    parser.add_argument("--task-dir", type=Path, help="Task folder with the test split (default: the task's).")
    parser.add_argument("--output-dir", type=Path, help="Where the model goes (default: the task's).")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--hidden-size", type=int, default=128)
    parser.add_argument("--num-hidden-layers", type=int, default=4)
    parser.add_argument("--num-attention-heads", type=int, default=4)
    parser.add_argument("--num-key-value-heads", type=int, default=2)
    parser.add_argument("--intermediate-mult", type=int, default=4, help="intermediate size = mult x hidden size")
    parser.add_argument(
        "--initializer-range",
        type=float,
        default=0.06,
        help="Std of the initial weights. Qwen3's 0.02 leaves a tiny model on a loss plateau (no copying of digits) "
        "for about 350 steps; 0.06 gets off it in under 100.",
    )
    parser.add_argument("--max-steps", type=int, default=550)
    parser.add_argument("--stop-at-step", type=int,
                        help="Stop after this many steps, keeping the learning-rate schedule of --max-steps.")  # fmt: skip
    parser.add_argument("--snapshot-every", type=int, default=0,
                        help="Save the weights every N steps to <output-dir>-snapshots/step-N (calibration).")  # fmt: skip
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--learning-rate", type=float, default=2e-3)
    parser.add_argument("--warmup-steps", type=int, default=50)
    parser.add_argument("--lr-scheduler", default="cosine")
    parser.add_argument("--weight-decay", type=float, default=0.0)
    parser.add_argument("--max-length", type=int,
                        help="SFT sequence length (default: arith 256, calc_tools 768, calc_long 1024).")  # fmt: skip
    parser.add_argument("--max-new-tokens", type=int,
                        help="Evaluation completion length (default: arith 48, calc_tools 256, calc_long 512).")  # fmt: skip
    parser.add_argument("--max-tool-calling-iterations", type=int,
                        help="Tool rounds per evaluation rollout (default: calc_tools 4, calc_long 8).")  # fmt: skip
    parser.add_argument("--n-eval", type=int, default=200, help="Test rows for the final evaluation.")
    parser.add_argument("--eval-every", type=int, default=0, help="Progress evaluation on 32 test rows every N steps.")
    parser.add_argument("--threads", type=int, default=1, help="torch threads; more than 1 crawls on shared cores")
    parser.add_argument("--no-save", action="store_true", help="Train and evaluate only.")
    parser.add_argument("--no-eval", action="store_true", help="Skip the final evaluation.")
    parser.add_argument("--evaluate-only", type=Path, metavar="DIR",
                        help="Train nothing: score the model or SFT snapshot saved in DIR on --n-eval test rows.")  # fmt: skip
    args = parser.parse_args(argv)
    for key, value in TASKS[args.task].items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    is_calc = args.task in CALC_TASKS

    torch.set_num_threads(args.threads)
    set_seed(args.seed)
    tokenizer = AutoTokenizer.from_pretrained(args.tokenizer_dir)
    if args.evaluate_only is not None:
        from transformers import AutoModelForCausalLM

        with tempfile.TemporaryDirectory() as scratch:  # a snapshot has no generation config: save it as a model
            save_model(AutoModelForCausalLM.from_pretrained(args.evaluate_only, dtype=torch.float32),
                       args.tokenizer_dir, Path(scratch))  # fmt: skip
            model = AutoModelForCausalLM.from_pretrained(scratch, dtype=torch.float32)
        report_evaluation(model, tokenizer, list(load_dataset(str(args.task_dir), split="test")), args)
        return
    heads = args.num_attention_heads
    if args.init_from is not None:
        from transformers import AutoModelForCausalLM

        model = AutoModelForCausalLM.from_pretrained(args.init_from, dtype=torch.float32)
        config = model.config
        heads, args.hidden_size, args.num_hidden_layers = (
            config.num_attention_heads,
            config.hidden_size,
            config.num_hidden_layers,
        )
        args.num_key_value_heads = config.num_key_value_heads
        args.intermediate_mult = config.intermediate_size // config.hidden_size
        print(f"starting from {args.init_from}", flush=True)
    else:
        model = build_tiny_qwen3(
            tokenizer,
            seed=args.seed,
            hidden_size=args.hidden_size,
            intermediate_size=args.intermediate_mult * args.hidden_size,
            num_hidden_layers=args.num_hidden_layers,
            num_attention_heads=heads,
            num_key_value_heads=args.num_key_value_heads,
            head_dim=args.hidden_size // heads,
            initializer_range=args.initializer_range,
        )
    n_params = sum(p.numel() for p in model.parameters())
    print(f"model: hidden {args.hidden_size}, layers {args.num_hidden_layers}, heads {heads}/"
          f"{args.num_key_value_heads}, intermediate {args.intermediate_mult * args.hidden_size}, "
          f"{n_params:,} parameters", flush=True)  # fmt: skip

    sft = load_dataset("json", data_files=str(args.sft_file), split="train")
    test_rows = list(load_dataset(str(args.task_dir), split="test"))
    print(f"SFT rows: {len(sft)}; test rows: {len(test_rows)}", flush=True)

    with tempfile.TemporaryDirectory() as scratch:
        config = SFTConfig(
            output_dir=scratch,
            use_cpu=True,
            bf16=False,
            assistant_only_loss=True,
            max_length=args.max_length,
            per_device_train_batch_size=args.batch_size,
            max_steps=args.max_steps,
            learning_rate=args.learning_rate,
            lr_scheduler_type=args.lr_scheduler,
            warmup_steps=args.warmup_steps,
            weight_decay=args.weight_decay,
            logging_steps=25,
            save_strategy="no",
            report_to="none",
            seed=args.seed,
            data_seed=args.seed,
            dataloader_num_workers=0,
            disable_tqdm=True,
        )
        callbacks = [ProgressCallback()]
        if args.stop_at_step is not None or args.snapshot_every:
            snapshot_dir = args.output_dir.with_name(args.output_dir.name + "-snapshots")
            callbacks.append(StopAndSnapshotCallback(args.stop_at_step, args.snapshot_every, snapshot_dir))
        if args.eval_every:
            evaluate_fn = functools.partial(evaluate, reward=task_reward(args.task))
            if is_calc:
                evaluate_fn = functools.partial(evaluate_calc,
                                                max_tool_calling_iterations=args.max_tool_calling_iterations)  # fmt: skip
            callbacks.append(
                EvalCallback(tokenizer, test_rows[:32], args.eval_every, args.max_new_tokens, evaluate_fn)
            )
        trainer = SFTTrainer(model=model, args=config, train_dataset=sft, processing_class=tokenizer,
                             callbacks=callbacks)  # fmt: skip
        start = time.time()
        trainer.train()
        train_time = time.time() - start
    model = trainer.model.to(torch.float32)
    steps = trainer.state.global_step
    epochs = steps * args.batch_size / len(sft)
    print(f"training: {steps} of {args.max_steps} steps ({epochs:.1f} epochs) in {train_time:.0f}s", flush=True)

    if not args.no_eval:
        report_evaluation(model, tokenizer, test_rows, args)

    if args.no_save:
        return
    save_model(model, args.tokenizer_dir, args.output_dir)


if __name__ == "__main__":
    main()
