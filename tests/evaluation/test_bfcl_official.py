"""BFCL's own API classes and multi-turn checker (from bfcl-eval): every multi-turn task covered, scored as the
leaderboard scores it; the per-turn environment and reward for TRL; the whole-task evaluation loop."""

from __future__ import annotations

import inspect
import json

import pytest
from transformers import AutoTokenizer

from gear_trl.envs import ENVIRONMENTS
from gear_trl.envs.bfcl_official import (
    ADDED_FUNCTIONS_PROMPT,
    MULTI_TURN_CATEGORIES,
    MULTI_TURN_CLASSES,
    BFCLOfficialEnvironment,
    TaskState,
    _named_arguments,
    bfcl_official_turn_reward,
    call_string,
    check_task,
    function_owners,
    load_tasks,
    parse_call_string,
    task_tools,
    turn_rows,
)
from gear_trl.envs.checks import check_environment
from gear_trl.evaluation.conversations import evaluate_bfcl_multi_turn

TINY = "data/tiny-qwen3"


def _gt_steps(task):
    """The ground truth as a model's rollout: each turn's calls in one step (no step on a turn without calls)."""
    return [[list(calls)] if calls else [] for calls in task["ground_truth"]]


@pytest.mark.parametrize("category", MULTI_TURN_CATEGORIES)
def test_every_task_passes_the_official_checker_with_its_ground_truth_and_a_no_op_model_scores_zero(category):
    tasks = load_tasks(category)
    assert len(tasks) == 200
    assert {c for task in tasks for c in task["involved_classes"]} == set(MULTI_TURN_CLASSES)  # all eight classes
    passed = sum(check_task(task, _gt_steps(task))[0] for task in tasks)
    no_op = [check_task(task, [[] for _ in task["ground_truth"]]) for task in tasks]
    assert passed == 200
    assert sum(score for score, _ in no_op) == 0.0  # the figure docs/evaluation.md quotes
    assert {verdict["error_type"] for _, verdict in no_op} == {"multi_turn:empty_turn_model_response"}


def test_a_wrong_state_or_a_missing_result_fails_and_a_short_rollout_is_force_terminated():
    task = load_tasks("multi_turn_base", limit=1)[0]  # turn 0: cd document, mkdir temp, mv final_report.pdf temp
    steps = _gt_steps(task)
    wrong = [[["cd(folder='document')", "mkdir(dir_name='tmp')"]], *steps[1:]]
    score, verdict = check_task(task, wrong)
    assert score == 0.0 and verdict["error_type"] == "multi_turn:instance_state_mismatch"
    # the right state but the turn's results missing from the model's: the response check fails
    # turn 1 asks for a grep: without it the state is the same, but the grep's result is missing from the model's
    no_grep = [steps[0], [["cd(folder='temp')"]], *steps[2:]]
    score, verdict = check_task(task, no_grep)
    assert score == 0.0 and verdict["error_type"] == "multi_turn:execution_response_mismatch"
    assert check_task(task, steps[:-1])[1]["error_type"] == "multi_turn:force_terminated"
    # the checker's instances are forgotten: the same rollout scores the same twice
    assert check_task(task, steps)[0] == check_task(task, steps)[0] == 1.0


def test_the_environment_exposes_every_official_function_with_a_schema_trl_can_build():
    assert ENVIRONMENTS["bfcl_official"] is BFCLOfficialEnvironment
    rows = turn_rows(load_tasks("multi_turn_base", limit=2)[1])
    from datasets import Dataset

    tools = check_environment(BFCLOfficialEnvironment, Dataset.from_list(rows), what="environment")
    assert set(tools) == set(function_owners()) and len(tools) == 128
    signature = inspect.signature(BFCLOfficialEnvironment.mv)
    assert list(signature.parameters)[1:] == ["source", "destination"]


def test_per_turn_rows_score_one_for_the_ground_truth_live_or_replayed_and_a_no_op_rarely():
    turns = gt = live = no_op = 0
    for task in load_tasks("multi_turn_base"):
        for row in turn_rows(task):
            turn = json.loads(row["bfcl_task"])["turn"]
            calls = [parse_call_string(c) for c in task["ground_truth"][turn]]
            tool_calls = [{"type": "function", "function": {"name": n, "arguments": _named_arguments(n, a, k)}}
                          for n, a, k in calls]  # fmt: skip
            completion = [{"role": "assistant", "content": "", "tool_calls": tool_calls}]
            env = BFCLOfficialEnvironment()
            env.reset(**row)
            for call in tool_calls:
                getattr(env, call["function"]["name"])(**call["function"]["arguments"])
            turns += 1
            gt += bfcl_official_turn_reward([completion], [row["bfcl_task"]])[0]
            live += bfcl_official_turn_reward([completion], [row["bfcl_task"]], environments=[env])[0]
            no_op += bfcl_official_turn_reward([[{"role": "assistant", "content": "Done."}]], [row["bfcl_task"]])[0]
    assert turns == gt == live == 734
    # a turn passes without calls only when its ground truth changes nothing and repeats results the history holds
    assert no_op == 11
    assert bfcl_official_turn_reward(["x", "y"], [None, "not json"]) == [None, 0.0]


def test_history_holds_the_earlier_turns_and_miss_func_adds_its_functions_at_their_turn():
    task = next(t for t in load_tasks("multi_turn_miss_func", limit=20) if "3" in t["missed_function"])
    rows = turn_rows(task)
    held_out = task["missed_function"]["3"]
    names = lambda row: {tool["function"]["name"] for tool in json.loads(row["tools"])}
    assert not set(held_out) & names(rows[2]) and set(held_out) <= names(rows[3])
    assert rows[3]["prompt"][-1] == {"role": "user", "content": ADDED_FUNCTIONS_PROMPT}
    assert [m["role"] for m in rows[1]["prompt"]][:3] == ["user", "assistant", "tool"]


def test_model_calls_never_reach_eval_unless_they_are_task_functions_with_identifier_arguments():
    allowed = {"cd", "ls"}
    assert call_string("cd", {"folder": "a'b"}, allowed) == 'cd(folder="a\'b")'
    for name, arguments in [("open", {"file": "/etc/passwd"}), ("__import__", {"name": "os"}), ("cd", {"x)": 1}),
                            ("cd", {"import": 1}), ("cd", "folder='x'"), (None, {})]:  # fmt: skip
        assert call_string(name, arguments, allowed) is None
    state = TaskState({}, ["GorillaFileSystem"])
    assert state.execute("open", {"file": "x"}).startswith("Error during execution")
    assert state.execute("cd", {"nope": 1}).startswith("Error during execution")
    assert state.execute("cd", ["x"]).startswith("Error during execution")


# --- the whole-task evaluation loop --------------------------------------------------------------------------------


class Scripted:
    """A stand-in generator: at each step of each conversation, `reply(prompt text)` gives the completion text."""

    def __init__(self, tokenizer, reply):
        self.tokenizer, self.reply, self.calls = tokenizer, reply, 0

    def generate(self, prompts, num_samples=1):
        self.calls += 1
        return [[([], self.reply(self.tokenizer.decode(ids)), True)] * num_samples for ids in prompts]


def _oracle(tasks):
    """Answers each turn's user message with its ground-truth calls, then (after the tool results) with text."""
    by_message = {}
    for task in tasks:
        for turn, calls in enumerate(task["ground_truth"]):
            (message,) = task["turns"][turn]
            blocks = [
                "<tool_call>\n" + json.dumps({"name": n, "arguments": _named_arguments(n, a, k)}) + "\n</tool_call>"
                for n, a, k in map(parse_call_string, calls)
            ]
            by_message[message["content"]] = "\n".join(blocks)

    def reply(prompt):
        last_user = max(by_message, key=lambda m: prompt.rfind(m))
        after = prompt[prompt.rfind(last_user) :]
        return "All done." if "<tool_response>" in after else by_message[last_user]

    return reply


def test_the_loop_scores_an_oracle_one_a_no_op_zero_and_a_model_that_never_stops_zero():
    tokenizer = AutoTokenizer.from_pretrained(TINY)
    tasks = load_tasks("multi_turn_base", limit=4)
    oracle = evaluate_bfcl_multi_turn(Scripted(tokenizer, _oracle(tasks)), tokenizer, tasks, progress=False)
    assert oracle["n"] == 4 and oracle["accuracy"] == 1.0, [s["checker"] for s in oracle["per_sample"]]
    assert oracle["tool_calls"] == pytest.approx(sum(map(len, (c for t in tasks for c in t["ground_truth"]))) / 4)
    conversation = oracle["per_sample"][0]["completion"]
    assert conversation[1]["tool_calls"][0]["function"] == {"name": "cd", "arguments": {"folder": "document"}}
    assert conversation[2] == {"role": "tool", "name": "cd", "content": '{"current_working_directory": "document"}'}
    assert conversation[3]["content"] == "None"  # mkdir returns None: BFCL's executor writes str(None)

    no_op = evaluate_bfcl_multi_turn(Scripted(tokenizer, lambda p: "I can't."), tokenizer, tasks, progress=False)
    assert no_op["accuracy"] == 0.0 and no_op["tool_calls"] == 0.0

    looping = Scripted(tokenizer, lambda p: '<tool_call>\n{"name": "pwd", "arguments": {}}\n</tool_call>')
    report = evaluate_bfcl_multi_turn(looping, tokenizer, tasks[:1], progress=False, max_steps_per_turn=3)
    assert report["accuracy"] == 0.0 and not report["per_sample"][0]["finished"]
    assert looping.calls == 4  # steps 1..3 and the one over the limit, then the task stops

    short = Scripted(tokenizer, _oracle(tasks))
    report = evaluate_bfcl_multi_turn(short, tokenizer, tasks, progress=False, max_prompt_tokens=500)
    assert report["accuracy"] == 0.0 and report["context_overflow"] == 4 and short.calls == 0


def test_the_tools_shown_at_a_turn_hold_back_the_functions_miss_func_adds_later():
    task = next(t for t in load_tasks("multi_turn_miss_func", limit=20) if "3" in t["missed_function"])
    held_out = set(task["missed_function"]["3"])
    assert not held_out & {tool["function"]["name"] for tool in task_tools(task, 0)}
    assert held_out <= {tool["function"]["name"] for tool in task_tools(task, 3)}


# --- the presets -----------------------------------------------------------------------------------------------------


def _cli(tmp_path, monkeypatch, reply, *argv):
    from gear_trl.evaluation.cli import main

    tokenizer = AutoTokenizer.from_pretrained(TINY)
    monkeypatch.setattr("gear_trl.evaluation.cli.load_model", lambda *a, **k: (None, tokenizer))
    monkeypatch.setattr(
        "gear_trl.evaluation.generation.TransformersGenerator", lambda *a, **k: Scripted(tokenizer, reply)
    )
    output = tmp_path / "bfcl.json"
    main(["--model", TINY, "--benchmark", "bfcl_multi_turn", "--output", str(output), "--no_progress", *argv])
    return json.loads(output.read_text())


def test_the_multi_turn_preset_scores_every_category_with_the_official_checker(tmp_path, monkeypatch):
    report = _cli(tmp_path, monkeypatch, lambda prompt: "I would rather not.", "--max_samples", "3")
    assert report["n"] == 12 and report["accuracy"] == 0.0
    assert report["categories"] == dict.fromkeys(MULTI_TURN_CATEGORIES, 0.0)
    assert report["config"]["temperature"] == 0.0 and report["config"]["max_new_tokens"] == 4096
    tasks = load_tasks("multi_turn_base", limit=3)
    argv = ["--split", "multi_turn_base", "--max_samples", "3", "--max_prompt_tokens", "100000"]
    report = _cli(tmp_path, monkeypatch, _oracle(tasks), *argv)
    assert report["n"] == 3 and report["accuracy"] == report["categories"]["multi_turn_base"] == 1.0
    assert report["context_overflow"] == 0
    # the tiny model's 2048 positions cannot hold BFCL's tool list: every conversation ends before generating
    report = _cli(tmp_path, monkeypatch, _oracle(tasks), "--split", "multi_turn_base", "--max_samples", "3")
    assert report["accuracy"] == 0.0 and report["context_overflow"] == 3


@pytest.mark.parametrize("category", ["simple", "multiple", "parallel", "parallel_multiple"])
def test_every_single_turn_bfcl_preset_runs_on_its_local_rows(tmp_path, category):
    from gear_trl.evaluation.cli import main

    output = tmp_path / "report.json"
    argv = ["--model", TINY, "--benchmark", f"bfcl_{category}", "--max_samples", "2", "--max_new_tokens", "4"]
    main([*argv, "--output", str(output), "--no_progress"])
    report = json.loads(output.read_text())
    assert report["n"] == 2 and report["config"]["reward"] == ["tool_call_accuracy"]
    assert report["accuracy"] in (0.0, 0.5, 1.0) and report["config"]["split"] == category


def test_trls_tool_loop_runs_the_official_environment_and_its_reward(tmp_path):
    from datasets import Dataset

    from gear_trl.evaluation.generation import load_model
    from gear_trl.evaluation.loops import evaluate_multi_turn
    from gear_trl.rewards import get_reward_funcs

    rows = [turn_rows(task)[0] for task in load_tasks("multi_turn_base", limit=2)]  # first turns: plain prompts
    model, tokenizer = load_model(TINY, dtype="float32")
    report = evaluate_multi_turn(model, tokenizer, Dataset.from_list(rows), get_reward_funcs(["bfcl_official_turn"]),
                                 "bfcl_official", max_new_tokens=8, max_tool_calling_iterations=1, batch_size=2,
                                 progress=False)  # fmt: skip
    assert report["n"] == 2 and report["accuracy"] == 0.0  # a random tiny model does not solve a BFCL turn
    assert [s["index"] for s in report["per_sample"]] == [0, 1]
