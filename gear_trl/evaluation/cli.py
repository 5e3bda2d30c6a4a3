"""Evaluate a saved model or LoRA adapter on a dataset split, scored with the task's own reward.

    python -m gear_trl.evaluate --model outputs/tiny-gear-math --dataset data/math/generic --split test --output report.json
    python -m gear_trl.evaluate --model Qwen/Qwen3-4B --dataset openai/gsm8k --dataset_config main         --dataset_format gsm8k --split test --enable_thinking false --max_new_tokens 1024
    python -m gear_trl.evaluate --model outputs/run --dataset data/bfcl --dataset_config single_turn --split simple         --temperature 0.6 --num_samples 4 --max_samples 100

`--model` is a model directory (or Hub id) or a LoRA adapter directory (it has `adapter_config.json`; its base model,
named in that file, is loaded and the adapter merged). Rows are mapped through `gear_trl.data.prepare_dataset`, so
every `dataset_format` a recipe accepts works here; prompts are rendered with the chat template (generation prompt
added, each tool-use row with its own `tools`) and generated in left-padded batches. The reward is the task's own
(`accuracy`, math-verify equivalence with the ground truth; `tool_call_accuracy` for tool-use data) unless
`--reward` names others. Multi-turn tool-use rows need their tools executed over several turns: with `--environment`
(as a recipe's `environment`) every row is rolled out through TRL's own tool loop (`evaluate_multi_turn`) and scored
with that environment's reward (`calculator_answer`, `multi_turn_execution`); without it they are skipped and counted
(`skipped_multi_turn`) and single-turn rows are scored with `tool_call_accuracy`.

    python -m gear_trl.evaluate --model data/tiny-qwen3-calc --dataset data/calc_tools --dataset_format tool_use         --environment calculator --max_tool_calling_iterations 4

    python -m gear_trl.evaluate --model outputs/run --benchmark aime24          # a preset: dataset, prompt, sampling
    python -m gear_trl.evaluate --model outputs/run --benchmark bfcl_multi_turn --backend vllm

`--benchmark NAME` (`gear_trl.evaluation.benchmarks`) presets the paper's benchmarks; `bfcl_multi_turn` rolls out BFCL's tasks
in its own API classes and scores them with its own checker (`evaluate_bfcl_multi_turn`); `bfcl_live`, `bfcl_java`,
`bfcl_javascript` and the (ir)relevance presets read BFCL's entries from bfcl-eval and score them with its
`ast_checker` or relevance rule (`gear_trl.rewards.bfcl_ast`). `--backend vllm` generates
with vLLM, one engine per GPU (`gear_trl.evaluation.generation`). With `--num_samples n` the report gives avg@n and the unbiased
pass@k (`pass_at_k`). A model folder written by `gear_trl.train` carries the run's chat-template settings
(`gear_run_settings.json`), used unless overridden; a Hub model has none and needs `--enable_thinking true|false`
(`chat_settings`), so that a base model and the runs trained from it are scored in one chat mode. A preset samples as
that mode asks; options neither given nor preset take the model's `generation_config.json` values. The report records
`chat_mode`, `preset`, `sampling` (with `sampling_sources`), `model_generation_config` and `provenance`.

    python -m gear_trl.evaluate --model outputs/run --dataset my_tasks/agent --environment my_tasks.envs:Env         --reward my_tasks.rewards:goal_reached --user_simulator llm --user_simulator_kwargs '{"goal_column": "goal"}'

`--user_simulator` (`gear_trl.evaluation.user_sim`) plays the user of a conversation: with `--environment` each row becomes one
(`evaluate_interactive`: the agent's tool steps, then the simulator's next user turn, until it stops or
`--max_user_turns`); with `bfcl_multi_turn` it replaces BFCL's own turns.

`evaluate(model, tokenizer, dataset, reward_funcs, ...)` and `evaluate_multi_turn(..., environment, ...)` are the same
evaluations as functions, for benchmarks that hold a model in memory.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys

from ..inputs.errors import UserInputError
from ..inputs.flags import FlagParser
from .bfcl import (
    BFCL_MULTI_TURN,
    BFCL_SINGLE_TURN,
    _bfcl_single_turn_rows,
    _bfcl_tasks,
    _by_category,
    _single_turn_categories,
)
from .conversations import evaluate_bfcl_multi_turn, evaluate_interactive
from .generation import (
    ADAPTER_CONFIG,
    is_adapter_dir,
    load_model,
    load_tokenizer,
    read_generation_config,
    shipped_sampling,
    stop_ids,
)
from .loops import (
    ACEBENCH,
    ENVIRONMENT_REWARDS,
    EXECUTING_REWARDS,
    evaluate,
    evaluate_multi_turn,
    load_eval_split,
    task_reward,
)
from .pass_at_k import _pass_ks
from .provenance import provenance
from .run_settings import RUN_SETTINGS, chat_mode, read_run_settings
from .scoring import _check_sampling, environment_reward


def _bool(value: str) -> bool:
    if value.lower() in ("true", "1", "yes"):
        return True
    if value.lower() in ("false", "0", "no"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {value!r}")


def make_parser() -> argparse.ArgumentParser:
    from .benchmarks import presets_help

    parser = FlagParser(
        prog="python -m gear_trl.evaluate",
        description="Evaluate a model or LoRA adapter on a dataset split with the task's own reward.",
        epilog="benchmark presets (--benchmark NAME; docs/evaluation.md has the full table):\n" + presets_help(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
        allow_abbrev=False,
    )
    add = parser.add_argument
    _add_data_options(add)
    _add_task_options(add)
    _add_sampling_options(add)
    _add_run_options(add)
    return parser


def _add_data_options(add) -> None:
    """The model and the rows: `--model`, `--benchmark`, the dataset and how its rows read."""
    add("--model", required=True, help="Model directory, Hub id, or LoRA adapter directory.")
    add(
        "--benchmark",
        default=None,
        help="A benchmark preset (listed below): its dataset, split, prompt format, sampling and scoring become the "
        "defaults; any option given explicitly overrides the preset's.",
    )
    add("--dataset", default=None, help="Dataset: a local folder (data/math/generic) or a Hub id.")
    add("--split", default=None, help="Split to evaluate (default: test).")
    add("--dataset_config", default=None, help="Dataset configuration name.")
    add(
        "--dataset_format",
        default=None,
        help="Dataset adapter, as in recipes: auto, gsm8k, math, aime, generic, tool_use, columns, or an import "
        "path (my_pkg.data:to_example).",
    )
    add("--question_column", default="question", help="`--dataset_format columns`: question.")
    add("--answer_column", default="answer", help="`--dataset_format columns`: answer.")
    add(
        "--answer_pattern",
        default=None,
        help="`--dataset_format columns`: regular expression whose last match in the answer is the ground truth.",
    )
    add("--system_prompt", default=None, help="Optional system message for every prompt.")
    add(
        "--prompt_template",
        default=None,
        help="The user message of a row whose question is text; `{question}` is replaced by it. Default: the one the "
        "model's training run recorded (its run settings), else the math template (reason step by step, answer in "
        "\\boxed{}), as `gear_trl.train`'s `prompt_template`.",
    )


def _add_task_options(add) -> None:
    """How rows are scored and played: rewards, the environment, a simulated user."""
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
        "--max_tool_calling_iterations",
        type=int,
        default=None,
        help="Tool rounds per rollout with --environment (as the recipe's; default: unlimited); with "
        "--user_simulator, tool steps per agent turn (default: 20).",
    )
    add(
        "--user_simulator",
        default=None,
        metavar="SPEC",
        help="Who writes the user's later turns (gear_trl/evaluation/user_sim.py): `llm` (a model plays the user from the "
        "row's goal column), `scripted` (replays a column of turns) or an import path pkg.module:factory. With "
        "--environment the rows are played as conversations (evaluate_interactive); with --benchmark "
        "bfcl_multi_turn it replaces BFCL's own turns. Default: none (the data's turns).",
    )
    add(
        "--user_simulator_kwargs",
        type=json.loads,
        default=None,
        help='Keyword arguments of the user simulator as JSON, e.g. \'{"model": "Qwen/Qwen3-8B", "goal_column": '
        '"instruction"}\'.',
    )
    add(
        "--max_user_turns",
        type=int,
        default=None,
        help="With --user_simulator: user turns per conversation, the prompt's included (default: 8).",
    )


def _add_sampling_options(add) -> None:
    """How completions are sampled, how many, and the chat mode."""
    add("--batch_size", type=int, default=16, help="Prompts per generate call.")
    add(
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
        "--top_p",
        type=float,
        default=None,
        help="Nucleus sampling (with temperature > 0). Default: the preset's, else the model's, else 1.",
    )
    add(
        "--top_k",
        type=int,
        default=None,
        help="Top-k sampling, 0 = off (with temperature > 0). Default: the preset's, else the model's, else 0.",
    )
    add(
        "--num_samples",
        type=int,
        default=None,
        help="Completions per prompt when sampling; reports pass_at_k as well.",
    )
    add(
        "--max_samples",
        "--limit",
        dest="max_samples",
        type=int,
        default=None,
        help="Evaluate only the first N rows of the split (lighteval's name; --limit is the same).",
    )
    add(
        "--pass_k",
        type=int,
        nargs="+",
        default=None,
        help="k of the reported unbiased pass@k, each <= --num_samples (default: 1, powers of two, --num_samples).",
    )
    add(
        "--enable_thinking",
        type=_bool,
        default=None,
        help="Qwen3's thinking switch, passed to the chat template (true/false); the presets sample as the mode "
        f"asks. Default: as the trained run recorded it in the model folder's {RUN_SETTINGS}; required for a Hub "
        "model (no run settings); a local folder without run settings gets the template's default, with a warning.",
    )
    add(
        "--chat_template_kwargs",
        type=json.loads,
        default=None,
        help="Extra chat-template arguments as JSON, e.g. '{\"enable_thinking\": false}'; they override, key by "
        f"key, those the trained run recorded ({RUN_SETTINGS}).",
    )


def _add_run_options(add) -> None:
    """Where generation runs and what is written; the teacher probe."""
    add(
        "--backend",
        choices=("auto", "transformers", "vllm"),
        default="auto",
        help="Generation backend: vllm (data parallel over the visible GPUs), transformers (model.generate), or "
        "auto (vllm when it is installed and a GPU is visible; --environment rollouts always use transformers).",
    )
    add(
        "--data_parallel",
        type=int,
        default=None,
        help="vLLM engines, one per GPU (default: every visible GPU).",
    )
    add("--max_model_len", type=int, default=None, help="vLLM's max_model_len (default: model's).")
    add(
        "--max_prompt_tokens",
        type=int,
        default=None,
        help="BFCL multi-turn: end a conversation whose prompt grows past this (default: the model's context less "
        "--max_new_tokens).",
    )
    add(
        "--gpu_memory_utilization",
        type=float,
        default=0.9,
        help="vLLM's share of each GPU's memory.",
    )
    add("--dtype", default="auto", help="auto, float32, bfloat16 or float16.")
    add("--device", default=None, help="Device to generate on (default: cuda when available, else cpu).")
    add("--seed", type=int, default=0)
    add("--output", default=None, help="Report path (JSON). Default: outputs/eval/<model>__<dataset>__<split>.json.")
    add("--no_progress", action="store_true", help="Hide the progress bar.")
    add(
        "--as_teacher",
        nargs="?",
        const="default",
        default=None,
        metavar="RECIPE",
        help="Also score the model as GEAR's teacher: each prompt with the recipe's teacher hint and reference "
        "(default: GEARConfig's), reported as `as_teacher` beside the student's score, with `teacher_gap` "
        "(gear_trl/teacher/probe.py).",
    )


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
    recorded settings, overridden key by key by `--chat_template_kwargs` and `--enable_thinking`. A Hub model has no
    run settings, and its template's default would pick the mode silently (Qwen3's: thinking): without an explicit
    `--enable_thinking` it is refused."""
    given = args.chat_template_kwargs
    if given is not None and not isinstance(given, dict):
        raise UserInputError("--chat_template_kwargs must be a JSON object, e.g. '{\"enable_thinking\": false}'.")
    run_settings, run_settings_path = read_run_settings(args.model)
    recorded = run_settings.get("chat_template_kwargs", {})
    kwargs = {**recorded, **(given or {})}
    if args.enable_thinking is not None:
        kwargs["enable_thinking"] = args.enable_thinking
        return kwargs, run_settings_path, "--enable_thinking"
    if "enable_thinking" in (given or {}):
        return kwargs, run_settings_path, "--chat_template_kwargs"
    if run_settings_path is not None:
        return kwargs, run_settings_path, "run settings" if "enable_thinking" in recorded else "template default"
    if not os.path.isdir(os.path.expanduser(args.model)):
        raise UserInputError(
            f"--model {args.model} is a Hub model, with no run settings ({RUN_SETTINGS}) to take the chat mode from: "
            "pass --enable_thinking true or --enable_thinking false (the Qwen3 recipes train with false; compare like "
            "with like)."
        )
    return kwargs, None, "template default"


def _max_prompt_tokens(args) -> int | None:
    """`--max_prompt_tokens`, else the context the model has room for: `--max_model_len` (vLLM) or its config's
    `max_position_embeddings`, less `--max_new_tokens`; None when neither is known."""
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
    """The `--user_simulator`, built (no model loaded yet), or None; refuses the options that would do nothing."""
    if args.user_simulator is None:
        given = [name for name in ("user_simulator_kwargs", "max_user_turns") if getattr(args, name) is not None]
        if given:
            raise UserInputError(f"--{given[0]} needs --user_simulator.")
        return None
    if not bfcl and args.environment is None:
        raise UserInputError(
            "--user_simulator plays the user of multi-turn conversations: give --environment (the agent's tools, "
            "e.g. my_pkg.envs:MyEnv) or --benchmark bfcl_multi_turn."
        )
    if bfcl and args.max_user_turns is not None:
        raise UserInputError(
            "--max_user_turns: BFCL's checker scores each task's own number of turns, so the BFCL loop asks the "
            "simulator for exactly those; drop --max_user_turns."
        )
    if args.as_teacher is not None:
        raise UserInputError("--as_teacher probes single prompts; it does not run with --user_simulator.")
    if args.max_user_turns is not None and args.max_user_turns < 1:
        raise UserInputError(f"--max_user_turns must be at least 1, got {args.max_user_turns}.")
    from .user_sim import load_user_simulator

    return load_user_simulator(args.user_simulator, args.user_simulator_kwargs)


def _preset_name(name: str) -> str:
    from .benchmarks import get_preset

    return get_preset(name).name


def main(argv: list[str] | None = None) -> dict:
    args = apply_defaults(make_parser().parse_args(argv))
    from ..inputs.preflight import check_dataset_source, check_model_source

    # A mistyped path is named here, not reported later as a failure to reach the Hub.
    check_model_source(args.model, "--model")
    chat_template_kwargs, run_settings_path, mode_source = chat_settings(args)
    bfcl_tasks = _bfcl_tasks(args) if args.dataset_format == BFCL_MULTI_TURN else None
    bfcl_rows = _bfcl_single_turn_rows(args) if args.dataset_format == BFCL_SINGLE_TURN else None
    if bfcl_tasks is None and bfcl_rows is None:
        check_dataset_source(args.dataset, "--dataset")
    backend = _backend(args)
    reward_names, own_reward = _task_rewards(args, bfcl_tasks is not None)
    mode, sampling_sources, generation_config, generation_config_path = _chat_mode_and_sampling(
        args, chat_template_kwargs, mode_source, run_settings_path
    )
    _check_sampling(args.temperature, args.num_samples, args.batch_size)
    _pass_ks(args.pass_k, args.num_samples)
    if args.as_teacher is not None and bfcl_tasks is not None:
        raise UserInputError(
            "--as_teacher scores rows with a reference in the teacher's prompt; the BFCL multi-turn benchmark is "
            "scored by its own loop, which has no teacher prompt: drop --as_teacher, or probe a training dataset."
        )
    simulator = _user_simulator(args, bfcl_tasks is not None)
    if backend == "vllm" and args.environment is not None and simulator is None:
        raise UserInputError(
            "--backend vllm does not run --environment rollouts (they go through TRL's own tool loop, on "
            "transformers); use --backend transformers, or --benchmark bfcl_multi_turn for BFCL."
        )
    dataset, adapter, reward_names, reward_funcs = _rows_and_rewards(args, bfcl_tasks, bfcl_rows, reward_names,
                                                                     own_reward)  # fmt: skip
    if args.as_teacher is not None:  # what cannot be probed is refused before the student's evaluation
        from ..teacher.probe import check_probe

        check_probe(dataset, args.as_teacher, args.num_samples, args.temperature)
    if simulator is not None:
        from .user_sim import check_rows

        check_rows(
            simulator, bfcl_tasks if bfcl_tasks is not None else [dict(r) for r in dataset], args.user_simulator
        )
    result = _run(args, backend, simulator, bfcl_tasks, bfcl_rows, dataset, adapter, reward_funcs, reward_names,
                  chat_template_kwargs)  # fmt: skip
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
    _write_report(args, report, reward_names)
    return report


def _task_rewards(args: argparse.Namespace, bfcl: bool) -> tuple[list[str] | None, object]:
    """(the names of the rewards that score the run, or None for the task's own once its rows are known; the
    environment's `get_reward` as a reward function when it is the default, evaluation's as it is training's)."""
    from ..inputs.preflight import PreflightError

    reward_names = args.reward
    own_reward = None
    if bfcl:
        reward_names = ["bfcl_multi_turn"]
    elif args.environment is not None:
        from ..envs import factory_class, get_environment_factory, supplies_reward

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
    return reward_names, own_reward


def _chat_mode_and_sampling(
    args: argparse.Namespace, chat_template_kwargs: dict, mode_source: str, run_settings_path: str | None
) -> tuple[str | None, dict[str, str], dict, str | None]:
    """(the chat mode the model is scored in, where each sampling option came from (`apply_sampling`, which fills
    them in `args`), the model's generation config and its path); warns of a chat mode nobody chose and notes the
    model's own sampling settings an explicit choice overrides."""
    mode = chat_mode(load_tokenizer(args.model), chat_template_kwargs)
    if mode is not None and mode_source == "template default" and run_settings_path is None:
        print(
            f"warning: {args.model} has no run settings ({RUN_SETTINGS}) and no --enable_thinking was given: it is "
            f"scored in its chat template's default mode, {mode}; pass --enable_thinking true|false to choose.",
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
    return mode, sampling_sources, generation_config, generation_config_path


def prompt_template(args: argparse.Namespace) -> str:
    """`--prompt_template`, else the one the model's training run recorded, else the math template; refused
    (UserInputError naming the flag) when it is not a template with one `{question}` field."""
    from ..data.math_tasks import MATH_PROMPT_TEMPLATE, prompt_template_problem

    template = args.prompt_template
    if template is None:
        recorded = read_run_settings(args.model)[0].get("prompt_template") if isinstance(args.model, str) else None
        template = recorded if recorded is not None else MATH_PROMPT_TEMPLATE
    problem = prompt_template_problem(template, "--prompt_template")
    if problem:
        raise UserInputError(problem)
    return template


def _rows_and_rewards(args: argparse.Namespace, bfcl_tasks, bfcl_rows, reward_names, own_reward):
    """(the rows to evaluate (None for BFCL's multi-turn tasks), their dataset format, the reward names and
    functions): the task's own reward unless `--reward` or the environment names them."""
    from ..rewards import get_reward_funcs

    if bfcl_rows is not None:
        reward_names = reward_names or ["bfcl_ast"]
        return bfcl_rows, BFCL_SINGLE_TURN, reward_names, get_reward_funcs(reward_names)
    if bfcl_tasks is not None:
        return None, BFCL_MULTI_TURN, reward_names, None
    dataset, adapter = load_eval_split(
        args.dataset,
        args.split,
        dataset_config=args.dataset_config,
        dataset_format=args.dataset_format,
        limit=args.max_samples,
        system_prompt=args.system_prompt,
        prompt_template=prompt_template(args),
        columns=(args.question_column, args.answer_column, args.answer_pattern),
    )
    if not reward_names and task_reward(adapter) is None and args.as_teacher is not None:
        raise UserInputError(
            f"--as_teacher: rows of dataset_format {adapter!r} have no task reward evaluation knows, so the "
            "teacher's score would mean nothing: name the task's reward with --reward (a registered name or an "
            "import path such as my_pkg.rewards:my_reward)."
        )
    reward_names = reward_names or [task_reward(adapter) or "accuracy"]
    reward_funcs = [own_reward] if own_reward is not None else get_reward_funcs(reward_names)
    return dataset, adapter, reward_names, reward_funcs


def _run(args, backend, simulator, bfcl_tasks, bfcl_rows, dataset, adapter, reward_funcs, reward_names,
         chat_template_kwargs) -> dict:  # fmt: skip
    """The model (or vLLM engines) loaded and the evaluation the options ask for run: a simulated user's
    conversations, BFCL's multi-turn tasks, environment rollouts or single turns (then the teacher probe)."""
    import torch

    from .generation import Sampling, TransformersGenerator

    sampling = Sampling(args.max_new_tokens, args.temperature, args.top_p, args.top_k, args.seed)
    if backend == "vllm":
        model, tokenizer, generator = None, None, _vllm_generator(args, sampling)
        tokenizer = generator.tokenizer
    else:
        device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
        model, tokenizer = load_model(args.model, dtype=args.dtype, device=device)
        generator = None
    if bfcl_tasks is not None or simulator is not None:
        if generator is None:
            torch.manual_seed(args.seed)
            generator = TransformersGenerator(model, tokenizer, sampling, batch_size=args.batch_size)
        if simulator is not None and callable(getattr(simulator, "setup", None)):
            simulator.setup(generator=generator, tokenizer=tokenizer, model=model, device=args.device)
    if simulator is not None and bfcl_tasks is None:
        from ..envs import get_environment_factory

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
    else:
        result = _run_rows(args, model, tokenizer, generator, dataset, adapter, bfcl_rows, reward_funcs,
                           reward_names, chat_template_kwargs)  # fmt: skip
    if generator is not None and hasattr(generator, "close"):
        generator.close()
    return result


def _run_rows(args, model, tokenizer, generator, dataset, adapter, bfcl_rows, reward_funcs, reward_names,
              chat_template_kwargs) -> dict:  # fmt: skip
    """Single-turn rows (`evaluate`) or environment rollouts (`evaluate_multi_turn`), then each benchmark's own
    figures and, with `--as_teacher`, the teacher probe."""
    multi_turn = {}
    if args.environment is not None:
        multi_turn = {"environment": args.environment, "max_tool_calling_iterations": args.max_tool_calling_iterations}

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
        from ..rewards.acebench import by_dialogue

        result = by_dialogue(result, dataset["dialogue"])
    if args.as_teacher is not None:
        from ..teacher.probe import probe_as_teacher

        result = probe_as_teacher(run, result, dataset, tokenizer, args.as_teacher)
    return result


def _write_report(args: argparse.Namespace, report: dict, reward_names: list[str]) -> None:
    """The report written to `--output` (default: outputs/eval/<model>__<dataset>__<split>.json) and summed up in
    one line (and the teacher probe's, with `--as_teacher`)."""
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
        from ..teacher.probe import probe_summary

        print(probe_summary(report, reward_names[0]))


def cli(argv: list[str] | None = None) -> None:
    """Console-script entry point."""
    from ..inputs.errors import exit_on_user_error

    exit_on_user_error(main, argv)