"""The evaluation loops over a prepared split: `evaluate` (single-turn: generate, then score with the rewards) and
`evaluate_multi_turn` (tool rollouts through TRL's own tool loop in an environment), for benchmarks that hold a model
in memory; `load_eval_split` prepares a split as training does, `task_reward` names the reward that scores it. The
conversation loops (BFCL multi-turn, a simulated user) are in `gear_trl.evaluation.conversations`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence

from ..inputs.errors import UserInputError
from .generation import prompt_ids
from .pass_at_k import _mean, _pass_ks
from .scoring import _check_sampling, _report, _reward_names, _sample, score

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


def load_eval_split(
    dataset: str,
    split: str = "test",
    *,
    dataset_config: str | None = None,
    dataset_format: str = "auto",
    limit: int | None = None,
    system_prompt: str | None = None,
    prompt_template: str | None = None,
    ground_truth_column: str = "ground_truth",
    columns: tuple[str, str, str | None] = ("question", "answer", None),
):
    """(prepared split, adapter name): the split loaded and mapped through `gear_trl.data.prepare_dataset`.
    `columns`: question column, answer column and answer pattern of `dataset_format="columns"`; `prompt_template`:
    the user message of a text question (None: the math template, as training's default)."""
    from ..data import column_adapter, detect_adapter, get_adapter, prepare_dataset
    from ..inputs.preflight import PreflightError, load_dataset_named

    if dataset_format == ACEBENCH:  # not on the Hub: a checkout, converted rows, or GitHub (gear_trl.data.acebench)
        from ..data.acebench import load_acebench

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
    templated = {} if prompt_template is None else {"prompt_template": prompt_template}
    prepared = prepare_dataset(
        data, adapter=adapter, ground_truth_column=ground_truth_column, system_prompt=system_prompt, **templated
    )
    return prepared, adapter.name


def task_reward(adapter_name: str) -> str | None:
    """The reward that scores a task: `tool_call_accuracy` for tool-use data (`tool_use`, `xlam`),
    `acebench_accuracy` for ACEBench, `accuracy` for answers (`ANSWER_ADAPTERS`); None for any other adapter."""
    if adapter_name in TASK_REWARDS:
        return TASK_REWARDS[adapter_name]
    return "accuracy" if adapter_name in ANSWER_ADAPTERS else None


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
        generator: a `gear_trl.evaluation.generation` backend (e.g. `VLLMGenerator`); None generates with `model.generate`
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
    from ..trainer.gear_trainer import GEARTrainer

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

    from ..envs import get_environment_factory
    from ..trainer.gear_config import GEARConfig

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
