"""The studies' statistics (pure, standard library only): paired t-intervals over seeds, the paired bootstrap of a
ratio of means, means that skip missing values, and Holm's step-down correction for a family of tests.

The t-interval, t-test and Holm helpers are `gear_trl.table`'s, which the paper's table builder (`gear-trl-table`)
shares.
"""

from __future__ import annotations

import math
import random
import statistics

from gear_trl import table

t_quantile, paired_interval = table.t_quantile, table.paired_interval
t_p_value, holm = table.paired_t_test, table.holm
"""The two-sided paired t-test's p-value and Holm's step-down correction over a declared family, `gear_trl.table`'s
(tested there on hand-worked values)."""
LEVEL = table.LEVEL


def mean_std(values: list[float]) -> tuple[float, float]:
    """Mean and sample standard deviation of the values that are not None or NaN (0 sd for one; NaN for none)."""
    values = [v for v in values if v is not None and not math.isnan(v)]
    if not values:
        return math.nan, math.nan
    return statistics.fmean(values), (statistics.stdev(values) if len(values) > 1 else 0.0)


def window_mean(values: list, start: int, stop: int | None = None) -> float:
    """Mean of `values[start:stop]` that are not None; NaN when none is left."""
    part = [v for v in values[start:stop] if v is not None]
    return statistics.fmean(part) if part else math.nan


def nan_mean(values) -> float | None:
    """Mean of the values that are not None or NaN; None when none is left."""
    kept = [v for v in values if v is not None and not math.isnan(v)]
    return statistics.fmean(kept) if kept else None


def bootstrap_ratio(
    numerator: dict[int, float], denominator: dict[int, float], draws: int = 2000, seed: int = 0
) -> dict | None:
    """mean(numerator) / mean(denominator) over the seeds both have, with a paired percentile bootstrap interval.

    Args:
        numerator, denominator: seed -> value (e.g. an arm's and a ceiling's paired difference from a baseline).

    Returns:
        {"mean", "ci_low", "ci_high" (the 2.5th and 97.5th percentiles of the ratio over `draws` resamples of the
        shared seeds; a resample whose denominator mean is <= 0 counts as -inf / +inf by the numerator's sign),
        "n_seeds"}; None with fewer than 2 shared seeds (NaN values left out).
    """
    seeds = sorted(set(numerator) & set(denominator))
    seeds = [s for s in seeds if not (math.isnan(numerator[s]) or math.isnan(denominator[s]))]
    if len(seeds) < 2:
        return None
    a = [numerator[s] for s in seeds]
    c = [denominator[s] for s in seeds]
    mean = statistics.fmean(a) / statistics.fmean(c)
    rng = random.Random(seed)
    ratios = []
    for _ in range(draws):
        picks = [rng.randrange(len(seeds)) for _ in seeds]
        num = statistics.fmean(a[i] for i in picks)
        den = statistics.fmean(c[i] for i in picks)
        ratios.append(num / den if den > 0 else math.copysign(math.inf, num or 1.0))
    ratios.sort()
    low = ratios[int(0.025 * (draws - 1))]
    high = ratios[math.ceil(0.975 * (draws - 1))]
    return {"mean": mean, "ci_low": low, "ci_high": high, "n_seeds": len(seeds)}


def tost(differences: list[float], margin: float, alpha: float = 0.05) -> dict:
    """Two one-sided paired t-tests of equivalence: is the mean paired difference inside (-margin, +margin)?

    H0 below: mean <= -margin, rejected when p_lower = P(T >= (mean + margin) / se) < alpha; H0 above: mean >= margin,
    rejected when p_upper = P(T <= (mean - margin) / se) < alpha (Student's t, n - 1 degrees of freedom). Both
    rejected (``p = max(p_lower, p_upper) < alpha``) is the same as the (1 - 2 alpha) t-interval lying inside
    (-margin, +margin): with alpha 0.05, the 90% interval.

    Args:
        differences: per-seed paired differences (None and NaN left out).
        margin: the equivalence margin, > 0.
        alpha: each one-sided test's level.

    Returns:
        {"mean", "ci_low", "ci_high" (the 1 - 2 alpha interval), "level", "n_seeds", "margin", "p_lower", "p_upper",
        "p" (the larger), "equivalent" (p < alpha)}; NaN p-values and False with fewer than 2 seeds. With no spread
        a one-sided p is 0 where the mean is strictly inside that side's bound, else 1.
    """
    if not margin > 0:
        raise ValueError(f"margin must be > 0; got {margin}.")
    values = [d for d in differences if d is not None and not math.isnan(d)]
    n = len(values)
    level = 1 - 2 * alpha
    interval = paired_interval(values, level=level)
    out = {k: interval[k] for k in ("mean", "ci_low", "ci_high", "n_seeds")}
    out.update(level=level, margin=margin)
    if n < 2:
        return {**out, "p_lower": math.nan, "p_upper": math.nan, "p": math.nan, "equivalent": False}
    mean, sd = statistics.fmean(values), statistics.stdev(values)
    if sd == 0:
        p_lower, p_upper = (0.0 if mean > -margin else 1.0), (0.0 if mean < margin else 1.0)
    else:
        se = sd / math.sqrt(n)
        p_lower = 1 - table.t_cdf((mean + margin) / se, n - 1)
        p_upper = table.t_cdf((mean - margin) / se, n - 1)
    p = max(p_lower, p_upper)
    return {**out, "p_lower": p_lower, "p_upper": p_upper, "p": p, "equivalent": p < alpha}
