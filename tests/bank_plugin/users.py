"""Users of one's own for the bank task, loaded only by import path (`tests.bank_plugin.users:Customer`, ...) as
`--user_simulator` plug-ins: tests/evaluation/test_user_sim.py drives conversations with them."""

from __future__ import annotations


class Customer:
    """Asks for one deposit per turn, `turns` user turns in all (the row's prompt the first), then stops; keeps every
    conversation it was shown (`seen`), to check what the agent's side looked like."""

    def __init__(self, turns: int = 3, amount: int = 5):
        self.turns, self.amount = turns, amount
        self.required_columns = ("user_goal",)
        self.seen: list[tuple[list[dict], int]] = []

    def next_turn(self, messages, row, turn):
        self.seen.append(([dict(m) for m in messages], turn))
        if turn >= self.turns:
            return None
        return f"Please deposit {self.amount} more into bob's account ({row['user_goal']}, turn {turn})."


class Crashing:
    """Raises on every turn: what a broken simulator does."""

    def next_turn(self, messages, row, turn):
        raise RuntimeError("the simulator's server went away")


def junk(**kwargs):
    """A factory whose simulator answers with something that is not a user message."""

    class Junk:
        def next_turn(self, messages, row, turn):
            return {"role": "assistant", "content": 42}

    return Junk()
