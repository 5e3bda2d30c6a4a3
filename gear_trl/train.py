"""Train with GEAR (or plain GRPO, `credit: none`) from a YAML recipe.

    python -m gear_trl.train --config recipes/tiny/config_math.yaml
    accelerate launch --config_file accelerate_configs/zero3.yaml -m gear_trl.train --config RECIPE.yaml

Any recipe field can be overridden on the command line (`--learning_rate 1e-6`). The run resumes from the last
complete checkpoint in `output_dir` when there is one, saves the model (the adapter under LoRA), writes the model
card, and pushes to the Hub when `push_to_hub` is set. Before the model loads it checks what would otherwise fail
late: the output folder is writable, local paths exist, precision agrees with the launcher, the `report_to` trackers
are installed, the Hub can be reached when pushing, the plug-ins (`environment`, `reward_funcs`, `dataset_format`:
built-in names or import paths such as `my_pkg.bank:BankEnv`) import, the training rows have a ground truth, and the
environment's tools and `reset` are usable (`environment_preflight: false` skips building it). Every such mistake is
one `error: ...` line. SIGINT/SIGTERM save a checkpoint at the next optimizer step and exit with status 75
(`gear_trl.trainer.interrupt.EXIT_INTERRUPTED`); rerunning the same command resumes.
"""

from __future__ import annotations

import argparse
import difflib
import os
import re
import signal
import sys
import warnings
from dataclasses import dataclass, field, fields

from trl import GRPOConfig, ModelConfig, ScriptArguments, TrlParser, get_peft_config

from .data.math_tasks import MATH_PROMPT_TEMPLATE
from .trainer.gear_config import GEARConfig
from .trainer.interrupt import EXIT_INTERRUPTED

DEFAULT_REWARD_FUNCS = ("accuracy",)
"""The rewards of a recipe that names none and whose environment (if any) supplies no reward of its own."""
USAGE = "python -m gear_trl.train --config RECIPE.yaml [--FIELD VALUE ...]"
EXIT_PEER_LOST = 1
"""Exit status of a rank that stops because another rank of the run died (`PeerLostError`)."""


@dataclass
class GEARScriptArguments(ScriptArguments):
    """Data and reward arguments of a recipe (model and training arguments live in ModelConfig and GEARConfig)."""

    dataset_format: str = field(
        default="auto",
        metadata={
            "help": "Dataset adapter mapping rows to `prompt` + ground truth: `auto` (by columns), `gsm8k` "
            "(question, answer with '#### n'), `math` (problem, solution with \\boxed{}), `aime` (problem, answer: "
            "the answer itself), `tool_use` (prompt, tools, ground_truth: BFCL-style rows), `generic` (prompt, "
            "ground_truth), `trl` (prompt and columns of your own, passed through as TRL takes them; `auto` picks it "
            "when no other adapter fits), `columns` (`question_column`, `answer_column`, `answer_pattern`), or an "
            "import path of your own (`my_pkg.data:to_example`, a function row -> {prompt, ground_truth, ...}). Every "
            "adapter keeps the columns it does not read, for the rewards and the environment's `reset`."
        },
    )
    question_column: str = field(
        default="question", metadata={"help": "`dataset_format: columns`: the column holding the question."}
    )
    answer_column: str = field(
        default="answer", metadata={"help": "`dataset_format: columns`: the column holding the answer."}
    )
    answer_pattern: str | None = field(
        default=None,
        metadata={
            "help": "`dataset_format: columns`: a regular expression whose last match in `answer_column` is the "
            "ground truth (its first group if it has one), e.g. `Answer:\\s*(.+)`; None: the column as it is."
        },
    )
    reward_funcs: list[str] | None = field(
        default=None,
        metadata={
            "help": "Reward functions, summed: registered names (see `gear_trl.rewards.REWARD_FUNCS`) or import "
            "paths of your own (`my_pkg.rewards:my_reward`; a class is instantiated without arguments). Left out: "
            "`[accuracy]`, or none when the environment supplies its own reward (a `get_reward` method, which TRL "
            "adds as a reward named after its class); named beside such an environment, they are summed with it "
            "(with a warning)."
        },
    )
    system_prompt: str | None = field(default=None, metadata={"help": "Optional system message for every prompt."})
    prompt_template: str = field(
        default=MATH_PROMPT_TEMPLATE,
        metadata={
            "help": "The user message built from a row whose question is text (`gsm8k`, `math`, `aime`, `generic`, "
            "`columns`): `{question}` is replaced by it. Default: the question and a request to reason step by step "
            "and put the answer in \\boxed{} (the math rewards read it). A task whose answer is not boxed needs its "
            "own, e.g. `{question}` alone. Recorded in the run settings, so `gear_trl.evaluate` builds the same prompts."
        },
    )
    environment: str | None = field(  # or a {name: path} mapping, from the YAML recipe
        default=None,
        metadata={
            "help": "Executable tool environment passed to TRL as `environment_factory`: a registered name "
            "(`bfcl`, `calculator`) or an import path of your own (`my_pkg.bank:BankEnv`). Its public methods but "
            "`reset`, `get_reward`, `state_key` and `@not_a_tool` ones become the tools. Several, as TRL takes them: "
            "a mapping `{name: name or import path}` (JSON text on the command line), each row naming its own in an "
            "`environment` column. None: no tool execution."
        },
    )
    max_train_samples: int | None = field(
        default=None, metadata={"help": "Use only the first N training rows (quick experiments)."}
    )
    held_out_datasets: list[str] = field(
        default_factory=list,
        metadata={
            "help": "Datasets the trained model will be scored on, as `NAME` or `NAME:CONFIG` (a Hub id or a local "
            "folder; every split is read), or `benchmark:PRESET` (a `gear_trl.evaluate --benchmark` preset, its rows "
            "read as evaluation reads them: bfcl-eval's categories, ACEBench's). Before training, the run warns when "
            "the training split shares a prompt with any of them, or with `dataset_test_split`: a benchmark trained "
            "on measures memorisation."
        },
    )
    dataset_revision: str | None = field(
        default=None,
        metadata={
            "help": "Hub revision (commit hash, branch or tag) of `dataset_name`; None: the default branch. Pin the "
            "commit you trained on so that a rerun reads the same rows."
        },
    )


def _own_fields(cls, base) -> list[str]:
    """Fields `cls` declares itself, not those it inherits from `base`, in declaration order."""
    inherited = {f.name for f in fields(base)}
    return [f.name for f in fields(cls) if f.name not in inherited]


def make_parser() -> TrlParser:
    """The recipe parser. Its help lists `--config`, then the recipe's data and reward options, then GEAR's own
    options, then the model options and the ~300 inherited GRPO/Trainer options, each under its own heading."""
    # No abbreviations: `--learning_rat` must be reported as unknown, not silently taken for `--learning_rate`.
    parser = TrlParser((GEARScriptArguments, GEARConfig, ModelConfig), usage=USAGE, allow_abbrev=False)
    # TrlParser reads `--config` itself before parsing (it never reaches argparse), so this entry is for --help only.
    recipe = parser.add_argument_group("recipe")
    recipe.add_argument(
        "--config",
        metavar="RECIPE.yaml",
        default=argparse.SUPPRESS,
        help="YAML recipe; any field below given on the command line overrides it.",
    )
    groups = [
        (recipe, None),
        # gear_trl's own data options first, then those it inherits from trl.ScriptArguments
        (
            parser.add_argument_group("data and rewards (the recipe's own options)"),
            [*_own_fields(GEARScriptArguments, ScriptArguments), *fields(ScriptArguments)],
        ),
        (parser.add_argument_group("GEAR credit assignment"), _own_fields(GEARConfig, GRPOConfig)),
        (parser.add_argument_group("model (trl.ModelConfig)"), fields(ModelConfig)),
    ]
    default = parser._optionals  # HfArgumentParser puts every field into argparse's default "options" group
    for group, members in groups[1:]:
        order = {name: i for i, name in enumerate(f if isinstance(f, str) else f.name for f in members)}
        moved = sorted((a for a in default._group_actions if a.dest in order), key=lambda a: order[a.dest])
        for action in moved:
            default._group_actions.remove(action)
            group._group_actions.append(action)
    default.title = "GRPO and Trainer options (trl.GRPOConfig, transformers.TrainingArguments)"
    parser._action_groups.remove(default)
    parser._action_groups.append(default)
    return parser


def _did_you_mean(keys: list[str]) -> str:
    known = sorted({f.name for cls in (GEARScriptArguments, GEARConfig, ModelConfig) for f in fields(cls)})
    parts = []
    for key in keys:
        close = difflib.get_close_matches(key, known, n=1)
        parts.append(f"{key!r}" + (f" (did you mean {close[0]!r}?)" if close else ""))
    return ", ".join(parts)


def parse_args(argv: list[str] | None = None):
    """Parse a recipe and command-line overrides; an unknown key, in the recipe or on the command line, is an error
    that names it with the closest known key."""
    import yaml

    from .inputs.preflight import PreflightError

    argv = list(argv) if argv is not None else sys.argv[1:]
    check_config_file(argv)
    parser = make_parser()
    try:
        return parser.parse_args_and_config(args=argv)
    except yaml.YAMLError as err:
        where = str(err).strip().splitlines()
        raise PreflightError(f"`--config`: the recipe is not valid YAML ({' '.join(where[:3])}).") from None
    except ValueError as err:
        message = str(err)
        if "'--datasets'" in message:
            raise PreflightError(
                "`datasets` (TRL's dataset mixtures) is not supported: GEAR maps one dataset through one "
                "`dataset_format`, and a mixture of differently shaped sets would need one per set. Concatenate the "
                "sets into one local file or folder (already in one format) and give it as `dataset_name`."
            ) from None
        if "Unknown arguments" in message:
            unknown = re.findall(r"'--([A-Za-z0-9_]+)'", message)
            where = "recipe key(s)"
        elif "not used by the HfArgumentParser" in message:
            # argparse leaves unknown options and their values; only the `--name` (or `--name=value`) ones are keys
            unknown = [m.split("=")[0].replace("-", "_") for m in re.findall(r"'--([A-Za-z0-9_=.-]+)'", message)]
            where = "command-line option(s)"
        elif "doesn't support bf16/gpu" in message:
            # transformers' words for a recipe left at bf16 (GRPOConfig's default) on a machine without a GPU
            raise PreflightError(
                "No GPU here, and the recipe trains in bf16 (GRPOConfig's default): to train on CPU add `use_cpu: "
                "true` and `bf16: false` to the recipe (or pass `--use_cpu true --bf16 false`)."
            ) from None
        else:
            # A recipe value the configuration refuses (`credit: foo`, ...): the message names the field.
            raise PreflightError(message) from err
        if not unknown:
            raise PreflightError(message) from err
        raise PreflightError(f"Unknown {where}: {_did_you_mean(unknown)}. Remove or rename them.") from None


def check_config_file(argv: list[str]) -> None:
    """Refuse a `--config` that names no readable file, in one line with the closest file's name (TRL would open it
    and fail with a traceback)."""
    from .inputs.preflight import PreflightError, closest_sibling

    if "--config" not in argv:
        return
    index = argv.index("--config")
    if index + 1 >= len(argv) or argv[index + 1].startswith("--"):
        raise PreflightError("`--config` needs a recipe file: --config RECIPE.yaml.")
    path = argv[index + 1]
    if not os.path.isfile(path):
        kind = "is a folder, not a recipe file" if os.path.isdir(path) else "no such recipe file"
        raise PreflightError(f"`--config`: {kind}: {path!r}{closest_sibling(path)}.")


def unused_prompt_template(script_args: GEARScriptArguments, adapter, rows) -> str | None:
    """A warning when the recipe sets its own `prompt_template` and it shapes no training row: the adapter builds its
    prompts itself (`trl`, `tool_use`, a function), or every row's question is already messages (kept as they are);
    None otherwise. Reads the question column of the first 1,000 rows."""
    template = getattr(script_args, "prompt_template", MATH_PROMPT_TEMPLATE)
    if template == MATH_PROMPT_TEMPLATE:
        return None
    column = getattr(adapter, "question_column", None)
    name = getattr(adapter, "name", adapter)
    if column is None or column not in rows.column_names:
        why = f"dataset_format {name!r} builds its prompts itself"
    elif not any(isinstance(q, str) for q in rows.select(range(min(1000, len(rows))))[column]):
        why = f"every row's {column!r} is already a list of messages, which is kept as it is"
    else:
        return None
    return f"`prompt_template` is set but changes no prompt: {why}. Remove it, or give the questions as text."


def recipe_adapter(script_args: GEARScriptArguments, column_names: list[str]):
    """The dataset adapter a recipe names (`dataset_format`), or the one `auto` picks from `column_names`."""
    from .data import column_adapter, detect_adapter, get_adapter

    name = script_args.dataset_format
    if name == "auto":
        return detect_adapter(column_names)
    if name == "columns":
        return column_adapter(script_args.question_column, script_args.answer_column, script_args.answer_pattern)
    return get_adapter(name)


def load_splits(
    script_args: GEARScriptArguments, training_args: GEARConfig, split_option: str = "dataset_train_split"
):
    """Load the recipe's dataset and map it through the task adapter; returns (train, eval or None).

    Refuses (before any model loads) training rows none of which has a ground truth when the run reads it (GEAR's
    teacher, the `accuracy` reward, ...), and warns when more than half lack one. `split_option`: how the user set the
    training split, named when it is missing (`--split` for inspect)."""
    from .data import prepare_dataset
    from .inputs.preflight import PreflightError, check_ground_truth, ground_truth_users, load_dataset_named
    from .rewards import get_reward_funcs
    from .trainer.rows import check_prepared_rows, check_raw_rows

    if not script_args.dataset_name:
        raise PreflightError(
            "The recipe needs `dataset_name` (a Hub dataset id, a local folder such as data/math/generic, or a local "
            ".jsonl/.json/.parquet/.csv file)."
        )
    from .data.math_tasks import prompt_template_problem

    template_problem = prompt_template_problem(getattr(script_args, "prompt_template", MATH_PROMPT_TEMPLATE))
    if template_problem:  # the rows cannot be built with it (preflight names it too; the message is kept once)
        raise PreflightError(template_problem)
    dataset = load_dataset_named(
        script_args.dataset_name, script_args.dataset_config, revision=script_args.dataset_revision
    )
    if script_args.dataset_train_split not in dataset:
        raise PreflightError(
            f"`{split_option}` {script_args.dataset_train_split!r} is not in {script_args.dataset_name!r}; "
            f"its splits are {list(dataset)}."
        )
    columns = dataset[script_args.dataset_train_split].column_names
    adapter = recipe_adapter(script_args, columns)
    unused = unused_prompt_template(script_args, adapter, dataset[script_args.dataset_train_split])
    if unused:
        warnings.warn(unused, stacklevel=2)

    def prepare(split):
        data = dataset[split]
        if split == script_args.dataset_train_split and script_args.max_train_samples:
            data = data.select(range(min(script_args.max_train_samples, len(data))))
        # A bad row fails the run here, with its index, not at the step that first draws it.
        where = f"split {split!r} of {script_args.dataset_name!r}"
        if not getattr(adapter, "checks_own_tools", False):
            check_raw_rows(data, where, ground_truth_is_json=_tool_use_rows(script_args, data.column_names))
        prepared = prepare_dataset(
            data,
            adapter=adapter,
            ground_truth_column=training_args.ground_truth_column,
            system_prompt=script_args.system_prompt,
            prompt_template=script_args.prompt_template,
        )
        # An environment's `reset` may supply the instruction of an empty prompt (checked before the model loads).
        check_prepared_rows(
            prepared, where, training_args.ground_truth_column, empty_prompts_ok=bool(script_args.environment)
        )
        return prepared

    train = prepare(script_args.dataset_train_split)
    users = ground_truth_users(
        training_args.credit,
        training_args.uses_teacher and not training_args.teacher_reads_siblings,
        get_reward_funcs(reward_names(script_args), training_args.ground_truth_column),
    )
    where = f"split {script_args.dataset_train_split!r} of {script_args.dataset_name!r}"
    check_ground_truth(train, training_args.ground_truth_column, adapter.name, users, where)
    evaluate = None
    if training_args.eval_strategy != "no":
        if script_args.dataset_test_split not in dataset:
            raise PreflightError(
                f"Evaluation is on but `dataset_test_split` {script_args.dataset_test_split!r} is not in "
                f"{script_args.dataset_name!r}; its splits are {list(dataset)}. Set `dataset_test_split` or "
                "`eval_strategy: no`."
            )
        evaluate = prepare(script_args.dataset_test_split)
    return train, evaluate


def held_out_splits(script_args: GEARScriptArguments):
    """(name, rows) of every split the run is scored on: `dataset_test_split` of the training dataset (when it is
    another split) and every split of each `held_out_datasets` entry."""
    from .evaluation.held_out import BENCHMARK_PREFIX, benchmark_splits
    from .inputs.preflight import load_dataset_named

    dataset = load_dataset_named(
        script_args.dataset_name, script_args.dataset_config, revision=script_args.dataset_revision
    )
    test_split = script_args.dataset_test_split
    if test_split in dataset and test_split != script_args.dataset_train_split:
        yield f"split {test_split!r} of {script_args.dataset_name!r}", dataset[test_split]
    for spec in script_args.held_out_datasets:
        if spec.startswith(BENCHMARK_PREFIX):
            for label, rows in benchmark_splits(spec[len(BENCHMARK_PREFIX) :], load=load_dataset_named):
                yield f"{label} of {spec!r}", rows
            continue
        name, _, config = spec.partition(":")
        held_out = load_dataset_named(name, config or None, what=f"held_out_datasets entry {spec!r}")
        for split, rows in held_out.items():
            yield f"split {split!r} of {spec!r}", rows


def overlap_warnings(script_args: GEARScriptArguments) -> list[str]:
    """One message per evaluation split that shares a prompt with the training split (`gear_trl.data.overlap`)."""
    from .data.overlap import overlap_message, request_texts
    from .inputs.preflight import load_dataset_named

    dataset = load_dataset_named(
        script_args.dataset_name, script_args.dataset_config, revision=script_args.dataset_revision
    )
    train = request_texts(dataset[script_args.dataset_train_split])
    train_name = f"{script_args.dataset_train_split!r} of {script_args.dataset_name!r}"
    messages = []
    for name, rows in held_out_splits(script_args):
        shared = sorted(train & request_texts(rows))
        if shared:
            messages.append(overlap_message(train_name, name, shared, len(rows)))
    return messages


def reward_names(script_args: GEARScriptArguments, warn: bool = False) -> list[str]:
    """The rewards a recipe trains on: `reward_funcs` as given; left out, `[accuracy]`, or none when the environment
    supplies its own reward (`get_reward`, which TRL adds itself) so that it is not silently summed with a default.
    Several environments: none only if each supplies one, and with some that do and some that do not the recipe must
    name the rewards. `warn`: warn when rewards are named beside an environment's own."""
    from .envs import factory_class, get_environment_factories, supplies_reward
    from .inputs.preflight import PreflightError

    given = script_args.reward_funcs
    if not script_args.environment:
        return list(given) if given is not None else list(DEFAULT_REWARD_FUNCS)
    factories = get_environment_factories(script_args.environment)
    # A single environment is named by its class, as TRL names its reward; a mapping's by their keys.
    if isinstance(factories, dict):
        named = list(factories.items())
    else:
        cls = factory_class(factories)  # built once at most; the class answers the rest
        named = [(cls.__name__, cls)]
    owners = {name: supplies_reward(factory) for name, factory in named}
    if given is not None:
        if warn and any(owners.values()):
            import warnings

            names = [name for name, owns in owners.items() if owns]
            warnings.warn(
                f"reward_funcs {list(given)} are summed with the reward of {names} (their `get_reward`, which TRL "
                "adds as a reward of weight 1 named after the class). Leave `reward_funcs` out to train on the "
                "environment's reward alone.",
                stacklevel=2,
            )
        return list(given)
    if all(owners.values()):
        return []
    if any(owners.values()):
        raise PreflightError(
            f"The environments {[n for n, o in owners.items() if o]} supply their own reward (`get_reward`) and "
            f"{[n for n, o in owners.items() if not o]} do not, so no default reward fits every row: name "
            "`reward_funcs` for the others (a reward returns None for rows it does not score)."
        )
    return list(DEFAULT_REWARD_FUNCS)


def _tool_use_rows(script_args: GEARScriptArguments, columns: list[str]) -> bool:
    """Whether the rows go through the tool-use adapter, whose `ground_truth` is JSON (a list of calls)."""
    from .data import detect_adapter

    if script_args.dataset_format == "auto":
        try:
            return detect_adapter(columns).name == "tool_use"
        except ValueError:
            return False
    return script_args.dataset_format == "tool_use"


def build_trainer(
    script_args, training_args, model_args, train_dataset, eval_dataset=None, *, model=None, processing_class=None
):
    """The GEARTrainer a recipe describes. `model`: an already loaded model (e.g. a trained LoRA adapter) used
    instead of `model_args.model_name_or_path` and `use_peft`."""
    from .rewards import get_reward_funcs
    from .trainer.gear_trainer import GEARTrainer

    # GEARTrainer guards every reward source, these and an environment's get_reward (gear_trl/rewards/guard.py).
    reward_funcs = get_reward_funcs(reward_names(script_args, warn=True), training_args.ground_truth_column)
    if model is None:
        model_init_kwargs = dict(training_args.model_init_kwargs or {})
        model_init_kwargs.setdefault("revision", model_args.model_revision)
        if model_args.dtype is not None:
            model_init_kwargs.setdefault("dtype", model_args.dtype)
        if model_args.attn_implementation is not None:
            model_init_kwargs.setdefault("attn_implementation", model_args.attn_implementation)
        training_args.model_init_kwargs = model_init_kwargs
        model, peft_config = model_args.model_name_or_path, get_peft_config(model_args)
    else:
        training_args.model_init_kwargs, peft_config = None, None

    environment_factory = None
    if script_args.environment:
        from .envs import get_environment_factories

        environment_factory = get_environment_factories(script_args.environment)

    return GEARTrainer(
        model=model,
        reward_funcs=reward_funcs,
        args=training_args,
        train_dataset=train_dataset,
        eval_dataset=eval_dataset,
        peft_config=peft_config,
        environment_factory=environment_factory,
        processing_class=processing_class,
    )


def preflight(
    script_args: GEARScriptArguments, training_args: GEARConfig, model_args: ModelConfig, problems=None
) -> None:
    """The checks that need neither model nor data, each run even when another has failed: every problem is recorded
    in `problems` (a `Problems`); without one, they are raised together at the end as one `PreflightError`."""
    from .inputs.preflight import (
        Problems,
        check_model_source,
        check_precision,
        check_trackers,
        check_vllm,
        check_writable_dir,
    )
    from .trainer.hub import check_hub_access

    collect = problems if problems is not None else Problems()
    with collect.check():
        check_writable_dir(training_args.output_dir)
    with collect.check():
        check_trackers(training_args.report_to)
    if training_args.push_to_hub:
        with collect.check():
            check_hub_access(training_args.hub_token)
    with collect.check():
        check_precision(training_args.bf16, training_args.fp16, deepspeed=training_args.deepspeed)
    with collect.check():
        check_vllm(training_args.use_vllm)
    if training_args.uses_teacher:
        import torch

        from .trainer.devices import check_planned_devices

        with collect.check():
            device_type = training_args.device.type  # sets up `distributed_state` too
            check_planned_devices(
                training_args.model_init_kwargs,
                training_args.credit,
                distributed=training_args.distributed_state.distributed_type in ("MULTI_GPU", "DEEPSPEED"),
                device_type=device_type,
                num_gpus=torch.cuda.device_count(),
            )
    if isinstance(model_args.model_name_or_path, str):
        cache_dir = (training_args.model_init_kwargs or {}).get("cache_dir")
        with collect.check():
            check_model_source(model_args.model_name_or_path, "model_name_or_path", cache_dir=cache_dir)
    # The plug-ins the recipe names import (each error says which name, with the closest built-in one).
    with collect.check():
        from .rewards import get_reward_funcs

        # Named rewards are checked as named; left out, their default depends on the environment, checked below.
        names = script_args.reward_funcs if script_args.reward_funcs is not None else reward_names(script_args)
        get_reward_funcs(names, training_args.ground_truth_column)
    if script_args.environment:
        with collect.check():
            from .envs import get_environment_factories

            get_environment_factories(script_args.environment)
    with collect.check():
        from .data.math_tasks import prompt_template_problem
        from .inputs.errors import UserInputError

        problem = prompt_template_problem(script_args.prompt_template)
        if problem:
            raise UserInputError(problem)
    if script_args.dataset_format not in ("auto", "columns"):
        with collect.check():
            from .data import get_adapter

            get_adapter(script_args.dataset_format)
    if problems is None:
        collect.raise_if_any()


def check_reward_parameters(script_args, training_args: GEARConfig, train_dataset) -> None:
    """Every reward function's required parameters against the training rows' columns and what TRL passes, before
    the model loads: all mismatches in one `PreflightError`."""
    from .inputs.preflight import PreflightError, reward_parameter_problems
    from .rewards import get_reward_funcs

    funcs = get_reward_funcs(reward_names(script_args), training_args.ground_truth_column)
    found = reward_parameter_problems(
        funcs,
        train_dataset.column_names,
        environment=bool(script_args.environment),
        moved=moved_columns(script_args, training_args.ground_truth_column),
    )
    if found:
        raise PreflightError("Reward functions TRL could not call:\n  " + "\n  ".join(found))


def moved_columns(script_args, ground_truth_column: str) -> dict[str, str]:
    """Raw column -> the reward argument the recipe's dataset adapter puts it in, for the adapters that read a
    question and an answer column and keep neither (`columns`: `answer` -> `ground_truth`, `question` -> `prompts`);
    under `auto`, those of every such adapter `auto` may pick. Empty for the others (`trl` and function adapters
    keep or choose their columns)."""
    from .data import get_adapter
    from .data.math_tasks import AIME, GSM8K, MATH

    name = script_args.dataset_format
    if name == "columns":
        adapters = [recipe_adapter(script_args, [])]
    elif name == "auto":
        adapters = [GSM8K, AIME, MATH]
    elif name in ("gsm8k", "aime", "math"):
        adapters = [get_adapter(name)]
    else:
        return {}
    moved = {}
    for adapter in adapters:
        moved.setdefault(adapter.question_column, "prompts")  # inside the prompt, which TRL passes as `prompts`
        moved.setdefault(adapter.answer_column, ground_truth_column)
    return moved


def float32_on_cpu(model_args: ModelConfig, training_args: GEARConfig, print_fn=print) -> bool:
    """Load bf16 weights in float32 when the run is on CPU, and say so; returns whether it switched.

    On CPU a bf16 `F.linear` with a frozen weight (PEFT freezes the base) on a non-contiguous input (the LM head on
    `hidden[:, -1:]` at every generation step) takes oneDNN's slow path: generation of a Qwen3-sized head never ends
    and its memory grows (`bench/cpu_bf16.py`, bench/results/overhead/NOTES.md). `bf16: false` alone does not avoid it.
    """
    if model_args.dtype != "bfloat16" or training_args.device.type != "cpu":
        return False
    print_fn(
        "warning: the recipe loads bfloat16 weights (`dtype: bfloat16`) and the run is on CPU, where bf16 matmuls on "
        "frozen weights take oneDNN's slow path (generation may never finish); loading float32 weights instead. "
        "Pass `--dtype float32 --bf16 false` to silence this."
    )
    model_args.dtype = "float32"
    return True


def resume_checkpoint(training_args: GEARConfig, print_fn=print) -> str | None:
    """The checkpoint to resume from: `resume_from_checkpoint` when set (it must be complete), else the newest
    complete `checkpoint-N` of `output_dir`; each newer incomplete one is reported with the reason it is skipped."""
    from .inputs.preflight import PreflightError
    from .trainer.checkpoints import checkpoint_problem, find_resumable_checkpoint

    explicit = training_args.resume_from_checkpoint
    if explicit is not None:
        if not os.path.isdir(explicit):
            raise PreflightError(f"`resume_from_checkpoint`: no such checkpoint folder: {explicit!r}.")
        problem = checkpoint_problem(explicit)
        if problem:
            raise PreflightError(f"`resume_from_checkpoint` {explicit!r} cannot be resumed from: {problem}.")
        return explicit
    checkpoint, skipped = find_resumable_checkpoint(training_args.output_dir)
    for path, problem in skipped:
        print_fn(f"Skipping incomplete checkpoint {path}: {problem} (a run stopped while saving it?).")
    if skipped and checkpoint is None:
        print_fn(f"No complete checkpoint in {training_args.output_dir}: starting from step 0.")
    return checkpoint


def main(script_args: GEARScriptArguments, training_args: GEARConfig, model_args: ModelConfig):
    from .evaluation.run_settings import write_run_settings
    from .inputs.preflight import Problems, full_finetune_learning_rate_warning
    from .trainer.interrupt import InterruptCallback
    from .trainer.rows import check_prompts_fit

    # Every problem found before the model loads is reported at once (`Problems`); a check that needs what an
    # earlier one refused (the data, the tokenizer) runs only when that one passed.
    problems = Problems()
    preflight(script_args, training_args, model_args, problems)
    float32_on_cpu(model_args, training_args, print_fn=_print_main)
    checkpoint = train_dataset = eval_dataset = None
    with problems.check():
        checkpoint = resume_checkpoint(training_args, print_fn=_print_main)
    with problems.check():
        train_dataset, eval_dataset = load_splits(script_args, training_args)
    overlaps = []
    if train_dataset is not None:
        with problems.check():
            overlaps = overlap_warnings(script_args)
        with problems.check():
            check_reward_parameters(script_args, training_args, train_dataset)
    if not problems:
        check_prompts_fit(train_dataset, model_args, training_args, f"split {script_args.dataset_train_split!r}")
    problems.raise_if_any()
    for message in overlaps:
        warnings.warn(message, stacklevel=1)
    learning_rate = full_finetune_learning_rate_warning(
        model_args.use_peft, training_args.learning_rate, model_args.model_name_or_path
    )
    if learning_rate:
        warnings.warn(learning_rate, stacklevel=1)
    trainer = build_trainer(script_args, training_args, model_args, train_dataset, eval_dataset)
    interrupt = InterruptCallback(trainer.accelerator)
    trainer.add_callback(interrupt)
    if (
        trainer.accelerator.is_main_process
    ):  # evaluation renders prompts as this run did (gear_trl.evaluation.run_settings)
        write_run_settings(training_args.output_dir, training_args, script_args)

    if checkpoint is not None:
        trainer.accelerator.print(f"Resuming from {checkpoint}")
    try:
        trainer.train(resume_from_checkpoint=checkpoint)
    except Exception as err:
        if trainer.accelerator.num_processes > 1 and is_collective_failure(err):
            raise PeerLostError(peer_lost_message(training_args.output_dir, trainer.state.global_step, err)) from err
        raise
    if interrupt.signal_name is not None:
        trainer.accelerator.wait_for_everyone()
        saved = os.path.join(training_args.output_dir, f"checkpoint-{interrupt.step}")
        trainer.accelerator.print(
            f"Stopped by {interrupt.signal_name} after step {interrupt.step}; checkpoint saved to {saved}. Run the "
            f"same command again to resume from it (exit status {EXIT_INTERRUPTED})."
        )
        trainer.multi_process = trainer.accelerator.num_processes > 1
        trainer.accelerator.end_training()
        trainer.interrupted = interrupt.signal_name
        return trainer

    trainer.save_model(training_args.output_dir)
    if trainer.accelerator.is_main_process:
        trainer.create_model_card(dataset_name=script_args.dataset_name, tags=["gear_trl"])
    card = os.path.join(training_args.output_dir, "README.md")
    trainer.accelerator.print(f"Model saved to {training_args.output_dir}\nModel card: {card}")

    if training_args.push_to_hub:
        trainer.push_to_hub(dataset_name=script_args.dataset_name)
        trainer.accelerator.print(f"Pushed to https://huggingface.co/{trainer.hub_model_id}")
    trainer.accelerator.wait_for_everyone()
    # end_training does not stop gloo's worker threads (see `leave_without_finalization`): `cli` leaves a
    # multi-process run's ranks without interpreter finalization.
    trainer.multi_process = trainer.accelerator.num_processes > 1
    trainer.accelerator.end_training()
    return trainer


class PeerLostError(RuntimeError):
    """A collective failed under several processes: another rank died, was killed, or hangs."""


_COLLECTIVE_FAILURE_WORDS = ("gloo", "NCCL", "c10d", "Connection reset", "Connection closed", "Broken pipe")


def is_collective_failure(err: BaseException) -> bool:
    """Whether `err` is a failed collective (a lost or hung peer), not a bug of this rank."""
    import torch.distributed as dist

    if isinstance(err, getattr(dist, "DistError", ())):
        return True
    return isinstance(err, RuntimeError) and any(word in str(err) for word in _COLLECTIVE_FAILURE_WORDS)


def peer_lost_message(output_dir: str, steps_done: int, err: BaseException) -> str:
    """One line: a peer stopped during which step, why (the collective's first line), and where to resume from."""
    from .trainer.checkpoints import find_resumable_checkpoint

    cause = (str(err).strip().splitlines() or [type(err).__name__])[0]
    checkpoint, _ = find_resumable_checkpoint(output_dir)
    resume = (
        f"the last complete checkpoint is {checkpoint}; run the same command again to resume from it"
        if checkpoint
        else f"there is no complete checkpoint in {output_dir}; the same command starts again from step 0"
    )
    return (
        f"another rank stopped (died, was killed, or hangs) during step {steps_done + 1}, so this rank stops too: "
        f"{cause[:300]}. {resume}."
    )


def _print_main(message: str) -> None:
    """Print once per run, not once per process (no accelerator exists yet when checkpoints are chosen)."""
    if os.environ.get("RANK", "0") == "0":
        print(message, flush=True)


def cli(argv: list[str] | None = None) -> None:
    from .inputs.errors import UserInputError
    from .inputs.plugins import import_from_current_folder
    from .trainer.checkpoints import CheckpointSaveError

    # `gear-trl-train` imports the recipe's plug-ins (`my_rewards:exact_answer`) from the current folder, as
    # `python -m gear_trl.train` does.
    import_from_current_folder()
    try:
        trainer = main(*parse_args(argv))
    except PeerLostError as err:
        # The launcher also stops this rank (SIGTERM, then SIGKILL); say where to resume from first, then leave at
        # once: a rank whose process group has lost a peer can hang or abort in finalization.
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        print(f"error: {err}", file=sys.stderr, flush=True)
        leave_without_finalization(EXIT_PEER_LOST)
    except (UserInputError, CheckpointSaveError) as err:
        # A user mistake found before the model loaded, or a save the disk refused: the message says what to fix and
        # where to resume from; a traceback would bury it.
        sys.exit(f"error: {err}")
    status = EXIT_INTERRUPTED if getattr(trainer, "interrupted", None) else 0
    if getattr(trainer, "multi_process", False):
        leave_without_finalization(status)
    if status:
        sys.exit(status)


def leave_without_finalization(status: int) -> None:
    """End a rank of a multi-process run once its work is done and saved: run the `atexit` handlers, flush, and
    `os._exit(status)`, skipping the interpreter's finalization.

    Why: `end_training` removes the process groups from torch.distributed, but DeepSpeed and accelerate still hold
    them, so their gloo worker threads (`pt_gloo_runloop`, two per group) outlive `main`. During finalization such a
    thread can drop the last reference to a tensor of a finished work item and take the GIL; a thread that takes the
    GIL while the interpreter is finalizing is ended by `pthread_exit`, whose unwinding through C++ `noexcept` frames
    calls `std::terminate`: "terminate called without an active exception", SIGABRT, and a launcher reporting a
    finished, saved run as failed (about 1 run in 100). Nothing is left to finalize that matters here: trackers are
    finished by `end_training`, files are closed by the saves, logging is shut down below.
    """
    import atexit
    import logging

    try:
        atexit._run_exitfuncs()
        logging.shutdown()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(status)


if __name__ == "__main__":
    cli(sys.argv[1:])
