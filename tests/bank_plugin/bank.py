"""A user's own task, kept outside gear_trl and used only by import path (`tests.bank_plugin.bank:BankEnv`, ...): a
bank API environment with three tools and a GiGPO state key, a reward reading the environment, and a dataset adapter
for rows in a format of its own (`request`, `calls`, `final`). tests/inputs/test_plugins.py loads it as a user would."""

from __future__ import annotations

import json


class BankEnv:
    """Accounts and balances; `reset` loads a row's `accounts` (JSON text) or two default accounts."""

    def __init__(self):
        self.balances: dict[str, int] = {}

    def reset(self, **row) -> None:
        self.balances = json.loads(row.get("accounts") or '{"alice": 100, "bob": 20}')

    def get_balance(self, account: str) -> str:
        """Return the balance of an account.

        Args:
            account: The account name.
        """
        if account not in self.balances:
            return f"Error: no account {account!r}"
        return str(self.balances[account])

    def deposit(self, account: str, amount: int) -> str:
        """Deposit money into an account.

        Args:
            account: The account name.
            amount: The amount to deposit.
        """
        self.balances[account] = self.balances.get(account, 0) + int(amount)
        return str(self.balances[account])

    def transfer(self, source: str, target: str, amount: int) -> str:
        """Move money between two accounts.

        Args:
            source: The account to take the money from.
            target: The account to give it to.
            amount: The amount to move.
        """
        if self.balances.get(source, 0) < int(amount):
            return "Error: insufficient funds"
        self.balances[source] -= int(amount)
        self.balances[target] = self.balances.get(target, 0) + int(amount)
        return "ok"

    def state_key(self) -> str:
        return json.dumps(self.balances, sort_keys=True)


def balance_reward(completions, final=None, environments=None, **kwargs):
    """1.0 when the environment's balances after the rollout equal the row's `final` balances (JSON text)."""
    rewards = []
    for i, _ in enumerate(completions):
        environment = environments[i] if environments else None
        expected = final[i] if final else None
        if environment is None or not expected:
            rewards.append(None)
            continue
        try:
            rewards.append(float(environment.balances == json.loads(expected)))
        except ValueError:
            rewards.append(0.0)
    return rewards


def to_example(row: dict) -> dict:
    """A row `{"request": str, "calls": [{"name", "arguments"}], "final": {account: balance}}` in GEAR's form."""
    return {
        "prompt": row["request"],
        "ground_truth": json.dumps(row["calls"]) if not isinstance(row["calls"], str) else row["calls"],
        "final": json.dumps(row["final"]) if not isinstance(row["final"], str) else row["final"],
    }
