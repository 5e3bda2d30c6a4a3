"""The studies' statistics (pure, standard library only): paired t-intervals over seeds, the paired bootstrap of a
ratio of means, means that skip missing values, and Holm's step-down correction for a family of tests.

The t-interval helpers are `gear_trl.table`'s, which the paper's table builder (`gear-trl-table`) shares.
"""

from __future__ import annotations

import math
import random
import statistics

from gear_trl import table

t_quantile, paired_interval = table.t_quantile, table.paired_interval
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


def t_p_value(differences: list[float]) -> float:
    """Two-sided p-value of the one-sample t-test that the mean of `differences` is 0 (NaN with fewer than 2 values or
    no spread). Student's t CDF by the regularized incomplete beta function (continued fraction)."""
    values = [d for d in differences if d is not None and not math.isnan(d)]
    n = len(values)
    if n < 2:
        return math.nan
    sd = statistics.stdev(values)
    if sd == 0:
        return math.nan
    t = statistics.fmean(values) / (sd / math.sqrt(n))
    df = n - 1
    return _betainc(df / 2, 0.5, df / (df + t * t))


def _betainc(a: float, b: float, x: float) -> float:
    """The regularized incomplete beta function I_x(a, b) (Numerical Recipes' continued fraction)."""
    if x <= 0:
        return 0.0
    if x >= 1:
        return 1.0
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x))
    if x > (a + 1) / (a + b + 2):
        return 1.0 - _betainc(b, a, 1.0 - x)
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1)
    d = 1.0 / (d if abs(d) > 1e-300 else 1e-300)
    f = d
    for m in range(1, 300):
        for numerator in (
            m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
            -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1)),
        ):
            d = 1.0 + numerator * d
            d = 1.0 / (d if abs(d) > 1e-300 else 1e-300)
            c = 1.0 + numerator / c
            c = c if abs(c) > 1e-300 else 1e-300
            f *= c * d
        if abs(c * d - 1.0) < 1e-14:
            break
    return front * f / a


def holm(p_values: list[float]) -> list[float]:
    """Holm's step-down adjusted p-values, in the order given: sort ascending, p_(i) * (m - i) for i = 0..m-1,
    made non-decreasing by a running maximum and capped at 1. Reject at level alpha where the adjusted value is
    <= alpha (family-wise error at most alpha). A NaN p-value is left NaN and not counted in m."""
    indexed = sorted((p, i) for i, p in enumerate(p_values) if not math.isnan(p))
    m = len(indexed)
    out = [math.nan] * len(p_values)
    running = 0.0
    for rank, (p, i) in enumerate(indexed):
        running = max(running, min(1.0, p * (m - rank)))
        out[i] = running
    return out
