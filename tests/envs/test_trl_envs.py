"""Any TRL environment through a recipe (issue 34): the row's other columns reach rewards and `reset`; TRL-shaped
rows pass through (`dataset_format: trl`); empty prompts whose instruction comes from `reset`; the environment's own
reward without a default beside it; several environments; the environment preflight switch; async tools recorded for
GiGPO; `rollout_func` refused under the credit modes that cannot use it. The environments are TRL-style classes of a
user's own (tests/trl_env_plugin/games.py), used by import path."""

from __future__ import annotations

import asyncio
import json
import re
import warnings

import pytest
from datasets import Dataset

from gear_trl import GEARConfig, GEARTrainer
from gear_trl.data import DATASET_ADAPTERS, detect_adapter, prepare_dataset
from gear_trl.envs import get_environment_factories
from gear_trl.envs.checks import check_environments
from gear_trl.envs.rollout import RolloutRecord, ToolRolloutMixin, step_anchors
from gear_trl.inputs.errors import UserInputError
from gear_trl.inputs.preflight import PreflightError
from gear_trl.train import load_splits, main, parse_args, reward_names
from tests.bank_plugin.bank import to_example
from tests.trl_env_plugin.games import GuessEnv, InstructionEnv, SilentEnv

GUESS = "tests.trl_env_plugin.games:GuessEnv"
INSTRUCTION = "tests.trl_env_plugin.games:InstructionEnv"
PROMPT = [{"role": "user", "content": "Find the number."}]
EMPTY = [{"role": "user", "content": ""}]


def recipe(tmp_path, rows: list[dict] | None = None, *overrides: str):
    """Recipe arguments on the tiny model, with `rows` written to a local file as the dataset."""
    argv = ["--model_name_or_path", "data/tiny-qwen3", "--output_dir", str(tmp_path / "out"), "--use_cpu", "true"]
    if rows is not None:
        path = tmp_path / "rows.jsonl"
        path.write_text("".join(json.dumps(row) + "\n" for row in rows))
        argv += ["--dataset_name", str(path)]
    return parse_args([*argv, *overrides])


# --- every adapter keeps the row's other columns ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("row", "adapter"),
    [
        ({"question": "1 + 1?", "answer": "1 + 1 = 2\n#### 2"}, "gsm8k"),
        ({"problem": "1 + 1?", "solution": "\\boxed{2}"}, "math"),
        ({"problem": "1 + 1?", "answer": "2"}, "aime"),
        ({"prompt": PROMPT, "ground_truth": "2"}, "generic"),
        ({"prompt": PROMPT, "tools": "[]", "ground_truth": "[]"}, "tool_use"),
        ({"prompt": PROMPT}, "trl"),
    ],
)
def test_every_adapter_keeps_the_rows_other_columns(row, adapter):
    data = Dataset.from_list([{**row, "secret": 42, "level": "easy"}])
    assert detect_adapter(data.column_names).name == adapter
    prepared = prepare_dataset(data)[0]
    assert prepared["secret"] == 42 and prepared["level"] == "easy"
    if adapter not in ("trl", "generic", "tool_use"):
        assert not set(row) & set(prepared)  # the columns read become the prompt and ground truth, not kept beside


def test_a_function_adapter_keeps_the_columns_it_does_not_return():
    row = {"request": "Pay bob 5", "calls": "[]", "final": "{}", "branch": "north"}
    prepared = prepare_dataset(Dataset.from_list([row]), "tests.bank_plugin.bank:to_example")[0]
    assert prepared["branch"] == "north" and prepared["final"] == to_example(row)["final"]


def test_reset_sees_a_column_no_adapter_knows(tmp_path):
    # The first report: `prompt`, `ground_truth`, `secret` failed with KeyError: 'secret' in reset.
    rows = [{"prompt": PROMPT, "ground_truth": "7", "secret": 7}] * 4
    script_args, training_args, _ = recipe(tmp_path, rows, "--environment", GUESS)
    train, _ = load_splits(script_args, training_args)
    assert train[0]["secret"] == 7
    check_environments(GuessEnv, train)  # builds one and resets it on the first row


# --- TRL-shaped rows pass through ------------------------------------------------------------------------------------


def test_trl_shaped_rows_are_picked_automatically_and_passed_through():
    rows = Dataset.from_list([{"prompt": PROMPT, "secret": 3}, {"prompt": EMPTY, "secret": 4}])
    assert detect_adapter(rows.column_names).name == "trl"
    assert list(DATASET_ADAPTERS)[-1] == "trl"  # only when no other adapter fits
    prepared = prepare_dataset(rows)
    assert prepared.column_names == ["prompt", "secret"] and prepared[1]["prompt"] == EMPTY
    text = prepare_dataset(Dataset.from_list([{"prompt": "2 + 2 =", "ground_truth": 4}]), "trl")[0]
    assert text["prompt"] == "2 + 2 ="  # TRL's plain-text prompts stay plain text (no math template)
    system = prepare_dataset(rows, "trl", system_prompt="Be brief.")[0]["prompt"]
    assert system == [{"role": "system", "content": "Be brief."}, *PROMPT]
    with pytest.raises(UserInputError, match="`system_prompt` needs conversational prompts"):
        prepare_dataset(Dataset.from_list([{"prompt": "2 + 2 =", "x": 1}]), "trl", system_prompt="Be brief.")
    with pytest.raises(UserInputError, match="`prompt` is a int"):
        prepare_dataset(Dataset.from_list([{"prompt": 5, "x": 1}]), "trl")


def test_a_trl_dataset_runs_under_credit_none_and_under_gear_with_a_ground_truth(tmp_path):
    rows = [{"prompt": PROMPT, "secret": i} for i in range(4)]
    script_args, training_args, _ = recipe(tmp_path, rows, "--environment", GUESS, "--credit", "none")
    train, _ = load_splits(script_args, training_args)
    assert train.column_names == ["prompt", "secret"] and reward_names(script_args) == []
    # Under gear the teacher needs the ground truth, read from `ground_truth_column` as the rows have it.
    script_args, training_args, _ = recipe(tmp_path, rows, "--environment", GUESS, "--credit", "gear")
    train, _ = load_splits(script_args, training_args)
    with pytest.raises(UserInputError, match="GEAR's teacher needs the ground-truth column 'ground_truth'") as caught:
        GEARTrainer("no/such-model", args=training_args, train_dataset=train, environment_factory=GuessEnv)
    # ... and the refusal names the option for rows without references, with what it needs
    assert "`teacher_reference: sibling`" in str(caught.value) and "groups with a success" in str(caught.value)
    script_args, training_args, _ = recipe(
        tmp_path, rows, "--environment", GUESS, "--credit", "gear", "--teacher_reference", "sibling"
    )
    train, _ = load_splits(script_args, training_args)
    assert train.column_names == ["prompt", "secret"]  # sibling reads no ground truth: accepted
    rows = [{**row, "answer_key": str(row["secret"])} for row in rows]
    overrides = ["--environment", GUESS, "--credit", "gear", "--dataset_format", "trl"]
    script_args, training_args, _ = recipe(tmp_path, rows, *overrides, "--ground_truth_column", "answer_key")
    train, _ = load_splits(script_args, training_args)
    assert train["answer_key"] == ["0", "1", "2", "3"]


# --- empty prompts: the instruction comes from `reset` ---------------------------------------------------------------


class Counted(InstructionEnv):
    built = 0
    resets = 0

    def __init__(self):
        super().__init__()
        type(self).built += 1

    def reset(self, **kwargs) -> str:
        type(self).resets += 1
        return super().reset(**kwargs)


def empty_rows(n: int = 4) -> Dataset:
    return Dataset.from_list([{"prompt": EMPTY, "task_a": i, "task_b": 1} for i in range(n)])


def test_empty_prompts_are_accepted_when_reset_returns_the_instruction():
    Counted.built = Counted.resets = 0
    check_environments(Counted, empty_rows())
    assert (Counted.built, Counted.resets) == (1, 1)  # one environment, one reset: on the empty row


def test_empty_prompts_are_refused_when_reset_returns_nothing(tmp_path):
    with pytest.raises(UserInputError, match=r"Row 0 has an empty prompt and environment SilentEnv.reset returned "):
        check_environments(SilentEnv, empty_rows())
    # the row checked is the first empty one, not merely the first
    rows = Dataset.from_list([{"prompt": PROMPT, "task_a": 1, "task_b": 1}, *empty_rows(2)])
    with pytest.raises(UserInputError, match=r"Row 1 has an empty prompt"):
        check_environments(SilentEnv, rows)
    # and before the model loads (the model does not exist: reaching its load would fail differently)
    args = GEARConfig(output_dir=str(tmp_path), report_to="none", use_cpu=True, credit="none")
    with pytest.raises(UserInputError, match=r"empty prompt and environment SilentEnv.reset"):
        GEARTrainer("no/such-model", args=args, train_dataset=empty_rows(), environment_factory=SilentEnv)


def test_empty_prompts_through_a_recipe(tmp_path):
    rows = [{"prompt": EMPTY, "task_a": 1, "task_b": 2}] * 4
    script_args, training_args, _ = recipe(tmp_path, rows, "--environment", INSTRUCTION, "--credit", "none")
    train, _ = load_splits(script_args, training_args)  # accepted: an environment may supply the instruction
    assert train[0]["prompt"] == EMPTY
    script_args, training_args, _ = recipe(tmp_path, rows, "--credit", "none", "--reward_funcs", "format")
    with pytest.raises(PreflightError, match=r"row 0: the prompt is empty \(with no `environment`"):
        load_splits(script_args, training_args)


# --- the environment preflight switch --------------------------------------------------------------------------------


def test_environment_preflight_false_builds_nothing_and_calls_no_reset():
    Counted.built = Counted.resets = 0
    with pytest.warns(UserWarning, match="4 rows have an empty prompt and `environment_preflight: false` skips"):
        factory = check_environments(Counted, empty_rows(), preflight=False)
    assert factory is Counted and (Counted.built, Counted.resets) == (0, 0)
    check_environments(SilentEnv, Dataset.from_list([{"prompt": PROMPT, "task_a": 1, "task_b": 1}]), preflight=False)
    assert GEARConfig(output_dir="x", use_cpu=True, environment_preflight=False).environment_preflight is False


def test_a_factory_function_gets_its_plumbing_hidden_without_the_preflight():
    class Keyed(InstructionEnv):
        def state_key(self) -> str:
            return str(self.expected)

    factory = check_environments(lambda: Keyed(), empty_rows(), preflight=False)
    assert "state_key" in Keyed.__dict__ and callable(Keyed.state_key)  # nothing built yet
    environment = factory()
    assert not callable(Keyed.state_key)  # hidden from TRL's tool discovery once built
    assert environment.state_key() == "0"


# --- the environment's own reward ------------------------------------------------------------------------------------


def test_no_default_reward_beside_an_environment_that_supplies_its_own(tmp_path):
    script_args, *_ = recipe(tmp_path, None, "--environment", GUESS)
    assert reward_names(script_args) == []
    script_args, *_ = recipe(tmp_path, None, "--environment", "tests.bank_plugin.bank:BankEnv")
    assert reward_names(script_args) == ["accuracy"]  # BankEnv has no get_reward: the default stays
    script_args, *_ = recipe(tmp_path, None)
    assert reward_names(script_args) == ["accuracy"]
    script_args, *_ = recipe(tmp_path, None, "--environment", GUESS, "--reward_funcs", "format")
    with pytest.warns(UserWarning, match=r"reward_funcs \['format'\] are summed with the reward of \['GuessEnv'\]"):
        assert reward_names(script_args, warn=True) == ["format"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        reward_names(script_args)  # warned once, when the trainer is built


# --- several environments --------------------------------------------------------------------------------------------


def test_several_environments_from_a_recipe_with_trls_routing(tmp_path):
    spec = {"guess": GUESS, "sum": INSTRUCTION}
    rows = [
        {"prompt": PROMPT, "environment": "guess", "secret": 5, "task_a": None, "task_b": None},
        {"prompt": EMPTY, "environment": "sum", "secret": None, "task_a": 1, "task_b": 2},
    ]
    (tmp_path / "r.yaml").write_text(json.dumps({"environment": spec, "credit": "none"}))
    script_args, training_args, _ = recipe(tmp_path, rows, "--config", str(tmp_path / "r.yaml"))
    assert script_args.environment == spec
    factories = get_environment_factories(script_args.environment)
    assert factories == {"guess": GuessEnv, "sum": InstructionEnv}
    assert get_environment_factories(json.dumps(spec)) == factories  # JSON text on the command line
    assert reward_names(script_args) == []  # each supplies its own reward
    train, _ = load_splits(script_args, training_args)
    assert check_environments(factories, train) == factories  # each reset on its own rows, without `environment`

    unknown = Dataset.from_list([{**rows[0], "environment": "chess"}])
    with pytest.raises(UserInputError, match=r"1 rows name an environment that is not among \['guess', 'sum'\]"):
        check_environments(factories, unknown)
    with pytest.raises(UserInputError, match=r"need an `environment` column"):
        check_environments(factories, Dataset.from_list([{"prompt": PROMPT, "secret": 1}]))
    mixed = {"guess": GUESS, "bank": "tests.bank_plugin.bank:BankEnv"}
    (tmp_path / "m.yaml").write_text(json.dumps({"environment": mixed}))
    script_args, *_ = recipe(tmp_path, None, "--config", str(tmp_path / "m.yaml"))
    with pytest.raises(PreflightError, match=r"\['guess'\] supply their own reward .* and \['bank'\] do not"):
        reward_names(script_args)


def test_several_environments_check_each_rows_tools_against_its_own_environment():
    def schema(name):
        return json.dumps([{"type": "function", "function": {"name": name, "parameters": {}}}])

    factories = {"guess": GuessEnv, "sum": InstructionEnv}
    rows = [
        {"prompt": PROMPT, "environment": "guess", "secret": 5, "task_a": 0, "task_b": 0, "tools": schema("guess")},
        {"prompt": PROMPT, "environment": "sum", "secret": 0, "task_a": 1, "task_b": 2, "tools": schema("submit")},
    ]
    check_environments(factories, Dataset.from_list(rows))  # each row's tools exist in its own environment
    rows[0]["tools"] = schema("submit")
    with pytest.raises(UserInputError, match=r"advertises \['submit'\], which environment 'guess' GuessEnv"):
        check_environments(factories, Dataset.from_list(rows))


# --- async tools are recorded for GiGPO ------------------------------------------------------------------------------


class Counter:
    def __init__(self):
        self.count = 0

    def add(self, by: int) -> str:
        self.count += by
        return str(self.count)

    async def add_later(self, by: int) -> str:
        await asyncio.sleep(0)
        self.count += by
        return str(self.count)

    def state_key(self) -> str:
        return f"count={self.count}"


class Base:
    """TRL's `_generate` in miniature: a first turn, then per round its tools (sync ones, then the async ones
    together) and the next turn's generation. A call of an unknown tool gets TRL's error result without running."""

    use_vllm = False
    args = None  # read only with vLLM
    rounds = ()  # per round: the (tool name, arguments) calls

    def _generate_single_turn(self, prompt_ids, images, multimodal_fields, num_generations, has_tool_images=False):
        self.turns += 1
        return [[0]] * len(prompt_ids), None

    def _generate(self, prompts):
        self.turns = 0
        sync, coroutines = self._sync_tool_dicts[0], self._async_tool_dicts[0]
        results = []
        self._generate_single_turn([[0]], None, {}, 1)
        for calls in self.rounds:
            pending = []
            for name, arguments in calls:
                if name in sync:
                    results.append(sync[name](**arguments))
                elif name in coroutines:
                    pending.append(coroutines[name](**arguments))
                else:
                    results.append(str({"error": f"Tool {name} not found."}))

            async def run(pending=pending):
                return await asyncio.gather(*pending)

            results += asyncio.run(run())
            self._generate_single_turn([[0]], None, {}, 1)
        return results


class Recording(ToolRolloutMixin, Base):
    pass


def recording(rounds):
    environment = Counter()
    trainer = Recording()
    trainer.rounds = rounds
    trainer.environments = [environment]
    trainer._sync_tool_dicts = [{"add": environment.add}]
    trainer._async_tool_dicts = [{"add_later": environment.add_later}]
    return trainer


def conversation(rounds, results):
    """The completion messages TRL writes for `rounds`: each round's assistant turn, then one tool message a call."""
    messages, answers = [], iter(results)
    for calls in rounds:
        messages.append({"role": "assistant", "content": "", "tool_calls": [{} for _ in calls]})
        messages += [{"role": "tool", "content": next(answers)} for _ in calls]
    return [*messages, {"role": "assistant", "content": "done"}]


def test_async_tools_are_recorded_for_gigpos_anchor_states():
    rounds = [[("add", {"by": 1}), ("add_later", {"by": 2}), ("add_later", {"by": 3})]]
    trainer = recording(rounds)
    results = trainer._generate(["p"])
    assert results == ["1", "3", "6"]
    history = trainer._rollout.state_history[0]
    assert history == ["count=6"]  # one state a round, taken once its async calls have all run
    assert step_anchors("p", conversation(rounds, results), history)[1] == "state:count=6"
    assert isinstance(trainer._rollout, RolloutRecord)
    assert trainer._turns_generated is None  # the round count ends with its `_generate`


def test_a_round_whose_call_runs_no_tool_still_anchors_the_next_turn_on_its_state():
    """TRL answers a call of an unknown tool without running any tool; the turns after it keep their own rounds'
    states (recorded per call, the unknown call's turn would read the next round's state)."""
    rounds = [[("no_such_tool", {})], [("add", {"by": 1})], [("add", {"by": 2})]]
    trainer = recording(rounds)
    results = trainer._generate(["p"])
    history = trainer._rollout.state_history[0]
    assert history == ["count=0", "count=1", "count=3"]
    anchors = step_anchors("p", conversation(rounds, results), history)
    assert anchors[1:] == ["state:count=0", "state:count=1", "state:count=3"]


def test_step_anchors_fall_back_to_tool_text_past_the_recorded_rounds():
    completion = conversation([[("add", {})], [("add", {})]], ["1", "2"])
    assert step_anchors("p", completion, ["count=1"])[1:] == ["state:count=1", "tools:2"]
    assert step_anchors("p", completion, None)[1:] == ["tools:1", "tools:2"]


def counter_rollout(tmp_path, first_call: str):
    """One scripted batch of gigpo in TRL's own tool loop on `AsyncCounterEnv` (4 rows from 0): each rollout calls
    `first_call` with by=1, then `increment` by 1 (even rollouts) or 2 (odd ones), then answers. Returns the record."""
    from tests.scripted import call_text, scripted_trainer

    def script(row, round_index, rollout_index, rank):
        if round_index == 0:
            return call_text(first_call, {"by": 1})
        if round_index == 1:
            return call_text("increment", {"by": 1 + rollout_index % 2})
        return "Done."

    rows = [{"prompt": PROMPT, "start": 0}] * 4
    path = tmp_path / "rows.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    argv = ["--config", "tests/trl_env_plugin/guess.yaml", "--dataset_name", str(path), "--credit", "gigpo"]
    argv += ["--environment", "tests.trl_env_plugin.games:AsyncCounterEnv", "--output_dir", str(tmp_path / "out")]
    argv += ["--max_tool_calling_iterations", "3", "--max_completion_length", "128"]
    trainer = scripted_trainer(script, argv)
    trainer.model.train()
    trainer._generate_and_score_completions(next(iter(trainer.get_train_dataloader())))
    return trainer, trainer._rollout


def anchors_of(record) -> list[list[str]]:
    return [step_anchors(p, c, h)[1:] for p, c, h in zip(record.prompts, record.completions, record.state_history)]


@pytest.mark.slow
def test_async_tools_give_gigpo_state_anchors_in_trls_tool_loop(tmp_path):
    # every rollout adds 1, then half of them add 1 more and the others 2: the second turns act on one state
    # (count=1), the third on two (count=2 or count=3)
    trainer, record = counter_rollout(tmp_path, "increment")
    assert record.state_history == [["count=1", "count=2"], ["count=1", "count=3"]] * 2
    assert anchors_of(record) == [["state:count=1", "state:count=2"], ["state:count=1", "state:count=3"]] * 2
    assert record.rewards_per_func[:, 0].tolist() == [2.0, 3.0, 2.0, 3.0]  # the environment's get_reward
    assert trainer._metrics["train"]["gigpo/step_groups"][-1] > 0


@pytest.mark.slow
def test_an_unknown_tool_call_keeps_gigpos_anchor_states_in_trls_tool_loop(tmp_path):
    """In TRL's own tool loop a call of an unknown tool runs nothing; the next turn acts on the unchanged state and
    the turn after the next round on that round's state (not one round late)."""
    _, record = counter_rollout(tmp_path, "no_such_tool")
    assert record.state_history == [["count=0", "count=1"], ["count=0", "count=2"]] * 2
    assert anchors_of(record) == [["state:count=0", "state:count=1"], ["state:count=0", "state:count=2"]] * 2
    assert record.tool_calls.trl_failures == 4  # TRL's own count of the unknown calls


# --- rollout_func ----------------------------------------------------------------------------------------------------


def rollout(prompts, trainer):
    raise AssertionError("never called before the model loads")


@pytest.mark.parametrize(
    ("credit", "reasons"),
    [
        ("gear", ["GEAR's teacher"]),
        ("gigpo", ["GiGPO needs each step's anchor state"]),
        ("gear-gigpo", ["GEAR's teacher", "GiGPO needs"]),
        ("rlsd", ["GEAR's teacher"]),
    ],
)
def test_rollout_func_is_refused_before_the_model_loads_where_credit_cannot_use_it(tmp_path, credit, reasons):
    args = GEARConfig(output_dir=str(tmp_path), report_to="none", use_cpu=True, credit=credit)
    rows = Dataset.from_list([{"prompt": PROMPT, "ground_truth": "1"}] * 4)
    with pytest.raises(
        UserInputError, match=re.escape(f"`credit: {credit}` cannot run with a custom `rollout_func`")
    ) as info:
        GEARTrainer(
            "no/such-model",
            [lambda completions, **_: [0.0] * len(completions)],
            args=args,
            train_dataset=rows,
            rollout_func=rollout,
        )
    assert all(reason in str(info.value) for reason in reasons)


def test_rollout_func_passes_the_checks_under_credit_none(tmp_path):
    args = GEARConfig(output_dir=str(tmp_path), report_to="none", use_cpu=True, credit="none")
    rows = Dataset.from_list([{"prompt": PROMPT}] * 4)
    with pytest.raises(OSError):  # past GEAR's checks: the (missing) model's load is what fails
        GEARTrainer(
            "no/such-model",
            [lambda completions, **_: [0.0] * len(completions)],
            args=args,
            train_dataset=rows,
            rollout_func=rollout,
        )


@pytest.mark.slow
def test_rollout_func_trains_under_credit_none(tmp_path):
    from tests.utils import TINY, tiny_args

    calls = []

    def fixed_rollout(prompts, trainer):
        # a rollout function of one's own: render the prompts itself and answer "4" to each
        calls.append(len(prompts))
        tokenizer = trainer.processing_class
        prompt_ids = [
            tokenizer.apply_chat_template(p, add_generation_prompt=True, tokenize=True, return_dict=True)["input_ids"]
            for p in prompts
        ]
        answer = tokenizer("4" + tokenizer.eos_token, add_special_tokens=False)["input_ids"]
        return {
            "prompt_ids": [list(ids) for ids in prompt_ids],
            "completion_ids": [list(answer) for _ in prompts],
            "logprobs": [[0.0] * len(answer) for _ in prompts],
        }

    def is_four(completions, **kwargs):
        return [float(c[-1]["content"].strip() == "4") for c in completions]

    rows = Dataset.from_list([{"prompt": [{"role": "user", "content": f"{i} + {4 - i}?"}]} for i in range(4)])
    args = tiny_args(tmp_path, credit="none", max_steps=1)
    trainer = GEARTrainer(TINY, [is_four], args=args, train_dataset=rows, rollout_func=fixed_rollout)
    trainer.train()
    assert trainer.state.global_step == 1 and calls
    assert trainer.state.log_history[0]["rewards/is_four/mean"] == 1.0


# --- recipe runs through gear_trl.train (slow) -----------------------------------------------------------------------


def logged_keys(trainer) -> set[str]:
    return {key for entry in trainer.state.log_history for key in entry}


@pytest.mark.slow
def test_a_trl_environment_with_its_own_reward_trains_from_a_recipe(tmp_path, monkeypatch):
    monkeypatch.setenv("TRL_EXPERIMENTAL_SILENCE", "1")
    trainer = main(*parse_args(["--config", "tests/trl_env_plugin/guess.yaml", "--output_dir", str(tmp_path)]))
    assert trainer.state.global_step == 2
    rewards = {key for key in logged_keys(trainer) if key.startswith("rewards/")}
    # the environment's alone, no accuracy; guarded like any reward (its non-finite share, the unscored share)
    assert rewards == {
        "rewards/GuessEnv/mean",
        "rewards/GuessEnv/std",
        "rewards/GuessEnv/non_finite_frac",
        "rewards/unscorable_frac",
    }
    assert {"gear/kl_mean", "gigpo/step_groups"} <= logged_keys(trainer)
    assert trainer.train_dataset.column_names == ["prompt", "ground_truth", "secret"]


@pytest.mark.slow
def test_an_empty_prompt_environment_trains_from_a_recipe(tmp_path, monkeypatch):
    monkeypatch.setenv("TRL_EXPERIMENTAL_SILENCE", "1")
    trainer = main(*parse_args(["--config", "tests/trl_env_plugin/instructions.yaml", "--output_dir", str(tmp_path)]))
    assert trainer.state.global_step == 2
    assert {k for k in logged_keys(trainer) if k.startswith("rewards/")} == {
        "rewards/InstructionEnv/mean",
        "rewards/InstructionEnv/std",
        "rewards/InstructionEnv/non_finite_frac",
        "rewards/unscorable_frac",
    }
    # the prompts the model was given carry the instruction `reset` returned
    instructions = [prompt[-1]["content"] for prompt in trainer._rollout.prompts]
    assert all(text.startswith("What is ") and "Call `submit`" in text for text in instructions)


@pytest.mark.slow
def test_several_environments_train_from_a_recipe(tmp_path, monkeypatch):
    monkeypatch.setenv("TRL_EXPERIMENTAL_SILENCE", "1")
    trainer = main(*parse_args(["--config", "tests/trl_env_plugin/mixed.yaml", "--output_dir", str(tmp_path)]))
    assert trainer.state.global_step == 2
    assert {k for k in logged_keys(trainer) if k.startswith("rewards/") and k.endswith("/mean")} == {
        "rewards/GuessEnv/mean",
        "rewards/InstructionEnv/mean",
    }
    assert set(trainer.environment_factories) == {"guess", "sum"}
