"""pass@k: the unbiased estimate of Chen et al. (2021) from `n` samples per prompt, and the k an evaluation report gives."""

from __future__ import annotations

from collections.abc import Sequence

from ..inputs.errors import UserInputError


def _mean(values) -> float | None:
    values = [v for v in values if v is not None]
    return sum(values) / len(values) if values else None


def pass_at_k(n: int, c: int, k: int) -> float:
    """The unbiased estimate of pass@k from `n` samples of which `c` are correct: `1 - C(n-c, k) / C(n, k)`, the
    probability that `k` samples drawn without replacement from the `n` include a correct one (Chen et al. 2021,
    "Evaluating Large Language Models Trained on Code", eq. 1).

    Computed as `1 - prod_{i=n-c+1}^{n} (1 - k / i)`, which never forms the binomials (C(1100, 550) > 1e308 would
    overflow a float).
    Raises ValueError unless `0 <= c <= n` and `1 <= k <= n`.
    """
    if not (0 <= c <= n) or not (1 <= k <= n):
        raise ValueError(f"pass@k needs 0 <= c <= n and 1 <= k <= n, got n={n}, c={c}, k={k}.")
    if n - c < k:  # every k-subset holds a correct sample
        return 1.0
    product = 1.0
    for i in range(n - c + 1, n + 1):
        product *= 1.0 - k / i
    return 1.0 - product


def default_pass_ks(num_samples: int) -> list[int]:
    """The k of the pass@k a report gives by default: 1, the powers of two below `num_samples`, and `num_samples`."""
    ks, k = {1, num_samples}, 2
    while k < num_samples:
        ks.add(k)
        k *= 2
    return sorted(ks)


CORRECT = 1.0
"""A sample counts as correct for pass@k when its first reward reaches this value: full credit of the 0/1 task
rewards (`accuracy`, `tool_call_accuracy`, `multi_turn_state`); a partial score is not a pass."""


def _pass_ks(pass_ks: Sequence[int] | None, num_samples: int) -> list[int]:
    """The k to report (always `num_samples` among them); refuses a k outside 1..num_samples."""
    if not pass_ks:
        return default_pass_ks(num_samples)
    bad = [k for k in pass_ks if not 1 <= k <= num_samples]
    if bad:
        raise UserInputError(f"pass@k needs 1 <= k <= num_samples ({num_samples}); got k = {bad}.")
    return sorted(set(pass_ks) | {num_samples})


def _pass_at(names: list[str], per_sample: list[dict], ks: Sequence[int]) -> dict[str, float | None]:
    """`{str(k): mean over prompts of pass_at_k(n, c, k)}`: `n` a prompt's scored samples, `c` the correct ones;
    a prompt with fewer than `k` scored samples is left out of that k's mean (None if every prompt is)."""
    counts: dict[int, list[int]] = {}
    for sample in per_sample:
        value = sample["rewards"][names[0]] if names else None
        if value is not None:
            n_c = counts.setdefault(sample["index"], [0, 0])
            n_c[0] += 1
            n_c[1] += value >= CORRECT
    return {str(k): _mean(pass_at_k(n, c, k) for n, c in counts.values() if n >= k) for k in ks}
