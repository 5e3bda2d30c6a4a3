"""Evaluate a saved model or LoRA adapter on a dataset split, scored with the task's own reward.

    python -m gear_trl.evaluate --model outputs/tiny-gear-math --dataset data/math/generic --split test --output report.json
    python -m gear_trl.evaluate --model Qwen/Qwen3-4B --dataset openai/gsm8k --dataset_config main \
        --dataset_format gsm8k --split test --enable-thinking false --max-new-tokens 1024
    python -m gear_trl.evaluate --model outputs/run --dataset data/bfcl --dataset_config single_turn --split simple \
        --temperature 0.6 --num-samples 4

`--model` is a model directory (or Hub id) or a LoRA adapter directory (it has `adapter_config.json`; its base model,
named in that file, is loaded and the adapter merged). Rows are mapped through `gear_trl.data.prepare_dataset`, so
every `dataset_format` a recipe accepts works here; prompts are rendered with the chat template (generation prompt
added, each tool-use row with its own `tools`) and generated in left-padded batches. The reward is the task's own
(`accuracy`, math-verify equivalence with the ground truth; `tool_call_accuracy` for tool-use data) unless
`--reward` names others. Multi-turn tool-use rows need their tools executed over several turns: with `--environment`
(as a recipe's `environment`) every row is rolled out through TRL's own tool loop (`evaluate_multi_turn`) and scored
with that environment's reward (`calculator_answer`, `multi_turn_state`); without it they are skipped and counted
(`skipped_multi_turn`) and single-turn rows are scored with `tool_call_accuracy`.

    python -m gear_trl.evaluate --model data/tiny-qwen3-calc --dataset data/calc_tools --dataset_format tool_use \
        --environment calculator --max-tool-calling-iterations 4

`evaluate(model, tokenizer, dataset, reward_funcs, ...)` and `evaluate_multi_turn(..., environment, ...)` are the same
evaluations as functions, for benchmarks that hold a model in memory.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import sys
from collections.abc import Callable, Sequence

from .plugins import UserInputError

ADAPTER_CONFIG = "adapter_config.json"
TASK_REWARDS = {"tool_use": "tool_call_accuracy"}
"""The reward of each dataset adapter whose task is not answer accuracy (every other adapter: `accuracy`)."""
ENVIRONMENT_REWARDS = {"bfcl": "multi_turn_state", "calculator": "calculator_answer"}
"""The task reward of multi-turn rollouts in each environment (`--environment`)."""
EXECUTING_REWARDS = ("multi_turn_state", "multi_turn_execution", "calculator_answer")


# ---------------------------------------------------------------------------------------------------------------------
# Loading
# ---------------------------------------------------------------------------------------------------------------------


def is_adapter_dir(path: str) -> bool:
    """Whether `path` is a local PEFT adapter directory (it holds `adapter_config.json`)."""
    return os.path.isfile(os.path.join(path, ADAPTER_CONFIG))


def _torch_dtype(dtype):
    import torch

    if dtype is None or dtype == "auto" or isinstance(dtype, torch.dtype):
        return dtype or "auto"
    value = getattr(torch, str(dtype), None)
    if isinstance(value, torch.dtype):
        return value
    raise UserInputError(f"Unknown --dtype {dtype!r}; use auto, float32, bfloat16 or float16.")


def load_model(path: str, *, dtype="auto", device: str | None = None, merge: bool = True, is_trainable: bool = False):
    """(model, tokenizer) from a model directory / Hub id, or from a LoRA adapter directory.

    An adapter is loaded on the base model its `adapter_config.json` names, and merged into it when `merge` (faster
    generation; `merge=False` keeps the `PeftModel`). The tokenizer comes from the adapter directory when training
    saved one there, else from the base model. `device`: None leaves the model where it was loaded (CPU).
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer

    dtype = _torch_dtype(dtype)
    if is_adapter_dir(path):
        from peft import AutoPeftModelForCausalLM

        with open(os.path.join(path, ADAPTER_CONFIG)) as handle:
            base = json.load(handle).get("base_model_name_or_path")
        model = AutoPeftModelForCausalLM.from_pretrained(path, dtype=dtype, is_trainable=is_trainable)
        if merge:
            model = model.merge_and_unload()
        has_tokenizer = any(
            os.path.isfile(os.path.join(path, name)) for name in ("tokenizer.json", "tokenizer_config.json")
        )
        tokenizer = AutoTokenizer.from_pretrained(path if has_tokenizer or not base else base)
    else:
        model = AutoModelForCausalLM.from_pretrained(path, dtype=dtype)
        tokenizer = AutoTokenizer.from_pretrained(path)
    if device is not None:
        model = model.to(device)
    return model, tokenizer


def load_eval_split(
    dataset: str,
    split: str = "test",
    *,
    dataset_config: str | None = None,
    dataset_format: str = "auto",
    limit: int | None = None,
    system_prompt: str | None = None,
    ground_truth_column: str = "ground_truth",
    columns: tuple[str, str, str | None] = ("question", "answer", None),
):
    """(prepared split, adapter name): the split loaded and mapped through `gear_trl.data.prepare_dataset`.
    `columns`: question column, answer column and answer pattern of `dataset_format="columns"`."""
    from .data import column_adapter, detect_adapter, get_adapter, prepare_dataset
    from .trainer.preflight import PreflightError, load_dataset_named

    splits = load_dataset_named(dataset, dataset_config, what="dataset")
    if split not in splits:
        raise PreflightError(f"`--split` {split!r} is not in {dataset!r}; its splits are {list(splits)}.")
    data = splits[split]
    if limit is not None:
        data = data.select(range(min(limit, len(data))))
    if dataset_format == "auto":
        adapter = detect_adapter(data.column_names)
    elif dataset_format == "columns":
        adapter = column_adapter(*columns)
    else:
        adapter = get_adapter(dataset_format)
    prepared = prepare_dataset(
        data, adapter=adapter, ground_truth_column=ground_truth_column, system_prompt=system_prompt
    )
    return prepared, adapter.name


def task_reward(adapter_name: str) -> str:
    """The reward that scores a task: `tool_call_accuracy` for tool-use data, `accuracy` otherwise."""
    return TASK_REWARDS.get(adapter_name, "accuracy")


# ---------------------------------------------------------------------------------------------------------------------
# Evaluation
# ---------------------------------------------------------------------------------------------------------------------


def is_multi_turn_row(row: dict) -> bool:
    """A tool-use row whose environment state must be built by executing tools (`initial_config` /
    `involved_classes` set): out of scope for this single-turn evaluation."""
    classes = row.get("involved_classes")
    if isinstance(classes, str):
        try:
            classes = json.loads(classes) if classes.strip() else []
        except json.JSONDecodeError:
            classes = [classes]
    return bool(classes) or bool(row.get("initial_config"))


def _row_tools(row: dict):
    tools = row.get("tools")
    if tools is None or tools == "":
        return None
    tools = json.loads(tools) if isinstance(tools, str) else tools
    return list(tools) or None


def prompt_ids(tokenizer, row: dict, chat_template_kwargs: dict | None = None) -> list[int]:
    """Token ids of a row's prompt with the generation prompt, as GRPO tokenizes prompts (its own tools rendered)."""
    prompt = row["prompt"]
    if isinstance(prompt, str):
        return list(tokenizer(text=[prompt])["input_ids"][0])
    encoded = tokenizer.apply_chat_template(
        conversation=[prompt],
        tools=_row_tools(row),
        add_generation_prompt=True,
        tokenize=True,
        return_dict=True,
        **(chat_template_kwargs or {}),
    )
    return list(encoded["input_ids"][0])


def _stop_ids(model, tokenizer) -> list[int]:
    eos = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
    if eos is None:
        eos = tokenizer.eos_token_id
    return [eos] if isinstance(eos, int) else list(eos or [])


def _noop(*args, **kwargs):
    return None


def score(reward_funcs: Sequence[Callable], rows: list[dict], completions: list, completion_ids: list) -> list[list]:
    """Per completion, each reward (None where a reward does not apply), called as TRL calls reward functions: the
    prompts, completions and completion ids, plus every other dataset column."""
    keys = [key for key in rows[0] if key not in ("prompt", "completion", "completion_ids")]
    kwargs = {key: [row[key] for row in rows] for key in keys}
    kwargs.update(trainer_state=None, log_extra=_noop, log_metric=_noop)
    prompts = [row["prompt"] for row in rows]
    columns = []
    for func in reward_funcs:
        values = func(prompts=prompts, completions=completions, completion_ids=completion_ids, **kwargs)
        if len(values) != len(completions):
            raise ValueError(
                f"Reward {getattr(func, '__name__', func)!r} returned {len(values)} values for "
                f"{len(completions)} completions."
            )
        columns.append([None if v is None or (isinstance(v, float) and math.isnan(v)) else float(v) for v in values])
    return [list(values) for values in zip(*columns, strict=True)]


def _check_sampling(temperature: float, num_samples: int, batch_size: int) -> None:
    if temperature < 0:
        raise UserInputError(f"`temperature` must be >= 0, got {temperature}.")
    if num_samples < 1 or batch_size < 1:
        raise UserInputError("`num_samples` and `batch_size` must be at least 1.")
    if temperature == 0 and num_samples > 1:
        raise UserInputError(
            "Greedy decoding (temperature 0) gives one completion per prompt; set a temperature > 0 "
            "to draw several samples."
        )


def _reward_names(reward_funcs: Sequence[Callable], reward_names: Sequence[str] | None) -> list[str]:
    names = list(reward_names or [getattr(func, "__name__", f"reward_{i}") for i, func in enumerate(reward_funcs)])
    if len(names) != len(reward_funcs):
        raise ValueError(f"{len(names)} reward names for {len(reward_funcs)} reward functions.")
    return names


def _mean(values) -> float | None:
    values = [v for v in values if v is not None]
    return sum(values) / len(values) if values else None


def _sample(i: int, j: int, row: dict, completion, values: list, names: list[str], finished: bool, gt_column: str):
    """One `per_sample` entry: sample `j` of row `i` with its rewards (None where a reward does not apply)."""
    applicable = [v for v in values if v is not None]
    return {
        "index": i,
        "sample": j,
        "prompt": row["prompt"],
        "completion": completion,
        "ground_truth": row.get(gt_column),
        "reward": sum(applicable) if applicable else None,
        "rewards": dict(zip(names, values, strict=True)),
        "finished": finished,
    }


def _report(n: int, num_samples: int, names: list[str], per_sample: list[dict], **extra) -> dict:
    """The report both evaluations return (see `evaluate`); `extra` entries go before `per_sample`."""
    best: dict[int, float] = {}
    for sample in per_sample:
        value = sample["rewards"][names[0]] if names else None
        if value is not None:
            best[sample["index"]] = max(best.get(sample["index"], -math.inf), value)
    result = {
        "n": n,
        "num_samples": num_samples,
        "accuracy": _mean(s["rewards"][names[0]] for s in per_sample) if names else None,
        "mean_reward": _mean(s["reward"] for s in per_sample),
        "rewards": {name: _mean(s["rewards"][name] for s in per_sample) for name in names},
        "finished_frac": _mean(float(s["finished"]) for s in per_sample),
        **extra,
        "per_sample": per_sample,
    }
    if num_samples > 1:
        result["pass_at_k"] = _mean(best.values())
    return result


def evaluate(
    model,
    tokenizer,
    dataset,
    reward_funcs: Sequence[Callable],
    *,
    batch_size: int = 16,
    max_new_tokens: int = 256,
    temperature: float = 0.0,
    top_p: float = 1.0,
    top_k: int = 0,
    num_samples: int = 1,
    chat_template_kwargs: dict | None = None,
    ground_truth_column: str = "ground_truth",
    seed: int | None = 0,
    progress: bool = True,
    reward_names: Sequence[str] | None = None,
) -> dict:
    """Generate for every row of a prepared dataset and score the completions.

    Args:
        model, tokenizer: a causal LM (on the device to generate on) and its tokenizer.
        dataset: rows with `prompt` (messages or text) and the columns the rewards read (as `prepare_dataset` writes
            them); a `tools` column is rendered into each row's prompt. Multi-turn tool-use rows are skipped.
        reward_funcs: TRL-style reward functions; the first is the task's correctness reward (`accuracy` reads it).
        batch_size: prompts per `generate` call (each sampled `num_samples` times).
        temperature: 0 is greedy decoding; above 0 samples, `num_samples` completions per prompt.
        chat_template_kwargs: passed to the chat template (e.g. `{"enable_thinking": False}`).
        reward_names: names of the rewards in the report (default: the functions' names).

    Returns:
        `{n, num_samples, accuracy, mean_reward, rewards, pass_at_k (num_samples > 1), finished_frac,
        skipped_multi_turn, per_sample}`: `n` prompts evaluated; `accuracy` the mean of the first reward over the
        completions it scores (for 0/1 rewards such as `accuracy` and `tool_call_accuracy`, the fraction correct;
        None if it scores none); `mean_reward` the mean over completions of the sum of the rewards that apply
        (TRL's reward); `rewards` each reward's mean; `pass_at_k` the mean over prompts of the first reward's best
        sample; `finished_frac` the fraction of completions that ended with an end-of-sequence token before
        `max_new_tokens`; `per_sample` one entry per completion `{index, sample, prompt, completion,
        ground_truth, reward, rewards, finished}`.
    """
    import torch
    from tqdm.auto import tqdm
    from transformers import GenerationConfig

    _check_sampling(temperature, num_samples, batch_size)
    all_rows = [dict(row) for row in dataset]
    rows = [row for row in all_rows if not is_multi_turn_row(row)]
    names = _reward_names(reward_funcs, reward_names)
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    stop = _stop_ids(model, tokenizer)
    sampling = temperature > 0
    generation_config = GenerationConfig(
        max_new_tokens=max_new_tokens,
        do_sample=sampling,
        num_return_sequences=num_samples,
        pad_token_id=pad_id,
        eos_token_id=stop,
        **({"temperature": temperature, "top_p": top_p, "top_k": top_k} if sampling else {}),
    )
    encoded = [prompt_ids(tokenizer, row, chat_template_kwargs) for row in rows]
    order = sorted(range(len(rows)), key=lambda i: -len(encoded[i]))  # similar lengths share a batch: less padding
    completions: dict[int, list[tuple[list[int], str, bool]]] = {}
    if seed is not None:
        torch.manual_seed(seed)
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    bar = tqdm(total=len(rows), desc="Generating", unit="prompt", disable=not progress)
    try:
        for start in range(0, len(order), batch_size):
            batch = order[start : start + batch_size]
            width = max(len(encoded[i]) for i in batch)
            input_ids = torch.full((len(batch), width), pad_id, dtype=torch.long)
            attention_mask = torch.zeros((len(batch), width), dtype=torch.long)
            for k, i in enumerate(batch):  # left padding: every prompt ends where generation starts
                input_ids[k, width - len(encoded[i]) :] = torch.tensor(encoded[i])
                attention_mask[k, width - len(encoded[i]) :] = 1
            with torch.no_grad():
                output = model.generate(
                    input_ids=input_ids.to(device),
                    attention_mask=attention_mask.to(device),
                    generation_config=generation_config,
                )
            generated = output[:, width:].cpu().tolist()
            for k, i in enumerate(batch):
                completions[i] = []
                for j in range(num_samples):
                    ids = generated[k * num_samples + j]
                    end = next((t for t, token in enumerate(ids) if token in stop), None)
                    ids = ids[: end + 1] if end is not None else ids  # unfinished rows have no padding
                    text = tokenizer.decode(ids, skip_special_tokens=True)
                    completions[i].append((ids, text, end is not None))
            bar.update(len(batch))
    finally:
        bar.close()
        model.train(was_training)

    flat_rows, flat_completions, flat_ids, where = [], [], [], []
    for i, row in enumerate(rows):
        for j, (ids, text, _) in enumerate(completions.get(i, [])):
            conversational = not isinstance(row["prompt"], str)
            flat_rows.append(row)
            flat_completions.append([{"role": "assistant", "content": text}] if conversational else text)
            flat_ids.append(ids)
            where.append((i, j))
    scores = score(reward_funcs, flat_rows, flat_completions, flat_ids) if flat_rows else []

    per_sample = []
    for (i, j), values in zip(where, scores, strict=True):
        ids, text, finished = completions[i][j]
        per_sample.append(_sample(i, j, rows[i], text, values, names, finished, ground_truth_column))
    return _report(len(rows), num_samples, names, per_sample, skipped_multi_turn=len(all_rows) - len(rows))


def _quiet_logs(trainer, progress: bool) -> None:
    """Keep a trainer's evaluation progress bar (when `progress`) but not its printed metrics dict."""
    from transformers.trainer_callback import PrinterCallback, ProgressCallback

    class BarOnly(ProgressCallback):
        def on_log(self, args, state, control, logs=None, **kwargs):
            pass

    trainer.remove_callback(PrinterCallback)
    trainer.remove_callback(ProgressCallback)
    if progress:
        trainer.add_callback(BarOnly())


def _rollout_evaluator_class():
    from .trainer.gear_trainer import GEARTrainer

    class RolloutEvaluator(GEARTrainer):
        """Evaluation that only rolls out and scores (TRL's `_prepare_inputs` in eval mode: generation, tool loop,
        rewards); GRPO's `prediction_step` would also run a loss forward over every batch, which nobody reads here."""

        def prediction_step(self, model, inputs, prediction_loss_only, ignore_keys=None):
            import torch

            with torch.no_grad():
                self._prepare_inputs(inputs)
            return None, None, None

    return RolloutEvaluator


def evaluate_multi_turn(
    model,
    tokenizer,
    dataset,
    reward_funcs: Sequence[Callable],
    environment: str,
    *,
    batch_size: int = 16,
    max_new_tokens: int = 256,
    max_tool_calling_iterations: int | None = None,
    temperature: float = 0.0,
    top_p: float = 1.0,
    top_k: int = 0,
    num_samples: int = 1,
    chat_template_kwargs: dict | None = None,
    ground_truth_column: str = "ground_truth",
    seed: int = 0,
    progress: bool = True,
    reward_names: Sequence[str] | None = None,
) -> dict:
    """Multi-turn tool rollouts of every row, the tools executed in `environment`, scored with the rewards.

    The rollouts are TRL's own: a `GEARTrainer` (credit `none`) is built around the model with the rows as its
    evaluation set and `trainer.evaluate()` runs GRPOTrainer's generation and tool loop (the training chat template,
    tool results fed back, `max_tool_calling_iterations` rounds, completions capped at `max_new_tokens` tokens).
    Wrapped reward functions record each completion's rewards as the trainer scores them, so a score here is what
    the RL trainer's reward sees. Greedy decoding (temperature 0) passes `do_sample=False` to generation. The trainer
    is built around `model` itself (no copy: the real recipes' models are large) and TRL may patch its forward, so
    evaluate a copy of a model that another trainer is still training.

    Args: as `evaluate`, plus `environment`, a registered environment name (`gear_trl.envs`), and
    `max_tool_calling_iterations` (None: TRL's default, unlimited).

    Returns:
        The same report as `evaluate` (`skipped_multi_turn` is 0; each `per_sample` `completion` is the rollout's
        messages, tool calls and tool results included; `finished` whether its last turn ended with an
        end-of-sequence token) plus `tool_calls`, the mean number of tool results per rollout.
    """
    import tempfile

    from datasets import Dataset

    from .envs import get_environment_factory
    from .trainer.gear_config import GEARConfig

    _check_sampling(temperature, num_samples, batch_size)
    rows = [dict(row) for row in dataset]
    if not rows:
        raise UserInputError("The evaluation split is empty: choose another with --split.")
    names = _reward_names(reward_funcs, reward_names)
    index_column = "_eval_index"
    data = Dataset.from_list([{**row, index_column: i} for i, row in enumerate(rows)])
    stop = set(_stop_ids(model, tokenizer))

    calls: list[list[tuple[list[int], list, list, list]]] = [[] for _ in reward_funcs]

    def recording(k: int, func: Callable) -> Callable:
        def reward(prompts, completions, completion_ids, **kwargs):
            values = func(prompts=prompts, completions=completions, completion_ids=completion_ids, **kwargs)
            calls[k].append((list(kwargs[index_column]), list(completions), list(completion_ids), list(values)))
            return values

        reward.__name__ = names[k]
        return reward

    device = next(model.parameters()).device
    sampling = temperature > 0
    was_training, use_cache = model.training, getattr(model.config, "use_cache", None)
    with tempfile.TemporaryDirectory() as scratch:
        config = GEARConfig(
            output_dir=scratch,
            credit="none",
            use_cpu=device.type == "cpu",
            bf16=False,
            per_device_train_batch_size=2,
            num_generations=2,
            num_generations_eval=num_samples,
            per_device_eval_batch_size=batch_size * num_samples,
            max_completion_length=max_new_tokens,
            max_tool_calling_iterations=max_tool_calling_iterations,
            temperature=temperature if sampling else 1.0,
            top_p=top_p,
            top_k=top_k,
            generation_kwargs=None if sampling else {"do_sample": False},
            chat_template_kwargs=chat_template_kwargs,
            ground_truth_column=ground_truth_column,
            beta=0.0,
            seed=seed,
            report_to="none",
            logging_strategy="no",
            save_strategy="no",
            disable_tqdm=not progress,
            log_completions=False,
            dataloader_num_workers=0,
        )
        trainer = _rollout_evaluator_class()(
            model=model,
            reward_funcs=[recording(k, func) for k, func in enumerate(reward_funcs)],
            args=config,
            train_dataset=data,
            eval_dataset=data,
            processing_class=tokenizer,
            environment_factory=get_environment_factory(environment),
        )
        _quiet_logs(trainer, progress)
        try:
            trainer.evaluate()
        finally:  # the Trainer sets config.use_cache from its arguments: give the caller's model back as it was
            model.train(was_training)
            if use_cache is not None:
                model.config.use_cache = use_cache

    per_sample, seen = [], {}
    for batch in zip(*calls, strict=True):
        indices, completions, completion_ids, _ = batch[0]
        columns = [[None if v is None or (isinstance(v, float) and math.isnan(v)) else float(v) for v in call[3]]
                   for call in batch]  # fmt: skip
        for position, i in enumerate(indices):
            values = [column[position] for column in columns]
            ids = completion_ids[position]
            j = seen[i] = seen.get(i, -1) + 1
            finished = bool(ids) and ids[-1] in stop
            per_sample.append(
                _sample(i, j, rows[i], completions[position], values, names, finished, ground_truth_column)
            )
    per_sample.sort(key=lambda s: (s["index"], s["sample"]))

    def tool_results(completion) -> int:
        return sum(isinstance(m, dict) and m.get("role") == "tool" for m in completion) if isinstance(
            completion, list) else 0  # fmt: skip

    tool_calls = _mean(tool_results(s["completion"]) for s in per_sample)
    return _report(len(rows), num_samples, names, per_sample, tool_calls=tool_calls, skipped_multi_turn=0)


# ---------------------------------------------------------------------------------------------------------------------
# CLI
# ---------------------------------------------------------------------------------------------------------------------


def _bool(value: str) -> bool:
    if value.lower() in ("true", "1", "yes"):
        return True
    if value.lower() in ("false", "0", "no"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {value!r}")


def make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m gear_trl.evaluate",
        description="Evaluate a model or LoRA adapter on a dataset split with the task's own reward.",
        allow_abbrev=False,
    )
    add = parser.add_argument
    add("--model", required=True, help="Model directory, Hub id, or LoRA adapter directory.")
    add("--dataset", required=True, help="Dataset: a local folder (data/math/generic) or a Hub id.")
    add("--split", default="test", help="Split to evaluate (default: test).")
    add("--dataset_config", "--dataset-config", default=None, help="Dataset configuration name.")
    add(
        "--dataset_format",
        "--dataset-format",
        default="auto",
        help="Dataset adapter, as in recipes: auto, gsm8k, math, aime, generic, tool_use, columns, or an import "
        "path (my_pkg.data:to_example).",
    )
    add("--question_column", "--question-column", default="question", help="`--dataset_format columns`: question.")
    add("--answer_column", "--answer-column", default="answer", help="`--dataset_format columns`: answer.")
    add(
        "--answer_pattern",
        "--answer-pattern",
        default=None,
        help="`--dataset_format columns`: regular expression whose last match in the answer is the ground truth.",
    )
    add("--system_prompt", "--system-prompt", default=None, help="Optional system message for every prompt.")
    add(
        "--reward",
        nargs="+",
        default=None,
        help="Reward function(s) by registered name or import path (my_pkg.rewards:my_reward); the first gives "
        "`accuracy`. Default: the task's own (accuracy; tool_call_accuracy for tool_use data; the environment's "
        "for a built-in --environment, required for your own).",
    )
    add(
        "--environment",
        default=None,
        help="Tool environment (as a recipe's `environment`: calculator, bfcl, or an import path such as "
        "my_pkg.bank:BankEnv): roll out multi-turn rows with their tools executed. Default reward: the "
        "environment's (name one with --reward for your own environment).",
    )
    add(
        "--max-tool-calling-iterations",
        "--max_tool_calling_iterations",
        type=int,
        default=None,
        help="Tool rounds per rollout with --environment (as the recipe's; default: unlimited).",
    )
    add("--batch-size", "--batch_size", type=int, default=16, help="Prompts per generate call.")
    add("--max-new-tokens", "--max_new_tokens", type=int, default=256)
    add("--temperature", type=float, default=0.0, help="0: greedy decoding (default); > 0: sampling.")
    add("--top-p", "--top_p", type=float, default=1.0, help="Nucleus sampling (with temperature > 0).")
    add("--top-k", "--top_k", type=int, default=0, help="Top-k sampling, 0 = off (with temperature > 0).")
    add(
        "--num-samples",
        "--num_samples",
        type=int,
        default=1,
        help="Completions per prompt when sampling; reports pass_at_k as well.",
    )
    add("--limit", type=int, default=None, help="Evaluate only the first N rows of the split.")
    add(
        "--enable-thinking",
        "--enable_thinking",
        type=_bool,
        default=None,
        help="Qwen3's thinking switch, passed to the chat template (true/false).",
    )
    add(
        "--chat-template-kwargs",
        "--chat_template_kwargs",
        type=json.loads,
        default=None,
        help="Extra chat-template arguments as JSON, e.g. '{\"enable_thinking\": false}'.",
    )
    add("--dtype", default="auto", help="auto, float32, bfloat16 or float16.")
    add("--device", default=None, help="Device to generate on (default: cuda when available, else cpu).")
    add("--seed", type=int, default=0)
    add("--output", default=None, help="Report path (JSON). Default: outputs/eval/<model>__<dataset>__<split>.json.")
    add("--no-progress", action="store_true", help="Hide the progress bar.")
    add(
        "--as-teacher",
        "--as_teacher",
        nargs="?",
        const="default",
        default=None,
        metavar="RECIPE",
        help="Also score the model as GEAR's teacher: each prompt with the recipe's teacher hint and reference "
        "(default: GEARConfig's), reported as `as_teacher` beside the student's score, with `teacher_gap` "
        "(gear_trl/trainer/teacher_probe.py).",
    )
    return parser


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text.strip("/\\")).strip("_") or "model"


def main(argv: list[str] | None = None) -> dict:
    args = make_parser().parse_args(argv)
    import torch

    from .rewards import get_reward_funcs
    from .trainer.preflight import PreflightError, check_dataset_source, check_model_source

    # A mistyped path is named here, not reported later as a failure to reach the Hub.
    check_model_source(args.model, "--model")
    check_dataset_source(args.dataset, "--dataset")

    reward_names = args.reward
    if args.environment is not None:
        from .envs import get_environment_factory

        get_environment_factory(args.environment)  # an unknown name fails here, naming the known ones
        if not reward_names and args.environment not in ENVIRONMENT_REWARDS:
            raise PreflightError(
                f"--environment {args.environment!r} has no default reward: name one with --reward "
                "(a registered name or an import path such as my_pkg.rewards:my_reward)."
            )
        reward_names = reward_names or [ENVIRONMENT_REWARDS[args.environment]]
    elif reward_names and any(name in EXECUTING_REWARDS for name in reward_names):
        raise PreflightError(
            f"{sorted(EXECUTING_REWARDS)} score multi-turn rollouts whose tools are executed; pass --environment "
            "to run them, or score single turns with tool_call_accuracy."
        )
    dataset, adapter = load_eval_split(
        args.dataset,
        args.split,
        dataset_config=args.dataset_config,
        dataset_format=args.dataset_format,
        limit=args.limit,
        system_prompt=args.system_prompt,
        columns=(args.question_column, args.answer_column, args.answer_pattern),
    )
    reward_names = reward_names or [task_reward(adapter)]
    reward_funcs = get_reward_funcs(reward_names)
    chat_template_kwargs = dict(args.chat_template_kwargs or {})
    if args.enable_thinking is not None:
        chat_template_kwargs["enable_thinking"] = args.enable_thinking
    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    model, tokenizer = load_model(args.model, dtype=args.dtype, device=device)

    multi_turn = {}
    if args.environment is not None:
        multi_turn = {"environment": args.environment, "max_tool_calling_iterations": args.max_tool_calling_iterations}

    def run(rows):
        return (evaluate_multi_turn if multi_turn else evaluate)(
            model,
            tokenizer,
            rows,
            reward_funcs,
            **multi_turn,
            batch_size=args.batch_size,
            max_new_tokens=args.max_new_tokens,
            temperature=args.temperature,
            top_p=args.top_p,
            top_k=args.top_k,
            num_samples=args.num_samples,
            chat_template_kwargs=chat_template_kwargs,
            seed=args.seed,
            progress=not args.no_progress,
            reward_names=reward_names,
        )

    result = run(dataset)
    if args.as_teacher is not None:
        from .trainer.teacher_probe import probe_as_teacher, probe_summary

        result = probe_as_teacher(run, result, dataset, tokenizer, args.as_teacher)
    config = {key: value for key, value in vars(args).items() if key != "no_progress"}
    config.update(reward=reward_names, dataset_format=adapter, chat_template_kwargs=chat_template_kwargs)
    per_sample = result.pop("per_sample")
    report = {
        "model": args.model,
        "dataset": args.dataset,
        "split": args.split,
        **result,
        "config": config,
        "per_sample": per_sample,
    }
    output = args.output or os.path.join(
        "outputs", "eval", f"{_slug(args.model)}__{_slug(args.dataset)}__{_slug(args.split)}.json"
    )
    os.makedirs(os.path.dirname(os.path.abspath(output)), exist_ok=True)
    with open(output, "w", encoding="utf-8") as handle:
        json.dump(report, handle, indent=2, ensure_ascii=False, default=str)

    accuracy = "n/a" if report["accuracy"] is None else f"{report['accuracy']:.4f}"
    mean_reward = "n/a" if report["mean_reward"] is None else f"{report['mean_reward']:.4f}"
    extra = f", pass@{args.num_samples} {report['pass_at_k']:.4f}" if report.get("pass_at_k") is not None else ""
    skipped = f", {report['skipped_multi_turn']} multi-turn rows skipped" if report["skipped_multi_turn"] else ""
    print(
        f"{args.model} on {args.dataset} [{args.split}]: n={report['n']}, {reward_names[0]} {accuracy}, "
        f"mean reward {mean_reward}{extra}{skipped} -> {output}"
    )
    if args.as_teacher is not None:
        print(probe_summary(report, reward_names[0]))
    return report


def cli(argv: list[str] | None = None) -> None:
    """Console-script entry point."""
    from .plugins import UserInputError

    try:
        main(argv)
    except UserInputError as err:
        sys.exit(f"error: {err}")


if __name__ == "__main__":
    cli(sys.argv[1:])
