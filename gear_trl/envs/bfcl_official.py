"""BFCL's own executable API classes and multi-turn checker, for training and for evaluation as the leaderboard scores.

`bfcl-eval` (the Berkeley Function Calling Leaderboard's package, a test dependency installed `--no-deps`; its
multi-turn modules import nothing beyond the standard library) ships the eight API classes of the multi-turn
categories (`bfcl_eval/eval_checker/multi_turn_eval/func_source_code/`: GorillaFileSystem, MathAPI, MessageAPI,
TwitterAPI, TicketAPI, TradingBot, TravelAPI, VehicleControlAPI), their function docs
(`bfcl_eval/data/multi_turn_func_doc/`), the 200 tasks of each multi-turn category (`bfcl_eval/data/`) and the
checker (`multi_turn_checker`: after every user turn, the state of every instance must equal the ground truth's and
the ground truth's execution results must be among the model's). This module uses all of them as they are; only the
glue is this module's:

- `load_tasks(category)`: the tasks of a category (`multi_turn_base`, `_miss_func`, `_miss_param`,
  `_long_context`), with their ground truth and the tool schemas BFCL shows the model (its function docs without the
  task's `excluded_function`; `missed_function` held out until their turn, as BFCL's inference does).
- `TaskState`: the official instances of one task, built with the class's own `_load_scenario`; `execute` runs one
  call and returns what BFCL's executor returns (strings as they are, dicts as JSON, errors as
  `"Error during execution: ..."`), so tool results and the response check see the leaderboard's strings.
- `check_task(task, calls_per_turn)`: the official `multi_turn_checker` on a whole rollout (`[turn][step][call
  string]`), 1.0 or 0.0 with the checker's error. A model that never calls a tool fails the first turn with a ground
  truth ("Model response list is empty"): 0.0 on every task.
- `turn_rows(task)` / `BFCLOfficialEnvironment` / `bfcl_official_turn_reward`: the per-user-turn rows TRL's tool loop
  trains on (the earlier turns' ground-truth calls and results as history, as `data/bfcl/multi_turn_base.jsonl`
  does), an `environment_factory` class whose tools are the official methods, and the reward that applies the
  checker's state and response checks to that one turn.

Safety: BFCL's checker `eval`s call strings. Only calls whose name is one of the task's functions and whose argument
names are identifiers are turned into strings, their values written with `repr` of JSON-decoded data (literals
only); any other call is answered with an error text and left out of what the checker runs.
"""

from __future__ import annotations

import ast
import copy
import functools
import importlib
import inspect
import json
import keyword
import os
import uuid
from typing import Any

from ..inputs.errors import UserInputError
from .base import not_a_tool

MULTI_TURN_CLASSES = (
    "GorillaFileSystem",
    "MathAPI",
    "MessageAPI",
    "TwitterAPI",
    "TicketAPI",
    "TradingBot",
    "TravelAPI",
    "VehicleControlAPI",
)
"""The API classes of BFCL's multi-turn categories."""
MULTI_TURN_CATEGORIES = (
    "multi_turn_base",
    "multi_turn_miss_func",
    "multi_turn_miss_param",
    "multi_turn_long_context",
)
"""The multi-turn categories the leaderboard scores (200 tasks each)."""
ADDED_FUNCTIONS_PROMPT = "I have updated some more functions you can choose from. What about now?"
"""The user message BFCL sends at a `miss_func` turn that adds the held-out functions (its
`DEFAULT_USER_PROMPT_FOR_ADDITIONAL_FUNCTION_FC`)."""
MAX_STEPS_PER_TURN = 20
"""BFCL's `MAXIMUM_STEP_LIMIT`: a turn that runs more model steps is force-terminated (the task fails)."""
_FORBIDDEN = ("kill", "exit", "quit", "remove", "unlink", "popen", "Popen", "run")  # refused by BFCL's executor too


def _bfcl():
    try:
        import bfcl_eval
    except ImportError as err:
        raise UserInputError(
            "BFCL's official classes need the bfcl-eval package: pip install --no-deps bfcl-eval==2026.3.23 "
            "(`make install` or, on a GPU node, `make install-eval` does; it is not a dependency of gear_trl, whose other "
            "parts work without it)."
        ) from err
    return bfcl_eval


def data_dir() -> str:
    """The installed bfcl-eval package's data folder."""
    return os.path.join(os.path.dirname(_bfcl().__file__), "data")


@functools.cache
def official_class(class_name: str) -> type:
    """BFCL's class `class_name`, imported from bfcl-eval."""
    _bfcl()
    from bfcl_eval.constants.executable_backend_config import CLASS_FILE_PATH_MAPPING

    if class_name not in MULTI_TURN_CLASSES:
        raise ValueError(f"{class_name!r} is not a BFCL multi-turn class; they are {list(MULTI_TURN_CLASSES)}.")
    return getattr(importlib.import_module(CLASS_FILE_PATH_MAPPING[class_name]), class_name)


def _read_jsonl(path: str) -> list[dict]:
    with open(path, encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


@functools.cache
def function_docs(class_name: str) -> tuple[dict, ...]:
    """BFCL's function docs of a class (`multi_turn_func_doc/*.json`), in file order."""
    official_class(class_name)  # first: without bfcl-eval it raises the UserInputError that says what to install
    from bfcl_eval.constants.executable_backend_config import MULTI_TURN_FUNC_DOC_FILE_MAPPING

    path = os.path.join(data_dir(), "multi_turn_func_doc", MULTI_TURN_FUNC_DOC_FILE_MAPPING[class_name])
    return tuple(_read_jsonl(path))


@functools.cache
def function_owners() -> dict[str, str]:
    """Function name -> the class that defines it, over the eight classes (names are unique across them; a clash in
    a later bfcl-eval would be refused here rather than shadow a tool)."""
    owners: dict[str, str] = {}
    for class_name in MULTI_TURN_CLASSES:
        for doc in function_docs(class_name):
            if doc["name"] in owners:
                raise RuntimeError(
                    f"BFCL function {doc['name']!r} is defined by {owners[doc['name']]} and {class_name}."
                )
            owners[doc["name"]] = class_name
    return owners


def tool_schema(doc: dict) -> dict:
    """The OpenAI-style schema of a BFCL function doc (as data/bfcl's rows carry them)."""
    from ..data.bfcl import bfcl_function_to_tool_schema

    return bfcl_function_to_tool_schema(doc)


# ---------------------------------------------------------------------------------------------------------------------
# Tasks
# ---------------------------------------------------------------------------------------------------------------------


def _parsed(value: Any) -> Any:
    return json.loads(value) if isinstance(value, str) and value[:1] in "[{" else value


def load_tasks(category: str = "multi_turn_base", limit: int | None = None) -> list[dict]:
    """The tasks of a BFCL multi-turn category, from the installed bfcl-eval, each
    `{id, category, turns, ground_truth, initial_config, involved_classes, excluded_function, missed_function}`:
    `turns` the user messages of each turn (an empty list at a `miss_func` turn that adds functions),
    `ground_truth` the call strings of each turn (BFCL's `possible_answer`)."""
    if category not in MULTI_TURN_CATEGORIES:
        raise UserInputError(
            f"Unknown BFCL category {category!r}; the multi-turn ones are {list(MULTI_TURN_CATEGORIES)}."
        )
    questions = _read_jsonl(os.path.join(data_dir(), f"BFCL_v4_{category}.json"))
    answers = {
        row["id"]: row["ground_truth"]
        for row in _read_jsonl(os.path.join(data_dir(), "possible_answer", f"BFCL_v4_{category}.json"))
    }
    tasks = []
    for row in questions[: limit if limit is not None else None]:
        tasks.append(
            {
                "id": row["id"],
                "category": category,
                "turns": _parsed(row["question"]),
                "ground_truth": answers[row["id"]],
                "initial_config": _parsed(row["initial_config"]),
                "involved_classes": _parsed(row["involved_classes"]),
                "excluded_function": _parsed(row.get("excluded_function")) or [],
                "missed_function": _parsed(row.get("missed_function")) or {},
            }
        )
    return tasks


def available_functions(task: dict, turn: int) -> list[str]:
    """The functions the model may call at `turn`: the involved classes' functions without `excluded_function` and
    without the `missed_function` not yet added (BFCL adds turn k's at turn k)."""
    held_out = {name for k, names in task["missed_function"].items() if int(k) > turn for name in names}
    excluded = set(task["excluded_function"]) | held_out
    return [
        doc["name"]
        for class_name in task["involved_classes"]
        for doc in function_docs(class_name)
        if doc["name"] not in excluded
    ]


def involved_functions(task: dict) -> list[str]:
    """Every function of the task's classes. BFCL's executor runs any of them, shown to the model or not (one
    `miss_func` ground truth even calls a function before its turn adds it), so the environment does too."""
    return [doc["name"] for class_name in task["involved_classes"] for doc in function_docs(class_name)]


def task_tools(task: dict, turn: int) -> list[dict]:
    """The tool schemas shown to the model at `turn` (see `available_functions`)."""
    names = set(available_functions(task, turn))
    return [tool_schema(doc) for c in task["involved_classes"] for doc in function_docs(c) if doc["name"] in names]


def turn_messages(task: dict, turn: int) -> list[dict]:
    """The user messages of a turn; BFCL's added-functions prompt at an empty `miss_func` turn."""
    messages = task["turns"][turn]
    if not messages and str(turn) in task["missed_function"]:
        return [{"role": "user", "content": ADDED_FUNCTIONS_PROMPT}]
    return [dict(m) for m in messages]


# ---------------------------------------------------------------------------------------------------------------------
# Execution
# ---------------------------------------------------------------------------------------------------------------------


def _result_text(value: Any) -> str:
    # As BFCL's `execute_multi_turn_func_call` turns results into strings: the response check compares these.
    if type(value) is str:
        return value
    if type(value) is dict:
        try:
            return json.dumps(value)
        except (TypeError, ValueError):
            return str(value)
    return str(value)


class TaskState:
    """The official instances of one task's classes, loaded as BFCL loads them (`_load_scenario` of a deep copy of
    the class's `initial_config`; MathAPI is stateless)."""

    def __init__(self, initial_config: dict, involved_classes: list[str], long_context: bool = False):
        from bfcl_eval.constants.executable_backend_config import STATELESS_CLASSES

        self.instances: dict[str, Any] = {}
        for class_name in involved_classes:
            instance = official_class(class_name)()
            if class_name not in STATELESS_CLASSES:
                instance._load_scenario(copy.deepcopy(initial_config.get(class_name, {})), long_context=long_context)
            self.instances[class_name] = instance

    def execute(self, name: Any, arguments: Any = None, args: tuple = ()) -> str:
        """Run one call; its result as BFCL's executor writes it. Never raises."""
        owner = function_owners().get(name) if isinstance(name, str) else None
        if owner is None or owner not in self.instances:
            return f"Error during execution: function {name!r} is not available in this task."
        if name in _FORBIDDEN:
            return f"Error during execution: Function call {name} is not allowed."
        if arguments is not None and not isinstance(arguments, dict):
            return f"Error during execution: the arguments of {name} must be an object, got {arguments!r}."
        try:
            return _result_text(getattr(self.instances[owner], name)(*args, **(arguments or {})))
        except Exception as err:  # noqa: BLE001 - what the model sends is untrusted; BFCL reports it the same way
            return f"Error during execution: {err}"

    def execute_string(self, call: str) -> str:
        """Run a ground-truth call string (`"cd(folder='document')"`, positional arguments allowed)."""
        name, args, kwargs = parse_call_string(call)
        return self.execute(name, kwargs, tuple(args))

    def state_key(self) -> str:
        """Canonical JSON of every instance's public attributes: a GiGPO anchor state."""
        return json.dumps(
            {name: _plain(instance) for name, instance in sorted(self.instances.items())},
            sort_keys=True,
            default=str,
        )


def _plain(value: Any, depth: int = 0) -> Any:
    # The classes hold objects (GorillaFileSystem's Directory, with a pointer to its parent): their public attributes.
    if depth > 50:
        return str(value)
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    if isinstance(value, dict):
        return {str(k): _plain(v, depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple, set)):
        return [_plain(v, depth + 1) for v in value]
    if hasattr(value, "__dict__"):
        return {k: _plain(v, depth + 1) for k, v in vars(value).items() if not k.startswith("_") and k != "parent"}
    return str(value)


def parse_call_string(call: str) -> tuple[str, list, dict]:
    """`(name, positional values, keyword values)` of a BFCL call string, read with `ast` (literals only)."""
    node = ast.parse(call.strip(), mode="eval").body
    if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name):
        raise ValueError(f"Not a call: {call!r}.")  # noqa: TRY004 - a string that does not parse as a call
    args = [ast.literal_eval(arg) for arg in node.args]
    kwargs = {kw.arg: ast.literal_eval(kw.value) for kw in node.keywords if kw.arg is not None}
    return node.func.id, args, kwargs


def call_string(name: Any, arguments: Any, allowed: set[str]) -> str | None:
    """The BFCL call string of a model's call (`name(a=1,b='x')`), or None when it must not reach the checker's
    `eval` (a name outside `allowed`, an argument name that is not an identifier, arguments not an object)."""
    if not isinstance(name, str) or name not in allowed or name in _FORBIDDEN:
        return None
    arguments = {} if arguments is None else arguments
    if not isinstance(arguments, dict):
        return None
    if any(not isinstance(k, str) or not k.isidentifier() or keyword.iskeyword(k) for k in arguments):
        return None
    return f"{name}({','.join(f'{key}={value!r}' for key, value in arguments.items())})"


# ---------------------------------------------------------------------------------------------------------------------
# The official checker
# ---------------------------------------------------------------------------------------------------------------------


def _entry(task: dict) -> dict:
    return {"id": task["id"], "initial_config": task["initial_config"], "involved_classes": task["involved_classes"]}


def _forget_instances(model_name: str) -> None:
    # BFCL's executor caches the instances of a rollout in its module globals under a name built from the model name
    # and the task id: a second check under the same name would reuse (and be scored on) the first one's state.
    from bfcl_eval.eval_checker.multi_turn_eval import multi_turn_utils

    for key in [key for key in vars(multi_turn_utils) if key.startswith(model_name)]:
        del vars(multi_turn_utils)[key]


def check_task(task: dict, calls_per_turn: list[list[list[str]]]) -> tuple[float, dict]:
    """(1.0 or 0.0, the checker's verdict) of a whole rollout under BFCL's `multi_turn_checker`.

    `calls_per_turn[t][s]` are the call strings of model step `s` of turn `t` (steps without calls left out, as
    BFCL's runner leaves them out). Fewer turns than the task has is a force-terminated rollout: 0.0, as the
    leaderboard scores it."""
    from bfcl_eval.eval_checker.multi_turn_eval.multi_turn_checker import multi_turn_checker

    if len(calls_per_turn) != len(task["ground_truth"]):
        return 0.0, {"valid": False, "error_type": "multi_turn:force_terminated"}
    model_name = f"gear_trl_{uuid.uuid4().hex}"
    try:
        verdict = multi_turn_checker(calls_per_turn, task["ground_truth"], _entry(task), task["category"], model_name)
    except Exception as err:  # noqa: BLE001 - a rollout the checker cannot run is a failed one, never a crash
        verdict = {"valid": False, "error_type": "multi_turn:checker_error", "error_message": str(err)}
    finally:
        _forget_instances(model_name)
    return float(bool(verdict.get("valid"))), verdict


# ---------------------------------------------------------------------------------------------------------------------
# Per-turn rows, the TRL environment and its reward
# ---------------------------------------------------------------------------------------------------------------------


def _named_arguments(name: str, args: list, kwargs: dict) -> dict:
    """A ground-truth call's arguments by name (positional ones named from the official method's signature)."""
    if not args:
        return dict(kwargs)
    method = getattr(official_class(function_owners()[name]), name)
    bound = inspect.signature(method).bind(None, *args, **kwargs).arguments
    return {key: value for key, value in bound.items() if key != "self"}


def turn_rows(task: dict) -> list[dict]:
    """One row per user turn: `prompt` the earlier turns (user messages, the ground-truth calls as an assistant
    message, their official results as tool messages) then this turn's user messages; `tools` this turn's schemas
    (JSON); `bfcl_task` (JSON) what the environment and the reward need: the task, the turn and the history calls."""
    rows, history, state = [], [], TaskState(task["initial_config"], task["involved_classes"], _long(task))
    for turn, calls in enumerate(task["ground_truth"]):
        prompt = history + turn_messages(task, turn)
        rows.append(
            {
                "id": f"{task['id']}_turn_{turn}",
                "prompt": prompt,
                "tools": json.dumps(task_tools(task, turn)),
                "bfcl_task": json.dumps({**task, "turn": turn}),
            }
        )
        history = prompt
        if calls:
            parsed = [parse_call_string(call) for call in calls]
            tool_calls = [
                {"type": "function", "function": {"name": n, "arguments": _named_arguments(n, a, k)}}
                for n, a, k in parsed
            ]
            history = [*history, {"role": "assistant", "content": "", "tool_calls": tool_calls}]
            for (name, args, kwargs), call in zip(parsed, calls, strict=True):
                history.append({"role": "tool", "name": name, "content": state.execute_string(call)})
    return rows


def _long(task: dict) -> bool:
    return "long_context" in task["category"]


def _history_state(task: dict, turn: int) -> tuple[TaskState, list[str]]:
    """The official instances after the ground truth of the turns before `turn`, and those calls' results."""
    state = TaskState(task["initial_config"], task["involved_classes"], _long(task))
    results = [state.execute_string(call) for calls in task["ground_truth"][:turn] for call in calls]
    return state, results


class BFCLOfficialEnvironment:
    """A TRL environment on BFCL's own classes: every function of the eight classes is a tool (dispatched to the
    task's official instance; a function of a class the task does not involve answers with an error), `reset(**row)`
    rebuilds the task's state at the row's turn from `bfcl_task`. Rows come from `turn_rows`; their `tools` column is
    what the model is shown."""

    def __init__(self):
        self._state: TaskState | None = None
        self.results: list[str] = []
        self.calls: list[str] = []
        self.task: dict | None = None

    def reset(self, **row) -> None:
        task = json.loads(row["bfcl_task"]) if isinstance(row.get("bfcl_task"), str) else row.get("bfcl_task")
        if not isinstance(task, dict):
            raise TypeError(
                "BFCLOfficialEnvironment needs rows with a `bfcl_task` column (gear_trl.envs.bfcl_official.turn_rows)."
            )
        self.task = task
        self._state, self.history_results = _history_state(task, task["turn"])
        self.results, self.calls = [], []

    def _call(self, name: str, arguments: dict) -> str:
        if self._state is None:
            return "Error during execution: the environment was not reset."
        result = self._state.execute(name, arguments)
        self.results.append(result)
        string = call_string(name, arguments, set(involved_functions(self.task)))
        if string is not None:
            self.calls.append(string)
        return result

    @not_a_tool
    def execute(self, call: Any) -> str:
        """Run one `{"name": str, "arguments": dict | JSON string}` call as a tool call; never raises."""
        if not isinstance(call, dict):
            return f"Error during execution: malformed call {call!r}."
        arguments = call.get("arguments")
        if isinstance(arguments, str):
            try:
                arguments = json.loads(arguments) if arguments.strip() else {}
            except ValueError:
                return f"Error during execution: arguments are not JSON: {arguments!r}."
        if arguments is not None and (
            not isinstance(arguments, dict) or not all(isinstance(k, str) for k in arguments)
        ):
            return f"Error during execution: the arguments must be an object, got {arguments!r}."
        return self._call(call.get("name"), arguments or {})

    def state_key(self) -> str:
        return self._state.state_key() if self._state is not None else ""


_TYPES = {"string": str, "integer": int, "float": float, "number": float, "boolean": bool, "array": list, "dict": dict}


def _tool(name: str, doc: dict):
    """A tool method named `name` whose signature and Google-style docstring come from BFCL's function doc, so that
    TRL (and `get_json_schema`) read the same parameters the row's schema shows."""
    properties = doc.get("parameters", {}).get("properties", {})
    required = set(doc.get("parameters", {}).get("required", []))

    def tool(self, **arguments):
        return self._call(name, arguments)

    parameters = [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    ordered = sorted(properties, key=lambda p: p not in required)  # required before optional, as Python needs
    for param in ordered:
        annotation = _TYPES.get(properties[param].get("type"), str)
        default = inspect.Parameter.empty if param in required else None
        parameters.append(
            inspect.Parameter(param, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=annotation)
        )
    tool.__signature__ = inspect.Signature(parameters)
    tool.__annotations__ = {p.name: p.annotation for p in parameters[1:]}
    lines = (
        [" ".join(doc.get("description", name).split()) or name, "", "Args:"]
        if ordered
        else [" ".join(doc.get("description", name).split()) or name]
    )
    for param in ordered:
        description = " ".join(str(properties[param].get("description") or param).split())
        lines.append(f"    {param}: {description}")
    tool.__doc__ = "\n".join(lines)
    tool.__name__ = tool.__qualname__ = name
    tool.__module__ = __name__
    return tool


def _install_tools() -> None:
    try:
        owners = function_owners()
    except UserInputError:  # without bfcl-eval the class has no tools; using it says what to install
        return
    for name, owner in owners.items():
        doc = next(d for d in function_docs(owner) if d["name"] == name)
        setattr(BFCLOfficialEnvironment, name, _tool(name, doc))


_install_tools()


def bfcl_official_turn_reward(completions, bfcl_task=None, environments=None, **kwargs) -> list[float | None]:
    """1.0 when one turn passes BFCL's own checks, else 0.0; None for rows without `bfcl_task`.

    After the model's calls of this turn (the live environment's, or replayed from the completion without one),
    BFCL's `state_checker` compares every instance with the ground truth's after the same turn, and its
    `response_checker` requires the ground truth's results of this turn among the model's results (the earlier
    turns' ground-truth results, which are the rollout's history, and this turn's). A turn whose ground truth is empty
    (miss_func / miss_param) passes when the model calls nothing, as BFCL's irrelevance check asks."""
    from bfcl_eval.eval_checker.multi_turn_eval.multi_turn_checker import response_checker, state_checker

    from .tool_calls import column_value, parse_tool_calls

    rewards: list[float | None] = []
    for i, completion in enumerate(completions):
        raw = column_value(bfcl_task, i) if bfcl_task is not None else None
        if raw is None or raw == "":
            rewards.append(None)
            continue
        try:
            task = json.loads(raw) if isinstance(raw, str) else raw
            turn = task["turn"]
            env = environments[i] if environments is not None and i < len(environments) else None
            if isinstance(env, BFCLOfficialEnvironment) and env.task is not None and env.task.get("id") == task["id"]:
                model, history, results, calls = env._state, env.history_results, env.results, env.calls
            else:
                model, history = _history_state(task, turn)
                results, calls = [], []
                for call in parse_tool_calls(completion):
                    results.append(model.execute(call.get("name"), call.get("arguments")))
                    calls.append(call.get("name"))
            truth = task["ground_truth"][turn]
            if not truth:
                rewards.append(float(not calls))
                continue
            expected, _ = _history_state(task, turn)
            expected_results = [expected.execute_string(call) for call in truth]
            ok = state_checker(model.instances, expected.instances)["valid"]
            ok = ok and response_checker(history + results, expected_results, turn)["valid"]
            rewards.append(float(ok))
        except Exception:  # noqa: BLE001 - a row or completion the checks cannot read scores 0
            rewards.append(0.0)
    return rewards
