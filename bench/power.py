"""How many training seeds a GEAR-vs-GRPO comparison needs: a power calculation from the CPU studies' own figures.

Every input is read from a committed study JSON: the per-seed paired differences (arm minus GRPO, `credit: none`,
seed by seed) of held-out sampled accuracy (`sampled_accuracy_minus_none`) and final-window training reward
(`reward_last_minus_none`). From those: the measured effect d (their mean) and the paired standard deviation s
(their standard deviation), and the seeds n a paired two-sided t-test at alpha 0.05 needs for 80% power

    the smallest n with  t(1 - alpha/2, n - 1) + t(power, n - 1) <= |d| sqrt(n) / s

(the t-approximation of the noncentral-t power; at d/s = 0.5 it gives 34 pairs, as the exact calculation does), for
the effect measured and for a fixed effect of 0.03, the size the CPU studies' gains have had.

    python -m bench.power                # the table (a few seconds)
    python -m bench.power --json out.json
    python -m bench.power --effect 0.03 --sd 0.025   # your own: seeds for an effect at a measured paired SD

The spreads are those of 2-layer models on CPU tasks; a Qwen3 run's spread between seeds is not measured here, so
the counts are a plan to revise with the first seeds' own paired spread (rerun `seeds_needed` with it).
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import statistics
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent

from gear_trl.table import t_quantile

ALPHA = 0.05
POWER = 0.80
TARGET_EFFECT = 0.03
"""The fixed effect the plan is sized for: the gains the CPU studies resolved were about this size."""
METRICS = {"sampled_accuracy_minus_none": "held-out accuracy", "reward_last_minus_none": "training reward"}
MAX_SEEDS = 100_000
_t = functools.cache(t_quantile)  # each (p, df) is asked for by several rows; one costs ~0.1 s


@dataclass(frozen=True)
class Comparison:
    """An arm against GRPO: its per-seed paired differences pooled over the study files `sources` (file, path of
    keys to the arm's cell), whose seeds are disjoint."""

    name: str
    sources: tuple[tuple[str, tuple[str, ...]], ...]


HORIZON_K8 = ("variants", "independent", "8", "arms")
COMPARISONS = (
    Comparison(
        "GEAR (paper), horizon K=8, seeds 0-7",
        (("bench/results/horizon/horizon.json", (*HORIZON_K8, "gear-answer")),),
    ),
    Comparison(
        "GEAR (paper), arithmetic, seeds 0-7",
        (("bench/results/headroom/headroom.json", ("tasks", "arith", "arms", "gear-answer")),),
    ),
    Comparison(
        "GEAR (paper), calculator tool use, seeds 0-7",
        (("bench/results/headroom/headroom.json", ("tasks", "calc_long", "arms", "gear")),),
    ),
    Comparison(
        "gear-signed, horizon K=8, seeds 0-31",
        (
            ("bench/results/horizon/horizon.json", (*HORIZON_K8, "gear-signed")),
            ("bench/results/horizon/replication_seeds_8_to_15/horizon.json", (*HORIZON_K8, "gear-signed")),
            ("bench/results/horizon/replication_seeds_16_to_31/horizon.json", (*HORIZON_K8, "gear-signed")),
        ),
    ),
    Comparison(
        "distillation blend 0.5, horizon K=8, seeds 0-47",
        (
            ("bench/results/horizon/horizon.json", (*HORIZON_K8, "gear-distill")),
            ("bench/results/horizon/replication_seeds_8_to_15/horizon.json", (*HORIZON_K8, "gear-distill")),
            ("bench/results/horizon/replication_seeds_16_to_31/horizon.json", (*HORIZON_K8, "gear-distill")),
            (
                "bench/results/horizon/replication_distill_0.5_seeds_32_to_47/horizon.json",
                (*HORIZON_K8, "gear-distill"),
            ),
        ),
    ),
    Comparison(
        "distillation blend 0.25, horizon K=8, seeds 0-7 and 32-47",
        (
            ("bench/results/horizon/horizon.json", (*HORIZON_K8, "gear-distill-0.25")),
            (
                "bench/results/horizon/replication_distill_0.25_seeds_32_to_47/horizon.json",
                (*HORIZON_K8, "gear-distill-0.25"),
            ),
        ),
    ),
)
"""The comparisons the plan is sized from: the paper's GEAR on each CPU task, and the options that gained."""


def seeds_needed(effect: float, sd: float, alpha: float = ALPHA, power: float = POWER) -> int | None:
    """The smallest number of seed pairs n >= 2 with t(1 - alpha/2, n-1) + t(power, n-1) <= |effect| sqrt(n) / sd;
    None for a zero effect or when more than `MAX_SEEDS` would be needed. Searched from the normal approximation
    upward (the t-quantiles only raise it)."""
    if sd <= 0:
        raise ValueError(f"the paired standard deviation must be > 0, got {sd}.")
    if effect == 0:
        return None
    normal = statistics.NormalDist()
    z = normal.inv_cdf(1 - alpha / 2) + normal.inv_cdf(power)
    n = max(2, math.ceil((z * sd / abs(effect)) ** 2))
    if n > MAX_SEEDS:
        return None

    def enough(k: int) -> bool:
        return _t(1 - alpha / 2, k - 1) + _t(power, k - 1) <= abs(effect) * math.sqrt(k) / sd

    while n > 2 and enough(n - 1):  # the normal start can overshoot by one at tiny n
        n -= 1
    while not enough(n):
        n += 1
        if n > MAX_SEEDS:
            return None
    return n


def cell_values(path: str, keys: tuple[str, ...], metric: str) -> list[float]:
    """The per-seed paired differences a study JSON holds for one arm and metric."""
    node = json.loads((REPO_ROOT / path).read_text())
    for key in (*keys, metric):
        node = node[key]
    return [float(v) for v in node["values"]]


def plan(comparisons=COMPARISONS) -> list[dict]:
    """One row per comparison and metric: inputs (n measured, effect, paired SD) and the seeds needed for the
    measured effect and for `TARGET_EFFECT`."""
    rows = []
    for comparison in comparisons:
        for metric, label in METRICS.items():
            values = [v for path, keys in comparison.sources for v in cell_values(path, keys, metric)]
            effect, sd = statistics.fmean(values), statistics.stdev(values)
            rows.append(
                {
                    "comparison": comparison.name,
                    "metric": label,
                    "sources": [path for path, _ in comparison.sources],
                    "n_measured": len(values),
                    "effect": effect,
                    "paired_sd": sd,
                    "seeds_for_effect": seeds_needed(effect, sd),
                    "seeds_for_target": seeds_needed(TARGET_EFFECT, sd),
                }
            )
    return rows


def markdown(rows: list[dict]) -> str:
    header = (
        "| comparison (arm - GRPO) | metric | seeds measured | effect d | paired SD s | seeds for d | "
        f"seeds for {TARGET_EFFECT} |"
    )
    lines = [
        header,
        "|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        for_effect = row["seeds_for_effect"]
        lines.append(
            f"| {row['comparison']} | {row['metric']} | {row['n_measured']} | {row['effect']:+.4f} | "
            f"{row['paired_sd']:.4f} | {for_effect if for_effect is not None else f'> {MAX_SEEDS}'} | "
            f"{row['seeds_for_target']} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", help="Also write the rows as JSON here.")
    parser.add_argument("--effect", type=float, help="With --sd: the seed pairs this effect needs, and nothing else.")
    parser.add_argument("--sd", type=float, help="The paired standard deviation of your own first seeds.")
    args = parser.parse_args(argv)
    if (args.effect is None) != (args.sd is None):
        parser.error("--effect and --sd go together.")
    if args.effect is not None:
        if args.sd <= 0:
            parser.error(f"--sd must be > 0, got {args.sd}.")
        n = seeds_needed(args.effect, args.sd)
        print(f"effect {args.effect:+g} at paired SD {args.sd:g}: {n if n else f'more than {MAX_SEEDS}'} seed pairs")
        return [{"effect": args.effect, "paired_sd": args.sd, "seeds": n}]
    rows = plan()
    print(
        f"Seed pairs for {POWER:.0%} power, paired two-sided t-test at alpha {ALPHA} (inputs: committed study JSONs)"
    )
    print(markdown(rows))
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2))
    return rows


if __name__ == "__main__":
    main()
