"""Agreement of `acebench_accuracy` (gear_trl/rewards/acebench.py) with ACEBench's own evaluation, on generated answers.

    python -m bench.acebench_agreement --acebench /path/to/ACEBench [--rows N] [--json out.json]

For every English row of ACEBench's non-interactive categories (`data_all/data_en/`, `normal_*` and `special_*`),
answers are generated from the row's ground truth: the right one (as ACEBench's prompt asks for it, and written
other ways: JSON literals, spaces, a `<think>` block before it), and wrong ones: each argument left out, given a wrong
value or a wrong type, an extra argument, a wrong function name, a call dropped, duplicated or reordered, no call,
prose around the calls; for the special categories the answer the prompt asks for, its parts missing, other
categories' answers and a call instead. ACEBench's own evaluation functions (`eval_main.normal_single_turn_eval`,
`normal_multi_turn_eval`, `special_eval`, imported from the checkout at run time with their file and spreadsheet
writing switched off) judge each answer alone, and so does ours; the bench prints, per category, how many answers
each counts correct, how many verdicts agree, and every disagreement by kind, and the cases where ACEBench's checker
raises (its whole run would stop there; ours scores 0.0).

The checkout is not part of gear_trl (MIT, github.com/ACEBench/ACEBench); nothing of it is copied here. It needs
pandas (installed with datasets); openpyxl, which it imports only to write spreadsheets, is stood in for if absent.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import subprocess
import sys
import time
import types
from collections import Counter, defaultdict
from typing import Any

from gear_trl.data.acebench import NON_INTERACTIVE_CATEGORIES, read_category
from gear_trl.rewards.acebench import SPECIAL_PHRASES, completion_text, verdict

MODEL_NAME = "agreement-bench"  # without "FC": ACEBench decodes the answer's text, as for a prompted model


def import_acebench(checkout: str) -> types.ModuleType | None:
    """ACEBench's `eval_main`, imported from `checkout`, its result files and spreadsheets switched off; None where
    `checkout` is not importable in this process (`main` then runs itself again with it on `PYTHONPATH`)."""
    if not os.path.isfile(os.path.join(checkout, "eval_main.py")):
        sys.exit(f"error: {checkout!r} is not an ACEBench checkout (no eval_main.py); clone ACEBench/ACEBench.")
    try:
        import openpyxl  # noqa: F401
    except ImportError:  # used only to write spreadsheets, which the bench switches off
        stand_in, styles = types.ModuleType("openpyxl"), types.ModuleType("openpyxl.styles")
        stand_in.Workbook, styles.Alignment, stand_in.styles = object, object, styles
        sys.modules.update({"openpyxl": stand_in, "openpyxl.styles": styles})
    try:
        import eval_main
    except ImportError:
        return None
    if os.path.dirname(os.path.abspath(eval_main.__file__)) != os.path.abspath(checkout):
        sys.exit(f"error: eval_main is imported from {eval_main.__file__}, not from the checkout {checkout!r}.")

    eval_main.save_score_as_json = lambda *args, **kwargs: None
    eval_main.convert_result_to_excel = lambda *args, **kwargs: None
    eval_main.OUTPUT_PATH = "unused"
    return eval_main


def theirs(eval_main: types.ModuleType, raw: dict, answer: dict, text: str, category: str) -> bool | str:
    """ACEBench's verdict on one answer, or "raises" when its evaluation raises."""
    prompt, possible, result = [raw], [answer], [{"id": raw["id"], "result": text}]
    if category.startswith("special"):
        run = eval_main.special_eval
    elif category.startswith("normal_multi_turn"):
        run = eval_main.normal_multi_turn_eval
    else:
        run = eval_main.normal_single_turn_eval
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            return run(result, prompt, possible, category, MODEL_NAME, None) == 1
    except Exception:  # noqa: BLE001 - ACEBench's checker raising is one of the outcomes counted
        return "raises"


# ---------------------------------------------------------------------------------------------------------------------
# Generated answers
# ---------------------------------------------------------------------------------------------------------------------


def _literal(value: Any, json_literals: bool = False) -> str:
    if isinstance(value, bool):
        return ("true" if value else "false") if json_literals else repr(value)
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_literal(k)}: {_literal(v, json_literals)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(_literal(v, json_literals) for v in value) + "]"
    return repr(value)


def _call_text(name: str, arguments: dict, json_literals: bool = False) -> str:
    return f"{name}(" + ", ".join(f"{k}={_literal(v, json_literals)}" for k, v in arguments.items()) + ")"


def _answer(calls: list[tuple[str, dict]], json_literals: bool = False) -> str:
    return "[" + ", ".join(_call_text(name, arguments, json_literals) for name, arguments in calls) + "]"


def _wrong_values(value: Any) -> list[tuple[str, Any]]:
    """(kind, value) perturbations of one argument value: wrong values of its own type and values of other types."""
    if isinstance(value, bool):
        return [("wrong value", not value), ("wrong type", "yes"), ("wrong type", int(value))]
    if isinstance(value, int):
        return [("wrong value", value + 7), ("wrong type", str(value)), ("wrong type", float(value) + 0.5)]
    if isinstance(value, float):
        return [("wrong value", value * 3 + 1), ("wrong type", str(value)), ("wrong type", int(value))]
    if isinstance(value, str):
        return [
            ("wrong value", "zzqx"),
            ("wrong value", value[: len(value) // 2]),
            ("case and separators", value.upper().replace(" ", "_")),
            ("superset string", value + " extra"),
            ("wrong type", 12345),
        ]
    if isinstance(value, list):
        out = [("wrong type", "not a list"), ("list reordered", list(reversed(value)))]
        if value:
            out += [("list item dropped", value[:-1]), ("list item added", value + [value[0]])]
            if isinstance(value[0], dict):
                first = dict(value[0])
                key = next(iter(first), None)
                if key is not None:
                    first[key] = "zzqx"
                    out.append(("object in list changed", [first, *value[1:]]))
        return out
    if isinstance(value, dict):
        out = [("wrong type", "not an object")]
        if value:
            key = next(iter(value))
            changed = dict(value)
            changed[key] = "zzqx" if not isinstance(value[key], dict) else {}
            out += [("object member changed", changed), ("object member dropped", {k: v for k, v in value.items()
                                                                                   if k != key})]  # fmt: skip
        out.append(("object member added", {**value, "zzqx_extra": 1}))
        return out
    return [("wrong type", "zzqx")]


_SOURCE_MARK = "zz-source-mark-zz"
ODD_VALUES = (
    "-5", "+5", "-2.5", "x[0]", "some_name", "true", "None", "...", "f(a=1)", "g()", "(1, 2)", "{1, 2}", "{'k': 'v'}",
    "1+2", "'a'*2", "2**3", "7//2", "'true'", "'false'", "3.0", "[]", "{}", "''", "[1, 'a', True]", "x.y", "f'{x}'",
    "1 if x else 2", "[['a b']]", "[{'k': 1}]", "-x", "not True", "b'x'", "1j",
)  # fmt: skip
"""Argument values as a model might write them, each exercising one path of ACEBench's reader and type check."""


def _strip_index(name: str) -> str:
    import re

    return re.sub(r"_\d+$", "", name)


def normal_answers(ground_truth: Any, functions: Any) -> list[tuple[str, str]]:
    """(kind, answer text) for a normal row."""
    alternatives = ground_truth if isinstance(ground_truth, list) else [ground_truth]
    out: list[tuple[str, str]] = []
    for a, alternative in enumerate(alternatives[:2]):
        if not isinstance(alternative, dict):
            continue
        calls = [(_strip_index(name), dict(args) if isinstance(args, dict) else {}) for name, args in
                 alternative.items()]  # fmt: skip
        right = _answer(calls)
        out += [
            ("right", right),
            ("right, JSON literals", _answer(calls, json_literals=True)),
            ("right, after <think>", f"<think>The user wants {calls[0][0] if calls else 'nothing'}.</think>\n{right}"),
            ("right, no spaces", "".join(right.split())),
            ("right, as a tuple", right[1:-1] + ("," if len(calls) == 1 else "")),
            ("prose around the calls", f"Here are the calls: {right}"),
            ("in a code fence", f"```python\n{right}\n```"),
        ]
        if a:
            continue
        out += [("no call", "I cannot help with that."), ("empty list", "[]")]
        names = [f.get("name") for f in functions if isinstance(f, dict)] if isinstance(functions, list) else []
        for i, (name, args) in enumerate(calls):

            def with_call(new_name: str, new_args: dict, i: int = i, calls: list = calls) -> str:
                return _answer([*calls[:i], (new_name, new_args), *calls[i + 1 :]])

            out.append(("wrong function name", with_call(name + "Zz", args)))
            other = next((n for n in names if isinstance(n, str) and n != name), None)
            if other:
                out.append(("another function of the row", with_call(other, args)))
            for key, value in args.items():
                out.append(("argument left out", with_call(name, {k: v for k, v in args.items() if k != key})))
                for kind, wrong in _wrong_values(value):
                    out.append((kind, with_call(name, {**args, key: wrong})))
            out.append(("made-up extra argument", with_call(name, {**args, "zzqx_extra": "x"})))
            if args:  # values of every kind the reader knows, written as source, in place of the first argument
                key = next(iter(args))
                for source in ODD_VALUES:
                    answer = with_call(name, {**args, key: _SOURCE_MARK})
                    out.append((f"odd value {source}", answer.replace(repr(_SOURCE_MARK), source)))
            function = next((f for f in functions if isinstance(f, dict) and f.get("name") == name), None) if \
                isinstance(functions, list) else None  # fmt: skip
            properties = function.get("parameters", {}).get("properties", {}) if isinstance(function, dict) else {}
            unused = [p for p in properties if p not in args] if isinstance(properties, dict) else []
            if unused:
                out.append(("declared extra argument", with_call(name, {**args, unused[0]: "x"})))
            out.append(("positional argument", with_call(name, args).replace("(", "('zzqx', ", 1) if args else
                        with_call(name, args)))  # fmt: skip
        if len(calls) > 1:
            out += [
                ("call dropped", _answer(calls[1:])),
                ("calls reordered", _answer(list(reversed(calls)))),
            ]
        if calls:
            out.append(("call duplicated", _answer([*calls, calls[0]])))
        out += [(f"special answer: {c}", f'["{p}"]') for c, p in SPECIAL_PHRASES.items()]
    return out


def special_answers(ground_truth: Any, category: str, functions: Any) -> list[tuple[str, str]]:
    """(kind, answer text) for a special row."""
    irrelevant = '["Due to the limitations of the function, I cannot solve this problem."]'
    call = "[SomeApi(key='value')]"
    out = [("a call", call), ("no answer", ""), ("irrelevant answer", irrelevant)]
    if category == "special_irrelevant":
        return out + [
            ("irrelevant, lower-cased", irrelevant.lower()),
            ("irrelevant, own words", "I can't do that with these functions."),
            ("irrelevant, after a call", call + " " + irrelevant),
            ("irrelevant, after <think>", "<think>the limitations of the function</think>I cannot."),
        ]
    if not isinstance(ground_truth, dict):
        return out
    if category == "special_incomplete":
        for name, values in ground_truth.items():
            values = [v for v in values if isinstance(v, str)] if isinstance(values, list) else []
            exact = f'["Missing necessary parameters ({",".join(values)}) for the api ({name})"]'
            tidy = f'["Missing necessary parameters ({", ".join(v.strip() for v in values)}) for the api ({name})"]'
            out += [
                ("the asked-for answer, values as stored", exact),
                ("the asked-for answer, values tidied", tidy),
                ("api name left out", exact.replace(f"({name})", "(it)")),
                ("phrase lower-cased", exact.replace("Missing", "missing")),
                (
                    "error-param answer",
                    f'["There is incorrect value ({",".join(values)}) for the parameters ({name})"]',
                ),
            ]
            if values:
                out.append(("one parameter left out", exact.replace(values[-1], "")))
        return out
    for name, values in ground_truth.items():
        values = [str(v) for v in values] if isinstance(values, list) else [str(values)]
        exact = f'["There is incorrect value ({", ".join(values)}) for the parameters ({name}) in the conversation history."]'
        out += [
            ("the asked-for answer", exact),
            ("wrong value named", exact.replace(values[0], "zzqx") if values and values[0] else exact + "zzqx"),
            ("phrase changed", exact.replace("There is incorrect value", "There is a wrong value")),
            ("parameter name left out", exact.replace(f"({name})", "(it)")),
            ("incomplete answer", f'["Missing necessary parameters ({name}) for the api (Api)"]'),
        ]
    return out


def _in_subprocess(args, argv: list[str]) -> dict:
    """`main` run again as `python -m bench.acebench_agreement` with the checkout first on `PYTHONPATH` (and this
    repository after it), its figures read back from a `--json` file."""
    import tempfile

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    with tempfile.TemporaryDirectory() as tmp:
        out = args.json or os.path.join(tmp, "figures.json")
        rest = [a for a in argv if a != "--json" and a != args.json]
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(
            filter(None, [os.path.abspath(args.acebench), root, os.environ.get("PYTHONPATH")])
        )
        subprocess.run([sys.executable, "-m", "bench.acebench_agreement", *rest, "--json", out], cwd=root, env=env,
                       check=True)  # fmt: skip
        with open(out, encoding="utf-8") as handle:
            return json.load(handle)


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--acebench", required=True, help="An ACEBench checkout (github.com/ACEBench/ACEBench).")
    parser.add_argument("--rows", type=int, default=None, help="The first N rows of each category (default: all).")
    parser.add_argument("--json", default=None, help="Write the figures to this file as JSON.")
    args = parser.parse_args(argv)

    eval_main = import_acebench(args.acebench)
    if eval_main is None:  # ACEBench's modules import each other by bare name: run again with the checkout importable
        return _in_subprocess(args, argv if argv is not None else sys.argv[1:])

    def commit(path: str) -> str:
        found = subprocess.run(["git", "-C", path, "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                               check=False)  # fmt: skip
        return found.stdout.strip() or "unknown"

    where = {"acebench": commit(args.acebench), "gear_trl": commit(os.path.dirname(os.path.abspath(__file__)))}
    print(f"ACEBench checkout at {where['acebench']}, gear_trl at {where['gear_trl']}")
    start = time.perf_counter()
    table: dict[str, Counter] = {}
    disagreements: dict[tuple[str, str], list] = defaultdict(list)
    raises: Counter = Counter()
    by_kind: dict[str, Counter] = defaultdict(Counter)
    for category in NON_INTERACTIVE_CATEGORIES:
        counts = table.setdefault(category, Counter())
        for raw, answer in read_category(args.acebench, category, limit=args.rows):
            ground_truth, functions = answer["ground_truth"], raw["function"]
            if category.startswith("special"):
                answers = special_answers(ground_truth, category, functions)
            else:
                answers = normal_answers(ground_truth, functions)
            counts["rows"] += 1
            for kind, text in answers:
                ours, why = verdict(text, ground_truth, functions, category)
                # ACEBench's runner for reasoning models hands its checker the answer after `</think>`; ours removes
                # reasoning from every answer. The verdict on the raw text is counted apart, as the difference by design.
                their = theirs(eval_main, raw, answer, completion_text(text), category)
                counts["cases"] += 1
                if "<think>" in text and theirs(eval_main, raw, answer, text, category) != their:
                    counts["differ on raw <think> text"] += 1
                if their == "raises":
                    counts["acebench raises"] += 1
                    raises[(category, why)] += 1
                    continue
                counts["acebench correct"] += their
                group = "special" if category.startswith("special") else "normal"
                by_kind[f"{group}: {kind}"]["cases"] += 1
                by_kind[f"{group}: {kind}"]["acebench correct"] += their
                counts["ours correct"] += ours
                if ours == their:
                    counts["agree"] += 1
                else:
                    counts["disagree"] += 1
                    disagreements[(category, kind)].append({"id": raw["id"], "answer": text, "acebench": their,
                                                            "ours": ours, "why": why})  # fmt: skip
    seconds = time.perf_counter() - start

    header = f"{'category':<40} {'rows':>5} {'cases':>7} {'ACE ok':>7} {'ours ok':>7} {'agree':>7} {'differ':>6} {'raises':>6}"
    print(header)
    total = Counter()
    for category, counts in table.items():
        total.update(counts)
        print(
            f"{category:<40} {counts['rows']:>5} {counts['cases']:>7} {counts['acebench correct']:>7} "
            f"{counts['ours correct']:>7} {counts['agree']:>7} {counts['disagree']:>6} {counts['acebench raises']:>6}"
        )
    print(
        f"{'all':<40} {total['rows']:>5} {total['cases']:>7} {total['acebench correct']:>7} {total['ours correct']:>7} "
        f"{total['agree']:>7} {total['disagree']:>6} {total['acebench raises']:>6}"
    )
    judged = total["agree"] + total["disagree"]
    print(
        f"{total['differ on raw <think> text']} answers with a <think> block that ACEBench's runner for local models "
        "would hand its checker unstripped, judged otherwise there (by design, see gear_trl/rewards/acebench.py)"
    )
    print(f"agreement {total['agree']}/{judged} = {total['agree'] / max(judged, 1):.4%} of the cases ACEBench judges; "
          f"{total['acebench raises']} cases where ACEBench's checker raises ({seconds:.0f} s)")  # fmt: skip
    print("answers by kind (how many ACEBench counts correct):")
    for kind, counts in sorted(by_kind.items()):
        print(f"  {kind:<58} {counts['acebench correct']:>5} / {counts['cases']:>5}")
    for (category, why), n in sorted(raises.items()):
        print(f"  ACEBench raises: {category}: {n} (ours: {why or 'correct'})")
    for (category, kind), cases in sorted(disagreements.items()):
        example = cases[0]
        print(f"  differ: {category} / {kind}: {len(cases)}, e.g. {example['id']}: ACEBench {example['acebench']}, "
              f"ours {example['ours']} ({example['why']}): {example['answer'][:160]!r}")  # fmt: skip
    figures = {
        "categories": {c: dict(v) for c, v in table.items()},
        "total": dict(total),
        "by_kind": {k: dict(v) for k, v in by_kind.items()},
        "raises": {f"{c}/{w}": n for (c, w), n in raises.items()},
        "disagreements": {f"{c}/{k}": v for (c, k), v in disagreements.items()},
        "seconds": seconds,
        "commits": where,
    }
    if args.json:
        with open(args.json, "w", encoding="utf-8") as handle:
            json.dump(figures, handle, indent=1, ensure_ascii=False, default=str)
    return figures


if __name__ == "__main__":
    main()
