"""Checks `gear_trl.train` and `gear_trl.evaluate` make before any model is loaded, so that a user mistake costs
seconds, not a model load or a training run, and the message names what to fix."""

from __future__ import annotations

import contextlib
import difflib
import json
import os
import tempfile

from .errors import UserInputError

GROUND_TRUTH_WARN_FRACTION = 0.5
"""Warn when more than this share of the training rows has no usable ground truth (none at all is an error)."""

_HUB_OFFLINE_VALUES = ("1", "true", "yes", "on")


class PreflightError(UserInputError):
    """A user input that would make the run fail (or train on nothing) later, found before the model loads."""


class Problems:
    """Every problem found before the model loads, reported together: a fresh machine with four problems costs one
    run to see them all, not four.

        problems = Problems()
        with problems.check():
            check_trackers(report_to)
        with problems.check():
            check_model_source(name)
        problems.raise_if_any()

    A check that raises `UserInputError` (or `PreflightError`) is recorded and the next one runs; any other exception
    is a bug and propagates at once. The same message found twice is kept once.
    """

    def __init__(self) -> None:
        self.messages: list[str] = []
        self._errors: list[UserInputError] = []

    @contextlib.contextmanager
    def check(self):
        try:
            yield
        except UserInputError as err:
            message = str(err)
            if message not in self.messages:
                self.messages.append(message)
                self._errors.append(err)

    def __bool__(self) -> bool:
        return bool(self.messages)

    def raise_if_any(self) -> None:
        """Raise the one problem found as it was raised (a caller may catch its type), or one `PreflightError`
        listing several, numbered."""
        if len(self._errors) == 1:
            raise self._errors[0]
        if self.messages:
            listed = "\n".join(f"  {i}. {message}" for i, message in enumerate(self.messages, 1))
            raise PreflightError(f"{len(self.messages)} problems, found before the model loaded:\n{listed}")


# ---------------------------------------------------------------------------------------------------------------------
# Local paths and Hub ids
# ---------------------------------------------------------------------------------------------------------------------


def hub_offline() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "").lower() in _HUB_OFFLINE_VALUES


def looks_like_local_path(name: str) -> bool:
    """Whether `name` is meant as a local folder rather than a Hub id `org/name`: it starts with `.`, `/` or `~`, has
    more than one `/` (or a backslash), or its first component exists here (`data/tiny-qwen4` when `data/` does)."""
    if name.startswith((".", "/", "~")) or "\\" in name or os.sep != "/" and os.sep in name:
        return True
    parts = name.split("/")
    return len(parts) > 2 or (len(parts) == 2 and os.path.isdir(parts[0]))


def closest_sibling(path: str, keep=None) -> str:
    """The text " (did you mean 'x'?)" naming the entry of `path`'s folder closest to it, among those that
    `keep(entry_path)` accepts (all when `keep` is None); "" when none is close."""
    parent, base = os.path.split(os.path.normpath(os.path.expanduser(path)))
    parent = parent or "."
    if not os.path.isdir(parent):
        return f" (its parent folder {parent!r} does not exist either)"
    entries = sorted(e for e in os.listdir(parent) if keep is None or keep(os.path.join(parent, e)))
    close = difflib.get_close_matches(base, entries, n=1)
    return f" (did you mean {os.path.join(parent, close[0])!r}?)" if close else ""


def _in_hub_cache(name: str, cache_dir: str | None) -> bool:
    from huggingface_hub import try_to_load_from_cache

    if name.count("/") > 1 or name.startswith((".", "/", "~")):
        return False  # not a Hub id
    return any(
        isinstance(try_to_load_from_cache(name, filename, cache_dir=cache_dir), str)
        for filename in ("config.json", "adapter_config.json")
    )


def check_model_source(name: str, what: str = "model_name_or_path", cache_dir: str | None = None) -> None:
    """Raise `PreflightError` when `name` can be neither loaded from a local folder nor found on the Hub side:
    a path-like name that does not exist (unless a cached Hub model has that id), or (with HF_HUB_OFFLINE set) a Hub
    id absent from the local cache."""
    if os.path.exists(os.path.expanduser(name)):
        return
    if looks_like_local_path(name):
        if _in_hub_cache(name, cache_dir):
            return
        raise PreflightError(f"`{what}`: no such local folder: {name!r}{closest_sibling(name)}.")
    if hub_offline() and not _in_hub_cache(name, cache_dir):
        raise PreflightError(
            f"`{what}`: {name!r} is not a local folder and not in the local Hugging Face cache, and HF_HUB_OFFLINE "
            "is set, so it cannot be downloaded. Unset HF_HUB_OFFLINE to download it, or give a local folder."
        )


DATA_FILE_BUILDERS = {".jsonl": "json", ".json": "json", ".parquet": "parquet", ".csv": "csv"}
"""Single local data files `dataset_name` may be, by extension, and the `datasets` builder that reads each."""


def _is_data_file(path: str) -> bool:
    return os.path.splitext(path)[1].lower() in DATA_FILE_BUILDERS


def _could_be_dataset(path: str) -> bool:
    """What a did-you-mean may propose as a dataset: a folder or a data file, never a log or a recipe."""
    return os.path.isdir(path) or _is_data_file(path)


def check_dataset_source(name: str, what: str = "dataset_name") -> None:
    """Raise `PreflightError` for a local dataset name that does not exist: a data file (`.jsonl`, `.json`,
    `.parquet`, `.csv`, wherever it is written) or a path-like folder. The did-you-mean proposes only data files (for a
    file) or folders and data files (for a folder). Hub ids are checked when loading, by `load_dataset_named`."""
    path = os.path.expanduser(name)
    if os.path.exists(path):
        return
    if _is_data_file(name):
        raise PreflightError(f"`{what}`: no such local file: {name!r}{closest_sibling(name, _is_data_file)}.")
    if looks_like_local_path(name):
        raise PreflightError(f"`{what}`: no such local folder: {name!r}{closest_sibling(name, _could_be_dataset)}.")


def load_dataset_named(name: str, config: str | None = None, what: str = "dataset_name", revision: str | None = None):
    """`datasets.load_dataset(name, name=config, revision=revision)`, with a missing local folder or (offline) uncached
    Hub dataset reported by name instead of as a failure to reach the Hub. A single local file (.jsonl, .json,
    .parquet, .csv) is loaded as split `train`. `revision` (a Hub commit, branch or tag) applies to Hub datasets."""
    from datasets import load_dataset

    path = os.path.expanduser(name)
    if os.path.isfile(path):
        extension = os.path.splitext(path)[1].lower()
        if extension not in DATA_FILE_BUILDERS:
            raise PreflightError(
                f"`{what}` {name!r} is a file of a kind gear_trl does not read ({extension or 'no extension'}); give a "
                f"{', '.join(DATA_FILE_BUILDERS)} file, a dataset folder or a Hub dataset id."
            )
        return load_dataset(DATA_FILE_BUILDERS[extension], data_files={"train": path})
    check_dataset_source(name, what)
    try:
        return load_dataset(name, name=config, **({"revision": revision} if revision else {}))
    except (ConnectionError, OSError, FileNotFoundError) as err:
        if hub_offline() and not os.path.exists(os.path.expanduser(name)):
            raise PreflightError(
                f"`{what}`: {name!r} is not a local folder and not in the local Hugging Face cache, and HF_HUB_OFFLINE "
                "is set, so it cannot be downloaded. Unset HF_HUB_OFFLINE to download it, or give a local folder."
            ) from err
        if os.path.exists(os.path.expanduser(name)):
            raise
        # A Hub dataset that cannot be fetched: misspelt, private, or gated (xLAM's function-calling set, which the
        # tool-use recipes train on, is gated): one line saying so, not the Hub client's traceback.
        cause = (str(err).strip().splitlines() or [type(err).__name__])[0][:300]
        raise PreflightError(
            f"`{what}` {name!r} could not be loaded from the Hugging Face Hub ({type(err).__name__}: {cause}). Check "
            "the id; a gated dataset needs its terms accepted on its Hub page and a token (`hf auth login`, or "
            "HF_TOKEN)."
        ) from err


# ---------------------------------------------------------------------------------------------------------------------
# Output directory
# ---------------------------------------------------------------------------------------------------------------------


def check_writable_dir(path: str, what: str = "output_dir") -> None:
    """Create `path` if needed and write (then remove) a file in it; raise `PreflightError` naming it if either fails.
    Made on every process: with one `output_dir` per node each node's must be writable."""
    try:
        os.makedirs(path, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path, prefix=".gear_write_check_"):
            pass
    except OSError as err:
        raise PreflightError(
            f"`{what}` {path!r} cannot be written ({type(err).__name__}: {err.strerror or err}); checkpoints and the "
            "model are saved there. Choose another `output_dir` or fix its permissions."
        ) from err


# ---------------------------------------------------------------------------------------------------------------------
# Precision: accelerate / DeepSpeed versus the recipe
# ---------------------------------------------------------------------------------------------------------------------


def _deepspeed_precisions(config) -> dict[str, bool]:
    """{"bf16": bool, "fp16": bool} for the entries a DeepSpeed config sets to a boolean ("auto" follows the
    recipe and is left out)."""
    if isinstance(config, str):
        with open(config) as handle:
            config = json.load(handle)
    found = {}
    for key in ("bf16", "fp16"):
        enabled = (config or {}).get(key, {}).get("enabled", "auto")
        if isinstance(enabled, bool):
            found[key] = enabled
        elif str(enabled).lower() in ("true", "false"):
            found[key] = str(enabled).lower() == "true"
    return found


def check_precision(bf16: bool, fp16: bool, deepspeed=None, environ=None) -> None:
    """Raise `PreflightError` when the launcher's precision contradicts the recipe's `bf16`/`fp16`.

    `accelerate launch` passes its config's `mixed_precision` as ACCELERATE_MIXED_PRECISION and its DeepSpeed config
    file as ACCELERATE_DEEPSPEED_CONFIG_FILE; left alone, the contradiction surfaces (under DeepSpeed) only after the
    model has loaded, or (under DDP) the launcher's autocast silently wins over the recipe. `mixed_precision: no`
    (the shipped accelerate_configs) and DeepSpeed "auto" leave the choice to the recipe.
    """
    environ = os.environ if environ is None else environ
    recipe = "bf16" if bf16 else "fp16" if fp16 else "no"
    fix = (
        "Make them agree: set `mixed_precision: 'no'` in the accelerate config (the shipped accelerate_configs/ do: "
        "the recipe decides) or pass `--bf16`/`--fp16` to match."
    )
    launcher = environ.get("ACCELERATE_MIXED_PRECISION", "no").lower()
    if launcher in ("bf16", "fp16") and launcher != recipe:
        raise PreflightError(
            f"Precision mismatch: the accelerate config sets mixed_precision: {launcher} but the recipe has bf16: "
            f"{str(bf16).lower()}, fp16: {str(fp16).lower()}. {fix}"
        )
    sources = []
    if environ.get("ACCELERATE_DEEPSPEED_CONFIG_FILE") not in (None, "", "none"):
        sources.append(("the DeepSpeed config file", environ["ACCELERATE_DEEPSPEED_CONFIG_FILE"]))
    if deepspeed:
        sources.append(("the recipe's `deepspeed` config", deepspeed))
    for label, source in sources:
        try:
            found = _deepspeed_precisions(source)
        except (OSError, ValueError, AttributeError):
            continue  # DeepSpeed itself reports an unreadable config
        for key, enabled in found.items():
            if enabled != (recipe == key):
                raise PreflightError(
                    f"Precision mismatch: {label} ({source if isinstance(source, str) else 'dict'}) sets {key}.enabled: "
                    f"{str(enabled).lower()} but the recipe has {key}: {str(recipe == key).lower()}. Set it to "
                    f'"auto" (the recipe decides) or pass `--{key}` to match.'
                )


# ---------------------------------------------------------------------------------------------------------------------
# Ground truth
# ---------------------------------------------------------------------------------------------------------------------

_GROUND_TRUTH_SOURCE = {
    "gsm8k": "the number after '####' in column `answer`",
    "math": "the last \\boxed{} in column `solution`",
    "aime": "column `answer`",
    "generic": "column `ground_truth`",
    "tool_use": "column `ground_truth`",
    "columns": "`answer_column`, through `answer_pattern` when set",
}


def ground_truth_users(credit: str, uses_teacher: bool, reward_funcs) -> list[str]:
    """What in this run reads the ground truth: GEAR's teacher and every reward function with a `ground_truth`
    parameter."""
    import inspect

    users = [f"the teacher of `credit: {credit}`"] if uses_teacher else []
    for func in reward_funcs:
        try:
            parameters = inspect.signature(func).parameters
        except (TypeError, ValueError):
            continue
        if "ground_truth" in parameters:
            users.append(f"reward `{getattr(func, '__name__', func)}`")
    return users


TRL_REWARD_ARGUMENTS = ("prompts", "completions", "completion_ids", "trainer_state", "log_extra", "log_metric")
"""What GRPOTrainer passes every reward function besides the batch's columns (`_calculate_rewards`), and
`environments` when it runs an `environment_factory`."""


def reward_parameter_problems(
    reward_funcs, columns, environment: bool = False, moved: dict[str, str] | None = None
) -> list[str]:
    """One line per reward function with a required parameter TRL will not pass: not one of `TRL_REWARD_ARGUMENTS`,
    not `environments` (under an environment), not a column of the dataset (`columns`; TRL passes every column but
    `prompt`, `completion` and `completion_ids`). A parameter with a default, `**kwargs` and reward models (modules,
    Hub ids) are not checked. `moved`: raw column -> the column the dataset adapter put it in (`answer` ->
    `ground_truth` under `dataset_format: columns`), named for a parameter asking for the raw column."""
    import inspect

    passed = set(TRL_REWARD_ARGUMENTS) | (set(columns) - {"prompt", "completion", "completion_ids"})
    if environment:
        passed.add("environments")
    keyword = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    problems = []
    for func in reward_funcs:
        if isinstance(func, str) or not callable(func) or hasattr(func, "forward"):
            continue
        try:
            parameters = inspect.signature(func).parameters.values()
        except (TypeError, ValueError):
            continue
        name = getattr(func, "__name__", None) or type(func).__name__
        missing = [p.name for p in parameters if p.kind in keyword and p.default is p.empty and p.name not in passed]
        positional = [p.name for p in parameters if p.kind is p.POSITIONAL_ONLY and p.default is p.empty]
        if missing:
            renamed = [f"`{moved[m]}` instead of {m!r}" for m in missing if moved and moved.get(m) in passed]
            hint = (
                f" The dataset adapter does not keep the columns it reads: take {', and '.join(renamed)}."
                if renamed
                else ""
            )
            problems.append(
                f"reward `{name}` needs {', '.join(repr(m) for m in missing)}, which the training rows do not have "
                f"(their columns: {sorted(columns)}) and TRL does not pass (it passes "
                f"{', '.join(sorted(passed - set(columns)))} and every column): add the column to the data, give the "
                f"parameter a default, or take it from **kwargs.{hint}"
            )
        if positional:
            problems.append(
                f"reward `{name}` has positional-only parameters {positional}: TRL passes everything by keyword."
            )
    return problems


def check_ground_truth(dataset, column: str, adapter: str, users: list[str], where: str) -> int:
    """Count the rows of a prepared `dataset` without a usable ground truth in `column`; raise `PreflightError` when
    no row has one and something (`users`) reads it, warn when more than `GROUND_TRUTH_WARN_FRACTION` lack it.
    Returns the number of rows lacking it."""
    if not users or column not in dataset.column_names:
        return 0
    total = len(dataset)
    missing = sum(value is None or not str(value).strip() for value in dataset[column])
    source = _GROUND_TRUTH_SOURCE.get(adapter, f"the `{adapter}` adapter's `ground_truth`")
    detail = (
        f"{missing} of {total} rows of {where} (dataset_format {adapter!r}: ground truth taken from {source}) have no "
        f"ground truth in column {column!r}"
    )
    if total and missing == total:
        raise PreflightError(
            f"{detail}, which {' and '.join(users)} need: training would run on the other rewards alone. Check "
            "the data and `dataset_format`, or train with rewards that do not need a ground truth and either "
            "`teacher_reference: sibling` (GEAR's teacher shown a successful rollout of the same group instead of a "
            "reference; it needs groups with a success) or `credit: none`."
        )
    if total and missing / total > GROUND_TRUTH_WARN_FRACTION:
        import warnings

        warnings.warn(
            f"{detail}; those rows get plain GRPO weights and no reward from {' or '.join(users)}.", stacklevel=2
        )
    return missing


# ---------------------------------------------------------------------------------------------------------------------
# Experiment trackers (`report_to`)
# ---------------------------------------------------------------------------------------------------------------------

TRACKERS = {
    # report_to name: (importable modules, any of which will do; pip package; gear_trl extra or None)
    "wandb": (("wandb",), "wandb", "wandb"),
    "tensorboard": (("tensorboard", "tensorboardX"), "tensorboard", "tensorboard"),
    "trackio": (("trackio",), "trackio", "trackio"),
    "mlflow": (("mlflow",), "mlflow", "mlflow"),
    "comet_ml": (("comet_ml",), "comet_ml", "comet"),
    "clearml": (("clearml",), "clearml", None),
    "neptune": (("neptune",), "neptune", None),
    "swanlab": (("swanlab",), "swanlab", None),
    "dvclive": (("dvclive",), "dvclive", None),
    "codecarbon": (("codecarbon",), "codecarbon", None),
    "azure_ml": (("azureml",), "azureml-core", None),
}


def check_trackers(report_to) -> None:
    """Raise `PreflightError` for a `report_to` tracker whose package is not installed, saying how to install it
    (transformers would otherwise fail when the Trainer is built, after the model has loaded)."""
    import importlib.util

    names = [report_to] if isinstance(report_to, str) else list(report_to or [])
    for name in names:
        if name in ("none", "all") or name not in TRACKERS:
            continue  # "all" reports to whatever is installed; transformers names unknown trackers itself
        modules, package, extra = TRACKERS[name]
        if any(importlib.util.find_spec(module) is not None for module in modules):
            continue
        install = f"pip install 'gear_trl[{extra}]' (or pip install {package})" if extra else f"pip install {package}"
        raise PreflightError(
            f"`report_to: {name}` needs the {package} package, which is not installed: {install}, or remove {name} "
            "from `report_to`."
        )


# ---------------------------------------------------------------------------------------------------------------------
# vLLM and the learning rate of full fine-tuning
# ---------------------------------------------------------------------------------------------------------------------


def check_vllm(use_vllm: bool) -> None:
    """Raise `PreflightError` when `use_vllm` is set and vLLM is not installed (TRL would fail once the trainer is
    built, after the model has loaded)."""
    import importlib.util
    import sys

    if not use_vllm or "vllm" in sys.modules:
        return
    try:
        found = importlib.util.find_spec("vllm") is not None
    except (ImportError, ValueError):
        found = False
    if not found:
        raise PreflightError(
            "`use_vllm: true` needs vLLM, which is not installed: pip install 'gear_trl[vllm]' (the vLLM versions TRL "
            "1.16 supports), or set `use_vllm: false` (generation with transformers, much slower)."
        )


FULL_FINETUNE_MAX_LEARNING_RATE = 5e-6
"""Above this, a full fine-tuning run (`use_peft: false`) is warned that its learning rate is LoRA-sized. Our choice: LoRA
RL fine-tuning of 4B-8B models commonly runs at 1e-5 to 5e-5 (the recipes: 1e-5), full-parameter RL at about 1e-6
(DAPO, Dr. GRPO); 5e-6 lies between, so only a rate closer to LoRA's than to full fine-tuning's is flagged."""


FULL_FINETUNE_MIN_HIDDEN_SIZE = 1024
"""Models narrower than this (the repository's tiny test models, hidden size 64-128, trained at 1e-4) are not warned:
the warning is about language models of real size (our choice)."""


def _hidden_size(model: object) -> int | None:
    """The `hidden_size` of a model's config.json, read without loading weights; None when it cannot be read."""
    if not isinstance(model, str):
        return getattr(getattr(model, "config", None), "hidden_size", None)
    try:
        from transformers import AutoConfig

        return getattr(AutoConfig.from_pretrained(model), "hidden_size", None)
    except (OSError, ValueError, KeyError):  # unreachable Hub id, odd config: warn rather than guess it is small
        return None


def full_finetune_learning_rate_warning(use_peft: bool, learning_rate: float, model: object = None) -> str | None:
    """The warning for a full fine-tuning run at a LoRA-sized learning rate, or None. LoRA trains a small update on
    frozen weights and needs a larger rate; the same rate on every weight of the model can wreck it in a few steps.
    `model` (a name or a model): one whose config says it is narrower than `FULL_FINETUNE_MIN_HIDDEN_SIZE` is not
    warned."""
    if use_peft or learning_rate <= FULL_FINETUNE_MAX_LEARNING_RATE:
        return None
    hidden = _hidden_size(model) if model is not None else None
    if hidden is not None and hidden < FULL_FINETUNE_MIN_HIDDEN_SIZE:
        return None
    return (
        f"full fine-tuning (`use_peft: false`) at `learning_rate: {learning_rate:g}`, a LoRA-sized rate: every weight "
        f"of the model moves at it. Full-parameter RL fine-tuning usually runs near 1e-6; pass e.g. `--learning_rate "
        f"1e-6`, or keep LoRA (`--use_peft true`). (Warned above {FULL_FINETUNE_MAX_LEARNING_RATE:g}.)"
    )
