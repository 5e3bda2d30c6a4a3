"""The user-simulator hook of interactive evaluation (gear_trl/evaluation/user_sim.py, `evaluate_interactive`, the BFCL loop's
user turns): who writes the user's later turns, what the agent sees, how a broken simulator is counted, and what
preflight refuses before a model loads."""

from __future__ import annotations

import json

import pytest
from transformers import AutoTokenizer

from gear_trl.envs.bfcl_official import (
    ADDED_FUNCTIONS_PROMPT,
    _named_arguments,
    load_tasks,
    parse_call_string,
    turn_messages,
)
from gear_trl.evaluation.cli import main
from gear_trl.evaluation.conversations import BFCLScriptedUser, evaluate_bfcl_multi_turn, evaluate_interactive
from gear_trl.evaluation.generation import Sampling
from gear_trl.evaluation.user_sim import (
    STOP,
    LLMUserSimulator,
    ScriptedUserSimulator,
    UserSimulatorError,
    ask,
    load_user_simulator,
    user_messages,
)
from gear_trl.inputs.errors import UserInputError
from tests.bank_plugin.bank import BankEnv, balance_reward

TINY = "data/tiny-qwen3"
CUSTOMER = "tests.bank_plugin.users:Customer"
BANK_ARGS = ["--environment", "tests.bank_plugin.bank:BankEnv", "--reward", "tests.bank_plugin.bank:balance_reward"]
ROWS = [
    {
        "prompt": [{"role": "user", "content": "Deposit 5 into bob's account."}],
        "user_goal": "bob should end with 35",
        "accounts": json.dumps({"alice": 100, "bob": 20}),
        "final": json.dumps({"alice": 100, "bob": 35}),
    },
    {
        "prompt": [{"role": "user", "content": "What is alice's balance?"}],
        "user_goal": "learn alice's balance",
        "accounts": json.dumps({"alice": 7, "bob": 1}),
        "final": json.dumps({"alice": 7, "bob": 1}),
    },
]


@pytest.fixture(scope="module")
def tokenizer():
    return AutoTokenizer.from_pretrained(TINY)


@pytest.fixture
def bank_data(tmp_path):
    rows = [{**row, "prompt": row["prompt"][0]["content"]} for row in ROWS]
    (tmp_path / "test.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    return str(tmp_path)


class Agent:
    """A stand-in generator: `reply(prompt text)` gives each step's completion; keeps every prompt it was shown."""

    def __init__(self, tokenizer, reply):
        self.tokenizer, self.reply, self.prompts = tokenizer, reply, []
        self.sampling = Sampling()

    def generate(self, prompts, num_samples=1):
        texts = [self.tokenizer.decode(ids) for ids in prompts]
        self.prompts.append(texts)
        return [[([], self.reply(text), True)] * num_samples for text in texts]


def _deposits(prompt: str) -> str:
    """Deposits 5 into bob's account once after each user message, then says it is done."""
    after_user = prompt[prompt.rfind("<|im_start|>user") :]
    if "<tool_response>" in after_user:
        return "Done."
    return '<tool_call>\n{"name": "deposit", "arguments": {"account": "bob", "amount": 5}}\n</tool_call>'


# --- the answers a simulator may give ------------------------------------------------------------------------------


def test_a_simulators_answer_is_a_user_message_a_stop_or_junk():
    assert user_messages("hi") == [{"role": "user", "content": "hi"}]
    assert user_messages({"role": "user", "content": "hi", "extra": 1}) == [{"role": "user", "content": "hi"}]
    assert user_messages(None) is None
    assert user_messages(f"Thanks, that is all. {STOP}") is None
    assert user_messages("bad \ud800 text") == [{"role": "user", "content": "bad \ufffd text"}]
    for junk in (42, [], "  ", {"role": "assistant", "content": "x"}, {"role": "user", "content": 3}, ["hi", 3]):
        with pytest.raises(UserSimulatorError):
            user_messages(junk)


def test_ask_turns_exceptions_and_junk_into_counted_errors_never_raises():
    class Batched:
        def next_turns(self, requests):
            return ["fine", 7][: len(requests)]

    class Short:
        def next_turns(self, requests):
            return []

    requests = [([], {}, 1), ([], {}, 1)]
    (ok, none), (bad, error) = ask(Batched(), requests)
    assert ok == [{"role": "user", "content": "fine"}] and none is None
    assert bad is None and "UserSimulatorError" in error
    assert all(messages is None and "answers for 2" in error for messages, error in ask(Short(), requests))
    crashing = load_user_simulator("tests.bank_plugin.users:Crashing")
    assert ask(crashing, requests[:1]) == [(None, "RuntimeError: the simulator's server went away")]


def test_the_scripted_user_replays_a_column_of_later_turns():
    simulator = ScriptedUserSimulator()
    row = {"user_turns": json.dumps(["second", [{"role": "user", "content": "third"}]])}
    assert simulator.required_columns == ("user_turns",)
    assert [simulator.next_turn([], row, turn) for turn in (1, 2, 3)] == [
        "second",
        [{"role": "user", "content": "third"}],
        None,
    ]
    assert simulator.next_turn([], {"user_turns": []}, 1) is None  # the prompt is the only turn, as without one


# --- conversations with a simulated user ---------------------------------------------------------------------------


def test_a_simulator_loaded_by_import_path_drives_a_three_turn_episode(tokenizer):
    customer = load_user_simulator(CUSTOMER, {"turns": 3})
    agent = Agent(tokenizer, _deposits)
    report = evaluate_interactive(
        agent, tokenizer, ROWS, [balance_reward], BankEnv, customer, progress=False, reward_names=["balance"]
    )
    assert report["user_turns"] == 3.0 and report["user_simulator_failures"] == 0 and report["user_turn_cap"] == 0
    first = report["per_sample"][0]
    assert first["user_turns"] == 3 and first["ended_by"] == "user" and first["finished"]
    roles = [m["role"] for m in first["completion"]]
    assert roles == ["assistant", "tool", "assistant", "user"] * 2 + ["assistant", "tool", "assistant"]
    assert [m["content"] for m in first["completion"] if m["role"] == "tool"] == ["25", "30", "35"]
    assert (
        first["completion"][3]["content"]
        == "Please deposit 5 more into bob's account (bob should end with 35, turn 1)."
    )
    # three deposits of 5: bob 20 -> 35, the goal of row 0; row 1's balances were to stay as they were
    assert report["rewards"] == {"balance": 0.5} and [s["reward"] for s in report["per_sample"]] == [1.0, 0.0]
    assert report["tool_calls"] == 3.0
    # the simulator was asked after each of the agent's turns, with the conversation as the agent saw it
    turns_of_row_0 = [(len(messages), turn) for messages, turn in customer.seen if messages[0] == ROWS[0]["prompt"][0]]
    assert turns_of_row_0 == [(4, 1), (8, 2), (12, 3)]
    # the agent's last step saw both later user turns and every tool result before them
    last_prompt = agent.prompts[-1][0]
    assert "turn 1)." in last_prompt and "turn 2)." in last_prompt and last_prompt.count("<tool_response>") == 3
    assert len(agent.prompts) == 6  # two steps (call, then text) per user turn, both rows stepping together


def test_a_prompt_without_a_user_message_has_the_simulator_open_the_dialogue(tokenizer):
    rows = [{**row, "prompt": [{"role": "system", "content": "You are a bank."}]} for row in ROWS]
    customer = load_user_simulator(CUSTOMER, {"turns": 2})
    report = evaluate_interactive(
        Agent(tokenizer, _deposits), tokenizer, rows, [balance_reward], BankEnv, customer, progress=False
    )
    first = report["per_sample"][0]
    assert first["user_turns"] == 2 and first["ended_by"] == "user"
    assert first["completion"][0] == {
        "role": "user",
        "content": "Please deposit 5 more into bob's account (bob should end with 35, turn 0).",
    }
    assert [m["content"] for m in first["completion"] if m["role"] == "tool"] == ["25", "30"]
    assert customer.seen[0] == ([{"role": "system", "content": "You are a bank."}], 0)
    llm = LLMUserSimulator(opening="Hi, how can I help?")
    assert llm.user_view(rows[0]["prompt"], ROWS[0])[1:] == [{"role": "user", "content": "Hi, how can I help?"}]


def test_the_cap_ends_a_conversation_whose_user_never_stops(tokenizer):
    endless = load_user_simulator(CUSTOMER, {"turns": 100})
    report = evaluate_interactive(
        Agent(tokenizer, lambda p: "ok"), tokenizer, ROWS, [balance_reward], BankEnv, endless, max_user_turns=2,
        progress=False,
    )  # fmt: skip
    assert report["user_turn_cap"] == 2 and report["user_turns"] == 2.0
    assert {s["ended_by"] for s in report["per_sample"]} == {"cap"}


@pytest.mark.parametrize("spec", ["tests.bank_plugin.users:Crashing", "tests.bank_plugin.users:junk"])
def test_a_raising_or_junk_simulator_ends_the_episode_and_is_counted_not_fatal(tokenizer, spec):
    simulator = load_user_simulator(spec)
    report = evaluate_interactive(
        Agent(tokenizer, _deposits), tokenizer, ROWS, [balance_reward], BankEnv, simulator, progress=False
    )
    assert report["user_simulator_failures"] == 2 and report["user_turns"] == 1.0
    for sample in report["per_sample"]:
        assert sample["ended_by"] == "user_simulator_error" and sample["user_simulator_error"]
    # scored as it stood: one deposit, bob at 25, not the 35 row 0 wants
    assert [s["reward"] for s in report["per_sample"]] == [0.0, 0.0]


# --- the BFCL loop: its own turns by default ---------------------------------------------------------------------


def _oracle(tasks):
    by_message = {}
    for task in tasks:
        for turn, calls in enumerate(task["ground_truth"]):
            (message,) = task["turns"][turn]
            by_message[message["content"]] = "\n".join(
                "<tool_call>\n" + json.dumps({"name": n, "arguments": _named_arguments(n, a, k)}) + "\n</tool_call>"
                for n, a, k in map(parse_call_string, calls)
            )

    def reply(prompt):
        last_user = max(by_message, key=lambda m: prompt.rfind(m))
        return "All done." if "<tool_response>" in prompt[prompt.rfind(last_user) :] else by_message[last_user]

    return reply


def test_the_scripted_bfcl_user_reproduces_the_loop_without_a_simulator(tokenizer):
    from transformers import AutoModelForCausalLM

    from gear_trl.evaluation.generation import TransformersGenerator

    tasks = load_tasks(
        "multi_turn_miss_func", limit=1
    )  # one task, with a turn where BFCL adds the held-back functions
    model = AutoModelForCausalLM.from_pretrained(TINY)

    def run(**kwargs):
        generator = TransformersGenerator(model, tokenizer, Sampling(max_new_tokens=6), batch_size=2)
        return evaluate_bfcl_multi_turn(generator, tokenizer, tasks, progress=False, **kwargs)

    default, scripted = run(), run(user_simulator=BFCLScriptedUser())
    scripted.pop("user_simulator_failures")
    assert scripted == default
    # every turn of the task was played with BFCL's own user messages
    (sample,) = default["per_sample"]
    users = [m for m in sample["completion"] if m["role"] == "user"]
    assert users == [m for turn in range(len(tasks[0]["turns"])) for m in turn_messages(tasks[0], turn)]
    assert {"role": "user", "content": ADDED_FUNCTIONS_PROMPT} in users
    tasks = load_tasks("multi_turn_base", limit=2)
    oracle = evaluate_bfcl_multi_turn(
        Agent(tokenizer, _oracle(tasks)), tokenizer, tasks, progress=False, user_simulator=BFCLScriptedUser()
    )
    assert oracle["accuracy"] == 1.0 and oracle["user_simulator_failures"] == 0


def test_a_crashing_user_in_the_bfcl_loop_fails_the_task_and_is_counted(tokenizer):
    tasks = load_tasks("multi_turn_base", limit=2)
    crashing = load_user_simulator("tests.bank_plugin.users:Crashing")
    report = evaluate_bfcl_multi_turn(
        Agent(tokenizer, _oracle(tasks)), tokenizer, tasks, progress=False, user_simulator=crashing
    )
    assert report["accuracy"] == 0.0 and report["user_simulator_failures"] == 2
    assert all(s["user_simulator_error"].startswith("RuntimeError") for s in report["per_sample"])


# --- the LLM user ----------------------------------------------------------------------------------------------------


def test_the_llm_user_reads_the_goal_and_the_dialogue_with_roles_swapped():
    simulator = LLMUserSimulator(system_prompt="Goal: {goal}")
    messages = [
        {"role": "system", "content": "You are a bank."},
        {"role": "user", "content": "Deposit 5."},
        {"role": "assistant", "content": "<think>plan</think>", "tool_calls": [{"type": "function"}]},
        {"role": "tool", "name": "deposit", "content": "25"},
        {"role": "assistant", "content": "Done, bob has 25."},
        {"role": "assistant", "content": "<think>ok</think>Anything else?"},
    ]
    assert simulator.user_view(messages, {"user_goal": "bob at 25"}) == [
        {"role": "system", "content": "Goal: bob at 25"},
        {"role": "assistant", "content": "Deposit 5."},
        {"role": "user", "content": "Done, bob has 25.\n\nAnything else?"},
    ]
    silent = simulator.user_view(messages[:3], {"user_goal": "g"})
    assert silent[-1] == {"role": "user", "content": ""}  # the user answers after the agent's turn, even a silent one


def test_the_llm_user_shares_the_agents_generator_with_its_own_sampling_and_caps_its_turns(tokenizer):
    replies = iter(["<think>hmm</think> And alice?", f"Thanks! {STOP}"])
    agent = Agent(tokenizer, lambda prompt: next(replies))
    simulator = LLMUserSimulator(max_new_tokens=7, temperature=0.5, max_turns=3)
    simulator.setup(generator=agent, tokenizer=tokenizer)
    request = ([{"role": "user", "content": "hi"}, {"role": "assistant", "content": "Hello."}], ROWS[0], 1)
    assert simulator.next_turn(*request) == "And alice?"
    assert agent.sampling == Sampling()  # the agent's own sampling back after the call
    assert ask(simulator, [request]) == [(None, None)]  # the stop marker
    assert simulator.next_turns([(request[0], ROWS[0], 3)]) == [None] and len(agent.prompts) == 2  # capped: not asked
    assert "bob should end with 35" in agent.prompts[0][0]  # its system prompt holds the row's goal


def test_the_llm_user_with_a_model_of_its_own_loads_it_and_answers_a_batch():
    simulator = LLMUserSimulator(model=TINY, max_new_tokens=4, temperature=1.0)
    simulator.setup(device="cpu")
    assert simulator.generator.model.device.type == "cpu" and simulator.generator.sampling.max_new_tokens == 4
    requests = [([{"role": "user", "content": row["prompt"][0]["content"]}], row, 1) for row in ROWS]
    answers = simulator.next_turns(requests)
    assert len(answers) == 2 and all(isinstance(answer, str) for answer in answers)


def test_the_llm_user_runs_end_to_end_with_the_tiny_model_and_stops_at_the_cap(bank_data, tmp_path):
    output = tmp_path / "report.json"
    report = main(
        ["--model", TINY, "--dataset", bank_data, *BANK_ARGS, "--user_simulator", "llm", "--user_simulator_kwargs",
         '{"max_new_tokens": 8, "temperature": 1.0}', "--max_user_turns", "3", "--max_new_tokens", "8",
         "--no_progress", "--output", str(output)]
    )  # fmt: skip
    assert report["n"] == 2 and report["user_turn_cap"] == 2 and report["user_simulator_failures"] == 0
    for sample in report["per_sample"]:
        assert sample["user_turns"] == 3 and sample["ended_by"] == "cap"
        users = [m for m in sample["completion"] if m["role"] == "user"]
        assert len(users) == 2 and all(m["content"].strip() for m in users)  # the simulator's two turns
    saved = json.loads(output.read_text())
    assert saved["config"]["user_simulator"] == "llm" and saved["user_turns"] == 3.0


def test_a_custom_simulator_by_import_path_on_the_command_line(bank_data, tmp_path):
    report = main(
        ["--model", TINY, "--dataset", bank_data, *BANK_ARGS, "--user_simulator", CUSTOMER,
         "--user_simulator_kwargs", '{"turns": 3}', "--max_new_tokens", "4", "--no_progress",
         "--output", str(tmp_path / "r.json")]
    )  # fmt: skip
    assert report["user_turns"] == 3.0 and {s["ended_by"] for s in report["per_sample"]} == {"user"}
    users = [m["content"] for m in report["per_sample"][1]["completion"] if m["role"] == "user"]
    assert users == [f"Please deposit 5 more into bob's account (learn alice's balance, turn {t})." for t in (1, 2)]


# --- preflight: refused before any model loads ---------------------------------------------------------------------


@pytest.fixture
def no_model(monkeypatch):
    def no_load(*args, **kwargs):
        raise AssertionError("a model was loaded although the input was wrong")

    monkeypatch.setattr("gear_trl.evaluation.cli.load_model", no_load)


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--user_simulator", "no_such_pkg.users:Sim"], "cannot import module 'no_such_pkg.users'"),
        (["--user_simulator", "tests.bank_plugin.users:Nobody"], "has no attribute 'Nobody'"),
        (["--user_simulator", "lmm"], "did you mean 'llm'"),
        (["--user_simulator", CUSTOMER, "--user_simulator_kwargs", '{"turn": 3}'], "unexpected keyword argument"),
        (["--user_simulator", "tests.bank_plugin.bank:to_example"], "failed"),
        (["--user_simulator", "tests.bank_plugin.bank:BankEnv"], "without a next_turn"),
        (["--user_simulator", "llm", "--user_simulator_kwargs", '{"goal_column": "goal"}'], "column 'goal'"),
        (["--user_simulator", "llm", "--user_simulator_kwargs", '{"model": "data/no-such-model"}'], "no-such-model"),
        (["--user_simulator", "llm", "--user_simulator_kwargs", "[1]"], "must be a JSON object"),
        (["--user_simulator", "llm", "--max_user_turns", "0"], "at least 1"),
        (["--max_user_turns", "3"], "--max_user_turns needs --user_simulator"),
        (["--user_simulator", "scripted"], "reads the column 'user_turns', which the rows do not have"),
    ],
)
def test_preflight_refuses_a_bad_simulator_before_the_model_loads(no_model, bank_data, extra, message):
    with pytest.raises(UserInputError, match=None) as caught:
        main(["--model", TINY, "--dataset", bank_data, *BANK_ARGS, *extra, "--no_progress"])
    assert message in str(caught.value)


def test_preflight_names_the_goal_column_a_row_lacks(no_model, tmp_path):
    rows = [{**row, "prompt": row["prompt"][0]["content"]} for row in ROWS]
    rows[1]["user_goal"] = ""
    (tmp_path / "test.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    with pytest.raises(UserInputError, match="row 1 has no value in the column 'user_goal'"):
        main(["--model", TINY, "--dataset", str(tmp_path), *BANK_ARGS, "--user_simulator", "llm", "--no_progress"])


def test_a_simulator_needs_a_conversation_to_play_in(no_model, bank_data):
    with pytest.raises(UserInputError, match="give --environment"):
        main(["--model", TINY, "--dataset", bank_data, "--user_simulator", "llm", "--no_progress"])
    with pytest.raises(UserInputError, match="BFCL's checker scores each task's own number of turns"):
        main(["--model", TINY, "--benchmark", "bfcl_multi_turn", "--user_simulator", "llm", "--max_user_turns", "2"])
    with pytest.raises(UserInputError, match="column 'user_goal'"):
        main(["--model", TINY, "--benchmark", "bfcl_multi_turn", "--max_samples", "1", "--user_simulator", "llm"])


def test_with_vllm_the_llm_user_shares_the_agents_engine_with_its_own_sampling(monkeypatch, bank_data, tmp_path):
    monkeypatch.syspath_prepend("tests/fake_vllm")
    import sys

    sys.modules.pop("vllm", None)
    import vllm

    asked = []
    generate = vllm.LLM.generate

    def recording(self, prompts, sampling_params):
        asked.append((len(prompts), sampling_params.kwargs["max_tokens"]))
        return generate(self, prompts, sampling_params)

    monkeypatch.setattr(vllm.LLM, "generate", recording)
    try:
        report = main(
            ["--model", TINY, "--dataset", bank_data, *BANK_ARGS, "--backend", "vllm", "--data_parallel", "1",
             "--user_simulator", "llm", "--user_simulator_kwargs", '{"max_new_tokens": 9}', "--max_user_turns", "2",
             "--max_new_tokens", "16", "--no_progress", "--output", str(tmp_path / "r.json")]
        )  # fmt: skip
    finally:
        sys.modules.pop("vllm", None)
    # one engine: the agent's step (both rows), the simulated users' turn (its own budget), the agent's second step
    assert asked == [(2, 16), (2, 9), (2, 16)] and len(vllm.CREATED) >= 1
    assert report["user_turn_cap"] == 2 and report["config"]["backend"] == "vllm"
    users = [m["content"] for m in report["per_sample"][0]["completion"] if m["role"] == "user"]
    assert len(users) == 1 and users[0].startswith("\\boxed{")
