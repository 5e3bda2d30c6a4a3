"""Environments of a user's own written in TRL's documented `environment_factory` style (TRL's GRPOTrainer docs:
a class built without arguments, `reset(**kwargs)` returning None or the text to append to the prompt, public methods
with type hints and a Google-style docstring as tools, `get_reward()` scoring the rollout from the environment's
state). Nothing here imports gear_trl: tests/envs/test_trl_envs.py and the recipes next to this file use them by import
path, as a TRL user would bring them.

- `GuessEnv`: guess a secret number with higher/lower hints; the row's `secret` column (a column no dataset adapter
  knows) is read by `reset`, and `get_reward` is the environment's own reward.
- `InstructionEnv`: rows with an empty prompt, as TRL's Harbor and OpenReward integrations build them; `reset` returns
  the instruction built from the row's `task_a` and `task_b` columns.
- `SilentEnv`: `InstructionEnv` whose `reset` returns nothing, so empty prompts would stay empty.
- `AsyncCounterEnv`: an `async def` tool and a `state_key` for GiGPO.
"""

from __future__ import annotations


class GuessEnv:
    """Guess the secret number between 1 and 100."""

    def __init__(self):
        self.secret = 0
        self.guesses: list[int] = []

    def reset(self, **kwargs) -> str | None:
        self.secret = int(kwargs["secret"])
        self.guesses = []
        return None

    def guess(self, number: int) -> str:
        """Guess the secret number.

        Args:
            number: The number to try, between 1 and 100.

        Returns:
            "higher", "lower" or "correct".
        """
        try:
            number = int(number)
        except (TypeError, ValueError):
            return "Error: the guess must be a whole number"
        self.guesses.append(number)
        if number == self.secret:
            return "correct"
        return "higher" if number < self.secret else "lower"

    def get_reward(self) -> float:
        """1 for finding the secret, less a tenth per extra guess; 0 without finding it."""
        if self.secret not in self.guesses:
            return 0.0
        return max(0.0, 1.0 - 0.1 * self.guesses.index(self.secret))


class InstructionEnv:
    """Adds two numbers given by the row; the prompt itself is empty and the instruction comes from `reset`."""

    def __init__(self):
        self.expected = 0
        self.answered: int | None = None

    def reset(self, **kwargs) -> str:
        a, b = int(kwargs["task_a"]), int(kwargs["task_b"])
        self.expected, self.answered = a + b, None
        return f"What is {a} + {b}? Call `submit` with the sum."

    def submit(self, total: int) -> str:
        """Submit the answer.

        Args:
            total: The sum of the two numbers.

        Returns:
            Whether the answer was recorded.
        """
        try:
            self.answered = int(total)
        except (TypeError, ValueError):
            return "Error: the answer must be a whole number"
        return "recorded"

    def get_reward(self) -> float:
        return float(self.answered == self.expected)


class SilentEnv(InstructionEnv):
    """Like `InstructionEnv` but its `reset` returns nothing: rows with an empty prompt would show no instruction."""

    def reset(self, **kwargs) -> None:
        super().reset(**kwargs)


class AsyncCounterEnv:
    """A counter whose tool is a coroutine function (TRL runs those on its event loop), with a GiGPO state key."""

    def __init__(self):
        self.count = 0

    def reset(self, **kwargs) -> None:
        self.count = int(kwargs.get("start") or 0)

    async def increment(self, by: int) -> str:
        """Add to the counter.

        Args:
            by: How much to add.

        Returns:
            The new count.
        """
        self.count += int(by)
        return str(self.count)

    def state_key(self) -> str:
        return f"count={self.count}"

    def get_reward(self) -> float:
        return float(self.count)
