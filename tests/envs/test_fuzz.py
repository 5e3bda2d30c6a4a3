"""Property-based fuzzing of what a policy writes: the tool-call parser, every environment, every registered reward and
the rollout loop. Nothing may raise: tool errors come back to the model as text and are counted (`tools/error_rate`),
unparseable tool calls are read as plain text and counted (`tools/parse_failures`), rewards return a number or None.

Each property runs `GEAR_FUZZ_EXAMPLES` examples (default 25, the rollout loop a fifth of that, to keep CI short);
`bench/fuzz.py` runs them with many more.
"""

from __future__ import annotations

import inspect
import json
import math
import os
from functools import cache

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gear_trl.envs import API_CLASSES, ENVIRONMENTS, FUNCTION_OWNERS, BFCLEnvironment, Calculator, tool_names
from gear_trl.envs.bfcl_official import BFCLOfficialEnvironment, function_owners, load_tasks, turn_rows
from gear_trl.envs.rollout import encodable_text, harden_response_parser, tool_stats
from gear_trl.envs.tool_calls import parse_text_tool_calls
from gear_trl.rewards import REWARD_FUNCS
from gear_trl.rewards.bfcl_ast import load_rows
from gear_trl.rewards.guard import guard_reward_func

EXAMPLES = int(os.environ.get("GEAR_FUZZ_EXAMPLES", "25"))
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example],
    derandomize=os.environ.get("GEAR_FUZZ_RANDOM") is None,  # CI: the same cases every run
)
MB = 1 << 20

# --- what a policy can write --------------------------------------------------------------------------------------

ENVIRONMENT_CLASSES = {
    "calculator": Calculator,
    "bfcl": BFCLEnvironment,
    "bfcl_official": BFCLOfficialEnvironment,
    **API_CLASSES,
}
TOOL_NAMES = sorted({*FUNCTION_OWNERS, *tool_names(Calculator), *function_owners()})
PARAMETER_NAMES = sorted(
    {
        name
        for cls in (Calculator, *API_CLASSES.values())
        for tool in tool_names(cls)
        for name in inspect.signature(getattr(cls, tool)).parameters
        if name != "self"
    }
)

# text with lone surrogates: a model writes them with JSON escapes ("\ud800"), which json.loads decodes
any_text = st.text(st.characters(exclude_categories=()), max_size=16)
scalars = st.none() | st.booleans() | st.integers() | st.integers(-(10**30), 10**30) | st.floats() | any_text
json_values = st.recursive(
    scalars, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(any_text, inner, max_size=4), max_leaves=10
)
names = st.sampled_from(TOOL_NAMES) | any_text | st.sampled_from(["__init__", "reset", "state", "execute", "_state"])
arguments = (
    st.dictionaries(st.sampled_from(PARAMETER_NAMES) | any_text, json_values, max_size=4)
    | json_values
    | st.just(MB).map(lambda n: {"a": "x" * n, "file_name": "y" * n, "content": "z" * n})
)
calls = st.fixed_dictionaries({"name": names | scalars, "arguments": arguments}) | json_values


def _nested(depth: int) -> str:
    return '{"name": "add", "arguments": ' + '{"a": ' * depth + "1" + "}" * depth + "}"


def _block(body: str, cut: int | None, closed: bool) -> str:
    body = body if cut is None else body[:cut]
    return "<tool_call>\n" + body + ("\n</tool_call>" if closed else "")


call_bodies = (
    calls.map(json.dumps)  # ensure_ascii: surrogates stay escapes, as in a model's text
    | st.integers(50, 5000).map(_nested)
    | st.text(max_size=40)
    | st.sampled_from(['{"name": "add"', "[1, 2]", "null", '"add"', '{"name": "add", "arguments": {"a": NaN}}'])
)
blocks = st.builds(_block, call_bodies, st.none() | st.integers(0, 60), st.booleans())


def _completion_text(parts: list[str], many: int) -> str:
    return "".join(parts) + '<tool_call>\n{"name": "add", "arguments": {"a": 1, "b": 2}}\n</tool_call>' * many


completion_texts = st.builds(
    _completion_text,
    st.lists(
        blocks | st.text(max_size=40) | st.sampled_from(["<think>", "</think>", "\\boxed{3}", "\\boxed{"]), max_size=5
    ),
    st.sampled_from([0, 0, 0, 1, 3000]),
) | st.binary(max_size=64).map(lambda raw: raw.decode("utf-8", "surrogateescape"))
"""Adversarial assistant text: random text, tool-call blocks with malformed, truncated, deeply nested or wrongly typed
JSON, unknown tool names, non-UTF-8 bytes, thousands of calls in one turn."""


# --- the tool-call parser -----------------------------------------------------------------------------------------


@cache
def tokenizer():
    from transformers import AutoTokenizer
    from trl.chat_template_utils import add_response_schema

    tok = add_response_schema(AutoTokenizer.from_pretrained("data/tiny-qwen3"))
    harden_response_parser(tok)
    return tok


@cache
def calculator_prompt() -> list[int]:
    from transformers.utils import get_json_schema

    tools = [get_json_schema(getattr(Calculator, name)) for name in tool_names(Calculator)]
    prompt = [{"role": "user", "content": "Work out 1 + 2."}]
    rendered = tokenizer().apply_chat_template(prompt, tools=tools, add_generation_prompt=True, tokenize=False)
    return tokenizer()(rendered, add_special_tokens=False)["input_ids"]


def parse(text: str) -> dict:
    from trl.chat_template_utils import parse_response

    tok = tokenizer()
    # A completion is decoded from token ids, so what reaches the parser is always encodable text.
    ids = tok(encodable_text(text) + tok.eos_token, add_special_tokens=False)["input_ids"]
    return parse_response(tok, ids, prefix=calculator_prompt())


@FUZZ
@given(completion_texts)
def test_the_tool_call_parser_reads_any_completion_as_a_message(text):
    message = parse(text)
    assert message["role"] == "assistant" and isinstance(message["content"], str)
    for call in message.get("tool_calls") or []:
        assert isinstance(call["function"]["name"], str)
    stats = tool_stats([[message]])
    assert stats["parse_failures"] <= 1 and stats["turns"] == 1
    for call in parse_text_tool_calls(text):  # the rewards' own parser
        assert call["name"] is None or isinstance(call["name"], str)
        assert isinstance(call["arguments"], dict)


def test_arguments_nested_thousands_deep_are_a_counted_parse_failure_not_a_crash():
    # TRL's fallback catches ValueError and TypeError only; the JSON decoder raises RecursionError here
    text = "<tool_call>\n" + _nested(5000) + "\n</tool_call>"
    message = parse(text)
    assert "tool_calls" not in message and message["content"].startswith("<tool_call>")
    assert tool_stats([[message]])["parse_failures"] == 1
    assert parse("<tool_call>\n" + _nested(3) + "\n</tool_call>")["tool_calls"][0]["function"]["name"] == "add"


# --- environments -------------------------------------------------------------------------------------------------


@cache
def bfcl_row() -> dict:
    with open("data/bfcl_tiny/train.jsonl") as handle:
        return json.loads(handle.readline())


@cache
def bfcl_official_row() -> dict:
    """The second turn of a BFCL task on BFCL's own classes (a history of calls behind it)."""
    return turn_rows(load_tasks("multi_turn_base", limit=1)[0])[1]


def fresh_environment(kind: str):
    env = ENVIRONMENT_CLASSES[kind]()
    if kind == "bfcl":
        env.reset(initial_config=bfcl_row()["initial_config"], involved_classes=sorted(API_CLASSES))
    elif kind == "bfcl_official":
        env.reset(**bfcl_official_row())
    else:
        env.reset()
    return env


@FUZZ
@given(st.sampled_from(sorted(ENVIRONMENT_CLASSES)), st.lists(st.tuples(names, calls), min_size=1, max_size=6))
def test_every_environment_answers_every_call_with_text(kind, sequence):
    env = fresh_environment(kind)
    for name, call in sequence:
        assert isinstance(env.execute(call), str)
        tool = getattr(env, name, None) if name in tool_names(type(env)) else None
        if tool is not None:  # as TRL calls it: the method with the parsed arguments as keywords
            kwargs = call.get("arguments") if isinstance(call, dict) else None
            result = tool(**kwargs) if isinstance(kwargs, dict) and all(isinstance(k, str) for k in kwargs) else ""
            assert isinstance(result, str)
        assert isinstance(env.state_key(), str)


def test_every_registered_environment_is_fuzzed():
    assert set(ENVIRONMENTS) <= set(ENVIRONMENT_CLASSES)
    assert set(API_CLASSES) <= set(ENVIRONMENT_CLASSES)


# --- rewards ------------------------------------------------------------------------------------------------------


@cache
def reward_columns() -> dict[str, dict]:
    """Real dataset columns for each registered reward (the completion is the fuzzed part)."""

    def first(path):
        with open(path) as handle:
            return json.loads(handle.readline())

    simple, multi, calc = first("data/bfcl/simple.jsonl"), bfcl_row(), first("data/calc_tools/train.jsonl")
    return {
        "accuracy": {"ground_truth": "42"},
        "format": {},
        "tool_call_accuracy": {k: simple[k] for k in ("possible_answer", "tools")},
        "multi_turn_state": {k: multi[k] for k in ("initial_config", "involved_classes", "ground_truth", "tools")},
        "multi_turn_execution": {k: multi[k] for k in ("initial_config", "involved_classes", "ground_truth", "tools")},
        "calculator_answer": {"ground_truth": calc["ground_truth"]},
        "horizon_accuracy": {"ground_truth": first("data/horizon/chained/k8/train.jsonl")["ground_truth"]},
        "item_list_accuracy": {"ground_truth": first("data/item_lists/copy/k8/train.jsonl")["ground_truth"]},
        "numbered_list_accuracy": {"ground_truth": first("data/item_lists/numbered/k8/train.jsonl")["ground_truth"]},
        "bfcl_official_turn": {"bfcl_task": bfcl_official_row()["bfcl_task"]},
        "bfcl_ast": {"bfcl_entry": load_rows("simple_java", limit=1)[0]["bfcl_entry"]},  # Java: the type converters
        "acebench_accuracy": {
            k: first("data/acebench/normal_single_turn_parallel_function.jsonl")[k]
            for k in ("ground_truth", "functions", "category")
        },
    }


tool_call_lists = st.lists(
    st.fixed_dictionaries({"type": st.just("function"), "function": calls}) | json_values, max_size=3
)
messages = st.fixed_dictionaries(
    {"role": st.sampled_from(["assistant", "tool", "user"]) | any_text, "content": completion_texts | json_values},
    optional={"tool_calls": tool_call_lists | json_values},
)
completions = completion_texts | st.lists(messages, max_size=4) | json_values


def test_every_registered_reward_is_fuzzed():
    assert set(REWARD_FUNCS) == set(reward_columns())


@FUZZ
@given(st.sampled_from(sorted(REWARD_FUNCS)), st.lists(completions, min_size=1, max_size=3))
def test_every_reward_returns_a_number_or_none_for_any_completion(name, batch):
    columns = {key: [value] * len(batch) for key, value in reward_columns()[name].items()}
    rewards = guard_reward_func(REWARD_FUNCS[name])(completions=batch, **columns)
    assert len(rewards) == len(batch)
    assert all(r is None or (isinstance(r, float) and math.isfinite(r)) for r in rewards)


# --- the rollout loop ---------------------------------------------------------------------------------------------


@cache
def rollout_trainer():
    """A GEARTrainer on the calculator recipe whose assistant turns are the fuzzed texts (cut to the completion
    budget, as generation would); the tool loop, the environment, the reward and the metrics are the real code."""
    import tempfile

    from gear_trl import GEARTrainer
    from gear_trl.envs import get_environment_factory
    from gear_trl.rewards import get_reward_funcs
    from gear_trl.train import load_splits, parse_args

    class Fuzzed(GEARTrainer):
        turns: tuple[str, ...] = ("",)

        def _generate_single_turn(self, prompt_ids, *args, **kwargs):
            tok = self._tokenizer
            response = tok.convert_tokens_to_ids("<tool_response>")
            out = []
            for position, ids in enumerate(prompt_ids):
                choice = position + list(ids).count(response) + len(ids)
                text = encodable_text(self.turns[choice % len(self.turns)])
                out.append(
                    tok(text + tok.eos_token, add_special_tokens=False)["input_ids"][: self.max_completion_length]
                )
            return out, None

    out = tempfile.mkdtemp(prefix="gear_fuzz_")
    argv = ["--config", "recipes/tiny/config_calc_tools.yaml", "--model_name_or_path", "data/tiny-qwen3"]
    argv += ["--output_dir", out, "--max_steps", "1", "--per_device_train_batch_size", "4", "--num_generations", "4"]
    argv += ["--max_completion_length", "128", "--save_strategy", "no", "--max_train_samples", "4"]
    script_args, args, model_args = parse_args(argv)
    train, _ = load_splits(script_args, args)
    trainer = Fuzzed(
        model=model_args.model_name_or_path,
        reward_funcs=[guard_reward_func(f) for f in get_reward_funcs(script_args.reward_funcs)],
        args=args,
        train_dataset=train,
        environment_factory=get_environment_factory(script_args.environment),
    )
    trainer.model.train()
    return trainer, Fuzzed


@pytest.mark.slow
@settings(FUZZ, max_examples=max(EXAMPLES // 5, 3))
@given(st.lists(completion_texts, min_size=1, max_size=6))
def test_the_rollout_loop_survives_any_assistant_text_and_counts_errors(turns):
    trainer, fuzzed = rollout_trainer()
    fuzzed.turns = turns
    rows = next(iter(trainer.get_train_dataloader()))
    before = {key: len(trainer._metrics["train"][key]) for key in ("tools/error_rate", "tools/parse_failures")}
    trainer._generate_and_score_completions(rows)
    for key, count in before.items():
        values = trainer._metrics["train"][key]
        assert len(values) == count + 1 and 0.0 <= values[-1] and math.isfinite(values[-1])


@pytest.mark.slow
def test_the_rollout_loop_counts_tool_errors_and_parse_failures():
    trainer, fuzzed = rollout_trainer()
    fuzzed.turns = [
        '<tool_call>\n{"name": "divide", "arguments": {"a": 1, "b": 2}}\n</tool_call>',  # unknown tool: error text
        "<tool_call>\n" + _nested(3000) + "\n</tool_call>",  # unparseable: plain text
        '<tool_call>\n{"name": "add", "arguments": {"a": "\\ud800", "b": 1}}\n</tool_call>',  # wrong type
        "The answer is \\boxed{3}.",
    ]
    # the trainer reads what its parser chokes on as plain text (a depth that does so needs more positions than
    # the tiny model has, so the cut text here only tests the counting)
    assert getattr(trainer._tokenizer.parse_response, "_gear_hardened", False)
    rows = next(iter(trainer.get_train_dataloader()))
    trainer._generate_and_score_completions(rows)
    metrics = trainer._metrics["train"]
    assert metrics["tools/error_rate"][-1] > 0
    assert metrics["tools/parse_failures"][-1] > 0
    completions = trainer._rollout.completions
    tool_texts = [m["content"] for c in completions for m in c if m.get("role") == "tool"]
    assert any("divide" in text for text in tool_texts)
    assert all(isinstance(text, str) for text in tool_texts)


def test_a_tool_result_echoing_a_lone_surrogate_reaches_the_model_as_encodable_text():
    from gear_trl.envs import GorillaFileSystem
    from gear_trl.envs.rollout import ToolRolloutMixin

    env = GorillaFileSystem()
    env.reset()
    env.mkdir(dir_name="\ud800")  # the model wrote {"dir_name": "\\ud800"}
    with pytest.raises(UnicodeEncodeError):
        env.ls().encode("utf-8")  # the tokenizer refuses such text (TypeError)

    class Loop:
        def _generate(self, prompts):
            return self._sync_tool_dicts[0]["ls"]()  # as TRL's tool loop calls a tool

    class Rollout(ToolRolloutMixin, Loop):
        environments = None

    rollout = Rollout()
    rollout._sync_tool_dicts = [{"ls": env.ls}]
    text = rollout._generate([])
    assert text == '{"current_directory_content": ["\ufffd"]}'
    tokenizer()(text)
