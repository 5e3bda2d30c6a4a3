"""ACEBench's non-interactive categories scored as ACEBench's own evaluation scores them, in TRL's reward signature.

    acebench_accuracy(completions, ground_truth, functions, category, **kwargs) -> list[float | None]

ACEBench (Chen et al. 2025, arXiv 2501.12851; github.com/ACEBench/ACEBench, MIT) shows the functions in the system
prompt and asks for the calls as text, a Python-style list `[ApiName(key1='value1', key2=2)]`. The rows carry the
columns `data/scripts/make_acebench_data.py` writes (`data/README.md`, "ACEBench"): `ground_truth`, ACEBench's
answer as a JSON string; `functions`, the row's function documents as a JSON string; `category`, ACEBench's name
of the row's file (`normal_atom_bool`, `special_incomplete`, ...). A completion scores 1.0 or 0.0; rows without a
category or ground truth get None; nothing a model writes makes this raise.

This module is written from a reading of ACEBench's `eval_main.py` and `model_eval/checker.py` (commit e6db74b),
not copied; `bench/acebench_agreement.py` scores generated answers for every English row with both and counts the
agreement (docs/evaluation.md has the figures). The verdict is ACEBench's, quirks included, so that a score here is
comparable with its leaderboard:

Normal categories (`normal_*`: single-turn, one turn of a multi-turn dialogue with its history, similar API,
preference, atom):

- Every whitespace character of the completion is removed, then the rest must parse as a Python list (or tuple, or
  set) of calls; a call's keyword arguments are its arguments (positional ones are dropped). Literals, lists, dicts
  and tuples are read as Python reads them, a bare name as its own text (`true` is the string "true"), `x[0]` as
  its source text, `-5` as a negative number, a nested call as `{name: {arguments}}`; anything else (an attribute,
  an f-string, a comparison) makes the whole answer unreadable. Because the spaces go first, `'New York'` is read as
  `'NewYork'`. ACEBench evaluates an arithmetic expression (`1+2`) with Python's `eval`; here only arithmetic on
  literals is evaluated (a size-bounded `**` and `*`), never code.
- The answer has as many calls as the ground truth, with the same names the same number of times (`_1`, `_2`
  suffixes of the ground truth's keys dropped). Each expected call must be satisfied by some call of its name; two
  expected calls may be satisfied by the same call.
- A call: every parameter the function marks required is given; every given parameter is both in the function's
  `properties` and in the expected call (an expected parameter left out is not checked). A parameter's value must
  have the declared type (`number` is read as an integer; an integer passes for a `float`; `"true"`/`"false"` pass
  for a boolean), or the type of the expected value, or equal it; in the second and third cases (ACEBench's
  "variable") the value is not compared at all. Otherwise strings pass when the expected one, lower-cased without
  spaces and `, . / - _ * ^`, is a substring of the given one so normalized; arrays compare item by item after
  normalizing string items, in order; objects must have as many keys as the expected one and each value must hold
  the expected value's text (`str()`, strings normalized) as a substring, nested objects key by key; arrays of
  objects object by object. Numbers and booleans are never compared with the expected value (a wrong number passes).
- The function document used for an expected call is the first whose name is contained in the expected name.

Special categories (the completion's text as written):

- `special_incomplete`: the text contains "Missing necessary parameters", and for each expected function its name
  and every missing parameter's name (as ACEBench stores it, stray spaces included).
- `special_error_param`: the text contains "There is incorrect value" and every wrong value.
- `special_irrelevant`: the text contains "the limitations of the function".

Differences from ACEBench's evaluation, kept on purpose:

- Reasoning in `<think>...</think>` (or before a lone `</think>`) is removed first: ACEBench's runner for local
  models does not (a Qwen3 answer after its thinking fails to parse there), its runner for DeepSeek-R1 does.
- Where ACEBench's checker raises (a function document without `parameters`, `required` or a parameter's `type`, a
  type name it does not know, a non-string among the expected parameter names of a special row), its whole run stops;
  here that completion scores 0.0. The agreement bench counts these cases apart.
- A conversation of messages is read as the text of its assistant messages, joined.
"""

from __future__ import annotations

import ast
import json
import re
import warnings
from collections import Counter
from typing import Any

# ---------------------------------------------------------------------------------------------------------------------
# Text of a completion
# ---------------------------------------------------------------------------------------------------------------------

_THINK_BLOCK = re.compile(r"<think>.*?(?:</think>|\Z)", re.DOTALL)


def completion_text(completion: Any) -> str:
    """The text a completion answers with: a string as is, a message list as its assistant messages' text, with any
    `<think>` reasoning removed. Anything else is the empty string."""
    if isinstance(completion, dict):
        completion = [completion]
    if isinstance(completion, (list, tuple)):
        parts = []
        for message in completion:
            if isinstance(message, str):
                parts.append(message)
            elif isinstance(message, dict) and message.get("role", "assistant") == "assistant":
                content = message.get("content")
                if isinstance(content, list):
                    content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
                parts.append(content if isinstance(content, str) else "")
        completion = "\n".join(parts)
    if not isinstance(completion, str):
        return ""
    if "</think>" in completion and "<think>" not in completion:
        completion = completion.rsplit("</think>", 1)[1]
    return _THINK_BLOCK.sub("", completion)


# ---------------------------------------------------------------------------------------------------------------------
# Reading the calls
# ---------------------------------------------------------------------------------------------------------------------


class Unreadable(Exception):
    """The answer does not parse as a list of calls (ACEBench's `wrong_output_format`)."""


class AceBenchRaises(Exception):
    """A case on which ACEBench's checker raises instead of giving a verdict; scored 0.0 here."""


_MAX_POWER_BITS = 64_000  # past Python's 4300-digit int-to-text limit: no argument anyone means
_MAX_REPEAT = 100_000


def _arithmetic(node: ast.AST) -> Any:
    # The part of Python's `eval` that ACEBench needs for `a + b` arguments: arithmetic on literal numbers and string
    # concatenation or repetition, bounded so that `9**9**9` cannot stall the scorer.
    if isinstance(node, ast.Constant) and type(node.value) in (int, float, complex, str, bytes, bool):
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        value = _arithmetic(node.operand)
        if isinstance(value, str):
            raise Unreadable("unary sign on a string")
        return -value if isinstance(node.op, ast.USub) else +value
    if not isinstance(node, ast.BinOp):
        raise Unreadable(f"{type(node).__name__} in an expression")
    left, right = _arithmetic(node.left), _arithmetic(node.right)
    try:
        if isinstance(node.op, ast.Pow):
            if isinstance(left, (str, bytes)) or isinstance(right, (str, bytes)):
                raise Unreadable("** on a string")
            big = isinstance(left, int) and isinstance(right, int) and right > 0 and abs(left) > 1
            if big and right * abs(left).bit_length() > _MAX_POWER_BITS:
                raise Unreadable("power too large")
            return left**right
        if isinstance(node.op, ast.Mult) and (isinstance(left, (str, bytes)) or isinstance(right, (str, bytes))):
            count = right if isinstance(left, (str, bytes)) else left
            text = left if isinstance(left, (str, bytes)) else right
            if isinstance(count, int) and count * len(text) > _MAX_REPEAT:
                raise Unreadable("repetition too long")
        operators = {
            ast.Add: lambda a, b: a + b,
            ast.Sub: lambda a, b: a - b,
            ast.Mult: lambda a, b: a * b,
            ast.Div: lambda a, b: a / b,
            ast.FloorDiv: lambda a, b: a // b,
            ast.Mod: lambda a, b: a % b,
        }
        operator = operators.get(type(node.op))
        if operator is None or (isinstance(node.op, ast.Mod) and isinstance(left, (str, bytes))):
            raise Unreadable(f"operator {type(node.op).__name__}")
        result = operator(left, right)
        if isinstance(result, int) and result.bit_length() > _MAX_POWER_BITS:  # a chain of products
            raise Unreadable("number too large")
        return result
    except (ArithmeticError, TypeError, ValueError) as err:
        raise Unreadable(str(err)) from err


def _call_name(node: ast.Call) -> str:
    parts = []
    func = node.func
    while isinstance(func, ast.Attribute):
        parts.append(func.attr)
        func = func.value
    if isinstance(func, ast.Name):
        parts.append(func.id)
    return ".".join(reversed(parts))


def _call(node: ast.Call) -> dict:
    return {_call_name(node): {keyword.arg: _value(keyword.value) for keyword in node.keywords}}


def _value(node: ast.AST) -> Any:
    if isinstance(node, ast.Constant):
        return "..." if node.value is Ellipsis else node.value
    if isinstance(node, ast.UnaryOp):
        # ACEBench negates the operand's literal whatever the operator (`+5` reads as -5); only a literal number
        # can be negated.
        operand = node.operand
        if not isinstance(operand, ast.Constant) or type(operand.value) not in (int, float, complex, bool):
            raise Unreadable("sign on something other than a number")
        return -operand.value
    if isinstance(node, ast.List):
        return [_value(item) for item in node.elts]
    if isinstance(node, ast.Tuple):
        return tuple(_value(item) for item in node.elts)
    if isinstance(node, ast.Dict):
        result = {}
        for key, item in zip(node.keys, node.values, strict=True):
            if key is None:
                raise Unreadable("** in a dict")
            key = _value(key)
            try:
                result[key] = _value(item)
            except TypeError as err:  # an unhashable key
                raise Unreadable(str(err)) from err
        return result
    if isinstance(node, ast.BinOp):
        return _arithmetic(node)
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Call):
        return _call(node)
    if isinstance(node, ast.Subscript):
        return ast.unparse(node.value) + "[" + ast.unparse(node.slice) + "]"
    raise Unreadable(f"{type(node).__name__} as a value")


def parse_calls(text: str) -> list[dict]:
    """The calls of an answer as ACEBench reads them, `[{name: {argument: value}}]`; raises `Unreadable` when the
    answer is not a list of calls once every whitespace character is removed."""
    squeezed = "".join(text.split())
    try:
        with warnings.catch_warnings():  # `1if` and the like, which squeezing makes: no warning per model answer
            warnings.simplefilter("ignore", SyntaxWarning)
            tree = ast.parse(squeezed, mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError, OverflowError) as err:
        raise Unreadable(f"{type(err).__name__}") from err
    if not isinstance(tree.body, (ast.List, ast.Tuple, ast.Set)):
        raise Unreadable("not a list of calls")
    calls = []
    for element in tree.body.elts:
        if not isinstance(element, ast.Call):
            raise Unreadable("an element that is not a call")
        try:
            calls.append(_call(element))
        except RecursionError as err:
            raise Unreadable("nested too deeply") from err
    return calls


# ---------------------------------------------------------------------------------------------------------------------
# Checking one call
# ---------------------------------------------------------------------------------------------------------------------

# The Python type ACEBench's checker wants for each type name a function document may use; `number` is an integer
# there, and `enum` a type no value has.
TYPE_OF = {
    "string": str,
    "integer": int,
    "float": float,
    "boolean": bool,
    "array": list,
    "tuple": list,
    "dict": dict,
    "any": str,
    "list": list,
    "object": dict,
    "objectArray": list,
    "list(string)": list,
    "list(enum)": list,
    "int": int,
    "enum": enumerate,
    "number": int,
}
# The type names whose items (or members) have a type of their own.
CONTAINER_TYPES = ("array", "tuple", "list(string)", "list(enum)", "object", "objectArray")

_NOISE = re.compile(r"[ ,./\-_*^]")


def normalize(text: str) -> str:
    """A string as ACEBench compares it: spaces and `, . / - _ * ^` removed, lower-cased, `'` read as `"`."""
    return _NOISE.sub("", text).lower().replace("'", '"')


def _type_of(name: Any) -> type:
    try:
        return TYPE_OF[name]
    except (KeyError, TypeError) as err:
        raise AceBenchRaises(f"unknown type {name!r}") from err


def _as_bool_text(value: Any) -> Any:
    if isinstance(value, str) and value in ("true", "false"):
        return value == "true"
    return value


def _type_passes(value: Any, expected: Any, kind: type, item_kind: type | None) -> tuple[bool, bool]:
    """(passes, is_variable): whether `value` has the declared type `kind` (items `item_kind`), the expected value's
    type, or equals it; `is_variable` when the expected value's type is not the declared one, or the value passed by
    the expected value's type or equality (its value is then not compared)."""
    expected_kind = None if expected == "" else type(expected)
    is_variable = expected_kind is not None and expected_kind != kind
    value = _as_bool_text(value)
    passes = True
    if type(value) is kind:
        if item_kind is None:
            return True, is_variable
        try:
            members = iter(expected)
        except TypeError as err:
            raise AceBenchRaises("an expected value that is not a collection for a container type") from err
        for member in members:
            # Only an expected value made of arrays has its items' types checked; any other member passes at once.
            if type(member) is not list or all(_type_passes(item, member, item_kind, None)[0] for item in value):
                return True, is_variable
        passes = False
    if expected_kind is not None and (type(value) is expected_kind or expected == value):
        return passes, True
    return False, is_variable


def _object_holds(value: Any, expected: Any) -> bool:
    # Same number of keys; each value holds the expected value's text; nested objects key by key.
    if not isinstance(value, dict):
        return False
    if not isinstance(expected, dict):
        raise AceBenchRaises("an expected object member that is not an object")
    if len(value) != len(expected):
        return False
    for key, item in value.items():
        item = _as_bool_text(item)
        if key not in expected:
            return False
        wanted = expected[key]
        if isinstance(wanted, dict):
            if not _object_holds(item, wanted):
                return False
            continue
        item = normalize(item) if type(item) is str else item
        wanted = normalize(wanted) if type(wanted) is str else wanted
        if str(wanted) not in str(item):
            return False
    return True


def _normalized_items(items: Any) -> list:
    return [normalize(item) if type(item) is str else item for item in items]


def _parameter_holds(param_schema: Any, value: Any, expected: Any) -> bool:
    if not isinstance(param_schema, dict) or "type" not in param_schema:
        raise AceBenchRaises("a parameter without a type")
    type_name = param_schema["type"]
    kind = _type_of(type_name)
    item_kind = None
    if isinstance(type_name, str) and type_name in CONTAINER_TYPES:
        items = param_schema.get("items")
        if isinstance(items, dict) and "type" in items:
            item_type = items["type"]
        else:
            item_type = "string" if "string" in type_name else "enum" if "enum" in type_name else "dict"
        item_kind = _type_of(item_type)
    if type_name == "tuple" and type(value) is tuple:
        value = list(value)
    if type_name == "float" and type(value) is int:
        value = float(value)
    passes, is_variable = _type_passes(value, expected, kind, item_kind)
    if not passes:
        return False
    if is_variable:
        return True
    if kind is dict:
        return _object_holds(value, expected)
    if kind is list and item_kind is dict:
        if type_name == "objectArray" and len(value) != len(expected):
            return False
        if type_name == "objectArray" and value:
            raise AceBenchRaises("objectArray")
        return len(value) == len(expected) and all(_object_holds(v, e) for v, e in zip(value, expected))
    if kind is str:
        return normalize(expected) in normalize(value)
    if kind is list:
        return _normalized_items(value) == _normalized_items(expected)
    return True  # numbers and booleans: the type is all ACEBench checks


def call_holds(function: Any, call: dict, expected_name: str, expected: dict) -> bool:
    """Whether one parsed call `{name: {argument: value}}` satisfies the expected call `expected_name(**expected)`,
    checked against the function document `function` (ACEBench's `simple_function_checker`)."""
    ((name, arguments),) = call.items()
    try:
        parameters = function["parameters"]
        declared_name = function["name"]
    except (KeyError, TypeError, IndexError) as err:
        raise AceBenchRaises("a function document without parameters") from err
    if arguments == {} and parameters == {}:
        return True
    if arguments == {} or parameters == {}:
        return False
    try:
        properties = parameters["properties"]
    except (KeyError, TypeError) as err:
        raise AceBenchRaises("parameters without properties") from err
    if expected == properties:
        return True
    if expected == {}:
        return False
    if declared_name != name:
        return False
    try:
        required = parameters["required"]
    except (KeyError, TypeError) as err:
        raise AceBenchRaises("parameters without required") from err
    if any(param not in arguments for param in required):
        return False
    for param, value in arguments.items():
        if param not in properties or param not in expected:
            return False
        if not _parameter_holds(properties[param], value, expected[param]):
            return False
    return True


# ---------------------------------------------------------------------------------------------------------------------
# Checking an answer
# ---------------------------------------------------------------------------------------------------------------------

_INDEX_SUFFIX = re.compile(r"_\d+$")


def _function_for(functions: Any, expected_name: str) -> Any:
    if not isinstance(functions, list):
        return functions
    for function in functions:
        try:
            if function["name"] in expected_name:
                return function
        except (KeyError, TypeError) as err:
            raise AceBenchRaises("a function document without a name") from err
    return None


def calls_hold(calls: list[dict], expected_calls: Any, functions: Any) -> bool:
    """Whether parsed `calls` answer one ground-truth alternative `{name: {param: value}}` (ACEBench's
    `normal_checker`)."""
    if not isinstance(expected_calls, dict):
        raise AceBenchRaises("a ground truth that is not an object")
    if len(calls) != len(expected_calls):
        return False
    expected = [(key, _INDEX_SUFFIX.sub("", key), params) for key, params in expected_calls.items()]
    if Counter(next(iter(call)) for call in calls) != Counter(name for _, name, _ in expected):
        return False
    for key, name, params in expected:
        function = _function_for(functions, key)
        if not any(next(iter(call)) == name and call_holds(function, call, name, params) for call in calls):
            return False
    return True


SPECIAL_PHRASES = {
    "special_incomplete": "Missing necessary parameters",
    "special_error_param": "There is incorrect value",
    "special_irrelevant": "the limitations of the function",
}
"""The phrase ACEBench's checker looks for in the answer of each special category."""


def _special_holds(text: str, ground_truth: Any, category: str) -> bool:
    # Every expected entry is checked, none skipped after a failure, so that a value ACEBench cannot look for
    # (a number) is found wherever ACEBench would meet it.
    if "incomplete" in category:
        phrase, need_name = SPECIAL_PHRASES["special_incomplete"], True
    elif "error" in category:
        phrase, need_name = SPECIAL_PHRASES["special_error_param"], False
    elif "irrelevant" in category:
        return SPECIAL_PHRASES["special_irrelevant"] in text
    else:
        return True
    if not isinstance(ground_truth, dict):
        raise AceBenchRaises("a special ground truth that is not an object")
    holds = True
    for name, values in ground_truth.items():
        if phrase not in text or (need_name and name not in text):
            holds = False
            continue
        try:
            for value in values:
                holds = holds and value in text
                if not isinstance(value, str):
                    raise TypeError(value)
        except TypeError as err:
            raise AceBenchRaises("a non-string among the expected values") from err
    return holds


def _loaded(value: Any) -> Any:
    if isinstance(value, str):
        try:
            return json.loads(value)
        except (ValueError, RecursionError):
            return value
    return value


def verdict(completion: Any, ground_truth: Any, functions: Any, category: str) -> tuple[bool, str]:
    """(correct, why) for one completion: `why` is "" when correct, else "unreadable", "wrong" or "acebench raises"
    (a case ACEBench's checker cannot judge). `ground_truth` and `functions` may be JSON strings."""
    text = completion_text(completion)
    ground_truth, functions = _loaded(ground_truth), _loaded(functions)
    try:
        if category.startswith("special"):
            return (True, "") if _special_holds(text, ground_truth, category) else (False, "wrong")
        try:
            calls = parse_calls(text)
        except Unreadable:
            return False, "unreadable"
        alternatives = ground_truth if isinstance(ground_truth, list) else [ground_truth]
        for alternative in alternatives:
            if calls_hold(calls, alternative, functions):
                return True, ""
        return False, "wrong"
    except AceBenchRaises:
        return False, "acebench raises"
    except (RecursionError, MemoryError):
        return False, "unreadable"
    except Exception:  # noqa: BLE001 - model output never makes a reward raise; the bench counts these apart
        return False, "checker error"


def acebench_accuracy(
    completions: list[Any], ground_truth: list[Any], functions: list[Any], category: list[Any], **kwargs: Any
) -> list[float | None]:
    """1.0 for each completion ACEBench's checker would count correct for its row, else 0.0 (see the module
    docstring); None for a row without a `category` or `ground_truth`."""
    rewards: list[float | None] = []
    for completion, answer, row_functions, row_category in zip(
        completions, ground_truth, functions, category, strict=True
    ):
        if not isinstance(row_category, str) or answer is None or answer == "":
            rewards.append(None)
            continue
        rewards.append(1.0 if verdict(completion, answer, row_functions, row_category)[0] else 0.0)
    return rewards


def by_dialogue(report: dict, dialogues: list[str]) -> dict:
    """An evaluation report (`gear_trl.evaluate`'s) with ACEBench's multi-turn figures: each row is one turn of the
    dialogue `dialogues[row]`, and ACEBench counts a dialogue correct when every turn of it is (`accuracy`, also
    under `avg@k`, over dialogues and samples), its `process_accuracy` the mean over dialogues of the fraction of
    turns correct; the mean over turns stays as `turn_accuracy` (and pass@k, when sampled, is per turn). A row of a
    single-turn category is its own dialogue, so there the figures do not change.
    """
    names = list(report.get("rewards") or {})
    turns: dict[tuple[str, int], list[bool]] = {}
    for sample in report["per_sample"]:
        value = sample["rewards"].get(names[0]) if names else None
        if value is not None:
            key = (dialogues[sample["index"]], sample["sample"])
            turns.setdefault(key, []).append(value >= 1.0)
    if not turns:
        return report
    k = report["num_samples"]
    report["turn_accuracy"] = report["accuracy"]
    report["accuracy"] = report[f"avg@{k}"] = sum(all(t) for t in turns.values()) / len(turns)
    report["process_accuracy"] = sum(sum(t) / len(t) for t in turns.values()) / len(turns)
    report["dialogues"] = len({dialogue for dialogue, _ in turns})
    return report


__all__ = [
    "SPECIAL_PHRASES",
    "acebench_accuracy",
    "by_dialogue",
    "call_holds",
    "calls_hold",
    "completion_text",
    "normalize",
    "parse_calls",
    "verdict",
]
