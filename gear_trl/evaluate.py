"""Evaluate a saved model or LoRA adapter on a dataset split, scored with the task's own reward.

    python -m gear_trl.evaluate --model outputs/tiny-gear-math --dataset data/math/generic --split test --output report.json
    python -m gear_trl.evaluate --model Qwen/Qwen3-4B --dataset openai/gsm8k --dataset_config main \
        --dataset_format gsm8k --split test --enable-thinking false --max-new-tokens 1024
    python -m gear_trl.evaluate --model outputs/run --dataset data/bfcl --dataset_config single_turn --split simple \
        --temperature 0.6 --num-samples 4 --max-samples 100

`--model` is a model directory (or Hub id) or a LoRA adapter directory (it has `adapter_config.json`; its base model,
named in that file, is loaded and the adapter merged). Rows are mapped through `gear_trl.data.prepare_dataset`, so
every `dataset_format` a recipe accepts works here; prompts are rendered with the chat template (generation prompt
added, each tool-use row with its own `tools`) and generated in left-padded batches. The reward is the task's own
(`accuracy`, math-verify equivalence with the ground truth; `tool_call_accuracy` for tool-use data) unless
`--reward` names others. Multi-turn tool-use rows need their tools executed over several turns: with `--environment`
(as a recipe's `environment`) every row is rolled out through TRL's own tool loop (`evaluate_multi_turn`) and scored
with that environment's reward (`calculator_answer`, `multi_turn_execution`); without it they are skipped and counted
(`skipped_multi_turn`) and single-turn rows are scored with `tool_call_accuracy`.

    python -m gear_trl.evaluate --model data/tiny-qwen3-calc --dataset data/calc_tools --dataset_format tool_use \
        --environment calculator --max-tool-calling-iterations 4

    python -m gear_trl.evaluate --model outputs/run --benchmark aime24          # a preset: dataset, prompt, sampling
    python -m gear_trl.evaluate --model outputs/run --benchmark bfcl_multi_turn --backend vllm

`--benchmark NAME` (`gear_trl.benchmarks`) presets the paper's benchmarks; `bfcl_multi_turn` rolls out BFCL's tasks
in its own API classes and scores them with its own checker (`evaluate_bfcl_multi_turn`); `bfcl_live`, `bfcl_java`,
`bfcl_javascript` and the (ir)relevance presets read BFCL's entries from bfcl-eval and score them with its
`ast_checker` or relevance rule (`gear_trl.rewards.bfcl_ast`). `--backend vllm` generates
with vLLM, one engine per GPU (`gear_trl.generation`). With `--num-samples n` the report gives avg@n and the unbiased
pass@k (`pass_at_k`). A model folder written by `gear_trl.train` carries the run's chat-template settings
(`gear_run_settings.json`), used unless overridden; a Hub model has none and needs `--enable-thinking true|false`
(`chat_settings`), so that a base model and the runs trained from it are scored in one chat mode. A preset samples as
that mode asks; options neither given nor preset take the model's `generation_config.json` values. The report records
`chat_mode`, `preset`, `sampling` (with `sampling_sources`), `model_generation_config` and `provenance`.

    python -m gear_trl.evaluate --model outputs/run --dataset my_tasks/agent --environment my_tasks.envs:Env \
        --reward my_tasks.rewards:goal_reached --user-simulator llm --user-simulator-kwargs '{"goal_column": "goal"}'

`--user-simulator` (`gear_trl.user_sim`) plays the user of a conversation: with `--environment` each row becomes one
(`evaluate_interactive`: the agent's tool steps, then the simulator's next user turn, until it stops or
`--max-user-turns`); with `bfcl_multi_turn` it replaces BFCL's own turns.

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

from .generation import (
    ADAPTER_CONFIG,
    _row_tools,
    is_adapter_dir,
    load_model,
    load_tokenizer,
    model_revision,
    prompt_ids,
    read_generation_config,
    shipped_sampling,
    stop_ids,
)
from .plugins import UserInputError
from .run_settings import RUN_SETTINGS, chat_mode, read_run_settings

TASK_REWARDS = {"tool_use": "tool_call_accuracy", "xlam": "tool_call_accuracy", "acebench": "acebench_accuracy"}
"""The reward of each dataset adapter whose task is not answer accuracy (`ANSWER_ADAPTERS`: `accuracy`)."""
ANSWER_ADAPTERS = ("gsm8k", "aime", "math", "generic", "columns")
"""The adapters whose ground truth is an answer, scored by `accuracy`; any other (`trl`, an adapter of one's own)
has no task reward that evaluation could know: it needs `--reward`."""
ACEBENCH = "acebench"
"""`--dataset_format` of the ACEBench presets: rows read by `gear_trl.data.acebench.load_acebench` (`--split` the
category), scored by `acebench_accuracy`."""

ENVIRONMENT_REWARDS = {
    "bfcl": "multi_turn_execution",  # multi_turn_state gives a model that calls nothing 85/159 (read-only turns)
    "bfcl_official": "bfcl_official_turn",
    "calculator": "calculator_answer",
}
"""The task reward of multi-turn rollouts in each environment (`--environment`)."""
EXECUTING_REWARDS = ("multi_turn_state", "multi_turn_execution", "calculator_answer", "bfcl_official_turn")


# ---------------------------------------------------------------------------------------------------------------------
# Loading
# ---------------------------------------------------------------------------------------------------------------------


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

    if dataset_format == ACEBENCH:  # not on the Hub: a checkout, converted rows, or GitHub (gear_trl.data.acebench)
        from .data.acebench import load_acebench

        data = load_acebench(dataset, split, limit)
        prepared = prepare_dataset(
            data, adapter="trl", ground_truth_column=ground_truth_column, system_prompt=system_prompt
        )
        return prepared, ACEBENCH
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


def task_reward(adapter_name: str) -> str | None:
    """The reward that scores a task: `tool_call_accuracy` for tool-use data (`tool_use`, `xlam`),
    `acebench_accuracy` for ACEBench, `accuracy` for answers (`ANSWER_ADAPTERS`); None for any other adapter."""
    if adapter_name in TASK_REWARDS:
        return TASK_REWARDS[adapter_name]
    return "accuracy" if adapter_name in ANSWER_ADAPTERS else None


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


def _stop_ids(model, tokenizer) -> list[int]:
    eos = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
    if eos is None:
        eos = tokenizer.eos_token_id
    return [eos] if isinstance(eos, int) else list(eos or [])


def _fitting(conversations: list, prompts: list, max_prompt_tokens: int | None) -> tuple[list, list, list]:
    """(the conversations whose prompt fits `max_prompt_tokens`, their prompts, the others): a conversation that has
    outgrown the context ends there instead of crashing the run."""
    if max_prompt_tokens is None:
        return conversations, prompts, []
    fits = [len(ids) <= max_prompt_tokens for ids in prompts]
    kept = [(c, ids) for c, ids, fit in zip(conversations, prompts, fits, strict=True) if fit]
    return [c for c, _ in kept], [ids for _, ids in kept], [c for c, fit in zip(conversations, fits) if not fit]


def _assistant_step(text: str) -> tuple[dict, list[dict]]:
    """The assistant message of one generated step and the tool calls its text holds (as the model wrote them, for
    the environment to answer, each with an error text where it is malformed); the message lists the well-formed
    ones as `tool_calls`, so the chat template renders them in the history."""
    from .rewards.tool_call import parse_text_tool_calls

    calls = parse_text_tool_calls(text)
    message = {"role": "assistant", "content": _without_calls(text) if calls else text}
    if calls:
        message["tool_calls"] = [
            {"type": "function", "function": {"name": c.get("name"), "arguments": c.get("arguments")}}
            for c in calls
            if isinstance(c.get("name"), str) and isinstance(c.get("arguments"), dict)
        ]
    return message, calls


def _noop(*args, **kwargs):
    return None


def score(
    reward_funcs: Sequence[Callable], rows: list[dict], completions: list, completion_ids: list, **extra
) -> list[list]:
    """Per completion, each reward (None where a reward does not apply), called as TRL calls reward functions: the
    prompts, completions and completion ids, plus every other dataset column and `extra` (e.g. `environments`)."""
    keys = [key for key in rows[0] if key not in ("prompt", "completion", "completion_ids")]
    kwargs = {key: [row[key] for row in rows] for key in keys}
    kwargs.update(trainer_state=None, log_extra=_noop, log_metric=_noop, **extra)
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


def pass_at_k(n: int, c: int, k: int) -> float:
    """The unbiased estimate of pass@k from `n` samples of which `c` are correct: `1 - C(n-c, k) / C(n, k)`, the
    probability that `k` samples drawn without replacement from the `n` include a correct one (Chen et al. 2021,
    "Evaluating Large Language Models Trained on Code", eq. 1).

    Computed as `1 - prod_{i=n-c+1}^{n} (1 - k / i)`, which never forms the binomials (C(1100, 550) > 1e308 would
    overflow a float).
    Raises ValueError unless `0 <= c <= n` and `1 <= k <= n`.
    """
    if not (0 <= c <= n) or not (1 <= k <= n):
        raise ValueError(f"pass@k needs 0 <= c <= n and 1 <= k <= n, got n={n}, c={c}, k={k}.")
    if n - c < k:  # every k-subset holds a correct sample
        return 1.0
    product = 1.0
    for i in range(n - c + 1, n + 1):
        product *= 1.0 - k / i
    return 1.0 - product


def default_pass_ks(num_samples: int) -> list[int]:
    """The k of the pass@k a report gives by default: 1, the powers of two below `num_samples`, and `num_samples`."""
    ks, k = {1, num_samples}, 2
    while k < num_samples:
        ks.add(k)
        k *= 2
    return sorted(ks)


CORRECT = 1.0
"""A sample counts as correct for pass@k when its first reward reaches this value: full credit of the 0/1 task
rewards (`accuracy`, `tool_call_accuracy`, `multi_turn_state`); a partial score is not a pass."""


def _pass_ks(pass_ks: Sequence[int] | None, num_samples: int) -> list[int]:
    """The k to report (always `num_samples` among them); refuses a k outside 1..num_samples."""
    if not pass_ks:
        return default_pass_ks(num_samples)
    bad = [k for k in pass_ks if not 1 <= k <= num_samples]
    if bad:
        raise UserInputError(f"pass@k needs 1 <= k <= num_samples ({num_samples}); got k = {bad}.")
    return sorted(set(pass_ks) | {num_samples})


def _pass_at(names: list[str], per_sample: list[dict], ks: Sequence[int]) -> dict[str, float | None]:
    """`{str(k): mean over prompts of pass_at_k(n, c, k)}`: `n` a prompt's scored samples, `c` the correct ones;
    a prompt with fewer than `k` scored samples is left out of that k's mean (None if every prompt is)."""
    counts: dict[int, list[int]] = {}
    for sample in per_sample:
        value = sample["rewards"][names[0]] if names else None
        if value is not None:
            n_c = counts.setdefault(sample["index"], [0, 0])
            n_c[0] += 1
            n_c[1] += value >= CORRECT
    return {str(k): _mean(pass_at_k(n, c, k) for n, c in counts.values() if n >= k) for k in ks}


def _report(
    n: int, num_samples: int, names: list[str], per_sample: list[dict], pass_ks: Sequence[int] | None = None, **extra
) -> dict:
    """The report both evaluations return (see `evaluate`); `extra` entries go before `per_sample`."""
    ks = _pass_ks(pass_ks, num_samples)
    accuracy = _mean(s["rewards"][names[0]] for s in per_sample) if names else None
    result = {
        "n": n,
        "num_samples": num_samples,
        "accuracy": accuracy,
        f"avg@{num_samples}": accuracy,
        "mean_reward": _mean(s["reward"] for s in per_sample),
        "rewards": {name: _mean(s["rewards"][name] for s in per_sample) for name in names},
        "finished_frac": _mean(float(s["finished"]) for s in per_sample),
        **extra,
        "per_sample": per_sample,
    }
    if num_samples > 1:
        pass_at = _pass_at(names, per_sample, ks)
        result["pass_at_k"] = pass_at[str(num_samples)]
        result["pass_at"] = pass_at
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
    pass_ks: Sequence[int] | None = None,
    generator=None,
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
        pass_ks: the k of the reported pass@k (default `default_pass_ks(num_samples)`; `num_samples` always).
        generator: a `gear_trl.generation` backend (e.g. `VLLMGenerator`); None generates with `model.generate`
            (`TransformersGenerator`), the sampling arguments above applying.

    Returns:
        `{n, num_samples, accuracy, avg@<num_samples>, mean_reward, rewards, pass_at_k and pass_at (num_samples > 1),
        finished_frac, skipped_multi_turn, per_sample}`: `n` prompts evaluated; `accuracy` (also under
        `avg@<num_samples>`, its name in papers) the mean of the first reward over the completions it scores (for 0/1
        rewards such as `accuracy` and `tool_call_accuracy`, the fraction correct; None if it scores none);
        `mean_reward` the mean over completions of the sum of the rewards that apply (TRL's reward); `rewards` each
        reward's mean; `pass_at` `{str(k): the mean over prompts of the unbiased pass@k estimate (`pass_at_k`),
        a sample correct when its first reward is >= 1}`; `pass_at_k` its entry for k = `num_samples`;
        `finished_frac` the fraction of completions that ended with an end-of-sequence token before
        `max_new_tokens`; `per_sample` one entry per completion `{index, sample, prompt, completion,
        ground_truth, reward, rewards, finished}`.
    """
    import torch
    from tqdm.auto import tqdm

    from .generation import Sampling, TransformersGenerator

    _check_sampling(temperature, num_samples, batch_size)
    _pass_ks(pass_ks, num_samples)
    all_rows = [dict(row) for row in dataset]
    rows = [row for row in all_rows if not is_multi_turn_row(row)]
    names = _reward_names(reward_funcs, reward_names)
    encoded = [prompt_ids(tokenizer, row, chat_template_kwargs) for row in rows]
    if seed is not None:
        torch.manual_seed(seed)
    bar = tqdm(total=len(rows), desc="Generating", unit="prompt", disable=not progress)
    try:
        if generator is None:
            sampling = Sampling(max_new_tokens, temperature, top_p, top_k, seed)
            generator = TransformersGenerator(model, tokenizer, sampling, batch_size=batch_size, progress=bar.update)
        generated = generator.generate(encoded, num_samples)
    finally:
        bar.close()
    completions = dict(enumerate(generated))

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
    return _report(len(rows), num_samples, names, per_sample, pass_ks, skipped_multi_turn=len(all_rows) - len(rows))


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
    pass_ks: Sequence[int] | None = None,
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
    _pass_ks(pass_ks, num_samples)
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
    return _report(len(rows), num_samples, names, per_sample, pass_ks, tool_calls=tool_calls, skipped_multi_turn=0)


def environment_reward(factory) -> Callable:
    """A reward function scoring each rollout with its environment's `get_reward()` (sync or async), named after the
    environment's class as TRL names the reward it adds in training; a value it cannot read as a number is None."""
    import asyncio
    import inspect

    from .envs import factory_class

    cls = factory_class(factory)

    def reward(environments, **kwargs):
        values = []
        for environment in environments:
            try:
                value = environment.get_reward()
                if inspect.isawaitable(value):
                    value = asyncio.run(value)
                values.append(float(value))
            except Exception:  # noqa: BLE001 -- a reward never ends an evaluation: None, counted as unscored
                values.append(None)
        return values

    reward.__name__ = cls.__name__
    reward._environment_reward = True
    return reward


def _without_calls(text: str) -> str:
    return re.sub(r"<tool_call>.*?(</tool_call>|$)", "", text, flags=re.DOTALL).strip()


def evaluate_bfcl_multi_turn(
    generator,
    tokenizer,
    tasks: list[dict],
    *,
    num_samples: int = 1,
    chat_template_kwargs: dict | None = None,
    max_steps_per_turn: int | None = None,
    max_prompt_tokens: int | None = None,
    progress: bool = True,
    pass_ks: Sequence[int] | None = None,
    user_simulator=None,
) -> dict:
    """BFCL multi-turn tasks rolled out as BFCL's inference does and scored by its own checker.

    Every task (`gear_trl.envs.bfcl_official.load_tasks`) runs `num_samples` separate conversations. Each user turn
    is added, then the model is stepped: each step's `<tool_call>` blocks are executed in the task's official
    instances and their results appended as tool messages, until a step makes no call; more than
    `max_steps_per_turn` steps (BFCL's 20) force-terminate the conversation: no later turn runs, so the checker
    fails it (as BFCL's runner fails a rollout with fewer turns than the task). The prompt shows
    the tools of the turn (BFCL's docs without excluded and not-yet-added functions). The calls of every step go to
    BFCL's `multi_turn_checker` (`check_task`): 1.0 when every turn passes its state and response checks.
    All active conversations step together, one `generator.generate` call per step. A conversation whose prompt
    grows past `max_prompt_tokens` (the model's context less the completion budget) is ended there instead of
    overflowing the model, and counted in `context_overflow`; it fails like a force-terminated one.

    `user_simulator` (`gear_trl.user_sim`) writes the user turns; the default, `BFCLScriptedUser`, replays the
    task's own, as BFCL does. Another is asked for turn `t` with the conversation so far and the task as the row,
    never for more turns than the task's ground truth has (the checker scores those); one that stops early leaves
    the checker too few turns, one that raises or answers junk ends the task there, counted in
    `user_simulator_failures`.

    Returns the report of `evaluate` (`accuracy` the fraction of tasks passed over every sample; per sample the
    `completion` is the conversation and `rewards` `{"bfcl_multi_turn": 0 or 1}`, plus `checker`, the verdict's
    error type) and `tool_calls`, the mean number of calls per conversation.
    """
    from tqdm.auto import tqdm

    from .envs.bfcl_official import (
        MAX_STEPS_PER_TURN,
        TaskState,
        call_string,
        check_task,
        involved_functions,
        task_tools,
    )
    from .user_sim import ask

    _pass_ks(pass_ks, num_samples)
    simulator = BFCLScriptedUser() if user_simulator is None else user_simulator
    limit = MAX_STEPS_PER_TURN if max_steps_per_turn is None else max_steps_per_turn
    conversations = []
    for i, task in enumerate(tasks):
        for j in range(num_samples):
            state = TaskState(task["initial_config"], task["involved_classes"], "long_context" in task["category"])
            allowed = set(involved_functions(task))
            conversations.append({"i": i, "j": j, "task": task, "state": state, "allowed": allowed, "messages": [],
                                  "calls": [], "terminated": False, "n_calls": 0})  # fmt: skip
    bar = tqdm(total=len(conversations), desc="BFCL tasks", unit="rollout", disable=not progress)
    for turn in range(max((len(task["ground_truth"]) for task in tasks), default=0)):
        asked = [c for c in conversations if turn < len(c["task"]["ground_truth"]) and not c["terminated"]]
        answers = ask(simulator, [(list(c["messages"]), c["task"], turn) for c in asked])
        active = []
        for conversation, (messages, error) in zip(asked, answers, strict=True):
            if messages is None:  # the user stopped, or failed: no later turn runs
                conversation["terminated"] = True
                conversation["user_error"] = error
                continue
            conversation["messages"] += messages
            conversation["tools"] = task_tools(conversation["task"], turn)
            active.append(conversation)
        for conversation in active:
            conversation["calls"].append([])
            conversation["steps"] = 0
        stepping = list(active)
        while stepping:
            prompts = [
                prompt_ids(tokenizer, {"prompt": c["messages"], "tools": c["tools"]}, chat_template_kwargs)
                for c in stepping
            ]
            stepping, prompts, overflowing = _fitting(stepping, prompts, max_prompt_tokens)
            for conversation in overflowing:
                conversation["terminated"] = conversation["overflow"] = True
            if not stepping:
                break
            outputs = generator.generate(prompts, 1)
            still = []
            for conversation, samples in zip(stepping, outputs, strict=True):
                _, text, _ = samples[0]
                message, calls = _assistant_step(text)
                conversation["messages"].append(message)
                if not calls:
                    continue
                strings = []
                for call in calls:
                    result = conversation["state"].execute(call.get("name"), call.get("arguments"))
                    conversation["messages"].append({"role": "tool", "name": str(call.get("name")), "content": result})
                    string = call_string(call.get("name"), call.get("arguments"), conversation["allowed"])
                    if string is not None:
                        strings.append(string)
                conversation["n_calls"] += len(calls)
                if strings:
                    conversation["calls"][-1].append(strings)
                conversation["steps"] += 1
                if conversation["steps"] > limit:  # BFCL's force quit: the task fails
                    conversation["terminated"] = True
                else:
                    still.append(conversation)
            stepping = still
    per_sample = []
    for conversation in conversations:
        task = conversation["task"]
        value, verdict = check_task(task, conversation["calls"])  # terminated before the last turn: too few turns
        bar.update(1)
        per_sample.append(
            {
                "index": conversation["i"],
                "sample": conversation["j"],
                "id": task["id"],
                "prompt": task["turns"],
                "completion": conversation["messages"],
                "ground_truth": task["ground_truth"],
                "reward": value,
                "rewards": {"bfcl_multi_turn": value},
                "finished": not conversation["terminated"],
                "checker": verdict.get("error_type"),
                **({"user_simulator_error": conversation["user_error"]} if conversation.get("user_error") else {}),
            }
        )
    bar.close()
    tool_calls = _mean(c["n_calls"] for c in conversations)
    overflow = sum(bool(c.get("overflow")) for c in conversations)
    failures = sum(bool(c.get("user_error")) for c in conversations)
    extra = {"user_simulator_failures": failures} if user_simulator is not None else {}
    return _report(len(tasks), num_samples, ["bfcl_multi_turn"], per_sample, pass_ks, tool_calls=tool_calls,
                   context_overflow=overflow, **extra, skipped_multi_turn=0)  # fmt: skip


class BFCLScriptedUser:
    """BFCL's own user turns, as its inference replays them (`turn_messages`): the default user of
    `evaluate_bfcl_multi_turn`."""

    def next_turn(self, messages: list[dict], task: dict, turn: int):
        from .envs.bfcl_official import turn_messages

        return turn_messages(task, turn) if turn < len(task["turns"]) else None


def _environment_tools(environment) -> dict[str, Callable]:
    """The tools of an environment instance as TRL's `environment_factory` lists them: its public functions but
    `reset` and `get_reward` (plus `state_key`, which GEARTrainer hides), bound to the instance."""
    import inspect

    return {
        name: getattr(environment, name)
        for name, _ in inspect.getmembers(type(environment), predicate=inspect.isfunction)
        if name not in ("reset", "get_reward", "state_key") and not name.startswith("_")
    }


def _call_tool(tools: dict[str, Callable], name, arguments) -> str:
    """A tool's result as text; an unknown tool or any exception is an error text (what a model writes is
    untrusted), as TRL's tool loop answers them."""
    try:
        if name not in tools:
            raise ValueError(f"Tool {name} not found.")
        result = tools[name](**arguments)
    except Exception as err:  # noqa: BLE001 - reported to the model, never raised
        return json.dumps({"error": str(err)})
    if isinstance(result, str):
        return result
    try:
        return json.dumps(result, ensure_ascii=False)
    except (TypeError, ValueError):
        return str(result)


def _is_user_text(message) -> bool:
    return isinstance(message, dict) and message.get("role") == "user" and bool(str(message.get("content") or ""))


def evaluate_interactive(
    generator,
    tokenizer,
    dataset,
    reward_funcs: Sequence[Callable],
    environment_factory: Callable,
    user_simulator,
    *,
    num_samples: int = 1,
    max_user_turns: int | None = None,
    max_steps_per_turn: int = 20,
    chat_template_kwargs: dict | None = None,
    max_prompt_tokens: int | None = None,
    ground_truth_column: str = "ground_truth",
    progress: bool = True,
    reward_names: Sequence[str] | None = None,
    pass_ks: Sequence[int] | None = None,
) -> dict:
    """Conversations with a simulated user: the agent's tools run in an environment, the user's later turns come
    from `user_simulator` (`gear_trl.user_sim`), and the rewards score each whole conversation.

    Each row is played `num_samples` times, each play with its own environment (`environment_factory()`, then
    `reset(**row)` as TRL calls it; a string it returns is appended to the prompt's last message, as TRL does). The
    row's prompt is the first user turn; a prompt without a user message (only the agent's system prompt) has the
    simulator write the first turn too (`turn` 0), as ACEBench's user opens its dialogues. The agent is stepped as `evaluate_bfcl_multi_turn` steps it: each step's
    `<tool_call>` blocks run as the environment's methods (an unknown tool or an exception is answered with an error
    text), and a step without a call ends the agent's turn; then the simulator is asked for the next user turn, which
    is appended, until it answers None (or `STOP`), the conversation holds `max_user_turns` user turns
    (`user_turn_cap`), a turn runs more than `max_steps_per_turn` steps (20, BFCL's limit; the episode is force-ended,
    `finished` false) or the prompt outgrows `max_prompt_tokens` (`context_overflow`). A simulator that raises or
    answers something that is not a user message ends that episode (`user_simulator_failures`, the error in the
    sample's `user_simulator_error`), which is then scored as it stands. All conversations step together: one
    `generator.generate` call per step, one simulator call (`next_turns`, batched when the simulator has it) per step
    for the conversations whose agent turn ended.

    The rewards are called as TRL calls them, on the conversation after the prompt (the agent's messages, tool
    results and the later user turns) with `environments` (each play's environment, in its final state) and every
    column of the row; an environment with `get_reward()` adds it as a reward named after its class, as TRL does.

    Everything runs in this one process: the simulator is asked here, the generator may spread the agent's prompts
    over vLLM engines (data parallel), and nothing is split across ranks.

    Returns the report of `evaluate` plus `tool_calls` (mean tool results per conversation), `user_turns` (mean user
    turns, the prompt's included), `user_simulator_failures`, `user_turn_cap` and `context_overflow` (counts); each
    sample adds `user_turns` and `ended_by` (`user`, `cap`, `user_simulator_error`, `step_limit`,
    `context_overflow`).
    """
    from tqdm.auto import tqdm

    from .user_sim import DEFAULT_MAX_USER_TURNS, ask

    _pass_ks(pass_ks, num_samples)
    cap = DEFAULT_MAX_USER_TURNS if max_user_turns is None else max_user_turns
    if cap < 1:
        raise UserInputError(f"`max_user_turns` must be at least 1, got {cap}.")
    rows = [dict(row) for row in dataset]
    if not rows:
        raise UserInputError("The evaluation split is empty: choose another with --split.")
    names = _reward_names(reward_funcs, reward_names)
    from transformers.utils import get_json_schema

    conversations = []
    for i, row in enumerate(rows):
        for j in range(num_samples):
            environment = environment_factory()
            observation = environment.reset(**row)
            prompt = row["prompt"]
            prompt = [{"role": "user", "content": prompt}] if isinstance(prompt, str) else [dict(m) for m in prompt]
            if isinstance(observation, str) and prompt and isinstance(prompt[-1].get("content"), str):
                prompt[-1]["content"] += observation
            tools = _environment_tools(environment)
            schemas = _row_tools(row) or [get_json_schema(tool) for tool in tools.values()] or None
            conversations.append({"i": i, "j": j, "row": row, "environment": environment, "tools": tools,
                                  "schemas": schemas, "prompt": prompt, "messages": list(prompt), "ids": [],
                                  "user_turns": 1, "steps": 0, "n_calls": 0, "ended_by": None})  # fmt: skip
    bar = tqdm(total=len(conversations), desc="Conversations", unit="rollout", disable=not progress)
    # A prompt without a user message (only the agent's system prompt): the simulated user opens, as ACEBench's does.
    openers = [c for c in conversations if not any(_is_user_text(m) for m in c["prompt"])]
    answers = ask(user_simulator, [(list(c["messages"]), c["row"], 0) for c in openers])
    for conversation, (messages, error) in zip(openers, answers, strict=True):
        conversation["user_turns"] = 0
        if error is not None:
            conversation["ended_by"], conversation["user_error"] = "user_simulator_error", error
        elif messages is None:
            conversation["ended_by"] = "user"
        else:
            conversation["messages"] += messages
            conversation["user_turns"] = 1
    stepping = [c for c in conversations if c["ended_by"] is None]
    bar.update(len(conversations) - len(stepping))
    while stepping:
        stepped = len(stepping)
        prompts = [
            prompt_ids(tokenizer, {"prompt": c["messages"], "tools": c["schemas"]}, chat_template_kwargs)
            for c in stepping
        ]
        stepping, prompts, overflowing = _fitting(stepping, prompts, max_prompt_tokens)
        for conversation in overflowing:
            conversation["ended_by"] = "context_overflow"
        if not stepping:
            bar.update(stepped)
            break
        outputs = generator.generate(prompts, 1)
        still, turn_over = [], []
        for conversation, samples in zip(stepping, outputs, strict=True):
            ids, text, _ = samples[0]
            conversation["ids"] += list(ids)
            message, calls = _assistant_step(text)
            conversation["messages"].append(message)
            if not calls:
                turn_over.append(conversation)
                continue
            for call in calls:
                arguments = call.get("arguments")
                result = _call_tool(conversation["tools"], call.get("name"), arguments if isinstance(
                    arguments, dict) else {})  # fmt: skip
                conversation["messages"].append({"role": "tool", "name": str(call.get("name")), "content": result})
            conversation["n_calls"] += len(calls)
            conversation["steps"] += 1
            if conversation["steps"] > max_steps_per_turn:
                conversation["ended_by"] = "step_limit"
            else:
                still.append(conversation)
        asking = []
        for conversation in turn_over:
            if conversation["user_turns"] >= cap:
                conversation["ended_by"] = "cap"
            else:
                asking.append(conversation)
        answers = ask(user_simulator, [(list(c["messages"]), c["row"], c["user_turns"]) for c in asking])
        for conversation, (messages, error) in zip(asking, answers, strict=True):
            if error is not None:
                conversation["ended_by"], conversation["user_error"] = "user_simulator_error", error
            elif messages is None:
                conversation["ended_by"] = "user"
            else:
                conversation["messages"] += messages
                conversation["user_turns"] += 1
                conversation["steps"] = 0
                still.append(conversation)
        bar.update(stepped - len(still))
        stepping = still
    bar.close()

    reward_funcs, names = list(reward_funcs), list(names)
    environment_type = type(conversations[0]["environment"])
    own = any(getattr(func, "_environment_reward", False) for func in reward_funcs)  # already the default reward
    if callable(getattr(environment_type, "get_reward", None)) and not own:
        reward_funcs.append(lambda environments, **kwargs: [e.get_reward() for e in environments])
        names.append(environment_type.__name__)
    completions = [c["messages"][len(c["prompt"]) :] for c in conversations]
    scores = score(
        reward_funcs,
        [c["row"] for c in conversations],
        completions,
        [c["ids"] for c in conversations],
        environments=[c["environment"] for c in conversations],
    )
    per_sample = []
    for conversation, completion, values in zip(conversations, completions, scores, strict=True):
        sample = _sample(conversation["i"], conversation["j"], conversation["row"], completion, values, names,
                         conversation["ended_by"] not in ("step_limit", "context_overflow"), ground_truth_column)  # fmt: skip
        sample.update(user_turns=conversation["user_turns"], ended_by=conversation["ended_by"])
        if conversation.get("user_error"):
            sample["user_simulator_error"] = conversation["user_error"]
        per_sample.append(sample)

    def count(reason: str) -> int:
        return sum(c["ended_by"] == reason for c in conversations)

    return _report(
        len(rows),
        num_samples,
        names,
        per_sample,
        pass_ks,
        tool_calls=_mean(c["n_calls"] for c in conversations),
        user_turns=_mean(c["user_turns"] for c in conversations),
        user_simulator_failures=count("user_simulator_error"),
        user_turn_cap=count("cap"),
        context_overflow=count("context_overflow"),
        skipped_multi_turn=0,
    )


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
    from .benchmarks import presets_help

    parser = argparse.ArgumentParser(
        prog="python -m gear_trl.evaluate",
        description="Evaluate a model or LoRA adapter on a dataset split with the task's own reward.",
        epilog="benchmark presets (--benchmark NAME; docs/evaluation.md has the full table):\n" + presets_help(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
        allow_abbrev=False,
    )
    add = parser.add_argument
    add("--model", required=True, help="Model directory, Hub id, or LoRA adapter directory.")
    add(
        "--benchmark",
        default=None,
        help="A benchmark preset (listed below): its dataset, split, prompt format, sampling and scoring become the "
        "defaults; any option given explicitly overrides the preset's.",
    )
    add("--dataset", default=None, help="Dataset: a local folder (data/math/generic) or a Hub id.")
    add("--split", default=None, help="Split to evaluate (default: test).")
    add("--dataset_config", "--dataset-config", default=None, help="Dataset configuration name.")
    add(
        "--dataset_format",
        "--dataset-format",
        default=None,
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
        help="Tool rounds per rollout with --environment (as the recipe's; default: unlimited); with "
        "--user-simulator, tool steps per agent turn (default: 20).",
    )
    add(
        "--user-simulator",
        "--user_simulator",
        default=None,
        metavar="SPEC",
        help="Who writes the user's later turns (gear_trl/user_sim.py): `llm` (a model plays the user from the "
        "row's goal column), `scripted` (replays a column of turns) or an import path pkg.module:factory. With "
        "--environment the rows are played as conversations (evaluate_interactive); with --benchmark "
        "bfcl_multi_turn it replaces BFCL's own turns. Default: none (the data's turns).",
    )
    add(
        "--user-simulator-kwargs",
        "--user_simulator_kwargs",
        type=json.loads,
        default=None,
        help='Keyword arguments of the user simulator as JSON, e.g. \'{"model": "Qwen/Qwen3-8B", "goal_column": '
        '"instruction"}\'.',
    )
    add(
        "--max-user-turns",
        "--max_user_turns",
        type=int,
        default=None,
        help="With --user-simulator: user turns per conversation, the prompt's included (default: 8).",
    )
    add("--batch-size", "--batch_size", type=int, default=16, help="Prompts per generate call.")
    add(
        "--max-new-tokens",
        "--max_new_tokens",
        type=int,
        default=None,
        help="Default: the preset's for the chat mode, else the model's generation_config.json, else 256.",
    )
    add(
        "--temperature",
        type=float,
        default=None,
        help="0: greedy decoding; > 0: sampling. Default: the preset's for the chat mode, else the model's "
        "generation_config.json (do_sample false: 0), else 0.",
    )
    add(
        "--top-p",
        "--top_p",
        type=float,
        default=None,
        help="Nucleus sampling (with temperature > 0). Default: the preset's, else the model's, else 1.",
    )
    add(
        "--top-k",
        "--top_k",
        type=int,
        default=None,
        help="Top-k sampling, 0 = off (with temperature > 0). Default: the preset's, else the model's, else 0.",
    )
    add(
        "--num-samples",
        "--num_samples",
        type=int,
        default=None,
        help="Completions per prompt when sampling; reports pass_at_k as well.",
    )
    add(
        "--max-samples",
        "--max_samples",
        "--limit",
        dest="max_samples",
        type=int,
        default=None,
        help="Evaluate only the first N rows of the split (lighteval's name; --limit is the same).",
    )
    add(
        "--pass-k",
        "--pass_k",
        type=int,
        nargs="+",
        default=None,
        help="k of the reported unbiased pass@k, each <= --num-samples (default: 1, powers of two, num-samples).",
    )
    add(
        "--enable-thinking",
        "--enable_thinking",
        type=_bool,
        default=None,
        help="Qwen3's thinking switch, passed to the chat template (true/false); the presets sample as the mode "
        f"asks. Default: as the trained run recorded it in the model folder's {RUN_SETTINGS}; required for a Hub "
        "model (no run settings); a local folder without run settings gets the template's default, with a warning.",
    )
    add(
        "--chat-template-kwargs",
        "--chat_template_kwargs",
        type=json.loads,
        default=None,
        help="Extra chat-template arguments as JSON, e.g. '{\"enable_thinking\": false}'; they override, key by "
        f"key, those the trained run recorded ({RUN_SETTINGS}).",
    )
    add(
        "--backend",
        choices=("auto", "transformers", "vllm"),
        default="auto",
        help="Generation backend: vllm (data parallel over the visible GPUs), transformers (model.generate), or "
        "auto (vllm when it is installed and a GPU is visible; --environment rollouts always use transformers).",
    )
    add(
        "--data-parallel",
        "--data_parallel",
        type=int,
        default=None,
        help="vLLM engines, one per GPU (default: every visible GPU).",
    )
    add("--max-model-len", "--max_model_len", type=int, default=None, help="vLLM's max_model_len (default: model's).")
    add(
        "--max-prompt-tokens",
        "--max_prompt_tokens",
        type=int,
        default=None,
        help="BFCL multi-turn: end a conversation whose prompt grows past this (default: the model's context less "
        "--max-new-tokens).",
    )
    add(
        "--gpu-memory-utilization",
        "--gpu_memory_utilization",
        type=float,
        default=0.9,
        help="vLLM's share of each GPU's memory.",
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


DEFAULTS = {
    "split": "test",
    "dataset_config": None,
    "dataset_format": "auto",
    "reward": None,
    "environment": None,
    "num_samples": 1,
    "max_tool_calling_iterations": None,
}
"""The defaults of the options a `--benchmark` preset may set (the parser's own defaults are None, so that an option
given on the command line is told apart from one left out); the sampling ones are `SAMPLING_DEFAULTS`."""
SAMPLING_DEFAULTS = {"temperature": 0.0, "top_p": 1.0, "top_k": 0, "max_new_tokens": 256}
"""The sampling options' last defaults, after the preset's (for the chat mode) and the model's own."""


def apply_defaults(args: argparse.Namespace) -> argparse.Namespace:
    """Fill every option left out but the sampling ones (`apply_sampling`, once the chat mode is known) with the
    `--benchmark` preset's value, else `DEFAULTS`; `--dataset` is required without a preset."""
    preset = {}
    if args.benchmark is not None:
        from .benchmarks import get_preset

        preset = get_preset(args.benchmark).defaults()
    elif args.dataset is None:
        raise UserInputError("Give --dataset (a local folder or a Hub id) or --benchmark NAME (see --help).")
    for key, default in {**DEFAULTS, "dataset": None}.items():
        if getattr(args, key) is None:
            setattr(args, key, preset.get(key, default))
    return args


def apply_sampling(args: argparse.Namespace, mode: str | None, shipped: dict) -> dict[str, str]:
    """Fill each sampling option left out (`SAMPLING_DEFAULTS`' keys) with the `--benchmark` preset's value for chat
    mode `mode`, else the model's own (`shipped`, from its generation_config.json: `shipped_sampling`), else
    `SAMPLING_DEFAULTS`. Returns where each value came from: `flag`, `preset`, `model` or `default`."""
    preset = {}
    if args.benchmark is not None:
        from .benchmarks import get_preset

        preset = get_preset(args.benchmark).sampling(mode)
    sources = {}
    for key in SAMPLING_DEFAULTS:
        if getattr(args, key) is not None:
            sources[key] = "flag"
            continue
        for source, values in (("preset", preset), ("model", shipped), ("default", SAMPLING_DEFAULTS)):
            if key in values:
                setattr(args, key, values[key])
                sources[key] = source
                break
    return sources


def chat_settings(args: argparse.Namespace) -> tuple[dict, str | None, str]:
    """(chat_template_kwargs, run settings file read or None, where `enable_thinking` comes from): the trained run's
    recorded settings, overridden key by key by `--chat-template-kwargs` and `--enable-thinking`. A Hub model has no
    run settings, and its template's default would pick the mode silently (Qwen3's: thinking): without an explicit
    `--enable-thinking` it is refused."""
    given = args.chat_template_kwargs
    if given is not None and not isinstance(given, dict):
        raise UserInputError("--chat-template-kwargs must be a JSON object, e.g. '{\"enable_thinking\": false}'.")
    run_settings, run_settings_path = read_run_settings(args.model)
    recorded = run_settings.get("chat_template_kwargs", {})
    kwargs = {**recorded, **(given or {})}
    if args.enable_thinking is not None:
        kwargs["enable_thinking"] = args.enable_thinking
        return kwargs, run_settings_path, "--enable-thinking"
    if "enable_thinking" in (given or {}):
        return kwargs, run_settings_path, "--chat-template-kwargs"
    if run_settings_path is not None:
        return kwargs, run_settings_path, "run settings" if "enable_thinking" in recorded else "template default"
    if not os.path.isdir(os.path.expanduser(args.model)):
        raise UserInputError(
            f"--model {args.model} is a Hub model, with no run settings ({RUN_SETTINGS}) to take the chat mode from: "
            "pass --enable-thinking true or --enable-thinking false (the Qwen3 recipes train with false; compare like "
            "with like)."
        )
    return kwargs, None, "template default"


PACKAGES = ("torch", "transformers", "trl", "peft", "accelerate", "datasets", "vllm", "math-verify", "bfcl-eval")
"""The packages whose versions a report records (None where one is not installed)."""


def _git_commit(root: str | None = None) -> tuple[str | None, bool | None]:
    """(the commit of the gear_trl checkout this runs from, `root` (default: the folder above this package), and
    whether tracked files differ from it); (None, None) unless `root` is the top of a git checkout (an installed
    wheel: a repository that merely holds the environment is not ours)."""
    import subprocess

    root = os.path.realpath(root or os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    try:
        top, commit = subprocess.run(
            ["git", "-C", root, "rev-parse", "--show-toplevel", "HEAD"],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout.splitlines()
        status = subprocess.run(
            ["git", "-C", root, "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError, ValueError):
        return None, None
    if os.path.realpath(top) != root:
        return None, None
    return commit, bool(status.strip())


def provenance(model: str, backend: str) -> dict:
    """What a score depends on beyond its options: `{backend, packages: {name: version or None}, gear_trl, git_commit,
    git_dirty, model_revision (the Hub commit of the model, or of an adapter's base; None for a local folder),
    base_model (an adapter's)}`."""
    from importlib import metadata

    from . import __version__
    from .generation import adapter_base

    def version(name: str) -> str | None:
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            return None

    commit, dirty = _git_commit()
    return {
        "backend": backend,
        "packages": {name: version(name) for name in PACKAGES},
        "gear_trl": __version__,
        "git_commit": commit,
        "git_dirty": dirty,
        "model_revision": model_revision(model),
        "base_model": adapter_base(model),
    }


BFCL_MULTI_TURN = "bfcl_multi_turn"
"""`--dataset_format` of the BFCL multi-turn preset: tasks read from the installed bfcl-eval, rolled out and scored
by `evaluate_bfcl_multi_turn`."""


def _bfcl_tasks(args) -> list[dict]:
    """The BFCL multi-turn tasks `--split` names (`all`: the four categories the leaderboard's multi-turn score
    averages), the first `--max-samples` of each."""
    from .envs.bfcl_official import MULTI_TURN_CATEGORIES, load_tasks

    categories = list(MULTI_TURN_CATEGORIES) if args.split in ("all", "multi_turn") else [args.split]
    unknown = [c for c in categories if c not in MULTI_TURN_CATEGORIES]
    if unknown:
        raise UserInputError(f"--split {args.split!r}: use all or one of {list(MULTI_TURN_CATEGORIES)}.")
    return [task for category in categories for task in load_tasks(category, limit=args.max_samples)]


BFCL_SINGLE_TURN = "bfcl_single_turn"
"""`--dataset_format` of the BFCL single-turn presets read from the installed bfcl-eval (live, Java, JavaScript,
irrelevance, relevance): rows from `gear_trl.rewards.bfcl_ast.load_rows`, scored by BFCL's checker (`bfcl_ast`)."""


def _bfcl_single_turn_rows(args):
    """The rows of the BFCL categories `--split` names (a category or `live`), the first `--max-samples` of each."""
    from datasets import Dataset

    from .rewards.bfcl_ast import categories_of, load_rows

    return Dataset.from_list([row for c in categories_of(args.split) for row in load_rows(c, limit=args.max_samples)])


def _single_turn_categories(result: dict, rows) -> dict:
    """The report with `categories` (each category's accuracy); `accuracy` stays the mean over all rows, which over
    the live categories is the leaderboard's live column (weighted by each category's number of entries)."""
    categories = rows["category"]
    per_category: dict[str, list[float]] = {}
    for sample in result["per_sample"]:
        task_reward = next(iter(sample["rewards"].values()))  # the first reward is the task's (`accuracy`'s)
        per_category.setdefault(categories[sample["index"]], []).append(task_reward)
    result["categories"] = {name: _mean(values) for name, values in per_category.items()}
    return result


def _by_category(result: dict, tasks: list[dict]) -> dict:
    """The report with `categories` (each category's accuracy) and `accuracy` their unweighted mean, as the
    leaderboard's multi-turn column averages its categories."""
    per_category: dict[str, list[float]] = {}
    for sample in result["per_sample"]:
        per_category.setdefault(tasks[sample["index"]]["category"], []).append(sample["reward"])
    categories = {name: _mean(values) for name, values in per_category.items()}
    result["categories"] = categories
    result["accuracy"] = _mean(categories.values())
    return result


def _max_prompt_tokens(args) -> int | None:
    """`--max-prompt-tokens`, else the context the model has room for: `--max-model-len` (vLLM) or its config's
    `max_position_embeddings`, less `--max-new-tokens`; None when neither is known."""
    if args.max_prompt_tokens is not None:
        return args.max_prompt_tokens
    context = args.max_model_len
    if context is None:
        from transformers import AutoConfig

        path = args.model
        if is_adapter_dir(path):
            with open(os.path.join(path, ADAPTER_CONFIG)) as handle:
                path = json.load(handle).get("base_model_name_or_path") or path
        try:
            config = AutoConfig.from_pretrained(path)
            context = getattr(config.get_text_config(decoder=True), "max_position_embeddings", None)
        except Exception:  # noqa: BLE001 - a config that cannot be read leaves the prompts unchecked
            return None
    return None if not context else max(1, context - args.max_new_tokens)


def _backend(args) -> str:
    """`transformers` or `vllm`: `auto` picks vLLM when it is installed and a GPU is visible."""
    from .generation import visible_gpus, vllm_available

    if args.backend == "auto":
        # TRL's tool loop runs on transformers; the user-simulator loop takes any generator
        on_trl = args.environment is not None and args.user_simulator is None
        return "vllm" if vllm_available() and visible_gpus() > 0 and not on_trl else "transformers"
    if args.backend == "vllm" and not vllm_available():
        raise UserInputError("--backend vllm: vLLM is not installed (pip install 'gear_trl[vllm]').")
    return args.backend


def _vllm_generator(args, sampling):
    """A `VLLMGenerator` for `--model`; a LoRA adapter is merged into its base and saved to a temporary folder
    first (vLLM loads a model folder)."""
    import tempfile

    from transformers import AutoTokenizer

    from .generation import VLLMGenerator

    path = args.model
    if is_adapter_dir(path):
        model, tokenizer = load_model(path, dtype=args.dtype)
        path = tempfile.mkdtemp(prefix="gear_eval_merged_")
        model.save_pretrained(path)
        tokenizer.save_pretrained(path)
        del model
    tokenizer = AutoTokenizer.from_pretrained(path)
    return VLLMGenerator(
        path,
        tokenizer,
        sampling,
        stop=stop_ids(args.model, tokenizer),  # as model.generate stops: every eos the model's generation config names
        data_parallel=args.data_parallel,
        dtype=args.dtype,
        max_model_len=args.max_model_len,
        gpu_memory_utilization=args.gpu_memory_utilization,
    )


def _user_simulator(args, bfcl: bool):
    """The `--user-simulator`, built (no model loaded yet), or None; refuses the options that would do nothing."""
    if args.user_simulator is None:
        given = [name for name in ("user_simulator_kwargs", "max_user_turns") if getattr(args, name) is not None]
        if given:
            raise UserInputError(f"--{given[0].replace('_', '-')} needs --user-simulator.")
        return None
    if not bfcl and args.environment is None:
        raise UserInputError(
            "--user-simulator plays the user of multi-turn conversations: give --environment (the agent's tools, "
            "e.g. my_pkg.envs:MyEnv) or --benchmark bfcl_multi_turn."
        )
    if bfcl and args.max_user_turns is not None:
        raise UserInputError(
            "--max-user-turns: BFCL's checker scores each task's own number of turns, so the BFCL loop asks the "
            "simulator for exactly those; drop --max-user-turns."
        )
    if args.as_teacher is not None:
        raise UserInputError("--as-teacher probes single prompts; it does not run with --user-simulator.")
    if args.max_user_turns is not None and args.max_user_turns < 1:
        raise UserInputError(f"--max-user-turns must be at least 1, got {args.max_user_turns}.")
    from .user_sim import load_user_simulator

    return load_user_simulator(args.user_simulator, args.user_simulator_kwargs)


def _preset_name(name: str) -> str:
    from .benchmarks import get_preset

    return get_preset(name).name


def main(argv: list[str] | None = None) -> dict:
    args = apply_defaults(make_parser().parse_args(argv))
    import torch

    from .rewards import get_reward_funcs
    from .trainer.preflight import PreflightError, check_dataset_source, check_model_source

    # A mistyped path is named here, not reported later as a failure to reach the Hub.
    check_model_source(args.model, "--model")
    chat_template_kwargs, run_settings_path, mode_source = chat_settings(args)
    bfcl_tasks = _bfcl_tasks(args) if args.dataset_format == BFCL_MULTI_TURN else None
    bfcl_rows = _bfcl_single_turn_rows(args) if args.dataset_format == BFCL_SINGLE_TURN else None
    if bfcl_tasks is None and bfcl_rows is None:
        check_dataset_source(args.dataset, "--dataset")
    backend = _backend(args)

    reward_names = args.reward
    own_reward = None  # the environment's `get_reward`, evaluation's default as it is training's
    if bfcl_tasks is not None:
        reward_names = ["bfcl_multi_turn"]
    elif args.environment is not None:
        from .envs import factory_class, get_environment_factory, supplies_reward

        factory = get_environment_factory(args.environment)  # an unknown name fails here, naming the known ones
        if not reward_names and args.environment not in ENVIRONMENT_REWARDS:
            factory = factory_class(factory)  # a factory function is called once here, not again below
            if not supplies_reward(factory):
                raise PreflightError(
                    f"--environment {args.environment!r} has no default reward and no `get_reward` method: name one "
                    "with --reward (a registered name or an import path such as my_pkg.rewards:my_reward)."
                )
            own_reward = environment_reward(factory)
        reward_names = reward_names or (
            [own_reward.__name__] if own_reward is not None else [ENVIRONMENT_REWARDS[args.environment]]
        )
    elif reward_names and any(name in EXECUTING_REWARDS for name in reward_names):
        raise PreflightError(
            f"{sorted(EXECUTING_REWARDS)} score multi-turn rollouts whose tools are executed; pass --environment "
            "to run them, or score single turns with tool_call_accuracy."
        )
    mode = chat_mode(load_tokenizer(args.model), chat_template_kwargs)
    if mode is not None and mode_source == "template default" and run_settings_path is None:
        print(
            f"warning: {args.model} has no run settings ({RUN_SETTINGS}) and no --enable-thinking was given: it is "
            f"scored in its chat template's default mode, {mode}; pass --enable-thinking true|false to choose.",
            file=sys.stderr,
        )
    generation_config, generation_config_path = read_generation_config(args.model)
    shipped = shipped_sampling(generation_config)
    sampling_sources = apply_sampling(args, mode, shipped)
    overridden = [key for key in shipped if sampling_sources[key] != "model" and shipped[key] != getattr(args, key)]
    if overridden:  # the model's own settings lose only to an explicit choice (a flag, a preset): say which
        print(
            f"note: {generation_config_path} sets "
            + ", ".join(f"{key} {shipped[key]}" for key in overridden)
            + "; this evaluation uses "
            + ", ".join(f"{key} {getattr(args, key)} ({sampling_sources[key]})" for key in overridden)
            + ".",
            file=sys.stderr,
        )
    _check_sampling(args.temperature, args.num_samples, args.batch_size)
    _pass_ks(args.pass_k, args.num_samples)
    if args.as_teacher is not None and bfcl_tasks is not None:
        raise UserInputError(
            "--as-teacher scores rows with a reference in the teacher's prompt; the BFCL multi-turn benchmark is "
            "scored by its own loop, which has no teacher prompt: drop --as-teacher, or probe a training dataset."
        )
    simulator = _user_simulator(args, bfcl_tasks is not None)
    if backend == "vllm" and args.environment is not None and simulator is None:
        raise UserInputError(
            "--backend vllm does not run --environment rollouts (they go through TRL's own tool loop, on "
            "transformers); use --backend transformers, or --benchmark bfcl_multi_turn for BFCL."
        )
    if bfcl_rows is not None:
        dataset, adapter = bfcl_rows, BFCL_SINGLE_TURN
        reward_names = reward_names or ["bfcl_ast"]
        reward_funcs = get_reward_funcs(reward_names)
    elif bfcl_tasks is None:
        dataset, adapter = load_eval_split(
            args.dataset,
            args.split,
            dataset_config=args.dataset_config,
            dataset_format=args.dataset_format,
            limit=args.max_samples,
            system_prompt=args.system_prompt,
            columns=(args.question_column, args.answer_column, args.answer_pattern),
        )
        if not reward_names and task_reward(adapter) is None and args.as_teacher is not None:
            raise UserInputError(
                f"--as-teacher: rows of dataset_format {adapter!r} have no task reward evaluation knows, so the "
                "teacher's score would mean nothing: name the task's reward with --reward (a registered name or an "
                "import path such as my_pkg.rewards:my_reward)."
            )
        reward_names = reward_names or [task_reward(adapter) or "accuracy"]
        reward_funcs = [own_reward] if own_reward is not None else get_reward_funcs(reward_names)
    else:
        adapter = BFCL_MULTI_TURN
    if args.as_teacher is not None:  # what cannot be probed is refused before the student's evaluation
        from .trainer.teacher_probe import check_probe

        check_probe(dataset, args.as_teacher, args.num_samples, args.temperature)
    if simulator is not None:
        from .user_sim import check_rows

        check_rows(
            simulator, bfcl_tasks if bfcl_tasks is not None else [dict(r) for r in dataset], args.user_simulator
        )
    from .generation import Sampling

    sampling = Sampling(args.max_new_tokens, args.temperature, args.top_p, args.top_k, args.seed)
    if backend == "vllm":
        model, tokenizer, generator = None, None, _vllm_generator(args, sampling)
        tokenizer = generator.tokenizer
    else:
        device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
        model, tokenizer = load_model(args.model, dtype=args.dtype, device=device)
        generator = None

    multi_turn = {}
    if bfcl_tasks is not None or simulator is not None:
        from .generation import TransformersGenerator

        if generator is None:
            torch.manual_seed(args.seed)
            generator = TransformersGenerator(model, tokenizer, sampling, batch_size=args.batch_size)
        if simulator is not None and callable(getattr(simulator, "setup", None)):
            simulator.setup(generator=generator, tokenizer=tokenizer, model=model, device=args.device)
    if simulator is not None and bfcl_tasks is None:
        from .envs import get_environment_factory

        result = evaluate_interactive(
            generator,
            tokenizer,
            dataset,
            reward_funcs,
            get_environment_factory(args.environment),
            simulator,
            num_samples=args.num_samples,
            max_user_turns=args.max_user_turns,
            max_steps_per_turn=20 if args.max_tool_calling_iterations is None else args.max_tool_calling_iterations,
            chat_template_kwargs=chat_template_kwargs,
            max_prompt_tokens=_max_prompt_tokens(args),
            progress=not args.no_progress,
            reward_names=reward_names,
            pass_ks=args.pass_k,
        )
    elif bfcl_tasks is not None:
        result = evaluate_bfcl_multi_turn(
            generator,
            tokenizer,
            bfcl_tasks,
            num_samples=args.num_samples,
            chat_template_kwargs=chat_template_kwargs,
            max_prompt_tokens=_max_prompt_tokens(args),
            progress=not args.no_progress,
            pass_ks=args.pass_k,
            user_simulator=simulator,
        )
        result = _by_category(result, bfcl_tasks)
    elif args.environment is not None:
        multi_turn = {"environment": args.environment, "max_tool_calling_iterations": args.max_tool_calling_iterations}
    if bfcl_tasks is None and simulator is None:

        def run(rows, num_samples=None):  # num_samples: the sibling probe's one fresh sample per teacher prompt
            return (evaluate_multi_turn if multi_turn else evaluate)(
                model,
                tokenizer,
                rows,
                reward_funcs,
                **multi_turn,
                **({"generator": generator} if generator is not None else {}),
                batch_size=args.batch_size,
                max_new_tokens=args.max_new_tokens,
                temperature=args.temperature,
                top_p=args.top_p,
                top_k=args.top_k,
                num_samples=args.num_samples if num_samples is None else num_samples,
                chat_template_kwargs=chat_template_kwargs,
                seed=args.seed,
                progress=not args.no_progress,
                reward_names=reward_names,
                pass_ks=args.pass_k if num_samples is None else None,
            )

        result = run(dataset)
        if bfcl_rows is not None:
            result = _single_turn_categories(result, bfcl_rows)
        if adapter == ACEBENCH:  # ACEBench counts a multi-turn dialogue correct when all of its turns are
            from .rewards.acebench import by_dialogue

            result = by_dialogue(result, dataset["dialogue"])
        if args.as_teacher is not None:
            from .trainer.teacher_probe import probe_as_teacher

            result = probe_as_teacher(run, result, dataset, tokenizer, args.as_teacher)
    if generator is not None and hasattr(generator, "close"):
        generator.close()
    config = {key: value for key, value in vars(args).items() if key != "no_progress"}
    config.update(
        reward=reward_names,
        dataset_format=adapter,
        chat_template_kwargs=chat_template_kwargs,
        run_settings=run_settings_path,
    )
    per_sample = result.pop("per_sample")
    report = {
        "model": args.model,
        "dataset": args.dataset,
        "split": args.split,
        "preset": None if args.benchmark is None else _preset_name(args.benchmark),
        "chat_mode": mode,
        "chat_mode_source": mode_source,
        "sampling": {key: getattr(args, key) for key in (*SAMPLING_DEFAULTS, "num_samples")},
        "sampling_sources": sampling_sources,
        "model_generation_config": {"path": generation_config_path, **generation_config},
        "provenance": provenance(args.model, backend),
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
    extra = "".join(
        f", pass@{k} {value:.4f}" for k, value in (report.get("pass_at") or {}).items() if value is not None
    )
    skipped = f", {report['skipped_multi_turn']} multi-turn rows skipped" if report["skipped_multi_turn"] else ""
    if report.get("user_simulator_failures"):
        skipped += f", {report['user_simulator_failures']} conversations ended by a user-simulator failure"
    print(
        f"{args.model} on {args.dataset} [{args.split}]: n={report['n']}, {reward_names[0]} {accuracy}, "
        f"mean reward {mean_reward}{extra}{skipped} -> {output}"
    )
    if args.as_teacher is not None:
        from .trainer.teacher_probe import probe_summary

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
