"""Bringing a task of one's own without editing gear_trl (issue 22): environments, rewards and dataset adapters by
import path, single local data files, column mappings, and the environment checks made before the model loads."""

from __future__ import annotations

import json

import pytest
from datasets import Dataset

from gear_trl.data import get_adapter, prepare_dataset
from gear_trl.envs import Calculator, get_environment_factory, tool_names
from gear_trl.envs.checks import check_environment
from gear_trl.inputs.errors import UserInputError
from gear_trl.rewards import get_reward_funcs
from gear_trl.train import load_splits, parse_args
from tests.bank_plugin.bank import BankEnv, balance_reward

BANK = "tests.bank_plugin.bank"
RECIPE = "recipes/tiny/config_math.yaml"


# --- plug-ins by import path -----------------------------------------------------------------------------------------


def test_environment_reward_and_adapter_by_import_path():
    assert get_environment_factory(f"{BANK}:BankEnv") is BankEnv
    assert get_environment_factory("calculator") is Calculator  # built-in names are kept
    assert get_reward_funcs([f"{BANK}:balance_reward", "accuracy"])[0] is balance_reward
    assert get_reward_funcs([f"{BANK}.balance_reward"])[0] is balance_reward  # TRL's dotted form
    adapter = get_adapter(f"{BANK}:to_example")
    rows = Dataset.from_list([{"request": "Pay bob 5", "calls": [{"name": "transfer"}], "final": {"bob": 25}}])
    prepared = prepare_dataset(rows, adapter=f"{BANK}:to_example", system_prompt="You are a bank.")
    assert adapter.name == f"{BANK}:to_example"
    assert prepared[0]["prompt"] == [
        {"role": "system", "content": "You are a bank."},
        {"role": "user", "content": "Pay bob 5"},
    ]
    assert json.loads(prepared[0]["ground_truth"]) == [{"name": "transfer"}]
    assert json.loads(prepared[0]["final"]) == {"bob": 25}


def test_a_reward_class_by_import_path_is_instantiated(tmp_path, monkeypatch):
    (tmp_path / "my_rewards.py").write_text(
        "class Length:\n    __name__ = 'length'\n    def __call__(self, completions, **kw):\n"
        "        return [float(len(c)) for c in completions]\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    (reward,) = get_reward_funcs(["my_rewards:Length"])
    assert reward(["ab", "c"]) == [2.0, 1.0]


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("no_such_package.bank:BankEnv", "cannot import module 'no_such_package.bank'"),
        (f"{BANK}:BankEnvv", f"module '{BANK}' has no attribute 'BankEnvv'"),
        (
            "bank",
            r"Unknown environment 'bank'; built-in names: \['bfcl', 'bfcl_official', 'calculator'\], or an import path",
        ),
    ],
)
def test_an_import_path_that_fails_names_the_module_or_attribute(spec, message):
    with pytest.raises(UserInputError, match=message):
        get_environment_factory(spec)


def test_unknown_reward_and_adapter_errors_name_the_field():
    with pytest.raises(UserInputError, match="Unknown reward 'acuracy'"):
        get_reward_funcs(["acuracy"])
    with pytest.raises(UserInputError, match=f"dataset_format '{BANK}:nope'.*no attribute 'nope'"):
        get_adapter(f"{BANK}:nope")


# --- data: single files, column mappings, mixtures -------------------------------------------------------------------


def _write_rows(path, rows):
    import pandas as pd

    frame = pd.DataFrame(rows)
    if path.suffix == ".jsonl":
        frame.to_json(path, orient="records", lines=True)
    elif path.suffix == ".json":
        path.write_text(json.dumps(rows))
    elif path.suffix == ".csv":
        frame.to_csv(path, index=False)
    else:
        frame.to_parquet(path)


@pytest.mark.parametrize("suffix", [".jsonl", ".json", ".csv", ".parquet"])
def test_a_single_local_file_with_a_column_mapping_and_answer_pattern(tmp_path, suffix):
    rows = [
        {"question": "What is 2 + 3?", "answer": "Add them.\nAnswer: 5"},
        {"question": "What is 10 / 4?", "answer": "Divide.\nAnswer: 2.5"},
    ]
    path = tmp_path / f"my_math{suffix}"
    _write_rows(path, rows)
    script_args, training_args, _ = parse_args(
        [
            "--model_name_or_path", "data/tiny-qwen3", "--output_dir", str(tmp_path / "out"), "--report_to", "none",
            "--bf16", "false", "--dataset_name", str(path), "--dataset_format", "columns", "--answer_pattern", r"Answer:\s*(.+)",
        ]
    )  # fmt: skip
    train, _ = load_splits(script_args, training_args)
    assert train["ground_truth"] == ["5", "2.5"]
    assert "What is 2 + 3?" in train[0]["prompt"][-1]["content"]


def test_a_data_file_of_another_kind_is_refused_by_name(tmp_path):
    path = tmp_path / "my_math.txt"
    path.write_text("2 + 3 = 5\n")
    script_args, training_args, _ = parse_args(
        ["--model_name_or_path", "m", "--output_dir", str(tmp_path), "--bf16", "false", "--dataset_name", str(path)]
    )
    with pytest.raises(UserInputError, match=r"`dataset_name` .*my_math.txt.* \.jsonl, \.json, \.parquet, \.csv"):
        load_splits(script_args, training_args)


def test_trl_dataset_mixtures_are_refused_with_the_reason(tmp_path):
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text("model_name_or_path: m\nbf16: false\ndatasets:\n  - path: a\n  - path: b\n")
    with pytest.raises(
        UserInputError, match="`datasets` \\(TRL's dataset mixtures\\) is not supported.*one local file"
    ):
        parse_args(["--config", str(recipe), "--output_dir", str(tmp_path)])
    with pytest.raises(UserInputError, match="`datasets` \\(TRL's dataset mixtures\\) is not supported"):
        parse_args(["--config", RECIPE, "--datasets", "a"])  # on the command line too


# --- environment checks ----------------------------------------------------------------------------------------------


def test_state_key_and_reset_are_never_tools():
    class Bank(BankEnv):
        pass

    assert tool_names(Bank) == ["deposit", "get_balance", "transfer"]
    assert check_environment(Bank) == ["deposit", "get_balance", "transfer"]
    # TRL lists tools with getmembers(isfunction) on the class: state_key is no longer one of them, and still runs.
    import inspect

    listed = [name for name, _ in inspect.getmembers(Bank, predicate=inspect.isfunction) if not name.startswith("_")]
    assert "state_key" not in listed
    bank = Bank()
    bank.reset()
    assert bank.state_key() == '{"alice": 100, "bob": 20}'


class NoArgsDoc(BankEnv):
    def close_account(self, account: str) -> str:
        """Close an account."""
        return "ok"


class NoHint(BankEnv):
    def close_account(self, account) -> str:
        """Close an account.

        Args:
            account: The account name.
        """
        return "ok"


class ResetTakesNothing(BankEnv):
    def reset(self) -> None:
        self.balances = {}


class ResetReturnsDict(BankEnv):
    def reset(self, **row):
        super().reset(**row)
        return {"balances": self.balances}


ROWS = Dataset.from_list([{"prompt": [{"role": "user", "content": "Pay bob 5"}], "ground_truth": "[]"}])


@pytest.mark.parametrize(
    ("cls", "message"),
    [
        (NoArgsDoc, r"NoArgsDoc\.close_account: TRL cannot build its tool schema .*`Args:` entry"),
        (NoHint, r"NoHint\.close_account: TRL cannot build its tool schema .*type hint"),
        (ResetTakesNothing, r"ResetTakesNothing\.reset\(self\): .*reset\(\*\*row\).*does not take \['prompt'"),
        (ResetReturnsDict, r"ResetReturnsDict\.reset returned a dict on the first row; it must return None or a str"),
    ],
)
def test_environment_mistakes_are_refused_before_the_model_loads(tmp_path, cls, message):
    from gear_trl import GEARConfig, GEARTrainer

    args = GEARConfig(output_dir=str(tmp_path), report_to="none", use_cpu=True, credit="none")
    # The model does not exist: reaching the model load would fail differently.
    with pytest.raises(UserInputError, match=message):
        GEARTrainer(
            "no/such-model", reward_funcs=[balance_reward], args=args, train_dataset=ROWS, environment_factory=cls
        )


def test_a_tools_column_naming_tools_the_environment_lacks_is_refused(tmp_path):
    from gear_trl import GEARConfig, GEARTrainer

    schema = {"type": "function", "function": {"name": "transfer_money", "parameters": {}}}
    rows = Dataset.from_list([{**ROWS[0], "tools": json.dumps([schema])}])
    args = GEARConfig(output_dir=str(tmp_path), report_to="none", use_cpu=True, credit="none")
    with pytest.raises(UserInputError, match=r"advertises \['transfer_money'\], which environment BankEnv does not"):
        GEARTrainer("no/such-model", reward_funcs=[balance_reward], args=args, train_dataset=rows,
                    environment_factory=BankEnv)  # fmt: skip
    # the same names as the environment's pass
    good = {"type": "function", "function": {"name": "transfer", "parameters": {}}}
    assert check_environment(BankEnv, Dataset.from_list([{**ROWS[0], "tools": json.dumps([good])}]))
