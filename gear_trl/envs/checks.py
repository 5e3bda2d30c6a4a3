"""Checks of a user's environment class, made before the model loads, so that a mistake costs seconds, not a model
load and a generation.

TRL's `environment_factory` turns every public method of an environment into a tool except `reset` and `get_reward`,
building each tool's JSON schema from its type hints and Google-style docstring (`transformers.utils.get_json_schema`)
only when the first prompt is rendered, and calls `reset(**row)` with every dataset column before each rollout,
appending what it returns (a string) to the last user message. Here:

- `hide_plumbing`: `state_key` (GiGPO's anchor state) is never offered to the model as a tool;
- `check_environment`: every tool's schema builds, `reset` takes the row's columns, `reset` on the first row returns
  None or a string, and the tools a dataset's `tools` column advertises exist in the environment.
- `check_environments`: the same for one environment or several (TRL's `{name: factory}`, each row naming its own in
  an `environment` column), with rows whose prompt is empty accepted when their environment's `reset` returns the
  instruction; `preflight=False` builds no environment and calls no `reset`.
- `check_rollout_func`: the credit modes that cannot run on a custom `rollout_func` are refused with the reason.

Each failure is a `UserInputError` naming the class, the method and the fix.
"""

from __future__ import annotations

import functools
import inspect
import json
import warnings
from typing import Any

from ..inputs.errors import UserInputError
from .base import not_a_tool, tool_names

PLUMBING = ("state_key",)
"""Methods an environment may define that are never tools (TRL itself skips `reset` and `get_reward`)."""

_SCHEMA_HELP = (
    "every argument of a tool needs a type hint and an `Args:` entry in a Google-style docstring (and the docstring a "
    "description line); a helper that is not a tool should start with `_` or carry `@gear_trl.envs.not_a_tool`"
)

_PLAIN_TEXT = (
    "the rows' prompts are plain text, but TRL appends what `reset` returns to the last message of a conversational "
    "prompt and runs tools on conversations only. Give the prompts as lists of messages "
    '([{"role": "user", "content": ...}]).'
)


def hide_plumbing(cls: type) -> type:
    """Mark `cls`'s plumbing methods (`PLUMBING`) `not_a_tool`, in place, so TRL does not list them as tools; an
    instance still calls them as ordinary methods. Returns `cls`."""
    for name in PLUMBING:
        member = inspect.getattr_static(cls, name, None)
        if inspect.isfunction(member):
            setattr(cls, name, not_a_tool(member))
    return cls


def check_environment(
    factory,
    dataset=None,
    *,
    what: str = "environment",
    reset_first_row: bool = True,
    probe_row: int | None = None,
    needs_instruction: bool = False,
    reset_skips: tuple[str, ...] = (),
    routed=None,
) -> list[str]:
    """Build one environment with `factory`, hide its plumbing and check it against `dataset` (a `datasets.Dataset`
    of prepared rows, or None when the environment supplies the prompts); returns its tool names in TRL's order.
    `reset_first_row`: call `reset` on the first row (or with no row when there is no dataset) and check its return;
    `probe_row`: the row to call it on instead of the first; `needs_instruction`: that row's prompt is empty, so
    `reset` must return its instruction; `reset_skips`: columns TRL does not pass to `reset` (`environment`, with
    several); `routed`: the rows this environment serves, whose `tools` column must name its tools (default: all).

    Raises `UserInputError` for a tool whose schema TRL cannot build, a `reset` that cannot take the dataset's
    columns or returns something other than None or a string on the first row, and a `tools` column naming tools the
    environment does not have.
    """
    if isinstance(factory, type):
        hide_plumbing(factory)
    try:
        environment = factory()
    except Exception as err:  # a user constructor: name it, whatever it raised
        raise UserInputError(f"{what}: building it with no arguments failed ({type(err).__name__}: {err}).") from err
    cls = hide_plumbing(type(environment))
    name = cls.__name__
    reset = inspect.getattr_static(cls, "reset", None)
    if not callable(reset) and not isinstance(reset, (staticmethod, classmethod)):
        raise UserInputError(
            f"{what} {name} has no `reset` method: TRL calls `reset(**row)` before every rollout. Add "
            "`def reset(self, **row) -> str | None`."
        )
    tools = tool_names(cls)
    from transformers.utils import get_json_schema

    for tool in tools:
        try:
            get_json_schema(getattr(environment, tool))
        except Exception as err:  # DocstringParsingException, TypeHintParsingException, ...
            raise UserInputError(
                f"{what} {name}.{tool}: TRL cannot build its tool schema ({type(err).__name__}: {err}); {_SCHEMA_HELP}."
            ) from err
    columns = [c for c in getattr(dataset, "column_names", None) or [] if c not in reset_skips]
    _check_reset_signature(environment.reset, name, columns, what)
    first_row = _first_row(dataset) if probe_row is None else dict(dataset[probe_row])
    plain_text = first_row is not None and isinstance(first_row.get("prompt"), str)
    if plain_text and tools:
        raise UserInputError(f"{what} {name}: {_PLAIN_TEXT}")
    which = "the first row" if not probe_row else f"row {probe_row}"
    if reset_first_row and (first_row is not None or dataset is None):
        row = {k: v for k, v in (first_row or {}).items() if k not in reset_skips}
        try:
            observation = environment.reset(**row)
        except Exception as err:
            raise UserInputError(
                f"{what} {name}.reset(**row) failed on {which} ({type(err).__name__}: {err}); it is called with "
                f"every dataset column ({columns})."
            ) from err
        if observation is not None and not isinstance(observation, (str, list)):
            raise UserInputError(
                f"{what} {name}.reset returned a {type(observation).__name__} on {which}; it must return None or "
                "a string, which TRL appends to the prompt's last user message (keep state on `self`)."
            )
        if plain_text and observation is not None:
            raise UserInputError(f"{what} {name}.reset returned text on {which}: {_PLAIN_TEXT}")
        if needs_instruction and not _text(observation).strip():
            raise UserInputError(
                f"Row {probe_row} has an empty prompt and {what} {name}.reset returned "
                f"{'nothing' if observation is None else repr(observation)} for it: the model would be shown no "
                "instruction. Put the instruction in the row's `prompt`, or have `reset` return it (TRL appends it "
                "to the last user message)."
            )
    if "tools" in columns:
        _check_tools_column(dataset if routed is None else routed, tools, name, what)
    return tools


def _check_reset_signature(reset, name: str, columns: list[str], what: str) -> None:
    try:
        parameters = inspect.signature(reset).parameters.values()
    except (TypeError, ValueError):
        return
    shown = ", ".join(["self", *(str(p) for p in parameters)])
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters):
        return
    accepted = {p.name for p in parameters if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
    required = [
        p.name
        for p in parameters
        if p.default is inspect.Parameter.empty and p.kind is not inspect.Parameter.VAR_POSITIONAL
    ]
    unexpected = [column for column in columns if column not in accepted]
    missing = [parameter for parameter in required if parameter not in columns]
    if unexpected or missing:
        problem = f"it does not take {unexpected}" if unexpected else f"it requires {missing}, which are not columns"
        raise UserInputError(
            f"{what} {name}.reset({shown}): TRL calls it as `reset(**row)` with every dataset column "
            f"({columns}), but {problem}. Write it as `def reset(self, **row)` and read the columns it needs from `row`."
        )


def _first_row(dataset) -> dict[str, Any] | None:
    if dataset is None or not hasattr(dataset, "column_names") or not hasattr(dataset, "__len__"):
        return None
    return dict(dataset[0]) if len(dataset) else None


def _check_tools_column(dataset, tools: list[str], name: str, what: str) -> None:
    advertised: set[str] = set()
    for value in {v if isinstance(v, str) else json.dumps(v, default=str) for v in dataset["tools"] if v}:
        try:
            schemas = json.loads(value) if value else []
        except ValueError:
            continue  # an unreadable row is reported where rows are read (the rollout's tool metrics)
        for schema in schemas if isinstance(schemas, list) else []:
            function = schema.get("function", schema) if isinstance(schema, dict) else None
            if isinstance(function, dict) and isinstance(function.get("name"), str):
                advertised.add(function["name"])
    absent = sorted(advertised - set(tools))
    if absent:
        raise UserInputError(
            f"The dataset's `tools` column advertises {absent}, which {what} {name} does not have (its tools: "
            f"{tools}): the model would be shown tools that cannot run. Rename them in the data or the environment, "
            "or drop the `tools` column (the environment's own tools are then shown)."
        )


def _text(value: Any) -> str:
    """The text of a `reset` observation: a string, or the text parts of a list of content blocks."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "".join(str(p.get("text") or "") for p in value if isinstance(p, dict))
    return ""


def prompt_is_empty(prompt: Any) -> bool:
    """Whether a prompt (text or messages) holds no text at all, as in TRL's Harbor and OpenReward rows, whose
    instruction comes from the environment's `reset`."""
    if isinstance(prompt, str):
        return not prompt.strip()
    if not isinstance(prompt, list):
        return False
    return not "".join(_text(m.get("content")) for m in prompt if isinstance(m, dict)).strip()


def plumbing_hidden(factory):
    """`factory` (an environment class, or a function returning an environment) such that the class of whatever it
    builds has its plumbing hidden (`hide_plumbing`) before TRL lists its tools: a class is marked at once, a
    function's results when it returns them, so nothing needs to be built beforehand."""
    if isinstance(factory, type):
        return hide_plumbing(factory)

    @functools.wraps(factory)
    def build(*args, **kwargs):
        environment = factory(*args, **kwargs)
        hide_plumbing(type(environment))
        return environment

    return build


def check_environments(environment_factory, dataset=None, *, preflight: bool = True):
    """Check TRL's `environment_factory` (one factory, or `{name: factory}`) against the training `dataset` before the
    model loads, and return it with its plumbing hidden (`plumbing_hidden`).

    With several environments every row must name one of them in its `environment` column, as TRL routes rows
    (`reset` gets the row without it). Each environment is built once and `reset` on one of its rows: its first row
    with an empty prompt when it has one (`reset` must return the instruction), else its first row. With
    `preflight=False` (`GEARConfig.environment_preflight`) only the routing is checked: no environment is built, no
    `reset` runs (a sandbox is not started one extra time), and empty prompts are taken on trust.
    """
    several = isinstance(environment_factory, dict)
    factories = environment_factory if several else {None: environment_factory}
    if several and not factories:
        raise UserInputError("`environment` names no environment: give one import path, or a {name: path} mapping.")
    rows = dataset if hasattr(dataset, "column_names") and hasattr(dataset, "__len__") else None
    routes: dict[Any, list[int]] = {name: [] for name in factories}
    if rows is not None:
        if several:
            if "environment" not in rows.column_names:
                raise UserInputError(
                    f"Several environments ({sorted(factories)}) need an `environment` column naming each row's "
                    "environment, as TRL routes rows; the dataset's columns are "
                    f"{rows.column_names}."
                )
            unknown = []
            for index, name in enumerate(rows["environment"]):
                if name in routes:
                    routes[name].append(index)
                else:
                    unknown.append((index, name))
            if unknown:
                shown = "; ".join(f"row {i}: {name!r}" for i, name in unknown[:5])
                raise UserInputError(
                    f"{len(unknown)} rows name an environment that is not among {sorted(factories)}: {shown}. Fix "
                    "their `environment` column or add the environment."
                )
        else:
            routes[None] = list(range(len(rows)))
    empty = set()
    if rows is not None and "prompt" in rows.column_names:
        empty = {i for i, prompt in enumerate(rows["prompt"]) if prompt_is_empty(prompt)}
    checked = {}
    for name, factory in factories.items():
        what = "environment" if name is None else f"environment {name!r}"
        factory = plumbing_hidden(factory)
        checked[name] = factory
        if not preflight:
            if empty & set(routes[name]):
                warnings.warn(
                    f"{what}: {len(empty & set(routes[name]))} rows have an empty prompt and "
                    "`environment_preflight: false` skips the check that `reset` returns their instruction.",
                    stacklevel=2,
                )
            continue
        skips = ("environment",) if several else ()
        if rows is None or not routes[name]:
            # No rows to reset on (a stream, or none routed here); without a dataset TRL resets with no row.
            check_environment(
                factory, rows, what=what, reset_first_row=rows is None and not several, reset_skips=skips
            )
            continue
        probe = next((i for i in routes[name] if i in empty), routes[name][0])
        check_environment(
            factory,
            rows,
            what=what,
            probe_row=probe,
            needs_instruction=probe in empty,
            reset_skips=skips,
            routed=rows.select(routes[name]) if several else None,
        )
    return checked if several else checked[None]


def check_rollout_func(args) -> None:
    """Refuse a custom `rollout_func` (TRL's experimental hook that generates in place of the trainer) under the credit
    modes that cannot be computed on its output; `credit: none` runs on it as GRPOTrainer does.

    GEAR's teacher (every mode that runs one: `GEARConfig.uses_teacher`) scores the student's completion after the student's prompt with
    the ground truth added; under `rollout_func` the prompt tokens are rendered by the user's function, so the trainer
    cannot build that prompt with the hint in it and know it matches, and a mismatch would measure the divergence of
    two different contexts: a wrong number, silently. GiGPO groups the steps of a rollout by the state each acted on,
    read from the tool messages and `state_key()` after each call of TRL's tool loop; a rollout function returns token
    ids only, with no per-step messages or states.
    """
    reasons = []
    if args.uses_teacher:
        reasons.append(
            "GEAR's teacher scores the completion after the student's own prompt with the ground truth added, but "
            "`rollout_func` renders the prompt tokens itself, so that teacher prompt cannot be built to match (its "
            "divergence would compare two different contexts)"
        )
    if args.credit_mode.per_step:
        reasons.append(
            "GiGPO needs each step's anchor state (the tool results and `state_key()` recorded by TRL's tool loop), "
            "and `rollout_func` returns token ids only"
        )
    if reasons:
        raise UserInputError(
            f"`credit: {args.credit}` cannot run with a custom `rollout_func`: {'; '.join(reasons)}. Use "
            "`credit: none` with `rollout_func`, or drop `rollout_func` and let the trainer generate (with "
            "`environment_factory` for multi-turn tool use)."
        )
